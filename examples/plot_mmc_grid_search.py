"""
===========================================================
MMC in a grid search: a metric for the neighbours you count
===========================================================

:class:`~skrank.MMC` learns a Mahalanobis distance that pushes items of different classes
apart. The paper's criterion maximises the *mean* distance between classes, and its optimum
has a very low rank: a few directions along which the class means spread out, which can leave
neighbourhoods less pure than the Euclidean ones. Two options keep the exact solver and pull the
metric toward the Euclidean one: a trace penalty (``scatter_ridge``) and a rank control
(``min_rank``, the smallest rank of the learned metric, as a fraction of the features).

Here they are chosen by the measure a k-NN user reads: the accuracy of a
:class:`~sklearn.neighbors.KNeighborsClassifier` after MMC in a
:class:`~sklearn.pipeline.Pipeline`, on validation folds of
:class:`~sklearn.model_selection.GridSearchCV`:

- ``"passthrough"`` in the grid makes "no metric learning" (the Euclidean metric) a candidate;
  the grid holds the defaults and settings close to the Euclidean metric (large ridges,
  ``min_rank="full"``);
- 5 stratified folds repeated 3 times average out the partition of a small training set;
- the grid also holds MMC on *local pairs* (``positives="nearest", negatives="nearest"``):
  Xing et al.'s criterion with each item's 10 nearest same-class items as the similar pairs and
  its 10 nearest items of other classes as the dissimilar pairs, as LMNN's target neighbours
  and impostors, so the metric keeps neighbourhoods together instead of whole classes;
- :func:`~skrank.similarity.one_standard_error_rule` refits the Euclidean metric unless the
  best candidate beats it by more than one standard error of its mean validation score.
"""

# %%
# Data and pipeline
# -----------------
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV, RepeatedStratifiedKFold, train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skrank import MMC
from skrank.metrics import get_scorer
from skrank.similarity import one_standard_error_rule

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
X, y = load_digits(return_X_y=True)
if quick:
    X, y = X[:600], y[:600]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
sampled = dict(negatives="tuples", n_samples=1000, random_state=0)  # fast, see the user guide


def pipeline(mmc):
    return Pipeline(
        [
            ("scale", StandardScaler()),
            ("pca", PCA(20, random_state=0)),
            ("mmc", mmc),
            ("knn", KNeighborsClassifier(n_neighbors=5)),
        ]
    )


ridges = [1.0, 10.0] if quick else [1.0, 10.0, 100.0]
min_ranks = [0.25, 0.5, 0.75, "full"]
local = {"mmc__positives": ["nearest"], "mmc__negatives": ["nearest"], "mmc__n_neighbors": [10]}
param_grid = [
    {"mmc": ["passthrough"]},
    {"mmc__scatter_ridge": ridges, "mmc__min_rank": min_ranks},
    {**local, "mmc__scatter_ridge": [1.0], "mmc__min_rank": [0.25, 0.5]},
]

# %%
# Grid search on the 5-NN accuracy
# --------------------------------
# ``skrank.metrics.get_scorer`` hands names it does not define (here "accuracy") to
# scikit-learn's. The error bars are one standard error of each mean validation score; the
# chosen candidate is the best unless the Euclidean metric (dashed line) lies within one
# standard error of it.
n_repeats = 1 if quick else 3
search = GridSearchCV(
    pipeline(MMC(**sampled)),
    param_grid,
    scoring=get_scorer("accuracy"),
    cv=RepeatedStratifiedKFold(n_splits=5, n_repeats=n_repeats, random_state=0),
    refit=one_standard_error_rule({"mmc": "passthrough"}),
)
search.fit(X_train, y_train)
results = search.cv_results_
best = int(np.argmax(results["mean_test_score"]))
print("best validation score:", results["params"][best])
print("chosen by the one-standard-error rule:", search.best_params_)
standard_errors = results["std_test_score"] / np.sqrt(5 * n_repeats - 1)  # std is ddof=0
euclidean_cv = results["mean_test_score"][0]
fig, (ax_cv, ax_rank) = plt.subplots(1, 2, figsize=(11, 4))
for ridge, positives in [*((r, None) for r in ridges), (1.0, "nearest")]:
    rows = [
        i
        for i, params in enumerate(results["params"])
        if params.get("mmc__scatter_ridge") == ridge and params.get("mmc__positives") == positives
    ]
    fractions = [results["params"][i]["mmc__min_rank"] for i in rows]
    ax_cv.errorbar(
        [1.0 if fraction == "full" else fraction for fraction in fractions],
        results["mean_test_score"][rows],
        yerr=standard_errors[rows],
        marker="o" if positives is None else "s",
        capsize=3,
        label=f"scatter_ridge={ridge:g}" + (", local pairs (10)" if positives else ""),
    )
ax_cv.axhline(euclidean_cv, color="k", linestyle="--", label="Euclidean (passthrough)")
ax_cv.set(xlabel="min_rank (fraction of the features; 1: full)",
          ylabel="cross-validated 5-NN accuracy")  # fmt: skip
ax_cv.legend()

# %%
# Held-out accuracy: the selected pipeline, the defaults, the paper's criterion, Euclidean
# -----------------------------------------------------------------------------------------
paper = pipeline(MMC(scatter_ridge=1e-8, min_rank=None, **sampled)).fit(X_train, y_train)
default = pipeline(MMC(**sampled)).fit(X_train, y_train)
euclidean = pipeline("passthrough").fit(X_train, y_train)
for name, model in (
    ("selected", search.best_estimator_),
    ("defaults", default),
    ("paper's criterion", paper),
    ("Euclidean", euclidean),
):
    print(f"{name:>18}: held-out 5-NN accuracy {model.score(X_test, y_test):.3f}")

# %%
# Why the paper's criterion loses: the spectrum of the learned matrix
# -------------------------------------------------------------------
# The paper's optimum puts nearly all its weight on three directions; the rank control spreads
# it over at least half of them.
for name, model in (("paper's criterion", paper), ("defaults", default)):
    eigenvalues = np.linalg.eigvalsh(model["mmc"].get_mahalanobis_matrix())[::-1]
    ax_rank.semilogy(
        np.arange(1, 21), np.maximum(eigenvalues / eigenvalues[0], 1e-8), "o-", label=name
    )
ax_rank.set(xlabel="eigenvalue rank", ylabel="eigenvalue / largest", ylim=(1e-8, 2))
ax_rank.legend()
fig.tight_layout()
plt.show()
