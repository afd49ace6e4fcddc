"""The nearest-centroid rule of the input space, blended with label scores at prediction.

Each label's centroid is the sum of its training rows, each scaled to unit norm, scaled to unit
norm in turn; an input scores a label by the cosine of its row and the label's centroid (the
Rocchio classifier, and the label representation that PECOS calls PIFA).
:class:`~skrank.multilabel.SNMClassifier` adds these cosines to its label scores at prediction
(``centroid_weight``); training is unchanged.
"""

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize

from ..utils._memory import chunk_rows

# Entries of a block of the sparse products of centroid_similarities (16-24 MiB of them).
SIMILARITY_BLOCK_ENTRIES = 2**21


def input_centroids(X, positives):
    """Each label's centroid of its unit-norm input rows, scaled to unit norm.

    Parameters
    ----------
    X : ndarray, scipy.sparse matrix or memory-mapped rows of shape (n_samples, n_features)
        Input rows (dense rows are read in chunks).
    positives : scipy.sparse matrix of shape (n_samples, n_labels)
        Positive-label indicator.

    Returns
    -------
    centroids : scipy.sparse.csc_matrix of shape (n_labels, n_features), float32
        Unit rows; zero rows for labels without an example. Compressed by column (feature),
        as :func:`centroid_similarities` reads them.
    """
    positives = sp.csr_matrix(positives)
    n_samples, n_features = X.shape
    rows_per_chunk = n_samples if sp.issparse(X) else chunk_rows(n_samples, 12 * n_features)
    sums = None
    for start in range(0, n_samples, rows_per_chunk):
        stop = start + rows_per_chunk
        rows = normalize(sp.csr_matrix(X[start:stop], dtype=np.float32))
        part = sp.csr_matrix(positives[start:stop].T, dtype=np.float32) @ rows
        sums = part if sums is None else sums + part
    centroids = normalize(sums).astype(np.float32).tocsc()
    centroids.sort_indices()
    return centroids


def centroid_similarities(X, centroids):
    """The cosine similarity of each row of ``X`` with each centroid.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        Input rows (any norm: they are scaled to unit norm here; zero rows score 0).
    centroids : scipy.sparse.csc_matrix of shape (n_labels, n_features)
        Unit rows (:func:`input_centroids`); another sparse format is converted on each call.

    Returns
    -------
    similarities : torch.Tensor of shape (n_samples, n_labels), float32
    """
    rows = normalize(sp.csr_matrix(X, dtype=np.float32))
    # A CSC matrix's transpose is a CSR matrix, with no copy: the product costs the row's
    # features' labels, whatever the number of rows.
    by_feature = sp.csc_matrix(centroids).T
    similarities = np.empty((rows.shape[0], by_feature.shape[1]), dtype=np.float32)
    # Blocks of rows whose sparse products hold at most SIMILARITY_BLOCK_ENTRIES entries: the
    # products of a whole chunk would take about twice the memory of its dense result
    # (measured: 239 against 128 MB for 525 rows and 31,913 labels), and took longer.
    step = max(1, SIMILARITY_BLOCK_ENTRIES // max(1, by_feature.shape[1]))
    for start in range(0, rows.shape[0], step):
        (rows[start : start + step] @ by_feature).toarray(out=similarities[start : start + step])
    return torch.from_numpy(similarities)


def centroids_state(centroids):
    """The arrays of a CSC matrix of centroids, as saved (numpy arrays: skops then trusts the
    file without scipy's classes)."""
    return {
        "data": centroids.data,
        "indices": centroids.indices,
        "indptr": centroids.indptr,
        "shape": list(centroids.shape),
    }


def centroids_from_state(state):
    """The CSC matrix of :func:`centroids_state`'s arrays."""
    arrays = (state["data"], state["indices"], state["indptr"])
    return sp.csc_matrix(arrays, shape=tuple(state["shape"]))
