"""Pairs given by the user: Xing et al.'s side information, similar and dissimilar pairs.

The pair-based learners (:class:`~skrank.PointwiseROCSimilarity`, :class:`~skrank.MMC`) learn
from the pairs implied by class labels or from pairs given directly, with no labels at all:

* an array of shape (n_pairs, 2, n_features) holding the two items of each pair (a dask array
  chunked along the pairs for pairs larger than memory);
* or an (n_pairs, 2) integer array of row indices into an item table given once (the
  estimators' ``items`` parameter, as metric-learn's ``preprocessor``), so that many pairs over
  few items need no dense (n_pairs, 2, n_features) copy;

with labels ``y`` saying which pairs are similar: 1 or True for a similar pair, -1, 0 or False
for a dissimilar one. :func:`check_pairs` and :func:`check_pair_labels` validate them into a
:class:`GivenPairs`: rows (items, read on demand block by block) and the row indices of each
pair's items, on which the exact statistics of :mod:`skrank.similarity._pair_statistics` are
computed in chunks of pairs bounded by scikit-learn's ``working_memory``.
"""

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from sklearn.utils.validation import check_array, column_or_1d, validate_data

from ..sampling import PairSample
from ..utils._dask import import_dask, is_dask_array
from ..utils._validation import max_abs, naming_inputs
from ._pair_statistics import PreparedRows, _as_rows, pair_chunks

__all__ = [
    "GivenPairs",
    "check_pair_labels",
    "check_pairs",
    "is_pair_input",
    "pair_groups",
]

#: Docstring entries of the methods that take pairs (``fill_docs``).
PAIR_INPUT_DOCS = {
    "pairs": (
        "pairs",
        "array-like of shape (n_pairs, 2, n_features), or (n_pairs, 2) with ``items``",
        "The two items of each pair, or, when the estimator's ``items`` is set, the row "
        "indices of the two items in ``items``.",
    ),
    "pair_labels": (
        "y",
        "array-like of shape (n_pairs,)",
        "1 or True for a similar pair, -1, 0 or False for a dissimilar one; both kinds of pair "
        "must be present.",
    ),
}
#: The Parameters section of the methods that take given pairs.
PAIR_INPUT_DOCS["pairs_parameters"] = {"Parameters": [PAIR_INPUT_DOCS["pairs"]]}
#: The Parameters section of the methods that take pairs as two arrays of rows, or given pairs.
PAIR_INPUT_DOCS["pair_rows_parameters"] = {
    "Parameters": [
        (
            "X1",
            "array-like of shape (n_pairs, n_features), (n_pairs, 2, n_features) or (n_pairs, 2)",
            "First items of the pairs; or, when ``X2`` is None, the pairs: their two items, or "
            "with ``items`` set their row indices in ``items``.",
        ),
        ("X2", "array-like of shape (n_pairs, n_features) or None", "Second items of the pairs."),
    ]
}
#: The Parameters section of the methods that take class-labelled items or given pairs.
PAIR_INPUT_DOCS["evaluation_parameters"] = {
    "Parameters": [
        (
            "X",
            "array-like of shape (n_samples, n_features), (n_pairs, 2, n_features) or (n_pairs, 2)",
            "Class-labelled items, or pairs (their items, or with ``items`` set their row indices "
            "in ``items``).",
        ),
        (
            "y",
            "array-like of shape (n_samples,) or (n_pairs,)",
            "Class labels of the items, or for pairs 1 or True (similar) and -1, 0 or False "
            "(dissimilar).",
        ),
    ]
}


class GivenPairs:
    """Validated pairs: the items as rows and the row indices of each pair's two items.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_features), or rows read on demand
        The items the pairs refer to: the item table, or the (2 n_pairs, n_features) view of a
        (n_pairs, 2, n_features) array, or a dask array's rows
        (:class:`~skrank.similarity._dask.DaskRows`).
    first, second : ndarray of shape (n_pairs,)
        Row index of the first and of the second item of each pair.
    """

    def __init__(self, rows, first, second):
        self.rows = rows
        self.first = first
        self.second = second

    @property
    def n_pairs(self):
        """Number of pairs."""
        return self.first.shape[0]

    @property
    def n_features(self):
        """Number of features of an item."""
        return self.rows.shape[1]

    def sample(self, selected):
        """The pairs ``selected`` (a boolean mask) as a :class:`PairSample` of equal weights."""
        first, second = self.first[selected], self.second[selected]
        return PairSample(first, second, np.full(first.shape[0], 1.0 / max(first.shape[0], 1)))

    def max_abs(self):
        """Largest absolute value of the rows (read block by block for a dask array)."""
        if isinstance(self.rows, np.ndarray):
            return max_abs(self.rows)
        dask = import_dask("Reading a dask array of pairs")
        (largest,) = dask.compute(abs(self.rows.array).max())
        return float(largest)

    def items(self, part, rows=None):
        """The two items of the pairs ``part`` (a slice or indices), read from ``rows``.

        ``rows`` defaults to :attr:`rows`; give rows read on demand through a map (e.g.
        normalisation) to read them mapped.
        """
        rows = _as_rows(self.rows if rows is None else rows)
        return rows[self.first[part]], rows[self.second[part]]

    def prepared_rows(self, prepare):
        """The rows read on demand and mapped by ``prepare`` (a row-wise map)."""
        if isinstance(self.rows, np.ndarray):
            return PreparedRows(self.rows, prepare)
        return type(self.rows)(self.rows.array, prepare)

    def chunks(self, max_gathered=None):
        """Slices of consecutive pairs whose items fit the memory budget (``working_memory``)."""
        return pair_chunks(self.n_pairs, self.n_features, max_gathered)

    def subset(self, selected):
        """The pairs ``selected`` (a boolean mask or indices) over the same rows."""
        return GivenPairs(self.rows, self.first[selected], self.second[selected])


def is_pair_input(X, items=None):
    """Whether ``X`` holds pairs: an array with three dimensions, or anything when ``items``
    is set (row indices of the pairs' items)."""
    if items is not None:
        return True
    ndim = getattr(X, "ndim", None)
    if ndim is None:
        try:
            ndim = np.asarray(X).ndim
        except (ValueError, TypeError):  # e.g. a ragged nested list: the validation says so
            return False
    return ndim == 3


def check_pairs(estimator, pairs, *, items=None, reset, input_name="pairs"):
    """Validate ``pairs`` (and the item table ``items``) into a :class:`GivenPairs`.

    Sets ``n_features_in_`` (and ``feature_names_in_`` for a table with string column names)
    when ``reset``; checks them otherwise. Non-finite values are an error (for a dask array, when
    its blocks are read); so is an index pair naming the same row twice.

    Parameters
    ----------
    estimator : estimator
        The estimator whose ``n_features_in_`` is set or checked.
    pairs : array-like of shape (n_pairs, 2, n_features), or (n_pairs, 2) when ``items``
        The pairs, possibly a dask array.
    items : array-like of shape (n_items, n_features) or None, default=None
        The item table that index pairs refer to.
    reset : bool
        Whether this is a fit (set the number of features) or a prediction (check it).
    input_name : str, default="pairs"
        Name of the argument, for messages.

    Returns
    -------
    pairs : GivenPairs
    """
    if items is not None:
        return _index_pairs(estimator, pairs, items, reset, input_name)
    if is_dask_array(pairs):
        _check_pair_shape(pairs.shape, input_name)
        if any(np.isnan(size) for size in pairs.chunks[0]):
            raise ValueError(
                f"{input_name} is a dask array with unknown chunk sizes: call "
                f"{input_name}.compute_chunk_sizes() first."
            )
        if not np.issubdtype(pairs.dtype, np.number) and pairs.dtype != bool:
            raise ValueError(f"{input_name} must hold numbers, got a dask array of {pairs.dtype}.")
        n, _, d = pairs.shape
        array = pairs.astype(np.float64).rechunk({1: -1, 2: -1}).reshape(2 * n, d)
        from ._dask import DaskRows  # dask is optional: imported only for dask input

        rows = DaskRows(array)
    else:
        with naming_inputs(input_name):
            array = check_array(pairs, allow_nd=True, dtype=np.float64, input_name=input_name)
        _check_pair_shape(array.shape, input_name)
        rows = array.reshape(-1, array.shape[2])
    _check_pair_features(estimator, rows.shape[1], reset, input_name)
    first = np.arange(0, rows.shape[0], 2)
    return GivenPairs(rows, first, first + 1)


def _check_pair_shape(shape, input_name):
    if len(shape) != 3 or shape[1] != 2 or shape[0] < 1:
        raise ValueError(
            f"{input_name} must be an array of shape (n_pairs, 2, n_features) holding the two "
            f"items of each pair (or, with the estimator's items set, an (n_pairs, 2) array of "
            f"row indices into items), got shape {tuple(shape)}."
        )


def _check_pair_features(estimator, n_features, reset, input_name):
    if reset:
        estimator.n_features_in_ = n_features
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
    elif n_features != estimator.n_features_in_:
        raise ValueError(
            f"{input_name} have {n_features} features, but {type(estimator).__name__} is "
            f"expecting {estimator.n_features_in_} features as input."
        )


def _index_pairs(estimator, pairs, items, reset, input_name):
    if is_dask_array(items):
        raise TypeError(
            "items must be an array in memory; for pairs larger than memory give a dask array "
            "of shape (n_pairs, 2, n_features) as pairs, with items=None."
        )
    with naming_inputs("items"):
        table = validate_data(estimator, items, reset=reset, dtype=np.float64)
    if is_dask_array(pairs):  # row indices: 16 bytes a pair, read into memory
        (pairs,) = import_dask("Reading index pairs").compute(pairs)
    with naming_inputs(input_name):
        indices = check_array(pairs, dtype=None, input_name=input_name)
    if indices.shape[1] != 2:
        _check_pair_shape(indices.shape, input_name)
    if indices.dtype.kind not in "iu":
        raise ValueError(
            f"With items set, {input_name} must be an (n_pairs, 2) array of integer row indices "
            f"into items, got an array of dtype {indices.dtype}."
        )
    outside = (indices < 0) | (indices >= table.shape[0])
    if outside.any():
        row = int(np.flatnonzero(outside.any(axis=1))[0])
        raise ValueError(
            f"{input_name}[{row}] = {indices[row].tolist()} indexes no row of items (which has "
            f"{table.shape[0]} rows): indices must lie in [0, {table.shape[0] - 1}]."
        )
    indices = indices.astype(np.intp)
    same = indices[:, 0] == indices[:, 1]
    if same.any():
        row = int(np.flatnonzero(same)[0])
        raise ValueError(
            f"{input_name}[{row}] pairs row {indices[row, 0]} of items with itself "
            f"({int(same.sum())} such pairs): a pair joins two items. Remove these pairs (two "
            "distinct items with equal features are a valid pair)."
        )
    return GivenPairs(table, indices[:, 0].copy(), indices[:, 1].copy())


def check_pair_labels(y, n_pairs, *, input_name="y"):
    """Validate the labels of ``n_pairs`` pairs: similar or dissimilar, both present.

    Parameters
    ----------
    y : array-like of shape (n_pairs,)
        1 or True for a similar pair, -1, 0 or False for a dissimilar one (values in {-1, 1}
        or in {0, 1}, booleans included); a dask array is read into memory.
    n_pairs : int
        Number of pairs.
    input_name : str, default="y"
        Name of the argument, for messages.

    Returns
    -------
    is_similar : ndarray of shape (n_pairs,), dtype=bool
    classes : ndarray of shape (2,)
        The two label values, sorted (what ``predict`` returns).
    """
    if is_dask_array(y):
        (y,) = import_dask("Reading pair labels").compute(y)
    with naming_inputs(input_name):
        y = column_or_1d(check_array(y, ensure_2d=False, dtype=None, input_name=input_name))
    if y.shape[0] != n_pairs:
        raise ValueError(
            f"{input_name} has {y.shape[0]} labels for {n_pairs} pairs: give one label per pair."
        )
    is_similar = y == 1
    minus_one, zero = (y == -1), (y == 0)  # elementwise: np.unique sorts or hashes all labels
    numeric = y.dtype.kind in "biuf"
    if not numeric or not np.all(is_similar | minus_one | zero) or (minus_one.any() and zero.any()):
        classes = np.unique(y)
        shown = ", ".join(repr(value) for value in classes[:5].tolist())
        raise ValueError(
            f"{input_name} must say of each pair whether it is similar (1 or True) or dissimilar "
            f"(-1, 0 or False), with values in {{-1, 1}} or {{0, 1}}; got the values {shown}"
            f"{', ...' if classes.shape[0] > 5 else ''}."
        )
    if is_similar.all() or not is_similar.any():
        kind = "similar" if is_similar.all() else "dissimilar"
        raise ValueError(
            f"{input_name} labels every pair {kind}: both similar and dissimilar pairs are "
            "needed (the criteria compare the two kinds)."
        )
    dissimilar = y[np.argmin(is_similar)]
    return is_similar, np.array([dissimilar, y[np.argmax(is_similar)]], dtype=y.dtype)


def pair_groups(pairs, n_items=None):
    """Group of each pair for group-aware cross-validation: the connected components of the
    pair graph.

    Items are the nodes and pairs the edges; two pairs sharing an item, directly or through
    other pairs, are in the same group. Splitting by these groups
    (:class:`~sklearn.model_selection.GroupKFold`) keeps every item on one side of each split,
    so that no test pair shares an item with a training pair.

    Parameters
    ----------
    pairs : array-like of shape (n_pairs, 2) or (n_pairs, 2, n_features)
        Row indices of each pair's items, or the items themselves (items with equal features
        are then the same node).
    n_items : int or None, default=None
        Number of items the indices refer to; None: the largest index plus one.

    Returns
    -------
    groups : ndarray of shape (n_pairs,)
        Component of each pair, numbered from 0.

    Examples
    --------
    >>> from skrank.similarity import pair_groups
    >>> pair_groups([[0, 1], [1, 2], [3, 4], [4, 3]])
    array([0, 0, 1, 1])
    """
    pairs = np.asarray(pairs)
    if pairs.ndim == 3 and pairs.shape[1] == 2:
        _, nodes = np.unique(pairs.reshape(-1, pairs.shape[2]), axis=0, return_inverse=True)
        pairs = nodes.reshape(-1, 2)
    elif pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.dtype.kind not in "iu":
        raise ValueError(
            "pairs must be an (n_pairs, 2) array of integer item indices or an (n_pairs, 2, "
            f"n_features) array of items, got an array of shape {pairs.shape} and dtype "
            f"{pairs.dtype}."
        )
    n_items = int(pairs.max()) + 1 if n_items is None else n_items
    graph = sparse.coo_matrix(
        (np.ones(pairs.shape[0]), (pairs[:, 0], pairs[:, 1])), shape=(n_items, n_items)
    )
    _, component = connected_components(graph, directed=False)
    _, groups = np.unique(component[pairs[:, 0]], return_inverse=True)
    return groups
