"""The neighbours' label votes and their blend with the label scores, against dense
brute-force references."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import brute_force_top_k
from sklearn import config_context
from sklearn.preprocessing import normalize
from snm_data import brute_force_votes

from skrank.multilabel._neighbors import blend_dense, blended_top_k, neighbor_votes
from skrank.sampling._labels import positive_table

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("working_memory", [1024, 1e-5])  # 1e-5 MiB: one pair per block
def test_blended_top_k_matches_a_full_sort_of_the_dense_blend_with_ties(working_memory):
    rng = np.random.RandomState(0)
    n, n_labels, dim, k = 9, 13, 3, 4
    embeddings = torch.tensor(rng.randint(-2, 3, size=(n, dim)), dtype=torch.float32)
    table = torch.tensor(rng.randint(-2, 3, size=(n_labels, dim)), dtype=torch.float32)
    keys = normalize(rng.randint(-2, 3, size=(7, dim)).astype(float) + 0.01)
    Y_keys = (rng.rand(7, n_labels) < 0.3).astype(np.int8)
    Y_keys[:, 0] = 1  # one label every neighbour votes for
    table_labels, counts = positive_table(sp.csr_matrix(Y_keys), n_labels)
    votes = neighbor_votes(
        embeddings, torch.tensor(keys, dtype=torch.float32), table_labels, counts, 3, n_labels
    )
    expected_votes = brute_force_votes(embeddings.numpy(), keys, Y_keys, 3)
    np.testing.assert_allclose(votes.to_dense().numpy(), expected_votes, atol=1e-6)
    scores = (embeddings @ table.T).numpy()
    blocks = []  # the number of labels of each call of label_vectors
    for weight in (0.0, 0.5, 1.0):
        dense = (1 - weight) * scores + weight * 2.0 * votes.to_dense().numpy()
        np.testing.assert_allclose(
            blend_dense(torch.tensor(scores), votes, weight, 2.0).numpy(), dense, atol=1e-6
        )
        candidates = torch.tensor(brute_force_top_k(scores, k))
        blocks.clear()
        with config_context(working_memory=working_memory):
            top_scores, top_labels = blended_top_k(
                embeddings,
                lambda labels: blocks.append(len(labels)) or table[labels],
                candidates,
                votes,
                weight,
                2.0,
                k,
            )
        # each (row, label) pair of the candidates and the voted labels read once
        pairs = set(map(tuple, votes.indices().T.tolist()))
        pairs |= {(row, int(label)) for row in range(n) for label in candidates[row]}
        assert sum(blocks) == len(pairs)
        assert len(blocks) == (1 if working_memory == 1024 else len(pairs))
        expected = brute_force_top_k(dense.astype(np.float32), k)
        np.testing.assert_array_equal(top_labels.numpy(), expected)
        np.testing.assert_allclose(
            top_scores.numpy(), np.take_along_axis(dense, expected, axis=1), atol=1e-6
        )
