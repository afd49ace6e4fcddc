"""Calibration of predicted probabilities."""

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval, validate_params


@validate_params(
    {
        "y_true": ["array-like"],
        "y_prob": ["array-like"],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def expected_calibration_error(y_true, y_prob, *, n_bins=15):
    """Expected calibration error of binary outcomes and their predicted probabilities.

    The probabilities are put in ``n_bins`` bins of equal width on [0, 1], as
    :func:`sklearn.calibration.calibration_curve` does with ``strategy="uniform"`` (a
    probability on an inner edge belongs to the lower bin); the error is the mean, weighted by
    each bin's count, of the gap between the bin's rate of positive outcomes and its mean
    probability: ``sum_b n_b / n * |mean(y_b) - mean(p_b)|``. For multilabel predictions, pass
    the (row, label) pairs of interest flattened, for example the top-k labels of each row.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Outcomes, 0 or 1 (or booleans).
    y_prob : array-like of shape (n_samples,)
        Predicted probabilities of the outcome 1, in [0, 1].
    n_bins : int, default=15
        Number of equal-width bins.

    Returns
    -------
    error : float
        In [0, 1]; 0 for probabilities that match their bins' rates of positive outcomes.

    Examples
    --------
    >>> from skrank.metrics import expected_calibration_error
    >>> expected_calibration_error([0, 1, 1, 0], [0.1, 0.9, 0.8, 0.3], n_bins=5)
    0.175
    """
    y_true = np.asarray(y_true)
    y_prob = np.asarray(y_prob, dtype=np.float64)
    if y_true.ndim != 1 or y_prob.ndim != 1 or y_true.shape != y_prob.shape:
        raise ValueError(
            f"y_true and y_prob must be 1-D of the same length; got shapes {y_true.shape} and "
            f"{y_prob.shape}."
        )
    if y_true.size == 0:
        raise ValueError("y_true and y_prob are empty: there is no prediction to calibrate.")
    if not np.isin(y_true, (0, 1)).all():
        raise ValueError("y_true must hold outcomes 0 and 1 (or booleans).")
    if not (np.isfinite(y_prob).all() and y_prob.min() >= 0 and y_prob.max() <= 1):
        raise ValueError("y_prob must hold probabilities in [0, 1].")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.searchsorted(edges[1:-1], y_prob)
    positives = np.bincount(bins, weights=y_true.astype(np.float64), minlength=n_bins)
    probabilities = np.bincount(bins, weights=y_prob, minlength=n_bins)
    return float(np.abs(positives - probabilities).sum() / y_true.size)
