"""SNMClassifier's probabilities: one global, strictly increasing map of the prediction score,
``p = sigmoid(t s + c)`` with ``t > 0``, fitted by logistic loss on the validation rows'
(row, label) pairs, and the label sets of a probability threshold chosen on the same rows.

Multiclass rows are the softmax of ``t s``, summing to 1. The map is the same for every
label and every row, so that no ranking changes: the top-k
labels, P@k and every score-based metric stay as they are. Built from arrays: the candidates'
scores and whether each candidate is a true label.
"""

from typing import NamedTuple

import numpy as np
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

# Candidates of a row's label set: its top labels up to the largest label count of a training
# row, at most this many, so that the approximate search keeps its cost.
MAX_SET_CANDIDATES = 100
# The thresholds threshold="auto" compares on the validation rows.
THRESHOLDS = np.round(np.arange(0.02, 0.99, 0.01), 2)
# The smallest temperature kept: a strictly increasing map even where the scores say nothing.
MIN_TEMPERATURE = 1e-6


class Calibration(NamedTuple):
    """The map ``p = sigmoid(temperature * score + bias)`` of a fitted model."""

    temperature: float
    bias: float

    def probabilities(self, scores, untrained=None):
        """The probabilities of ``scores`` (an ndarray); 0 where ``untrained`` (a mask, or
        None) marks labels without a training row."""
        probabilities = expit(self.temperature * np.asarray(scores, np.float64) + self.bias)
        if untrained is not None:
            probabilities[untrained] = 0.0
        return probabilities.astype(np.float32)

    def exponentials(self, scores, maxima, untrained=None):
        """``exp(temperature * (scores - maxima))`` (``maxima``: one a row, at least each
        row's scores), 0 where ``untrained``: a multiclass row's probabilities once divided by
        their sum, a softmax whose two-class column ``p_1 = sigmoid(t (s_1 - s_0))`` follows
        the decision function."""
        scores = np.asarray(scores, np.float64) - np.asarray(maxima, np.float64)[:, None]
        exponentials = np.exp(self.temperature * scores)
        if untrained is not None:
            exponentials[untrained] = 0.0
        return exponentials


def fit_calibration(scores, hits):
    """The :class:`Calibration` of (row, label) pairs by logistic loss.

    Parameters
    ----------
    scores : ndarray of shape (n_rows, n_candidates)
        The prediction scores of each row's candidate labels.
    hits : ndarray of bool of the same shape
        Whether each candidate is a true label of its row.

    Returns
    -------
    calibration : Calibration
        A temperature of at least ``MIN_TEMPERATURE``; with pairs of one kind only, the
        temperature ``MIN_TEMPERATURE`` and the bias of their rate (clipped to [1e-3, 1-1e-3]).
    """
    scores, hits = np.asarray(scores, np.float64).ravel(), np.asarray(hits, bool).ravel()
    if hits.all() or not hits.any():
        rate = np.clip(hits.mean() if hits.size else 0.5, 1e-3, 1 - 1e-3)
        return Calibration(MIN_TEMPERATURE, float(np.log(rate / (1 - rate))))
    center, spread = scores.mean(), scores.std() or 1.0
    model = LogisticRegression(C=1e4).fit(((scores - center) / spread)[:, None], hits)
    temperature = max(float(model.coef_[0, 0]) / spread, MIN_TEMPERATURE)
    bias = float(model.intercept_[0]) - temperature * center
    return Calibration(temperature, bias)


def set_candidates(positives, n_labels):
    """The number of candidates of a label set: the largest label count of a training row of
    ``positives`` (a CSR indicator), at most ``MAX_SET_CANDIDATES`` and ``n_labels``."""
    return int(min(max(1, np.diff(positives.indptr).max()), MAX_SET_CANDIDATES, n_labels))


def label_sets(probabilities, threshold):
    """Which of each row's candidates (columns of ``probabilities``, best first) its label set
    holds: those of probability at least ``threshold``, and the first in any case."""
    chosen = probabilities >= threshold
    chosen[:, 0] = True
    return chosen


def sample_f1(chosen, hits, n_true):
    """Mean example-based F1 of label sets (``chosen`` among candidates whose ``hits`` say
    which are true labels) against rows of ``n_true`` true labels."""
    true_positives = (chosen & hits).sum(axis=1)
    return float(np.mean(2 * true_positives / (chosen.sum(axis=1) + n_true)))


def choose_threshold(probabilities, hits, n_true, thresholds=THRESHOLDS):
    """The threshold of ``thresholds`` whose label sets have the best example-based F1 on the
    rows (the smallest among ties)."""
    scores = [sample_f1(label_sets(probabilities, t), hits, n_true) for t in thresholds]
    return float(thresholds[int(np.argmax(scores))])
