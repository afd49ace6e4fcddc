"""Warnings and errors raised by skrank."""

__all__ = ["DivergenceWarning", "SolverAccuracyWarning"]


class DivergenceWarning(RuntimeWarning):
    """Training produced a non-finite loss or weights and was stopped.

    The estimator keeps the last finite weights (those at the end of the last complete epoch), so
    it never returns a NaN model. Lowering the learning rate usually helps.
    """


class SolverAccuracyWarning(UserWarning):
    """An external solver returned a solution that is feasible but only approximately optimal.

    Raised with the relative duality gap that skrank certified independently of the solver's own
    status; the solution is returned. Exact solvers (``solver="kkt"``) never raise it.
    """
