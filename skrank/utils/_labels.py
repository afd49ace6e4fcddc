"""The one label encoder, the one check of class counts and the one check of indicator values
used by every skrank module."""

import numpy as np
from scipy import sparse
from sklearn.utils.validation import check_array, column_or_1d

from ._validation import canonical_csr, check_label_vector

#: The ``y`` entry of the fit docstrings of the estimators that learn from class labels and
#: pairs (what :func:`encode_labels` takes and :func:`check_class_counts` needs by default).
CLASS_LABELS_DOCS = {
    "class_labels": (
        "y",
        "array-like of shape (n_samples,)",
        "Class labels: any hashable values (floats included; not NaN or None), with at least two "
        "classes and a class of two items.",
    )
}


def _label_kind(array):
    return {"b": "number", "i": "number", "u": "number", "f": "number", "U": "text"}.get(
        array.dtype.kind, "object"
    )


def _check_same_label_kind(reference, labels, reference_name, input_name):
    """Numbers, text and other objects must not mix: numpy would turn numbers into text."""
    if _label_kind(reference) != _label_kind(labels):
        raise TypeError(
            f"The labels of {input_name} are of type {labels.dtype} but {reference_name} are of "
            f"type {reference.dtype}; use labels of one type."
        )


def _unique_with_inverse(y):
    """Sorted distinct labels and the index of each label; labels of mixed types that cannot be
    sorted keep their order of first appearance."""
    try:
        classes, inverse = np.unique(y, return_inverse=True)
    except TypeError:
        index = {}
        inverse = np.array([index.setdefault(label, len(index)) for label in y.tolist()])
        classes = np.empty(len(index), dtype=object)
        classes[:] = list(index)
    return classes, inverse.astype(np.int64, copy=False).ravel()


def encode_labels(y, *, known_classes=None, declared_classes=None, input_name="y"):
    """Distinct labels of ``y`` and the integer code of each label.

    Labels may be any hashable values: integers, floats, booleans, strings or objects (not NaN
    nor None, which are errors: missing labels are not a class). Sortable
    labels are coded in sorted order (as :func:`numpy.unique`); labels of mixed types that cannot
    be sorted are coded in order of first appearance.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels.
    known_classes : ndarray or None, default=None
        Classes seen before (``partial_fit``, ``warm_start``), whose codes must not change; labels
        not among them are appended after them, sorted.
    declared_classes : array-like or None, default=None
        Every allowed label (the ``classes`` argument of ``partial_fit``): a label of ``y``
        outside it is an error, and all of them join the classes.
    input_name : str, default="y"
        Name of ``y`` in error messages.

    Returns
    -------
    classes : ndarray of shape (n_classes,)
        The classes: ``known_classes`` first, then the new ones.
    codes : ndarray of shape (n_samples,), dtype int64
        Index in ``classes`` of each label of ``y``.
    """
    y = column_or_1d(check_array(y, ensure_2d=False, dtype=None, input_name=input_name))
    check_label_vector(y, input_name=input_name)
    present, inverse = _unique_with_inverse(y)
    candidates = present
    if declared_classes is not None:
        declared = _unique_with_inverse(np.asarray(declared_classes).ravel())[0]
        _check_same_label_kind(declared, present, "classes", input_name)
        undeclared = [label for label in present.tolist() if label not in set(declared.tolist())]
        if undeclared:
            raise ValueError(f"{input_name} contains labels not in classes: {undeclared[:5]}.")
        candidates = declared
    if known_classes is None:
        classes = candidates
    else:
        known_classes = np.asarray(known_classes)
        _check_same_label_kind(known_classes, candidates, "the labels seen before", input_name)
        known = set(known_classes.tolist())
        new = [label for label in candidates.tolist() if label not in known]
        classes = np.concatenate([known_classes, np.asarray(new)]) if new else known_classes
    if classes is present:
        return classes, inverse
    index = {label: code for code, label in enumerate(classes.tolist())}
    codes = np.array([index[label] for label in present.tolist()], dtype=np.int64)
    return classes, codes[inverse]


def check_class_counts(counts, *, positives=True, negatives=True, input_name="y", needed_by=None):
    """Raise a ValueError unless the classes give the pairs a method needs.

    Parameters
    ----------
    counts : array-like of int of shape (n_classes,)
        Number of items of each class (classes of count 0 are ignored).
    positives : bool, default=True
        Whether a class with two items (a same-class pair, a query with a positive) is needed.
    negatives : bool, default=True
        Whether two classes (a different-class pair, a query with a negative) are needed.
    input_name : str, default="y"
        What the counts describe, for the message (e.g. "y", "the training part of y").
    needed_by : str or None, default=None
        Who needs them, for the message (e.g. "SOPRCEmbedder").

    Returns
    -------
    counts : ndarray of int64
        The counts.
    """
    counts = np.asarray(counts, dtype=np.int64)
    present = counts[counts > 0]
    who = f"{needed_by} needs" if needed_by else "this needs"
    if negatives and present.shape[0] < 2:
        raise ValueError(
            f"{input_name} has {'no class' if present.shape[0] == 0 else 'only one class'}: "
            f"{who} at least two classes."
        )
    if positives and (present.shape[0] == 0 or present.max() < 2):
        raise ValueError(
            f"No class of {input_name} has two or more items: {who} a class with at least two "
            "items (a pair of items of the same class)."
        )
    return counts


def values_outside_zero_one(indicator):
    """The sorted distinct values of a label indicator matrix if any is not 0 or 1, else None.

    scikit-learn's ``type_of_target`` calls any two-valued integer matrix a multilabel indicator,
    so a -1/1 matrix passes it; read as an indicator, every label would be positive.

    Parameters
    ----------
    indicator : array-like or scipy.sparse matrix of shape (n_samples, n_labels)
        The matrix (its stored values once duplicate entries are summed, if sparse).

    Returns
    -------
    values : list or None
    """
    values = canonical_csr(indicator).data if sparse.issparse(indicator) else np.asarray(indicator)
    if ((values == 0) | (values == 1)).all():  # no sort on the common, valid input
        return None
    return np.unique(values).tolist()
