"""
============================================================
Probabilities, label sets and the long tail of SNM on Bibtex
============================================================

:class:`skrank.SNMClassifier` ranks labels by a score; :meth:`~skrank.SNMClassifier.predict_proba`
turns the score into a probability by one strictly increasing map fitted on the validation rows
(so no ranking changes), and multilabel :meth:`~skrank.SNMClassifier.predict` returns each
row's labels of probability at least ``threshold_``, a threshold chosen on the same rows for
example-based F1. We fit the defaults on Bibtex (159 labels, its own train/test split) and check
three things on the test split: whether the probabilities of the best labels are calibrated (a
reliability diagram), whether the threshold's label sets beat a fixed number of labels a row, and
how recall falls on the labels with few training rows.
"""

# %%
# The model and its best labels' probabilities
# ---------------------------------------------
# ``predict_top_k(X, k, return_proba=True)`` gives the ``k`` best labels with their
# probabilities without building the dense ``n x K`` matrix. The (row, label) pairs of each
# row's best five labels are pooled: a calibrated model's pairs of probability near ``p`` are
# true labels at a rate near ``p``. scikit-learn's :class:`~sklearn.calibration.
# CalibrationDisplay` draws that rate against the mean probability of each bin, and
# :func:`skrank.metrics.expected_calibration_error` is the bins' mean gap, weighted by their
# pairs.
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.calibration import CalibrationDisplay
from sklearn.metrics import f1_score

from skrank import SNMClassifier
from skrank.datasets import load_bibtex
from skrank.metrics import expected_calibration_error

quick = os.environ.get("SKRANK_EXAMPLE_QUICK") == "1"
torch.set_num_threads(1)
train, test = load_bibtex(subset="train"), load_bibtex(subset="test")
Y_train, Y_test = train.target.tocsr(), test.target.toarray()
model = SNMClassifier(random_state=0)  # the defaults
if quick:
    model.set_params(max_epochs=3, tol=None)
model.fit(train.data, Y_train)

top, probabilities = model.predict_top_k(test.data, 5, return_proba=True)
hits = Y_test[np.arange(len(Y_test))[:, None], top] == 1
ece = expected_calibration_error(hits.ravel(), probabilities.ravel(), n_bins=15)
print(f"test P@1 {hits[:, 0].mean():.3f}, top-5 ECE {ece:.3f}")

fig, (ax_calibration, ax_sets, ax_tail) = plt.subplots(1, 3, figsize=(15, 4.5))
CalibrationDisplay.from_predictions(
    hits.ravel(), probabilities.ravel(), n_bins=15, name="SNMClassifier", ax=ax_calibration
)
ax_calibration.set(title=f"Top-5 (row, label) pairs, ECE {ece:.3f}")

# %%
# Label sets: a threshold against a fixed top-k
# ---------------------------------------------
# A Bibtex entry has 1 to 28 labels. A fixed top-k gives every row ``k`` of them; ``predict``
# gives each row its labels of probability at least ``threshold_`` (at least one) among its
# ``n_set_candidates_`` best. The curve is the test F1 of each threshold; the dashed line is
# ``threshold_``, chosen on the validation rows, the test split unread.
candidates, candidate_probabilities = model.predict_top_k(
    test.data, model.n_set_candidates_, return_proba=True
)
thresholds = np.linspace(0.05, 0.95, 19)


def f1_of_sets(chosen):
    chosen = np.broadcast_to(chosen, candidates.shape)
    predicted = np.zeros(Y_test.shape, dtype=bool)
    rows = np.nonzero(chosen)[0]
    predicted[rows, candidates[chosen]] = True
    return f1_score(Y_test, predicted, average="samples")


f1_thresholds = [
    f1_of_sets((candidate_probabilities >= t) | (np.arange(candidates.shape[1]) == 0))
    for t in thresholds
]
f1_top = {k: f1_of_sets(np.arange(candidates.shape[1]) < k) for k in (1, 2, 3, 5)}
f1_predict = f1_score(Y_test, model.predict(test.data), average="samples")
print(f"predict: threshold_ {model.threshold_:.2f}, test F1 {f1_predict:.3f}")
print("fixed top-k:", ", ".join(f"k={k} F1 {value:.3f}" for k, value in f1_top.items()))
ax_sets.plot(thresholds, f1_thresholds, marker=".", label="labels of probability >= t")
for k, value in f1_top.items():
    ax_sets.axhline(value, color="grey", lw=0.8)
    ax_sets.annotate(f"top-{k}", (0.96, value), fontsize=8, va="bottom", ha="right")
ax_sets.axvline(model.threshold_, ls="--", color="k", label="threshold_ (validation)")
ax_sets.set(xlabel="threshold t", ylabel="test example-based F1", title="Label sets")
ax_sets.legend(loc="lower left")

# %%
# The long tail
# -------------
# The recall of the best five labels among the test (row, label) pairs, by the label's number
# of training rows. Labels seen a few times are the hard part of extreme classification: their
# embeddings are learned from few rows, and propensity-scored metrics (PSP@k) weigh them up.
# Bibtex's rarest label has 28 training rows; on data whose labels mostly have one row (the
# benchmark's debian-suggests) the first bar is where the misses are.
label_rows = np.asarray(Y_train.sum(axis=0)).ravel()
found = np.zeros(Y_test.shape, dtype=bool)
found[np.arange(len(Y_test))[:, None], top] = True
true_rows, true_labels = Y_test.nonzero()
edges = [0, 40, 60, 100, 200, label_rows.max()]
names = [f"{low + 1}-{high}" for low, high in zip(edges[:-2], edges[1:-1], strict=True)]
names.append(f">{edges[-2]}")
bucket = np.searchsorted(edges, label_rows[true_labels], side="left") - 1
recalls = [found[true_rows, true_labels][bucket == b].mean() for b in range(len(names))]
counts = np.bincount(bucket, minlength=len(names))
ax_tail.bar(names, recalls)
for i, count in enumerate(counts):
    ax_tail.annotate(f"{count} pairs", (i, recalls[i]), ha="center", va="bottom", fontsize=8)
ax_tail.set(
    xlabel="training rows of the label", ylabel="test recall of the top 5", title="Long tail"
)
fig.tight_layout()
