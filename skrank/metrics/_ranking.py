"""Binary ranking metrics: step-wise AUPRC and the TPR at a given FPR on the ROC curve."""

import numpy as np
from sklearn.utils.validation import check_array

from ..utils._labels import encode_labels
from ..utils._validation import naming_inputs
from ._validation import check_fpr, check_same_length, check_scores, positive_mask


def _counts_at_thresholds(is_positive, y_score):
    """True and false positives retrieved at each distinct score, scanned from the top.

    Returns ``(tp, fp)``: for the j-th largest distinct score ``t_j``, the number of positives
    and negatives with a score ``>= t_j`` (a tie group is retrieved whole).
    """
    order = np.argsort(y_score, kind="stable")[::-1]
    sorted_scores = y_score[order]
    group_ends = np.flatnonzero(np.r_[sorted_scores[1:] != sorted_scores[:-1], True])
    tp = np.cumsum(is_positive[order])[group_ends]
    fp = group_ends + 1 - tp
    return tp, fp


def _binary_inputs(y_true, y_score, pos_label):
    check_same_length((y_true, y_score), ("y_true", "y_score"))
    y_score = check_scores(y_score)
    is_positive = positive_mask(y_true, pos_label=pos_label)
    if not is_positive.any():
        raise ValueError(
            f"y_true has no positive sample (pos_label={pos_label!r}); the metric is undefined."
        )
    return is_positive, y_score


def auprc_score(y_true, y_score, *, pos_label=None):
    """Area under the precision-recall curve in the step-wise form (average precision).

    The mean over the positives of the precision at that positive's score,
    ``AUPRC = (1/n+) sum_{i positive} #{j positive: s_j >= s_i} / #{j: s_j >= s_i}``,
    eq. (2) of the SOPRC paper. Tied scores count fully: at a threshold, every item scored
    ``>=`` it is retrieved, so the result does not depend on the order of tied items. Without
    ties this equals :func:`sklearn.metrics.average_precision_score`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels.
    y_score : array-like of shape (n_samples,)
        Scores, higher means more likely positive. Must be finite.
    pos_label : int, float, bool or str, default=None
        The positive label; when None, labels must be in {0, 1} or {-1, 1} and 1 is positive.

    Returns
    -------
    auprc : float
        In (0, 1]; 1.0 when every sample is positive.

    Raises
    ------
    ValueError
        If ``y_true`` has no positive (the metric is undefined), has more than two values,
        or the inputs are empty, of different lengths or not finite.

    Examples
    --------
    >>> from skrank.metrics import auprc_score
    >>> round(auprc_score([0, 1, 1, 0], [0.1, 0.8, 0.4, 0.5]), 4)
    0.8333
    >>> auprc_score([1, 0], [0.5, 0.5])  # a tie: both items are retrieved together
    0.5
    """
    is_positive, y_score = _binary_inputs(y_true, y_score, pos_label)
    tp, fp = _counts_at_thresholds(is_positive, y_score)
    positives_in_group = np.diff(tp, prepend=0)
    return float(np.sum(positives_in_group * tp / (tp + fp)) / tp[-1])


def pointwise_roc_score(y_true, y_score, fpr, *, pos_label=None):
    """True-positive rate at a given false-positive rate, on the interpolated ROC curve.

    The ROC curve runs through ``(0, 0)`` and the points ``(FPR(t), TPR(t))`` for each distinct
    score ``t`` (items scored ``>= t`` are called positive). Consecutive points are joined by
    straight segments, so a group of tied scores with both classes is a diagonal segment.
    Where the curve rises vertically (positives only at one score, so FPR repeats), the value
    at that FPR is the largest TPR reached there. The points are those of
    ``sklearn.metrics.roc_curve(drop_intermediate=False)``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels (for pairs: 1 = same class).
    y_score : array-like of shape (n_samples,)
        Scores, higher means more likely positive. Must be finite.
    fpr : float or array-like of float
        False-positive rate(s) in the open interval (0, 1).
    pos_label : int, float, bool or str, default=None
        The positive label; when None, labels must be in {0, 1} or {-1, 1} and 1 is positive.

    Returns
    -------
    tpr : float or ndarray of shape (n_fpr,)
        A float for a scalar ``fpr``, else one value per entry of ``fpr``.

    Raises
    ------
    ValueError
        If ``y_true`` lacks positives or negatives, ``fpr`` is outside (0, 1), or the
        inputs are empty, of different lengths or not finite.

    Examples
    --------
    >>> from skrank.metrics import pointwise_roc_score
    >>> pointwise_roc_score([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1], fpr=0.25)  # a step
    0.5
    >>> pointwise_roc_score([1, 0, 1, 0], [0.9, 0.5, 0.5, 0.1], fpr=0.25)  # a tie: a diagonal
    0.75
    """
    fpr_array = check_fpr(fpr)
    is_positive, y_score = _binary_inputs(y_true, y_score, pos_label)
    if is_positive.all():
        raise ValueError("y_true has no negative sample; the false-positive rate is undefined.")
    tp, fp = _counts_at_thresholds(is_positive, y_score)
    # ROC points (0, 0) then one per distinct score. Where FPR repeats the curve rises
    # vertically: it arrives at an FPR value with the run's first TPR and leaves with its last.
    curve_fp, curve_tp = np.r_[0, fp], np.r_[0, tp]
    fp_values, first = np.unique(curve_fp, return_index=True)
    last = np.r_[first[1:] - 1, len(curve_fp) - 1]
    fpr_values = fp_values / fp[-1]
    left = np.searchsorted(fpr_values, fpr_array, side="right") - 1
    right = left + 1  # exists: fpr < 1 = fpr_values[-1]
    leaving_tp = curve_tp[last[left]]
    slope = (curve_tp[first[right]] - leaving_tp) / (fpr_values[right] - fpr_values[left])
    tpr = (leaving_tp + slope * (fpr_array - fpr_values[left])) / tp[-1]
    return float(tpr) if tpr.ndim == 0 else tpr


def pair_scores_and_labels(similarity, y):
    """Scores and labels of all pairs ``i < j`` of a labelled set.

    Parameters
    ----------
    similarity : array-like of shape (n_samples, n_samples)
        Pair similarities; only the strict upper triangle is read.
    y : array-like of shape (n_samples,)
        Class labels; a pair is positive when both items have the same label.

    Returns
    -------
    scores : ndarray of shape (n_samples * (n_samples - 1) / 2,)
        ``similarity[i, j]`` for ``i < j`` in row-major order.
    same_class : ndarray of the same shape, dtype=bool
    """
    with naming_inputs("similarity"):
        similarity = check_array(similarity, dtype=np.float64, input_name="similarity")
    codes = encode_labels(y)[1]
    n_samples = similarity.shape[0]
    if similarity.shape != (n_samples, n_samples):
        raise ValueError(f"similarity must be square; got shape {similarity.shape}.")
    check_same_length((similarity, codes), ("similarity", "y"))
    upper = np.triu(np.ones((n_samples, n_samples), dtype=bool), k=1)
    same_class = (codes[:, None] == codes[None, :])[upper]
    return similarity[upper], same_class


def pairwise_roc_score(similarity, y, fpr):
    """TPR at a given FPR over all pairs ``i < j`` of a labelled set.

    Positive pairs are pairs of the same class; see :func:`pointwise_roc_score` for the
    interpolation of the ROC curve.

    Parameters
    ----------
    similarity : array-like of shape (n_samples, n_samples)
        Pair similarities (higher = more alike); only the strict upper triangle is read.
    y : array-like of shape (n_samples,)
        Class labels.
    fpr : float or array-like of float
        False-positive rate(s) in (0, 1).

    Returns
    -------
    tpr : float or ndarray of shape (n_fpr,)

    Raises
    ------
    ValueError
        If there is no positive pair (every class has one item) or no negative pair (a single
        class), or on bad input as in :func:`pointwise_roc_score`.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import pairwise_roc_score
    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> pairwise_roc_score(X @ X.T, [0, 0, 1, 1], fpr=0.5)
    1.0
    """
    scores, same_class = pair_scores_and_labels(similarity, y)
    if same_class.all() or not same_class.any():  # the pairs' labels are not the user's y
        raise ValueError(
            "y has only one class: there is no negative (different-class) pair."
            if same_class.size and same_class.all()
            else "No class of y has two items: there is no positive (same-class) pair."
        )
    return pointwise_roc_score(same_class, scores, fpr)
