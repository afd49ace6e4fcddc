"""Local pair sets (``_neighbor_pairs``): each item with its nearest items of its class or of
the others, against a pair loop."""

import itertools

import numpy as np
import pytest
from helpers import loop_nearest_pairs

from skrank.similarity._neighbor_pairs import nearest_pairs


def _labelled_points(seed=0, n=40, d=3):
    """Random points in three classes, plus a class of two items and a class of one."""
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, d))
    y = rng.randint(3, size=n)
    y[:2] = 3
    y[2] = 4
    return X, y


@pytest.mark.parametrize("same_class", [True, False])
@pytest.mark.parametrize("k", [1, 3, 50])
def test_nearest_pairs_match_a_pair_loop(same_class, k):
    X, y = _labelled_points()
    sample = nearest_pairs(X, y, k, same_class=same_class)
    expected = loop_nearest_pairs(X, y, k, same_class)
    np.testing.assert_array_equal(sample.first, expected.first)
    np.testing.assert_array_equal(sample.second, expected.second)
    np.testing.assert_allclose(sample.weight, expected.weight)


def test_nearest_pairs_with_every_neighbour_are_all_pairs_of_the_kind():
    X, y = _labelled_points(seed=1)
    for same_class in (True, False):
        sample = nearest_pairs(X, y, len(y), same_class=same_class)
        expected = [
            (i, j)
            for i, j in itertools.combinations(range(len(y)), 2)
            if (y[i] == y[j]) == same_class
        ]
        assert list(zip(sample.first.tolist(), sample.second.tolist(), strict=True)) == expected


def test_duplicate_items_are_neighbours_of_each_other_not_of_themselves():
    X = np.array([[0.0], [0.0], [5.0], [1.0]])
    sample = nearest_pairs(X, [0, 0, 0, 1], n_neighbors=1)
    pairs = set(zip(sample.first.tolist(), sample.second.tolist(), strict=True))
    # 0 and 1 are each other's neighbour (one pair); 2 is at the same distance from both.
    assert (0, 1) in pairs and len(pairs) == 2 and pairs < {(0, 1), (0, 2), (1, 2)}
