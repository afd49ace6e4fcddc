"""Labels (``skrank.utils._labels``): the label encoder, the check of class counts and the
indicator values outside {0, 1}."""

import numpy as np
import pytest
import scipy.sparse as sp

from skrank.utils._labels import check_class_counts, encode_labels, values_outside_zero_one


@pytest.mark.parametrize("to_matrix", [np.asarray, sp.csr_matrix])
def test_values_outside_zero_one(to_matrix):
    assert values_outside_zero_one(to_matrix([[0, 1], [1, 0]])) is None
    assert values_outside_zero_one(to_matrix([[0, 1], [0, 0]])) is None
    assert values_outside_zero_one(to_matrix([[-1, 1], [1, -1]])) == [-1, 1]
    expected = [1, 2] if to_matrix is sp.csr_matrix else [0, 1, 2]  # sparse: stored values
    assert values_outside_zero_one(to_matrix([[0, 2], [1, 0]])) == expected


def test_encode_labels_codes_sorted_labels_and_mixed_types_by_first_appearance():
    classes, codes = encode_labels(["b", "a", "c", "a"])
    np.testing.assert_array_equal(classes, ["a", "b", "c"])
    np.testing.assert_array_equal(codes, [1, 0, 2, 0])
    assert codes.dtype == np.int64
    mixed = np.array([2, "x", 2, 1.5], dtype=object)  # not sortable: order of first appearance
    classes, codes = encode_labels(mixed)
    assert classes.tolist() == [2, "x", 1.5]
    np.testing.assert_array_equal(codes, [0, 1, 0, 2])
    with pytest.raises(ValueError, match="target"):
        encode_labels([1.0, np.nan], input_name="target")


def test_encode_labels_keeps_known_codes_and_checks_declared_classes():
    known = np.array([3, 1])  # codes of earlier calls: 3 -> 0, 1 -> 1
    classes, codes = encode_labels([1, 5, 3, 2], known_classes=known)
    np.testing.assert_array_equal(classes, [3, 1, 2, 5])
    np.testing.assert_array_equal(codes, [1, 3, 0, 2])
    classes, codes = encode_labels([2, 0], declared_classes=[0, 1, 2])
    np.testing.assert_array_equal(classes, [0, 1, 2])
    np.testing.assert_array_equal(codes, [2, 0])
    with pytest.raises(ValueError, match=r"labels not in classes: \[7\]"):
        encode_labels([7, 0], declared_classes=[0, 1])
    with pytest.raises(TypeError, match="use labels of one type"):
        encode_labels(["a"], known_classes=np.array([0, 1]))


@pytest.mark.parametrize(
    "counts, kwargs, message",
    [
        ([0, 0], {}, "y has no class: SNM needs at least two classes"),
        ([5, 0], {}, "y has only one class: SNM needs at least two classes"),
        ([1, 1, 1], {}, "No class of y has two or more items: SNM needs a class with at least two"),
    ],
)
def test_check_class_counts_says_what_is_missing(counts, kwargs, message):
    with pytest.raises(ValueError, match=message):
        check_class_counts(counts, needed_by="SNM", **kwargs)


def test_check_class_counts_passes_what_is_not_needed():
    np.testing.assert_array_equal(check_class_counts([1, 1, 1], positives=False), [1, 1, 1])
    assert check_class_counts([5], negatives=False).dtype == np.int64
    np.testing.assert_array_equal(check_class_counts([2, 0, 1]), [2, 0, 1])
