"""
====================================================
MMC in a grid search: retrieval scorers and pitfalls
====================================================

:class:`~skrank.MMC` learns a Mahalanobis distance that pushes items of different classes
apart. Here it is the last step of a :class:`~sklearn.pipeline.Pipeline` (standardisation,
PCA, MMC) whose PCA dimension and metric shape (full or diagonal) are chosen by
:class:`~sklearn.model_selection.GridSearchCV` on skrank's retrieval scorers: the mean AUPRC of
ranking the items of a validation fold by their learned distance to each query, and the
Recall@1 of that ranking (the leave-one-out 1-NN accuracy). The scorers read MMC's natural
metric, the Euclidean distance of its embedding ``transform(X)``, from the estimator itself.
"""

# %%
# Data and pipeline
# -----------------
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank import MMC
from skrank.metrics import get_scorer, recall_at_k_score
from skrank.plotting import MeanPrecisionRecallDisplay, PairROCDisplay

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
X, y = load_digits(return_X_y=True)
if quick:
    X, y = X[:500], y[:500]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
pipeline = make_pipeline(StandardScaler(), PCA(random_state=0), MMC())
param_grid = {
    "pca__n_components": [10, 20] if quick else [10, 20, 30],
    "mmc__diagonal": [False, True],
}

# %%
# Grid search on the mean AUPRC
# -----------------------------
scoring = {"mean_auprc": get_scorer("mean_auprc"), "recall@1": get_scorer("recall@1")}
search = GridSearchCV(
    pipeline,
    param_grid,
    scoring=scoring,
    refit="mean_auprc",
    cv=StratifiedKFold(3, shuffle=True, random_state=0),
)
search.fit(X_train, y_train)
print("best parameters:", search.best_params_)
results = search.cv_results_
print("n_components  diagonal  mean AUPRC  Recall@1")
for params, auprc, recall in zip(
    results["params"],
    results["mean_test_mean_auprc"],
    results["mean_test_recall@1"],
    strict=True,
):
    print(
        f"{params['pca__n_components']:>12}  {params['mmc__diagonal']!s:>8}  "
        f"{auprc:>10.3f}  {recall:>8.3f}"
    )

# %%
# The diagonal metrics score the same whatever the PCA dimension: their optimum gives weight to
# a handful of principal components only (zero to all the others), so extra components change
# nothing. This is one face of MMC's low-rank optimum (see the pitfall below).
print("weights of the diagonal metric after PCA to 10 components:")
diagonal_model = make_pipeline(StandardScaler(), PCA(10, random_state=0), MMC(diagonal=True))
print(np.round(np.diag(diagonal_model.fit(X_train, y_train)[-1].get_mahalanobis_matrix()), 3))

# %%
# Held-out retrieval: MMC against the Euclidean distance after the same PCA
# -------------------------------------------------------------------------
# :class:`~skrank.plotting.MeanPrecisionRecallDisplay` draws the mean over queries of their
# interpolated precision at each recall level, with the mean AUPRC (mAP) in the legend. The
# baseline is the same pipeline without MMC.
best = search.best_estimator_
baseline = make_pipeline(StandardScaler(), PCA(best[1].n_components, random_state=0))
baseline.fit(X_train, y_train)
fig, (ax_pr, ax_roc) = plt.subplots(1, 2, figsize=(11, 4.5))
MeanPrecisionRecallDisplay.from_estimator(best, X_test, y_test, name="MMC", ax=ax_pr)
MeanPrecisionRecallDisplay.from_estimator(
    baseline, X_test, y_test, name="Euclidean (PCA)", ax=ax_pr
)
ax_pr.set_title("Held-out retrieval")

# %%
# The pair ROC curves on the same axes, with the TPR at 5% FPR marked
# (:class:`~skrank.plotting.PairROCDisplay`; MMC's pair score is minus the learned distance).
PairROCDisplay.from_estimator(best, X_test, y_test, target_fpr=0.05, name="MMC", ax=ax_roc)
PairROCDisplay.from_estimator(
    baseline, X_test, y_test, target_fpr=0.05, name="Euclidean (PCA)", ax=ax_roc
)
ax_roc.set_title("Held-out pairs")
fig.tight_layout()

# %%
# A pitfall: MMC is not a nearest-neighbour metric
# ------------------------------------------------
# MMC maximises the *mean* distance between classes under a bound on the mean within-class
# distance. Its optimum often has a very low rank (a few directions along which the class
# means spread out), which can leave neighbourhoods less pure than the Euclidean ones: compare
# the Recall@1 (1-NN accuracy) of both on held-out items, and the rank of the learned metric.
for name, model in (("MMC", best), ("Euclidean (PCA)", baseline)):
    print(
        f"{name:>16}: held-out Recall@1 = {recall_at_k_score(model.transform(X_test), y_test):.3f}"
    )
eigenvalues = np.linalg.eigvalsh(best[-1].get_mahalanobis_matrix())[::-1]
print("largest eigenvalues of the learned matrix A:", np.round(eigenvalues[:6], 4))
plt.show()
