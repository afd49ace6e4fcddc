"""Ranking metrics of one list and of pairs (``skrank.metrics._ranking``): AUPRC, TPR at a
fixed FPR, against scikit-learn and explicit threshold loops."""

import numpy as np
import pytest
from helpers import brute_auprc
from sklearn.metrics import average_precision_score, roc_curve

from skrank.metrics import (
    auprc_score,
    pair_scores_and_labels,
    pairwise_roc_score,
    pointwise_roc_score,
)


def threshold_loop_roc_points(is_positive, scores):
    """(FPR, TPR) at (0, 0) and at each distinct score, by an explicit threshold loop."""
    points = [(0.0, 0.0)]
    for threshold in np.unique(scores)[::-1]:
        called = scores >= threshold
        points.append((np.mean(called[~is_positive]), np.mean(called[is_positive])))
    return points


def tpr_on_polyline(points, fpr):
    """The largest TPR of the ROC polyline (consecutive points joined) at ``fpr``."""
    best = -1.0
    for (f0, t0), (f1, t1) in zip(points[:-1], points[1:], strict=True):
        if f0 <= fpr <= f1:
            best = max(best, t1 if f1 == f0 else t0 + (fpr - f0) / (f1 - f0) * (t1 - t0))
    return best


def brute_tpr_at_fpr(is_positive, scores, fpr):
    return tpr_on_polyline(threshold_loop_roc_points(is_positive, scores), fpr)


@pytest.mark.parametrize("seed", range(5))
def test_auprc_equals_sklearn_average_precision_without_ties(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=200)
    y[:2] = [0, 1]
    scores = rng.normal(size=200) + y
    assert auprc_score(y, scores) == pytest.approx(average_precision_score(y, scores), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_auprc_counts_ties_fully(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=60)
    y[0] = 1
    scores = rng.integers(4, size=60).astype(float)
    expected = brute_auprc(y == 1, scores)
    assert auprc_score(y, scores) == pytest.approx(expected, abs=1e-12)
    permutation = rng.permutation(60)
    assert auprc_score(y[permutation], scores[permutation]) == pytest.approx(expected, abs=1e-12)


def test_auprc_tie_example_differs_from_positive_first_order():
    # Tie of one positive and one negative at the top: precision 1/2, not 1.
    assert auprc_score([1, 0, 0], [1.0, 1.0, 0.0]) == 0.5


def test_auprc_degenerate_and_labels():
    assert auprc_score([1, 1, 1], [0.1, 0.5, 0.2]) == 1.0
    assert auprc_score([-1, 1, 1], [0.1, 0.5, 0.2]) == 1.0
    assert auprc_score([True, False], [0.9, 0.1]) == 1.0
    assert auprc_score(["cat", "dog", "cat"], [0.1, 0.9, 0.8], pos_label="dog") == 1.0
    with pytest.raises(ValueError, match="no positive"):
        auprc_score([0, 0, 0], [0.1, 0.5, 0.2])
    with pytest.raises(ValueError, match="no positive"):
        auprc_score(["a", "b"], [0.1, 0.5], pos_label="c")
    with pytest.raises(ValueError, match="pos_label"):
        auprc_score(["a", "b"], [0.1, 0.5])
    with pytest.raises(ValueError, match="pos_label"):
        auprc_score([0, 2], [0.1, 0.5])
    with pytest.raises(ValueError, match="binary"):
        auprc_score([0, 1, 2], [0.1, 0.5, 0.2])


@pytest.mark.parametrize(
    "y_true, y_score, message",
    [
        ([0, 1], [0.1, np.nan], "NaN"),
        ([0, 1], [0.1, np.inf], "infinity"),
        ([0, 1, 1], [0.1, 0.5], "inconsistent numbers of samples"),
        ([], [], "0 sample"),
        ([0, 1], [[0.1, 0.2], [0.3, 0.4]], "1-D"),
    ],
)
def test_binary_metrics_reject_bad_input(y_true, y_score, message):
    with pytest.raises(ValueError, match=message):
        auprc_score(y_true, y_score)
    with pytest.raises(ValueError, match=message):
        pointwise_roc_score(y_true, y_score, 0.5)


def sklearn_roc_reference(y, scores, fprs):
    """The polyline through the points of sklearn's roc_curve (all thresholds kept)."""
    curve_fpr, curve_tpr, _ = roc_curve(y, scores, drop_intermediate=False)
    points = list(zip(curve_fpr, curve_tpr, strict=True))
    return [tpr_on_polyline(points, fpr) for fpr in fprs]


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_pointwise_roc_matches_sklearn_and_threshold_loop(seed, tied):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=80)
    y[:2] = [0, 1]
    scores = rng.normal(size=80) + y
    if tied:
        scores = np.round(scores)
    fprs = np.r_[rng.uniform(0.001, 0.999, size=20), np.unique(roc_curve(y, scores)[0])[1:-1]]
    result = pointwise_roc_score(y, scores, fprs)
    np.testing.assert_allclose(result, sklearn_roc_reference(y, scores, fprs), atol=1e-12)
    brute = [brute_tpr_at_fpr(y == 1, scores, fpr) for fpr in fprs]
    np.testing.assert_allclose(result, brute, atol=1e-12)


def test_pointwise_roc_vertical_jump_and_diagonal_tie():
    # Scores 3 (two positives), 2 (positive, negative), 1 (negative): the curve goes
    # (0,0) -> (0, 2/3) vertically, then a diagonal to (1/2, 1), then to (1, 1).
    y, scores = [1, 1, 1, 0, 0], [3, 3, 2, 2, 1]
    assert pointwise_roc_score(y, scores, 0.25) == pytest.approx(2 / 3 + 0.5 * (1 / 3))
    assert pointwise_roc_score(y, scores, 0.5) == 1.0
    result = pointwise_roc_score(y, scores, [0.25, 0.75])
    assert isinstance(result, np.ndarray) and result.shape == (2,)
    assert isinstance(pointwise_roc_score(y, scores, 0.25), float)


@pytest.mark.parametrize("fpr", [0, 1, -0.1, 1.5, np.nan, [0.5, 1.0], [], [[0.5]]])
def test_pointwise_roc_rejects_fpr_outside_open_interval(fpr):
    with pytest.raises(ValueError, match="fpr"):
        pointwise_roc_score([0, 1], [0.1, 0.5], fpr)


def test_pointwise_roc_needs_both_classes():
    with pytest.raises(ValueError, match="no negative"):
        pointwise_roc_score([1, 1], [0.1, 0.5], 0.5)
    with pytest.raises(ValueError, match="no positive"):
        pointwise_roc_score([0, 0], [0.1, 0.5], 0.5)


def test_pair_scores_and_labels_match_pair_loop():
    rng = np.random.default_rng(0)
    S = rng.normal(size=(7, 7))
    y = np.array(["a", "b", "a", "c", "b", "a", "c"])
    scores, same = pair_scores_and_labels(S, y)
    pairs = [(i, j) for i in range(7) for j in range(i + 1, 7)]
    np.testing.assert_array_equal(scores, [S[i, j] for i, j in pairs])
    np.testing.assert_array_equal(same, [y[i] == y[j] for i, j in pairs])
    assert pairwise_roc_score(S, y, 0.3) == pytest.approx(
        brute_tpr_at_fpr(same, scores, 0.3), abs=1e-12
    )


def test_pair_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="square"):
        pair_scores_and_labels(np.zeros((3, 4)), [0, 1, 0])
    with pytest.raises(ValueError, match="inconsistent"):
        pair_scores_and_labels(np.zeros((3, 3)), [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        pair_scores_and_labels(np.full((2, 2), np.nan), [0, 1])
    # the messages are about the user's y, not the internal pair labels ("y_true has ...")
    with pytest.raises(ValueError, match="No class of y has two items: there is no positive"):
        pairwise_roc_score(np.eye(3), [0, 1, 2], 0.5)
    with pytest.raises(ValueError, match="y has only one class: there is no negative"):
        pairwise_roc_score(np.eye(3), [0, 0, 0], 0.5)
