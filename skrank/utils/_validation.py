"""Checks of inputs against what a computation can represent, shared by every skrank module.

* :func:`power_of_two_scale` and :func:`normalize_rows`: exact rescalings (by powers of two) that
  let scale-invariant computations (L2 normalisation, rankings, MMC) give at ``1e-300`` and
  ``1e300`` the answer they give at ``1``, with no overflow or underflow on the way;
* :func:`check_float32_range`: the range of magnitudes the torch estimators (which compute in
  float32) can learn from and predict on, with an error that names the input and the fix;
* :func:`check_label_vector`: class labels may be any hashable values, floats included;
* :func:`naming_inputs`: errors of scikit-learn's and numpy's validation that do not say which
  input they are about ("Expected 2D input", "inconsistent numbers of samples", "could not
  convert string to float") are re-raised naming the user's argument.
"""

import contextlib
import re
from numbers import Integral

import numpy as np
from scipy import sparse

from ._docstrings import fill_docs

# Squares (norms, Adam's second moments) of values outside [2^-63, 2^63] under- or overflow
# float32: sqrt(float32 max) = 1.84e19 = 2^64, sqrt(smallest normal float32) = 2^-63.
FLOAT32_SAFE_MAX = 2.0**63
FLOAT32_SAFE_MIN = 2.0**-63

_ROWS_DOCS = {"rows": ("X", "ndarray of shape (..., n_features)", "Finite values.")}


def _values(X):
    return X.data if sparse.issparse(X) else np.asarray(X)


def max_abs(X):
    """Largest absolute value of a dense or sparse array (0.0 when empty)."""
    values = _values(X)
    return float(np.max(np.abs(values))) if values.size else 0.0


def power_of_two_scale(X):
    """A power of two ``c`` such that the largest absolute value of ``c * X`` lies in [0.5, 1).

    Multiplying by a power of two is exact (barring subnormal results), so ``c * X`` holds the
    same digits as ``X`` at a scale where squares and sums neither overflow nor underflow.

    Parameters
    ----------
    X : array-like or sparse matrix
        Finite values.

    Returns
    -------
    c : numpy.float64
        A numpy scalar (so that an overflow gives inf, not an exception); ``1.0`` when ``X`` is
        empty or all zero.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.utils._validation import power_of_two_scale
    >>> float(power_of_two_scale(np.array([3.0, -6.0])))
    0.125
    >>> float(power_of_two_scale(np.array([1e300])) * 1e300)
    0.7466108948025751
    """
    largest = max_abs(X)
    if largest == 0 or not np.isfinite(largest):
        return np.float64(1.0)
    exponent = int(np.frexp(largest)[1])  # largest = m * 2**exponent, m in [0.5, 1)
    # For subnormal data 2**-exponent is not representable: 2**1000 brings it near 1e-16.
    return np.float64(np.ldexp(1.0, min(-exponent, 1000)))


@fill_docs(_ROWS_DOCS)
def normalize_rows(X):
    """Rows of ``X`` divided by their Euclidean norms, with no overflow or underflow.

    Each row is first rescaled by a power of two that brings its largest absolute value into
    [0.5, 1) (exact), so rows of ``1e-300`` or ``1e300`` are normalised as rows of ``1`` are.

    Parameters
    ----------
    {rows}

    Returns
    -------
    unit : ndarray of the shape of X
        Unit rows; all-zero rows stay zero.
    zero : ndarray of bool of shape X.shape[:-1]
        Which rows are all zero (exactly: no underflow can make a non-zero row zero).

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.utils._validation import normalize_rows
    >>> normalize_rows(np.array([[3e-300, 4e-300], [0.0, 0.0]]))
    (array([[0.6, 0.8],
           [0. , 0. ]]), array([False,  True]))
    """
    scaled, _ = _rows_scaled_to_unit(X)
    norms = _norms(scaled)[..., None]
    return scaled / np.where(norms > 0, norms, 1.0), norms[..., 0] == 0


@fill_docs(_ROWS_DOCS)
def row_norms(X):
    """Euclidean norms of the rows of ``X``, with no intermediate overflow or underflow.

    ``np.linalg.norm`` squares the entries: rows of ``1e200`` give ``inf`` and rows of
    ``1e-200`` give ``0``. Here each row is first rescaled by a power of two (exact), so the
    result is ``inf`` only when the norm itself exceeds float64's range.

    Parameters
    ----------
    {rows}

    Returns
    -------
    norms : ndarray of shape X.shape[:-1]

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.utils._validation import row_norms
    >>> row_norms(np.array([[3e200, 4e200], [3e-200, 4e-200]])) / np.array([1e200, 1e-200])
    array([5., 5.])
    """
    scaled, exponent = _rows_scaled_to_unit(X)
    norms = _norms(scaled)
    with np.errstate(over="ignore"):  # a norm beyond float64's range is inf
        return _ldexp_in_halves(norms, exponent[..., 0])


def _ldexp_in_halves(values, exponent):
    """``values * 2**exponent`` in two steps: one factor 2**e may not be representable."""
    half = exponent // 2
    return np.ldexp(np.ldexp(values, half), exponent - half)


def _norms(rows):
    """Euclidean norms of rows whose largest value is below 1 (no overflow possible)."""
    return np.sqrt(np.einsum("...i,...i->...", rows, rows))


def _rows_scaled_to_unit(X):
    """Each row divided by a power of two ``2**e`` bringing its largest value into [0.5, 1),
    and ``e`` (shape (..., 1)); all-zero rows stay zero (``e = 1``)."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[-1] == 0:
        return X, np.ones((*X.shape[:-1], 1), dtype=np.int64)
    largest = np.max(np.abs(X), axis=-1, keepdims=True)
    exponent = np.frexp(np.where(largest > 0, largest, 1.0))[1]
    return _ldexp_in_halves(X, -exponent), exponent


def canonical_csr(X, *, dtype=None, drop_zeros=False):
    """``X`` as a CSR matrix in canonical format, never writing into the arrays of ``X``.

    scipy's ``csr_matrix(X, dtype=...)`` shares the index arrays of a CSR ``X`` (and its values
    when the dtype is unchanged), and ``sum_duplicates``, ``sort_indices`` and
    ``eliminate_zeros`` write in place: on such a view they reorder the caller's indices (under
    values converted elsewhere) or fail on read-only buffers. Here a matrix that needs any of
    them is copied first; one that needs none is returned without a copy, its arrays possibly
    shared with ``X`` (to be read, never written).

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_rows, n_columns)
        The input, left unchanged.
    dtype : numpy dtype or None, default=None
        Dtype of the values; None keeps that of ``X``.
    drop_zeros : bool, default=False
        Whether to remove explicit zeros too.

    Returns
    -------
    csr : scipy.sparse.csr_matrix
        Sorted indices and no duplicate entries (and no explicit zeros with ``drop_zeros``).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from skrank.utils._validation import canonical_csr
    >>> X = sp.csr_matrix((np.array([2.0, 1.0, 0.0]), [1, 0, 1], [0, 3]), shape=(1, 2))
    >>> canonical_csr(X, dtype=np.float32, drop_zeros=True).toarray()
    array([[1., 2.]], dtype=float32)
    >>> X.indices  # unchanged: the duplicates were summed on a copy
    array([1, 0, 1], dtype=int32)
    """
    csr = sparse.csr_matrix(X, dtype=dtype)
    needs_zeros_dropped = drop_zeros and csr.nnz and not csr.data.all()
    if csr.has_canonical_format and not needs_zeros_dropped:
        return csr
    csr = csr.copy()
    csr.sum_duplicates()
    if drop_zeros:
        csr.eliminate_zeros()
    return csr


def check_float32_range(X, *, estimator, input_name="X", fitting=True):
    """Raise a ValueError unless a torch estimator can compute on ``X`` in float32.

    The networks compute in float32, where squares (norms, gradient moments) of values above
    ``2^63`` (about ``9.2e18``) overflow, and, when fitting, squares of a largest value below
    ``2^-63`` (about ``1.1e-19``) underflow so that the gradients of the input weights vanish:
    both give constant or NaN outputs with no other sign. The networks are not invariant to the
    scale of their inputs (biases, non-linearities), so no rescaling would give the same answer:
    the user must scale ``X``.

    Parameters
    ----------
    X : ndarray or sparse matrix
        Finite inputs (after ``validate_data``).
    estimator : str
        Name of the estimator, for the message.
    input_name : str, default="X"
        Name of the input, for the message.
    fitting : bool, default=True
        Whether ``X`` trains the network: then a largest value that is too small is also an error.
        At prediction, small values are computed exactly enough (the network's output at them is
        its output at zero to float32 precision).

    Returns
    -------
    X : the input, unchanged
    """
    values = _values(X)
    if values.size == 0:
        return X
    largest = max(float(np.max(values)), -float(np.min(values)))  # no |X| copy
    fix = (
        f"Scale {input_name} (e.g. with sklearn.preprocessing.StandardScaler in a pipeline) so "
        "that its values lie roughly within [-1e3, 1e3]."
    )
    if largest > FLOAT32_SAFE_MAX:
        flat = np.argmax(np.abs(values))
        where = _location(X, flat)
        raise ValueError(
            f"{input_name} has a value of {values.flat[flat]:.3g} {where}: {estimator} computes "
            f"in float32, where the squares of values above {FLOAT32_SAFE_MAX:.3g} overflow "
            f"(float32's largest number is {np.finfo(np.float32).max:.3g}), which would give "
            f"NaN or constant outputs. {fix}"
        )
    if fitting and 0 < largest < FLOAT32_SAFE_MIN:
        raise ValueError(
            f"The largest absolute value of {input_name} is {largest:.3g}: {estimator} computes "
            f"in float32, where the squares of values below {FLOAT32_SAFE_MIN:.3g} underflow to "
            f"zero, so the network could not learn from {input_name} (constant outputs). {fix}"
        )
    return X


def _location(X, flat):
    """``(row i, column j)`` of the ``flat``-th stored value of ``X``, in words."""
    if sparse.issparse(X):
        X = X.tocsr()
        row = int(np.searchsorted(X.indptr, flat, side="right") - 1)
        return f"(row {row}, column {int(X.indices[flat])})"
    index = np.unravel_index(flat, np.shape(X))
    if len(index) == 2:
        return f"(row {int(index[0])}, column {int(index[1])})"
    return f"(at index {tuple(int(i) for i in index)})"


def check_positive_int(value, name):
    """``value`` as an int, or a ValueError naming ``name`` unless it is an integer >= 1
    (booleans are refused)."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def check_ndim(value, ndim, axes, *, input_name):
    """Raise a ValueError naming ``input_name`` unless ``value`` (an array or a tensor) has
    ``ndim`` dimensions; ``axes`` names them in the message, e.g. ``"(n_samples, n_labels)"``.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.utils._validation import check_ndim
    >>> check_ndim(np.zeros(3), 2, "(n_rows, n_columns)", input_name="scores")
    Traceback (most recent call last):
    ...
    ValueError: scores must be 2-D (n_rows, n_columns); got shape (3,).
    """
    if value.ndim != ndim:
        raise ValueError(f"{input_name} must be {ndim}-D {axes}; got shape {tuple(value.shape)}.")


def check_label_vector(y, *, input_name="y"):
    """Check class labels given to a (non-classifier) estimator: a 1-D array of hashable values.

    Unlike scikit-learn's ``check_classification_targets`` this accepts float labels such as
    ``0.5`` (labels are only compared for equality); NaN and unhashable labels are errors.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels (after ``validate_data``).
    input_name : str, default="y"
        Name of the input, for the message.

    Returns
    -------
    y : the input, unchanged
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(
            f"{input_name} must be a 1-D array of class labels; got an array of shape {y.shape}."
        )
    if y.dtype.kind == "f" and np.isnan(y).any():
        raise ValueError(
            f"{input_name} contains NaN at index {int(np.flatnonzero(np.isnan(y))[0])}: NaN is "
            "not a class label. Remove these items or give them a label."
        )
    if y.dtype.kind == "O":
        for index, label in enumerate(y.tolist()):
            try:
                hash(label)
            except TypeError:
                raise TypeError(
                    f"{input_name}[{index}] = {label!r} is not a valid class label: labels must "
                    "be hashable (numbers, strings, tuples, ...)."
                ) from None
            if label is None or (isinstance(label, float) and np.isnan(label)):
                raise ValueError(
                    f"{input_name}[{index}] is {label!r}, which is not a class label. Remove "
                    "these items or give them a label."
                )
    return y


def check_finite_product(X, matrix, *, input_name="X"):
    """``X @ matrix``, or a ValueError naming ``X`` when the product overflows float64.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Finite inputs.
    matrix : ndarray of shape (n_features, n_outputs)
        Finite fitted matrix.
    input_name : str, default="X"
        Name of the input, for the message.

    Returns
    -------
    product : ndarray of shape (n_samples, n_outputs)
    """
    with np.errstate(over="ignore", invalid="ignore"):
        product = X @ matrix
    if not np.all(np.isfinite(product)):
        row = int(np.flatnonzero(~np.isfinite(product).all(axis=1))[0])
        raise ValueError(
            f"{input_name} has values so large (row {row}: largest absolute value "
            f"{np.max(np.abs(X[row])):.3g}) that the transformed values exceed float64's range "
            f"({np.finfo(np.float64).max:.3g}). Scale {input_name} (the model's output scales "
            "with it)."
        )
    return product


@contextlib.contextmanager
def naming_inputs(*names):
    """Re-raise a ValueError or TypeError that names none of ``names`` so that it names them.

    Wrap the validation of user inputs (``validate_data``, ``check_array``): scikit-learn's
    messages for a wrong number of dimensions, too few rows or features, complex values, and
    numpy's failed conversions do not say which argument they are about. The first name is
    blamed, except for inconsistent lengths, which blame all. The original error is chained.

    Parameters
    ----------
    *names : str
        Names of the user's arguments being validated, the main one first (e.g. "X", "y").

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.utils import check_array
    >>> from skrank.utils._validation import naming_inputs
    >>> try:
    ...     with naming_inputs("X"):
    ...         check_array(np.zeros(3))
    ... except ValueError as error:
    ...     print(str(error).splitlines()[0])
    Invalid X: Expected 2D array, got 1D array instead:
    """
    try:
        yield
    except (ValueError, TypeError) as error:
        if type(error) not in (ValueError, TypeError):  # e.g. NotFittedError: left alone
            raise
        message = str(error)
        if any(re.search(rf"\b{re.escape(name)}\b", message) for name in names):
            raise
        if "inconsistent numbers of samples" in message:
            blamed = " and ".join(names)
        else:
            blamed = names[0]
        raise type(error)(f"Invalid {blamed}: {message}") from error


def check_bilinear_range(X, A, *, input_name="X", fix=""):
    """Raise a ValueError naming ``X`` when bilinear forms ``x^T A x'`` of its rows may overflow.

    ``|x^T A x'| <= ||x|| ||A||_2 ||x'|| <= ||x|| ||A||_F ||x'||``: the check is that this bound
    is finite for the largest row norm (computed without overflow, :func:`row_norms`).

    Parameters
    ----------
    X : ndarray of shape (..., n_features)
        Finite inputs.
    A : ndarray of shape (n_features, n_features)
        Finite matrix.
    input_name : str, default="X"
        Name of the input, for the message.
    fix : str, default=""
        What the user can do, appended to the message.
    """
    if X.size == 0:
        return
    largest = float(np.max(row_norms(X)))
    scale = float(row_norms(np.asarray(A, dtype=np.float64).reshape(1, -1))[0])
    with np.errstate(over="ignore"):
        bound = largest * scale * largest
    if not np.isfinite(bound):
        raise ValueError(
            f"{input_name} has rows of norm up to {largest:.3g}, so the similarities x^T A x' "
            f"of its rows exceed float64's range ({np.finfo(np.float64).max:.3g}). "
            f"Scale {input_name}{fix}."
        )
