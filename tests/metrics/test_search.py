"""Top-k search (``skrank.metrics._search``): the one tie rule, the smaller index first."""

import numpy as np
import pytest
import torch
from helpers import brute_force_top_k
from sklearn.preprocessing import normalize

from skrank.metrics import FaissIVFIndex, top_k_indices, top_k_inner_products
from skrank.metrics._search import _weighted_sum_top_k, overlap_recall


@pytest.mark.parametrize("seed", range(4))
def test_top_k_indices_is_a_stable_descending_sort(seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(4, size=(30, 12)).astype(float)
    scores[0, 3] = -np.inf
    expected = np.argsort(-scores, axis=1, kind="stable")
    for k in range(1, 13):
        np.testing.assert_array_equal(top_k_indices(scores, k), expected[:, :k])


@pytest.mark.parametrize("seed", range(4))
def test_weighted_sum_top_k_equals_a_full_sort_of_every_sum(seed):
    """Exact from the candidates of either part, ties included; few candidates force the rows
    the bound leaves unsettled to be summed in full."""
    rng = np.random.default_rng(seed)
    base = torch.tensor(rng.integers(6, size=(40, 50)), dtype=torch.float32)
    term = torch.tensor(rng.integers(4, size=(40, 50)) / 4, dtype=torch.float32)
    term[:, 7] = 0.75  # a column high in term only, below the top of base
    weights = (0.0, 0.5, 1.0, 3.0, 64.0)
    for n_candidates, k in [(2, 1), (3, 3), (8, 5), (64, 5), (1, 50)]:
        top = _weighted_sum_top_k(base, term, weights, k, n_candidates=n_candidates)
        for weight, (values, columns) in zip(weights, top, strict=True):
            sums = (base + term * weight).numpy()
            expected = np.argsort(-sums, axis=1, kind="stable")[:, :k]
            np.testing.assert_array_equal(columns.numpy(), expected)
            np.testing.assert_array_equal(
                values.numpy(), np.take_along_axis(sums, expected, axis=1)
            )


@pytest.mark.parametrize("k", [1, 3, 17])
def test_chunked_top_k_matches_a_stable_full_sort_with_ties(k):
    rng = np.random.RandomState(0)
    table = torch.tensor(rng.randint(-2, 3, size=(17, 3)), dtype=torch.float32)  # many ties
    queries = torch.tensor(rng.randint(-2, 3, size=(23, 3)), dtype=torch.float32)
    expected = brute_force_top_k((queries @ table.T).numpy(), k)
    for block_elements in (1, 40, 10**6):  # one row per chunk, a few, everything at once
        scores, indices = top_k_inner_products(
            queries, lambda a, b: table[a:b], 17, k, block_elements=block_elements
        )
        np.testing.assert_array_equal(indices.numpy(), expected)
        np.testing.assert_array_equal(
            scores.numpy(), np.take_along_axis((queries @ table.T).numpy(), expected, axis=1)
        )
    with pytest.raises(ValueError, match="k=18"):
        top_k_inner_products(queries, lambda a, b: table[a:b], 17, 18)


def test_ivf_index_is_exact_when_every_cell_is_probed_and_calibrates_its_probes():
    pytest.importorskip("faiss")
    rng = np.random.RandomState(0)
    centers = rng.normal(size=(40, 16))  # label vectors lie in clusters, as learned ones do
    table = normalize(centers[rng.randint(40, size=2000)] + 0.3 * rng.normal(size=(2000, 16)))
    queries = normalize(centers[rng.randint(40, size=50)] + 0.3 * rng.normal(size=(50, 16)))
    table, queries = table.astype(np.float32), queries.astype(np.float32)
    exact = top_k_inner_products(torch.from_numpy(queries), lambda a, b: torch.from_numpy(
        table[a:b]), 2000, 5)[1].numpy()  # fmt: skip
    index = FaissIVFIndex(table, n_lists=20, random_state=0)
    index.n_probe = 20
    np.testing.assert_array_equal(np.sort(index.search(queries, 5)[1], axis=1),
                                  np.sort(exact, axis=1))  # fmt: skip
    recall = index.calibrate(queries, exact, target=0.9)
    assert recall >= 0.9 and index.n_probe in (1, 2, 4, 5)  # powers of two, capped at 20 / 4
    if index.n_probe > 1:
        index.n_probe //= 2
        assert overlap_recall(index.search(queries, 5)[1], exact) < 0.9  # the smallest that does
    assert overlap_recall(exact, exact) == 1.0
    assert overlap_recall(exact[:, ::-1], exact) == 1.0  # order within a row does not matter
    assert overlap_recall(np.full_like(exact, -1), exact) == 0.0
