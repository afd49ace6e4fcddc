"""
=====================================================================
SNMClassifier in a grid search: mining against sampling on Recall@k
=====================================================================

:class:`~skrank.SNMClassifier` ranks labels for an input. Which weighting of the sampled
negative labels works best, and with how many of them, is a model-selection question: here
:class:`~sklearn.model_selection.GridSearchCV` compares top-1 Stochastic Negative Mining with
plain negative sampling, for two sample sizes, on the Bibtex multilabel data shipped with skrank
(159 labels). The classifier is the last step of a :class:`~sklearn.pipeline.Pipeline` (TF-IDF
weighting of the bag-of-words features), and the scorers are skrank's ``"label_recall@5"``
(Recall@5: the share of each example's true labels among its 5 best) and ``"precision@1"``:
they call the classifier's ``predict_top_k``, which never builds the ``n_samples x n_labels``
score matrix.
"""

# %%
# Data and pipeline
# -----------------
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.base import clone
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline

from skrank import SNMClassifier
from skrank.datasets import load_bibtex
from skrank.metrics import get_scorer
from skrank.plotting import TrainingHistoryDisplay

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
torch.set_num_threads(1)  # the networks are small: one thread is the fastest on a shared CPU
train, test = load_bibtex(subset="train"), load_bibtex(subset="test")
X_train, y_train = train.data, train.target
if quick:
    X_train, y_train = X_train[:1500], y_train[:1500]
classifier = SNMClassifier(
    top_k_negatives=1,  # "topk" below is top-1 SNM
    embedding_dim=64,  # a linear encoder (the default): a hidden layer memorises sparse data
    input_normalization=None,  # the pipeline's TfidfTransformer weighs the features
    max_epochs=3 if quick else 8,
    tol=None,  # a fixed budget of epochs for every candidate: no early stopping
    score_k=5,
    validation_fraction=0.1,  # records the validation Precision@5 of every epoch
    random_state=0,
)
pipeline = make_pipeline(TfidfTransformer(), classifier)
param_grid = {
    "snmclassifier__negative_weights": ["topk", "uniform"],
    "snmclassifier__n_negatives": [16] if quick else [16, 64],
}

# %%
# Grid search on Recall@5
# -----------------------
# The targets are a sparse label-indicator matrix, so the folds are plain (not stratified).
scoring = {"recall@5": get_scorer("label_recall@5"), "precision@1": get_scorer("precision@1")}
search = GridSearchCV(
    pipeline,
    param_grid,
    scoring=scoring,
    refit="recall@5",
    cv=KFold(3, shuffle=True, random_state=0),
)
search.fit(X_train, y_train)
results = search.cv_results_
print("weights   n_negatives  Recall@5  Precision@1")
for params, recall, precision in zip(
    results["params"],
    results["mean_test_recall@5"],
    results["mean_test_precision@1"],
    strict=True,
):
    print(
        f"{params['snmclassifier__negative_weights']:<8}  "
        f"{params['snmclassifier__n_negatives']:>11}  {recall:>8.3f}  {precision:>11.3f}"
    )
print("best:", search.best_params_)

# %%
# The chosen model on the test split
# ----------------------------------
best = search.best_estimator_
for name, scorer in scoring.items():
    print(f"test {name}: {scorer(best, test.data, test.target):.3f}")

# %%
# Training histories of both weightings
# -------------------------------------
# Refit each weighting with the chosen number of negatives and draw the training loss and the
# validation Precision@5 (what early stopping monitors) per epoch on the same panels
# (:class:`~skrank.plotting.TrainingHistoryDisplay`).
axes = None
for weights in ("topk", "uniform"):
    model = clone(best).set_params(snmclassifier__negative_weights=weights)
    model.fit(X_train, y_train)
    display = TrainingHistoryDisplay.from_estimator(
        model, name=weights, ax=axes, validation_label="validation Precision@5"
    )
    axes = display.axes_
display.figure_.tight_layout()

# %%
# The five best labels of a test document, with their scores:
labels, scores = best[-1].predict_top_k(best[0].transform(test.data[:1]), 5, return_scores=True)
true_labels = np.flatnonzero(test.target[0].toarray())
print("predicted:", labels[0], np.round(scores[0], 3), "true:", true_labels)
plt.show()
