"""MMC's local pair sets: nearest same-class and other-class neighbours against a pair loop."""

import itertools

import numpy as np
import pytest

from skrank import MMC
from skrank.similarity._neighbor_pairs import nearest_pairs, pair_difference_scatter


def _data(seed=0, n=40, d=3):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, d))
    y = rng.randint(3, size=n)
    y[:2] = 3  # a class of two items
    y[2] = 4  # a class of one item
    return X, y


def _loop_pairs(X, y, k, same_class):
    """Unordered pairs {i, j}: j among the k nearest items of i's class (or of the others)."""
    pairs = set()
    for i in range(len(y)):
        others = [j for j in range(len(y)) if j != i and (y[j] == y[i]) == same_class]
        distances = [np.linalg.norm(X[i] - X[j]) for j in others]
        pairs.update((min(i, j), max(i, j)) for j in np.array(others)[np.argsort(distances)[:k]])
    return sorted(pairs)


@pytest.mark.parametrize("same_class", [True, False])
@pytest.mark.parametrize("k", [1, 3, 50])
def test_nearest_pairs_match_a_pair_loop(same_class, k):
    X, y = _data()
    sample = nearest_pairs(X, y, k, same_class=same_class)
    expected = _loop_pairs(X, y, k, same_class)
    assert list(zip(sample.first.tolist(), sample.second.tolist(), strict=True)) == expected
    np.testing.assert_allclose(sample.weight, 1.0 / len(expected))


def test_nearest_pairs_with_every_neighbour_are_all_pairs_of_the_kind():
    X, y = _data(seed=1)
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


def test_pair_difference_scatter_matches_a_pair_loop():
    X, y = _data(seed=2)
    sample = nearest_pairs(X, y, 2)
    expected = sum(w * np.outer(X[i] - X[j], X[i] - X[j]) for i, j, w in zip(*sample, strict=True))
    np.testing.assert_allclose(pair_difference_scatter(X, sample), expected, rtol=1e-12)


def test_mmc_with_local_pairs_keeps_the_local_constraint():
    X, y = _data(seed=3, n=80, d=4)
    mmc = MMC(positives="nearest", n_neighbors=2, scatter_ridge=1e-8, min_rank=None).fit(X, y)
    assert mmc.converged_
    pairs = _loop_pairs(X, y, 2, same_class=True)
    Z = mmc.transform(X)
    local = np.mean([np.sum((Z[i] - Z[j]) ** 2) for i, j in pairs])
    assert local == pytest.approx(1.0, rel=1e-6)
    # The objective is still the mean distance over all dissimilar pairs.
    distances = [
        np.linalg.norm(Z[i] - Z[j]) for i, j in itertools.combinations(range(80), 2) if y[i] != y[j]
    ]
    assert mmc.objective_[-1] == pytest.approx(np.mean(distances), rel=1e-9)
    assert mmc.objective_and_constraint(X, y)[0] == pytest.approx(np.mean(distances), rel=1e-9)


def test_local_pairs_on_a_dask_array_are_refused():
    da = pytest.importorskip("dask.array")
    X, y = _data()
    for params in ({"positives": "nearest"}, {"negatives": "nearest"}):
        with pytest.raises(ValueError, match="nearest neighbours among all items"):
            MMC(**params).fit(da.from_array(X, chunks=10), y)
