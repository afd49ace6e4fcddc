"""Warnings and errors raised by skrank."""

__all__ = ["DivergenceWarning"]


class DivergenceWarning(RuntimeWarning):
    """Training produced a non-finite loss or weights and was stopped.

    The estimator keeps the last finite weights (those at the end of the last complete epoch), so
    it never returns a NaN model. Lowering the learning rate usually helps.
    """
