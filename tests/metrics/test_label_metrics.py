"""Label metrics (``skrank.metrics._labels``): Recall@k and Precision@k of label scores,
against loops and scikit-learn's top-k accuracy."""

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics import top_k_accuracy_score

from skrank.metrics import (
    top_k_precision_score,
    top_k_recall_score,
)
from skrank.metrics._labels import top_k_hits


def brute_label_scores(Y, scores, k):
    """Multilabel indicator Y: per-example loop over the stable top-k."""
    recalls, precisions = [], []
    for labels, row in zip(Y, scores, strict=True):
        if labels.sum() == 0:
            continue
        top = sorted(range(len(row)), key=lambda j: (-row[j], j))[:k]
        hits = sum(labels[j] for j in top)
        recalls.append(hits / labels.sum())
        precisions.append(hits / k)
    return np.mean(recalls), np.mean(precisions)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_multiclass_top_k_recall_equals_top_k_accuracy(k):
    rng = np.random.default_rng(k)
    y = rng.integers(5, size=50)
    scores = rng.normal(size=(50, 5))
    assert top_k_recall_score(y, scores, k) == pytest.approx(top_k_accuracy_score(y, scores, k=k))
    assert top_k_precision_score(y, scores, k) == pytest.approx(
        top_k_accuracy_score(y, scores, k=k) / k
    )


def test_multiclass_labels_argument():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(30, 4))
    codes = rng.integers(4, size=30)
    names = np.array(["d", "b", "a", "c"])  # the label of each column, unordered
    expected = top_k_recall_score(codes, scores, 2, labels=np.arange(4))
    assert top_k_recall_score(names[codes], scores, 2, labels=names) == expected
    # Default labels: integers 0..K-1 when y_true misses a class.
    assert top_k_recall_score(codes[codes != 3], scores[codes != 3], 2) == pytest.approx(
        top_k_recall_score(codes[codes != 3], scores[codes != 3], 2, labels=np.arange(4))
    )
    with pytest.raises(ValueError, match="pass labels"):
        top_k_recall_score(names[codes][codes != 3], scores[codes != 3], 2)
    with pytest.raises(ValueError, match="not among the labels"):
        top_k_recall_score(names[codes], scores, 2, labels=["a", "b", "c", "x"])
    with pytest.raises(ValueError, match="unique"):
        top_k_recall_score(names[codes], scores, 2, labels=["a", "b", "c", "c"])
    with pytest.raises(ValueError, match="labels has 3 entries"):
        top_k_recall_score(codes, scores, 2, labels=[0, 1, 2])


@pytest.mark.parametrize("as_sparse", [False, True])
def test_multilabel_scores_match_brute_force_with_ties(as_sparse):
    rng = np.random.default_rng(1)
    Y = (rng.random((40, 9)) < 0.3).astype(int)
    Y[0] = 0  # no true label: excluded with a warning
    without_label = f"{np.sum(Y.sum(axis=1) == 0)} of 40 examples have no true label"
    scores = rng.integers(3, size=(40, 9)).astype(float)
    y_true = sparse.csr_matrix(Y) if as_sparse else Y
    for k in (1, 3, 9):
        recall, precision = brute_label_scores(Y, scores, k)
        with pytest.warns(UserWarning, match=without_label):
            assert top_k_recall_score(y_true, scores, k) == pytest.approx(recall)
        with pytest.warns(UserWarning, match=without_label):
            assert top_k_precision_score(y_true, scores, k) == pytest.approx(precision)
    with pytest.warns(UserWarning):
        values = top_k_recall_score(y_true, scores, [3, 1])
    np.testing.assert_allclose(values, [brute_label_scores(Y, scores, k)[0] for k in (3, 1)])


def test_sparse_target_with_explicit_zero_is_not_a_label():
    Y = sparse.csr_matrix((np.array([1.0, 0.0]), np.array([0, 1]), np.array([0, 2])), (1, 3))
    assert top_k_recall_score(Y, [[0.1, 0.9, 0.5]], 2) == 0.0
    assert top_k_recall_score(Y, [[0.9, 0.1, 0.5]], 1) == 1.0


def test_top_k_hits_on_label_indices():
    top = np.array([[2, 0], [1, 2]])
    hits, n_true = top_k_hits(np.array([0, 0]), top)
    np.testing.assert_array_equal(hits, [[False, True], [False, False]])
    np.testing.assert_array_equal(n_true, [1, 1])
    Y = np.array([[1, 0, 1], [0, 0, 1]])
    for targets in (Y, sparse.csr_matrix(Y)):
        hits, n_true = top_k_hits(targets, top)
        np.testing.assert_array_equal(hits, [[True, True], [False, True]])
        np.testing.assert_array_equal(n_true, [2, 1])


@pytest.mark.parametrize(
    "y_true, y_score, kwargs, message",
    [
        ([0, 1], [[0.1, np.nan], [0.2, 0.3]], {}, "NaN"),
        ([0, 1], [0.1, 0.2], {}, "2-D"),
        ([0, 1, 1], [[0.1, 0.2], [0.2, 0.3]], {}, "inconsistent"),
        ([0, 1], [[0.1, 0.2], [0.2, 0.3]], {"k": 3}, "k=3 exceeds the number of labels"),
        ([0, 1], [[0.1, 0.2], [0.2, 0.3]], {"k": 0}, "k must be >= 1"),
        ([[0, 2], [1, 0]], [[0.1, 0.2], [0.2, 0.3]], {}, "indicator"),
        ([[0, 1, 0], [1, 0, 0]], [[0.1, 0.2], [0.2, 0.3]], {}, "3 columns"),
        ([[0, 1], [1, 0]], [[0.1, 0.2], [0.2, 0.3]], {"labels": [0, 1]}, "multiclass"),
        ([[0, 0], [0, 0]], [[0.1, 0.2], [0.2, 0.3]], {}, "No example has a true label"),
        ([], np.zeros((0, 2)), {}, "0 sample"),
    ],
)
def test_label_metrics_reject_bad_input(y_true, y_score, kwargs, message):
    for function in (top_k_recall_score, top_k_precision_score):
        with pytest.raises(ValueError, match=message):
            function(y_true, y_score, **kwargs)


def test_no_warning_when_every_example_has_a_label():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        top_k_recall_score([[1, 0], [0, 1]], [[0.5, 0.1], [0.5, 0.1]], 1)
