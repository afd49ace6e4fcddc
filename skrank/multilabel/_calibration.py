"""SNMClassifier's probabilities: one global, strictly increasing map of the prediction score,
``p = sigmoid(z(s))`` with ``z`` piecewise linear in the score (knots at quantiles of the
scores, every slope positive), fitted by logistic loss on the validation rows' (row, label)
pairs, and the label sets of a probability threshold chosen on the same rows.

A sigmoid of a linear ``z`` is too stiff: the logit of the hit rate is not linear in the
score, and the many low-scored pairs, nearly all negatives, set its slope and make the best
labels' probabilities too high. Multiclass rows are the softmax of a linear ``z(s) = t s + c``,
summing to 1 (two classes: ``p_1 = sigmoid(t (s_1 - s_0))`` follows the decision function). The
map is the same for every label and every row, so that no ranking changes: the top-k labels,
P@k and every score-based metric stay as they are. Built from arrays: the candidates' scores
and whether each candidate is a true label.
"""

from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

# Candidates of a row's label set: its top labels up to the largest label count of a training
# row, at most this many, so that the approximate search keeps its cost.
MAX_SET_CANDIDATES = 100
# The thresholds threshold="auto" compares on the validation rows.
THRESHOLDS = np.round(np.arange(0.02, 0.99, 0.01), 2)
# The knots of z inside the range of the scores, at equally spaced quantiles of the pairs.
N_INNER_KNOTS = 6
# The smallest slope of z kept: a strictly increasing map even where the scores say nothing.
MIN_SLOPE = 1e-6
# The inverse strength of the ridge on the slopes (in logits per standard deviation of the
# scores), as scikit-learn's LogisticRegression C: separable pairs keep finite logits.
RIDGE_C = 1e4


class Calibration(NamedTuple):
    """The map ``p = sigmoid(z(score))`` of a fitted model: ``z`` takes the values ``logits`` at
    the increasing scores ``knots``, is linear between them and rises by ``MIN_SLOPE`` beyond
    them (no pair was seen there: the probabilities stay near the ends' and never reach 0 or
    1 by an extended slope)."""

    knots: np.ndarray
    logits: np.ndarray

    def logit(self, scores):
        """``z(scores)`` (an array of any shape), float64."""
        scores = np.asarray(scores, np.float64)
        knots, logits = np.asarray(self.knots, np.float64), np.asarray(self.logits, np.float64)
        slopes = np.diff(logits) / np.diff(knots)
        inside = np.clip(scores, knots[0], knots[-1])
        segment = np.clip(np.searchsorted(knots, inside, side="right") - 1, 0, len(slopes) - 1)
        beyond = MIN_SLOPE * (scores - inside)
        return logits[segment] + slopes[segment] * (inside - knots[segment]) + beyond

    def probabilities(self, scores, untrained=None):
        """The probabilities of ``scores`` (an ndarray); 0 where ``untrained`` (a mask, or
        None) marks labels without a training row."""
        probabilities = expit(self.logit(scores))
        if untrained is not None:
            probabilities[untrained] = 0.0
        return probabilities.astype(np.float32)

    def exponentials(self, scores, maxima, untrained=None):
        """``exp(z(scores) - z(maxima))`` (``maxima``: one a row, at least each row's scores),
        0 where ``untrained``: a multiclass row's probabilities once divided by their sum."""
        maxima = self.logit(np.asarray(maxima, np.float64))[:, None]
        exponentials = np.exp(self.logit(scores) - maxima)
        if untrained is not None:
            exponentials[untrained] = 0.0
        return exponentials


# The knots of a linear map, beyond any score of a scaled cosine and its blend.
LINEAR_RANGE = 1e6


def linear_calibration(temperature, bias):
    """The :class:`Calibration` of ``sigmoid(temperature * score + bias)`` (on scores within
    ``LINEAR_RANGE``)."""
    knots = np.array([-LINEAR_RANGE, LINEAR_RANGE])
    return Calibration(knots, temperature * knots + bias)


def fit_calibration(scores, hits, n_inner_knots=N_INNER_KNOTS):
    """The :class:`Calibration` of (row, label) pairs by logistic loss.

    ``z`` is ``z_0`` at the lowest score plus, along each segment between knots (the lowest
    and highest scores and ``n_inner_knots`` quantiles between), its slope times the length
    run; the loss is convex in ``z_0`` and the slopes, each kept at least ``MIN_SLOPE``, with
    a ridge ``sum((slope * std(scores)) ** 2) / (2 RIDGE_C)``.

    Parameters
    ----------
    scores : ndarray of shape (n_rows, n_candidates)
        The prediction scores of each row's candidate labels.
    hits : ndarray of bool of the same shape
        Whether each candidate is a true label of its row.
    n_inner_knots : int, default=N_INNER_KNOTS
        Knots inside the range of the scores (fewer where quantiles coincide).

    Returns
    -------
    calibration : Calibration
        With pairs of one kind only, or of one score, the slope ``MIN_SLOPE`` and the logit of
        the pairs' rate (clipped to [1e-3, 1-1e-3]).
    """
    scores, hits = np.asarray(scores, np.float64).ravel(), np.asarray(hits, bool).ravel()
    knots = (
        np.unique(np.quantile(scores, np.linspace(0, 1, n_inner_knots + 2))) if scores.size else []
    )
    if hits.all() or not hits.any() or len(knots) < 2:
        rate = np.clip(hits.mean() if hits.size else 0.5, 1e-3, 1 - 1e-3)
        return linear_calibration(MIN_SLOPE, float(np.log(rate / (1 - rate))))
    # how far each score runs along each segment: z's columns in the segments' slopes
    lengths = np.clip(scores[:, None], knots[:-1], knots[1:]) - knots[:-1]
    targets = hits.astype(np.float64)
    ridge = scores.var() / (RIDGE_C * len(scores))

    def loss(parameters):
        slopes = parameters[1:]
        z = parameters[0] + lengths @ slopes
        gradient = (expit(z) - targets) / len(z)
        value = np.mean(np.logaddexp(0.0, z) - targets * z) + ridge * (slopes @ slopes) / 2
        return value, np.concatenate([[gradient.sum()], lengths.T @ gradient + ridge * slopes])

    rate = targets.mean()
    start = np.concatenate([[np.log(rate / (1 - rate))], np.full(len(knots) - 1, MIN_SLOPE)])
    bounds = [(None, None)] + [(MIN_SLOPE, None)] * (len(knots) - 1)
    fitted = minimize(loss, start, jac=True, method="L-BFGS-B", bounds=bounds).x
    logits = fitted[0] + np.concatenate([[0.0], np.cumsum(fitted[1:] * np.diff(knots))])
    return Calibration(knots, logits)


def fit_linear_calibration(scores, hits):
    """The :class:`Calibration` of ``sigmoid(t s + c)``, fitted as :func:`fit_calibration`
    without inner knots and linear over every score: the map of multiclass rows, whose
    softmax ``exp(t s)`` follows the decision function (two classes: ``p_1 = sigmoid(t (s_1 -
    s_0))``)."""
    fitted = fit_calibration(scores, hits, n_inner_knots=0)
    slope = float(np.diff(fitted.logits)[0] / np.diff(fitted.knots)[0])
    return linear_calibration(slope, float(fitted.logits[0] - slope * fitted.knots[0]))


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
