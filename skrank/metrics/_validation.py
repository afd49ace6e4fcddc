"""Input checks shared by the metrics: finite scores, binary targets, ``k``, labels, chunks."""

import numbers

import numpy as np
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

from ..utils._validation import naming_inputs


def check_scores(y_score, *, input_name="y_score"):
    """Return ``y_score`` as a finite 1-D float64 array (ValueError on NaN, inf or empty)."""
    with naming_inputs(input_name):
        y_score = check_array(y_score, ensure_2d=False, dtype=np.float64, input_name=input_name)
    if y_score.ndim != 1:
        raise ValueError(f"{input_name} must be 1-D; got an array of shape {y_score.shape}.")
    return y_score


def positive_mask(y_true, *, pos_label=None):
    """Boolean mask of the positives of a binary target.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels.
    pos_label : int, float, bool or str, default=None
        The positive label. When None, ``y_true`` must take values in {0, 1} or {-1, 1}
        (booleans included) and the positive label is 1.

    Returns
    -------
    is_positive : ndarray of shape (n_samples,), dtype=bool
    """
    with naming_inputs("y_true"):
        y_true = column_or_1d(check_array(y_true, ensure_2d=False, dtype=None, input_name="y_true"))
    classes = np.unique(y_true)
    if len(classes) > 2:
        raise ValueError(
            f"y_true must be binary; got {len(classes)} distinct values ({_preview(classes)})."
        )
    if pos_label is None:
        numeric = classes.dtype.kind in "biuf"
        if not numeric or not (np.isin(classes, [0, 1]).all() or np.isin(classes, [-1, 1]).all()):
            raise ValueError(
                f"y_true takes the values {_preview(classes)}; pass pos_label to say which "
                "one is positive (pos_label=None needs values in {0, 1} or {-1, 1})."
            )
        pos_label = 1
    return y_true == pos_label


def check_same_length(arrays, names):
    """``check_consistent_length`` whose error names the user's arguments (``names``)."""
    with naming_inputs(*names):
        check_consistent_length(*arrays)


def check_fpr(fpr):
    """Return ``fpr`` (a number or 1-D array) as float64, each value in (0, 1)."""
    fpr_array = np.asarray(fpr, dtype=np.float64)
    if fpr_array.ndim > 1 or fpr_array.size == 0:
        raise ValueError(f"fpr must be a number or a 1-D array of numbers; got {fpr!r}.")
    if not np.all((fpr_array > 0) & (fpr_array < 1)):
        raise ValueError(f"fpr must lie in the open interval (0, 1); got {fpr!r}.")
    return fpr_array


def check_k(k, n_candidates, *, candidates="candidates"):
    """Validate ``k`` (an int or a list of ints) against the number of candidates.

    Returns
    -------
    ks : ndarray of int64
        The values of ``k``, in the order given.
    is_scalar : bool
        Whether ``k`` was a single int (the caller then returns a float).
    """
    is_scalar = isinstance(k, numbers.Integral) and not isinstance(k, bool)
    values = [k] if is_scalar else k
    try:
        values = list(values)
    except TypeError:
        raise TypeError(f"k must be an int or a list of ints; got {k!r}.") from None
    if not values:
        raise ValueError("k must not be an empty list.")
    for value in values:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"k must be an int or a list of ints; got {value!r} in k.")
        if value < 1:
            raise ValueError(f"k must be >= 1; got k={value}.")
        if value > n_candidates:
            raise ValueError(f"k={value} exceeds the number of {candidates} ({n_candidates}).")
    return np.asarray(values, dtype=np.int64), is_scalar


def check_chunk_size(chunk_size):
    """Validate a user-given ``chunk_size`` (None or a positive int)."""
    if chunk_size is None:
        return None
    if not isinstance(chunk_size, numbers.Integral) or isinstance(chunk_size, bool):
        raise TypeError(f"chunk_size must be None or an int; got {chunk_size!r}.")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}.")
    return int(chunk_size)


def _preview(values, limit=5):
    shown = ", ".join(repr(value) for value in values[:limit].tolist())
    return shown + (", ..." if len(values) > limit else "")
