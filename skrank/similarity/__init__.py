"""Pointwise ROC similarity learning: the estimator and its Neyman-Pearson solvers."""

from ._estimator import PointwiseROCSimilarity
from ._solvers import NeymanPearsonSolution, feasible_alpha_range, solve_cvxpy, solve_kkt

__all__ = [
    "NeymanPearsonSolution",
    "PointwiseROCSimilarity",
    "feasible_alpha_range",
    "solve_cvxpy",
    "solve_kkt",
]
