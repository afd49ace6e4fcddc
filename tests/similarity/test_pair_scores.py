"""Pair scores of a bilinear similarity, its threshold at a target FPR and the item reservoir
(``_pair_scores``), against explicit pair loops."""

import itertools

import numpy as np
import pytest

from skrank.similarity._pair_scores import (
    ItemReservoir,
    negative_pair_similarities,
    threshold_at_fpr,
)


def _tiny_data(seed=0, n=30, d=4, n_classes=3):
    rng = np.random.RandomState(seed)
    y = np.arange(n) % n_classes
    centres = rng.normal(size=(n_classes, d))
    return centres[y] + 0.8 * rng.normal(size=(n, d)), y


def _negative_pair_similarities_by_loop(X, y, A):
    pairs = [(i, j) for i, j in itertools.combinations(range(len(y)), 2) if y[i] != y[j]]
    return np.array([(1 + X[i] @ A @ X[j]) / 2 for i, j in pairs])


def _random_symmetric(d, seed=1):
    M = np.random.RandomState(seed).normal(size=(d, d))
    return M + M.T


def test_negative_pair_similarities_all_pairs_match_loop():
    X, y = _tiny_data()
    A = _random_symmetric(4)
    expected = _negative_pair_similarities_by_loop(X, y, A)
    scores = negative_pair_similarities(X, y, A, max_pairs=10**6)
    np.testing.assert_allclose(np.sort(scores), np.sort(expected))


def test_negative_pair_similarities_sample_beyond_max_pairs():
    X, y = _tiny_data()
    A = _random_symmetric(4)
    expected = _negative_pair_similarities_by_loop(X, y, A)
    scores = negative_pair_similarities(X, y, A, max_pairs=50, random_state=0)
    assert scores.shape == (50,)
    assert np.abs(scores[:, None] - expected[None, :]).min(axis=1).max() < 1e-12


@pytest.mark.parametrize("fpr", [0.01, 0.1, 0.25, 0.5, 0.99])
def test_threshold_at_fpr_is_smallest_admissible_score(fpr):
    scores = np.random.RandomState(0).uniform(size=200).round(2)  # with ties
    threshold = threshold_at_fpr(scores, fpr)
    admissible = [s for s in np.unique(scores) if np.mean(scores > s) <= fpr]
    assert threshold == min(admissible)


def test_item_reservoir_is_uniform_across_chunks():
    n_items, capacity, n_runs = 30, 7, 3000
    rng = np.random.RandomState(0)
    counts = np.zeros(n_items)
    items = np.arange(n_items, dtype=float)[:, None]
    for _ in range(n_runs):
        reservoir = ItemReservoir(capacity, 1)
        for chunk in np.array_split(np.arange(n_items), [3, 5, 17]):
            reservoir.update(items[chunk], chunk, rng)
        assert reservoir.n_seen == n_items and reservoir.items.shape == (capacity, 1)
        np.testing.assert_array_equal(reservoir.items[:, 0], reservoir.class_codes)
        assert len(np.unique(reservoir.class_codes)) == capacity
        counts[reservoir.class_codes] += 1
    expected = n_runs * capacity / n_items
    # Each count is Binomial(3000, 7/30): sd ~ 23; a fault in replacement shifts some by >> 100.
    assert np.abs(counts - expected).max() < 5 * np.sqrt(expected)


def test_item_reservoir_keeps_everything_below_capacity():
    reservoir = ItemReservoir(10, 2).update(np.ones((4, 2)), np.arange(4), np.random.RandomState(0))
    assert reservoir.items.shape == (4, 2) and reservoir.n_seen == 4
