import itertools

import numpy as np
import pytest
from helpers import pairs_by_loop, tiny_labelled_items

from skrank.sampling import (
    count_pairs,
    iter_negative_pairs,
    sample_negative_pairs,
    sample_negative_tuples,
)
from skrank.similarity import PairStatistics, negative_pair_outer_mean


def test_count_pairs_matches_loop():
    _, y = tiny_labelled_items()
    expected = (len(pairs_by_loop(y, True)), len(pairs_by_loop(y, False)))
    assert count_pairs(y) == expected
    assert count_pairs(np.array(["a", "b", "a"])) == (1, 2)


def test_sample_negative_pairs_are_negative_and_uniform_over_pairs():
    # Unbalanced classes: sampling uniform over anchors would over-weight the small classes.
    y = np.repeat([0, 1, 2], [2, 5, 13])
    n_draws = 200_000
    sample = sample_negative_pairs(y, n_draws, random_state=0)
    assert np.all(y[sample.first] != y[sample.second])
    np.testing.assert_allclose(sample.weight, 1 / n_draws)
    _, n_negative = count_pairs(y)
    counts = np.bincount(y)
    for k, m in itertools.combinations(range(3), 2):
        observed = np.mean(
            ((y[sample.first] == k) & (y[sample.second] == m))
            | ((y[sample.first] == m) & (y[sample.second] == k))
        )
        expected = counts[k] * counts[m] / n_negative
        # binomial standard error is below 0.0012 here: 5 sigma
        assert abs(observed - expected) < 0.006, (k, m, observed, expected)
    # every unordered negative pair equally likely
    unordered = np.sort(np.column_stack([sample.first, sample.second]), axis=1)
    _, pair_counts = np.unique(unordered, axis=0, return_counts=True)
    assert pair_counts.shape[0] == n_negative
    expected_per_pair = n_draws / n_negative
    assert np.abs(pair_counts - expected_per_pair).max() < 5 * np.sqrt(expected_per_pair)


def test_sample_negative_tuples_structure_and_unbiasedness():
    X, y = tiny_labelled_items(n=15, n_classes=4)
    sample = sample_negative_tuples(y, n_tuples=3, random_state=0)
    assert sample.first.shape[0] == 3 * 4 * 3 // 2
    assert np.all(y[sample.first] != y[sample.second])
    np.testing.assert_allclose(sample.weight.sum(), 1.0)
    # one item per class in every tuple: the first tuple's pairs cover each class pair once
    first_tuple_pairs = {
        tuple(sorted((y[i], y[j])))
        for i, j in zip(sample.first[:6], sample.second[:6], strict=False)
    }
    assert first_tuple_pairs == set(itertools.combinations(range(4), 2))

    exact = PairStatistics(X.shape[1]).update(X, y).negative_matrix()
    rng = np.random.RandomState(1)
    estimates = [
        negative_pair_outer_mean(X, sample_negative_tuples(y, 5, random_state=rng))
        for _ in range(4000)
    ]
    mean = np.mean(estimates, axis=0)
    standard_error = np.std(estimates, axis=0) / np.sqrt(len(estimates))
    assert np.all(np.abs(mean - exact) < 5 * standard_error + 1e-12)


def test_sampled_pairs_estimate_is_unbiased():
    X, y = tiny_labelled_items(n=15, n_classes=4)
    exact = PairStatistics(X.shape[1]).update(X, y).negative_matrix()
    rng = np.random.RandomState(2)
    estimates = [
        negative_pair_outer_mean(X, sample_negative_pairs(y, 20, random_state=rng))
        for _ in range(4000)
    ]
    mean = np.mean(estimates, axis=0)
    standard_error = np.std(estimates, axis=0) / np.sqrt(len(estimates))
    assert np.all(np.abs(mean - exact) < 5 * standard_error + 1e-12)


@pytest.mark.parametrize("block", [1, 7, 50, 10_000])
def test_iter_negative_pairs_covers_every_pair_once(block):
    X, y = tiny_labelled_items(n=17)
    blocks = list(iter_negative_pairs(y, max_pairs_per_block=block))
    pairs = [(int(i), int(j)) for b in blocks for i, j in zip(b.first, b.second, strict=False)]
    assert sorted(pairs) == pairs_by_loop(y, False)
    np.testing.assert_allclose(sum(b.weight.sum() for b in blocks), 1.0)
    full = [negative_pair_outer_mean(X, b) for b in blocks]
    np.testing.assert_allclose(
        sum(full), PairStatistics(X.shape[1]).update(X, y).negative_matrix(), atol=1e-12
    )


@pytest.mark.parametrize("sampler", [sample_negative_pairs, sample_negative_tuples])
def test_sampler_errors(sampler):
    with pytest.raises(ValueError, match="one class"):
        sampler([1, 1, 1], 5)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="positive integer"):
            sampler([0, 1], bad)
    with pytest.raises(ValueError, match="empty"):
        sampler([], 5)


def test_samplers_are_deterministic_under_random_state():
    y = np.repeat([0, 1, 2], 5)
    for sampler in (sample_negative_pairs, sample_negative_tuples):
        a, b = sampler(y, 10, random_state=3), sampler(y, 10, random_state=3)
        np.testing.assert_array_equal(a.first, b.first)
        np.testing.assert_array_equal(a.second, b.second)


def test_labels_of_mixed_types_are_paired():
    y = np.array([1, "a", 1, "a", 2.5], dtype=object)
    assert count_pairs(y) == (2, 8)
    sample = sample_negative_pairs(y, 50, random_state=0)
    assert all(y[i] != y[j] for i, j in zip(sample.first, sample.second, strict=False))
