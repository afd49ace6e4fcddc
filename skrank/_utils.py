"""Small helpers shared across skrank's subpackages."""

import numpy as np
from sklearn.utils.validation import check_array, column_or_1d


def encode_labels(y, *, input_name="y"):
    """Integer codes (0..n_classes-1) of the 1-D labels ``y`` (any hashable values).

    Sortable labels get the codes of their sorted order (as ``np.unique``); labels of mixed
    types that cannot be sorted get codes in order of first appearance.
    """
    y = column_or_1d(check_array(y, ensure_2d=False, dtype=None, input_name=input_name))
    try:
        return np.unique(y, return_inverse=True)[1].astype(np.int64, copy=False).ravel()
    except TypeError:
        codes = {}
        return np.array([codes.setdefault(label, len(codes)) for label in y.tolist()])
