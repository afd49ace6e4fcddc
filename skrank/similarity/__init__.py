"""Pointwise ROC similarity learning: the estimator and its Neyman-Pearson solvers."""

from ._solvers import NeymanPearsonSolution, feasible_alpha_range, solve_cvxpy, solve_kkt

__all__ = [
    "NeymanPearsonSolution",
    "feasible_alpha_range",
    "solve_cvxpy",
    "solve_kkt",
]
