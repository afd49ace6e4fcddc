"""one_standard_error_rule: the refit rule that falls back to a baseline candidate."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline

from skrank import MMC
from skrank.similarity import one_standard_error_rule


def _cv_results(split_scores, params):
    """A cv_results_ dict as GridSearchCV writes it, from a (n_candidates, n_splits) array."""
    split_scores = np.asarray(split_scores, dtype=float)
    results = {"params": params, "mean_test_score": split_scores.mean(1)}
    for i in range(split_scores.shape[1]):
        results[f"split{i}_test_score"] = split_scores[:, i]
    return results


def _reference(split_scores, baseline_index, n_standard_errors):
    """Brute force: the best by mean, unless the baseline is within n SE of it."""
    means = [np.mean(row) for row in split_scores]
    best = max(range(len(means)), key=lambda i: (means[i], -i))
    row = split_scores[best]
    mean = sum(row) / len(row)
    se = (sum((v - mean) ** 2 for v in row) / (len(row) - 1)) ** 0.5 / len(row) ** 0.5
    return baseline_index if means[baseline_index] >= means[best] - n_standard_errors * se else best


PARAMS = [{"mmc": "passthrough"}, {"mmc__min_rank": 0.25}, {"mmc__min_rank": 0.5}]


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("n_standard_errors", [0.0, 1.0, 2.0])
def test_matches_brute_force(seed, n_standard_errors):
    rng = np.random.default_rng(seed)
    scores = 0.9 + 0.01 * rng.standard_normal((3, 6)) + 0.005 * rng.standard_normal((3, 1))
    rule = one_standard_error_rule({"mmc": "passthrough"}, n_standard_errors=n_standard_errors)
    assert rule(_cv_results(scores, PARAMS)) == _reference(scores, 0, n_standard_errors)


def test_falls_back_only_within_one_standard_error():
    # Best candidate 1: mean 0.93, split std (ddof=1) 0.02, SE = 0.02 / sqrt(4) = 0.01.
    best = [0.91, 0.95, 0.91, 0.95]
    se = np.std(best, ddof=1) / 2
    rule = one_standard_error_rule({"mmc": "passthrough"})
    for baseline_mean, expected in [(0.93 - se + 1e-9, 0), (0.93 - se - 1e-6, 1)]:
        scores = [[baseline_mean] * 4, best, [0.5] * 4]
        assert rule(_cv_results(scores, PARAMS)) == expected
    # With n_standard_errors=0 the rule is the usual best-score choice.
    scores = [[0.9299] * 4, best, [0.5] * 4]
    assert (
        one_standard_error_rule({"mmc": "passthrough"}, n_standard_errors=0)(
            _cv_results(scores, PARAMS)
        )
        == 1
    )


def test_a_baseline_tied_with_the_best_is_chosen():
    """ "Within n standard errors" includes the boundary: a baseline whose mean equals the best
    one's is chosen, even with n_standard_errors=0 and the best listed first."""
    tied = [[0.9, 0.92, 0.94], [0.5, 0.5, 0.5], [0.9, 0.92, 0.94]]
    params = [{"mmc__min_rank": 0.25}, {"mmc__min_rank": 0.5}, {"mmc": "passthrough"}]
    for n_standard_errors in (0.0, 1.0):
        rule = one_standard_error_rule({"mmc": "passthrough"}, n_standard_errors=n_standard_errors)
        assert rule(_cv_results(tied, params)) == 2
        assert _reference(tied, 2, n_standard_errors) == 2
    # The best split scores all equal: a standard error of zero, the boundary is its mean.
    flat = [[0.9] * 3, [0.5] * 3, [0.9] * 3]
    assert one_standard_error_rule({"mmc": "passthrough"})(_cv_results(flat, params)) == 2
    flat[2] = [0.9 - 1e-9] * 3
    assert one_standard_error_rule({"mmc": "passthrough"})(_cv_results(flat, params)) == 0


def test_named_scorer_and_errors():
    results = _cv_results([[0.9] * 3, [0.95] * 3, [0.8] * 3], PARAMS)
    named = {k.replace("_score", "_acc"): v for k, v in results.items()}
    assert one_standard_error_rule({"mmc__min_rank": 0.5}, scoring="acc")(named) == 1
    with pytest.raises(ValueError, match="scoring='score'.*names found: \\['acc'\\]"):
        one_standard_error_rule({"mmc": "passthrough"})(named)
    with pytest.raises(ValueError, match="matches 0 candidates"):
        one_standard_error_rule({"mmc": "other"})(results)
    with pytest.raises(ValueError, match="non-empty dict"):
        one_standard_error_rule("passthrough")
    with pytest.raises(ValueError, match="n_standard_errors must be a non-negative"):
        one_standard_error_rule({"mmc": "passthrough"}, n_standard_errors=-1)


def test_in_grid_search_refits_the_chosen_candidate():
    X, y = load_iris(return_X_y=True)
    grid = [{"mmc": ["passthrough"]}, {"mmc__min_rank": [0.25, 0.5]}]
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    pipeline = Pipeline([("mmc", MMC()), ("knn", KNeighborsClassifier())])
    plain = GridSearchCV(pipeline, grid, cv=cv).fit(X, y)
    ruled = GridSearchCV(
        pipeline, grid, cv=cv, refit=one_standard_error_rule({"mmc": "passthrough"})
    ).fit(X, y)
    expected = _reference(
        [[plain.cv_results_[f"split{i}_test_score"][c] for i in range(5)] for c in range(3)],
        0,
        1.0,
    )
    assert ruled.best_index_ == expected
    assert ruled.best_params_ == plain.cv_results_["params"][expected]
    refitted = clone(pipeline).set_params(**ruled.best_params_).fit(X, y)
    assert ruled.score(X, y) == refitted.score(X, y)
