"""SNMClassifier's probabilities from arrays: the piecewise-linear logit map, its fit by
logistic loss, and the label sets of a threshold, against brute-force references."""

import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

from skrank.metrics import expected_calibration_error
from skrank.multilabel import _calibration as calibration


def brute_force_logit(knots, logits, score):
    """One score: the segment it falls in by a loop; beyond the knots, the end's logit plus
    the smallest slope."""
    if score < knots[0]:
        return logits[0] + calibration.MIN_SLOPE * (score - knots[0])
    if score > knots[-1]:
        return logits[-1] + calibration.MIN_SLOPE * (score - knots[-1])
    segment = 0
    for j in range(len(knots) - 1):
        if score >= knots[j]:
            segment = j
    slope = (logits[segment + 1] - logits[segment]) / (knots[segment + 1] - knots[segment])
    return logits[segment] + slope * (score - knots[segment])


def logistic_loss(probabilities, hits):
    probabilities = np.clip(probabilities.astype(np.float64), 1e-12, 1 - 1e-12)
    return -np.mean(np.where(hits, np.log(probabilities), np.log1p(-probabilities)))


def pairs(logit, n_rows=3000, n_candidates=8, seed=0):
    """Scores of candidates and hits drawn with probability ``expit(logit(score))``."""
    rng = np.random.RandomState(seed)
    scores = np.sort(rng.normal(size=(n_rows, n_candidates)), axis=1)[:, ::-1] * 2
    return scores, rng.uniform(size=scores.shape) < expit(logit(scores))


def test_the_map_interpolates_the_knots_and_extends_the_end_segments():
    knots, logits = np.array([-1.0, 0.0, 0.5, 2.0]), np.array([-4.0, -1.0, 0.0, 3.0])
    cal = calibration.Calibration(knots, logits)
    scores = np.array([[-3.0, -1.0, -0.2, 0.0], [0.3, 0.5, 1.7, 5.0]])
    # beyond the knots: strictly increasing, near the ends' probabilities
    assert -4.0 - 2.1e-6 < cal.logit(-3.0) < cal.logit(-2.0) < -4.0
    expected = np.vectorize(lambda s: brute_force_logit(knots, logits, s))(scores)
    np.testing.assert_allclose(cal.logit(scores), expected)
    np.testing.assert_allclose(cal.probabilities(scores), expit(expected), rtol=1e-6)
    untrained = np.zeros_like(scores, dtype=bool)
    untrained[0, 0] = True
    assert cal.probabilities(scores, untrained)[0, 0] == 0
    # the multiclass exponentials: a softmax of z once divided by their sum
    exponentials = cal.exponentials(scores, scores.max(axis=1), untrained)
    softmax = np.exp(expected) / np.exp(expected).sum(axis=1, keepdims=True)
    softmax[0] = np.where(untrained[0], 0, np.exp(expected[0])) / np.exp(expected[0, 1:]).sum()
    np.testing.assert_allclose(exponentials / exponentials.sum(axis=1, keepdims=True), softmax)


def test_a_linear_calibration_is_the_sigmoid_of_temperature_and_bias():
    scores = np.linspace(-5, 5, 11)
    cal = calibration.linear_calibration(1.7, -0.4)
    np.testing.assert_allclose(cal.probabilities(scores), expit(1.7 * scores - 0.4), rtol=1e-6)


def test_the_fit_is_strictly_increasing_and_at_least_as_good_as_the_best_sigmoid():
    # a logit that is not linear in the score: flat below 0, steep above
    scores, hits = pairs(lambda s: -4 + 3 * np.maximum(s, 0))
    cal = calibration.fit_calibration(scores, hits)
    assert len(cal.knots) == calibration.N_INNER_KNOTS + 2
    assert np.all(np.diff(cal.knots) > 0) and np.all(np.diff(cal.logits) > 0)
    assert cal.knots[0] == scores.min() and cal.knots[-1] == scores.max()
    sigmoid = LogisticRegression(C=1e6).fit(scores.reshape(-1, 1), hits.ravel())
    linear = sigmoid.predict_proba(scores.reshape(-1, 1))[:, 1]
    fitted = cal.probabilities(scores).ravel()
    # the linear maps are among the fitted family: the fit's loss is at most theirs
    assert logistic_loss(fitted, hits.ravel()) <= logistic_loss(linear, hits.ravel()) + 1e-6
    # and on fresh pairs of the same law it is the better calibrated of the two
    test_scores, test_hits = pairs(lambda s: -4 + 3 * np.maximum(s, 0), seed=1)
    best = test_scores[:, :3].ravel()
    truth = test_hits[:, :3].ravel()
    error = expected_calibration_error(truth, cal.probabilities(best))
    linear_error = expected_calibration_error(truth, sigmoid.predict_proba(best[:, None])[:, 1])
    assert error < 0.02 < linear_error


def test_the_fit_recovers_a_sigmoid():
    scores, hits = pairs(lambda s: 1.5 * s - 1.0)
    cal = calibration.fit_calibration(scores, hits)
    grid = np.linspace(-3, 3, 13)
    np.testing.assert_allclose(cal.probabilities(grid), expit(1.5 * grid - 1.0), atol=0.04)


@pytest.mark.parametrize("kind", [True, False])
def test_pairs_of_one_kind_give_their_rate_with_the_smallest_slope(kind):
    scores = np.arange(12.0).reshape(3, 4)
    cal = calibration.fit_calibration(scores, np.full(scores.shape, kind))
    probabilities = cal.probabilities(scores)
    np.testing.assert_allclose(probabilities, 0.999 if kind else 0.001, rtol=1e-4)
    assert np.all(np.diff(probabilities.ravel().astype(np.float64)) >= 0)
    assert np.all(np.diff(cal.logits) > 0)


def test_label_sets_and_their_f1_match_scikit_learn():
    rng = np.random.RandomState(0)
    n_rows, n_candidates, n_labels = 40, 5, 12
    top = np.array([rng.permutation(n_labels)[:n_candidates] for _ in range(n_rows)])
    probabilities = np.sort(rng.uniform(size=(n_rows, n_candidates)), axis=1)[:, ::-1]
    Y = (rng.uniform(size=(n_rows, n_labels)) < 0.25).astype(int)
    Y[np.arange(n_rows), top[:, 0]] = 1
    hits = Y[np.arange(n_rows)[:, None], top] == 1
    for threshold in (0.3, 0.6, 0.99):
        chosen = calibration.label_sets(probabilities, threshold)
        assert chosen[:, 0].all()
        predicted = np.zeros_like(Y)
        for i in range(n_rows):
            predicted[i, top[i][chosen[i]]] = 1
            assert set(top[i][chosen[i]]) == {top[i, 0]} | set(
                top[i][probabilities[i] >= threshold]
            )
        expected = f1_score(Y, predicted, average="samples")
        assert calibration.sample_f1(chosen, hits, Y.sum(axis=1)) == pytest.approx(expected)
    thresholds = np.array([0.3, 0.6, 0.99])
    f1s = [calibration.sample_f1(calibration.label_sets(probabilities, t), hits, Y.sum(1))
           for t in thresholds]  # fmt: skip
    chosen = calibration.choose_threshold(probabilities, hits, Y.sum(axis=1), thresholds)
    assert chosen == thresholds[int(np.argmax(f1s))]


def test_separable_pairs_keep_finite_increasing_logits():
    scores = np.array([[90.0, 80.0, 30.0], [85.0, 40.0, 20.0]])
    hits = scores > 60
    cal = calibration.fit_calibration(scores, hits)
    assert np.all(np.isfinite(cal.logits)) and np.all(np.diff(cal.logits) > 0)
    probabilities = cal.probabilities(scores).astype(np.float64)
    assert np.all((probabilities > 0) & (probabilities < 1))
    assert probabilities[hits].min() > 0.9 and probabilities[~hits].max() < 0.1


def test_a_linear_fit_is_linear_beyond_its_pairs():
    scores, hits = pairs(lambda s: 1.5 * s - 1.0)
    cal = calibration.fit_linear_calibration(scores, hits)
    grid = np.array([-50.0, -3.0, 0.0, 3.0, 50.0])
    slope = (cal.logit(grid[-1]) - cal.logit(grid[0])) / 100
    np.testing.assert_allclose(cal.logit(grid), cal.logit(0.0) + slope * grid, rtol=1e-9)
    assert slope == pytest.approx(1.5, abs=0.15)
    one_segment = calibration.fit_calibration(scores, hits, n_inner_knots=0)
    np.testing.assert_allclose(cal.logit(scores), one_segment.logit(scores), atol=1e-8)
