"""Top-k label scoring for extreme classification: Recall@k and Precision@k over labels.

The core works on the top-k label indices of each example, so a classifier that produces them
in chunks (without an n x K score matrix) and the scorers share it with the public functions.
"""

import warnings

import numpy as np
from scipy import sparse
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

from ..utils._docstrings import fill_docs
from ..utils._labels import values_outside_zero_one
from ..utils._validation import canonical_csr, check_ndim, naming_inputs
from ._search import top_k_indices
from ._validation import check_k, check_same_length


def label_columns(values, labels):
    """Column index of each value, where ``labels[j]`` is the label of column ``j``.

    Parameters
    ----------
    values : ndarray
        Labels to locate (any shape).
    labels : ndarray of shape (n_labels,)
        Distinct labels, in column order (any order).

    Returns
    -------
    columns : ndarray of int64, same shape as ``values``

    Raises
    ------
    ValueError
        If ``labels`` has duplicates or a value is not in ``labels``.
    """
    labels = np.asarray(labels)
    values = np.asarray(values)
    sorter = np.argsort(labels, kind="stable")
    sorted_labels = labels[sorter]
    if np.any(sorted_labels[1:] == sorted_labels[:-1]):
        raise ValueError("labels must be unique.")
    positions = np.clip(np.searchsorted(sorted_labels, values), 0, len(labels) - 1)
    found = sorted_labels[positions] == values
    if not np.all(found):
        missing = np.unique(values[~found])[:5].tolist()
        raise ValueError(f"Labels {missing} are not among the labels of the columns.")
    return sorter[positions].astype(np.int64, copy=False)


def check_label_targets(y_true, n_columns, labels=None):
    """Turn ``y_true`` into what :func:`top_k_hits` reads.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_columns), or sparse matrix
        Multiclass labels, or a multilabel indicator matrix (dense or scipy.sparse).
    n_columns : int
        Number of labels (columns of the scores).
    labels : array-like of shape (n_columns,), default=None
        Multiclass only: the label of each column. None means the sorted distinct values of
        ``y_true`` if there are ``n_columns`` of them, else the integers ``0..n_columns-1``.

    Returns
    -------
    targets : ndarray of shape (n_samples,) of int64, or 2-D indicator (CSR without stored zeros)
        Column index of the true label of each example, or the indicator matrix.
    """
    if sparse.issparse(y_true) or np.ndim(y_true) == 2:
        if labels is not None:
            raise ValueError("labels is for multiclass targets; y_true is a 2-D indicator.")
        return _check_indicator(y_true, n_columns)
    y_true = column_or_1d(check_array(y_true, ensure_2d=False, dtype=None, input_name="y_true"))
    if labels is None:
        labels = _default_labels(y_true, n_columns)
    labels = column_or_1d(np.asarray(labels))
    if len(labels) != n_columns:
        raise ValueError(
            f"labels has {len(labels)} entries but the scores have {n_columns} columns."
        )
    return label_columns(y_true, labels)


def _default_labels(y_true, n_columns):
    classes = np.unique(y_true)
    if len(classes) == n_columns:
        return classes
    if classes.dtype.kind in "iu" and classes[0] >= 0 and classes[-1] < n_columns:
        return np.arange(n_columns)
    raise ValueError(
        f"y_true has {len(classes)} distinct labels but the scores have {n_columns} columns, "
        "and the labels are not integers in [0, n_columns); pass labels (e.g. "
        "labels=estimator.classes_)."
    )


def _check_indicator(y_true, n_columns):
    if sparse.issparse(y_true):
        y_true = canonical_csr(y_true, dtype=np.float64, drop_zeros=True)
    else:
        y_true = check_array(y_true, dtype=None, input_name="y_true")
    if values_outside_zero_one(y_true) is not None:
        raise ValueError("A 2-D y_true must be a multilabel indicator matrix of 0s and 1s.")
    if y_true.shape[1] != n_columns:
        raise ValueError(
            f"y_true has {y_true.shape[1]} columns but the scores have {n_columns} columns."
        )
    return y_true


def top_k_hits(targets, top_k):
    """Which of the top-k labels of each example are true labels.

    Parameters
    ----------
    targets : ndarray of shape (n_samples,) or indicator (n_samples, n_labels)
        As returned by :func:`check_label_targets`: the column of the true label of each
        example, or a dense or CSR indicator matrix (CSR without stored zeros).
    top_k : ndarray of shape (n_samples, k)
        Column indices of the k best labels of each example, best first.

    Returns
    -------
    hits : ndarray of shape (n_samples, k), dtype=bool
        ``hits[i, j]``: the j-th best label of example i is a true label.
    n_true : ndarray of shape (n_samples,)
        Number of true labels of each example.
    """
    top_k = np.asarray(top_k)
    check_consistent_length(targets, top_k)
    if targets.ndim == 1:
        return top_k == targets[:, None], np.ones(len(targets), dtype=np.int64)
    rows = np.repeat(np.arange(top_k.shape[0]), top_k.shape[1])
    if sparse.issparse(targets):
        hits = np.asarray(targets[rows, top_k.ravel()]).reshape(top_k.shape) != 0
        n_true = np.diff(targets.indptr)
    else:
        hits = targets[rows, top_k.ravel()].reshape(top_k.shape) != 0
        n_true = np.count_nonzero(targets, axis=1)
    return hits, n_true


def mean_top_k_scores(hits, n_true, ks, kind):
    """Mean Recall@k, Precision@k or hit rate at k (``kind``: ``"recall"``, ``"precision"``,
    ``"hit_rate"``: the share of examples with a true label among their k best) for each ``k``
    in ``ks`` from :func:`top_k_hits` output.

    Examples without a true label are excluded, with a ``UserWarning`` giving their number.

    Returns
    -------
    scores : ndarray of shape (len(ks),)
    """
    has_label = n_true > 0
    n_without = int(np.sum(~has_label))
    if n_without == len(n_true):
        raise ValueError("No example has a true label; top-k label metrics are undefined.")
    if n_without:
        warnings.warn(
            f"{n_without} of {len(n_true)} examples have no true label; they are excluded "
            "from the mean.",
            UserWarning,
            stacklevel=4,
        )
    cumulative_hits = np.cumsum(hits[has_label], axis=1)[:, ks - 1]
    if kind == "hit_rate":
        return np.mean(cumulative_hits > 0, axis=0)
    denominator = n_true[has_label, None] if kind == "recall" else ks[None, :]
    return np.mean(cumulative_hits / denominator, axis=0)


def check_label_scores(y_score, *, input_name="y_score"):
    """Return ``y_score`` as a finite 2-D float64 array (n_samples, n_labels)."""
    with naming_inputs(input_name):
        y_score = check_array(
            y_score, dtype=np.float64, ensure_2d=False, force_writeable=True, input_name=input_name
        )
    check_ndim(y_score, 2, "(n_samples, n_labels)", input_name=input_name)
    return y_score


def check_top_k_labels(y_true, y_score, k, labels):
    """Validate the inputs of a top-k label metric and find each example's best labels.

    Returns
    -------
    targets : ndarray or sparse matrix
        ``y_true`` as column indices (multiclass) or a 0/1 indicator matrix.
    top : ndarray of shape (n_samples, max(ks))
        Column indices of each example's best scored labels, best first (ties by index).
    ks : ndarray of int
    is_scalar : bool
        Whether ``k`` was one int.
    n_labels : int
        Columns of ``y_score``.
    """
    y_score = check_label_scores(y_score)
    check_same_length((y_true, y_score), ("y_true", "y_score"))
    n_labels = y_score.shape[1]
    ks, is_scalar = check_k(k, n_labels, candidates="labels (columns of y_score)")
    targets = check_label_targets(y_true, n_labels, labels)
    return targets, top_k_indices(y_score, int(ks.max())), ks, is_scalar, n_labels


_INPUT_ENTRIES = [
    (
        "y_true",
        "array-like of shape (n_samples,) or (n_samples, n_labels), or sparse matrix",
        "Multiclass labels, or a multilabel indicator matrix of 0/1 (a sparse one is never "
        "densified).",
    ),
    (
        "y_score",
        "array-like of shape (n_samples, n_labels)",
        "Label scores, higher = better. Must be finite.",
    ),
    (
        "k",
        "int or list of int",
        "Number of best labels, ``1 <= k <= n_labels`` (larger raises ValueError).",
    ),
]
_LABELS_ENTRY = (
    "labels",
    "array-like of shape (n_labels,)",
    "Multiclass only: the label of each column of ``y_score`` (e.g. ``classes_``). None means the "
    "sorted distinct values of ``y_true`` if there are ``n_labels`` of them, else the integers "
    "``0..n_labels-1``.",
)
_RETURNS = {
    "Returns": [
        (
            "score",
            "float or ndarray of shape (len(k),)",
            "A float for an int ``k``, else one value per ``k``.",
        )
    ]
}
#: Docstring entries of the top-k label metrics (here and in ``_extreme``), written once.
TOP_K_LABEL_DOCS = {
    "inputs": _INPUT_ENTRIES,
    "labels": _LABELS_ENTRY,
    "returns": _RETURNS,
    "sections": {"Parameters": [*_INPUT_ENTRIES, _LABELS_ENTRY], **_RETURNS},
}


def _top_k_label_score(y_true, y_score, k, labels, kind):
    targets, top, ks, is_scalar, _ = check_top_k_labels(y_true, y_score, k, labels)
    hits, n_true = top_k_hits(targets, top)
    scores = mean_top_k_scores(hits, n_true, ks, kind)
    return float(scores[0]) if is_scalar else scores


@fill_docs(TOP_K_LABEL_DOCS)
def top_k_recall_score(y_true, y_score, k=1, *, labels=None):
    """Recall@k over labels: mean of (true labels among the k best scored) / (true labels).

    The extreme-classification definition: for each example, the fraction of its true labels
    found among its ``k`` highest-scored labels, averaged over examples. For multiclass targets
    (one true label) it equals top-k accuracy. Examples without a true label (an all-zero
    indicator row) are excluded with a ``UserWarning``. Ties in ``y_score`` are broken by column
    index, the smaller first (:func:`sklearn.metrics.top_k_accuracy_score` prefers the larger).

    {sections}

    Examples
    --------
    >>> from skrank.metrics import top_k_recall_score
    >>> y_true = [[1, 0, 1], [0, 1, 0]]
    >>> y_score = [[0.9, 0.5, 0.1], [0.2, 0.3, 0.8]]
    >>> top_k_recall_score(y_true, y_score, k=[1, 2])
    array([0.25, 0.75])
    """
    return _top_k_label_score(y_true, y_score, k, labels, "recall")


@fill_docs(TOP_K_LABEL_DOCS)
def top_k_precision_score(y_true, y_score, k=1, *, labels=None):
    """Precision@k over labels: mean of (true labels among the k best scored) / k.

    Same inputs and conventions as :func:`top_k_recall_score` (examples without a true label
    excluded with a ``UserWarning``, ties broken by column index).

    {sections}

    Examples
    --------
    Multiclass targets, one column of scores per label of ``labels``:

    >>> from skrank.metrics import top_k_precision_score
    >>> scores = [[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]]
    >>> top_k_precision_score(["cat", "dog", "cat"], scores, k=1, labels=["cat", "dog"])
    0.3333333333333333
    """
    return _top_k_label_score(y_true, y_score, k, labels, "precision")
