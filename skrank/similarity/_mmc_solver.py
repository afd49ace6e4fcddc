"""The mathematics of MMC: objective, gradient over pairs, and an exact convex solver.

MMC (Xing, Ng, Jordan & Russell, 2002) in the form of Section 5.3 of Vogel, Bellet & Clémençon
(2018) learns a Mahalanobis matrix ``A``::

    max_A  mean_{dissimilar i<j} d_A(x_i, x_j)
    s.t.   <S, A> = mean_{similar i<j} d_A(x_i, x_j)^2 <= 1,   A >= 0 (PSD),

with ``d_A(x, x') = sqrt((x - x')^T A (x - x'))`` and ``S`` the mean of ``(x_i - x_j)(x_i - x_j)^T``
over similar pairs (:func:`skrank.similarity.similar_pair_scatter`, exact in ``O(n d^2)``).

How it is solved
----------------
*Change of variables.* With ``S_r = S + ridge I`` positive definite and ``W`` such that
``W^T S_r W = I``, put ``B = W^{-1} A W^{-T}`` and ``u = W^T (x - x')``: then
``<S_r, A> = tr B`` and ``d_A(x, x') = sqrt(u^T B u)``. The feasible set becomes the *spectraplex*
``{B >= 0, tr B <= 1}`` (for a diagonal ``A``, the capped simplex ``{b >= 0, sum b <= 1}``), onto
which the Euclidean projection is exact: an eigendecomposition and the projection of the
eigenvalues onto the capped simplex. The objective is concave and positively homogeneous of degree
1/2, so the trace constraint is active at the optimum.

*Rank control.* ``min_rank = k`` adds ``B <= I / k`` (every eigenvalue at most ``1 / k``): the
set ``{0 <= B <= I / k, tr B <= 1}``, whose points of trace one have rank at least ``k``. Its
projection is as exact (eigenvalues projected onto ``{0 <= x <= 1 / k, sum x <= 1}``, a
piecewise-linear equation in the shift) and its linear oracle is the sum of the ``k`` largest
positive eigenvalues of the gradient over ``k``; the minorize-maximize step below could leave
the set, so only projected gradient steps are taken there. The trace penalty of the estimator is
the ridge below (``scatter_ridge``), which whitening absorbs.

*Optimiser.* Two ascent steps, alternated; every iterate is feasible.

1. Spectral projected gradient (Birgin, Martínez & Raydan, 2000, SPG2): a projected gradient step
   with a Barzilai-Borwein step length and a non-monotone Armijo line search along the segment to
   the projected point. It converges to the optimum of a concave problem over a convex set and can
   change the rank of ``B``; it is the paper's "projected gradient ascent", made fast by the
   step-length rule instead of a hand-tuned step.
2. Minorize-maximize: with ``B = F F^T``, ``|F^T u| >= <F^T u, F_0^T u> / |F_0^T u|``
   (Cauchy-Schwarz) minorises the objective by a linear function of ``F`` whose maximiser on
   ``|F|_F <= 1`` is ``F = G F_0 / |G F_0|_F``, i.e. ``B <- G B G / tr(G B G)``: a monotone step
   needing no line search. Near an optimum where some pairs have small distances the objective is
   very curved (``sqrt`` near 0) and gradient steps crawl, while this fixed-point step lands on the
   balance of the gradient over the range of ``B`` at once; it cannot change that range, which
   step 1 does.

On digits-like problems SPG alone needs about as many evaluations as the alternation; on problems
whose optimum has a nearly vanishing eigenvalue it stalls far from a small duality gap, which the
alternation reaches in a few steps (tested).

*Convergence test.* Concavity gives, at any feasible ``B`` with supergradient ``G``,
``f(B*) - f(B) <= max_{B' feasible} <G, B' - B> = lambda_max(G) - <G, B>`` (the Frank-Wolfe duality
gap; the largest eigenvalue, or the largest entry in the diagonal case, is the linear oracle over
the spectraplex). The solver stops when this gap, a certificate of suboptimality, is at most
``tol`` times the objective.

*Gradient without a pair loop.* For pair weights ``c_ij = w_ij / (2 d_ij)``,
``sum_ij c_ij u_ij u_ij^T = U^T (Diag(C 1 + C^T 1) - C - C^T) U``: over all negative pairs this is
accumulated over dense blocks of the class-sorted pair matrix (only different-class blocks are
computed, memory bounded by scikit-learn's ``working_memory``); over a pair sample ``C`` is a
sparse matrix.

*Zero distances.* ``sqrt`` has an infinite derivative at 0: distances are floored at ``floor``
(``1e-8`` times the root mean square whitened dissimilar-pair difference) when weighting the
gradient. For a pair of identical points (``u = 0``, constant zero distance) the floored weight
multiplies ``u u^T = 0``; for ``u != 0`` with ``u^T B u = 0`` it is a large, finite push towards
increasing that distance, which is the true ascent direction.

*Rank-deficient scatter.* Along a direction with no within-class spread (constant features,
``d > n``) in which dissimilar pairs differ, the problem is unbounded. The ridge
``scatter_ridge * trace(S) / d`` makes it bounded; :func:`fit_mmc` reports when the unregularised
problem would be unbounded so that the estimator can warn.
"""

import functools
import itertools
from typing import NamedTuple

import numpy as np
from scipy import linalg, sparse
from sklearn.utils.extmath import svd_flip
from threadpoolctl import threadpool_limits

from ..sampling import PairSample, count_pairs, sample_negative_pairs, sample_negative_tuples
from ..sampling._pairs import class_codes
from ..utils._memory import chunk_rows
from ..utils._validation import power_of_two_scale
from ._neighbor_pairs import nearest_pairs
from ._pair_statistics import (
    _symmetrize,
    dissimilar_pair_scatter,
    pair_difference_scatter,
    similar_pair_scatter,
)

__all__ = [
    "AllNegativePairs",
    "MMCFit",
    "MMCStatistics",
    "PairDifferences",
    "SampledPairs",
    "SimplexGeometry",
    "SolverResult",
    "SpectraplexGeometry",
    "figure_of_merit",
    "fit_mmc",
    "given_pair_statistics",
    "given_pair_statistics_for",
    "initial_metric",
    "maximize_mean_distance",
    "mmc_statistics",
    "project_capped_simplex",
]

# Relative size of the distance floor (see the module docstring).
_FLOOR = 1e-8
# Bytes of work arrays per pair of a dense block of AllNegativePairs (distances, mask, products).
_BLOCK_BYTES_PER_PAIR = 24
# Eigenvalues of S below this fraction of the largest count as "no within-class spread".
_NULL_SPREAD = 1e-10


def project_capped_simplex(values, cap=None):
    """Euclidean projection of a vector onto ``{0 <= x <= cap, sum(x) <= 1}``.

    Parameters
    ----------
    values : ndarray of shape (n,)
        Point to project.
    cap : float or None, default=None
        Upper bound on each entry (``cap * n >= 1``); None means no bound.

    Returns
    -------
    projection : ndarray of shape (n,)
        ``clip(values - theta, 0, cap)`` with the smallest ``theta >= 0`` making the sum at most
        one.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.similarity._mmc_solver import project_capped_simplex
    >>> project_capped_simplex(np.array([0.2, -1.0, 0.3]))
    array([0.2, 0. , 0.3])
    >>> project_capped_simplex(np.array([2.0, 1.0, -1.0]))
    array([1., 0., 0.])
    >>> project_capped_simplex(np.array([2.0, 1.0, -1.0]), cap=0.5)
    array([0.5, 0.5, 0. ])
    """
    upper = np.inf if cap is None else cap
    clipped = np.clip(values, 0.0, upper)
    if clipped.sum() <= 1.0:
        return clipped
    if cap is None:
        descending = np.sort(values)[::-1]
        excess = np.cumsum(descending) - 1.0
        support = np.nonzero(descending * np.arange(1, values.shape[0] + 1) > excess)[0][-1]
        return np.maximum(values - excess[support] / (support + 1), 0.0)
    # sum(clip(values - theta, 0, cap)) is piecewise linear and non-increasing in theta, with
    # breakpoints at values and values - cap: find the piece where it crosses one, then solve.
    breakpoints = np.unique(np.concatenate([values, values - cap]))
    breakpoints = breakpoints[breakpoints > 0]
    sums = np.clip(values[None, :] - breakpoints[:, None], 0.0, cap).sum(axis=1)
    above = np.nonzero(sums > 1.0)[0]
    low = breakpoints[above[-1]] if above.size else 0.0
    low_sum = sums[above[-1]] if above.size else clipped.sum()
    high = breakpoints[above[-1] + 1] if above.size else breakpoints[0]
    high_sum = sums[above[-1] + 1] if above.size else sums[0]
    theta = low + (low_sum - 1.0) * (high - low) / (low_sum - high_sum)
    return np.clip(values - theta, 0.0, cap)


def _capped_linear_oracle(values, cap):
    """``max <values, x>`` over ``{0 <= x <= cap, sum(x) <= 1}``: the largest positive entries."""
    descending = np.sort(values)[::-1]
    descending = descending[descending > 0]
    weights = np.clip(1.0 - cap * np.arange(descending.shape[0]), 0.0, cap)
    return float(weights @ descending)


class Point(NamedTuple):
    """A feasible metric in whitened coordinates and a factor of it.

    Attributes
    ----------
    value : ndarray
        ``B`` of shape (d, d), or the diagonal ``b`` of shape (d,).
    factor : ndarray
        ``F`` of shape (d, r) with ``B = F F^T``, or ``sqrt(b)`` of shape (d,).
    """

    value: np.ndarray
    factor: np.ndarray


class SpectraplexGeometry:
    """The feasible set ``{B >= 0, tr B <= 1}`` of a full whitened metric.

    Parameters
    ----------
    cap : float or None, default=None
        Bound on the eigenvalues of ``B`` (``{0 <= B <= cap I, tr B <= 1}``): with
        ``cap = 1 / k`` every point of trace one has rank at least ``k``.
    """

    diagonal = False

    def __init__(self, cap=None):
        self.cap = cap

    def project(self, matrix):
        """Euclidean projection of a symmetric matrix onto the set."""
        eigenvalues, eigenvectors = linalg.eigh(_symmetrize(matrix))
        return self._point(eigenvectors, project_capped_simplex(eigenvalues, self.cap))

    def point(self, matrix):
        """A :class:`Point` from a matrix already in the set (rounding errors are clipped)."""
        eigenvalues, eigenvectors = linalg.eigh(_symmetrize(matrix))
        upper = np.inf if self.cap is None else self.cap
        return self._point(eigenvectors, np.clip(eigenvalues, 0.0, upper))

    @staticmethod
    def _point(eigenvectors, eigenvalues):
        kept = eigenvalues > 0
        factor = eigenvectors[:, kept] * np.sqrt(eigenvalues[kept])
        return Point(factor @ factor.T, factor)

    @staticmethod
    def embed(U, point):
        """Rows of ``U`` mapped so that Euclidean distances are the ``B``-distances."""
        return U @ point.factor

    @staticmethod
    def minorize_maximize(point, gradient):
        """``B <- G B G / tr(G B G)``, i.e. ``F <- G F / |G F|``: a monotone ascent step."""
        factor = gradient @ point.factor
        factor /= np.linalg.norm(factor)
        return Point(factor @ factor.T, factor)

    def linear_oracle(self, gradient):
        """``max <gradient, B'>`` over the set, for a positive semi-definite gradient."""
        if self.cap is None:
            return max(float(linalg.eigvalsh(gradient)[-1]), 0.0)
        return _capped_linear_oracle(linalg.eigvalsh(gradient), self.cap)

    def components(self, point, whitening):
        """``L`` of shape (d, d) with ``A = L^T L``: see :func:`canonical_components`."""
        return canonical_components(self.point(point.value).factor.T @ whitening.T)


def canonical_components(factor):
    """The canonical ``L`` of shape (d, d) with ``L^T L = factor^T factor``.

    ``L = Diag(s) V^T`` from the SVD ``factor = U Diag(s) V^T``: rows by decreasing singular
    value (the square roots of the eigenvalues of ``A``, in the input space), each signed so
    that its largest entry in absolute value is positive (``svd_flip``), zero rows below the
    rank. Any factor of ``A`` gives the same ``L`` (up to rounding, when ``A``'s eigenvalues
    are distinct): the solver's factor lives in a whitened basis that rounding may rotate
    within tied eigenvalues (e.g. with the input's memory layout), which would rotate
    ``transform``'s output although the metric is the same.
    """
    _, singular_values, rows = linalg.svd(factor, full_matrices=False)
    _, rows = svd_flip(None, rows, u_based_decision=False)
    components = np.zeros((factor.shape[1], factor.shape[1]))
    components[: rows.shape[0]] = singular_values[:, None] * rows
    return components


class SimplexGeometry:
    """The feasible set ``{b >= 0, sum b <= 1}`` of a diagonal whitened metric.

    Parameters
    ----------
    cap : float or None, default=None
        Bound on each entry of ``b``: with ``cap = 1 / k`` at least ``k`` entries of a point
        summing to one are positive.
    """

    diagonal = True

    def __init__(self, cap=None):
        self.cap = cap

    def project(self, vector):
        """Euclidean projection of a vector onto the set."""
        value = project_capped_simplex(vector, self.cap)
        return Point(value, np.sqrt(value))

    def point(self, vector):
        """A :class:`Point` from a vector already in the set (rounding errors are clipped)."""
        value = np.clip(vector, 0.0, np.inf if self.cap is None else self.cap)
        return Point(value, np.sqrt(value))

    @staticmethod
    def embed(U, point):
        """Rows of ``U`` mapped so that Euclidean distances are the ``b``-distances."""
        kept = point.value > 0
        return U[:, kept] * point.factor[kept]

    @staticmethod
    def minorize_maximize(point, gradient):
        """``b <- g^2 b / sum(g^2 b)``: a monotone ascent step."""
        factor = gradient * point.factor
        factor /= np.linalg.norm(factor)
        return Point(factor**2, factor)

    def linear_oracle(self, gradient):
        """``max <gradient, b'>`` over the set."""
        if self.cap is None:
            return max(float(gradient.max()), 0.0)
        return _capped_linear_oracle(gradient, self.cap)

    @staticmethod
    def components(point, whitening):
        """``L = Diag(sqrt(a))`` of shape (d, d) with ``A = L^T L``."""
        return np.diag(point.factor * whitening)


def _laplacian_quadratic(U, degree, cross, diagonal):
    """``U^T Diag(degree) U - cross - cross^T`` (or its diagonal, ``cross`` then a vector)."""
    if diagonal:
        return degree @ (U * U) - 2 * cross
    return _symmetrize(U.T @ (degree[:, None] * U) - cross - cross.T)


class AllNegativePairs:
    """All negative pairs ``i < j`` of a labelled sample, processed in dense blocks.

    Items are sorted by class; a block is a set of consecutive rows against the columns of all
    later classes, so every negative pair is visited once and only the rows spanning a class
    boundary need a mask. A block holds at most ``max_block_entries`` pairs (memory bound).

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels (at least two classes).
    max_block_entries : int or None, default=None
        Bound on the number of pairs of one block; None fits a block's work arrays (about 24
        bytes per pair) in scikit-learn's ``working_memory``.
    """

    def __init__(self, y, max_block_entries=None):
        codes, counts = class_codes(y, negatives=True)
        self.n_negative = count_pairs(codes)[1]
        self.order = np.argsort(codes, kind="stable")
        n = codes.shape[0]
        # First column (in class-sorted order) that is a negative partner of each sorted row.
        self.first_partner = np.cumsum(counts)[codes[self.order]]
        if max_block_entries is None:
            rows_per_block = chunk_rows(n, _BLOCK_BYTES_PER_PAIR * n)
        else:
            rows_per_block = max(1, max_block_entries // n)
        self.blocks = [
            (start, min(start + rows_per_block, n))
            for start in range(0, n, rows_per_block)
            if self.first_partner[start] < n
        ]

    def _block_distances(self, left, right, start, stop, squared_floor):
        """Distances of rows ``start:stop`` to their partner columns, and the invalid mask."""
        first, last = self.first_partner[start], self.first_partner[stop - 1]
        block = left[start:stop] @ right[first:].T
        np.maximum(block, squared_floor, out=block)
        np.sqrt(block, out=block)
        invalid = None
        if last > first:  # rows of several classes: mask same-class columns
            columns = np.arange(first, last)
            invalid = columns[None, :] < self.first_partner[start:stop, None]
            block[:, : last - first][invalid] = 0.0
        return block, first, invalid

    @staticmethod
    def _augmented(Z):
        # left @ right.T gives squared distances: |z_i|^2 + |z_j|^2 - 2 z_i.z_j.
        squared_norms = np.einsum("ij,ij->i", Z, Z)[:, None]
        ones = np.ones_like(squared_norms)
        return np.hstack([Z, squared_norms, ones]), np.hstack([-2 * Z, ones, squared_norms])

    def value(self, Z):
        """Mean Euclidean distance between rows of ``Z`` over all negative pairs."""
        left, right = self._augmented(Z[self.order])
        total = 0.0
        for start, stop in self.blocks:
            total += self._block_distances(left, right, start, stop, 0.0)[0].sum()
        return total / self.n_negative

    def value_and_gradient(self, Z, U, floor, diagonal):
        """Mean distance and its gradient with respect to the whitened metric.

        Parameters
        ----------
        Z : ndarray of shape (n_samples, r)
            Embedded items (Euclidean distances between rows are the metric's distances).
        U : ndarray of shape (n_samples, d)
            Whitened items.
        floor : float
            Floor on distances in the gradient weights.
        diagonal : bool
            Return the diagonal of the gradient only.

        Returns
        -------
        value : float
        gradient : ndarray of shape (d, d), or (d,) if ``diagonal``
        """
        left, right = self._augmented(Z[self.order])
        U = U[self.order]
        degree = np.zeros(U.shape[0])
        cross = np.zeros(U.shape[1] if diagonal else (U.shape[1], U.shape[1]))
        total = 0.0
        for start, stop in self.blocks:
            block, first, invalid = self._block_distances(left, right, start, stop, floor**2)
            total += block.sum()
            if invalid is not None:
                block[:, : invalid.shape[1]][invalid] = np.inf
            np.reciprocal(block, out=block)
            degree[start:stop] += block.sum(axis=1)
            degree[first:] += block.sum(axis=0)
            weighted = block @ U[first:]
            if diagonal:
                cross += np.einsum("ij,ij->j", U[start:stop], weighted)
            else:
                cross += U[start:stop].T @ weighted
        gradient = _laplacian_quadratic(U, degree, cross, diagonal) / (2 * self.n_negative)
        return total / self.n_negative, gradient


class SampledPairs:
    """A weighted sample of pairs (from the samplers of :mod:`skrank.sampling`).

    Parameters
    ----------
    sample : PairSample
        Pairs and weights summing to one.
    n_samples : int
        Number of items the indices refer to.
    max_block_entries : int or None, default=None
        Bound on the number of floats gathered at once; None fits them in scikit-learn's
        ``working_memory``.
    """

    def __init__(self, sample, n_samples, max_block_entries=None):
        self.sample = PairSample(*(np.asarray(part) for part in sample))
        self.n_samples = n_samples
        self.max_block_entries = max_block_entries
        self._order = np.argsort(self.sample.first, kind="stable")
        self._indptr = np.concatenate(
            [[0], np.cumsum(np.bincount(self.sample.first, minlength=n_samples))]
        )
        self._indices = self.sample.second[self._order]

    def _distances(self, Z):
        first, second, _ = self.sample
        distances = np.empty(first.shape[0])
        if self.max_block_entries is None:
            step = chunk_rows(first.shape[0], 16 * max(Z.shape[1], 1) + 8)
        else:
            step = max(1, self.max_block_entries // max(Z.shape[1], 1))
        for start in range(0, first.shape[0], step):
            difference = Z[first[start : start + step]] - Z[second[start : start + step]]
            distances[start : start + step] = np.sqrt(np.einsum("ij,ij->i", difference, difference))
        return distances

    def value(self, Z):
        """Weighted sum of Euclidean distances between the paired rows of ``Z``."""
        return float(self.sample.weight @ self._distances(Z))

    def value_and_gradient(self, Z, U, floor, diagonal):
        """Weighted distance sum and its gradient (as ``AllNegativePairs.value_and_gradient``)."""
        first, second, weight = self.sample
        distances = self._distances(Z)
        pair_weight = weight / (2 * np.maximum(distances, floor))
        pairs = sparse.csr_matrix(
            (pair_weight[self._order], self._indices, self._indptr),
            shape=(self.n_samples, self.n_samples),
        )
        degree = np.bincount(first, pair_weight, self.n_samples) + np.bincount(
            second, pair_weight, self.n_samples
        )
        # (Diag(C 1 + C^T 1) - C - C^T) U, then U^T times it.
        laplacian_U = degree[:, None] * U - pairs @ U - pairs.T @ U
        if diagonal:
            return float(weight @ distances), np.einsum("ij,ij->j", U, laplacian_U)
        return float(weight @ distances), _symmetrize(U.T @ laplacian_U)


class PairDifferences:
    """Weighted pairs given by their differences ``x_i - x_j``, one row each.

    The objective's rows are then the differences (``U`` holds ``W^T (x_i - x_j)``), a pair's
    distance is the norm of its embedded row and the gradient is ``sum_p c_p u_p u_p^T``: no
    pair graph, and one row per pair instead of two items when the pairs share few items.

    Parameters
    ----------
    weight : ndarray of shape (n_pairs,)
        Weight of each pair (summing to one).
    """

    def __init__(self, weight):
        self.weight = weight

    def value_and_gradient(self, Z, U, floor, diagonal):
        """Weighted distance sum and its gradient (as ``SampledPairs.value_and_gradient``)."""
        distances = np.sqrt(np.einsum("ij,ij->i", Z, Z))
        pair_weight = self.weight / (2 * np.maximum(distances, floor))
        value = float(self.weight @ distances)
        if diagonal:
            return value, pair_weight @ (U * U)
        return value, _symmetrize(U.T @ (U * pair_weight[:, None]))


class SolverResult(NamedTuple):
    """Outcome of :func:`maximize_mean_distance`."""

    point: Point
    objective: np.ndarray
    duality_gap: float
    n_iter: int
    converged: bool


def maximize_mean_distance(
    pairs,
    U,
    geometry,
    start,
    *,
    floor,
    max_iter,
    tol,
    memory=10,
    sufficient_increase=1e-4,
    verbose=False,
):
    """Maximise the mean pair distance over the spectraplex (or capped simplex).

    Alternates a minorize-maximize step and a spectral projected gradient step (Birgin, Martínez &
    Raydan, 2000, SPG2, with its non-monotone line search), and stops when the Frank-Wolfe duality
    gap ``lambda_max(G) - <G, B>``, an upper bound on ``f(B*) - f(B)``, is at most ``tol * f(B)``.

    Parameters
    ----------
    pairs : AllNegativePairs or SampledPairs
        The pairs and their weights.
    U : ndarray of shape (n_samples, d)
        Whitened items.
    geometry : SpectraplexGeometry or SimplexGeometry
        The feasible set.
    start : Point
        Feasible starting point.
    floor : float
        Floor on distances in the gradient weights.
    max_iter : int
        Maximum number of steps (each step of either kind counts).
    tol : float
        Relative duality gap at which to stop.
    memory : int, default=10
        Number of past objective values the line search compares with.
    sufficient_increase : float, default=1e-4
        Armijo constant of the line search.
    verbose : bool, default=False
        Print progress.

    Returns
    -------
    result : SolverResult
    """

    def evaluate(point):
        return pairs.value_and_gradient(geometry.embed(U, point), U, floor, geometry.diagonal)

    point = start
    value, gradient = evaluate(point)
    history = [value]
    gradient_norm = max(np.linalg.norm(gradient), np.finfo(float).tiny)
    step, step_bounds = 1.0 / gradient_norm, (1e-10 / gradient_norm, 1e10 / gradient_norm)

    def projected_gradient_step():
        """SPG2 step from ``point``; ``None`` when the line search fails."""
        nonlocal step
        trial = geometry.project(point.value + step * gradient)
        direction = trial.value - point.value
        slope = float(np.vdot(gradient, direction))
        if slope <= 0:  # no ascent direction left at machine precision
            return None
        reference = max(history[-memory:])
        fraction = 1.0
        while True:
            candidate = trial
            if fraction < 1.0:
                candidate = geometry.point(point.value + fraction * direction)
            new_value, new_gradient = evaluate(candidate)
            if new_value >= reference + sufficient_increase * fraction * slope:
                break
            curvature = (new_value - value - fraction * slope) / fraction**2
            best = -slope / (2 * curvature) if curvature < 0 else fraction / 2
            fraction = float(np.clip(best, 0.1 * fraction, 0.5 * fraction))
            if fraction < 1e-12:
                return None
        moved = candidate.value - point.value
        change = float(np.vdot(moved, new_gradient - gradient))
        step = float(np.vdot(moved, moved)) / -change if change < 0 else step_bounds[1]
        step = float(np.clip(step, *step_bounds))
        return candidate, new_value, new_gradient

    def minorize_maximize_step():
        candidate = geometry.minorize_maximize(point, gradient)
        return (candidate, *evaluate(candidate))

    # The minorize-maximize step may leave a set with an eigenvalue cap: projected gradient only.
    if getattr(geometry, "cap", None) is None:
        steps = itertools.cycle([minorize_maximize_step, projected_gradient_step])
    else:
        steps = itertools.repeat(projected_gradient_step)
    n_iter, converged = 0, False
    while True:
        gap = max(geometry.linear_oracle(gradient) - float(np.vdot(gradient, point.value)), 0.0)
        converged = bool(gap <= tol * value)
        if verbose and (n_iter % 10 == 0 or converged):
            print(f"MMC iteration {n_iter:4d}: objective {value:.6g}, duality gap {gap:.3g}")
        if converged or n_iter >= max_iter:
            break
        outcome = next(steps)()
        if outcome is None:
            break
        point, value, gradient = outcome
        history.append(value)
        n_iter += 1
    return SolverResult(point, np.array(history), gap, n_iter, converged)


def initial_metric(X, init, diagonal, covariance=None):
    """The starting Mahalanobis matrix (a vector of its diagonal when ``diagonal``).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training items (only their number of features is read when ``covariance`` is given).
    init : {"identity", "covariance"} or ndarray
        ``"identity"``: the Euclidean metric. ``"covariance"``: the inverse covariance of ``X``
        (pseudo-inverse when singular; inverse variances when ``diagonal``). An array: a
        symmetric positive semi-definite matrix of shape (d, d), or a non-negative vector of
        shape (d,) for a diagonal matrix.
    diagonal : bool
        Return the diagonal only.
    covariance : ndarray of shape (d, d) or None, default=None
        The covariance of ``X`` when it is already known (e.g. from statistics computed by row
        blocks); None computes it from ``X``.

    Returns
    -------
    metric : ndarray of shape (d, d), or (d,) if ``diagonal``
    """
    d = X.shape[1]
    if isinstance(init, str):
        if init == "identity":
            metric = np.eye(d)
        else:
            if covariance is None:
                covariance = np.atleast_2d(np.cov(X, rowvar=False))
            metric = linalg.pinvh(covariance) if not diagonal else _pseudo_inverse(covariance)
    else:
        metric = _check_init_array(init, d)
    if diagonal:
        metric = np.diag(metric) if metric.ndim == 2 else metric
    elif metric.ndim == 1:
        metric = np.diag(metric)
    if not np.any(metric):
        raise ValueError("init is the zero matrix (a zero metric): give a non-zero metric.")
    return metric


def _pseudo_inverse(covariance):
    variances = np.diag(covariance)
    inverse = np.zeros_like(variances)
    positive = variances > 0
    inverse[positive] = 1.0 / variances[positive]
    return np.diag(inverse)


def _check_init_array(init, d):
    metric = np.asarray(init, dtype=np.float64)
    if metric.shape not in ((d,), (d, d)):
        raise ValueError(
            f"init must have shape ({d}, {d}) (or ({d},) for a diagonal), got {metric.shape}."
        )
    if not np.all(np.isfinite(metric)):
        raise ValueError("init contains NaN or infinity.")
    if metric.ndim == 1:
        if np.any(metric < 0):
            raise ValueError("init, a diagonal, has negative entries: it is not PSD.")
        return metric
    scale = max(np.abs(metric).max(), np.finfo(float).tiny)
    if not np.allclose(metric, metric.T, rtol=0, atol=1e-10 * scale):
        raise ValueError("init is not symmetric.")
    if linalg.eigvalsh(_symmetrize(metric))[0] < -1e-10 * scale:
        raise ValueError("init is not positive semi-definite (it has a negative eigenvalue).")
    return _symmetrize(metric)


class MMCFit(NamedTuple):
    """Outcome of :func:`fit_mmc`."""

    components: np.ndarray
    objective: np.ndarray
    duality_gap: float
    n_iter: int
    converged: bool
    unbounded: bool


class MMCStatistics(NamedTuple):
    """What the MMC solver needs from the training items (see :func:`mmc_statistics`).

    Attributes
    ----------
    rows : ndarray or rows read on demand, of shape (n_samples, n_features)
        The items, rescaled by ``scale`` and centred. Rows read on demand
        (:class:`~skrank.similarity._dask.DaskRows`) are read only where the solver needs them:
        the rows of the sampled pairs.
    similar : ndarray of shape (n_features, n_features)
        Mean of ``(x_i - x_j)(x_i - x_j)^T`` over similar pairs (of the rescaled items).
    dissimilar : ndarray of shape (n_features, n_features)
        The same over dissimilar pairs.
    covariance : ndarray of shape (n_features, n_features) or None
        Covariance of the rescaled items, for ``init="covariance"``; None computes it from
        ``rows`` when needed.
    scale : float
        The power of two the items were multiplied by: the metric learned on them has components
        ``L_c``, and ``L = scale * L_c`` on the items as given (MMC is invariant to the scale).
    """

    rows: object
    similar: np.ndarray
    dissimilar: np.ndarray
    covariance: np.ndarray | None
    scale: float


def mmc_statistics(X, y):
    """:class:`MMCStatistics` of items in memory: exact pair scatters in ``O(n d^2)``.

    ``X`` is rescaled by a power of two (exact) so that the scatters of data at 1e-300 or 1e300
    neither underflow nor overflow.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training items (finite).
    y : ndarray of shape (n_samples,)
        Class labels.

    Returns
    -------
    statistics : MMCStatistics
    """
    X = np.asarray(X, dtype=np.float64)
    scale = power_of_two_scale(X)
    X = X * scale
    X = X - X.mean(axis=0)
    similar, _ = similar_pair_scatter(X, y)
    dissimilar, _ = dissimilar_pair_scatter(X, y)
    return MMCStatistics(X, similar, dissimilar, None, scale)


def fit_mmc(
    X,
    y,
    *,
    diagonal=False,
    negatives="all",
    n_samples=None,
    positives="all",
    n_neighbors=10,
    init="identity",
    max_iter=1000,
    tol=1e-5,
    scatter_ridge=1e-8,
    min_rank=None,
    random_state=None,
    verbose=False,
    max_block_entries=None,
    statistics=mmc_statistics,
    n_threads=1,
):
    """Solve MMC on ``(X, y)`` and return the components ``L`` (``A = L^T L``).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training items (finite), or any input that ``statistics`` reads.
    y : ndarray of shape (n_samples,)
        Class labels (at least two classes, one with two items).
    diagonal : bool, default=False
        Learn a diagonal ``A``.
    negatives : {"all", "pairs", "tuples", "nearest", "given"}, default="all"
        All negative pairs, or ``n_samples`` pairs drawn uniformly from them, or ``n_samples``
        K-tuples (one item per class) with unbiased weights, or each item with its
        ``n_neighbors`` nearest items of other classes in the input metric
        (:func:`~skrank.similarity._neighbor_pairs.nearest_pairs`), equally weighted.
        ``"given"``: ``X`` holds given pairs
        (:class:`~skrank.similarity._given_pairs.GivenPairs`), ``y`` says which are similar,
        and ``statistics`` is :func:`given_pair_statistics` (with ``positives="all"``): the
        constraint over the similar pairs, the objective over the dissimilar ones, each pair
        counted as often as it is given.
    n_samples : int or None, default=None
        Number of pairs or tuples drawn; ``None`` means the number of training items.
    positives : {"all", "nearest"}, default="all"
        Similar pairs of the constraint: all same-class pairs, or each item with its
        ``n_neighbors`` nearest same-class items in the input metric, equally weighted.
    n_neighbors : int, default=10
        Neighbours per item of the ``"nearest"`` pair sets.
    init : {"identity", "covariance"} or ndarray, default="identity"
        Starting metric (see :func:`initial_metric`); it is rescaled onto the constraint.
    max_iter : int, default=1000
        Maximum number of steps (see :func:`maximize_mean_distance`).
    tol : float, default=1e-5
        Relative duality gap at which to stop.
    scatter_ridge : float, default=1e-8
        Ridge ``rho`` added to the similar-pair scatter, relative to its mean eigenvalue: the
        constraint becomes ``<S, A> + rho tr(S) / d tr(A) <= 1`` (a trace penalty; large values
        make the constraint the Euclidean one).
    min_rank : int or None, default=None
        Cap the eigenvalues of the whitened metric ``B`` at ``1 / min_rank`` (see
        :class:`SpectraplexGeometry`): no direction takes more than that share of the constraint
        budget, so the optimum has rank at least ``min_rank``. ``min_rank = d`` gives
        ``A = S_r^{-1}`` (the Euclidean metric when ``scatter_ridge`` is large). None: no cap.
    random_state : int, RandomState instance or None, default=None
        Seed of the pair sampler.
    verbose : bool, default=False
        Print solver progress.
    max_block_entries : int or None, default=None
        Memory bound (pairs per block).
    statistics : callable, default=mmc_statistics
        ``statistics(X, y)`` returns the :class:`MMCStatistics` of the items:
        :func:`mmc_statistics` for items in memory,
        :func:`~skrank.similarity._dask.mmc_statistics_dask` for a dask array,
        :func:`given_pair_statistics` for given pairs (``given_pair_statistics_for(init)``).
    n_threads : int or None, default=1
        BLAS threads of the fit (``threadpoolctl.threadpool_limits``); None leaves BLAS as the
        caller set it. One is the default: the solver's matrix products are small or
        memory-bound (``benchmarks/studies/mmc_threads.py``).

    Returns
    -------
    fit : MMCFit
        ``unbounded`` tells that without the ridge the problem would be unbounded (the scatter is
        singular along directions in which dissimilar pairs differ).
    """
    with threadpool_limits(limits=n_threads, user_api="blas"):
        data = statistics(X, y)
        rows = data.rows
        if positives == "nearest":  # local similar pairs: the scatter of target neighbours
            similar = pair_difference_scatter(rows, nearest_pairs(rows, y, n_neighbors))
            data = data._replace(similar=similar)
        if negatives == "given":
            pairs, objective_rows = _given_objective(X, y, rows, max_block_entries)
        elif negatives == "all":
            pairs, objective_rows = AllNegativePairs(y, max_block_entries), rows
        else:
            if negatives == "nearest":
                sample = nearest_pairs(rows, y, n_neighbors, same_class=False)
                data = data._replace(dissimilar=pair_difference_scatter(rows, sample))
            else:
                draws = rows.shape[0] if n_samples is None else n_samples
                sampler = sample_negative_pairs if negatives == "pairs" else sample_negative_tuples
                sample = sampler(y, draws, random_state)
            pairs, touched = _touched_pairs(sample, max_block_entries)
            objective_rows = rows[touched]  # rows on demand read no others
        return _fit_on_statistics(
            data,
            pairs,
            objective_rows,
            diagonal=diagonal,
            init=init,
            max_iter=max_iter,
            tol=tol,
            scatter_ridge=scatter_ridge,
            min_rank=min_rank,
            verbose=verbose,
        )


def _given_objective(pairs, is_similar, rows, max_block_entries):
    """The objective's pairs (the given dissimilar ones) and the rows they index.

    When the pairs are fewer than the rows they touch (always so for an (n_pairs, 2, d) array),
    the rows are the pairs' differences (:class:`PairDifferences`: fewer rows, no pair graph);
    otherwise the touched items, with :class:`SampledPairs` over them.
    """
    dissimilar = pairs.subset(~is_similar)
    n_touched = np.count_nonzero(np.bincount(np.r_[dissimilar.first, dissimilar.second]))
    if dissimilar.n_pairs > n_touched:
        sample = dissimilar.sample(slice(None))
        objective_pairs, touched = _touched_pairs(sample, max_block_entries)
        return objective_pairs, rows[touched]
    differences = np.empty((dissimilar.n_pairs, dissimilar.n_features))
    for part in dissimilar.chunks():
        first, second = dissimilar.items(part, rows)
        differences[part] = first - second
    return PairDifferences(np.full(dissimilar.n_pairs, 1 / dissimilar.n_pairs)), differences


def given_pair_statistics_for(init):
    """:func:`given_pair_statistics` with the covariance that ``init="covariance"`` needs."""
    return functools.partial(given_pair_statistics, with_covariance=_is_covariance(init))


def _is_covariance(init):
    return isinstance(init, str) and init == "covariance"


def given_pair_statistics(pairs, is_similar, *, with_covariance=False):
    """:class:`MMCStatistics` of given pairs: exact scatters over the similar and dissimilar ones.

    The items are rescaled by a power of two (exact) so that scatters of data at 1e-300 or 1e300
    neither underflow nor overflow; the rows are returned rescaled on demand (read when the
    solver needs them).

    Parameters
    ----------
    pairs : GivenPairs
        The pairs.
    is_similar : ndarray of shape (n_pairs,), dtype=bool
        Which pairs are similar.
    with_covariance : bool, default=False
        Also compute the covariance of the pairs' items (each counted once per pair), for
        ``init="covariance"``.

    Returns
    -------
    statistics : MMCStatistics
    """
    scale = power_of_two_scale(np.asarray(pairs.max_abs()))
    rows = pairs.prepared_rows(functools.partial(np.multiply, scale))
    similar = pair_difference_scatter(rows, pairs.sample(is_similar))
    dissimilar = pair_difference_scatter(rows, pairs.sample(~is_similar))
    covariance = _pair_item_covariance(pairs, rows) if with_covariance else None
    return MMCStatistics(rows, similar, dissimilar, covariance, scale)


def _pair_item_covariance(pairs, rows):
    """Covariance of the items of the pairs, each counted once per pair (one pass, in chunks)."""
    d = rows.shape[1]
    total, gram = np.zeros(d), np.zeros((d, d))
    for part in pairs.chunks():
        for items in pairs.items(part, rows):
            total += items.sum(axis=0)
            gram += items.T @ items
    n = 2 * pairs.n_pairs
    mean = total / n
    return _symmetrize(gram - n * np.outer(mean, mean)) / max(n - 1, 1)


def _fit_on_statistics(
    data, pairs, objective_rows, *, diagonal, init, max_iter, tol, scatter_ridge, min_rank, verbose
):
    """Whiten the constraint of ``data`` and maximise the mean distance of ``pairs``.

    ``pairs`` (:class:`AllNegativePairs`, :class:`SampledPairs` or :class:`PairDifferences`)
    index the rows ``objective_rows`` (items of ``data.rows``, or pair differences).
    """
    rows = data.rows
    d = rows.shape[1]
    if min_rank is not None and not 1 <= min_rank <= d:
        raise ValueError(f"min_rank={min_rank} must be between 1 and n_features={d}.")
    cap = None if min_rank in (None, 1) else 1.0 / min_rank
    geometry = SimplexGeometry(cap) if diagonal else SpectraplexGeometry(cap)
    whitening, spread, unbounded = _whitening(
        data.similar, data.dissimilar, scatter_ridge, diagonal
    )
    metric = initial_metric(rows, init, diagonal, data.covariance)
    start = _to_whitened(metric, whitening, diagonal)
    start = geometry.point(start) if cap is None else geometry.project(start)
    if spread == 0:  # every dissimilar pair is at distance zero under every metric
        result = SolverResult(start, np.zeros(1), 0.0, 0, True)
    else:
        U = objective_rows * whitening if diagonal else objective_rows @ whitening
        result = maximize_mean_distance(
            pairs,
            U,
            geometry,
            start,
            floor=_FLOOR * spread,
            max_iter=max_iter,
            tol=tol,
            verbose=verbose,
        )
    return MMCFit(
        geometry.components(result.point, whitening) * data.scale,
        result.objective,
        result.duality_gap,
        result.n_iter,
        result.converged,
        unbounded,
    )


def _touched_pairs(sample, max_block_entries):
    """:class:`SampledPairs` over the rows that ``sample`` touches, and those rows' indices.

    The rows are renumbered in increasing order, which keeps the order of the solver's sums.
    """
    touched = np.unique(np.concatenate([sample.first, sample.second]))
    renumbered = PairSample(
        np.searchsorted(touched, sample.first),
        np.searchsorted(touched, sample.second),
        sample.weight,
    )
    return SampledPairs(renumbered, touched.shape[0], max_block_entries), touched


def _whitening(similar, dissimilar, scatter_ridge, diagonal):
    """Whitening ``W`` of the ridged scatter, the whitened dissimilar spread, and unboundedness.

    Returns ``W`` (a matrix with ``W^T S_r W = I``, or a vector when ``diagonal``), the root mean
    square whitened dissimilar-pair difference, and whether the unregularised problem is unbounded.
    """
    d = similar.shape[0]
    reference = np.trace(similar) or np.trace(dissimilar) or 1.0
    ridge = scatter_ridge * reference / d
    if diagonal:
        spread = np.diag(similar)
        basis_spread = np.diag(dissimilar)
    else:
        spread, basis = linalg.eigh(similar)
        basis_spread = np.einsum("ij,jk,ki->i", basis.T, dissimilar, basis)
    spread = np.maximum(spread, 0.0)
    null = spread <= _NULL_SPREAD * spread.max()
    unbounded = bool(basis_spread[null].sum() > _NULL_SPREAD * np.trace(dissimilar))
    scaling = 1.0 / np.sqrt(spread + ridge)
    whitening = scaling if diagonal else basis * scaling
    whitened_spread = np.sqrt(max(float(scaling**2 @ basis_spread), 0.0))
    return whitening, whitened_spread, unbounded


def _to_whitened(metric, whitening, diagonal):
    """``B = W^{-1} A W^{-T}`` rescaled to trace one."""
    if diagonal:
        whitened = metric / whitening**2
        return whitened / whitened.sum()
    inverse = linalg.inv(whitening)
    whitened = _symmetrize(inverse @ metric @ inverse.T)
    return whitened / np.trace(whitened)


def figure_of_merit(Z, y, max_block_entries=None):
    """Mean dissimilar distance over the root mean squared similar distance, all pairs.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, r)
        Items embedded so that Euclidean distances are the metric's (``X L^T``).
    y : array-like of shape (n_samples,)
        Class labels.
    max_block_entries : int or None, default=None
        Memory bound (pairs per block).

    Returns
    -------
    merit : float
        Scale-invariant; ``0.0`` when every dissimilar pair is at distance zero, ``inf`` when every
        similar pair is (and some dissimilar pair is not).
    mean_dissimilar : float
        Mean distance over dissimilar pairs (MMC's objective).
    mean_similar_squared : float
        Mean squared distance over similar pairs (MMC's constraint).
    """
    # The merit is invariant to the scale of Z: computed on Z rescaled by a power of two c
    # (exact) so that squared distances neither overflow nor underflow; the means are rescaled.
    scale = power_of_two_scale(Z)
    mean_dissimilar = AllNegativePairs(y, max_block_entries).value(Z * scale)
    mean_similar_squared = float(np.trace(similar_pair_scatter(Z * scale, y)[0]))
    merit = _merit(mean_dissimilar, mean_similar_squared)
    with np.errstate(over="ignore"):  # beyond float64, the means are inf
        return merit, mean_dissimilar / scale, mean_similar_squared / scale / scale


def _merit(mean_dissimilar, mean_similar_squared):
    if mean_dissimilar == 0:
        return 0.0
    if mean_similar_squared <= 0:
        return np.inf
    return mean_dissimilar / np.sqrt(mean_similar_squared)
