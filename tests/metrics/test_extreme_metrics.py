"""nDCG@k, PSP@k and label propensities against brute-force references and sklearn."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import ndcg_score

from skrank import SNMClassifier
from skrank.metrics import get_scorer, label_propensities, top_k_ndcg_score, top_k_psp_score


def _random_problem(seed, n=40, n_labels=12):
    rng = np.random.RandomState(seed)
    y = (rng.random_sample((n, n_labels)) < 0.2).astype(int)
    y[np.arange(n), rng.randint(n_labels, size=n)] = 1  # every example has a label
    return y, rng.normal(size=(n, n_labels))


def _brute_ndcg(y, scores, k):
    values = []
    for row, score in zip(y, scores, strict=True):
        order = sorted(range(len(score)), key=lambda j: (-score[j], j))[:k]
        dcg = sum(row[j] / math.log2(r + 2) for r, j in enumerate(order))
        idcg = sum(1 / math.log2(r + 2) for r in range(min(k, row.sum())))
        values.append(dcg / idcg)
    return np.mean(values)


def _brute_psp(y, scores, k, propensities):
    found, best = [], []
    for row, score in zip(y, scores, strict=True):
        order = sorted(range(len(score)), key=lambda j: (-score[j], j))[:k]
        found.append(sum(row[j] / propensities[j] for j in order) / k)
        inverse = sorted((1 / propensities[j] for j in np.flatnonzero(row)), reverse=True)
        best.append(sum(inverse[:k]) / k)
    return np.mean(found), np.mean(found) / np.mean(best)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ndcg_matches_sklearn_and_brute_force(seed):
    y, scores = _random_problem(seed)
    for k in (1, 3, 5, 12):
        expected = ndcg_score(y, scores, k=k, ignore_ties=True)
        assert top_k_ndcg_score(y, scores, k=k) == pytest.approx(expected)
        assert top_k_ndcg_score(sp.csr_matrix(y), scores, k=k) == pytest.approx(expected)
        assert top_k_ndcg_score(y, scores, k=k) == pytest.approx(_brute_ndcg(y, scores, k))
    np.testing.assert_allclose(
        top_k_ndcg_score(y, scores, k=[1, 5]), [_brute_ndcg(y, scores, k) for k in (1, 5)]
    )


def test_ndcg_ties_by_column_and_examples_without_labels_excluded():
    y = np.array([[0, 1, 0], [0, 0, 0], [1, 0, 0]])
    scores = np.array([[1.0, 1.0, 0.0], [0.3, 0.2, 0.1], [0.0, 0.0, 0.0]])
    with pytest.warns(UserWarning, match="1 of 3 examples have no true label"):
        value = top_k_ndcg_score(y, scores, k=2)
    # Row 0: label 1 is second (tie, column 0 first): 1/log2(3); row 2: first, 1.
    assert value == pytest.approx((1 / math.log2(3) + 1) / 2)


def test_multiclass_ndcg_is_the_discounted_rank_of_the_true_label():
    scores = np.array([[0.1, 0.9, 0.5], [0.8, 0.1, 0.3]])
    assert top_k_ndcg_score([2, 0], scores, k=3) == pytest.approx((1 / math.log2(3) + 1) / 2)


def test_propensities_follow_jain_et_al():
    y = np.zeros((200, 4), dtype=int)
    y[:100, 0] = y[:10, 1] = y[:1, 2] = 1
    c = (math.log(200) - 1) * 2.5**0.55
    expected = [1 / (1 + c * (n + 1.5) ** -0.55) for n in (100, 10, 1, 0)]
    np.testing.assert_allclose(label_propensities(y), expected)
    np.testing.assert_allclose(label_propensities(sp.csr_matrix(y)), expected)
    assert np.all(np.diff(label_propensities(y)) < 0)  # rarer labels, lower propensity


def test_propensities_refuse_what_the_model_does_not_define():
    # With N = 2 examples, C = (log 2 - 1) (B + 1) ** A < 0 gave propensities of 1.44 (N = 1:
    # inf); a -1 entry counted as a positive label.
    with pytest.raises(ValueError, match=r"at least 3 examples .* got 2"):
        label_propensities(np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match=r"matrix of 0s and 1s; it holds \[-1, 1\]"):
        label_propensities(np.array([[0, -1], [1, 0], [1, 1]]))
    y = np.array([[0, 1], [1, 0], [1, 1]])
    c = (math.log(3) - 1) * 2.5**0.55
    expected = [1 / (1 + c * (2 + 1.5) ** -0.55)] * 2
    np.testing.assert_allclose(label_propensities(y), expected)
    assert np.all((label_propensities(y) > 0) & (label_propensities(y) < 1))


@pytest.mark.parametrize("seed", [0, 1])
def test_psp_matches_brute_force(seed):
    y, scores = _random_problem(seed)
    propensities = label_propensities(y[::2])
    for k in (1, 3, 5):
        raw, normalized = _brute_psp(y, scores, k, propensities)
        assert top_k_psp_score(y, scores, k=k, propensities=propensities) == pytest.approx(
            normalized
        )
        assert top_k_psp_score(
            y, scores, k=k, propensities=propensities, normalize=False
        ) == pytest.approx(raw)
    # The ideal ranking (true labels, rarest first) scores 1.
    ideal = y / propensities + 1e-9 * np.arange(y.shape[1])[::-1]
    assert top_k_psp_score(y, ideal, k=3, propensities=propensities) == pytest.approx(1.0)


def test_psp_rejects_bad_propensities():
    y, scores = _random_problem(0)
    with pytest.raises(ValueError, match="one entry per label"):
        top_k_psp_score(y, scores, propensities=np.ones(3))
    with pytest.raises(ValueError, match=r"lie in \(0, 1\]"):
        top_k_psp_score(y, scores, propensities=np.zeros(y.shape[1]))


def test_ndcg_and_psp_scorers_of_a_classifier():
    rng = np.random.RandomState(0)
    centers = rng.normal(size=(8, 6))
    labels = np.arange(160) % 8
    X = centers[labels] + 0.3 * rng.normal(size=(160, 6))
    Y = np.eye(8, dtype=int)[labels]
    Y[::3, 0] = 1
    clf = SNMClassifier(n_components=8, max_epochs=5, tol=None, random_state=0).fit(X, Y)
    scores = clf.decision_function(X)
    assert get_scorer("ndcg@3")(clf, X, Y) == pytest.approx(top_k_ndcg_score(Y, scores, k=3))
    assert get_scorer("psp@3")(clf, X, Y) == pytest.approx(
        top_k_psp_score(Y, scores, k=3, propensities=label_propensities(Y))
    )
    with pytest.raises(ValueError, match="k must be >= 1"):
        get_scorer("ndcg@0")


def test_top_k_label_scores_equal_the_score_matrix_metrics():
    from skrank.metrics import top_k_label_scores, top_k_precision_score, top_k_recall_score

    y, scores = _random_problem(3)
    y[0] = 0  # an example without a true label: excluded, as by the matrix metrics
    propensities = label_propensities(y)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    with pytest.warns(UserWarning, match="no true label"):
        found = top_k_label_scores(sp.csr_matrix(y), top, k=[1, 3, 5], propensities=propensities)
    with pytest.warns(UserWarning):
        expected = {
            **{f"precision@{k}": top_k_precision_score(y, scores, k=k) for k in (1, 3, 5)},
            **{f"label_recall@{k}": top_k_recall_score(y, scores, k=k) for k in (1, 3, 5)},
            **{f"ndcg@{k}": top_k_ndcg_score(y, scores, k=k) for k in (1, 3, 5)},
            **{
                f"psp@{k}": top_k_psp_score(y, scores, k=k, propensities=propensities)
                for k in (1, 3, 5)
            },
        }
    assert found.keys() == expected.keys()
    np.testing.assert_allclose([found[key] for key in expected], list(expected.values()))


def test_top_k_label_scores_count_a_missing_label_as_a_miss():
    from skrank.metrics import top_k_label_scores

    y = np.array([[1, 1, 0, 0], [0, 0, 1, 0]])
    found = top_k_label_scores(y, [[0, -1], [2, 3]], k=2)
    # By hand: example 0 finds 1 of 2 labels in its 2 (one missing), example 1 its only one.
    assert found["precision@2"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert found["label_recall@2"] == pytest.approx((1 / 2 + 1) / 2)
    with pytest.raises(ValueError, match="exceeds"):
        top_k_label_scores(y, [[0, 1], [2, 3]], k=3)
    with pytest.raises(ValueError, match="outside"):
        top_k_label_scores(y, [[0, 4], [2, 3]], k=1)
