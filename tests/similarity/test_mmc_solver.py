"""The mathematics of MMC against brute-force pair loops and cvxpy solves of the same problems."""

import itertools

import cvxpy as cp
import numpy as np
import pytest
from helpers import loop_nearest_pairs
from scipy import linalg as scipy_linalg

from skrank.sampling import PairSample, sample_negative_pairs, sample_negative_tuples
from skrank.similarity import similar_pair_scatter
from skrank.similarity._mmc_solver import (
    AllNegativePairs,
    SampledPairs,
    SimplexGeometry,
    SpectraplexGeometry,
    figure_of_merit,
    fit_mmc,
    initial_metric,
    maximize_mean_distance,
    project_capped_simplex,
)


def _problem(seed=0, n=30, d=4, n_classes=3):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.2, 3.0, size=d)
    y = rng.randint(n_classes, size=n)
    y[:n_classes] = np.arange(n_classes)
    X[y == 1, 0] += 1.5
    return X, y


def _negative_pairs(y):
    pairs = [(i, j) for i, j in itertools.combinations(range(len(y)), 2) if y[i] != y[j]]
    first, second = np.array(pairs).T
    return PairSample(first, second, np.full(len(pairs), 1.0 / len(pairs)))


def _loop_value_and_gradient(U, B, sample):
    value, gradient = 0.0, np.zeros_like(B)
    for i, j, weight in zip(*sample, strict=True):
        difference = U[i] - U[j]
        distance = np.sqrt(difference @ B @ difference)
        value += weight * distance
        gradient += weight * np.outer(difference, difference) / (2 * distance)
    return value, gradient


def _random_spectraplex_point(d, seed):
    factor = np.random.RandomState(seed).normal(size=(d, d))
    matrix = factor @ factor.T
    return SpectraplexGeometry().point(matrix / np.trace(matrix))


def _cvxpy_mmc(X, y, sample=None, diagonal=False, ridge=0.0, min_rank=None, similar=None):
    """The same convex problem with the objective in DCP form: sum of w * sqrt(affine in A).

    ``ridge`` adds the trace penalty ``ridge tr(S) / d tr(A)`` to the constraint; ``min_rank``
    caps the eigenvalues of ``S_r^{1/2} A S_r^{1/2}`` at ``1 / min_rank``; ``similar`` replaces
    the scatter ``S`` of all similar pairs.
    """
    sample = _negative_pairs(y) if sample is None else sample
    differences = X[sample.first] - X[sample.second]
    similar = similar_pair_scatter(X, y)[0] if similar is None else similar
    d = X.shape[1]
    similar = similar + ridge * np.trace(similar) / d * np.eye(d)
    if diagonal:
        metric = cp.Variable(d, nonneg=True)
        squared = (differences**2) @ metric
        constraints = [np.diag(similar) @ metric <= 1]
        if min_rank is not None:
            constraints.append(cp.multiply(np.diag(similar), metric) <= 1 / min_rank)
    else:
        metric = cp.Variable((d, d), PSD=True)
        squared = cp.sum(cp.multiply(differences @ metric, differences), axis=1)
        constraints = [cp.trace(similar @ metric) <= 1]
        if min_rank is not None:
            root = scipy_linalg.sqrtm(similar).real
            capped = root @ metric @ root
            constraints.append((capped + capped.T) / 2 << np.eye(d) / min_rank)
    problem = cp.Problem(cp.Maximize(sample.weight @ cp.sqrt(squared)), constraints)
    problem.solve(solver="CLARABEL")
    return problem.value


def test_capped_simplex_projection_matches_cvxpy():
    rng = np.random.RandomState(0)
    for scale in (0.1, 1.0, 5.0):
        values = rng.normal(size=6) * scale
        x = cp.Variable(6)
        cp.Problem(cp.Minimize(cp.sum_squares(x - values)), [x >= 0, cp.sum(x) <= 1]).solve(
            solver="CLARABEL"
        )
        np.testing.assert_allclose(project_capped_simplex(values), x.value, atol=1e-6)


@pytest.mark.parametrize("cap", [0.2, 0.35, 0.5])
def test_capped_simplex_projection_with_an_upper_bound_matches_cvxpy(cap):
    rng = np.random.RandomState(3)
    for scale in (0.1, 1.0, 5.0):
        values = rng.normal(size=6) * scale + 0.2
        x = cp.Variable(6)
        constraints = [x >= 0, x <= cap, cp.sum(x) <= 1]
        cp.Problem(cp.Minimize(cp.sum_squares(x - values)), constraints).solve(solver="CLARABEL")
        np.testing.assert_allclose(project_capped_simplex(values, cap), x.value, atol=1e-6)


def test_capped_spectraplex_projection_and_oracle_match_cvxpy():
    rng = np.random.RandomState(4)
    geometry = SpectraplexGeometry(cap=0.3)
    matrix = rng.normal(size=(5, 5))
    matrix = matrix + matrix.T
    B = cp.Variable((5, 5), PSD=True)
    constraints = [cp.trace(B) <= 1, B << 0.3 * np.eye(5)]
    cp.Problem(cp.Minimize(cp.sum_squares(B - matrix)), constraints).solve(solver="CLARABEL")
    np.testing.assert_allclose(geometry.project(matrix).value, B.value, atol=1e-5)
    gradient = matrix @ matrix.T
    problem = cp.Problem(cp.Maximize(cp.trace(gradient @ B)), constraints)
    problem.solve(solver="CLARABEL")
    assert geometry.linear_oracle(gradient) == pytest.approx(problem.value, rel=1e-6)


def test_spectraplex_projection_matches_cvxpy():
    rng = np.random.RandomState(1)
    for scale in (0.1, 2.0):
        matrix = rng.normal(size=(4, 4)) * scale
        matrix = matrix + matrix.T
        B = cp.Variable((4, 4), PSD=True)
        cp.Problem(cp.Minimize(cp.sum_squares(B - matrix)), [cp.trace(B) <= 1]).solve(
            solver="CLARABEL"
        )
        point = SpectraplexGeometry().project(matrix)
        np.testing.assert_allclose(point.value, B.value, atol=1e-5)
        np.testing.assert_allclose(point.factor @ point.factor.T, point.value, atol=1e-12)


@pytest.mark.parametrize("max_block_entries", [1, 50, 2**22])
def test_all_negative_pairs_match_pair_loop(max_block_entries):
    X, y = _problem(n=23)
    U = np.random.RandomState(2).normal(size=X.shape)
    point = _random_spectraplex_point(X.shape[1], seed=3)
    expected_value, expected_gradient = _loop_value_and_gradient(U, point.value, _negative_pairs(y))
    pairs = AllNegativePairs(y, max_block_entries)
    Z = SpectraplexGeometry.embed(U, point)
    value, gradient = pairs.value_and_gradient(Z, U, 1e-12, diagonal=False)
    assert value == pytest.approx(expected_value, rel=1e-12)
    assert pairs.value(Z) == pytest.approx(expected_value, rel=1e-12)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-10, atol=1e-14)
    _, diagonal_gradient = pairs.value_and_gradient(Z, U, 1e-12, diagonal=True)
    np.testing.assert_allclose(diagonal_gradient, np.diag(expected_gradient), rtol=1e-10)


@pytest.mark.parametrize("sampler", [sample_negative_pairs, sample_negative_tuples])
def test_sampled_pairs_match_pair_loop(sampler):
    X, y = _problem(n=23)
    U = np.random.RandomState(4).normal(size=X.shape)
    point = _random_spectraplex_point(X.shape[1], seed=5)
    sample = sampler(y, 9, random_state=0)
    expected_value, expected_gradient = _loop_value_and_gradient(U, point.value, sample)
    pairs = SampledPairs(sample, X.shape[0], max_block_entries=7)
    Z = SpectraplexGeometry.embed(U, point)
    value, gradient = pairs.value_and_gradient(Z, U, 1e-12, diagonal=False)
    assert value == pytest.approx(expected_value, rel=1e-12)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-10, atol=1e-14)
    _, diagonal_gradient = pairs.value_and_gradient(Z, U, 1e-12, diagonal=True)
    np.testing.assert_allclose(diagonal_gradient, np.diag(expected_gradient), rtol=1e-10)


def test_gradient_matches_finite_differences():
    X, y = _problem(n=20, seed=6)
    point = _random_spectraplex_point(X.shape[1], seed=7)
    pairs = AllNegativePairs(y)
    _, gradient = pairs.value_and_gradient(SpectraplexGeometry.embed(X, point), X, 1e-12, False)
    direction = np.random.RandomState(8).normal(size=gradient.shape)
    direction = direction + direction.T
    step = 1e-6

    def value_at(matrix):
        return pairs.value(SpectraplexGeometry.embed(X, SpectraplexGeometry().point(matrix)))

    numerical = value_at(point.value + step * direction) - value_at(point.value - step * direction)
    assert numerical / (2 * step) == pytest.approx(np.vdot(gradient, direction), rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("diagonal", [False, True])
def test_fit_matches_cvxpy_on_all_pairs(seed, diagonal):
    X, y = _problem(seed=seed)
    fit = fit_mmc(X, y, diagonal=diagonal, tol=1e-6)
    assert fit.converged
    merit, objective, constraint = figure_of_merit(X @ fit.components.T, y)
    assert objective == pytest.approx(_cvxpy_mmc(X, y, diagonal=diagonal), rel=1e-3)
    assert constraint <= 1 + 1e-9
    assert merit == pytest.approx(objective / np.sqrt(constraint))
    assert fit.objective[-1] == pytest.approx(objective, rel=1e-9)
    if diagonal:
        np.testing.assert_array_equal(fit.components, np.diag(np.diag(fit.components)))


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("ridge, min_rank", [(1.0, None), (0.5, 2), (3.0, 3)])
def test_trace_penalty_and_rank_cap_match_cvxpy(diagonal, ridge, min_rank):
    X, y = _problem(seed=4)
    fit = fit_mmc(X, y, diagonal=diagonal, tol=1e-7, scatter_ridge=ridge, min_rank=min_rank)
    assert fit.converged
    objective = figure_of_merit(X @ fit.components.T, y)[1]
    expected = _cvxpy_mmc(X, y, diagonal=diagonal, ridge=ridge, min_rank=min_rank)
    assert objective == pytest.approx(expected, rel=1e-4)
    if min_rank is not None:
        assert np.linalg.matrix_rank(fit.components, tol=1e-8) >= min_rank


@pytest.mark.parametrize("negatives", ["pairs", "tuples"])
def test_sampled_fit_matches_cvxpy_on_the_same_sample(negatives):
    X, y = _problem(seed=2)
    fit = fit_mmc(X, y, negatives=negatives, n_samples=15, tol=1e-6, random_state=0)
    sampler = sample_negative_pairs if negatives == "pairs" else sample_negative_tuples
    sample = sampler(y, 15, random_state=0)
    Z = X @ fit.components.T
    sampled_objective = SampledPairs(sample, X.shape[0]).value(Z)
    assert sampled_objective == pytest.approx(_cvxpy_mmc(X, y, sample=sample), rel=1e-3)
    assert fit.objective[-1] == pytest.approx(sampled_objective, rel=1e-9)
    assert figure_of_merit(Z, y)[2] <= 1 + 1e-9


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("ridge, min_rank", [(1e-8, None), (1.0, 2)])
def test_nearest_pair_sets_match_cvxpy_with_loop_pairs(diagonal, ridge, min_rank):
    # Xing et al.'s problem with local pair sets: the similar scatter of each item's 3 nearest
    # same-class items and the objective over its 3 nearest items of other classes.
    X, y = _problem(seed=5)
    options = dict(diagonal=diagonal, scatter_ridge=ridge, min_rank=min_rank, tol=1e-7)
    fit = fit_mmc(X, y, positives="nearest", negatives="nearest", n_neighbors=3, **options)
    assert fit.converged
    positive = loop_nearest_pairs(X, y, 3, same_class=True)
    negative = loop_nearest_pairs(X, y, 3, same_class=False)
    differences = X[positive.first] - X[positive.second]
    similar = differences.T @ differences / len(differences)
    Z = X @ fit.components.T
    objective = SampledPairs(negative, X.shape[0]).value(Z)
    assert fit.objective[-1] == pytest.approx(objective, rel=1e-9)
    expected = _cvxpy_mmc(
        X, y, sample=negative, diagonal=diagonal, ridge=ridge, min_rank=min_rank, similar=similar
    )
    assert objective == pytest.approx(expected, rel=1e-4)
    # The constraint holds on the local similar pairs (active: the objective grows with A).
    local = np.sum((Z[positive.first] - Z[positive.second]) ** 2) / len(differences)
    assert local + ridge * np.trace(similar) / X.shape[1] * np.sum(fit.components**2) == (
        pytest.approx(1.0, rel=1e-6)
    )


def test_nearest_pair_sets_with_enough_neighbours_are_all_pairs():
    X, y = _problem(seed=6)
    every = fit_mmc(X, y, tol=1e-8)
    nearest = fit_mmc(X, y, positives="nearest", negatives="nearest", n_neighbors=len(y), tol=1e-8)
    np.testing.assert_allclose(nearest.objective[-1], every.objective[-1], rtol=1e-10)
    np.testing.assert_allclose(
        nearest.components.T @ nearest.components,
        every.components.T @ every.components,
        atol=1e-6 * np.abs(every.components).max() ** 2,
    )


def test_duality_gap_bounds_the_suboptimality_of_early_iterates():
    X, y = _problem(seed=3, d=5)
    optimum = _cvxpy_mmc(X, y)
    for max_iter in (1, 2, 4):
        fit = fit_mmc(X, y, max_iter=max_iter, tol=0.0)
        assert fit.n_iter == max_iter and not fit.converged
        assert optimum - fit.objective[-1] <= fit.duality_gap * (1 + 1e-6) + 1e-9


def test_init_does_not_change_the_optimum():
    X, y = _problem(seed=4)
    objectives = [
        fit_mmc(X, y, init=init, tol=1e-7).objective[-1]
        for init in ("identity", "covariance", np.diag([1.0, 0.0, 0.0, 0.0]))
    ]
    np.testing.assert_allclose(objectives, objectives[0], rtol=1e-5)


def test_duplicate_points_across_classes_are_harmless():
    X, y = _problem(seed=5, n=24)
    X[1], X[2] = X[0], X[0]
    y[:3] = [0, 1, 2]
    fit = fit_mmc(X, y, tol=1e-6)
    assert np.all(np.isfinite(fit.components))
    objective = figure_of_merit(X @ fit.components.T, y)[1]
    assert objective == pytest.approx(_cvxpy_mmc(X, y), rel=1e-3)


def test_rank_deficient_scatter_is_regularised_and_reported():
    X, y = _problem(seed=6, n=20)
    # A feature constant within classes but not between: unbounded along it without the ridge.
    X = np.hstack([X, y[:, None].astype(float)])
    fit = fit_mmc(X, y)
    assert fit.unbounded and np.all(np.isfinite(fit.components))
    dominant = np.abs(fit.components[0])
    assert dominant.argmax() == X.shape[1] - 1
    # A constant feature makes the scatter singular but the problem stays bounded.
    constant = np.hstack([_problem(seed=6, n=20)[0], np.ones((20, 1))])
    assert not fit_mmc(constant, y).unbounded
    # More features than items, and classes whose items are all identical.
    wide = np.random.RandomState(0).normal(size=(8, 20))
    assert fit_mmc(wide, np.arange(8) % 2).unbounded
    identical = np.repeat(np.eye(3), 4, axis=0)
    fit = fit_mmc(identical, np.repeat([0, 1, 2], 4))
    assert fit.unbounded and fit.converged and np.all(np.isfinite(fit.components))


def test_constant_data_has_zero_objective_and_converges_at_once():
    fit = fit_mmc(np.ones((6, 2)), [0, 0, 1, 1, 2, 2])
    assert fit.converged and fit.n_iter == 0 and fit.objective[-1] == 0


def test_diagonal_geometry_solves_the_diagonal_problem():
    X, y = _problem(seed=7)
    U = X / X.std(axis=0)
    start = SimplexGeometry().point(np.full(X.shape[1], 1.0 / X.shape[1]))
    result = maximize_mean_distance(
        AllNegativePairs(y), U, SimplexGeometry(), start, floor=1e-12, max_iter=500, tol=1e-7
    )
    assert result.converged and result.point.value.sum() == pytest.approx(1.0)
    a = cp.Variable(X.shape[1], nonneg=True)
    sample = _negative_pairs(y)
    squared = ((U[sample.first] - U[sample.second]) ** 2) @ a
    problem = cp.Problem(cp.Maximize(sample.weight @ cp.sqrt(squared)), [cp.sum(a) <= 1])
    problem.solve(solver="CLARABEL")
    assert result.objective[-1] == pytest.approx(problem.value, rel=1e-4)


def test_figure_of_merit_matches_pair_loop():
    X, y = _problem(seed=8, n=17)
    dissimilar = [np.linalg.norm(X[i] - X[j]) for i, j in zip(*_negative_pairs(y)[:2], strict=True)]
    similar = [
        np.sum((X[i] - X[j]) ** 2)
        for i, j in itertools.combinations(range(len(y)), 2)
        if y[i] == y[j]
    ]
    merit, mean_dissimilar, mean_similar_squared = figure_of_merit(X, y, max_block_entries=5)
    assert mean_dissimilar == pytest.approx(np.mean(dissimilar), rel=1e-12)
    assert mean_similar_squared == pytest.approx(np.mean(similar), rel=1e-12)
    assert merit == pytest.approx(np.mean(dissimilar) / np.sqrt(np.mean(similar)), rel=1e-12)


@pytest.mark.parametrize(
    "init, message",
    [
        (np.eye(3), "shape"),
        (np.array([[1.0, 2.0], [0.0, 1.0]]), "symmetric"),
        (np.array([[1.0, 2.0], [2.0, 1.0]]), "positive semi-definite"),
        (np.array([1.0, -1.0]), "negative"),
        (np.array([[np.nan, 0.0], [0.0, 1.0]]), "NaN"),
        (np.zeros((2, 2)), "zero"),
    ],
)
def test_initial_metric_rejects_bad_arrays(init, message):
    with pytest.raises(ValueError, match=message):
        initial_metric(np.ones((4, 2)), init, diagonal=False)


def test_initial_metric_forms():
    X = np.random.RandomState(0).normal(size=(50, 3)) * [1.0, 2.0, 4.0]
    np.testing.assert_allclose(initial_metric(X, "identity", False), np.eye(3))
    np.testing.assert_allclose(
        initial_metric(X, "covariance", False) @ np.cov(X, rowvar=False), np.eye(3), atol=1e-10
    )
    np.testing.assert_allclose(initial_metric(X, "covariance", True), 1 / X.var(axis=0, ddof=1))
    np.testing.assert_allclose(initial_metric(X, [1.0, 2.0, 3.0], False), np.diag([1.0, 2, 3]))
    np.testing.assert_allclose(initial_metric(X, np.diag([1.0, 2, 3]), True), [1.0, 2, 3])


def test_certifies_an_optimum_with_a_nearly_vanishing_eigenvalue():
    # The optimum here has eigenvalues ~1 and ~1e-5 in whitened space: the objective is very
    # curved along the small one, where projected gradient steps alone stall at a relative duality
    # gap of ~1e-3; the minorize-maximize steps reach the tolerance in a few iterations.
    rng = np.random.RandomState(4)
    y = rng.randint(3, size=60)
    X = np.hstack([rng.normal(scale=0.5, size=(60, 2)) + y[:, None], rng.normal(size=(60, 6)) * 5])
    X[:, 0] = 3.0
    fit = fit_mmc(X, y, tol=1e-6, max_iter=100)
    assert fit.converged
    singular_values = np.linalg.svd(fit.components, compute_uv=False)
    assert singular_values[1] < 1e-3 * singular_values[0]
    assert fit.objective[-1] == pytest.approx(_cvxpy_mmc(X, y), rel=1e-5)
