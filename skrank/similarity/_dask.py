"""Fits of the pair-based learners on dask arrays larger than memory.

:class:`~skrank.PointwiseROCSimilarity` and :class:`~skrank.MMC` need, from all the pairs of a
labelled sample, statistics that are sums over items (:class:`PairStatistics`: class counts,
class sums, Gram matrices). On a ``dask.array`` chunked by rows, each row block's statistics are
computed by a task of the scheduler the user runs (threads, processes, ``dask.distributed``) and
the partial statistics are merged in a tree (:meth:`PairStatistics.merge`), so no more than a few
blocks are in memory at once. What needs individual rows (a sample of pairs, the held-out items
of ``alpha="auto"``, the item reservoir) reads only those rows (:class:`DaskRows`). The random
draws are those of the in-memory fit, made from the labels alone, so a fit on a dask array equals
the in-memory fit on the same data up to the order of floating-point sums.

dask is optional (the ``dask`` extra: ``pip install ".[dask]"`` in a skrank checkout): it is
imported only when a function here needs it, and an input is recognised as a dask array without
importing dask.
"""

import numpy as np
from sklearn.utils.validation import (
    _check_feature_names,
    _check_n_features,
    check_array,
    check_consistent_length,
    column_or_1d,
)

from ..sampling import count_pairs, sample_negative_pairs
from ..utils._dask import import_dask, is_dask_array
from ..utils._labels import encode_labels
from ..utils._memory import chunk_rows
from ..utils._validation import power_of_two_scale
from . import _pair_scores
from ._mmc_solver import MMCStatistics, fit_mmc
from ._pair_scores import negative_pair_similarities
from ._pair_statistics import (
    PairStatistics,
    PreparedRows,
    _symmetrize,
)

__all__ = [
    "DaskRows",
    "fit_mmc_dask",
    "is_dask_array",
    "item_statistics_dask",
    "mmc_statistics_dask",
]


def check_dask_data(estimator, X, y, *, reset=True, ensure_min_samples=1):
    """``validate_data`` for a dask array ``X``: lazy ``X`` by row blocks, ``y`` in memory.

    ``X`` must be 2-D with known row-chunk sizes; it is cast to float64 and rechunked to one
    block of columns (lazily). Finiteness is checked block by block when the blocks are read.
    ``y`` (a dask array or array-like) is read into memory: labels take ``8 n`` bytes, ``X``
    takes ``8 n d``.

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    """
    dask = import_dask(f"Fitting {type(estimator).__name__} on a dask array")
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D dask array X, got {X.ndim} dimensions.")
    if any(np.isnan(size) for size in X.chunks[0]):
        raise ValueError(
            "X is a dask array with unknown chunk sizes: call X.compute_chunk_sizes() first."
        )
    if X.shape[0] < ensure_min_samples:
        raise ValueError(
            f"Found array with {X.shape[0]} sample(s) while a minimum of {ensure_min_samples} "
            "is required."
        )
    if not np.issubdtype(X.dtype, np.number) and X.dtype != bool:
        raise ValueError(f"X must hold numbers, got a dask array of dtype {X.dtype}.")
    if is_dask_array(y):
        (y,) = dask.compute(y)
    y = column_or_1d(check_array(y, ensure_2d=False, dtype=None, input_name="y"))
    check_consistent_length(X, y)
    _check_n_features(estimator, X, reset=reset)
    _check_feature_names(estimator, X, reset=reset)
    return X.astype(np.float64).rechunk({1: -1}), y


class DaskRows(PreparedRows):
    """Rows of a dask array read on demand, optionally mapped row by row (``prepare``).

    ``rows[indices]`` (integer array or slice) computes only the blocks holding those rows, on
    the active dask scheduler, and returns them as a NumPy array; each distinct row is read once
    per call.

    Parameters
    ----------
    array : dask.array.Array of shape (n_samples, n_features)
        The items (one block of columns).
    prepare : callable or None, default=None
        Function applied to the rows read (a row-wise map, e.g. normalisation).
    """

    def __getitem__(self, index):
        dask = import_dask("Reading rows of a dask array")
        if isinstance(index, slice):
            (rows,) = dask.compute(self.array[index])
            return self._prepared(self._checked(rows))
        unique, inverse = np.unique(np.asarray(index), return_inverse=True)
        (rows,) = dask.compute(self.array[unique])
        return self._prepared(self._checked(rows))[inverse.ravel()]

    @staticmethod
    def _checked(rows):
        return check_array(rows, dtype=np.float64, ensure_min_samples=0, input_name="X")


def reduce_blocks(X, function, args=(), row_arrays=()):
    """Merge ``function(block, *args, *row_slices)`` over the row blocks of ``X``, on dask.

    ``function`` returns a tuple of :class:`PairStatistics`, merged elementwise in a tree; one
    task per row block runs on the active scheduler (threads, processes or distributed), and the
    merged tuple is returned.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        One block of columns.
    function : callable
        ``function(block, *args, *row_slices)``; picklable for processes and distributed.
    args : sequence
        Arguments passed to every call.
    row_arrays : sequence of ndarray of shape (n_samples, ...)
        Arrays cut along the row blocks of ``X`` (labels, masks).
    """
    dask = import_dask("Blockwise statistics")
    bounds = np.cumsum((0,) + tuple(X.chunks[0]))
    blocks = X.to_delayed()[:, 0]
    parts = [
        dask.delayed(function)(block, *args, *(rows[start:stop] for rows in row_arrays))
        for block, start, stop in zip(blocks, bounds[:-1], bounds[1:], strict=True)
    ]
    while len(parts) > 1:  # a tree of merges, log2(blocks) deep
        parts = [
            dask.delayed(_merge)(*parts[start : start + 2]) for start in range(0, len(parts), 2)
        ]
    (merged,) = dask.compute(parts[0])
    return merged


def _merge(first, second=None):
    if second is None:
        return first
    return tuple(mine.merge(theirs) for mine, theirs in zip(first, second, strict=True))


def _block_statistics(block, prepare, codes, *masks):
    """Statistics of the (prepared) rows of a block: all of them, then those of each mask."""
    block = check_array(block, dtype=np.float64, ensure_min_samples=0, input_name="X")
    block = block if prepare is None else prepare(block)
    statistics = [PairStatistics(block.shape[1]).update(block, codes)]
    for mask in masks:
        statistics.append(PairStatistics(block.shape[1]).update(block[mask], codes[mask]))
    return tuple(statistics)


def _block_mmc_moments(block, mean, codes, weights):
    """Class sums and Gram matrices of a centred block: plain, and rows weighted by ``weights``."""
    block = check_array(block, dtype=np.float64, ensure_min_samples=0, input_name="X") - mean
    plain = PairStatistics(block.shape[1]).update(block, codes)
    weighted = PairStatistics(block.shape[1])
    weighted.gram_ += block.T @ (block * weights[:, None])
    return plain, weighted


def fit_input_transform_dask(X, kind, eigenvalue_floor=1e-6):
    """:func:`~skrank.similarity.fit_input_transform` on a dask array (two passes over ``X``)."""
    n, d = X.shape
    no_class = np.zeros(n, np.int64)
    (total,) = reduce_blocks(X, _block_statistics, (None,), (no_class,))
    mean = total.class_sums_[0] / n
    if kind == "center":
        return mean, np.eye(d)
    (centred,) = reduce_blocks(X, _block_statistics, (_Centre(mean),), (no_class,))
    covariance = centred.gram_ / n
    if kind == "standardize":
        std = np.sqrt(np.maximum(np.diag(covariance), 0.0))
        return mean, np.diag(1.0 / np.where(std > 0, std, 1.0))
    eigenvalues, eigenvectors = np.linalg.eigh(_symmetrize(covariance))
    floor = eigenvalue_floor * max(eigenvalues[-1], np.finfo(float).tiny)
    return mean, eigenvectors / np.sqrt(np.maximum(eigenvalues, floor))


class _Centre:
    """Picklable row map ``x -> x - mean``."""

    def __init__(self, mean):
        self.mean = mean

    def __call__(self, rows):
        return rows - self.mean


def negative_pair_similarities_dask(rows, codes, A, *, max_pairs=None, random_state=None):
    """:func:`~skrank.similarity._pair_scores.negative_pair_similarities` on rows read on demand.

    Draws the same pairs from the same ``random_state`` (``max_pairs`` None:
    ``CALIBRATION_PAIRS``); the rows of each chunk of pairs (sized
    by ``working_memory``) are read in one pass over the blocks holding them, so this takes
    ``48 d max_pairs / working_memory`` passes (one with the default 1 GiB and ``d`` up to
    89). With at most ``max_pairs`` negative pairs (a few hundred items, or one class holding
    nearly all items), all items are read.
    """
    max_pairs = _pair_scores.CALIBRATION_PAIRS if max_pairs is None else max_pairs
    sample = _sampled_negative_pairs(codes, max_pairs, random_state)
    if sample is None:  # few negative pairs: all of them, exactly
        return negative_pair_similarities(rows[:], codes, A, max_pairs=max_pairs)
    # Per pair: up to two rows read, their copy assembled from the blocks, both sides indexed.
    chunk = chunk_rows(max_pairs, 48 * rows.shape[1] + 8)
    scores = np.empty(max_pairs)
    for start in range(0, max_pairs, chunk):
        part = slice(start, start + chunk)
        first, second = sample.first[part], sample.second[part]
        unique, inverse = np.unique(np.concatenate([first, second]), return_inverse=True)
        items = rows[unique]
        left = items[inverse[: first.shape[0]]] @ A
        scores[part] = np.einsum("ij,ij->i", left, items[inverse[first.shape[0] :]])
    return (1.0 + scores) / 2.0


def _sampled_negative_pairs(codes, max_pairs, random_state):
    if count_pairs(codes)[1] <= max_pairs:
        return None
    return sample_negative_pairs(codes, max_pairs, random_state)


def item_statistics_dask(rows, codes, parts=()):
    """:func:`~skrank.similarity._pointwise_roc_fit.item_statistics` of rows of a dask array.

    One pass over the blocks of ``rows`` (:class:`DaskRows`, prepared block by block) gives the
    statistics of all items and of each part (an array of row indices).
    """
    masks = []
    for part in parts:
        mask = np.zeros(codes.shape[0], dtype=bool)
        mask[part] = True
        masks.append(mask)
    return reduce_blocks(rows.array, _block_statistics, (rows.prepare,), (codes, *masks))


def mmc_statistics_dask(X, y):
    """:func:`~skrank.similarity._mmc_solver.mmc_statistics` of a dask array, in three passes.

    Pass 1: the largest absolute value, for the power-of-two rescaling that keeps the scatters
    of data at 1e-300 or 1e300 from underflowing or overflowing (as in memory). Pass 2: the mean.
    Pass 3: the class sums and the plain and class-size-weighted Gram matrices of the centred
    items, from which the pair scatters (and the covariance of ``init="covariance"``) follow
    exactly. The rows are returned as :class:`DaskRows`: the solver reads only those of the
    sampled pairs.
    """
    dask = import_dask("Fitting MMC on a dask array")
    (largest,) = dask.compute(abs(X).max())
    scale = power_of_two_scale(np.asarray(largest))
    X = X * scale
    n = X.shape[0]
    _, codes = encode_labels(y)
    counts = np.bincount(codes)
    (total,) = reduce_blocks(X, _block_statistics, (None,), (np.zeros(n, np.int64),))
    mean = total.class_sums_[0] / n
    plain, weighted = reduce_blocks(
        X, _block_mmc_moments, (mean,), (codes, counts[codes].astype(np.float64))
    )
    # sum_k n_k sum_{i in k} (x_i - mu_k)(x_i - mu_k)^T = sum_i n_{y_i} x_i x_i^T - sum_k s_k s_k^T
    within = weighted.gram_ - plain.class_sums_.T @ plain.class_sums_
    centred_sum = plain.class_sums_.sum(axis=0)
    scatter = _symmetrize(plain.gram_ - np.outer(centred_sum, centred_sum) / n)
    return MMCStatistics(
        rows=DaskRows(X, _Centre(mean)),
        similar=_symmetrize(within) / plain.n_positive_pairs,
        dissimilar=_symmetrize(n * scatter - within) / plain.n_negative_pairs,
        covariance=scatter / (n - 1),
        scale=scale,
    )


def fit_mmc_dask(X, y, *, negatives="all", positives="all", **options):
    """:func:`~skrank.similarity._mmc_solver.fit_mmc` on a dask array, with sampled negatives.

    The scatters of the constraint (and the covariance of ``init="covariance"``) are exact
    (:func:`mmc_statistics_dask`). The objective's pairs or K-tuples are drawn from the labels
    as in memory (same ``random_state``, same sample); only the rows they touch are read (at
    most ``2 n_samples`` rows for pairs, ``K n_samples`` for tuples) and the solver runs on them
    in memory. ``negatives="all"`` is refused: it needs every negative pair at every iteration.
    ``options`` are the other keyword arguments of ``fit_mmc``. Local pair sets
    (``"nearest"``) are refused: they need nearest neighbours among all items.
    """
    if "nearest" in (positives, negatives):
        raise ValueError(
            'MMC(positives="nearest") and MMC(negatives="nearest") need nearest neighbours '
            'among all items, which a dask array does not hold in memory: use "all" (positives) '
            'and "pairs" or "tuples" (negatives), or fit on X.compute().'
        )
    if negatives == "all":
        raise ValueError(
            'MMC(negatives="all") on a dask array would read every negative pair at every solver '
            'iteration (O(n^2) pairs): use negatives="pairs" or "tuples" with n_samples (only the '
            "rows of the sampled pairs are read into memory), or fit on X.compute()."
        )
    return fit_mmc(
        X, y, negatives=negatives, positives=positives, statistics=mmc_statistics_dask, **options
    )
