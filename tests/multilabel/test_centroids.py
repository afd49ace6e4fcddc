"""The nearest-centroid rule of the input space: the label centroids, their cosines with input
rows and their saved state, against loops."""

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
import torch
from sklearn.preprocessing import normalize
from snm_data import brute_force_centroids, brute_force_cosines

from skrank.multilabel import _centroids as centroids_module
from skrank.multilabel._centroids import (
    centroid_similarities,
    centroids_from_state,
    centroids_state,
    input_centroids,
)

pytestmark = [
    pytest.mark.usefixtures("one_torch_thread"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]


def test_input_centroids_and_cosines_match_loops():
    rng = np.random.RandomState(0)
    dense = rng.poisson(0.4, size=(30, 12)).astype(float)
    dense[3] = 0  # a row without a feature: no direction, cosine 0
    Y = (rng.rand(30, 6) < 0.3).astype(np.int8)
    Y[:, 4] = 0  # a label without a row: a zero centroid
    expected = brute_force_centroids(dense, Y)
    for X in (dense, sp.csr_matrix(dense)):
        centroids = input_centroids(X, sp.csr_matrix(Y))
        assert sp.isspmatrix_csc(centroids) and centroids.dtype == np.float32
        np.testing.assert_allclose(centroids.toarray(), expected, atol=1e-6)
        cosines = centroid_similarities(X, centroids)
        assert isinstance(cosines, torch.Tensor) and cosines.dtype == torch.float32
        np.testing.assert_allclose(cosines.numpy(), brute_force_cosines(dense, expected), atol=1e-6)
    assert not centroids[[4]].nnz


@pytest.mark.parametrize("block_entries", [2**21, 6, 1])
def test_centroid_similarities_of_zero_rows_and_unit_rows(monkeypatch, block_entries):
    """The same cosines whether the sparse products take all rows at once, or a row at a time
    (into the same output)."""
    monkeypatch.setattr(centroids_module, "SIMILARITY_BLOCK_ENTRIES", block_entries)
    centroids = input_centroids(np.eye(3), sp.csr_matrix(np.eye(3, dtype=np.int8)))
    rows = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    expected = np.array([[0, 0, 0], [1, 0, 0], [normalize([[1, 1]])[0, 0]] * 2 + [0]])
    np.testing.assert_allclose(centroid_similarities(rows, centroids).numpy(), expected, atol=1e-7)


def test_centroids_of_dense_rows_read_in_chunks():
    rng = np.random.RandomState(0)
    y = np.arange(300) % 6
    X = rng.normal(size=(6, 20))[y] + 0.5 * rng.normal(size=(300, 20))
    Y = sp.csr_matrix(np.eye(6, dtype=np.int8)[y])
    expected = brute_force_centroids(X, Y.toarray())
    with sklearn.config_context(working_memory=0.01):  # 10 KB: chunks of about 40 rows
        np.testing.assert_allclose(input_centroids(X, Y).toarray(), expected, atol=1e-6)


def test_centroids_state_holds_arrays_and_gives_back_the_matrix():
    centroids = input_centroids(np.eye(4)[[0, 1, 1, 3]], sp.csr_matrix(np.eye(4, dtype=np.int8)))
    state = centroids_state(centroids)
    assert all(isinstance(state[key], np.ndarray) for key in ("data", "indices", "indptr"))
    restored = centroids_from_state(state)
    assert sp.isspmatrix_csc(restored) and restored.shape == centroids.shape
    np.testing.assert_array_equal(restored.toarray(), centroids.toarray())
