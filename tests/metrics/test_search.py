"""Top-k search (``skrank.metrics._search``): the one tie rule, the smaller index first."""

import numpy as np
import pytest
import torch

from skrank.metrics import (
    top_k_indices,
)
from skrank.metrics._search import _weighted_sum_top_k


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
