"""The expected calibration error against an explicit loop over bins and scikit-learn's
calibration curve."""

import numpy as np
import pytest
from sklearn.calibration import calibration_curve

from skrank.metrics import expected_calibration_error


def _loop_error(y_true, y_prob, n_bins):
    total = 0.0
    for b in range(n_bins):
        low, high = b / n_bins, (b + 1) / n_bins
        # inner edges belong to the lower bin; 0 to the first
        inside = [
            i
            for i, p in enumerate(y_prob)
            if (low < p <= high) or (b == 0 and p == 0.0) or (b == n_bins - 1 and p > high)
        ]
        if inside:
            rate = np.mean([y_true[i] for i in inside])
            mean_probability = np.mean([y_prob[i] for i in inside])
            total += len(inside) * abs(rate - mean_probability)
    return total / len(y_true)


@pytest.mark.parametrize("n_bins", [1, 3, 15])
@pytest.mark.parametrize("seed", [0, 1])
def test_error_equals_a_loop_over_bins_and_the_calibration_curve(n_bins, seed):
    rng = np.random.RandomState(seed)
    y_prob = rng.uniform(size=200)
    y_prob[:5] = [0.0, 1.0, 0.5, 1 / 3, 0.2]
    y_true = (rng.uniform(size=200) < y_prob**2).astype(int)
    error = expected_calibration_error(y_true, y_prob, n_bins=n_bins)
    assert error == pytest.approx(_loop_error(y_true, y_prob, n_bins), abs=1e-12)
    rate, mean_probability = calibration_curve(y_true, y_prob, n_bins=n_bins)
    counts = np.bincount(np.searchsorted(np.linspace(0, 1, n_bins + 1)[1:-1], y_prob))
    counts = counts[counts > 0]
    assert error == pytest.approx(np.sum(counts * np.abs(rate - mean_probability)) / 200)


def test_calibrated_and_miscalibrated_extremes():
    assert expected_calibration_error([0, 0, 1, 1], [0.0, 0.0, 1.0, 1.0]) == 0.0
    assert expected_calibration_error([1, 1, 0, 0], [0.0, 0.0, 1.0, 1.0]) == 1.0
    assert expected_calibration_error([True, False], [0.5, 0.5], n_bins=2) == 0.0


@pytest.mark.parametrize(
    "y_true, y_prob, message",
    [
        ([0, 1], [0.2], "same length"),
        ([[0, 1]], [[0.2, 0.3]], "1-D"),
        ([], [], "empty"),
        ([0, 2], [0.2, 0.3], "outcomes 0 and 1"),
        ([0, 1], [0.2, 1.3], r"probabilities in \[0, 1\]"),
        ([0, 1], [0.2, np.nan], r"probabilities in \[0, 1\]"),
    ],
)
def test_bad_inputs_are_refused(y_true, y_prob, message):
    with pytest.raises(ValueError, match=message):
        expected_calibration_error(y_true, y_prob)


def test_n_bins_is_validated():
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error([0, 1], [0.2, 0.3], n_bins=0)
