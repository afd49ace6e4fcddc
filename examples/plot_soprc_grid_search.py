"""
=========================================================
SOPRCEmbedder in a grid search: tuning for retrieval mAP
=========================================================

:class:`~skrank.SOPRCEmbedder` trains a network whose embedding ranks, for every query, the
items of its class first by cosine similarity. Its size and learning rate are chosen here by
:class:`~sklearn.model_selection.GridSearchCV` on skrank's retrieval scorers, with the embedder
as the last step of a :class:`~sklearn.pipeline.Pipeline`. The scorers embed each validation
fold with ``transform`` and rank it by cosine similarity, the metric the embedder declares.
"""

# %%
# Data and pipeline
# -----------------
import os

import matplotlib.pyplot as plt
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank import SOPRCEmbedder
from skrank.metrics import get_scorer
from skrank.plotting import MeanPrecisionRecallDisplay, TrainingHistoryDisplay

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
torch.set_num_threads(1)  # the networks are small: one thread is the fastest on a shared CPU
X, y = load_digits(return_X_y=True)
if quick:
    X, y = X[:600], y[:600]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
embedder = SOPRCEmbedder(
    hidden_layer_sizes=(128,),
    batch_size=120,
    max_epochs=3 if quick else 10,
    validation_fraction=0.15,  # records the validation mean AUPRC of every epoch
    random_state=0,
)
pipeline = make_pipeline(StandardScaler(), embedder)
param_grid = {
    "soprcembedder__n_components": [16] if quick else [16, 64],
    "soprcembedder__learning_rate": [0.01, 0.05],
}

# %%
# Grid search on the mean AUPRC
# -----------------------------
search = GridSearchCV(
    pipeline,
    param_grid,
    scoring={"mean_auprc": get_scorer("mean_auprc"), "recall@1": get_scorer("hit_rate@1")},
    refit="mean_auprc",
    cv=StratifiedKFold(3, shuffle=True, random_state=0),
)
search.fit(X_train, y_train)
results = search.cv_results_
print("n_components  learning_rate  mean AUPRC  Recall@1")
for params, auprc, recall in zip(
    results["params"],
    results["mean_test_mean_auprc"],
    results["mean_test_recall@1"],
    strict=True,
):
    print(
        f"{params['soprcembedder__n_components']:>12}  "
        f"{params['soprcembedder__learning_rate']:>13}  {auprc:>10.3f}  {recall:>8.3f}"
    )
print("best:", search.best_params_)

# %%
# Training history of the refitted model
# --------------------------------------
# :class:`~skrank.plotting.TrainingHistoryDisplay` reads ``history_``: the SOPRC loss and the
# mean AUPRC of the held-out ``validation_fraction`` after every epoch.
best = search.best_estimator_
TrainingHistoryDisplay.from_estimator(
    best, name="best model", validation_label="validation mean AUPRC"
)

# %%
# Held-out retrieval against the standardised inputs
# --------------------------------------------------
# :class:`~skrank.plotting.MeanPrecisionRecallDisplay` draws the mean over test queries of their
# interpolated precision at each recall level. The embedder is ranked by cosine similarity (its
# natural metric); the baseline ranks the standardised pixels by cosine similarity too.
display = MeanPrecisionRecallDisplay.from_estimator(best, X_test, y_test, name="SOPRC embedding")
MeanPrecisionRecallDisplay.from_estimator(
    best[0], X_test, y_test, metric="cosine", name="standardised pixels", ax=display.ax_
)
display.ax_.set_title("Digits, held-out queries")
plt.show()
