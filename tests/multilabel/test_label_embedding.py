"""LabelEmbeddingNetwork's start: the principal directions of the inputs, and the label
centroids of the input embeddings."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn import config_context
from snm_data import bag_of_words

from skrank.multilabel._label_embedding import (
    LabelEmbeddingNetwork,
    principal_input_directions,
    start_at_centroids,
)
from skrank.multilabel._targets import one_hot

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_principal_input_directions_span_inputs_and_centroids():
    X, y = bag_of_words(n_samples=60, n_features=30)
    positives = one_hot(y, 12)
    inputs = X.toarray() / np.linalg.norm(X.toarray(), axis=1, keepdims=True)
    centroids = positives.T @ inputs
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    stacked = np.vstack([centroids, inputs])
    # enough directions: the input space is kept exactly, extra rows are tiny
    full = principal_input_directions(X, positives, 40, random_state=0)
    assert full.shape == (40, 30)
    np.testing.assert_allclose(full[:30] @ full[:30].T, np.eye(30), atol=1e-10)
    np.testing.assert_allclose(stacked @ full[:30].T @ full[:30], stacked, atol=1e-10)
    assert np.abs(full[30:]).max() < 1e-2
    # fewer: the top right singular vectors of [centroids; inputs] (same subspace)
    few = principal_input_directions(X, positives, 5, random_state=0)
    top = np.linalg.svd(stacked)[2][:5]
    np.testing.assert_allclose(few.T @ few, top.T @ top, atol=5e-3)  # randomised SVD


@pytest.mark.parametrize("sparse_input", [False, True])
def test_the_centroid_start_is_each_labels_mean_embedding_read_in_any_chunks(sparse_input):
    X, y = bag_of_words()
    X = sp.csr_matrix(X, dtype=np.float32)
    positives = np.eye(12, dtype=np.float32)[y]
    positives[::3, 0] = 1.0  # rows of two labels
    positives = sp.csr_matrix(positives)
    tables = []
    for working_memory in (1024, 1e-3):  # 1e-3 MiB: a row or two a chunk
        torch.manual_seed(0)
        network = LabelEmbeddingNetwork(
            X.shape[1], 12, n_components=8, hidden_layer_sizes=(), sparse_input=sparse_input
        )
        with config_context(working_memory=working_memory):
            start_at_centroids(network, X, positives, encoder_init="random", seed=0)
        tables.append(network.label_embeddings.weight.detach().numpy().copy())
    # The sparse layer sums each row's features alone; a dense layer's products may round
    # differently in blocks of other sizes.
    np.testing.assert_allclose(tables[0], tables[1], rtol=0, atol=0 if sparse_input else 1e-6)
    with torch.no_grad():
        network.eval()
        embeddings = network.encoder(torch.as_tensor(X.toarray())).numpy()
    dense = positives.toarray()
    means = dense.T @ embeddings / dense.sum(axis=0)[:, None]
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    np.testing.assert_allclose(tables[1], means, atol=1e-5)
