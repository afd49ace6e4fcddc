"""Pair scores of a bilinear similarity and its decision threshold at a target false-positive rate.

A pair is called similar when its score exceeds the threshold, so a threshold at false-positive
rate ``fpr`` is a value that at most a fraction ``fpr`` of the negative (different-class) pairs
exceed. The negative pairs are those of a labelled sample: all of them when they are few, else a
large uniform sample of them (:func:`negative_pair_similarities`). A stream seen through
``partial_fit`` is represented by a uniform sample of its items (:class:`ItemReservoir`).
"""

import numpy as np

from ..sampling import count_pairs, iter_negative_pairs, sample_negative_pairs
from ..utils._memory import chunk_rows

# Threshold calibration: the exact quantile over all negative pairs up to this many pairs, beyond
# it the quantile over this many pairs drawn uniformly with replacement.
CALIBRATION_PAIRS = 250_000
# Items kept from a stream to calibrate the threshold after partial_fit.
RESERVOIR_ITEMS = 2_000


def bilinear_similarity(X1, X2, A):
    """Row-wise similarity ``(1 + x1_i^T A x2_i) / 2``.

    Parameters
    ----------
    X1, X2 : ndarray of shape (n_pairs, n_features)
        First and second items of each pair.
    A : ndarray of shape (n_features, n_features)
        The matrix of the similarity.

    Returns
    -------
    similarity : ndarray of shape (n_pairs,)
    """
    return (1.0 + np.einsum("ij,ij->i", X1 @ A, X2)) / 2.0


def given_pair_similarities(pairs, rows, A):
    """Similarities ``(1 + x1^T A x2) / 2`` of given pairs, computed in chunks of pairs.

    Parameters
    ----------
    pairs : GivenPairs
        The pairs (:func:`~skrank.similarity._given_pairs.check_pairs`).
    rows : ndarray or rows read on demand, of shape (n_rows, n_features)
        The pairs' items as the similarity sees them (e.g. normalised on demand).
    A : ndarray of shape (n_features, n_features)
        The matrix of the similarity.

    Returns
    -------
    similarity : ndarray of shape (n_pairs,)
    """
    similarity = np.empty(pairs.n_pairs)
    for part in pairs.chunks():
        similarity[part] = bilinear_similarity(*pairs.items(part, rows), A)
    return similarity


def bilinear_similarity_matrix(X, Y, A):
    """Matrix of similarities ``(1 + x_i^T A y_j) / 2``.

    Parameters
    ----------
    X : ndarray of shape (n_samples_X, n_features)
    Y : ndarray of shape (n_samples_Y, n_features)
    A : ndarray of shape (n_features, n_features)

    Returns
    -------
    similarity : ndarray of shape (n_samples_X, n_samples_Y)
    """
    return (1.0 + (X @ A) @ Y.T) / 2.0


def negative_pair_similarities(X, class_codes, A, *, max_pairs=None, random_state=None):
    """Similarities of the negative pairs of a labelled sample, all of them or a uniform sample.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Items.
    class_codes : ndarray of shape (n_samples,)
        Integer class codes.
    A : ndarray of shape (n_features, n_features)
        The matrix of the similarity.
    max_pairs : int or None, default=None
        With at most this many negative pairs, all of them are scored (in blocks sized from
        scikit-learn's ``working_memory``); otherwise ``max_pairs`` negative pairs drawn
        uniformly with replacement. None: 250,000, the pairs PointwiseROCSimilarity calibrates
        its threshold on.
    random_state : int, RandomState instance or None, default=None
        Seed of the pair sample.

    Returns
    -------
    similarities : ndarray of shape (min(n_negative_pairs, max_pairs),)
    """
    max_pairs = CALIBRATION_PAIRS if max_pairs is None else max_pairs
    XA = X @ A
    if count_pairs(class_codes)[1] <= max_pairs:
        blocks = []
        for block in iter_negative_pairs(class_codes):
            first_row = block.first[0]
            rows = XA[first_row : block.first[-1] + 1] @ X.T
            blocks.append(rows[block.first - first_row, block.second])
        scores = np.concatenate(blocks)
    else:
        sample = sample_negative_pairs(class_codes, max_pairs, random_state)
        chunk = chunk_rows(max_pairs, 16 * X.shape[1] + 8)
        parts = [slice(start, start + chunk) for start in range(0, max_pairs, chunk)]
        scores = np.concatenate(
            [np.einsum("ij,ij->i", XA[sample.first[p]], X[sample.second[p]]) for p in parts]
        )
    return (1.0 + scores) / 2.0


def threshold_at_fpr(negative_scores, fpr):
    """Smallest score ``t`` that at most a fraction ``fpr`` of the negative scores exceed.

    Calling a pair similar when its score is ``> t`` then has a false-positive rate of at most
    ``fpr`` on these negatives (less when scores are tied at ``t``).

    Parameters
    ----------
    negative_scores : ndarray of shape (n_negatives,)
        Scores of negative pairs.
    fpr : float
        Target false-positive rate in (0, 1).

    Returns
    -------
    threshold : float
        The ``(floor(fpr * n_negatives) + 1)``-th largest negative score.

    Examples
    --------
    >>> import numpy as np
    >>> threshold_at_fpr(np.array([0.1, 0.4, 0.3, 0.2]), fpr=0.25)
    0.3
    """
    n_negatives = negative_scores.shape[0]
    n_allowed = int(np.floor(fpr * n_negatives))
    rank = n_negatives - n_allowed - 1
    return float(np.partition(negative_scores, rank)[rank])


class ItemReservoir:
    """Uniform sample without replacement of at most ``capacity`` items of a stream.

    Algorithm R (Vitter, 1985): the first ``capacity`` items are kept; item ``t`` (0-based) then
    replaces a uniformly chosen kept item with probability ``capacity / (t + 1)``. After any number
    of updates, the kept items are a uniform sample of all items seen.

    Parameters
    ----------
    capacity : int
        Largest number of items kept.
    n_features : int
        Dimension of the items.

    Attributes
    ----------
    items : ndarray of shape (n_kept, n_features)
    class_codes : ndarray of shape (n_kept,)
    n_seen : int
        Number of items seen.
    """

    def __init__(self, capacity, n_features):
        self.capacity = capacity
        self.items = np.empty((0, n_features))
        self.class_codes = np.empty(0, dtype=np.int64)
        self.n_seen = 0

    def update(self, X, class_codes, random_state):
        """Offer a chunk of items; ``random_state`` is a ``numpy.random.RandomState``."""
        n_free = min(self.capacity - self.items.shape[0], X.shape[0])
        self.items = np.vstack([self.items, X[:n_free]])
        self.class_codes = np.concatenate([self.class_codes, class_codes[:n_free]])
        position = self.n_seen + np.arange(n_free, X.shape[0])
        slot = (random_state.random_sample(position.shape[0]) * (position + 1)).astype(np.int64)
        replaces = np.flatnonzero(slot < self.capacity)
        # When several items of the chunk replace the same slot, the last one stays.
        last_slot, last_index = np.unique(slot[replaces][::-1], return_index=True)
        source = n_free + replaces[::-1][last_index]
        self.items[last_slot] = X[source]
        self.class_codes[last_slot] = class_codes[source]
        self.n_seen += X.shape[0]
        return self
