"""
==========================================================
Retrieval with an embedding trained for AUPRC (SOPRC)
==========================================================

:class:`skrank.SOPRCEmbedder` learns an embedding of the inputs in which, for every item used
as a query, the items of its class come first when all items are ranked by cosine similarity.
It does so by minimising the SOPRC estimator of ``1 - AUPRC`` (Wen et al., NeurIPS 2022), an
estimator whose expectation does not depend on how many positives a mini-batch happens to hold.

This example trains it on half of the MNIST digits shipped with skrank, follows the training
loss and the validation mean AUPRC epoch by epoch, and compares the mean precision-recall curve
of retrieval on the other half with that of the raw pixels.
"""

# %%
# Data: two halves of MNIST-10k, stratified by digit
# ---------------------------------------------------
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import precision_recall_curve
from sklearn.model_selection import train_test_split

from skrank import SOPRCEmbedder
from skrank.datasets import load_mnist
from skrank.metrics import mean_auprc_score

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
X, y = load_mnist(return_X_y=True)
if quick:
    X, y = X[:1000], y[:1000]
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.5, stratify=y, random_state=0
)

# %%
# Training, with a validation score per epoch
# -------------------------------------------
# ``validation_fraction`` holds out part of the training half; its mean AUPRC is recorded in
# ``history_`` after every epoch, next to the training loss.
embedder = SOPRCEmbedder(
    max_epochs=2 if quick else 10, validation_fraction=0.1, random_state=0
).fit(X_train, y_train)

epochs = [record["epoch"] for record in embedder.history_]
fig, (ax_loss, ax_score) = plt.subplots(1, 2, figsize=(9, 3.5))
ax_loss.plot(epochs, [record["loss"] for record in embedder.history_], marker="o")
ax_loss.set(xlabel="epoch", ylabel="training loss", title="SOPRC loss")
ax_score.plot(epochs, [record["validation_score"] for record in embedder.history_], marker="o")
ax_score.set(xlabel="epoch", ylabel="mean AUPRC", title="Validation mean AUPRC")
fig.tight_layout()

# %%
# Mean precision-recall curves on the test half
# ---------------------------------------------
# Every test item is a query against all the other test items; its precision-recall curve is
# read on a common grid of recall levels (interpolated precision: the best precision at that
# recall or beyond) and averaged over the queries.


def mean_precision_recall(embedding, labels, recall_grid, n_queries=200, seed=0):
    embedding = embedding / np.linalg.norm(embedding, axis=1, keepdims=True)
    queries = np.random.RandomState(seed).choice(labels.shape[0], n_queries, replace=False)
    curves = []
    for q in queries:
        others = np.arange(labels.shape[0]) != q
        precision, recall, _ = precision_recall_curve(
            labels[others] == labels[q], embedding[others] @ embedding[q]
        )
        best = np.maximum.accumulate(precision[::-1])[::-1]  # non-increasing in recall
        curves.append(np.interp(recall_grid, recall[::-1], best[::-1]))
    return np.mean(curves, axis=0)


recall_grid = np.linspace(0, 1, 101)
embedding = embedder.transform(X_test)
fig, ax = plt.subplots(figsize=(5, 4))
for name, features in [("raw pixels", X_test), ("SOPRC embedding", embedding)]:
    score = mean_auprc_score(features, y_test, metric="cosine")
    curve = mean_precision_recall(features, y_test, recall_grid)
    ax.plot(recall_grid, curve, label=f"{name} (mean AUPRC {score:.3f})")
ax.set(xlabel="recall", ylabel="precision", title="Mean precision-recall curve, test half")
ax.legend(loc="lower left")
fig.tight_layout()
