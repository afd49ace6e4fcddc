"""Solvers of the pointwise ROC problem for norm-constrained bilinear similarities.

For the similarity ``S_A(x, x') = (1 + x^T A x') / 2`` the empirical problem (6) of Vogel, Bellet
& Clémençon (2018) reads (their Appendix B.1)::

    maximise <P, A>   subject to   <N, A> <= beta,   ||A||_F <= 1,

with ``beta = 2 (alpha + tolerance) - 1``, ``P`` and ``N`` the mean symmetrised outer products
over positive and negative pairs and ``<., .>`` the Frobenius inner product. It is feasible if and
only if ``beta >= -||N||_F`` (the smallest value of ``<N, A>`` on the unit ball).

:func:`solve_kkt` solves the KKT conditions in closed form; :func:`solve_cvxpy` hands the same
problem to cvxpy (an optional dependency). Both return a :class:`NeymanPearsonSolution` with the
dual variables ``lambda_`` (of ``<N, A> <= beta``) and ``gamma_`` (of ``<A, A> <= 1``), for which
stationarity reads ``P - lambda_ N = 2 gamma_ A``.
"""

import warnings
from numbers import Real
from typing import NamedTuple

import numpy as np

from ..exceptions import SolverAccuracyWarning
from ..utils._docstrings import fill_docs
from ..utils._optional import install_hint
from ..utils._validation import power_of_two_scale

__all__ = [
    "NeymanPearsonSolution",
    "alpha_levels",
    "feasible_alpha_range",
    "fit_input_transform",
    "regularized_positive_matrix",
    "score_alpha_levels",
    "select_alpha",
    "solve_cvxpy",
    "solve_kkt",
]

# Below this fraction of ||P||_F, the part of P orthogonal to N is taken for rounding noise.
_COLLINEAR_RTOL = 1e-10
# A constraint counts as active when it holds with equality up to this relative tolerance (loose
# enough for interior-point solutions).
_ACTIVE_RTOL = 1e-6
_CLARABEL_TOLERANCES = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10}
# A solution that cvxpy reports as inaccurate is accepted silently when its own duality
# certificate (see _certified_gap) is within the default tolerances of the interior-point solvers,
# with a SolverAccuracyWarning up to _ACCEPT_GAP, and refused beyond.
_CERTIFIED_GAP = 1e-8
_ACCEPT_GAP = 1e-5
# The parameters of the pointwise ROC problem, shared by its solvers (fill_docs).
_PROBLEM_DOCS = {
    "problem_parameters": [
        (
            "P",
            "array-like of shape (n_features, n_features)",
            "Mean symmetrised outer product over positive pairs.",
        ),
        (
            "N",
            "array-like of shape (n_features, n_features)",
            "Mean symmetrised outer product over negative pairs.",
        ),
        ("beta", "float", "Bound on ``<N, A>``, ``2 (alpha + tolerance) - 1``."),
    ]
}


# The options and the levels of the functions that score levels of alpha (fill_docs).
_LEVEL_DOCS = {
    "level_options": [
        ("tolerance", "float", "The tolerance added to ``alpha``."),
        ("n_levels", "int", "Number of levels tried."),
    ],
    "levels": ("levels", "ndarray of shape (n_levels,)", "The levels of :func:`alpha_levels`."),
}


class NeymanPearsonSolution(NamedTuple):
    """Solution of ``max <P, A>`` subject to ``<N, A> <= beta`` and ``||A||_F <= 1``.

    Attributes
    ----------
    A : ndarray of shape (n_features, n_features)
        The optimal matrix.
    lambda_ : float
        Dual variable of the negative-risk constraint ``<N, A> <= beta`` (the trailing underscore
        avoids the keyword ``lambda``).
    gamma_ : float
        Dual variable of the norm constraint ``<A, A> <= 1``.
    risk_active : bool
        Whether ``<N, A> = beta`` at the solution.
    norm_active : bool
        Whether ``||A||_F = 1`` at the solution.
    case : str
        How the solution was obtained. :func:`solve_kkt` gives the case of Appendix B.1:
        ``"inactive"`` (``A = P / ||P||_F``), ``"active"`` (both constraints active),
        ``"collinear"`` (``P`` a positive multiple of ``N``), ``"zero_positive"`` (``P = 0``) or
        ``"single_point"`` (``beta = -||N||_F``: the feasible set is the single point
        ``-N / ||N||_F`` and no finite dual variables exist). :func:`solve_cvxpy` gives
        ``"cvxpy: <status>"``.
    """

    A: np.ndarray
    lambda_: float
    gamma_: float
    risk_active: bool
    norm_active: bool
    case: str


def _frobenius(matrix):
    """Frobenius norm (``np.linalg.norm`` makes a squared copy; this does not)."""
    return float(np.sqrt(np.vdot(matrix, matrix)))


def _check_problem(P, N, beta):
    P = np.asarray(P, dtype=np.float64)
    N = np.asarray(N, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"P must be a square matrix, got an array of shape {P.shape}.")
    if N.shape != P.shape:
        raise ValueError(f"N must have the shape of P {P.shape}, got {N.shape}.")
    if not (np.isfinite(P).all() and np.isfinite(N).all()):
        raise ValueError("P and N must be finite (they contain NaN or infinity).")
    if isinstance(beta, bool) or not isinstance(beta, Real) or not np.isfinite(beta):
        raise ValueError(f"beta must be a finite real number, got {beta!r}.")
    return P, N, float(beta)


def feasible_alpha_range(N, tolerance=0.0):
    """Range of the level ``alpha`` for which the pointwise ROC problem is feasible.

    The mean similarity over negative pairs, ``(1 + <N, A>) / 2``, is at least
    ``(1 - ||N||_F) / 2`` on the unit ball, so the constraint ``(1 + <N, A>) / 2 <= alpha +
    tolerance`` can be met if and only if ``alpha >= (1 - ||N||_F) / 2 - tolerance``. Every larger
    ``alpha`` is feasible; from ``alpha = (1 + <N, P> / ||P||_F) / 2 - tolerance`` on, the
    constraint is inactive and the solution no longer depends on ``alpha``.

    Parameters
    ----------
    N : array-like of shape (n_features, n_features)
        Mean symmetrised outer product over negative pairs.
    tolerance : float, default=0.0
        The tolerance ``Phi`` added to ``alpha``.

    Returns
    -------
    low : float
        Smallest feasible ``alpha``, clipped at 0.
    high : float
        Always 1.0: a similarity with values in [0, 1] meets any level ``alpha >= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.similarity import feasible_alpha_range
    >>> feasible_alpha_range(np.diag([0.6, 0.8]))
    (0.0, 1.0)
    >>> feasible_alpha_range(np.diag([0.3, 0.4]))
    (0.25, 1.0)
    """
    low = (1.0 - _frobenius(np.asarray(N, dtype=np.float64))) / 2.0 - tolerance
    return max(0.0, float(low)), 1.0


def _check_feasible(N, beta):
    norm_N = _frobenius(N)
    if beta < -norm_N:
        low = (1.0 - norm_N) / 2.0
        raise ValueError(
            f"Infeasible constraint level: beta = 2 (alpha + tolerance) - 1 = {beta:.6g} is below "
            f"-||N||_F = {-norm_N:.6g}, the smallest mean negative score any A with ||A||_F <= 1 "
            f"reaches. Feasible levels are alpha + tolerance >= (1 - ||N||_F) / 2 = {low:.6g}."
        )


def _active_constraints(N, beta, A):
    scale = max(_frobenius(N), abs(beta))
    risk_active = bool(np.vdot(N, A) >= beta - _ACTIVE_RTOL * scale)
    norm_active = bool(_frobenius(A) >= 1.0 - _ACTIVE_RTOL)
    return risk_active, norm_active


def _solution(N, beta, A, lambda_, gamma_, case):
    return NeymanPearsonSolution(
        A, float(lambda_), float(gamma_), *_active_constraints(N, beta, A), case
    )


@fill_docs(_PROBLEM_DOCS)
def solve_kkt(P, N, beta):
    """Closed-form solution of the pointwise ROC problem (Appendix B.1 of the paper).

    Solves ``max <P, A> s.t. <N, A> <= beta, ||A||_F <= 1`` with ``u = N / ||N||_F``,
    ``rho = beta / ||N||_F`` and ``P_perp = P - <P, u> u``:

    * ``P = 0``: every feasible ``A`` is optimal; the one of least norm is returned (``0`` if
      ``beta >= 0``, else ``rho u``), with ``lambda_ = gamma_ = 0``;
    * ``<P, u> <= rho ||P||_F`` (constraint inactive): ``A = P / ||P||_F``, ``lambda_ = 0``,
      ``gamma_ = ||P||_F / 2``;
    * ``P`` a positive multiple ``c N`` of ``N`` with the constraint active: every ``A`` with
      ``<N, A> = beta`` in the ball is optimal; the one of least norm, ``rho u``, is returned, with
      ``lambda_ = c`` and ``gamma_ = 0``;
    * otherwise both constraints are active and ``A = (P - lambda_ N) / ||P - lambda_ N||_F`` with
      ``lambda_ > 0`` the root of ``<N, P - lambda_ N> = beta ||P - lambda_ N||_F`` (a quadratic in
      ``lambda_``, linear when ``beta = 0``). In closed form
      ``A = rho u + sqrt(1 - rho^2) P_perp / ||P_perp||_F``,
      ``gamma_ = ||P_perp||_F / (2 sqrt(1 - rho^2))`` and
      ``lambda_ = (<P, u> - 2 gamma_ rho) / ||N||_F``, which avoids the cancellation of the
      quadratic formula. At ``beta = -||N||_F`` the feasible set is the single point ``-u`` and
      the dual variables are infinite.

    Parameters
    ----------
    {problem_parameters}

    Returns
    -------
    solution : NeymanPearsonSolution
        ``A``, the dual variables, the active constraints and the case.

    Raises
    ------
    ValueError
        If ``beta < -||N||_F`` (infeasible; the message gives the feasible levels) or the inputs
        are malformed.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.similarity import solve_kkt
    >>> solution = solve_kkt(np.diag([1.0, 0.0]), np.diag([1.0, 1.0]), beta=0.0)
    >>> solution.A.round(3), solution.case
    (array([[ 0.707,  0.   ],
           [ 0.   , -0.707]]), 'active')
    """
    P, N, beta = _check_problem(P, N, beta)
    _check_feasible(N, beta)
    norm_P, norm_N = _frobenius(P), _frobenius(N)
    rho = min(1.0, beta / norm_N) if norm_N > 0 else 1.0
    if norm_P <= _COLLINEAR_RTOL * norm_N or norm_P == 0:
        A = np.zeros_like(P) if beta >= 0 else rho * N / norm_N
        return _solution(N, beta, A, 0.0, 0.0, "zero_positive")
    if np.vdot(N, P) <= beta * norm_P:
        return _solution(N, beta, P / norm_P, 0.0, norm_P / 2, "inactive")
    u = N / norm_N
    along_u = np.vdot(P, u)
    P_perp = P - along_u * u
    norm_perp = _frobenius(P_perp)
    if norm_perp <= _COLLINEAR_RTOL * norm_P:
        return _solution(N, beta, rho * u, along_u / norm_N, 0.0, "collinear")
    across = np.sqrt(max(0.0, 1.0 - rho**2))
    if across == 0.0:
        return _solution(N, beta, -u, np.inf, np.inf, "single_point")
    gamma_ = norm_perp / (2 * across)
    lambda_ = (along_u - 2 * gamma_ * rho) / norm_N
    return _solution(N, beta, rho * u + across * P_perp / norm_perp, lambda_, gamma_, "active")


def _import_cvxpy():
    try:
        import cvxpy
    except ImportError as error:
        raise ImportError(
            'solver="cvxpy" needs the optional dependency cvxpy, which is not installed. '
            f"Install it with {install_hint('cvxpy', 'solvers')}, or use "
            'solver="kkt" (the exact closed form, much faster).'
        ) from error
    return cvxpy


def _dual_value(constraint):
    """A scalar constraint's dual variable (cvxpy may wrap it in a 1-element array)."""
    return max(0.0, float(np.ravel(constraint.dual_value)[0]))


@fill_docs(_PROBLEM_DOCS)
def solve_cvxpy(P, N, beta, *, solver="CLARABEL", **solver_options):
    """Solve the pointwise ROC problem with cvxpy (a second-order cone program).

    The same problem as :func:`solve_kkt`, written as ``maximise <P, A> s.t. <N, A> <= beta,
    ||A||_F <= 1`` over a general ``n_features x n_features`` matrix variable; the dual variable
    ``mu`` of the norm constraint in this form gives ``gamma_ = mu / 2`` (at ``||A||_F = 1`` the
    two forms have the same stationarity condition). Useful as an independent check of the closed
    form and as a starting point for added constraints. When the optimum is not unique
    (``P = 0``, or ``P`` a positive multiple of ``N``) the solver returns one optimal ``A``, not
    necessarily the least-norm one of :func:`solve_kkt`.

    Parameters
    ----------
    {problem_parameters}
    solver : str or None, default="CLARABEL"
        cvxpy solver name; None lets cvxpy choose.
    **solver_options
        Passed to ``cvxpy.Problem.solve``. With Clarabel the duality-gap tolerances default to
        ``tol_gap_abs = tol_gap_rel = 1e-10`` instead of Clarabel's 1e-8: where the norm
        constraint alone is active, the error of ``A`` is of the order of the square root of the
        objective's error, and 1e-8 leaves a relative error of ``A`` near 1e-4.

    Returns
    -------
    solution : NeymanPearsonSolution
        ``A``, the dual variables, the active constraints, and ``case = "cvxpy: <status>"``.

    Raises
    ------
    ImportError
        If cvxpy is not installed (the ``solvers`` extra).
    ValueError
        If ``beta < -||N||_F`` (infeasible; the message gives the feasible levels) or the inputs
        are malformed.
    RuntimeError
        If the solver reaches no solution whose duality gap is certified below 1e-5 (relative);
        the message gives each attempt's status.

    Warns
    -----
    SolverAccuracyWarning
        When the solver reports ``optimal_inaccurate`` and the gap certified by its dual
        variable lies between 1e-8 and 1e-5 (relative). Below 1e-8 the solution is accepted
        silently: it is as accurate as an ``optimal`` one.

    Notes
    -----
    The solution is checked independently of the solver's status: the dual variable ``lambda_``
    gives the upper bound ``||P - lambda_ N||_F + lambda_ beta`` on the optimum, and the relative
    distance of ``<P, A>`` to it is the certified gap, recorded in ``case`` for inaccurate
    statuses. With the default solver and options, Clarabel runs with gap tolerances of 1e-10
    and, if that ends without a usable solution, again with its own defaults.
    """
    cp = _import_cvxpy()
    P, N, beta = _check_problem(P, N, beta)
    _check_feasible(N, beta)
    attempts = [solver_options]
    if solver == "CLARABEL" and not solver_options:
        # Tight gap tolerances first; Clarabel's defaults if they end without a usable answer.
        attempts = [_CLARABEL_TOLERANCES, {}]
    failures = []
    for options in attempts:
        A = cp.Variable(P.shape)
        risk_constraint = cp.sum(cp.multiply(N, A)) <= beta
        norm_constraint = cp.norm(A, "fro") <= 1
        problem = cp.Problem(
            cp.Maximize(cp.sum(cp.multiply(P, A))), [risk_constraint, norm_constraint]
        )
        try:
            with warnings.catch_warnings():
                # cvxpy's own "may be inaccurate" warning: the certificate below decides.
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                problem.solve(solver=solver, **options)
        except cp.error.SolverError as error:
            failures.append(f"solver error ({error})")
            continue
        if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or A.value is None:
            failures.append(f"status {problem.status!r}")
            continue
        A_value = np.asarray(A.value)
        lambda_ = _dual_value(risk_constraint)
        gap = _certified_gap(P, N, beta, A_value, lambda_)
        case = f"cvxpy: {problem.status}"
        if problem.status == cp.OPTIMAL_INACCURATE:
            if gap > _ACCEPT_GAP:
                failures.append(f"status 'optimal_inaccurate' with a certified gap of {gap:.2g}")
                continue
            case = f"{case}, certified relative gap {gap:.1e}"
            if gap > _CERTIFIED_GAP:
                warnings.warn(
                    f"cvxpy ({solver}) reported an inaccurate solution; its duality certificate "
                    f"gives a relative gap of {gap:.2g} (above {_CERTIFIED_GAP:g}), so A may be "
                    "off by about the square root of that. solver='kkt' gives the exact "
                    "solution.",
                    SolverAccuracyWarning,
                    stacklevel=2,
                )
        return _solution(N, beta, A_value, lambda_, _dual_value(norm_constraint) / 2, case)
    raise RuntimeError(
        f"cvxpy ({solver}) did not solve the pointwise ROC problem: "
        + "; then ".join(failures)
        + ". Use solver='kkt' (the exact closed form), or pass other solver options."
    )


def _certified_gap(P, N, beta, A, lambda_):
    """Relative suboptimality of ``A`` proved by the dual variable ``lambda_``, or inf.

    The Lagrange dual of ``max <P, A> s.t. <N, A> <= beta, ||A||_F <= 1`` (the norm constraint
    kept as the domain) is ``g(lambda) = ||P - lambda N||_F + lambda beta >= <P, A*>`` for every
    ``lambda >= 0``; so ``g(lambda_) - <P, A>`` bounds how far a feasible ``A`` is from the
    optimum. Infeasibility of ``A`` beyond the same relative size counts as an infinite gap.
    """
    scale = max(_frobenius(P), _frobenius(N), abs(beta), np.finfo(float).tiny)
    violation = max(np.vdot(N, A) - beta, 0.0) / scale + max(_frobenius(A) - 1.0, 0.0)
    dual_bound = _frobenius(P - lambda_ * N) + lambda_ * beta
    gap = max(dual_bound - np.vdot(P, A), 0.0) / scale
    return gap if violation <= _ACCEPT_GAP else np.inf


def regularized_positive_matrix(P, identity_weight):
    """``P + mu ||P||_F I / sqrt(d)``: the objective pulled toward the cosine similarity.

    Maximising ``<P, A> + mu ||P||_F <I, A> / sqrt(d)`` under the problem's constraints is the
    same problem with this matrix in place of ``P``, so :func:`solve_kkt` and :func:`solve_cvxpy`
    solve it exactly. Where the norm constraint is active (``||A||_F = 1``, the usual case), the
    added term equals, up to a constant, the penalty ``-(mu ||P||_F / 2) ||A - I / sqrt(d)||_F^2``
    toward ``I / sqrt(d)``, the matrix of the cosine similarity: ``mu = 0`` is the paper's
    problem, ``mu -> inf`` gives the cosine similarity (when the negative-risk constraint allows
    it). The factor ``||P||_F`` makes ``mu`` free of the scale of the data.

    Parameters
    ----------
    P : ndarray of shape (d, d)
        Mean symmetrised outer product over positive pairs.
    identity_weight : float
        The weight ``mu >= 0``.

    Returns
    -------
    P_reg : ndarray of shape (d, d)

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.similarity import regularized_positive_matrix
    >>> regularized_positive_matrix(np.diag([2.0, 0.0]), 1.0).round(3)
    array([[3.414, 0.   ],
           [0.   , 1.414]])
    """
    if identity_weight == 0:
        return P
    scale = identity_weight * _frobenius(P) / np.sqrt(P.shape[0])
    return P + scale * np.eye(P.shape[0])


def fit_input_transform(X, kind, eigenvalue_floor=1e-6, sample_weight=None):
    """Mean and matrix of an input transform ``x -> (x - mean) @ matrix`` fitted on ``X``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, d)
        Training items (before L2 normalisation).
    kind : {"center", "standardize", "whiten"}
        ``"center"``: subtract the mean. ``"standardize"``: subtract the mean and divide each
        feature by its standard deviation (features of zero variance are only centred).
        ``"whiten"``: subtract the mean and map the covariance to the identity (PCA whitening;
        eigenvalues are floored at ``eigenvalue_floor`` times the largest).
    eigenvalue_floor : float, default=1e-6
        Relative floor on the covariance eigenvalues of ``"whiten"``.
    sample_weight : ndarray of shape (n_samples,) or None, default=None
        Weight of each item in the mean and the (co)variances, e.g. how many pairs it belongs
        to; None weighs them alike.

    Returns
    -------
    mean : ndarray of shape (d,)
    matrix : ndarray of shape (d, d)
    """
    # Fitted on X rescaled by a power of two c (exact), so that sums and variances of data at
    # 1e-300 or 1e300 neither underflow nor overflow: (X - mean_c / c) @ (c matrix_c) equals
    # (c X - mean_c) @ matrix_c.
    scale = power_of_two_scale(X)
    X = X * scale
    mean = np.average(X, axis=0, weights=sample_weight)
    if kind == "center":
        return mean / scale, np.eye(X.shape[1])
    if kind == "standardize":
        std = np.sqrt(np.average((X - mean) ** 2, axis=0, weights=sample_weight))
        return mean / scale, np.diag(scale / np.where(std > 0, std, 1.0))
    covariance = np.atleast_2d(np.cov(X, rowvar=False, bias=True, aweights=sample_weight))
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)
    floor = eigenvalue_floor * max(eigenvalues[-1], np.finfo(float).tiny)
    return mean / scale, eigenvectors * (scale / np.sqrt(np.maximum(eigenvalues, floor)))


def alpha_levels(P, N, tolerance=0.0, n_levels=20):
    """Levels ``alpha`` spanning the range where the negative-risk constraint matters.

    From just above the smallest feasible level (:func:`feasible_alpha_range`) to the level
    ``(1 + <N, P> / ||P||_F) / 2 - tolerance`` from which the constraint is inactive and the
    solution no longer changes, evenly spaced; the last level is that inactive one.

    Parameters
    ----------
    P, N : ndarray of shape (d, d)
        The (possibly regularised) positive matrix and the negative one.
    tolerance : float, default=0.0
        The tolerance added to ``alpha``.
    n_levels : int, default=20
        Number of levels.

    Returns
    -------
    levels : ndarray of shape (n_levels,)
        Increasing levels, clipped to [0, 1].
    """
    low = (1.0 - _frobenius(N)) / 2.0 - tolerance
    norm_P = _frobenius(P)
    high = (1.0 + np.vdot(N, P) / norm_P) / 2.0 - tolerance if norm_P > 0 else 0.5 - tolerance
    high = max(high, low)
    return np.clip(np.linspace(low, high, n_levels + 1)[1:], 0.0, 1.0)


@fill_docs(_LEVEL_DOCS)
def select_alpha(P, N, X_val, codes_val, fpr, *, tolerance=0.0, n_levels=20):
    """The level ``alpha`` whose solution has the largest TPR at ``fpr`` on validation pairs.

    Solves the problem (:func:`solve_kkt`) at each of :func:`alpha_levels` and reads the ROC
    curve of the similarities of all pairs ``i < j`` of the validation items at the false-positive
    rate ``fpr`` (:func:`skrank.metrics.pairwise_roc_score`). This is the Neyman-Pearson choice
    the paper's ``alpha`` stands for: the constraint level that gives the best true-positive rate
    at the wanted operating point on held-out pairs. Ties go to the smallest level.

    Parameters
    ----------
    P, N : ndarray of shape (d, d)
        Matrices of the problem fitted on the other items.
    X_val : ndarray of shape (n_val, d)
        Validation items, prepared as the training ones (transformed, normalised).
    codes_val : ndarray of shape (n_val,)
        Their class codes (a positive and a negative pair at least).
    fpr : float
        The target false-positive rate, in (0, 1).
    {level_options}

    Returns
    -------
    {levels}
    scores : ndarray of shape (n_levels,)
        Validation TPR at ``fpr`` of each level.
    """
    from ..metrics import pairwise_roc_score

    def validation_tpr(A):
        return pairwise_roc_score(X_val @ A @ X_val.T, codes_val, fpr)

    return score_alpha_levels(P, N, validation_tpr, tolerance=tolerance, n_levels=n_levels)


@fill_docs(_LEVEL_DOCS)
def score_alpha_levels(P, N, validation_score, *, tolerance=0.0, n_levels=20):
    """The :func:`alpha_levels` and the validation score of the solution at each of them.

    Parameters
    ----------
    P, N : ndarray of shape (d, d)
        Matrices of the problem fitted on the training part.
    validation_score : callable
        ``validation_score(A)``: the score of the similarity of matrix ``A`` on held-out data
        (:func:`select_alpha`: the TPR at a target FPR over all pairs of held-out items; a fit on
        given pairs: the same over held-out pairs).
    {level_options}

    Returns
    -------
    {levels}
    scores : ndarray of shape (n_levels,)
        ``validation_score`` of the solution at each level.
    """
    levels = alpha_levels(P, N, tolerance, n_levels)
    scores = np.empty(levels.shape[0])
    for index, level in enumerate(levels):
        beta = max(2.0 * (level + tolerance) - 1.0, -_frobenius(N))
        scores[index] = validation_score(solve_kkt(P, N, beta).A)
    return levels, scores
