"""The one fit of PointwiseROCSimilarity (``_pointwise_roc_fit``): alpha and the solver resolved,
the problem solved and the threshold calibrated, against the solvers and explicit pair loops."""

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from skrank.metrics import pairwise_roc_score, pointwise_roc_score
from skrank.similarity import _pointwise_roc_fit, regularized_positive_matrix, solve_kkt
from skrank.similarity._given_pairs import GivenPairs
from skrank.similarity._pair_scores import threshold_at_fpr
from skrank.similarity._pair_statistics import PairStatistics
from skrank.similarity._pointwise_roc_fit import (
    HeldOut,
    fit_on_items,
    fit_on_stream,
    fit_pointwise_roc,
    held_out_items,
    held_out_pairs,
    item_statistics,
    new_stream,
    split_items,
)
from skrank.similarity._pointwise_roc_solvers import alpha_levels


def _unit_items(seed=0, n=60, d=4, n_classes=3):
    rng = np.random.RandomState(seed)
    codes = np.arange(n) % n_classes
    X = rng.normal(size=(n_classes, d))[codes] + 0.8 * rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True), codes


def _problem(seed=0):
    X, codes = _unit_items(seed)
    statistics = PairStatistics(X.shape[1]).update(X, codes)
    return statistics.positive_matrix(), statistics.negative_matrix()


def _never_called():
    raise AssertionError("a fixed alpha holds nothing out")


def test_fixed_alpha_is_the_kkt_solution_of_the_regularised_problem():
    P, N = _problem()
    negatives = np.array([0.2, 0.9, 0.4, 0.6])
    fit = fit_pointwise_roc(
        P,
        N,
        alpha=0.45,
        held_out=_never_called,
        negative_scores=lambda A: negatives,
        threshold_fpr=0.25,
        identity_weight=0.5,
        tolerance=0.01,
    )
    beta = 2 * (0.45 + 0.01) - 1
    expected = solve_kkt(regularized_positive_matrix(P, 0.5), N, beta)
    np.testing.assert_allclose(fit.A, expected.A, atol=1e-12)
    assert (fit.alpha, fit.beta, fit.solver) == (0.45, beta, "kkt")
    assert (fit.lambda_, fit.gamma_) == (expected.lambda_, expected.gamma_)
    assert fit.active_constraints == ("negative_risk", "norm")
    assert fit.positive_risk == pytest.approx((1 + np.vdot(P, fit.A)) / 2)
    assert fit.negative_risk == pytest.approx((1 + np.vdot(N, fit.A)) / 2)
    assert fit.threshold == threshold_at_fpr(negatives, 0.25) == 0.6
    assert fit.alpha_levels is None and fit.alpha_scores is None
    assert fit.P is P and fit.N is N


def test_negative_risk_is_exact_when_the_constraint_uses_a_sampled_matrix():
    P, N = _problem()
    sampled = N + 0.05 * np.eye(N.shape[0])
    fit = fit_pointwise_roc(
        P, sampled, alpha=0.5, negative_scores=lambda A: None, negative_risk_matrix=N
    )
    assert fit.N is sampled and fit.threshold is None
    assert fit.negative_risk == pytest.approx((1 + np.vdot(N, fit.A)) / 2)
    assert np.vdot(sampled, fit.A) <= fit.beta + 1e-12


@pytest.mark.parametrize("solver", ["auto", "kkt", "cvxpy"])
def test_solver_is_resolved_and_reported(solver):
    if solver == "cvxpy":
        pytest.importorskip("cvxpy")
    P, N = _problem()
    fit = fit_pointwise_roc(P, N, alpha=0.45, solver=solver, negative_scores=lambda A: None)
    assert fit.solver == {"auto": "kkt"}.get(solver, solver)
    reference = fit_pointwise_roc(P, N, alpha=0.45, solver="kkt", negative_scores=lambda A: None)
    np.testing.assert_allclose(fit.A, reference.A, atol=1e-5)


@pytest.mark.parametrize("tolerance", [0.0, 0.02])
def test_auto_alpha_scores_the_held_out_levels_and_refits_at_the_best_place(tolerance):
    P, N = _problem(seed=0)
    P_part, N_part = _problem(seed=1)
    calls = []

    def alignment(A):  # any function of A
        return float(A[0, 1] - A[2, 3])

    def score(A):
        calls.append(A)
        return alignment(A)

    fit = fit_pointwise_roc(
        P,
        N,
        alpha="auto",
        held_out=lambda: HeldOut(P_part, N_part, score),
        negative_scores=lambda A: None,
        identity_weight=1.0,
        tolerance=tolerance,
    )
    part_levels = alpha_levels(regularized_positive_matrix(P_part, 1.0), N_part, tolerance, 20)
    np.testing.assert_allclose(fit.alpha_levels, part_levels)
    assert len(calls) == 20
    for level, A, value in zip(part_levels, calls, fit.alpha_scores, strict=True):
        beta = max(2 * (level + tolerance) - 1, -np.linalg.norm(N_part))
        expected = solve_kkt(regularized_positive_matrix(P_part, 1.0), N_part, beta).A
        np.testing.assert_allclose(A, expected, atol=1e-12)
        assert value == alignment(expected)
    best = int(np.argmax(fit.alpha_scores))
    levels = alpha_levels(regularized_positive_matrix(P, 1.0), N, tolerance, 20)
    assert fit.alpha == levels[best]
    again = fit_pointwise_roc(
        P,
        N,
        alpha=fit.alpha,
        negative_scores=lambda A: None,
        identity_weight=1.0,
        tolerance=tolerance,
    )
    np.testing.assert_array_equal(fit.A, again.A)


def test_an_infeasible_alpha_names_the_feasible_range():
    P, N = _problem()
    low = (1 - np.linalg.norm(N)) / 2
    with pytest.raises(ValueError, match=rf"alpha=0.0 is infeasible.*\[{low:.6g}, 1\]"):
        fit_pointwise_roc(P, N, alpha=0.0, negative_scores=lambda A: None)


def test_split_items_is_stratified_and_caps_the_held_out_items(monkeypatch):
    codes = np.repeat([0, 1, 2], [50, 30, 20])
    fit_part, validation = split_items(codes, 0.2, np.random.RandomState(0))
    assert sorted(np.r_[fit_part, validation]) == list(range(100))
    np.testing.assert_array_equal(np.bincount(codes[validation]), [10, 6, 4])
    # a class too small to be split: a plain split
    fit_part, validation = split_items(np.r_[codes, 3], 0.2, np.random.RandomState(0))
    assert validation.shape == (21,) and fit_part.shape == (80,)
    monkeypatch.setattr(_pointwise_roc_fit, "MAX_VALIDATION_ITEMS", 5)
    assert split_items(codes, 0.2, np.random.RandomState(0))[1].shape == (5,)


def test_held_out_items_score_the_tpr_over_all_held_out_pairs():
    X, codes = _unit_items(n=60)
    statistics = PairStatistics(4).update(X[:40], codes[:40])
    part = held_out_items(
        statistics,
        X[40:],
        codes[40:],
        fallback=None,
        validation_fraction=0.2,
        threshold_fpr=0.1,
    )
    np.testing.assert_array_equal(part.positive_matrix, statistics.positive_matrix())
    np.testing.assert_array_equal(part.negative_matrix, statistics.negative_matrix())
    A = np.diag([1.0, 0.5, 0.0, -0.5])
    held = X[40:]
    similarity = np.array([[(1 + a @ A @ b) / 2 for b in held] for a in held])
    assert part.score(A) == pytest.approx(pairwise_roc_score(similarity, codes[40:], 0.1))


def test_held_out_items_without_a_pair_of_each_kind_fall_back_to_the_training_pairs():
    X, codes = _unit_items(n=60)
    whole = PairStatistics(4).update(X, codes)
    one_class = codes[:3] * 0
    with pytest.warns(UserWarning, match="validation_fraction=0.3 of the items"):
        part = held_out_items(
            PairStatistics(4).update(X[3:], codes[3:]),
            X[:3],
            one_class,
            fallback=(whole, X, codes),
            validation_fraction=0.3,
            threshold_fpr=0.1,
        )
    np.testing.assert_array_equal(part.positive_matrix, whole.positive_matrix())
    A = np.eye(4) / 2
    expected = pairwise_roc_score((1 + X @ A @ X.T) / 2, codes, 0.1)
    assert part.score(A) == pytest.approx(expected)


def _given_pairs(n_items=40, n_pairs=300, seed=3):
    X, codes = _unit_items(seed, n=n_items)
    rng = np.random.RandomState(seed)
    first, second = rng.randint(n_items, size=(2, n_pairs))
    keep = first != second
    first, second = first[keep], second[keep]
    return GivenPairs(X, first, second), X, codes[first] == codes[second]


def test_held_out_pairs_fit_on_most_pairs_and_score_the_others():
    pairs, X, is_similar = _given_pairs()
    part = held_out_pairs(
        pairs, X, is_similar, random_state=0, validation_fraction=0.25, threshold_fpr=0.1
    )
    fit_part, validation = train_test_split(
        np.arange(pairs.n_pairs), test_size=0.25, stratify=is_similar, random_state=0
    )

    def outer_mean(selected):
        return sum(
            np.outer(X[pairs.first[k]], X[pairs.second[k]])
            + np.outer(X[pairs.second[k]], X[pairs.first[k]])
            for k in selected
        ) / (2 * len(selected))

    similar_part = fit_part[is_similar[fit_part]]
    dissimilar_part = fit_part[~is_similar[fit_part]]
    np.testing.assert_allclose(part.positive_matrix, outer_mean(similar_part), atol=1e-13)
    np.testing.assert_allclose(part.negative_matrix, outer_mean(dissimilar_part), atol=1e-13)
    A = np.diag([1.0, 0.0, 0.5, 0.0])
    first, second = X[pairs.first[validation]], X[pairs.second[validation]]
    similarity = [(1 + a @ A @ b) / 2 for a, b in zip(first, second, strict=True)]
    expected = pointwise_roc_score(is_similar[validation], np.array(similarity), 0.1)
    assert part.score(A) == pytest.approx(expected)


def test_held_out_pairs_without_both_kinds_in_a_part_fall_back_to_all_pairs():
    pairs, X, is_similar = _given_pairs(n_pairs=40)
    is_similar[:] = False
    is_similar[0] = True
    with pytest.warns(UserWarning, match="of the pairs to choose alpha"):
        part = held_out_pairs(
            pairs, X, is_similar, random_state=0, validation_fraction=0.2, threshold_fpr=0.1
        )
    first, second = X[pairs.first[0]], X[pairs.second[0]]
    expected = (np.outer(first, second) + np.outer(second, first)) / 2
    np.testing.assert_allclose(part.positive_matrix, expected, atol=1e-13)


def test_fit_on_items_reads_the_split_parts_through_its_statistics():
    X, codes = _unit_items(n=90)
    seen = []

    def statistics(rows, codes, parts):
        seen.append([np.asarray(part) for part in parts])
        return item_statistics(rows, codes, parts)

    result = fit_on_items(
        X,
        codes,
        statistics=statistics,
        random_state=np.random.RandomState(0),
        threshold_fpr=0.1,
    )
    (parts,) = seen
    (fit_part,) = parts
    expected_part, validation = split_items(codes, 0.2, np.random.RandomState(0))
    assert result.fit.alpha_scores.shape == (20,)
    # the reservoir is drawn first: the split's draws come after it, the held-out stream keeps
    # the fitting part's statistics and the held-out items
    assert fit_part.shape == expected_part.shape
    fit_statistics, held_out_items_kept = result.held_out
    np.testing.assert_array_equal(
        fit_statistics.class_counts_, np.bincount(codes[fit_part], minlength=3)
    )
    assert held_out_items_kept.items.shape[0] == 90 - fit_part.shape[0]
    np.testing.assert_array_equal(result.statistics.class_counts_, [30, 30, 30])
    assert result.reservoir.n_seen == 90


def test_fit_on_items_with_a_fixed_alpha_draws_no_split():
    X, codes = _unit_items(n=90)

    def statistics(rows, codes, parts):
        assert parts == ()
        return item_statistics(rows, codes, parts)

    result = fit_on_items(
        X, codes, statistics=statistics, random_state=np.random.RandomState(0), alpha=0.45
    )
    assert result.fit.alpha == 0.45 and result.fit.alpha_levels is None
    assert result.held_out[0].n_samples == 0 and result.held_out[1].items.shape[0] == 0


def test_a_stream_waits_for_a_pair_of_each_kind_then_fits_all_items_seen():
    X, codes = _unit_items(n=90)
    order = np.argsort(codes, kind="stable")  # one class after the other
    stream = new_stream(4)
    rng = np.random.RandomState(0)
    fits = [
        fit_on_stream(X[part], codes[part], *stream, random_state=rng, alpha=0.45)
        for part in np.array_split(order, 6)
    ]
    assert fits[0] is None and fits[1] is None  # one class so far: no negative pair
    assert all(fit is not None for fit in fits[2:])
    statistics, reservoir, held_out = stream
    assert statistics.n_samples == reservoir.n_seen == 90
    assert held_out[0].n_samples == 0 and held_out[1].n_seen == 0  # a fixed alpha holds out none
    whole = fit_on_items(X, codes, random_state=np.random.RandomState(0), alpha=0.45)
    np.testing.assert_allclose(fits[-1].A, whole.fit.A, atol=1e-12)
    # 90 items fit in the reservoir: the threshold is the exact quantile of all negative pairs
    assert fits[-1].threshold == pytest.approx(whole.fit.threshold)


def test_a_stream_with_auto_alpha_holds_items_out_at_the_validation_fraction():
    X, codes = _unit_items(n=600, n_classes=4)
    stream = new_stream(4)
    rng = np.random.RandomState(0)
    for part in np.array_split(np.arange(600), 4):
        fit = fit_on_stream(
            X[part], codes[part], *stream, random_state=rng, validation_fraction=0.3
        )
    statistics, _, (fit_part, held) = stream
    assert fit_part.n_samples + held.n_seen == statistics.n_samples == 600
    assert abs(held.n_seen - 180) < 4 * np.sqrt(600 * 0.3 * 0.7)
    assert fit.alpha_scores.shape == (20,)
    P_part = regularized_positive_matrix(fit_part.positive_matrix(), 3.0)
    levels = alpha_levels(P_part, fit_part.negative_matrix(), 0.0, 20)
    np.testing.assert_allclose(fit.alpha_levels, levels)
