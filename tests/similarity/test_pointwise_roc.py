"""The PointwiseROCSimilarity estimator, against explicit pair loops on tiny data."""

import itertools
import pickle
import re
import sys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import roc_curve
from sklearn.model_selection import GridSearchCV

from skrank import PointwiseROCSimilarity
from skrank.similarity import _pair_scores, _pointwise_roc_fit, solve_kkt


def _tiny_data(seed=0, n=30, d=4, n_classes=3):
    rng = np.random.RandomState(seed)
    y = np.arange(n) % n_classes
    centres = rng.normal(size=(n_classes, d))
    return centres[y] + 0.8 * rng.normal(size=(n, d)), y


def _normalized(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _pairs(y, same):
    return [(i, j) for i, j in itertools.combinations(range(len(y)), 2) if (y[i] == y[j]) == same]


def _loop_similarities(X, A, pairs):
    return np.array([(1 + X[i] @ A @ X[j]) / 2 for i, j in pairs])


def _loop_outer_mean(X, pairs):
    return sum(np.outer(X[i], X[j]) + np.outer(X[j], X[i]) for i, j in pairs) / (2 * len(pairs))


def _pair_array(X, pairs):
    return np.stack([np.stack([X[i], X[j]]) for i, j in pairs])


# --- fitted model against pair loops ------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.3, 0.4, 0.7])
def test_fit_matches_pair_loops_and_solver(alpha):
    X, y = _tiny_data()
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=alpha).fit(X, y)
    Z = _normalized(X)
    positive, negative = _pairs(y, True), _pairs(y, False)
    P, N = _loop_outer_mean(Z, positive), _loop_outer_mean(Z, negative)
    np.testing.assert_allclose(model.P_, P, atol=1e-12)
    np.testing.assert_allclose(model.N_, N, atol=1e-12)
    solution = solve_kkt(P, N, 2 * alpha - 1)
    np.testing.assert_allclose(model.A_, solution.A, atol=1e-10)
    assert (model.lambda_, model.gamma_) == pytest.approx((solution.lambda_, solution.gamma_))
    assert model.positive_risk_ == pytest.approx(_loop_similarities(Z, model.A_, positive).mean())
    assert model.negative_risk_ == pytest.approx(_loop_similarities(Z, model.A_, negative).mean())
    # The constraint holds on the training pairs, with equality when active.
    assert model.negative_risk_ <= alpha + 1e-12
    if "negative_risk" in model.active_constraints_:
        assert model.negative_risk_ == pytest.approx(alpha)
    else:
        np.testing.assert_allclose(model.A_, P / np.linalg.norm(P), atol=1e-12)


def test_active_constraints_follow_alpha():
    X, y = _tiny_data()
    assert PointwiseROCSimilarity(identity_weight=0.0, alpha=0.35).fit(
        X, y
    ).active_constraints_ == (
        "negative_risk",
        "norm",
    )
    assert PointwiseROCSimilarity(identity_weight=0.0, alpha=0.95).fit(
        X, y
    ).active_constraints_ == ("norm",)


def test_tolerance_relaxes_the_level():
    X, y = _tiny_data()
    relaxed = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.3, tolerance=0.05).fit(X, y)
    np.testing.assert_allclose(
        relaxed.A_, PointwiseROCSimilarity(identity_weight=0.0, alpha=0.35).fit(X, y).A_
    )
    assert relaxed.beta_ == pytest.approx(2 * 0.35 - 1)


def test_string_labels_give_the_same_model():
    X, y = _tiny_data()
    names = np.array(["cat", "dog", "emu"])[y]
    np.testing.assert_allclose(
        PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, names).A_,
        PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, y).A_,
    )


def test_unnormalized_inputs_use_raw_statistics():
    X, y = _tiny_data()
    X = X / 4  # norms below one
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.45, normalize=False).fit(X, y)
    P, N = _loop_outer_mean(X, _pairs(y, True)), _loop_outer_mean(X, _pairs(y, False))
    np.testing.assert_allclose(model.A_, solve_kkt(P, N, 2 * 0.45 - 1).A, atol=1e-10)


@pytest.mark.parametrize("negatives", ["pairs", "tuples"])
def test_sampled_negatives(negatives):
    X, y = _tiny_data(n=60)
    exact = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, y)
    small = PointwiseROCSimilarity(
        identity_weight=0.0, alpha=0.4, negatives=negatives, n_samples=5, random_state=0
    )
    large = clone(small).set_params(n_samples=20000).fit(X, y)
    small.fit(X, y)
    # The sample changes N_ and A_; a large sample approaches the exact N.
    assert np.linalg.norm(small.N_ - exact.N_) > 10 * np.linalg.norm(large.N_ - exact.N_)
    assert np.linalg.norm(large.A_ - exact.A_) < 0.05
    # The constraint holds for the sampled N_; the reported risks are exact on all pairs.
    assert np.vdot(small.N_, small.A_) <= small.beta_ + 1e-12
    negative = _pairs(y, False)
    assert small.negative_risk_ == pytest.approx(
        _loop_similarities(_normalized(X), small.A_, negative).mean()
    )
    np.testing.assert_allclose(clone(small).fit(X, y).A_, small.A_)  # seeded


def test_cvxpy_solver_gives_the_same_model():
    X, y = _tiny_data()
    kkt = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, y)
    cvx = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4, solver="cvxpy").fit(X, y)
    assert np.linalg.norm(cvx.A_ - kkt.A_) / np.linalg.norm(kkt.A_) < 1e-4
    assert cvx.active_constraints_ == kkt.active_constraints_
    assert (kkt.solver_, cvx.solver_) == ("kkt", "cvxpy")
    np.testing.assert_allclose(cvx.A_, cvx.A_.T)


@pytest.mark.parametrize("path", ["items", "partial_fit", "pairs"])
def test_every_fit_stores_the_solver_it_used(path):
    X, y = _tiny_data()
    model = PointwiseROCSimilarity(alpha=0.45, random_state=0)
    if path == "items":
        model.fit(X, y)
    elif path == "partial_fit":
        model.partial_fit(X[:15], y[:15]).partial_fit(X[15:], y[15:])
    else:
        pairs = _pairs(y, True)[:20] + _pairs(y, False)[:20]
        model.fit(_pair_array(X, pairs), np.repeat([1, -1], 20))
    assert model.solver == "auto" and model.solver_ == "kkt"


def test_cvxpy_solver_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "cvxpy", None)
    X, y = _tiny_data()
    with pytest.raises(ImportError, match="pip install cvxpy"):
        PointwiseROCSimilarity(solver="cvxpy").fit(X, y)


# --- streaming --------------------------------------------------------------------------------


def test_partial_fit_equals_fit():
    X, y = _tiny_data(n=45)
    order = np.argsort(y, kind="stable")  # classes arrive one after the other
    streamed = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4, random_state=0)
    chunks = np.array_split(order, 6)
    streamed.partial_fit(X[chunks[0]], y[chunks[0]])  # one class so far: not fitted yet
    with pytest.raises(NotFittedError, match="two classes"):
        streamed.pairwise_similarity(X)
    for chunk in chunks[1:]:
        streamed.partial_fit(X[chunk], y[chunk])
    fitted = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, y)
    for name in ["A_", "P_", "N_"]:
        np.testing.assert_allclose(getattr(streamed, name), getattr(fitted, name), atol=1e-12)
    assert streamed.negative_risk_ == pytest.approx(fitted.negative_risk_)
    # 45 items fit in the reservoir: the threshold is the same exact quantile.
    assert streamed.threshold_ == pytest.approx(fitted.threshold_)


def test_partial_fit_reservoir_threshold_reaches_target_fpr():
    X, y = _tiny_data(n=3000, d=3, n_classes=4)
    model = PointwiseROCSimilarity(
        identity_weight=0.0, alpha=0.4, threshold_fpr=0.1, random_state=0
    )
    for chunk in np.array_split(np.arange(3000), 5):
        model.partial_fit(X[chunk], y[chunk])
    Z = _normalized(X)
    negatives = Z[:, None] @ model.A_ @ Z.T
    different = (y[:, None] != y[None, :]) & np.triu(np.ones((3000, 3000), bool), k=1)
    achieved = np.mean((1 + negatives[:, 0][different]) / 2 > model.threshold_)
    assert achieved == pytest.approx(0.1, abs=0.02)


def test_partial_fit_with_a_single_class_reservoir_asks_for_calibration(monkeypatch):
    monkeypatch.setattr(_pointwise_roc_fit, "RESERVOIR_ITEMS", 1)
    X, y = _tiny_data()
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4)
    with pytest.warns(UserWarning, match="single class"):
        model.partial_fit(X, y)
    pairs = np.stack([X[:3], X[3:6]], axis=1)
    with pytest.raises(NotFittedError, match="calibrate_threshold"):
        model.predict(pairs)
    model.calibrate_threshold(X, y)
    assert (
        model.threshold_
        == PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, y).threshold_
    )
    assert model.predict(pairs).shape == (3,)


def test_partial_fit_after_fit_continues_the_stream():
    X, y = _tiny_data(n=40)
    model = (
        PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4)
        .fit(X[:25], y[:25])
        .partial_fit(X[25:], y[25:])
    )
    np.testing.assert_allclose(
        model.A_, PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, y).A_
    )


def test_partial_fit_after_a_fit_on_pairs_says_there_is_no_stream():
    X, y = _tiny_data()
    pairs = _pairs(y, True)[:10] + _pairs(y, False)[:10]
    model = PointwiseROCSimilarity(alpha=0.5).fit(_pair_array(X, pairs), np.repeat([1, -1], 10))
    with pytest.raises(ValueError, match="fitted on given pairs"):
        model.partial_fit(X, y)


def test_partial_fit_classes_and_labels():
    X, y = _tiny_data()
    model = PointwiseROCSimilarity(alpha=0.5)
    with pytest.raises(ValueError, match="not in classes"):
        model.partial_fit(X, y, classes=[0, 1])
    model.partial_fit(X[:10], y[:10], classes=[0, 1, 2, 3])
    np.testing.assert_array_equal(model.item_classes_, [0, 1, 2, 3])
    with pytest.raises(TypeError, match="one type"):
        model.partial_fit(X[10:], np.array(["a", "b"] * 10))
    with pytest.raises(TypeError, match="one type"):
        PointwiseROCSimilarity(alpha=0.5).partial_fit(X, y, classes=["a", "b", "c"])
    texts = PointwiseROCSimilarity(alpha=0.5).partial_fit(X[:10], np.array(["ant", "bee"] * 5))
    texts.partial_fit(X[10:], np.array(["bee", "caterpillar"] * 10))
    np.testing.assert_array_equal(texts.item_classes_, ["ant", "bee", "caterpillar"])


def test_partial_fit_refuses_sampled_negatives():
    X, y = _tiny_data()
    with pytest.raises(ValueError, match='negatives="all" only'):
        PointwiseROCSimilarity(alpha=0.5, negatives="pairs", n_samples=10).partial_fit(X, y)


# --- scoring pairs ------------------------------------------------------------------------------


def test_similarity_methods_match_loops():
    X, y = _tiny_data()
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, y)
    Z, A = _normalized(X), model.A_
    loop = np.array([[(1 + a @ A @ b) / 2 for b in Z[:7]] for a in Z])
    np.testing.assert_allclose(model.pairwise_similarity(X, X[:7]), loop)
    np.testing.assert_allclose(model.pairwise_similarity(X)[:, :7], loop)
    np.testing.assert_allclose(model.pair_score(X[:7], X[7:14]), np.diag(loop[7:14]))
    pairs = np.stack([X[:7], X[7:14]], axis=1)
    np.testing.assert_allclose(
        model.decision_function(pairs), np.diag(loop[7:14]) - model.threshold_
    )
    np.testing.assert_allclose(model.pair_score(pairs), np.diag(loop[7:14]))
    with pytest.warns(FutureWarning, match="similarity was renamed pair_score"):
        np.testing.assert_array_equal(
            model.similarity(X[:7], X[7:14]), model.pair_score(X[:7], X[7:14])
        )
    assert 0 <= loop.min() and loop.max() <= 1


def test_threshold_is_the_training_quantile():
    X, y = _tiny_data(n=40)
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4, threshold_fpr=0.2).fit(X, y)
    negative = _pairs(y, False)
    scores = _loop_similarities(_normalized(X), model.A_, negative)
    # The loop and the fitted model sum in different orders: equal to rounding, and the
    # quantile's neighbours differ by far more than that.
    expected = min(s for s in scores if np.mean(scores > s) <= 0.2)
    assert model.threshold_ == pytest.approx(expected, rel=1e-12)
    assert np.min(np.abs(np.setdiff1d(scores, [expected]) - expected)) > 1e-9
    predicted = model.predict(_pair_array(X, negative))
    assert set(predicted) <= {0, 1} and predicted.mean() <= 0.2
    assert predicted.mean() > 0.2 - 2 / len(negative)


def test_threshold_from_a_pair_sample_when_pairs_are_many(monkeypatch):
    monkeypatch.setattr(_pair_scores, "CALIBRATION_PAIRS", 2000)
    X, y = _tiny_data(n=300, d=3)
    model = PointwiseROCSimilarity(
        identity_weight=0.0, alpha=0.4, threshold_fpr=0.1, random_state=0
    ).fit(X, y)
    negative = _pairs(y, False)
    scores = _loop_similarities(_normalized(X), model.A_, negative)
    # 2000 sampled pairs: the achieved rate is within a few standard errors (0.0067) of 0.1.
    assert np.mean(scores > model.threshold_) == pytest.approx(0.1, abs=0.025)


def test_calibrate_threshold_on_other_data():
    X, y = _tiny_data(n=40)
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X[:20], y[:20])
    A = model.A_.copy()
    model.set_params(threshold_fpr=0.3).calibrate_threshold(X[20:], y[20:])
    scores = _loop_similarities(_normalized(X[20:]), A, _pairs(y[20:], False))
    assert model.threshold_ == min(s for s in scores if np.mean(scores > s) <= 0.3)
    np.testing.assert_array_equal(model.A_, A)


def test_score_is_tpr_at_threshold_fpr_over_all_pairs():
    X, y = _tiny_data(n=40)
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4, threshold_fpr=0.1).fit(
        X[:20], y[:20]
    )
    pairs = list(itertools.combinations(range(20), 2))
    scores = _loop_similarities(_normalized(X[20:]), model.A_, pairs)
    same = np.array([y[20 + i] == y[20 + j] for i, j in pairs])
    fpr, tpr, _ = roc_curve(same, scores, drop_intermediate=False)
    assert model.score(X[20:], y[20:]) == pytest.approx(np.interp(0.1, fpr, tpr))


def test_tpr_at_fpr_scorer_uses_the_learned_similarity():
    from skrank.metrics import get_scorer

    X, y = _tiny_data(n=40)
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4, threshold_fpr=0.1).fit(
        X[:20], y[:20]
    )
    scorer = get_scorer("tpr@fpr=0.1")
    assert scorer(model, X[20:], y[20:]) == model.score(X[20:], y[20:])


def test_grid_search_over_alpha():
    X, y = _tiny_data(n=60)
    search = GridSearchCV(PointwiseROCSimilarity(), {"alpha": [0.45, 0.6]}, cv=2).fit(X, y)
    assert search.best_params_["alpha"] in (0.45, 0.6)


# --- properties of the common checks that call predict on items (see test_common.py) -----------


def test_pair_methods_invariances_pickle_and_dtypes():
    X, y = _tiny_data(n=40)
    model = PointwiseROCSimilarity(identity_weight=0.0, alpha=0.4).fit(X, y)
    pairs = _pair_array(X, _pairs(y, False)[:30] + _pairs(y, True)[:30])
    scores, labels = model.decision_function(pairs), model.predict(pairs)
    state = dict(model.__dict__)
    order = np.random.RandomState(0).permutation(len(pairs))
    np.testing.assert_allclose(model.decision_function(pairs[order]), scores[order])
    np.testing.assert_allclose(model.decision_function(pairs[10:20]), scores[10:20])
    assert model.__dict__ == state
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.decision_function(pairs), scores)
    np.testing.assert_allclose(
        model.decision_function(pairs.astype(np.float32)), scores, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(model.predict(np.asfortranarray(pairs)), labels)
    np.testing.assert_array_equal(model.predict(pairs.astype(object)), labels)
    refit = clone(model).fit(np.asfortranarray(X.astype(np.float32)), y)
    np.testing.assert_allclose(refit.decision_function(pairs), scores, atol=1e-6)
    np.testing.assert_array_equal(clone(model).fit(X, y).decision_function(pairs), scores)
    # check_estimators_dtypes fits integer inputs; check_estimators_pickle read-only ones
    integers = np.round(4 * X)
    on_floats = clone(model).fit(integers, y)
    for data in (integers.astype(np.int64), integers.astype(np.int32)):
        np.testing.assert_allclose(
            clone(model).fit(data, y).pairwise_similarity(data),
            on_floats.pairwise_similarity(integers),
            rtol=1e-12,
        )
    read_only = X.copy()
    read_only.setflags(write=False)
    read_only_pairs = pairs.copy()
    read_only_pairs.setflags(write=False)
    refit = clone(model).fit(read_only, y)
    np.testing.assert_array_equal(refit.decision_function(read_only_pairs), scores)


# --- bad input ----------------------------------------------------------------------------------


def test_infeasible_alpha_gives_the_feasible_range():
    X, y = _tiny_data()
    with pytest.raises(ValueError, match=r"infeasible .* feasible alpha are \[0\.\d+, 1\]"):
        PointwiseROCSimilarity(identity_weight=0.0, alpha=0.05).fit(X, y)


@pytest.mark.parametrize(
    "y, match",
    [
        (np.zeros(30, dtype=int), "one class"),
        (np.arange(30), "No class of y has two or more items"),
        (np.linspace(0, 1, 30), "No class of y has two or more items"),  # float labels
    ],
)
@pytest.mark.filterwarnings("ignore:The number of unique classes")
def test_bad_labels(y, match):
    X, _ = _tiny_data()
    with pytest.raises(ValueError, match=match):
        PointwiseROCSimilarity().fit(X, y)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_inputs(value):
    X, y = _tiny_data()
    model = PointwiseROCSimilarity().fit(X, y)
    bad = X.copy()
    bad[3, 1] = value
    with pytest.raises(ValueError, match="NaN|infinity"):
        clone(model).fit(bad, y)
    with pytest.raises(ValueError, match="NaN|infinity"):
        model.pairwise_similarity(bad)
    with pytest.raises(ValueError, match="NaN|infinity"):
        model.predict(np.stack([bad, X], axis=1))


def test_zero_vectors_with_normalize():
    X, y = _tiny_data()
    X[[4, 9]] = 0
    with pytest.raises(ValueError, match=re.escape("all-zero rows") + r".*\[4, 9\]"):
        PointwiseROCSimilarity().fit(X, y)
    model = PointwiseROCSimilarity(normalize=False).fit(X, y)
    with pytest.raises(ValueError, match="all-zero rows"):
        PointwiseROCSimilarity().fit(X[10:], y[10:]).pair_score(X[:5], X[5:10])
    assert np.isfinite(model.pairwise_similarity(X)).all()


@pytest.mark.parametrize(
    "shape, match",
    [
        ((5, 4), r"shape \(n_pairs, 2, n_features\)"),
        ((5, 3, 4), r"shape \(n_pairs, 2"),
        ((5, 2, 3), "3 features, but PointwiseROCSimilarity is expecting 4"),
    ],
)
def test_pairs_of_wrong_shape(shape, match):
    X, y = _tiny_data()
    model = PointwiseROCSimilarity().fit(X, y)
    with pytest.raises(ValueError, match=match):
        model.predict(np.ones(shape))


def test_wrong_number_of_features_after_fit():
    X, y = _tiny_data()
    model = PointwiseROCSimilarity(alpha=0.5).fit(X, y)
    for call in [
        lambda: model.pairwise_similarity(X[:, :3]),
        lambda: model.pairwise_similarity(X, X[:, :3]),
        lambda: model.pair_score(X[:, :3], X[:, :3]),
        lambda: model.calibrate_threshold(X[:, :3], y),
        lambda: model.partial_fit(X[:, :3], y),
    ]:
        with pytest.raises(ValueError, match="3 features"):
            call()
    with pytest.raises(ValueError, match="same number of rows"):
        model.pair_score(X[:5], X[:6])


@pytest.mark.parametrize("n_samples", [None, 0])
def test_sampling_needs_n_samples(n_samples):
    X, y = _tiny_data()
    with pytest.raises(ValueError, match="n_samples"):
        PointwiseROCSimilarity(negatives="tuples", n_samples=n_samples).fit(X, y)


def test_unfitted():
    with pytest.raises(NotFittedError):
        PointwiseROCSimilarity().predict(np.ones((2, 2, 3)))


# --- reproduction of Section 5.1 of the paper ---------------------------------------------------


def test_section_5_1_alpha_selects_the_region_of_the_roc_curve():
    """3-class sphere data: smaller alpha gives a better low-FPR end, larger a better high end.

    The paper's Figure 1(b): solving the problem at several levels alpha optimises different
    regions of the ROC curve. Held-out pairs; the constraint holds on the training pairs.
    """
    from skrank.datasets import make_sphere_classes
    from skrank.metrics import pairwise_roc_score

    X, y = make_sphere_classes(300, random_state=0)
    X_test, y_test = make_sphere_classes(600, random_state=1)
    training_negatives = (y[:, None] != y[None, :]) & np.triu(np.ones((300, 300), bool), k=1)
    low_end, high_end = [], []
    for alpha in [0.31, 0.35, 0.4, 0.5]:
        model = PointwiseROCSimilarity(identity_weight=0.0, alpha=alpha).fit(X, y)
        assert model.pairwise_similarity(X)[training_negatives].mean() <= alpha + 1e-12
        tpr = pairwise_roc_score(model.pairwise_similarity(X_test), y_test, [0.02, 0.05, 0.5])
        low_end.append(tpr[:2])
        high_end.append(tpr[2])
    low_end = np.array(low_end)
    assert np.all(np.diff(low_end, axis=0) < 0), low_end  # TPR at FPR 2% and 5% fall with alpha
    assert high_end[2] > high_end[0] + 0.1, high_end  # TPR at FPR 50% rises from 0.31 to 0.4


# --- options that serve the user's operating point ----------------------------------------------


@pytest.mark.parametrize("alpha", [0.42, 0.46, 0.9])
def test_identity_weight_solves_the_penalised_problem_as_cvxpy(alpha):
    """``<P, A> - (mu ||P|| / 2) ||A - I / sqrt(d)||^2`` (a Frobenius pull toward the cosine)."""
    cp = pytest.importorskip("cvxpy")
    X, y = _tiny_data(seed=3)
    mu = 0.7
    model = PointwiseROCSimilarity(alpha=alpha, identity_weight=mu).fit(X, y)
    Z = _normalized(X)
    P = _loop_outer_mean(Z, _pairs(y, True))
    N = _loop_outer_mean(Z, _pairs(y, False))
    d = X.shape[1]
    A = cp.Variable((d, d))
    penalty = mu * np.linalg.norm(P) / 2 * cp.sum_squares(A - np.eye(d) / np.sqrt(d))
    problem = cp.Problem(
        cp.Maximize(cp.sum(cp.multiply(P, A)) - penalty),
        [cp.sum(cp.multiply(N, A)) <= 2 * alpha - 1, cp.norm(A, "fro") <= 1],
    )
    problem.solve(solver="CLARABEL")
    assert "norm" in model.active_constraints_  # where the two forms have the same optimum
    np.testing.assert_allclose(model.A_, A.value, atol=1e-4)
    np.testing.assert_allclose(model.P_, P, atol=1e-12)  # P_ stays the paper's statistic
    assert model.positive_risk_ == pytest.approx(
        _loop_similarities(Z, model.A_, _pairs(y, True)).mean()
    )


def test_large_identity_weight_gives_the_cosine_similarity():
    X, y = _tiny_data()
    model = PointwiseROCSimilarity(alpha=1.0, identity_weight=1e9).fit(X, y)
    np.testing.assert_allclose(model.A_, np.eye(4) / 2, atol=1e-7)


@pytest.mark.parametrize("kind", ["center", "standardize", "whiten"])
def test_preprocessing_equals_fitting_on_transformed_inputs(kind):
    X, y = _tiny_data(seed=4, n=45)
    X = X * np.array([1.0, 10.0, 0.1, 3.0]) + 2.0
    X_new = _tiny_data(seed=5, n=12)[0]
    model = PointwiseROCSimilarity(alpha=0.45, identity_weight=0.0, preprocessing=kind).fit(X, y)
    mean = X.mean(axis=0)
    if kind == "center":
        transformed, new = X - mean, X_new - mean
    elif kind == "standardize":
        transformed, new = (X - mean) / X.std(axis=0), (X_new - mean) / X.std(axis=0)
    else:
        mapped = (X - mean) @ model.input_transform_
        np.testing.assert_allclose(np.cov(mapped, rowvar=False, bias=True), np.eye(4), atol=1e-9)
        transformed, new = mapped, (X_new - mean) @ model.input_transform_
    plain = PointwiseROCSimilarity(alpha=0.45, identity_weight=0.0).fit(transformed, y)
    np.testing.assert_allclose(model.A_, plain.A_, atol=1e-10)
    np.testing.assert_allclose(
        model.pairwise_similarity(X_new), plain.pairwise_similarity(new), atol=1e-10
    )
    with pytest.raises(ValueError, match="preprocessing='none'"):
        clone(model).partial_fit(X, y)


def test_auto_alpha_is_the_best_held_out_level_refitted_on_all_items():
    X, y = _tiny_data(seed=7, n=90)
    model = PointwiseROCSimilarity(threshold_fpr=0.1, random_state=0).fit(X, y)
    assert model.alpha_levels_.shape == model.alpha_scores_.shape == (20,)
    best = int(np.argmax(model.alpha_scores_))
    from skrank.similarity._pointwise_roc_solvers import alpha_levels, regularized_positive_matrix

    P = regularized_positive_matrix(model.P_, model.identity_weight)
    assert model.alpha_ == pytest.approx(alpha_levels(P, model.N_)[best])
    fixed = PointwiseROCSimilarity(alpha=model.alpha_, threshold_fpr=0.1).fit(X, y)
    np.testing.assert_allclose(model.A_, fixed.A_, atol=1e-12)
    again = PointwiseROCSimilarity(threshold_fpr=0.1, random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.alpha_scores_, model.alpha_scores_)


def test_auto_alpha_follows_the_target_fpr_on_the_papers_data():
    """Figure 1 of the paper, read the other way: a low target FPR picks a lower alpha."""
    from skrank.datasets import make_sphere_classes

    X, y = make_sphere_classes(600, random_state=0)
    params = dict(identity_weight=0.0, random_state=0)
    low = PointwiseROCSimilarity(threshold_fpr=0.02, **params).fit(X, y)
    high = PointwiseROCSimilarity(threshold_fpr=0.5, **params).fit(X, y)
    assert low.alpha_ < high.alpha_ - 0.02, (low.alpha_, high.alpha_)


def test_auto_alpha_with_partial_fit_and_too_few_items():
    X, y = _tiny_data(seed=8, n=200)
    model = PointwiseROCSimilarity(threshold_fpr=0.1, random_state=0)
    for start in range(0, 200, 50):
        model.partial_fit(X[start : start + 50], y[start : start + 50])
    assert model.alpha_scores_.shape == (20,)
    fitted = PointwiseROCSimilarity(alpha=model.alpha_, threshold_fpr=0.1).fit(X, y)
    np.testing.assert_allclose(model.A_, fitted.A_, atol=1e-12)
    with pytest.warns(UserWarning, match="chosen on the training pairs"):
        PointwiseROCSimilarity().fit(X[:5], y[:5])
