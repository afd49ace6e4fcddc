"""Pair statistics: exact means over all pairs implied by class labels, with no pair loop.

The learners of skrank that work on pairs (:class:`~skrank.PointwiseROCSimilarity`,
:class:`~skrank.MMC`) never loop over pairs when a sufficient statistic exists:

* :class:`PairStatistics` accumulates, in one pass over chunks of data, the class sums and the Gram
  matrix from which the mean outer products over positive and negative pairs follow exactly, in
  ``O(n d^2)`` time and ``O(K d + d^2)`` memory;
* :func:`similar_pair_scatter` and :func:`dissimilar_pair_scatter` give the means of
  ``(x_i - x_j)(x_i - x_j)^T`` over positive and negative pairs from the within-class and total
  scatter, also in ``O(n d^2)``;
* :func:`negative_pair_outer_mean` is the weighted mean of the outer products over a sample of
  pairs (:mod:`skrank.sampling`), an incomplete U-statistic.
"""

import numpy as np
from scipy import sparse

from ..sampling._pairs import class_codes, count_pairs
from ..utils._docstrings import fill_docs
from ..utils._memory import chunk_rows

#: Docstring entries of the pair statistics (``fill_docs``): the items and labels they read, and
#: the scatter they return; ``scatter_sections`` is the two scatters' Parameters and Returns.
PAIR_STATISTICS_DOCS = {
    "items": ("X", "ndarray of shape (n_samples, n_features)", "Items."),
    "class_labels": ("y", "array-like of shape (n_samples,)", "Class labels."),
    "scatter": (
        "scatter",
        "ndarray of shape (n_features, n_features)",
        "Symmetric positive semi-definite matrix.",
    ),
}
PAIR_STATISTICS_DOCS["scatter_sections"] = {
    "Parameters": [PAIR_STATISTICS_DOCS["items"], PAIR_STATISTICS_DOCS["class_labels"]],
    "Returns": [PAIR_STATISTICS_DOCS["scatter"]],
}

__all__ = [
    "PairStatistics",
    "PreparedRows",
    "dissimilar_pair_scatter",
    "negative_pair_outer_mean",
    "pair_chunks",
    "pair_difference_scatter",
    "similar_pair_scatter",
]


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
    >>> from skrank.similarity import PairStatistics
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
        self._grow(int(class_codes.max()) + 1 if class_codes.size else 0)
        self.class_counts_ += np.bincount(class_codes, minlength=self.class_counts_.shape[0])
        # A sparse class-indicator product: O(n d) like np.add.at, about 8x faster at d = 784.
        indicator = sparse.csr_matrix(
            (np.ones(X.shape[0]), (class_codes, np.arange(X.shape[0]))),
            shape=(self.class_sums_.shape[0], X.shape[0]),
        )
        self.class_sums_ += indicator @ X
        self.gram_ += _checked_gram(X)
        return self

    def merge(self, other):
        """Add the statistics of other items, e.g. of another chunk computed elsewhere.

        Exact: the statistics of a data set are the sum of those of its parts, in any order and
        grouping (up to floating-point rounding), so chunks can be reduced in a tree on a dask
        scheduler.

        Parameters
        ----------
        other : PairStatistics
            Statistics of other items, with the same class codes.

        Returns
        -------
        self : PairStatistics
            The merged statistics.
        """
        if other.n_features != self.n_features:
            raise ValueError(
                f"Cannot merge statistics of {other.n_features} features into statistics of "
                f"{self.n_features} features."
            )
        n_classes = other.class_counts_.shape[0]
        self._grow(n_classes)
        self.class_counts_[:n_classes] += other.class_counts_
        self.class_sums_[:n_classes] += other.class_sums_
        self.gram_ += other.gram_
        return self

    def _grow(self, n_classes):
        """Make room for the class codes below ``n_classes``."""
        extra = n_classes - self.class_counts_.shape[0]
        if extra > 0:
            self.class_counts_ = np.concatenate([self.class_counts_, np.zeros(extra, np.int64)])
            self.class_sums_ = np.vstack([self.class_sums_, np.zeros((extra, self.n_features))])

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


def _checked_gram(X):
    """``X^T X``, or a ValueError naming ``X`` when its products over- or underflow float64."""
    with np.errstate(over="ignore", under="ignore"):  # an error below says what happened
        gram = X.T @ X
    if np.all(np.isfinite(gram)) and (np.any(gram != 0) or not np.any(X)):
        return gram
    largest = float(np.max(np.abs(X)))
    what = "overflow" if largest > 1 else "underflow to zero"
    raise ValueError(
        f"X has values of magnitude {largest:.3g}, whose products {what} in float64, so the "
        "pair statistics (sums of x_i x_j^T) cannot be represented. Scale X (e.g. with "
        "sklearn.preprocessing.StandardScaler), or L2-normalise its rows."
    )


def _symmetrize(matrix):
    return (matrix + matrix.T) / 2


class PreparedRows:
    """Rows of an array in memory read on demand and mapped row by row (``prepare``).

    ``rows[indices]`` returns ``prepare(array[indices])``: a pair statistic reads the rows of
    one block of pairs at a time, so a map that copies (normalisation, an input transform) never
    holds more than a block. :class:`~skrank.similarity._dask.DaskRows` reads the rows of a dask
    array the same way.

    Parameters
    ----------
    array : ndarray of shape (n_rows, n_features)
        The rows.
    prepare : callable or None, default=None
        Function applied to the rows read (a row-wise map); None returns them as they are.
    """

    rows_on_demand = True

    def __init__(self, array, prepare=None):
        self.array = array
        self.prepare = prepare
        self.shape = array.shape

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, index):
        return self._prepared(self.array[index])

    def _prepared(self, rows):
        return rows if self.prepare is None else self.prepare(rows)


def _as_rows(X):
    """``X`` as a float array, unless it reads its rows on demand (``X[indices]`` returns them).

    Rows on demand are those of an array larger than memory (:mod:`skrank.similarity._dask`) or
    rows mapped block by block (:class:`PreparedRows`): only the rows indexed are read.
    """
    if getattr(X, "rows_on_demand", False):
        return X
    return np.asarray(X, dtype=np.float64)


def pair_chunks(n_pairs, n_features, max_gathered=None):
    """Slices of consecutive pairs whose two gathered sides fit the memory budget.

    Parameters
    ----------
    n_pairs : int
        Number of pairs.
    n_features : int
        Features of an item.
    max_gathered : int or None, default=None
        Bound on the number of values gathered from one side at once; None sizes the chunks so
        that both sides (16 bytes a value) fit scikit-learn's ``working_memory``.

    Returns
    -------
    chunks : list of slice
    """
    n_features = max(n_features, 1)
    if max_gathered is None:
        chunk = chunk_rows(n_pairs, 16 * n_features + 8)
    else:
        chunk = max(1, max_gathered // n_features)
    return [slice(start, start + chunk) for start in range(0, n_pairs, chunk)]


@fill_docs(PAIR_STATISTICS_DOCS)
def similar_pair_scatter(X, y):
    """Mean of ``(x_i - x_j)(x_i - x_j)^T`` over the positive pairs ``i < j``.

    Computed from the within-class scatter with no pair loop::

        sum_{i<j, y_i=y_j} (x_i - x_j)(x_i - x_j)^T
            = sum_k n_k sum_{i in k} (x_i - mu_k)(x_i - mu_k)^T

    For any ``A``, ``<S, A>`` is the mean squared Mahalanobis distance ``d_A^2`` over positive
    pairs.

    {scatter_sections}
    n_positive : int
        Number of positive pairs it averages over.
    """
    X = np.asarray(X, dtype=np.float64)
    codes, counts = class_codes(y)
    n_positive = int((counts * (counts - 1)).sum() // 2)
    if n_positive == 0:
        raise ValueError("No class has two items: there are no positive (same-class) pairs.")
    means = np.zeros((counts.shape[0], X.shape[1]))
    np.add.at(means, codes, X)
    means /= counts[:, None]
    centred = (X - means[codes]) * np.sqrt(counts[codes])[:, None]
    return _symmetrize(centred.T @ centred) / n_positive, n_positive


def negative_pair_outer_mean(X, sample, *, max_gathered=None):
    """Weighted mean of ``(x_i x_j^T + x_j x_i^T) / 2`` over sampled pairs.

    With a sample from :func:`skrank.sampling.sample_negative_pairs` or
    :func:`skrank.sampling.sample_negative_tuples` this is an
    unbiased estimate of :meth:`PairStatistics.negative_matrix`.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Items.
    sample : PairSample
        Pairs and weights (weights summing to one).
    max_gathered : int or None, default=None
        Bound on the number of values gathered from ``X`` at once: pairs are processed in chunks
        of ``max_gathered // n_features``. None sizes the chunks so that both gathered sides fit
        scikit-learn's ``working_memory``.

    Returns
    -------
    N : ndarray of shape (n_features, n_features)
        Symmetric matrix.
    """
    X = _as_rows(X)
    total = np.zeros((X.shape[1], X.shape[1]))
    for part in pair_chunks(sample.first.shape[0], X.shape[1], max_gathered):
        weighted_first = X[sample.first[part]] * sample.weight[part, None]
        total += weighted_first.T @ X[sample.second[part]]
    return _symmetrize(total)


@fill_docs(PAIR_STATISTICS_DOCS)
def pair_difference_scatter(X, sample, *, max_gathered=None):
    """Weighted sum of ``(x_i - x_j)(x_i - x_j)^T`` over the pairs of ``sample``.

    For any ``A``, ``<scatter, A>`` is the weighted sum of the squared Mahalanobis distances
    ``d_A^2`` of the pairs (their mean when the weights sum to one). Pairs are read in chunks
    (see :func:`negative_pair_outer_mean`).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), or rows read on demand
        Items.
    sample : PairSample
        Pairs and weights.
    max_gathered : int or None, default=None
        Bound on the number of values gathered from ``X`` at once; None fits a chunk in
        scikit-learn's ``working_memory``.

    Returns
    -------
    {scatter}
    """
    X = _as_rows(X)
    total = np.zeros((X.shape[1], X.shape[1]))
    for part in pair_chunks(sample.first.shape[0], X.shape[1], max_gathered):
        differences = X[sample.first[part]] - X[sample.second[part]]
        total += (differences * sample.weight[part, None]).T @ differences
    return _symmetrize(total)


@fill_docs(PAIR_STATISTICS_DOCS)
def dissimilar_pair_scatter(X, y):
    """Mean of ``(x_i - x_j)(x_i - x_j)^T`` over the negative pairs ``i < j``.

    Computed with no pair loop from the total and the within-class scatter:
    ``sum_{i<j} (x_i - x_j)(x_i - x_j)^T = n sum_i (x_i - mu)(x_i - mu)^T``, minus the positive
    pairs' share (see :func:`similar_pair_scatter`). For any ``A``, ``<D, A>`` is the mean squared
    Mahalanobis distance ``d_A^2`` over negative pairs.

    {scatter_sections}
    n_negative : int
        Number of negative pairs it averages over.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.similarity import dissimilar_pair_scatter
    >>> scatter, n_negative = dissimilar_pair_scatter(np.array([[0.0], [1.0], [3.0]]), [0, 0, 1])
    >>> scatter, n_negative
    (array([[6.5]]), 2)
    """
    X = np.asarray(X, dtype=np.float64)
    codes, counts = class_codes(y, negatives=True)
    n_positive, n_negative = count_pairs(codes)
    centred = X - X.mean(axis=0)
    total = X.shape[0] * (centred.T @ centred)
    if n_positive:
        total -= n_positive * similar_pair_scatter(X, codes)[0]
    return _symmetrize(total) / n_negative, n_negative
