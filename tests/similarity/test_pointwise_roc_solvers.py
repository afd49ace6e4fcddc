"""Solvers of the pointwise ROC problem, against the KKT conditions, brute force and cvxpy."""

import sys
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits

from skrank import PointwiseROCSimilarity
from skrank.exceptions import SolverAccuracyWarning
from skrank.metrics import pairwise_roc_score
from skrank.similarity import (
    PairStatistics,
    feasible_alpha_range,
    select_alpha,
    solve_cvxpy,
    solve_kkt,
)

KKT_ATOL = 1e-10


def _random_symmetric(rng, d):
    M = rng.normal(size=(d, d))
    return (M + M.T) / (2 * d)


def _random_problem(seed, d):
    rng = np.random.RandomState(seed)
    P, N = _random_symmetric(rng, d), _random_symmetric(rng, d)
    # A level between the smallest feasible one and the one beyond which the constraint is inactive
    # gives an active constraint; above it, an inactive one.
    inactive_from = np.vdot(N, P) / np.linalg.norm(P)
    return P, N, -np.linalg.norm(N), inactive_from


def _digits_problem(d=64):
    X, y = load_digits(return_X_y=True)
    X = X[:, X.std(axis=0) > 0][:, :d]
    X = X - X.mean(axis=0)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    stats = PairStatistics(X.shape[1]).update(X, y)
    return stats.positive_matrix(), stats.negative_matrix()


def _assert_kkt(P, N, beta, solution):
    """Stationarity, primal and dual feasibility and complementary slackness."""
    A, lam, gamma = solution.A, solution.lambda_, solution.gamma_
    np.testing.assert_allclose(-P + lam * N + 2 * gamma * A, 0, atol=KKT_ATOL)
    assert np.vdot(N, A) <= beta + KKT_ATOL
    assert np.linalg.norm(A) <= 1 + KKT_ATOL
    assert lam >= 0 and gamma >= 0
    assert abs(lam * (np.vdot(N, A) - beta)) <= KKT_ATOL
    assert abs(gamma * (np.vdot(A, A) - 1)) <= KKT_ATOL


def _tiny_data(seed=0, n=30, d=4, n_classes=3):
    rng = np.random.RandomState(seed)
    y = np.arange(n) % n_classes
    centres = rng.normal(size=(n_classes, d))
    return centres[y] + 0.8 * rng.normal(size=(n, d)), y


def _relative_difference(A, B):
    return np.linalg.norm(A - B) / np.linalg.norm(B)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("where", [0.05, 0.5, 0.95, 1.5])
def test_kkt_satisfies_kkt_conditions_and_matches_cvxpy(seed, where):
    d = [2, 3, 5, 8, 13, 21][seed]
    P, N, lowest, inactive_from = _random_problem(seed, d)
    beta = lowest + where * (inactive_from - lowest)
    kkt = solve_kkt(P, N, beta)
    assert kkt.case == ("active" if where < 1 else "inactive")
    _assert_kkt(P, N, beta, kkt)
    reference = solve_cvxpy(P, N, beta)
    assert _relative_difference(reference.A, kkt.A) < 1e-4
    np.testing.assert_allclose(
        [reference.lambda_, reference.gamma_], [kkt.lambda_, kkt.gamma_], rtol=1e-4, atol=1e-7
    )
    assert (reference.risk_active, reference.norm_active) == (kkt.risk_active, kkt.norm_active)
    assert (kkt.risk_active, kkt.norm_active) == (where < 1, True)


@pytest.mark.parametrize("where", [0.1, 0.6, 2.0])
def test_kkt_matches_cvxpy_on_real_data(where):
    P, N = _digits_problem()
    lowest, inactive_from = -np.linalg.norm(N), np.vdot(N, P) / np.linalg.norm(P)
    beta = lowest + where * (inactive_from - lowest)
    kkt, reference = solve_kkt(P, N, beta), solve_cvxpy(P, N, beta)
    _assert_kkt(P, N, beta, kkt)
    assert _relative_difference(reference.A, kkt.A) < 1e-4


def test_kkt_active_multiplier_solves_the_quadratic():
    # Appendix B.1: lambda > 0 solves <N, P - lambda N> = beta ||P - lambda N||_F, and
    # A = (P - lambda N) / ||P - lambda N||_F.
    P, N, lowest, inactive_from = _random_problem(7, 6)
    for beta in np.linspace(lowest, inactive_from, 7)[1:-1]:
        solution = solve_kkt(P, N, beta)
        residual = P - solution.lambda_ * N
        assert solution.lambda_ > 0
        assert np.vdot(N, residual) == pytest.approx(beta * np.linalg.norm(residual), abs=1e-12)
        np.testing.assert_allclose(solution.A, residual / np.linalg.norm(residual), atol=1e-12)


def test_kkt_is_optimal_against_random_feasible_matrices():
    P, N, lowest, inactive_from = _random_problem(0, 2)
    beta = (lowest + inactive_from) / 2
    best = np.vdot(P, solve_kkt(P, N, beta).A)
    rng = np.random.RandomState(0)
    candidates = rng.normal(size=(50000, 2, 2))
    candidates /= np.linalg.norm(candidates, axis=(1, 2), keepdims=True)
    candidates *= rng.uniform(size=(50000, 1, 1)) ** 0.1
    feasible = candidates[np.einsum("ij,kij->k", N, candidates) <= beta]
    objectives = np.einsum("ij,kij->k", P, feasible)
    assert feasible.shape[0] > 1000
    # The search comes close (so a suboptimal closed form would be caught) but never beats it.
    assert best * 0.95 < objectives.max() <= best


def test_linear_case_beta_zero():
    P, N, _, inactive_from = _random_problem(4, 5)
    assert inactive_from > 0  # the constraint is active at beta = 0
    solution = solve_kkt(P, N, 0.0)
    # beta = 0: a linear system, lambda = <N, P> / ||N||^2 and A orthogonal to N.
    assert solution.lambda_ == pytest.approx(np.vdot(N, P) / np.vdot(N, N))
    assert np.vdot(N, solution.A) == pytest.approx(0, abs=1e-12)
    _assert_kkt(P, N, 0.0, solution)
    assert _relative_difference(solve_cvxpy(P, N, 0.0).A, solution.A) < 1e-4


@pytest.mark.parametrize("beta", [0.3, 0.0, -0.2])
def test_zero_positive_matrix_gives_least_norm_feasible_matrix(beta):
    rng = np.random.RandomState(0)
    P, N = np.zeros((3, 3)), _random_symmetric(rng, 3)
    N *= 0.5 / np.linalg.norm(N)
    solution = solve_kkt(P, N, beta)
    assert solution.case == "zero_positive"
    assert (solution.lambda_, solution.gamma_) == (0.0, 0.0)
    expected = np.zeros((3, 3)) if beta >= 0 else beta * N / np.vdot(N, N)
    np.testing.assert_allclose(solution.A, expected, atol=1e-15)
    _assert_kkt(P, N, beta, solution)
    # cvxpy returns some optimal point: feasible, with the same (zero) objective.
    reference = solve_cvxpy(P, N, beta)
    assert np.vdot(N, reference.A) <= beta + 1e-7 and np.linalg.norm(reference.A) <= 1 + 1e-7


@pytest.mark.parametrize("beta", [-0.4, 0.0, 0.25])
def test_positively_collinear_gives_least_norm_optimum(beta):
    rng = np.random.RandomState(1)
    N = _random_symmetric(rng, 4)
    N *= 0.5 / np.linalg.norm(N)
    P = 3.0 * N
    solution = solve_kkt(P, N, beta)
    assert solution.case == "collinear"
    assert solution.lambda_ == pytest.approx(3.0) and solution.gamma_ == 0.0
    np.testing.assert_allclose(solution.A, beta * N / np.vdot(N, N), atol=1e-14)
    assert solution.risk_active and not solution.norm_active
    _assert_kkt(P, N, beta, solution)
    reference = solve_cvxpy(P, N, beta)
    assert np.vdot(P, reference.A) == pytest.approx(np.vdot(P, solution.A), abs=1e-6)


def test_positively_collinear_beyond_norm_is_inactive():
    N = np.diag([0.3, 0.4])
    solution = solve_kkt(2 * N, N, beta=0.6)  # ||N||_F = 0.5 <= beta
    assert solution.case == "inactive"
    np.testing.assert_allclose(solution.A, N / 0.5)


def test_negatively_collinear_is_inactive():
    N = np.diag([0.3, 0.4])
    solution = solve_kkt(-N, N, beta=-0.2)
    assert solution.case == "inactive"
    np.testing.assert_allclose(solution.A, -N / 0.5)
    _assert_kkt(-N, N, -0.2, solution)


def test_zero_negative_matrix():
    P = np.diag([0.3, -0.4])
    solution = solve_kkt(P, np.zeros((2, 2)), beta=0.0)
    assert solution.case == "inactive"
    np.testing.assert_allclose(solution.A, P / 0.5)
    with pytest.raises(ValueError, match="Infeasible"):
        solve_kkt(P, np.zeros((2, 2)), beta=-0.1)


def test_lowest_feasible_level_is_a_single_point():
    P, N, lowest, _ = _random_problem(2, 3)
    solution = solve_kkt(P, N, lowest)
    assert solution.case == "single_point"
    np.testing.assert_allclose(solution.A, -N / np.linalg.norm(N))
    assert solution.lambda_ == np.inf and solution.gamma_ == np.inf
    assert solution.risk_active and solution.norm_active


@pytest.mark.parametrize("solve", [solve_kkt, solve_cvxpy])
def test_infeasible_level_error_gives_the_feasible_range(solve):
    N = np.diag([0.3, 0.4])  # ||N||_F = 0.5: feasible iff beta >= -0.5, alpha + tol >= 0.25
    with pytest.raises(ValueError, match=r"alpha \+ tolerance >= .* = 0\.25"):
        solve(np.eye(2), N, beta=-0.6)


def test_feasible_alpha_range():
    N = np.diag([0.3, 0.4])
    assert feasible_alpha_range(N) == (0.25, 1.0)
    assert feasible_alpha_range(N, tolerance=0.05) == pytest.approx((0.2, 1.0))
    assert feasible_alpha_range(N, tolerance=1.0) == (0.0, 1.0)
    low, _ = feasible_alpha_range(N)
    solve_kkt(np.eye(2), N, beta=2 * low - 1)  # the boundary is feasible


@pytest.mark.parametrize(
    "P, N, beta, match",
    [
        (np.ones((2, 3)), np.ones((2, 3)), 0.0, "square"),
        (np.ones((2, 2)), np.ones((3, 3)), 0.0, "shape of P"),
        (np.full((2, 2), np.nan), np.ones((2, 2)), 0.0, "finite"),
        (np.ones((2, 2)), np.ones((2, 2)), np.inf, "beta"),
        (np.ones((2, 2)), np.ones((2, 2)), "0", "beta"),
    ],
)
def test_malformed_problems(P, N, beta, match):
    with pytest.raises(ValueError, match=match):
        solve_kkt(P, N, beta)


def test_missing_cvxpy_gives_install_instructions(monkeypatch):
    monkeypatch.setitem(sys.modules, "cvxpy", None)
    with pytest.raises(ImportError, match=r'pip install cvxpy .*pip install "\.\[solvers\]"'):
        solve_cvxpy(np.eye(2), np.eye(2), 0.0)


def _force_inaccurate(monkeypatch, shrink):
    """Make every cvxpy solve report ``optimal_inaccurate``, its A shrunk by ``1 - shrink``."""
    import cvxpy as cp

    original = cp.Problem.solve

    def solve(problem, *args, **kwargs):
        value = original(problem, *args, **kwargs)
        (variable,) = problem.variables()
        variable.value = variable.value * (1 - shrink)
        problem._status = cp.OPTIMAL_INACCURATE
        return value

    monkeypatch.setattr(cp.Problem, "solve", solve)


def test_certified_gap_of_the_exact_solution_is_zero_and_grows_with_the_error():
    from skrank.similarity._pointwise_roc_solvers import _certified_gap

    P, N = _digits_problem(16)
    beta = 0.5 * (np.vdot(N, P) / np.linalg.norm(P) - np.linalg.norm(N))
    exact = solve_kkt(P, N, beta)
    assert _certified_gap(P, N, beta, exact.A, exact.lambda_) < 1e-13
    # An infeasible A has no certificate.
    assert _certified_gap(P, N, beta, 1.01 * exact.A, exact.lambda_) == np.inf
    # Constraint inactive (lambda = 0, A = P / ||P||_F): A shrunk by 1e-3 stays feasible and
    # loses 1e-3 of the objective; the certificate sees exactly that.
    beta = 2 * np.vdot(N, P) / np.linalg.norm(P) + np.linalg.norm(N)
    exact = solve_kkt(P, N, beta)
    assert exact.case == "inactive"
    gap = _certified_gap(P, N, beta, 0.999 * exact.A, exact.lambda_)
    scale = max(np.linalg.norm(P), np.linalg.norm(N), abs(beta))
    assert gap == pytest.approx(1e-3 * np.vdot(P, exact.A) / scale, rel=1e-6)


def test_inaccurate_status_with_a_certified_gap_is_accepted_silently(monkeypatch):
    _force_inaccurate(monkeypatch, shrink=0.0)
    P, N = _digits_problem()
    beta = 0.9 * -np.linalg.norm(N) + 0.1 * np.vdot(N, P) / np.linalg.norm(P)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solution = solve_cvxpy(P, N, beta)
    assert solution.case.startswith("cvxpy: optimal_inaccurate, certified relative gap")
    assert _relative_difference(solution.A, solve_kkt(P, N, beta).A) < 1e-4


def test_inaccurate_status_with_a_moderate_gap_warns(monkeypatch):
    _force_inaccurate(monkeypatch, shrink=1e-6)
    P, N = _digits_problem(16)
    beta = 0.5 * (np.vdot(N, P) / np.linalg.norm(P) - np.linalg.norm(N))
    with pytest.warns(SolverAccuracyWarning, match="relative gap of"):
        solution = solve_cvxpy(P, N, beta)
    assert _relative_difference(solution.A, solve_kkt(P, N, beta).A) < 1e-4


def test_inaccurate_status_with_a_large_gap_is_refused_after_a_retry(monkeypatch):
    _force_inaccurate(monkeypatch, shrink=1e-2)
    P, N = _digits_problem(16)
    beta = 0.5 * (np.vdot(N, P) / np.linalg.norm(P) - np.linalg.norm(N))
    with pytest.raises(RuntimeError, match=r"certified gap .*; then .*certified gap.*solver='kkt'"):
        solve_cvxpy(P, N, beta)


# --- the choice of alpha ------------------------------------------------------------------------


@pytest.mark.parametrize("tolerance", [0.0, 0.03])
def test_select_alpha_matches_a_loop_of_fits(tolerance):
    X, y = _tiny_data(seed=6, n=60)
    X_fit, y_fit, X_val, y_val = X[:40], y[:40], X[40:], y[40:]
    reference = PointwiseROCSimilarity(alpha=1.0, identity_weight=0.0).fit(X_fit, y_fit)
    levels, scores = select_alpha(
        reference.P_,
        reference.N_,
        X_val / np.linalg.norm(X_val, axis=1, keepdims=True),
        y_val,
        0.1,
        tolerance=tolerance,
        n_levels=6,
    )
    # The levels split evenly the range where the constraint alpha + tolerance matters: from
    # the lowest feasible level (excluded) to the one where the constraint becomes inactive.
    lowest = (1 - np.linalg.norm(reference.N_)) / 2 - tolerance
    inactive = (1 + np.vdot(reference.N_, reference.P_) / np.linalg.norm(reference.P_)) / 2
    np.testing.assert_allclose(levels, np.linspace(lowest, inactive - tolerance, 7)[1:])
    assert len(set(np.round(scores, 12))) > 1  # the levels give different models
    for level, score in zip(levels, scores, strict=True):
        model = PointwiseROCSimilarity(alpha=level, identity_weight=0.0, tolerance=tolerance)
        model.fit(X_fit, y_fit)
        expected = pairwise_roc_score(model.pairwise_similarity(X_val), y_val, 0.1)
        assert score == pytest.approx(expected)
