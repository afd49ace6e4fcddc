"""Tests of skrank.metrics.mean_precision_recall_curve against a per-query scikit-learn loop."""

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve
from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances

from skrank.metrics import mean_auprc_score, mean_precision_recall_curve

LEVELS = np.linspace(0, 1, 21)


def per_query_reference(S, y, levels):
    """Mean over queries with a positive of max{precision : recall >= r}, via sklearn."""
    curves = []
    for query in range(len(y)):
        others = np.delete(np.arange(len(y)), query)
        is_positive = y[others] == y[query]
        if not is_positive.any():
            continue
        precision, recall, _ = precision_recall_curve(is_positive, S[query, others])
        # The last point (recall 0, precision 1) is sklearn's convention, not a threshold.
        precision, recall = precision[:-1], recall[:-1]
        curves.append([precision[recall >= level].max() for level in levels])
    return np.mean(curves, axis=0)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_matches_per_query_sklearn_loop(metric):
    rng = np.random.RandomState(0)
    y = rng.randint(4, size=60)
    X = rng.normal(size=(60, 5)) + y[:, None] * 0.5
    S = cosine_similarity(X) if metric == "cosine" else -euclidean_distances(X)
    precision, recall = mean_precision_recall_curve(X, y, metric=metric, recall_levels=LEVELS)
    np.testing.assert_allclose(precision, per_query_reference(S, y, LEVELS), rtol=1e-12)
    np.testing.assert_array_equal(recall, LEVELS)


@pytest.mark.parametrize("seed", range(3))
def test_ties_count_fully_and_chunks_change_nothing(seed):
    rng = np.random.RandomState(seed)
    y = rng.randint(3, size=40)
    X = rng.randint(3, size=(40, 2)).astype(float)  # many tied distances
    S = -euclidean_distances(X, squared=True)
    expected = per_query_reference(S, y, LEVELS)
    for chunk_size in (None, 1, 7):
        precision, _ = mean_precision_recall_curve(
            X, y, metric="euclidean", recall_levels=LEVELS, chunk_size=chunk_size
        )
        np.testing.assert_allclose(precision, expected, rtol=1e-12)


def test_default_levels_curve_is_non_increasing_and_bounds_the_map():
    rng = np.random.RandomState(1)
    y = np.repeat(np.arange(5), 8)
    X = rng.normal(size=(40, 3)) + np.eye(5, 3)[y]
    precision, recall = mean_precision_recall_curve(X, y)
    np.testing.assert_array_equal(recall, np.linspace(0, 1, 101))
    assert np.all(np.diff(precision) <= 1e-15)
    # Interpolated precision dominates the precision at each positive, so its mean over the
    # recall levels of the positives (k / n+) bounds the AUPRC from above.
    assert precision.mean() >= mean_auprc_score(X, y) - 0.02
    perfect, _ = mean_precision_recall_curve(np.eye(5)[y], y)
    np.testing.assert_array_equal(perfect, 1.0)


def test_queries_without_positive_are_excluded_with_a_warning():
    X = np.array([[0.0], [0.1], [1.0], [5.0]])
    y = [0, 0, 1, 2]
    with pytest.warns(UserWarning, match="2 of 4 queries have no positive"):
        precision, _ = mean_precision_recall_curve(X, y, metric="euclidean", recall_levels=[1])
    assert precision.tolist() == [1.0]


@pytest.mark.parametrize(
    "levels, message",
    [
        ([], "non-empty 1-D"),
        ([[0.5]], "non-empty 1-D"),
        ([-0.1, 0.5], r"\[0, 1\]"),
        ([1.5], r"\[0, 1\]"),
    ],
)
def test_rejects_bad_recall_levels(levels, message):
    with pytest.raises(ValueError, match=message):
        mean_precision_recall_curve(np.eye(3), [0, 0, 1], recall_levels=levels)
