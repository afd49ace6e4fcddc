"""Negative labels for Stochastic Negative Mining, drawn at a cost independent of the label count.

One sample of labels is shared by all examples of a mini-batch (so the scores of a batch are one
matrix product with the sampled rows of the class table) and each example's own positive labels
are masked out of it. The sample is large enough, and the masking chosen, so that every example
still receives exactly ``min(B, K - |P_i|)`` negatives drawn uniformly without replacement from its
non-positive labels, where ``P_i`` is its set of positive labels: the shared sample changes the
joint distribution across the examples of a batch, never the distribution of any one example's
negatives.
"""

from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

__all__ = ["NegativeLabelSampler", "draw_positive_labels", "sample_distinct_labels"]


def sample_distinct_labels(n_labels, size, random_state=None):
    """``size`` distinct labels of ``range(n_labels)`` in uniformly random order.

    Every ordered selection of ``size`` distinct labels is equally likely. The cost does not grow
    with ``n_labels``: for ``size <= n_labels / 2`` the labels are the first distinct values of a
    stream of uniform draws (expected fewer than ``1.4 * size`` draws); otherwise a permutation of
    ``range(n_labels)``, at most twice ``size``.

    Parameters
    ----------
    n_labels : int
        Number of labels ``K``.
    size : int
        Number of labels to draw, ``0 <= size <= n_labels``.
    random_state : int, RandomState instance or None, default=None
        Seed or generator.

    Returns
    -------
    labels : ndarray of shape (size,), dtype int64

    Examples
    --------
    >>> from skrank.sampling import sample_distinct_labels
    >>> labels = sample_distinct_labels(10**9, 5, random_state=0)
    >>> labels.shape, len(set(labels.tolist()))
    ((5,), 5)
    """
    rng = check_random_state(random_state)
    if not (isinstance(size, Integral) and isinstance(n_labels, Integral)) or not (
        0 <= size <= n_labels
    ):
        raise ValueError(f"Cannot draw {size!r} distinct labels out of {n_labels!r}.")
    if 2 * size > n_labels:
        return rng.permutation(n_labels)[:size].astype(np.int64, copy=False)
    # Expected number of draws to see `size` distinct labels, plus a margin of a few standard
    # deviations, so that one round almost always suffices.
    n_draws = int(-n_labels * np.log1p(-size / n_labels)) + int(3 * np.sqrt(size)) + 8
    draws = rng.randint(0, n_labels, size=n_draws, dtype=np.int64)
    values, first_seen = np.unique(draws, return_index=True)
    while values.size < size:
        draws = np.concatenate([draws, rng.randint(0, n_labels, size=n_draws, dtype=np.int64)])
        values, first_seen = np.unique(draws, return_index=True)
    return values[np.argsort(first_seen)[:size]]


def _positive_lists(positives):
    """(indptr, indices) of each example's positive labels, from 1-D labels or a sparse matrix."""
    if sp.issparse(positives):
        positives = sp.csr_matrix(positives)
        positives.eliminate_zeros()
        return positives.indptr, positives.indices.astype(np.int64, copy=False)
    positives = np.asarray(positives)
    if positives.ndim != 1 or positives.dtype.kind not in "iu":
        raise ValueError(
            "positives must be a 1-D array of integer labels (one positive per example) or a "
            "sparse indicator matrix of the examples' positive labels."
        )
    return np.arange(positives.shape[0] + 1), positives.astype(np.int64, copy=False)


class NegativeLabelSampler:
    """Shared negative labels for a mini-batch, each example's positives masked.

    Each call draws ``m = min(K, B + max_i |P_i|)`` distinct labels in random order
    (:func:`sample_distinct_labels`), shared by the whole batch; example ``i`` takes as its
    negatives the first ``B`` of them that are not among its positive labels ``P_i``. Because the
    sample is a uniformly random ordered selection, these are ``min(B, K - |P_i|)`` labels drawn
    uniformly without replacement from ``Y \\ P_i``, exactly as if each example had sampled alone
    (Algorithm 1 of Reddi et al., 2019). The cost of a call is
    ``O(m log m + nnz(P) log m + n m)``, independent of ``K``.

    Parameters
    ----------
    n_labels : int
        Number of labels ``K``.
    n_negatives : int
        Number ``B`` of negatives per example, ``1 <= B <= K - 1``.
    random_state : int, RandomState instance or None, default=None
        Seed or generator; successive calls draw successive samples.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.sampling import NegativeLabelSampler
    >>> sampler = NegativeLabelSampler(n_labels=1000, n_negatives=8, random_state=0)
    >>> labels, mask = sampler.sample(np.array([3, 17, 3]))
    >>> mask.sum(axis=1)
    array([8, 8, 8])
    >>> bool(np.any((labels[None, :] == np.array([[3], [17], [3]])) & mask))
    False
    """

    def __init__(self, n_labels, n_negatives, random_state=None):
        if not isinstance(n_labels, Integral) or n_labels < 2:
            raise ValueError(f"n_labels must be an integer >= 2, got {n_labels!r}.")
        if not isinstance(n_negatives, Integral) or not 1 <= n_negatives <= n_labels - 1:
            raise ValueError(
                f"n_negatives must be an integer in [1, n_labels - 1 = {n_labels - 1}], "
                f"got {n_negatives!r}."
            )
        self.n_labels = int(n_labels)
        self.n_negatives = int(n_negatives)
        self._rng = check_random_state(random_state)

    def sample(self, positives):
        """Draw the shared negatives of one batch.

        Parameters
        ----------
        positives : array-like of int of shape (n_samples,), or sparse matrix (n_samples, K)
            The positive label of each example, or an indicator matrix of all its positive
            labels (multilabel: every positive label is excluded from its negatives).

        Returns
        -------
        labels : ndarray of shape (m,), dtype int64
            The shared sample of distinct labels.
        mask : ndarray of shape (n_samples, m), dtype bool
            ``mask[i, j]``: ``labels[j]`` is one of the ``B`` negatives of example ``i``.
        """
        indptr, indices = _positive_lists(positives)
        if indices.size and (indices.min() < 0 or indices.max() >= self.n_labels):
            raise ValueError(f"Positive labels must lie in [0, {self.n_labels}).")
        n_samples = indptr.shape[0] - 1
        max_positives = int(np.diff(indptr).max()) if n_samples else 0
        size = min(self.n_labels, self.n_negatives + max_positives)
        labels = sample_distinct_labels(self.n_labels, size, self._rng)

        order = np.argsort(labels)
        positions = np.clip(np.searchsorted(labels[order], indices), 0, size - 1)
        in_sample = labels[order][positions] == indices
        rows = np.repeat(np.arange(n_samples), np.diff(indptr))[in_sample]
        columns = order[positions[in_sample]]
        # Example i keeps the columns before its cutoff that are not its positives. A positive
        # at column c, the r-th (from 0) of its row by column, lies before the cutoff iff fewer
        # than B negatives precede it (c - r < B); the cutoff is B plus the number of those.
        by_row_column = np.lexsort((columns, rows))
        rows, columns = rows[by_row_column], columns[by_row_column]
        row_starts = np.searchsorted(rows, rows)
        rank = np.arange(rows.size) - row_starts
        before = columns - rank < self.n_negatives
        cutoff = self.n_negatives + np.bincount(rows[before], minlength=n_samples)
        mask = np.arange(size)[None, :] < cutoff[:, None]
        mask[rows, columns] = False
        return labels, mask


def draw_positive_labels(indicator, random_state=None):
    """One positive label per row, drawn uniformly among the row's positive labels.

    The paper's protocol for multilabel data: each time an example is visited (once per epoch),
    it is paired with one of its positive labels chosen uniformly at random.

    Parameters
    ----------
    indicator : sparse matrix of shape (n_samples, K)
        Positive-label indicator; every row needs at least one positive.
    random_state : int, RandomState instance or None, default=None
        Seed or generator.

    Returns
    -------
    labels : ndarray of shape (n_samples,), dtype int64
    """
    rng = check_random_state(random_state)
    indptr, indices = _positive_lists(indicator)
    counts = np.diff(indptr)
    if np.any(counts == 0):
        raise ValueError("Every row needs at least one positive label.")
    offsets = np.floor(rng.random_sample(counts.shape[0]) * counts).astype(np.int64)
    return indices[indptr[:-1] + offsets]
