"""Pair-based metric learners and their mathematics.

The two learners of a similarity or a distance from the pairs implied by class labels:

- :class:`PointwiseROCSimilarity`: a bilinear similarity with the largest true-positive rate at
  a bounded negative risk (Vogel, Bellet & Clémençon, 2018), solved in closed form
  (:func:`solve_kkt`) or with cvxpy (:func:`solve_cvxpy`); :func:`feasible_alpha_range`,
  :func:`regularized_positive_matrix` (the pull toward the cosine similarity) and
  :func:`select_alpha` (the level giving the best TPR at a target FPR on held-out pairs).
- :class:`MMC`: a Mahalanobis metric (Xing et al., 2002), solved to a certified optimum;
  :func:`figure_of_merit` scores any embedding by the paper's criterion (e.g. a peer's metric).

Both learn from the pairs implied by class labels or from given pairs, similar and dissimilar
(Xing et al.'s side information); :func:`pair_groups` groups given pairs by the items they share,
for group-aware cross-validation.

:func:`one_standard_error_rule` chooses between a learned metric and no metric learning in a
grid search: the learned one only when it beats the baseline by more than one standard error.

The decision threshold of a bilinear similarity at a target false-positive rate:
:func:`negative_pair_similarities` (all negative pairs of a labelled sample, or a uniform sample
of them) and :func:`threshold_at_fpr`.

And the exact pair statistics the learners are built on, with no loop over pairs:
:class:`PairStatistics`, :func:`similar_pair_scatter`, :func:`dissimilar_pair_scatter`,
:func:`negative_pair_outer_mean`. The pair samplers (incomplete U-statistics) are in
:mod:`skrank.sampling`.
"""

from ._given_pairs import pair_groups
from ._mmc import MMC
from ._mmc_solver import figure_of_merit
from ._pair_scores import negative_pair_similarities, threshold_at_fpr
from ._pair_statistics import (
    PairStatistics,
    dissimilar_pair_scatter,
    negative_pair_outer_mean,
    similar_pair_scatter,
)
from ._pointwise_roc import PointwiseROCSimilarity
from ._pointwise_roc_solvers import (
    NeymanPearsonSolution,
    feasible_alpha_range,
    regularized_positive_matrix,
    select_alpha,
    solve_cvxpy,
    solve_kkt,
)
from ._selection import one_standard_error_rule

__all__ = [
    "MMC",
    "NeymanPearsonSolution",
    "PairStatistics",
    "PointwiseROCSimilarity",
    "dissimilar_pair_scatter",
    "feasible_alpha_range",
    "figure_of_merit",
    "negative_pair_outer_mean",
    "negative_pair_similarities",
    "one_standard_error_rule",
    "pair_groups",
    "regularized_positive_matrix",
    "select_alpha",
    "similar_pair_scatter",
    "solve_cvxpy",
    "solve_kkt",
    "threshold_at_fpr",
]
