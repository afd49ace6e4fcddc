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
of retrieval on the other half with that of the raw pixels; then it retrieves items of classes
never seen in training.
"""

# %%
# Data: two halves of MNIST-10k, stratified by digit
# ---------------------------------------------------
import os

import matplotlib.pyplot as plt
import torch
from sklearn.model_selection import train_test_split

from skrank import SOPRCEmbedder
from skrank.datasets import load_mnist, make_composite_digits
from skrank.plotting import MeanPrecisionRecallDisplay, TrainingHistoryDisplay

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
torch.set_num_threads(1)  # a small MLP: one thread is faster than two on a busy 2-core CPU
X, y = load_mnist(return_X_y=True)
if quick:
    X, y = X[:1000], y[:1000]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)

# %%
# Training, with a validation score per epoch
# -------------------------------------------
# ``validation_fraction`` holds out part of the training half; its mean AUPRC is recorded in
# ``history_`` after every epoch, next to the training loss.
embedder = SOPRCEmbedder(
    max_epochs=2 if quick else 10, validation_fraction=0.1, random_state=0
).fit(X_train, y_train)

TrainingHistoryDisplay.from_estimator(
    embedder, name="SOPRC", validation_label="validation mean AUPRC"
)

# %%
# Mean precision-recall curves on the test half
# ---------------------------------------------
# Every test item is a query against all the other test items; its precision-recall curve is
# read at 101 recall levels (interpolated precision: the best precision at that recall or
# beyond) and averaged over all queries, exactly
# (:func:`skrank.metrics.mean_precision_recall_curve`). The legend gives the mean AUPRC.
display = MeanPrecisionRecallDisplay.from_estimator(
    embedder, X_test, y_test, name="SOPRC embedding"
)
MeanPrecisionRecallDisplay.from_predictions(
    y_test, X_test, metric="cosine", name="raw pixels", ax=display.ax_
)
display.ax_.set_title("Mean precision-recall curve, test half")
plt.show()

# %%
# Classes never seen in training
# ------------------------------
# Retrieval systems mostly serve classes absent from training (new products, new species).
# :func:`skrank.datasets.make_composite_digits` builds many such classes from MNIST: an item of
# class ``37`` shows a 3 and a 7 side by side, and class sizes are long-tailed. Its ``"train"``
# and ``"test"`` subsets share no class (nor any MNIST image): the embedding is trained on 50
# classes and retrieves items of 50 others.
n_items = 2_000 if quick else 6_000
composite = dict(n_samples=n_items, n_digits=2, n_classes=100, random_state=0)
X_seen, y_seen = make_composite_digits(**composite, subset="train", return_X_y=True)
X_unseen, y_unseen = make_composite_digits(**composite, subset="test", return_X_y=True)
disjoint = SOPRCEmbedder(
    hidden_layer_sizes=(512,),
    n_components=128,
    batch_size=200,
    max_epochs=2 if quick else 5,
    random_state=0,
).fit(X_seen, y_seen)
display = MeanPrecisionRecallDisplay.from_estimator(
    disjoint, X_unseen, y_unseen, name="SOPRC embedding"
)
MeanPrecisionRecallDisplay.from_predictions(
    y_unseen, X_unseen, metric="cosine", name="raw pixels", ax=display.ax_
)
display.ax_.set_title("Mean precision-recall curve, 50 unseen classes")
plt.show()
