"""SNMClassifier's targets: multiclass labels or a multilabel indicator, encoded as one sparse
indicator of positive labels, and the predictions decoded back to the format given at fit."""

import warnings

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import column_or_1d

from ..nn import RowSubset, memory_mapped
from ..utils._labels import check_class_counts, encode_labels, values_outside_zero_one
from ..utils._validation import canonical_csr, naming_inputs


def encode_targets(y):
    """The labels of ``y`` and its sparse indicator of positive labels.

    Parameters
    ----------
    y : array-like of shape (n_samples,), or indicator matrix (n_samples, n_labels)
        Multiclass labels, or a multilabel 0/1 indicator matrix (dense or sparse).

    Returns
    -------
    classes : ndarray of shape (n_labels,)
        The labels (multilabel: ``arange(n_labels)``, the columns).
    positives : scipy.sparse.csr_matrix of int8 of shape (n_samples, n_labels)
        The indicator of each row's positive labels, without stored zeros (never a view of
        ``y``'s buffers).
    multilabel_output : tuple (bool, str) or False
        False for multiclass targets, else whether the indicator given was sparse and the
        string of its dtype (what :func:`indicator_of_top` returns predictions as).
    """
    with warnings.catch_warnings():
        # Far more labels than examples per label is the normal case of extreme classification.
        warnings.filterwarnings("ignore", message="The number of unique classes is greater")
        with naming_inputs("y"):
            check_classification_targets(y)
        target_type = type_of_target(y, input_name="y")
    if target_type == "multilabel-indicator":
        values = values_outside_zero_one(y)
        if values is not None:
            raise ValueError(
                f"y is a multilabel indicator matrix with values {values}; "
                "SNMClassifier needs 0/1 (1: the label is positive). For a -1/1 matrix, "
                "pass y > 0."
            )
        multilabel_output = (sp.issparse(y), y.dtype.str)  # a string: saved models hold no type
        positives = canonical_csr(y, dtype=np.int8, drop_zeros=True)
        classes = np.arange(positives.shape[1])
    elif target_type in ("binary", "multiclass"):
        classes, codes = encode_labels(column_or_1d(y, warn=True))
        positives = one_hot(codes, len(classes))
        multilabel_output = False
    else:
        raise ValueError(
            "SNMClassifier needs multiclass labels or a multilabel 0/1 indicator matrix; got "
            f"targets of type {target_type!r}."
        )
    check_class_counts(np.ones(len(classes)), positives=False, needed_by="SNMClassifier")
    return classes, positives, multilabel_output


def one_hot(codes, n_labels):
    """The (n_samples, n_labels) int8 CSR indicator of the integer ``codes``."""
    n_samples = codes.shape[0]
    return sp.csr_matrix(
        (np.ones(n_samples, dtype=np.int8), codes, np.arange(n_samples + 1)),
        shape=(n_samples, n_labels),
    )


def drop_rows_without_positives(positives):
    """The rows of ``positives`` with a positive label (all of them: None), with a warning
    naming how many are skipped; a ``ValueError`` when none has one."""
    counts = np.diff(positives.indptr)
    empty = counts == 0
    if empty.all():
        raise ValueError("No training example has a positive label.")
    if not empty.any():
        return None
    warnings.warn(
        f"{int(empty.sum())} of {len(counts)} training examples have no positive label and "
        "were skipped.",
        UserWarning,
        stacklevel=3,
    )
    return np.flatnonzero(~empty)


# The score of the labels without a training example (not in the label table): the lowest
# float32, below every label the model scores, and finite, as scikit-learn's metrics need.
UNTRAINED_LABEL_SCORE = float(np.finfo(np.float32).min)


def table_labels(positives, previous=None):
    """The columns of ``positives`` that the label table holds: those with a positive row, or,
    continuing a fit, ``previous`` (a ``ValueError`` if other columns have positives)."""
    counts = np.bincount(positives.indices, minlength=positives.shape[1])
    check_class_counts(counts, positives=False, needed_by="SNMClassifier")
    if previous is None:
        return np.flatnonzero(counts)
    outside = np.setdiff1d(np.flatnonzero(counts), previous)
    if outside.size:
        raise ValueError(
            "warm_start=True continues the label table of the previous fit, which holds the "
            f"labels that had a positive example; y has positives for {outside.size} other "
            f"labels (e.g. column {outside[0]}). Fit again with warm_start=False to learn them."
        )
    return previous


def with_untrained_labels(scores, indices, trained, n_labels, k):
    """The top ``k`` of ``n_labels`` labels from the label table's top-k (``scores`` and table
    rows ``indices``, (n, min(k, len(trained)))): table rows become labels (``trained``), and
    beyond the table's rows come the labels without a training example, in order, scored
    ``UNTRAINED_LABEL_SCORE``."""
    if len(trained) == n_labels:
        return scores, indices
    indices = trained[indices]
    if k > len(trained):
        untrained = np.setdiff1d(np.arange(n_labels), trained)[: k - len(trained)]
        n_samples = indices.shape[0]
        indices = np.hstack([indices, np.broadcast_to(untrained, (n_samples, untrained.size))])
        floor = np.full((n_samples, untrained.size), UNTRAINED_LABEL_SCORE, scores.dtype)
        scores = np.hstack([scores, floor])
    return scores, indices


def scores_of_every_label(scores, trained, n_labels):
    """The (n, n_labels) scores of a chunk of the label table's scores (columns ``trained``),
    the labels without a training example at ``UNTRAINED_LABEL_SCORE`` (a tensor)."""
    if len(trained) == n_labels:
        return scores
    every_label = scores.new_full((scores.shape[0], n_labels), UNTRAINED_LABEL_SCORE)
    every_label[:, torch.from_numpy(trained)] = scores
    return every_label


def indicator_of_top(top, n_labels, multilabel_output, chosen=None):
    """The multilabel predictions of the top-k label columns ``top`` (n, k): a 0/1 indicator,
    sparse CSR or dense with the dtype of the targets given at fit (``multilabel_output``);
    with ``chosen`` (a boolean (n, k) mask), only the labels it marks."""
    sparse_output, dtype = multilabel_output
    n_samples, k = top.shape
    if chosen is None:
        chosen = np.ones(top.shape, dtype=bool)
    indptr = np.concatenate([[0], np.cumsum(chosen.sum(axis=1))])
    indicator = sp.csr_matrix(
        (np.ones(int(indptr[-1]), dtype=dtype), top[chosen], indptr),
        shape=(n_samples, n_labels),
    )
    indicator.sort_indices()
    return indicator if sparse_output else indicator.toarray()


class RowsAlike:
    """Arrays indexed by the same rows: ``self[rows]`` indexes each of them (a memory-mapped
    array through a :class:`~skrank.nn.RowSubset`, never copied)."""

    def __init__(self, *arrays):
        self.arrays = arrays

    def __getitem__(self, rows):
        return RowsAlike(
            *(RowSubset(a, rows) if memory_mapped(a) else a[rows] for a in self.arrays)
        )
