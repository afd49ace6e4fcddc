"""Pair statistics and pair samplers for learning from pairs implied by class labels.

A labelled sample ``(X, y)`` implies ``n (n - 1) / 2`` pairs ``i < j``: *positive* (similar) pairs
whose items share a class and *negative* (dissimilar) pairs whose items do not. The learners of
skrank that work on pairs (:class:`~skrank.PointwiseROCSimilarity`, :class:`~skrank.MMC`) never loop
over pairs when a sufficient statistic exists:

* :class:`PairStatistics` accumulates, in one pass over chunks of data, the class sums and the Gram
  matrix from which the mean outer products over positive and negative pairs follow exactly, in
  ``O(n d^2)`` time and ``O(K d + d^2)`` memory;
* :func:`similar_pair_scatter` gives the mean of ``(x_i - x_j)(x_i - x_j)^T`` over positive pairs
  from the within-class scatter, also in ``O(n d^2)``.

Where the negative pairs are needed one by one (a non-linear function of each pair, as in MMC's
objective), they are either enumerated in blocks (:func:`iter_negative_pairs`) or replaced by an
*incomplete U-statistic* (Section 4 of Vogel, Bellet & Clémençon, 2018):

* :func:`sample_negative_pairs`: ``B`` negative pairs drawn uniformly with replacement from the
  set of all negative pairs;
* :func:`sample_negative_tuples`: ``B`` K-tuples holding one random item of each class, each giving
  its ``K (K - 1) / 2`` pairs, weighted ``n_k n_l / n_-`` so that the estimate is unbiased.

Every sampler returns a :class:`PairSample` whose weights sum to one, so that
``sum(weight * f(X[first], X[second]))`` estimates (or, for :func:`iter_negative_pairs` summed over
all blocks, equals) the mean of ``f`` over all negative pairs.
"""

from numbers import Integral
from typing import NamedTuple

import numpy as np
from scipy import sparse
from sklearn.utils import check_random_state

from ._utils import encode_labels

__all__ = [
    "PairSample",
    "PairStatistics",
    "count_pairs",
    "dissimilar_pair_scatter",
    "iter_negative_pairs",
    "negative_pair_outer_mean",
    "sample_negative_pairs",
    "sample_negative_tuples",
    "similar_pair_scatter",
]


class PairSample(NamedTuple):
    """Pairs of row indices with weights.

    Attributes
    ----------
    first : ndarray of shape (n_pairs,)
        Index of the first item of each pair.
    second : ndarray of shape (n_pairs,)
        Index of the second item of each pair.
    weight : ndarray of shape (n_pairs,)
        Weight of each pair. For a sampler the weights sum to one.
    """

    first: np.ndarray
    second: np.ndarray
    weight: np.ndarray


def _class_codes(y):
    """Encode labels as integers ``0..K-1`` and return ``(codes, counts)``."""
    if np.ndim(y) != 1:
        raise ValueError(f"y must be 1-dimensional, got an array of shape {np.shape(y)}.")
    if len(y) == 0:
        raise ValueError("y is empty: at least two items of two different classes are needed.")
    codes = encode_labels(y)
    return codes, np.bincount(codes)


def count_pairs(y):
    """Count the positive and the negative pairs ``i < j`` implied by class labels.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.

    Returns
    -------
    n_positive : int
        Number of pairs whose items share a class, ``sum_k n_k (n_k - 1) / 2``.
    n_negative : int
        Number of pairs whose items differ in class, ``sum_{k < l} n_k n_l``.

    Examples
    --------
    >>> from skrank.pairs import count_pairs
    >>> count_pairs([0, 0, 1, 1, 1])
    (4, 6)
    """
    _, counts = _class_codes(y)
    counts = counts.astype(np.int64)
    n = int(counts.sum())
    n_positive = int((counts * (counts - 1)).sum() // 2)
    return n_positive, n * (n - 1) // 2 - n_positive


def _check_negative_pairs_exist(counts):
    if counts.shape[0] < 2:
        raise ValueError(
            "Only one class is present in y: there are no negative (different-class) pairs. "
            "At least two classes are needed."
        )


def _check_n_draws(n_draws, name):
    if isinstance(n_draws, bool) or not isinstance(n_draws, Integral) or n_draws < 1:
        raise ValueError(f"{name} must be a positive integer, got {n_draws!r}.")
    return int(n_draws)


class PairStatistics:
    """Streaming sufficient statistics of all pairs of a labelled sample.

    Holds the number of items and the sum of the items of each class and the Gram matrix
    ``G = X^T X``. From these, with ``s_k`` the sum of class ``k`` and ``s`` the total sum,

    * ``sum_{i != j, y_i = y_j} x_i x_j^T = sum_k s_k s_k^T - G``,
    * ``sum_{i != j, y_i != y_j} x_i x_j^T = s s^T - sum_k s_k s_k^T``,

    so the mean outer products over positive and negative pairs cost ``O(n d^2)`` with no pair loop,
    and :meth:`update` can be called on successive chunks of data that do not fit in memory at
    once.

    Parameters
    ----------
    n_features : int
        Dimension of the items.

    Attributes
    ----------
    class_counts_ : ndarray of shape (n_classes,)
        Number of items seen in each class (class codes index the rows).
    class_sums_ : ndarray of shape (n_classes, n_features)
        Sum of the items of each class.
    gram_ : ndarray of shape (n_features, n_features)
        Sum of ``x x^T`` over all items seen.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.pairs import PairStatistics
    >>> X = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    >>> stats = PairStatistics(n_features=2).update(X, np.array([0, 0, 1]))
    >>> stats.positive_matrix()
    array([[0.8, 0.3],
           [0.3, 0. ]])
    """

    def __init__(self, n_features):
        self.n_features = int(n_features)
        self.class_counts_ = np.zeros(0, dtype=np.int64)
        self.class_sums_ = np.zeros((0, self.n_features))
        self.gram_ = np.zeros((self.n_features, self.n_features))

    def update(self, X, class_codes):
        """Add a chunk of items.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Items of the chunk.
        class_codes : ndarray of shape (n_samples,)
            Non-negative integer class code of each item. Codes must be consistent across calls
            (the estimators encode labels with their ``classes_``).

        Returns
        -------
        self : PairStatistics
            The updated statistics.
        """
        X = np.asarray(X, dtype=np.float64)
        class_codes = np.asarray(class_codes)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape (n_samples, {self.n_features}), got {X.shape}.")
        if class_codes.shape != (X.shape[0],):
            raise ValueError(
                f"class_codes must have shape ({X.shape[0]},), got {class_codes.shape}."
            )
        if class_codes.size and (class_codes.min() < 0 or class_codes.dtype.kind not in "iu"):
            raise ValueError("class_codes must be non-negative integers.")
        n_classes = int(class_codes.max()) + 1 if class_codes.size else 0
        if n_classes > self.class_counts_.shape[0]:
            extra = n_classes - self.class_counts_.shape[0]
            self.class_counts_ = np.concatenate([self.class_counts_, np.zeros(extra, np.int64)])
            self.class_sums_ = np.vstack([self.class_sums_, np.zeros((extra, self.n_features))])
        self.class_counts_ += np.bincount(class_codes, minlength=self.class_counts_.shape[0])
        # A sparse class-indicator product: O(n d) like np.add.at, about 8x faster at d = 784.
        indicator = sparse.csr_matrix(
            (np.ones(X.shape[0]), (class_codes, np.arange(X.shape[0]))),
            shape=(self.class_sums_.shape[0], X.shape[0]),
        )
        self.class_sums_ += indicator @ X
        self.gram_ += X.T @ X
        return self

    @property
    def n_samples(self):
        """Number of items seen."""
        return int(self.class_counts_.sum())

    @property
    def n_positive_pairs(self):
        """Number of positive pairs ``i < j`` among the items seen."""
        counts = self.class_counts_
        return int((counts * (counts - 1)).sum() // 2)

    @property
    def n_negative_pairs(self):
        """Number of negative pairs ``i < j`` among the items seen."""
        n = self.n_samples
        return n * (n - 1) // 2 - self.n_positive_pairs

    def _between_class_outer(self):
        return self.class_sums_.T @ self.class_sums_

    def positive_matrix(self):
        """Mean of ``(x_i x_j^T + x_j x_i^T) / 2`` over the positive pairs ``i < j``.

        This is the matrix ``P`` of the pointwise ROC problem: ``<P, A>`` is the mean bilinear
        score ``x_i^T A x_j`` over positive pairs for any symmetric ``A``.

        Returns
        -------
        P : ndarray of shape (n_features, n_features)
            Symmetric matrix.
        """
        if self.n_positive_pairs == 0:
            raise ValueError("No class has two items: there are no positive (same-class) pairs.")
        total = self._between_class_outer() - self.gram_
        return _symmetrize(total) / (2 * self.n_positive_pairs)

    def negative_matrix(self):
        """Mean of ``(x_i x_j^T + x_j x_i^T) / 2`` over the negative pairs ``i < j``.

        Returns
        -------
        N : ndarray of shape (n_features, n_features)
            Symmetric matrix.
        """
        if self.n_negative_pairs == 0:
            raise ValueError(
                "Only one class has been seen: there are no negative (different-class) pairs."
            )
        total_sum = self.class_sums_.sum(axis=0)
        total = np.outer(total_sum, total_sum) - self._between_class_outer()
        return _symmetrize(total) / (2 * self.n_negative_pairs)


def _symmetrize(matrix):
    return (matrix + matrix.T) / 2


def similar_pair_scatter(X, y):
    """Mean of ``(x_i - x_j)(x_i - x_j)^T`` over the positive pairs ``i < j``.

    Computed from the within-class scatter with no pair loop::

        sum_{i<j, y_i=y_j} (x_i - x_j)(x_i - x_j)^T
            = sum_k n_k sum_{i in k} (x_i - mu_k)(x_i - mu_k)^T

    For any ``A``, ``<S, A>`` is the mean squared Mahalanobis distance ``d_A^2`` over positive
    pairs.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Items.
    y : array-like of shape (n_samples,)
        Class labels.

    Returns
    -------
    scatter : ndarray of shape (n_features, n_features)
        Symmetric positive semi-definite matrix.
    n_positive : int
        Number of positive pairs it averages over.
    """
    X = np.asarray(X, dtype=np.float64)
    codes, counts = _class_codes(y)
    n_positive = int((counts * (counts - 1)).sum() // 2)
    if n_positive == 0:
        raise ValueError("No class has two items: there are no positive (same-class) pairs.")
    means = np.zeros((counts.shape[0], X.shape[1]))
    np.add.at(means, codes, X)
    means /= counts[:, None]
    centred = (X - means[codes]) * np.sqrt(counts[codes])[:, None]
    return _symmetrize(centred.T @ centred) / n_positive, n_positive


def _class_blocks(codes, counts):
    """Row indices sorted by class, and the start offset of each class block."""
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return order, starts


def sample_negative_pairs(y, n_pairs, random_state=None):
    """Draw negative pairs uniformly with replacement from all negative pairs.

    Uniform over pairs, not over anchors: the first item ``i`` is drawn with probability
    proportional to its number of negative partners ``n - n_{y_i}``, then the second uniformly
    among the items of other classes. Every ordered negative pair thus has probability
    ``1 / (2 n_-)``; a pair of classes ``(k, l)`` is drawn with probability ``n_k n_l / n_-``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.
    n_pairs : int
        Number of pairs ``B`` to draw.
    random_state : int, RandomState instance or None, default=None
        Seed or generator.

    Returns
    -------
    sample : PairSample
        ``B`` pairs with weights ``1 / B``.

    Examples
    --------
    >>> from skrank.pairs import sample_negative_pairs
    >>> sample = sample_negative_pairs([0, 0, 1, 2], n_pairs=3, random_state=0)
    >>> len(sample.first), float(sample.weight.sum())
    (3, 1.0)
    """
    n_pairs = _check_n_draws(n_pairs, "n_pairs")
    codes, counts = _class_codes(y)
    _check_negative_pairs_exist(counts)
    rng = check_random_state(random_state)
    n = codes.shape[0]
    partners = n - counts[codes]
    first = rng.choice(n, size=n_pairs, p=partners / partners.sum())
    order, starts = _class_blocks(codes, counts)
    first_class = codes[first]
    # Position among the items of the other classes, in class-sorted order, skipping the block of
    # the first item's class.
    position = (rng.random_sample(n_pairs) * partners[first]).astype(np.int64)
    position = np.minimum(position, partners[first] - 1)
    position += np.where(position >= starts[first_class], counts[first_class], 0)
    second = order[position]
    return PairSample(first, second, np.full(n_pairs, 1.0 / n_pairs))


def sample_negative_tuples(y, n_tuples, random_state=None):
    """Draw K-tuples (one random item per class) and weight their pairs to be unbiased.

    Each of the ``B`` tuples holds one item drawn uniformly from each of the ``K`` classes and
    yields its ``K (K - 1) / 2`` pairs; the pair of classes ``(k, l)`` gets weight
    ``n_k n_l / (n_- B)``, so the weighted sum over the sample is an unbiased estimate of the mean
    over all negative pairs (the incomplete generalised K-sample U-statistic of Section 4 of Vogel,
    Bellet & Clémençon, 2018). The sample holds ``B K (K - 1) / 2`` pairs, balanced across class
    pairs: use it when classes are few.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.
    n_tuples : int
        Number of tuples ``B`` to draw.
    random_state : int, RandomState instance or None, default=None
        Seed or generator.

    Returns
    -------
    sample : PairSample
        ``B K (K - 1) / 2`` pairs whose weights sum to one.

    Examples
    --------
    >>> from skrank.pairs import sample_negative_tuples
    >>> sample = sample_negative_tuples([0, 0, 1, 2], n_tuples=2, random_state=0)
    >>> len(sample.first), round(float(sample.weight.sum()), 12)
    (6, 1.0)
    """
    n_tuples = _check_n_draws(n_tuples, "n_tuples")
    codes, counts = _class_codes(y)
    _check_negative_pairs_exist(counts)
    rng = check_random_state(random_state)
    order, starts = _class_blocks(codes, counts)
    offsets = (rng.random_sample((n_tuples, counts.shape[0])) * counts).astype(np.int64)
    tuples = order[starts + np.minimum(offsets, counts - 1)]
    class_first, class_second = np.triu_indices(counts.shape[0], k=1)
    counts = counts.astype(np.float64)
    pair_weight = counts[class_first] * counts[class_second]
    pair_weight /= pair_weight.sum() * n_tuples
    return PairSample(
        tuples[:, class_first].ravel(),
        tuples[:, class_second].ravel(),
        np.tile(pair_weight, n_tuples),
    )


def iter_negative_pairs(y, max_pairs_per_block=1_000_000):
    """Enumerate all negative pairs ``i < j`` in blocks of bounded size.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.
    max_pairs_per_block : int, default=1_000_000
        Bound on the number of candidate pairs examined per block (memory bound). A block covers
        consecutive rows ``i`` of the upper triangle, at least one row.

    Yields
    ------
    block : PairSample
        Negative pairs with weight ``1 / n_-`` each; the weights of all blocks sum to one.
    """
    max_pairs_per_block = _check_n_draws(max_pairs_per_block, "max_pairs_per_block")
    codes, counts = _class_codes(y)
    _check_negative_pairs_exist(counts)
    n = codes.shape[0]
    weight = 1.0 / count_pairs(codes)[1]
    rows_per_block = max(1, max_pairs_per_block // n)
    columns = np.arange(n)
    for start in range(0, n - 1, rows_per_block):
        rows = np.arange(start, min(start + rows_per_block, n - 1))
        negative = (columns > rows[:, None]) & (codes[None, :] != codes[rows, None])
        first, second = np.nonzero(negative)
        if first.shape[0]:
            yield PairSample(rows[first], second, np.full(first.shape[0], weight))


def negative_pair_outer_mean(X, sample, *, max_gathered=2**24):
    """Weighted mean of ``(x_i x_j^T + x_j x_i^T) / 2`` over sampled pairs.

    With a sample from :func:`sample_negative_pairs` or :func:`sample_negative_tuples` this is an
    unbiased estimate of :meth:`PairStatistics.negative_matrix`.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Items.
    sample : PairSample
        Pairs and weights (weights summing to one).
    max_gathered : int, default=2**24
        Bound on the number of values gathered from ``X`` at once: pairs are processed in chunks
        of ``max_gathered // n_features`` (16M values, 128 MiB per gathered side by default).

    Returns
    -------
    N : ndarray of shape (n_features, n_features)
        Symmetric matrix.
    """
    X = np.asarray(X, dtype=np.float64)
    chunk = max(1, max_gathered // max(X.shape[1], 1))
    total = np.zeros((X.shape[1], X.shape[1]))
    for start in range(0, sample.first.shape[0], chunk):
        part = slice(start, start + chunk)
        weighted_first = X[sample.first[part]] * sample.weight[part, None]
        total += weighted_first.T @ X[sample.second[part]]
    return _symmetrize(total)


def dissimilar_pair_scatter(X, y):
    """Mean of ``(x_i - x_j)(x_i - x_j)^T`` over the negative pairs ``i < j``.

    Computed with no pair loop from the total and the within-class scatter:
    ``sum_{i<j} (x_i - x_j)(x_i - x_j)^T = n sum_i (x_i - mu)(x_i - mu)^T``, minus the positive
    pairs' share (see :func:`similar_pair_scatter`). For any ``A``, ``<D, A>`` is the mean squared
    Mahalanobis distance ``d_A^2`` over negative pairs.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Items.
    y : array-like of shape (n_samples,)
        Class labels.

    Returns
    -------
    scatter : ndarray of shape (n_features, n_features)
        Symmetric positive semi-definite matrix.
    n_negative : int
        Number of negative pairs it averages over.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.pairs import dissimilar_pair_scatter
    >>> scatter, n_negative = dissimilar_pair_scatter(np.array([[0.0], [1.0], [3.0]]), [0, 0, 1])
    >>> scatter, n_negative
    (array([[6.5]]), 2)
    """
    X = np.asarray(X, dtype=np.float64)
    codes, counts = _class_codes(y)
    _check_negative_pairs_exist(counts)
    n_positive, n_negative = count_pairs(codes)
    centred = X - X.mean(axis=0)
    total = X.shape[0] * (centred.T @ centred)
    if n_positive:
        total -= n_positive * similar_pair_scatter(X, codes)[0]
    return _symmetrize(total) / n_negative, n_negative
