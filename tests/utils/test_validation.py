"""Input checks (``skrank.utils._validation``), against references."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

from skrank.utils import _validation


@pytest.mark.parametrize("X", [np.zeros((2, 3)), np.array([[np.inf, 1.0]])])
def test_power_of_two_scale_is_one_without_a_finite_non_zero_value(X):
    assert _validation.power_of_two_scale(X) == 1.0


@pytest.mark.parametrize("largest", [3e-300, 0.7, 1.0, 5e250])
def test_power_of_two_scale_brings_the_largest_value_into_half_one(largest):
    scale = _validation.power_of_two_scale(np.array([[largest, -largest / 3]]))
    assert np.log2(scale) == np.round(np.log2(scale))  # an exact power of two
    assert 0.5 <= largest * scale < 1.0


def test_rows_without_features_have_zero_norms_and_stay_empty():
    unit, zero = _validation.normalize_rows(np.zeros((3, 0)))
    assert unit.shape == (3, 0) and zero.tolist() == [True, True, True]
    assert _validation.row_norms(np.zeros((2, 0))).tolist() == [0.0, 0.0]


def test_row_norms_match_numpy_where_numpy_does_not_overflow():
    X = np.random.RandomState(0).normal(size=(5, 4))
    np.testing.assert_allclose(_validation.row_norms(X), np.linalg.norm(X, axis=1), rtol=1e-15)
    np.testing.assert_allclose(
        _validation.row_norms(X * 1e300) / 1e300, np.linalg.norm(X, axis=1), rtol=1e-15
    )


def test_check_float32_range_names_the_entry_of_a_sparse_or_3d_input():
    X = np.zeros((2, 2, 2))
    X[1, 0, 1] = 1e20
    with pytest.raises(ValueError, match=r"1e\+20 \(at index \(1, 0, 1\)\)"):
        _validation.check_float32_range(X, estimator="E")
    csr = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, -3e19]]))
    with pytest.raises(ValueError, match=r"-3e\+19 \(row 1, column 2\): E computes"):
        _validation.check_float32_range(csr, estimator="E")
    empty = np.zeros((0, 3))
    assert _validation.check_float32_range(empty, estimator="E") is empty


def test_check_label_vector_errors_name_the_input_and_the_entry():
    with pytest.raises(ValueError, match=r"labels must be a 1-D .* shape \(2, 2\)"):
        _validation.check_label_vector(np.zeros((2, 2)), input_name="labels")
    with pytest.raises(ValueError, match="y contains NaN at index 2"):
        _validation.check_label_vector(np.array([0.0, 1.0, np.nan]))
    with pytest.raises(TypeError, match=r"y\[1\] = \[1\] is not a valid class label"):
        _validation.check_label_vector(np.array(["a", [1]], dtype=object))


def test_check_finite_product_returns_the_product_or_names_the_row():
    X, M = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0], [-1.0]])
    np.testing.assert_array_equal(_validation.check_finite_product(X, M), [[-1.0], [-1.0]])
    with pytest.raises(ValueError, match=r"Z has values so large \(row 1: largest absolute"):
        _validation.check_finite_product(
            np.array([[1.0, 0.0], [1e308, 1e308]]), M * 10, input_name="Z"
        )


def test_naming_inputs_leaves_subclasses_and_named_errors_alone():
    with pytest.raises(NotFittedError, match="^not fitted$"):
        with _validation.naming_inputs("X"):
            raise NotFittedError("not fitted")
    with pytest.raises(ValueError, match="^X is bad$"):
        with _validation.naming_inputs("X"):
            raise ValueError("X is bad")
    with pytest.raises(ValueError, match="^Invalid X and y: inconsistent numbers of samples"):
        with _validation.naming_inputs("X", "y"):
            raise ValueError("inconsistent numbers of samples: [2, 3]")


def test_check_bilinear_range_passes_empty_and_bounded_inputs_and_names_overflow():
    A = np.eye(2)
    assert _validation.check_bilinear_range(np.zeros((0, 2)), A) is None
    assert _validation.check_bilinear_range(np.full((2, 2), 1e150), A) is None
    with pytest.raises(ValueError, match=r"W has rows of norm up to 1\.41e\+200.*Scale W first\."):
        _validation.check_bilinear_range(np.full((2, 2), 1e200), A, input_name="W", fix=" first")


def test_check_ndim_accepts_the_right_dimension():
    assert _validation.check_ndim(np.zeros((2, 3)), 2, "(a, b)", input_name="x") is None
    with pytest.raises(ValueError, match=r"^x must be 3-D \(a, b, c\); got shape \(2, 3\)\.$"):
        _validation.check_ndim(np.zeros((2, 3)), 3, "(a, b, c)", input_name="x")


@pytest.mark.parametrize("value", [1, np.int64(7)])
def test_check_positive_int_returns_a_python_int(value):
    result = _validation.check_positive_int(value, "n")
    assert result == value and type(result) is int


@pytest.mark.parametrize("value", [0, -2, 1.0, True, "3", None])
def test_check_positive_int_names_the_argument(value):
    with pytest.raises(ValueError, match=rf"^count must be a positive integer, got {value!r}\.$"):
        _validation.check_positive_int(value, "count")
