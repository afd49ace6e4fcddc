"""Labels (``skrank.utils._labels``): indicator values outside {0, 1}."""

import numpy as np
import pytest
import scipy.sparse as sp

from skrank.utils._labels import values_outside_zero_one


@pytest.mark.parametrize("to_matrix", [np.asarray, sp.csr_matrix])
def test_values_outside_zero_one(to_matrix):
    assert values_outside_zero_one(to_matrix([[0, 1], [1, 0]])) is None
    assert values_outside_zero_one(to_matrix([[0, 1], [0, 0]])) is None
    assert values_outside_zero_one(to_matrix([[-1, 1], [1, -1]])) == [-1, 1]
    expected = [1, 2] if to_matrix is sp.csr_matrix else [0, 1, 2]  # sparse: stored values
    assert values_outside_zero_one(to_matrix([[0, 2], [1, 0]])) == expected
