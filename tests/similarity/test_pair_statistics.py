"""The exact pair statistics (``_pair_statistics``): class sums and Gram matrices, scatters and
outer-product means of pairs, against explicit pair loops."""

import numpy as np
import pytest
from helpers import pairs_by_loop, tiny_labelled_items

from skrank.sampling import count_pairs, sample_negative_pairs
from skrank.similarity import (
    PairStatistics,
    dissimilar_pair_scatter,
    negative_pair_outer_mean,
    similar_pair_scatter,
)
from skrank.similarity._neighbor_pairs import nearest_pairs
from skrank.similarity._pair_statistics import pair_difference_scatter


def _brute_force_outer_mean(X, pairs):
    total = sum(np.outer(X[i], X[j]) + np.outer(X[j], X[i]) for i, j in pairs)
    return total / (2 * len(pairs))


def test_pair_statistics_match_pair_loops():
    X, y = tiny_labelled_items()
    stats = PairStatistics(X.shape[1]).update(X, y)
    np.testing.assert_allclose(
        stats.positive_matrix(), _brute_force_outer_mean(X, pairs_by_loop(y, True)), atol=1e-12
    )
    np.testing.assert_allclose(
        stats.negative_matrix(),
        _brute_force_outer_mean(X, pairs_by_loop(y, False)),
        atol=1e-12,
    )
    assert (stats.n_positive_pairs, stats.n_negative_pairs) == count_pairs(y)


def test_pair_statistics_stream_equals_one_pass():
    X, y = tiny_labelled_items(n=40)
    one_pass = PairStatistics(X.shape[1]).update(X, y)
    streamed = PairStatistics(X.shape[1])
    # Chunks in which the highest class code appears late exercise the growth of the class arrays.
    order = np.argsort(y, kind="stable")
    for chunk in np.array_split(order, 5):
        streamed.update(X[chunk], y[chunk])
    np.testing.assert_allclose(streamed.positive_matrix(), one_pass.positive_matrix())
    np.testing.assert_allclose(streamed.negative_matrix(), one_pass.negative_matrix())


def test_pair_statistics_errors():
    stats = PairStatistics(2)
    with pytest.raises(ValueError, match="shape"):
        stats.update(np.ones((3, 3)), np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="class_codes"):
        stats.update(np.ones((3, 2)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="non-negative"):
        stats.update(np.ones((2, 2)), np.array([0, -1]))
    stats.update(np.ones((2, 2)), np.array([0, 0]))
    with pytest.raises(ValueError, match="one class"):
        stats.negative_matrix()
    single = PairStatistics(2).update(np.ones((2, 2)), np.array([0, 1]))
    with pytest.raises(ValueError, match="positive"):
        single.positive_matrix()


def test_similar_pair_scatter_matches_pair_loop():
    X, y = tiny_labelled_items()
    pairs = pairs_by_loop(y, True)
    expected = sum(np.outer(X[i] - X[j], X[i] - X[j]) for i, j in pairs) / len(pairs)
    scatter, n_positive = similar_pair_scatter(X, y)
    assert n_positive == len(pairs)
    np.testing.assert_allclose(scatter, expected, atol=1e-12)


def test_pair_statistics_merge_equals_one_update():
    X, y = tiny_labelled_items(n=300, d=6, n_classes=4)
    whole = PairStatistics(X.shape[1]).update(X, y)
    merged = PairStatistics(X.shape[1])
    for part in np.array_split(np.argsort(y, kind="stable"), 5):  # chunks missing classes
        merged.merge(PairStatistics(X.shape[1]).update(X[part], y[part]))
    np.testing.assert_array_equal(merged.class_counts_, whole.class_counts_)
    np.testing.assert_allclose(merged.class_sums_, whole.class_sums_, rtol=1e-13)
    np.testing.assert_allclose(merged.positive_matrix(), whole.positive_matrix(), atol=1e-12)
    np.testing.assert_allclose(merged.negative_matrix(), whole.negative_matrix(), atol=1e-12)
    with pytest.raises(ValueError, match="3 features"):
        merged.merge(PairStatistics(3))


def test_negative_pair_outer_mean_in_chunks_equals_one_gather():
    X, y = tiny_labelled_items(n=30, d=5)
    sample = sample_negative_pairs(y, 101, random_state=0)
    one_gather = negative_pair_outer_mean(X, sample)
    chunked = negative_pair_outer_mean(X, sample, max_gathered=7)  # one pair per chunk
    np.testing.assert_allclose(chunked, one_gather, atol=1e-14)
    loop = sum(
        w * (np.outer(X[i], X[j]) + np.outer(X[j], X[i])) / 2
        for i, j, w in zip(*sample, strict=False)
    )
    np.testing.assert_allclose(one_gather, loop, atol=1e-14)


def test_dissimilar_pair_scatter_matches_pair_loop():
    X, y = tiny_labelled_items(seed=9, n=15)
    pairs = pairs_by_loop(y, False)
    differences = np.array([X[i] - X[j] for i, j in pairs])
    scatter, n_negative = dissimilar_pair_scatter(X, y)
    assert n_negative == len(pairs)
    np.testing.assert_allclose(scatter, differences.T @ differences / n_negative, rtol=1e-12)


def test_pair_difference_scatter_matches_a_pair_loop():
    X, y = tiny_labelled_items(seed=2, n=40, d=3)
    sample = nearest_pairs(X, y, 2)
    expected = sum(w * np.outer(X[i] - X[j], X[i] - X[j]) for i, j, w in zip(*sample, strict=True))
    np.testing.assert_allclose(pair_difference_scatter(X, sample), expected, rtol=1e-12)
