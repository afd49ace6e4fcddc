"""Warnings and errors raised by skrank."""

from sklearn.exceptions import InconsistentVersionWarning as _SklearnInconsistentVersionWarning

__all__ = [
    "DivergenceWarning",
    "ExtremeFormatError",
    "InconsistentVersionWarning",
    "SolverAccuracyWarning",
]


class DivergenceWarning(RuntimeWarning):
    """Training produced a non-finite loss or weights and was stopped.

    The estimator keeps the last finite weights (those at the end of the last complete epoch), so
    it never returns a NaN model. Lowering the learning rate usually helps.
    """


class ExtremeFormatError(ValueError):
    """A file in the Extreme Classification Repository's text format is malformed.

    Raised by :func:`skrank.datasets.load_extreme_file` and
    :func:`~skrank.datasets.load_extreme_split`; the message names the file and the line.
    """


class SolverAccuracyWarning(UserWarning):
    """An external solver returned a solution that is feasible but only approximately optimal.

    Raised with the relative duality gap that skrank certified independently of the solver's own
    status; the solution is returned. Exact solvers (``solver="kkt"``) never raise it.
    """


class InconsistentVersionWarning(_SklearnInconsistentVersionWarning):
    """An estimator is loaded by a skrank version other than the one that saved it.

    Raised when a pickle, joblib or skops file of a skrank estimator is loaded: the estimator
    loads, but attributes or behaviour may have changed between the versions. A subclass of
    scikit-learn's :class:`~sklearn.exceptions.InconsistentVersionWarning`, so filters on that
    class catch it too (``warnings.simplefilter("error", InconsistentVersionWarning)`` turns it
    into an error).

    Parameters
    ----------
    estimator_name : str
        The estimator's class name.
    current_version : str
        The skrank version loading the file.
    original_version : str
        The skrank version that wrote it (``"pre-0.2"`` for files that do not record it).
    """

    def __init__(self, *, estimator_name, current_version, original_version):
        super().__init__(
            estimator_name=estimator_name,
            current_sklearn_version=current_version,
            original_sklearn_version=original_version,
        )
        self.current_version = current_version
        self.original_version = original_version

    def __str__(self):
        return (
            f"Loading the estimator {self.estimator_name} saved by skrank "
            f"{self.original_version} with skrank {self.current_version}: its attributes or "
            "behaviour may differ between the versions. Refit it, or load it with skrank "
            f"{self.original_version} to compare."
        )
