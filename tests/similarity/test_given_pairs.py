"""MMC and PointwiseROCSimilarity fitted on given pairs (no class labels).

Against the label path on label-derived pairs, against cvxpy and explicit pair loops on pairs
that no labelling implies, in scikit-learn's cross-validation over pairs, and on bad input.
"""

import itertools
import pickle
import warnings

import cvxpy as cp
import numpy as np
import pytest
from sklearn import clone, config_context
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold, cross_val_score

from skrank import MMC, PointwiseROCSimilarity
from skrank.metrics import pointwise_roc_score
from skrank.similarity import pair_groups, solve_cvxpy
from skrank.similarity._pair_scores import threshold_at_fpr

# The paper's MMC criterion, solved tightly for comparisons.
PAPER = {"scatter_ridge": 1e-8, "min_rank": None, "tol": 1e-8}


def _labelled(seed=0, n=36, d=4, n_classes=3):
    rng = np.random.RandomState(seed)
    y = np.arange(n) % n_classes
    X = 2.0 * rng.normal(size=(n_classes, d))[y] + rng.normal(size=(n, d))
    return X, y


def _label_pairs(y):
    first, second = np.triu_indices(y.shape[0], k=1)
    return np.stack([first, second], axis=1), np.where(y[first] == y[second], 1, -1)


def _random_pairs(seed=0, n_items=25, n_pairs=80, d=3):
    """Pairs over random items with random labels: no class labelling implies them."""
    rng = np.random.RandomState(seed)
    items = rng.normal(size=(n_items, d)) * [3.0, 1.0, 0.3]
    first = rng.randint(n_items, size=n_pairs)
    second = (first + 1 + rng.randint(n_items - 1, size=n_pairs)) % n_items
    indices = np.stack([first, second], axis=1)
    labels = np.where(rng.random_sample(n_pairs) < 0.4, 1, -1)
    return items, indices, labels


# --- equality with the label path ---------------------------------------------------------------


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("params", [PAPER, {"tol": 1e-8}])
def test_mmc_on_all_label_pairs_equals_the_label_fit(diagonal, params):
    X, y = _labelled()
    indices, labels = _label_pairs(y)
    expected = MMC(diagonal=diagonal, **params).fit(X, y)
    for fitted in (
        MMC(diagonal=diagonal, **params).fit(X[indices], labels),
        MMC(diagonal=diagonal, items=X, **params).fit(indices, labels),
    ):
        np.testing.assert_allclose(
            fitted.get_mahalanobis_matrix(), expected.get_mahalanobis_matrix(), atol=1e-9
        )
        assert fitted.objective_[-1] == pytest.approx(expected.objective_[-1], rel=1e-12)
        assert fitted.converged_
    objective, constraint = fitted.objective_and_constraint(indices, labels)
    assert (objective, constraint) == pytest.approx(expected.objective_and_constraint(X, y))


def test_mmc_on_the_label_paths_sampled_pairs_equals_its_fit():
    from skrank.sampling import sample_negative_pairs

    X, y = _labelled(n=45)
    expected = MMC(negatives="pairs", n_samples=60, random_state=3, **PAPER).fit(X, y)
    sample = sample_negative_pairs(y, 60, np.random.RandomState(3))
    indices, labels = _label_pairs(y)
    given = np.concatenate([indices[labels == 1], np.stack([sample.first, sample.second], 1)])
    given_labels = np.r_[np.ones((labels == 1).sum()), np.zeros(60)]
    fitted = MMC(items=X, **PAPER).fit(given, given_labels)
    np.testing.assert_allclose(
        fitted.get_mahalanobis_matrix(), expected.get_mahalanobis_matrix(), atol=1e-9
    )
    assert fitted.objective_[-1] == pytest.approx(expected.objective_[-1], rel=1e-12)


@pytest.mark.parametrize("preprocessing", ["none", "center", "standardize", "whiten"])
def test_pointwise_roc_on_all_label_pairs_equals_the_label_fit(preprocessing):
    X, y = _labelled(n=30)
    indices, labels = _label_pairs(y)
    options = {"alpha": 0.5, "preprocessing": preprocessing}
    expected = PointwiseROCSimilarity(**options).fit(X, y)
    as_arrays = PointwiseROCSimilarity(**options).fit(X[indices], labels)
    as_indices = PointwiseROCSimilarity(items=X, **options).fit(indices, labels == 1)
    for fitted in (as_arrays, as_indices):
        np.testing.assert_allclose(fitted.A_, expected.A_, atol=1e-12)
        for name in ("P_", "N_", "positive_risk_", "negative_risk_", "lambda_"):
            np.testing.assert_allclose(getattr(fitted, name), getattr(expected, name), atol=1e-12)
        assert fitted.threshold_ == pytest.approx(expected.threshold_, abs=1e-12)
        assert fitted.score(X[indices] if fitted.items is None else indices, labels) == (
            pytest.approx(expected.score(X, y))
        )
    if preprocessing != "none":
        np.testing.assert_allclose(as_indices.input_mean_, as_arrays.input_mean_, atol=1e-12)


def test_statistics_are_exact_in_chunks_of_pairs():
    items, indices, labels = _random_pairs(seed=1, n_pairs=300)
    reference = MMC(items=items, **PAPER).fit(indices, labels)
    roc = PointwiseROCSimilarity(alpha=0.6, items=items).fit(indices, labels)
    with config_context(working_memory=1e-4):  # chunks of a few pairs
        chunked = MMC(items=items, **PAPER).fit(indices, labels)
        chunked_roc = PointwiseROCSimilarity(alpha=0.6, items=items).fit(indices, labels)
    np.testing.assert_allclose(chunked.components_, reference.components_, atol=1e-10)
    np.testing.assert_allclose(chunked_roc.A_, roc.A_, atol=1e-13)
    assert chunked_roc.threshold_ == pytest.approx(roc.threshold_, abs=1e-14)


# --- against cvxpy and pair loops on pairs no labelling implies --------------------------------


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("form", ["arrays", "indices"])
def test_mmc_on_given_pairs_matches_cvxpy(diagonal, form):
    items, indices, labels = _random_pairs(seed=2)
    pairs = items[indices]
    model = MMC(diagonal=diagonal, items=items if form == "indices" else None, **PAPER)
    model.fit(indices if form == "indices" else pairs, labels)
    differences = pairs[:, 0] - pairs[:, 1]
    similar = differences[labels == 1].T @ differences[labels == 1] / (labels == 1).sum()
    dissimilar = differences[labels == -1]
    if diagonal:
        metric = cp.Variable(3, nonneg=True)
        squared = dissimilar**2 @ metric
        constraint = np.diag(similar) @ metric <= 1
    else:
        metric = cp.Variable((3, 3), PSD=True)
        squared = cp.sum(cp.multiply(dissimilar @ metric, dissimilar), axis=1)
        constraint = cp.trace(similar @ metric) <= 1
    problem = cp.Problem(cp.Maximize(cp.sum(cp.sqrt(squared)) / len(dissimilar)), [constraint])
    problem.solve(solver="CLARABEL")
    objective, constraint_value = model.objective_and_constraint(
        indices if form == "indices" else pairs, labels
    )
    assert objective == pytest.approx(problem.value, rel=1e-5)
    assert constraint_value == pytest.approx(1.0, rel=1e-6)
    assert model.objective_[-1] == pytest.approx(objective, rel=1e-10)


@pytest.mark.parametrize("alpha", [0.47, 0.52, 0.9])
def test_pointwise_roc_on_given_pairs_matches_loops_and_cvxpy(alpha):
    items, indices, labels = _random_pairs(seed=3, d=3)
    model = PointwiseROCSimilarity(alpha=alpha, identity_weight=0.5, items=items)
    model.fit(indices, labels)
    unit = items / np.linalg.norm(items, axis=1, keepdims=True)

    def outer_mean(selected):
        return sum(
            (np.outer(unit[i], unit[j]) + np.outer(unit[j], unit[i])) / 2 for i, j in selected
        ) / len(selected)

    P, N = outer_mean(indices[labels == 1]), outer_mean(indices[labels == -1])
    np.testing.assert_allclose(model.P_, P, atol=1e-13)
    np.testing.assert_allclose(model.N_, N, atol=1e-13)
    P_reg = P + 0.5 * np.linalg.norm(P) / np.sqrt(3) * np.eye(3)
    reference = solve_cvxpy(P_reg, N, 2 * alpha - 1)
    np.testing.assert_allclose(model.A_, reference.A, atol=2e-5)
    similarity = np.array([(1 + unit[i] @ model.A_ @ unit[j]) / 2 for i, j in indices])
    assert model.threshold_ == threshold_at_fpr(similarity[labels == -1], 0.05)
    np.testing.assert_allclose(model.decision_function(indices), similarity - model.threshold_)
    assert model.score(indices, labels) == pointwise_roc_score(labels, similarity, 0.05)


def test_pointwise_roc_auto_alpha_on_pairs_is_the_best_held_out_level():
    items, indices, labels = _random_pairs(seed=4, n_items=60, n_pairs=600, d=3)
    model = PointwiseROCSimilarity(items=items, random_state=0).fit(indices, labels)
    assert model.alpha_scores_.shape == (20,)
    best = int(np.argmax(model.alpha_scores_))
    # Refitted on all pairs at the level in the same place of their range.
    from skrank.similarity._pointwise_roc_solvers import alpha_levels, regularized_positive_matrix

    levels = alpha_levels(regularized_positive_matrix(model.P_, 3.0), model.N_)
    assert model.alpha_ == pytest.approx(levels[best])


def test_pointwise_roc_auto_alpha_with_too_few_pairs_of_a_kind_warns():
    items, indices, labels = _random_pairs(seed=5, n_pairs=40)
    labels[:] = -1
    labels[0] = 1
    with pytest.warns(UserWarning, match="chosen on the training pairs"):
        PointwiseROCSimilarity(items=items, random_state=0).fit(indices, labels)


# --- the surface: predictions, labels, dask, pickling --------------------------------------------


@pytest.mark.parametrize(
    "labels_of",
    [lambda s: np.where(s, 1, -1), lambda s: s.astype(int), lambda s: s],
    ids=["-1/1", "0/1", "bool"],
)
def test_predict_returns_the_labels_fit_saw(labels_of):
    items, indices, labels = _random_pairs(seed=6)
    y = labels_of(labels == 1)
    model = PointwiseROCSimilarity(alpha=0.6, items=items).fit(indices, y)
    np.testing.assert_array_equal(model.classes_, np.unique(y))
    predicted = model.predict(indices)
    assert predicted.dtype == np.unique(y).dtype
    np.testing.assert_array_equal(
        predicted, model.classes_[(model.decision_function(indices) > 0).astype(int)]
    )


def test_mmc_pair_methods_agree_with_the_metric_and_pickle():
    items, indices, labels = _random_pairs(seed=7)
    model = MMC(items=items).fit(indices, labels)
    A = model.get_mahalanobis_matrix()
    differences = items[indices[:, 0]] - items[indices[:, 1]]
    expected = np.sqrt(np.einsum("ij,jk,ik->i", differences, A, differences))
    np.testing.assert_allclose(model.pair_distance(indices), expected, rtol=1e-10)
    np.testing.assert_allclose(model.decision_function(indices), -expected, rtol=1e-10)
    three_d = MMC().fit(items[indices], labels)
    np.testing.assert_allclose(three_d.pair_distance(items[indices]), expected, rtol=1e-8)
    np.testing.assert_allclose(
        three_d.pair_distance(items[indices[:, 0]], items[indices[:, 1]]), expected, rtol=1e-8
    )
    metric = model.get_metric()
    assert metric(*items[indices[0]]) == pytest.approx(expected[0])
    np.testing.assert_allclose(
        np.linalg.norm(
            model.transform(items[indices[:, 0]]) - model.transform(items[indices[:, 1]]), axis=1
        ),
        expected,
        rtol=1e-10,
    )
    assert model.score(indices, labels) == pytest.approx(roc_auc_score(labels, -expected))
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(
        restored.decision_function(indices), model.decision_function(indices)
    )
    # Idempotent fits; predictions of a subset and of reordered pairs are those of the whole.
    refitted = clone(model).fit(indices, labels)
    np.testing.assert_array_equal(refitted.components_, model.components_)
    order = np.random.RandomState(0).permutation(len(indices))
    np.testing.assert_allclose(
        model.decision_function(indices[order]), model.decision_function(indices)[order]
    )
    np.testing.assert_allclose(
        model.decision_function(indices[:7]), model.decision_function(indices)[:7]
    )


def test_dask_pair_arrays_give_the_in_memory_fit():
    da = pytest.importorskip("dask.array")
    items, indices, labels = _random_pairs(seed=8, n_pairs=200)
    pairs = items[indices]
    lazy = da.from_array(pairs, chunks=(37, 2, 3))
    for make in (
        lambda: MMC(**PAPER),
        lambda: PointwiseROCSimilarity(preprocessing="whiten", random_state=0),
    ):
        expected, fitted = make().fit(pairs, labels), make().fit(lazy, da.from_array(labels))
        for name in ("components_", "A_", "threshold_", "alpha_", "input_transform_"):
            if hasattr(expected, name):
                np.testing.assert_allclose(
                    getattr(fitted, name), getattr(expected, name), atol=1e-9
                )
    indexed = MMC(items=items, **PAPER).fit(da.from_array(indices, chunks=50), labels)
    np.testing.assert_allclose(
        indexed.components_, MMC(items=items, **PAPER).fit(indices, labels).components_, atol=1e-9
    )


def test_pairs_of_equal_items_are_pairs_at_distance_zero():
    items, indices, labels = _random_pairs(seed=9)
    pairs = items[indices]
    duplicated = np.concatenate([pairs, np.stack([items[:2], items[:2]], axis=1)])
    model = MMC(**PAPER).fit(duplicated, np.r_[labels, 1, -1])
    np.testing.assert_allclose(model.pair_distance(duplicated[-2:]), 0.0)
    objective, _ = model.objective_and_constraint(duplicated, np.r_[labels, 1, -1])
    assert np.isfinite(objective) and model.converged_


# --- cross-validation over pairs -----------------------------------------------------------------


def test_cross_validation_and_grid_search_split_pairs_as_samples():
    items, indices, labels = _random_pairs(seed=10, n_items=40, n_pairs=240)
    pairs = items[indices]
    scores = cross_val_score(MMC(), pairs, labels, cv=KFold(4, shuffle=True, random_state=0))
    folds = list(KFold(4, shuffle=True, random_state=0).split(pairs))
    expected = [MMC().fit(pairs[a], labels[a]).score(pairs[b], labels[b]) for a, b in folds]
    np.testing.assert_allclose(scores, expected)
    search = GridSearchCV(
        PointwiseROCSimilarity(items=items, alpha=0.6),
        {"identity_weight": [0.0, 3.0]},
        cv=3,
    ).fit(indices, labels)
    assert search.best_estimator_.predict(indices).shape == (240,)
    fold_score = search.cv_results_["split0_test_score"][0]
    train, test = next(iter(KFold(3).split(indices)))
    model = PointwiseROCSimilarity(items=items, alpha=0.6, identity_weight=0.0)
    assert fold_score == model.fit(indices[train], labels[train]).score(indices[test], labels[test])


def test_group_aware_split_keeps_every_item_on_one_side():
    rng = np.random.RandomState(11)
    # Clusters of records (e.g. duplicates of one entity) paired within their cluster only.
    cluster = rng.randint(12, size=90)
    indices = np.array(
        [(i, j) for i, j in itertools.combinations(range(90), 2) if cluster[i] == cluster[j]]
    )
    groups = pair_groups(indices)
    # One group per cluster holding a pair: the same partition of the pairs as the clusters.
    assert (
        np.unique(np.stack([groups, cluster[indices[:, 0]]]), axis=1).shape[1]
        == (np.unique(groups).shape[0])
    )
    assert np.unique(groups).shape[0] == np.unique(cluster[indices[:, 0]]).shape[0]
    for train, test in GroupKFold(n_splits=4).split(indices, groups=groups):
        assert not set(indices[train].ravel()) & set(indices[test].ravel())
    # Items given by their features: equal features are one item.
    items = rng.normal(size=(90, 2))
    by_features = pair_groups(items[indices])
    assert np.unique(np.stack([groups, by_features]), axis=1).shape[1] == groups.max() + 1


def test_pair_groups_matches_a_union_find_loop():
    indices = np.random.RandomState(12).randint(30, size=(25, 2))
    parent = list(range(30))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in indices:
        parent[root(i)] = root(j)
    roots = [root(i) for i in indices[:, 0]]
    groups = pair_groups(indices)
    for a, b in itertools.combinations(range(25), 2):
        assert (groups[a] == groups[b]) == (roots[a] == roots[b])


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("estimator", [MMC(), PointwiseROCSimilarity()], ids=["MMC", "ROC"])
@pytest.mark.parametrize(
    "X, y, message",
    [
        (np.zeros((4, 3, 2)), [1, -1, 1, -1], r"shape \(n_pairs, 2, n_features\)"),
        (np.ones((4, 2, 2)), [1, -1, 1], "3 labels for 4 pairs"),
        (np.ones((4, 2, 2)), [1, 2, 1, 2], "values in {-1, 1} or {0, 1}"),
        (np.ones((4, 2, 2)), [1, -1, 0, 1], "values in {-1, 1} or {0, 1}"),
        (np.ones((4, 2, 2)), ["a", "b", "a", "b"], "similar .1 or True"),
        (np.ones((4, 2, 2)), [1, 1, 1, 1], "labels every pair similar"),
        (np.ones((4, 2, 2)), [False] * 4, "labels every pair dissimilar"),
        (np.r_[np.ones((3, 2, 2)), [[[np.nan, 1], [1, 1]]]], [1, -1, 1, -1], "NaN"),
        (np.r_[np.ones((3, 2, 2)), [[[np.inf, 1], [1, 1]]]], [1, -1, 1, -1], "infinity"),
    ],
)
def test_bad_pairs_and_labels(estimator, X, y, message):
    with pytest.raises(ValueError, match=message):
        clone(estimator).fit(X, y)


@pytest.mark.parametrize(
    "indices, message",
    [
        ([[0, 1], [1, 1], [2, 3]], r"pairs row 1 of items with itself"),
        ([[0, 1], [1, 9], [2, 3]], r"X\[1\] = \[1, 9\] indexes no row of items"),
        ([[0, -1], [1, 2], [2, 3]], "indexes no row"),
        ([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]], "integer row indices"),
        ([[0, 1, 2], [1, 2, 3], [2, 3, 0]], r"shape \(n_pairs, 2, n_features\)"),
    ],
)
def test_bad_index_pairs(indices, message):
    items = np.random.RandomState(0).normal(size=(5, 2))
    for estimator in (MMC(items=items), PointwiseROCSimilarity(items=items)):
        with pytest.raises(ValueError, match=message):
            estimator.fit(np.array(indices), [1, -1, 1])


def test_options_that_draw_pairs_from_labels_are_refused_on_pairs():
    items, indices, labels = _random_pairs()
    for estimator in (
        MMC(negatives="tuples"),
        MMC(positives="nearest"),
        PointwiseROCSimilarity(negatives="pairs", n_samples=10),
    ):
        with pytest.raises(ValueError, match="given pairs"):
            estimator.fit(items[indices], labels)
    with pytest.raises(ValueError, match="partial_fit takes chunks of class-labelled items"):
        PointwiseROCSimilarity().partial_fit(items[indices], labels)
    with pytest.raises(TypeError, match="items must be an array in memory"):
        da = pytest.importorskip("dask.array")
        MMC(items=da.from_array(items)).fit(indices, labels)


def test_zero_items_and_wrong_number_of_features_at_prediction():
    items, indices, labels = _random_pairs(seed=13)
    pairs = items[indices]
    zero = pairs.copy()
    zero[3, 1] = 0.0
    with pytest.raises(ValueError, match="holds items of pairs that are all zero"):
        PointwiseROCSimilarity().fit(zero, labels)
    for model in (MMC().fit(pairs, labels), PointwiseROCSimilarity().fit(pairs, labels)):
        with pytest.raises(ValueError, match="expecting 3 features"):
            model.decision_function(pairs[:, :, :2])
        with pytest.raises(ValueError, match=r"shape \(n_pairs, 2, n_features\)"):
            model.decision_function(items)


def test_index_pairs_given_without_items_warn():
    _, indices, labels = _random_pairs(seed=14)
    with pytest.warns(UserWarning, match="set items to the table"):
        MMC().fit(indices, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MMC().fit(indices.astype(float), labels)  # float features: items, as given


@pytest.mark.parametrize("scale", [1e-300, 1e300])
def test_pairs_at_extreme_magnitudes_give_the_fit_at_scale_one(scale):
    items, indices, labels = _random_pairs(seed=15)
    pairs = items[indices]
    expected, fitted = MMC().fit(pairs, labels), MMC().fit(pairs * scale, labels)
    np.testing.assert_allclose(fitted.components_ * scale, expected.components_, atol=1e-12)
    assert fitted.objective_and_constraint(pairs * scale, labels) == pytest.approx(
        expected.objective_and_constraint(pairs, labels), rel=1e-12
    )
    roc = PointwiseROCSimilarity(alpha=0.6)
    np.testing.assert_allclose(
        clone(roc).fit(pairs * scale, labels).A_, clone(roc).fit(pairs, labels).A_, atol=1e-14
    )
