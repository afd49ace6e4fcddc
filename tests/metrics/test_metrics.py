"""Tests of skrank.metrics against brute-force references (explicit loops, scikit-learn)."""

import warnings

import numpy as np
import pytest
import torch
from scipy import sparse
from sklearn import config_context
from sklearn.metrics import average_precision_score, roc_curve, top_k_accuracy_score
from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances

from skrank.metrics import (
    auprc_score,
    map_at_r_score,
    mean_auprc_score,
    pair_scores_and_labels,
    pairwise_roc_score,
    pointwise_roc_score,
    precision_at_k_score,
    query_auprc_scores,
    r_precision_score,
    recall_at_k_score,
    retrieval_scores,
    top_k_indices,
    top_k_precision_score,
    top_k_recall_score,
)
from skrank.metrics._labels import top_k_hits
from skrank.metrics._search import _weighted_sum_top_k

# ---------------------------------------------------------------- brute-force references


def brute_auprc(is_positive, scores):
    """Mean over positives of #{positives scored >= s} / #{items scored >= s}."""
    precisions = []
    for i in np.flatnonzero(is_positive):
        retrieved = scores >= scores[i]
        precisions.append(np.sum(retrieved & is_positive) / np.sum(retrieved))
    return np.mean(precisions)


def brute_similarity(X, metric):
    if metric == "cosine":
        return cosine_similarity(X)
    return -euclidean_distances(X, squared=True)


def brute_retrieval(S, y, ks, auprc=brute_auprc):
    """Per-query loop: AUPRC, and top-k by a stable sort on (-similarity, index)."""
    aps, recalls, precisions = [], [], []
    for query in range(len(y)):
        others = np.delete(np.arange(len(y)), query)
        is_positive = y[others] == y[query]
        if not is_positive.any():
            continue
        aps.append(auprc(is_positive, S[query, others]))
        ranked = sorted(others, key=lambda j: (-S[query, j], j))
        recalls.append([any(y[j] == y[query] for j in ranked[:k]) for k in ks])
        precisions.append([sum(y[j] == y[query] for j in ranked[:k]) / k for k in ks])
    return np.mean(aps), np.mean(recalls, axis=0), np.mean(precisions, axis=0)


def threshold_loop_roc_points(is_positive, scores):
    """(FPR, TPR) at (0, 0) and at each distinct score, by an explicit threshold loop."""
    points = [(0.0, 0.0)]
    for threshold in np.unique(scores)[::-1]:
        called = scores >= threshold
        points.append((np.mean(called[~is_positive]), np.mean(called[is_positive])))
    return points


def tpr_on_polyline(points, fpr):
    """The largest TPR of the ROC polyline (consecutive points joined) at ``fpr``."""
    best = -1.0
    for (f0, t0), (f1, t1) in zip(points[:-1], points[1:], strict=True):
        if f0 <= fpr <= f1:
            best = max(best, t1 if f1 == f0 else t0 + (fpr - f0) / (f1 - f0) * (t1 - t0))
    return best


def brute_tpr_at_fpr(is_positive, scores, fpr):
    return tpr_on_polyline(threshold_loop_roc_points(is_positive, scores), fpr)


def clustered(n_samples, n_features=5, n_classes=4, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(n_classes, size=n_samples)
    X = rng.normal(size=(n_samples, n_features)) + 1.5 * rng.normal(size=(n_classes, n_features))[y]
    return X, y


def tied_integer_data(n_samples=40, seed=0):
    """Small integer embeddings with duplicates: exact, heavily tied euclidean similarities."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-2, 3, size=(n_samples, 2)).astype(float)
    y = rng.integers(3, size=n_samples)
    return X, y


# ---------------------------------------------------------------- auprc_score


@pytest.mark.parametrize("seed", range(5))
def test_auprc_equals_sklearn_average_precision_without_ties(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=200)
    y[:2] = [0, 1]
    scores = rng.normal(size=200) + y
    assert auprc_score(y, scores) == pytest.approx(average_precision_score(y, scores), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_auprc_counts_ties_fully(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=60)
    y[0] = 1
    scores = rng.integers(4, size=60).astype(float)
    expected = brute_auprc(y == 1, scores)
    assert auprc_score(y, scores) == pytest.approx(expected, abs=1e-12)
    permutation = rng.permutation(60)
    assert auprc_score(y[permutation], scores[permutation]) == pytest.approx(expected, abs=1e-12)


def test_auprc_tie_example_differs_from_positive_first_order():
    # Tie of one positive and one negative at the top: precision 1/2, not 1.
    assert auprc_score([1, 0, 0], [1.0, 1.0, 0.0]) == 0.5


def test_auprc_degenerate_and_labels():
    assert auprc_score([1, 1, 1], [0.1, 0.5, 0.2]) == 1.0
    assert auprc_score([-1, 1, 1], [0.1, 0.5, 0.2]) == 1.0
    assert auprc_score([True, False], [0.9, 0.1]) == 1.0
    assert auprc_score(["cat", "dog", "cat"], [0.1, 0.9, 0.8], pos_label="dog") == 1.0
    with pytest.raises(ValueError, match="no positive"):
        auprc_score([0, 0, 0], [0.1, 0.5, 0.2])
    with pytest.raises(ValueError, match="no positive"):
        auprc_score(["a", "b"], [0.1, 0.5], pos_label="c")
    with pytest.raises(ValueError, match="pos_label"):
        auprc_score(["a", "b"], [0.1, 0.5])
    with pytest.raises(ValueError, match="pos_label"):
        auprc_score([0, 2], [0.1, 0.5])
    with pytest.raises(ValueError, match="binary"):
        auprc_score([0, 1, 2], [0.1, 0.5, 0.2])


@pytest.mark.parametrize(
    "y_true, y_score, message",
    [
        ([0, 1], [0.1, np.nan], "NaN"),
        ([0, 1], [0.1, np.inf], "infinity"),
        ([0, 1, 1], [0.1, 0.5], "inconsistent numbers of samples"),
        ([], [], "0 sample"),
        ([0, 1], [[0.1, 0.2], [0.3, 0.4]], "1-D"),
    ],
)
def test_binary_metrics_reject_bad_input(y_true, y_score, message):
    with pytest.raises(ValueError, match=message):
        auprc_score(y_true, y_score)
    with pytest.raises(ValueError, match=message):
        pointwise_roc_score(y_true, y_score, 0.5)


# ---------------------------------------------------------------- pointwise ROC


def sklearn_roc_reference(y, scores, fprs):
    """The polyline through the points of sklearn's roc_curve (all thresholds kept)."""
    curve_fpr, curve_tpr, _ = roc_curve(y, scores, drop_intermediate=False)
    points = list(zip(curve_fpr, curve_tpr, strict=True))
    return [tpr_on_polyline(points, fpr) for fpr in fprs]


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_pointwise_roc_matches_sklearn_and_threshold_loop(seed, tied):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=80)
    y[:2] = [0, 1]
    scores = rng.normal(size=80) + y
    if tied:
        scores = np.round(scores)
    fprs = np.r_[rng.uniform(0.001, 0.999, size=20), np.unique(roc_curve(y, scores)[0])[1:-1]]
    result = pointwise_roc_score(y, scores, fprs)
    np.testing.assert_allclose(result, sklearn_roc_reference(y, scores, fprs), atol=1e-12)
    brute = [brute_tpr_at_fpr(y == 1, scores, fpr) for fpr in fprs]
    np.testing.assert_allclose(result, brute, atol=1e-12)


def test_pointwise_roc_vertical_jump_and_diagonal_tie():
    # Scores 3 (two positives), 2 (positive, negative), 1 (negative): the curve goes
    # (0,0) -> (0, 2/3) vertically, then a diagonal to (1/2, 1), then to (1, 1).
    y, scores = [1, 1, 1, 0, 0], [3, 3, 2, 2, 1]
    assert pointwise_roc_score(y, scores, 0.25) == pytest.approx(2 / 3 + 0.5 * (1 / 3))
    assert pointwise_roc_score(y, scores, 0.5) == 1.0
    result = pointwise_roc_score(y, scores, [0.25, 0.75])
    assert isinstance(result, np.ndarray) and result.shape == (2,)
    assert isinstance(pointwise_roc_score(y, scores, 0.25), float)


@pytest.mark.parametrize("fpr", [0, 1, -0.1, 1.5, np.nan, [0.5, 1.0], [], [[0.5]]])
def test_pointwise_roc_rejects_fpr_outside_open_interval(fpr):
    with pytest.raises(ValueError, match="fpr"):
        pointwise_roc_score([0, 1], [0.1, 0.5], fpr)


def test_pointwise_roc_needs_both_classes():
    with pytest.raises(ValueError, match="no negative"):
        pointwise_roc_score([1, 1], [0.1, 0.5], 0.5)
    with pytest.raises(ValueError, match="no positive"):
        pointwise_roc_score([0, 0], [0.1, 0.5], 0.5)


def test_pair_scores_and_labels_match_pair_loop():
    rng = np.random.default_rng(0)
    S = rng.normal(size=(7, 7))
    y = np.array(["a", "b", "a", "c", "b", "a", "c"])
    scores, same = pair_scores_and_labels(S, y)
    pairs = [(i, j) for i in range(7) for j in range(i + 1, 7)]
    np.testing.assert_array_equal(scores, [S[i, j] for i, j in pairs])
    np.testing.assert_array_equal(same, [y[i] == y[j] for i, j in pairs])
    assert pairwise_roc_score(S, y, 0.3) == pytest.approx(
        brute_tpr_at_fpr(same, scores, 0.3), abs=1e-12
    )


def test_pair_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="square"):
        pair_scores_and_labels(np.zeros((3, 4)), [0, 1, 0])
    with pytest.raises(ValueError, match="inconsistent"):
        pair_scores_and_labels(np.zeros((3, 3)), [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        pair_scores_and_labels(np.full((2, 2), np.nan), [0, 1])
    # the messages are about the user's y, not the internal pair labels ("y_true has ...")
    with pytest.raises(ValueError, match="No class of y has two items: there is no positive"):
        pairwise_roc_score(np.eye(3), [0, 1, 2], 0.5)
    with pytest.raises(ValueError, match="y has only one class: there is no negative"):
        pairwise_roc_score(np.eye(3), [0, 0, 0], 0.5)


# ---------------------------------------------------------------- top-k selection


@pytest.mark.parametrize("seed", range(4))
def test_top_k_indices_is_a_stable_descending_sort(seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(4, size=(30, 12)).astype(float)
    scores[0, 3] = -np.inf
    expected = np.argsort(-scores, axis=1, kind="stable")
    for k in range(1, 13):
        np.testing.assert_array_equal(top_k_indices(scores, k), expected[:, :k])


@pytest.mark.parametrize("seed", range(4))
def test_weighted_sum_top_k_equals_a_full_sort_of_every_sum(seed):
    """Exact from the candidates of either part, ties included; few candidates force the rows
    the bound leaves unsettled to be summed in full."""
    rng = np.random.default_rng(seed)
    base = torch.tensor(rng.integers(6, size=(40, 50)), dtype=torch.float32)
    term = torch.tensor(rng.integers(4, size=(40, 50)) / 4, dtype=torch.float32)
    term[:, 7] = 0.75  # a column high in term only, below the top of base
    weights = (0.0, 0.5, 1.0, 3.0, 64.0)
    for n_candidates, k in [(2, 1), (3, 3), (8, 5), (64, 5), (1, 50)]:
        top = _weighted_sum_top_k(base, term, weights, k, n_candidates=n_candidates)
        for weight, (values, columns) in zip(weights, top, strict=True):
            sums = (base + term * weight).numpy()
            expected = np.argsort(-sums, axis=1, kind="stable")[:, :k]
            np.testing.assert_array_equal(columns.numpy(), expected)
            np.testing.assert_array_equal(
                values.numpy(), np.take_along_axis(sums, expected, axis=1)
            )


# ---------------------------------------------------------------- retrieval


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_retrieval_matches_sklearn_per_query_loop(metric):
    X, y = clustered(60)
    S = brute_similarity(X, metric)

    def sklearn_ap(is_positive, scores):
        return average_precision_score(is_positive, scores)

    ap, recall, precision = brute_retrieval(S, y, [1, 3, 10], auprc=sklearn_ap)
    assert mean_auprc_score(X, y, metric=metric) == pytest.approx(ap, abs=1e-9)
    np.testing.assert_allclose(recall_at_k_score(X, y, [1, 3, 10], metric=metric), recall)
    np.testing.assert_allclose(precision_at_k_score(X, y, [1, 3, 10], metric=metric), precision)


@pytest.mark.parametrize("seed", range(3))
def test_retrieval_with_exact_ties_matches_brute_force(seed):
    X, y = tied_integer_data(seed=seed)
    S = -euclidean_distances(X, squared=True)
    ap, recall, precision = brute_retrieval(S, y, [1, 2, 5, 39])
    scores = retrieval_scores(X, y, k=[1, 2, 5, 39], metric="euclidean", chunk_size=7)
    assert scores["mean_auprc"] == pytest.approx(ap, abs=1e-12)
    np.testing.assert_allclose([scores[f"recall@{k}"] for k in (1, 2, 5, 39)], recall)
    np.testing.assert_allclose([scores[f"precision@{k}"] for k in (1, 2, 5, 39)], precision)


def test_ties_in_k_nearest_are_broken_by_index():
    # The query at 0 has two items at distance 1: the one that comes first in X ranks first.
    X = np.array([[0.0], [-1.0], [1.0], [-1.2]])
    y = np.array(["a", "b", "a", "b"])
    assert recall_at_k_score(X, y, 1, metric="euclidean") == 0.75
    assert precision_at_k_score(X, y, 1, metric="euclidean") == 0.75
    swapped = [0, 2, 1, 3]
    assert recall_at_k_score(X[swapped], y[swapped], 1, metric="euclidean") == 1.0
    assert precision_at_k_score(X[swapped], y[swapped], 1, metric="euclidean") == 1.0


def test_retrieval_chunked_equals_unchunked():
    X, y = clustered(50, seed=3)
    reference = retrieval_scores(X, y, k=[1, 5], chunk_size=50)
    for chunk_size in (1, 7, None):
        assert retrieval_scores(X, y, k=[1, 5], chunk_size=chunk_size) == pytest.approx(reference)
    with config_context(working_memory=1e-4):  # a budget of ~100 bytes: one query per chunk
        assert retrieval_scores(X, y, k=[1, 5]) == pytest.approx(reference)


def test_retrieval_cosine_and_euclidean_differ_and_agree_on_the_sphere():
    X, y = clustered(40, seed=1)
    X[:, 0] *= np.linspace(0.1, 10, 40)  # norms matter for euclidean, not for cosine
    cosine = mean_auprc_score(X, y, metric="cosine")
    assert cosine != pytest.approx(mean_auprc_score(X, y, metric="euclidean"))
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert cosine == pytest.approx(mean_auprc_score(unit, y, metric="euclidean"), abs=1e-9)


def test_retrieval_callable_metric():
    X, y = clustered(30, seed=2)

    def dot(chunk, X_all):
        return chunk @ X_all.T

    S = X @ X.T
    ap, recall, _ = brute_retrieval(S, y, [3])
    assert mean_auprc_score(X, y, metric=dot, chunk_size=4) == pytest.approx(ap, abs=1e-9)
    assert recall_at_k_score(X, y, 3, metric=dot) == pytest.approx(recall[0])
    with pytest.raises(ValueError, match="shape"):
        mean_auprc_score(X, y, metric=lambda chunk, X_all: chunk @ chunk.T, chunk_size=4)
    with pytest.raises(ValueError, match="NaN"):
        mean_auprc_score(X, y, metric=lambda chunk, X_all: np.full((len(chunk), 30), np.nan))


def test_inputs_are_not_modified_and_may_be_read_only():
    X, y = clustered(20, seed=7)
    S = X @ X.T
    S.flags.writeable = False
    X.flags.writeable = False
    expected = mean_auprc_score(X.copy(), y, metric="euclidean")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = mean_auprc_score(X, y, metric=lambda chunk, X_all: S[: len(chunk)], chunk_size=20)
        assert top_k_recall_score(y, S[:, :4], 2) == top_k_recall_score(y, S[:, :4].copy(), 2)
    assert value == pytest.approx(mean_auprc_score(X, y, metric=lambda a, b: a @ b.T))
    assert expected == mean_auprc_score(X, y, metric="euclidean")
    np.testing.assert_array_equal(S, X @ X.T)


def test_retrieval_degenerate_classes():
    X, y = clustered(20, seed=4)
    scores = retrieval_scores(X, np.zeros(20), k=[1, 19])
    assert scores == {
        "mean_auprc": 1.0,
        "recall@1": 1.0,
        "precision@1": 1.0,
        "recall@19": 1.0,
        "precision@19": 1.0,
    }
    mixed = y.astype(object)
    mixed[0] = "alone"  # a class of one item, and labels of mixed types
    with pytest.warns(UserWarning, match="1 of 20 queries have no positive"):
        value = mean_auprc_score(X, mixed)
    assert value == pytest.approx(brute_retrieval(cosine_similarity(X), mixed, [1])[0])
    with pytest.raises(ValueError, match="every class has a single item"):
        mean_auprc_score(X, np.arange(20))


def test_retrieval_string_labels_equal_integer_labels():
    X, y = clustered(30, seed=5)
    names = np.array(["ant", "bee", "cat", "dog"])[y]
    assert retrieval_scores(X, names, k=[2]) == retrieval_scores(X, y, k=[2])


def test_retrieval_scores_without_k_and_without_average_precision():
    X, y = clustered(20)
    assert list(retrieval_scores(X, y, k=())) == ["mean_auprc"]
    assert list(retrieval_scores(X, y, k=3, average_precision=False)) == [
        "recall@3",
        "precision@3",
    ]


@pytest.mark.parametrize(
    "X, y, kwargs, error, message",
    [
        ([[0.0, 1.0], [np.nan, 1.0]], [0, 0], {}, ValueError, "NaN"),
        ([[0.0, 1.0], [np.inf, 1.0]], [0, 0], {}, ValueError, "infinity"),
        ([[0.0, 1.0], [1.0, 1.0]], [0, 0, 1], {}, ValueError, "inconsistent"),
        ([[0.0, 1.0]], [0], {}, ValueError, "minimum of 2"),
        (np.zeros((0, 2)), [], {}, ValueError, "0 sample"),
        ([[0.0, 0.0], [1.0, 1.0]], [0, 0], {}, ValueError, "all-zero"),
        ([[0.0, 1.0], [1.0, 1.0]], [0, 0], {"metric": "manhattan"}, ValueError, "metric"),
        ([[0.0, 1.0], [1.0, 1.0]], [0, 0], {"chunk_size": 0}, ValueError, "chunk_size"),
        ([[0.0, 1.0], [1.0, 1.0]], [0, 0], {"chunk_size": 1.5}, TypeError, "chunk_size"),
    ],
)
def test_retrieval_rejects_bad_input(X, y, kwargs, error, message):
    # (Values such as 1e200 are no longer an error: see tests/test_extremes.py.)
    for function in (mean_auprc_score, recall_at_k_score, precision_at_k_score):
        with pytest.raises(error, match=message):
            function(X, y, **kwargs)


@pytest.mark.parametrize(
    "k, error, message",
    [
        (0, ValueError, "k must be >= 1"),
        (4, ValueError, r"k=4 exceeds the number of other items \(n_samples - 1\) \(3\)"),
        ([1, 5], ValueError, "k=5 exceeds"),
        ([], ValueError, "empty"),
        (1.0, TypeError, "int"),
        (True, TypeError, "int"),
        (["1"], TypeError, "int"),
    ],
)
def test_retrieval_rejects_bad_k(k, error, message):
    X, y = np.eye(4), [0, 0, 1, 1]
    for function in (recall_at_k_score, precision_at_k_score):
        with pytest.raises(error, match=message):
            function(X, y, k)


def test_retrieval_k_list_equals_single_k():
    X, y = clustered(30, seed=6)
    values = recall_at_k_score(X, y, [5, 1, 3])
    assert isinstance(values, np.ndarray)
    for k, value in zip([5, 1, 3], values, strict=True):
        single = recall_at_k_score(X, y, np.int64(k))
        assert isinstance(single, float) and single == value


# ---------------------------------------------------------------- label metrics


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


# ---------------------------------------------------------------- torch backend, MAP@R, dask


def brute_query_statistics(S, y, ks):
    """Per query (NaN without a positive): sklearn AP, positives in the top k (stable sort on
    (-similarity, index)), R-precision and MAP@R as pytorch-metric-learning defines them."""
    n = len(y)
    ap, r_precision, map_at_r = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    in_top_k = np.zeros((n, len(ks)), dtype=int)
    for query in range(n):
        others = np.delete(np.arange(n), query)
        is_positive = y[others] == y[query]
        n_positives = int(is_positive.sum())
        if not n_positives:
            continue
        ap[query] = average_precision_score(is_positive, S[query, others])
        relevant = is_positive[np.lexsort((others, -S[query, others]))]
        in_top_k[query] = [relevant[:k].sum() for k in ks]
        top_r = relevant[:n_positives]
        r_precision[query] = top_r.mean()
        precision_at_i = np.cumsum(top_r) / np.arange(1, n_positives + 1)
        map_at_r[query] = np.sum(precision_at_i * top_r) / n_positives
    return ap, in_top_k, r_precision, map_at_r


def expected_scores(S, y, ks):
    ap, in_top_k, r_precision, map_at_r = brute_query_statistics(S, y, ks)
    has = ~np.isnan(ap)
    scores = {"mean_auprc": np.mean(ap[has])}
    for j, k in enumerate(ks):
        scores[f"recall@{k}"] = np.mean(in_top_k[has, j] > 0)
        scores[f"precision@{k}"] = np.mean(in_top_k[has, j] / k)
    scores["map@r"] = np.mean(map_at_r[has])
    scores["r_precision"] = np.mean(r_precision[has])
    return scores


@pytest.fixture(params=["grid", "sort", "tiled", "tiled-fine", "tiled-torch"])
def torch_path(request, monkeypatch):
    """The torch path's ways of ranking a block: counting on a grid, sorting rows, or counting
    tile by tile (CPU, float32) with tiny uneven tiles and blocks and a coarse grid (many items
    and ties share cells with several positives) or a fine one, in the fused numba loop (where
    numba is installed) or in torch operations."""
    from skrank.metrics import _ranks, _tiled_ranks, _torch_retrieval

    path = request.param
    monkeypatch.setattr(_ranks, "SORT_FRACTION", 10**9 if path == "sort" else 0)
    monkeypatch.setattr(_torch_retrieval, "TILED_CPU", path.startswith("tiled"))
    if path.startswith("tiled"):
        monkeypatch.setattr(_tiled_ranks, "TILE_ITEMS", 7)
        monkeypatch.setattr(_tiled_ranks, "TILE_QUERIES", 5)
        coarse = path != "tiled-fine"
        monkeypatch.setattr(_tiled_ranks, "MIN_CELLS", 4 if coarse else 64)
        monkeypatch.setattr(_tiled_ranks, "CELLS_PER_POSITIVE", 1 if coarse else 64)
        monkeypatch.setattr(_tiled_ranks, "USE_NUMBA", path != "tiled-torch")
        monkeypatch.setattr(_tiled_ranks, "NUMBA_MIN_PAIRS", 0)  # the fused loop at any size
    return path


@pytest.mark.parametrize("seed", range(4))
def test_torch_path_matches_brute_force_with_exact_ties(seed, torch_path):
    # Small integers: similarities exact in float32 and float64, and heavily tied.
    rng = np.random.default_rng(seed)
    X = rng.integers(-2, 3, size=(70, 3)).astype(float)
    y = rng.integers(4, size=70)
    y[0] = 9  # a class of one item: no positive
    S = -euclidean_distances(X, squared=True)
    ks = [1, 2, 5, 69]
    expected = expected_scores(S, y, ks)
    with pytest.warns(UserWarning, match="1 of 70 queries have no positive"):
        scores = retrieval_scores(
            X,
            y,
            k=ks,
            metric="euclidean",
            at_r=True,
            chunk_size=int(rng.integers(1, 30)),
            device="cpu",
        )
    assert scores.keys() == expected.keys()
    for key, value in expected.items():
        assert scores[key] == pytest.approx(value, abs=1e-12), key


@pytest.mark.parametrize("seed", range(3))
def test_numpy_path_matches_brute_force_with_exact_ties(seed):
    # device="numpy" without at_r runs the numpy code (_precision_at_positives, top_k_indices);
    # with at_r it runs the torch code in float64, so it is checked here on its own.
    X, y = tied_integer_data(n_samples=50, seed=seed)
    y[0] = 7  # a class of one item: no positive
    S = -euclidean_distances(X, squared=True)
    ks = [1, 3, 49]
    expected = expected_scores(S, y, ks)
    del expected["map@r"], expected["r_precision"]
    for chunk_size in (None, 1, 7):
        with pytest.warns(UserWarning, match="1 of 50 queries have no positive"):
            scores = retrieval_scores(
                X, y, k=ks, metric="euclidean", chunk_size=chunk_size, device="numpy"
            )
        assert scores == pytest.approx(expected, abs=1e-12, rel=0)
        np.testing.assert_allclose(
            query_auprc_scores(X, y, metric="euclidean", chunk_size=chunk_size, device="numpy"),
            brute_query_statistics(S, y, ks)[0],
            rtol=0,
            atol=1e-12,
        )


def test_torch_and_numpy_paths_are_identical_on_equal_similarities(torch_path):
    # Integer embeddings: the float32 and float64 similarities are the same numbers.
    X, y = tied_integer_data(n_samples=60, seed=5)
    kwargs = dict(k=[1, 4, 59], metric="euclidean", at_r=True)
    assert retrieval_scores(X, y, device="cpu", **kwargs) == retrieval_scores(
        X, y, device="numpy", **kwargs
    )
    # A callable metric: both paths rank its float64 values.
    X, y = clustered(70, seed=6)
    callable_kwargs = dict(k=[1, 5], metric=lambda Q, A: Q @ A.T, at_r=True)
    torch_scores = retrieval_scores(X, y, device="cpu", **callable_kwargs)
    numpy_scores = retrieval_scores(X, y, device="numpy", **callable_kwargs)
    assert torch_scores == pytest.approx(numpy_scores, abs=1e-12, rel=0)
    expected = expected_scores(X @ X.T, y, [1, 5])
    assert torch_scores == pytest.approx(expected, abs=1e-12, rel=0)
    np.testing.assert_allclose(
        query_auprc_scores(X, y, metric=lambda Q, A: Q @ A.T, device="cpu"),
        brute_query_statistics(X @ X.T, y, [1])[0],
        rtol=0,
        atol=1e-12,
    )


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_float32_torch_path_is_close_to_the_float64_numpy_path(metric, torch_path):
    # Continuous data: float32 similarities can swap or tie near-equal pairs, so the values
    # agree to about float32 precision, not exactly (see the user guide).
    X, y = clustered(120, n_classes=6, seed=8)
    kwargs = dict(k=[1, 3, 10], metric=metric, at_r=True)
    torch_scores = retrieval_scores(X, y, device="cpu", **kwargs)
    numpy_scores = retrieval_scores(X, y, device="numpy", **kwargs)
    assert torch_scores == pytest.approx(numpy_scores, abs=1e-6, rel=0)
    expected = expected_scores(brute_similarity(X, metric), y, [1, 3, 10])
    assert numpy_scores == pytest.approx(expected, abs=1e-12, rel=0)


def test_grid_is_exact_for_awkward_score_ranges(torch_path):
    # Huge offsets (float32 spacing coarser than the spread), and rows of equal scores.
    rng = np.random.default_rng(3)
    y = rng.integers(3, size=30)
    for X in (1e6 + rng.integers(0, 3, size=(30, 1)).astype(float), np.ones((30, 2))):
        S = -euclidean_distances(X, squared=True)
        kwargs = dict(
            k=[1, 7], at_r=True, metric=lambda Q, A: -euclidean_distances(Q, A, squared=True)
        )
        assert retrieval_scores(X, y, device="cpu", **kwargs) == pytest.approx(
            expected_scores(S, y, [1, 7]), abs=1e-12, rel=0
        )


def _float32_similarity(X, metric):
    """The float32 similarities of the torch path, where every product is exact (d <= 2)."""
    from skrank.metrics._retrieval import similarity_terms

    table, squared_norms = similarity_terms(X, metric)
    table = table.astype(np.float32)
    S = table @ table.T
    if squared_norms is not None:
        norms = squared_norms.astype(np.float32)
        S = S * np.float32(2) - norms[:, None] - norms[None, :]
    return S.astype(np.float64)


def test_float32_paths_are_exact_on_ties_and_awkward_scores(torch_path):
    # Scores in {-1, -0.0, 0, 1} (axis directions: ties everywhere, across tile borders), huge
    # offsets (float32 spacing coarser than the spread), rows of equal scores.
    rng = np.random.default_rng(4)
    axes = np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [2, 0], [0, -3]], dtype=float)
    cases = [
        (axes[rng.integers(6, size=60)], rng.integers(3, size=60), "cosine"),
        (
            1e6 + rng.integers(0, 3, size=(50, 1)).astype(float),
            rng.integers(3, size=50),
            "euclidean",
        ),
        (np.ones((40, 2)), rng.integers(4, size=40), "cosine"),
        (rng.integers(-3, 4, size=(50, 1)).astype(float), np.repeat([0, 1], 25), "euclidean"),
    ]
    for X, y, metric in cases:
        expected = expected_scores(_float32_similarity(X, metric), y, [1, 7])
        scores = retrieval_scores(X, y, k=[1, 7], metric=metric, at_r=True, device="cpu")
        assert scores == pytest.approx(expected, abs=1e-12, rel=0), metric


def test_the_fused_loop_is_loaded_once_the_work_repays_it(monkeypatch):
    # Loading numba costs about 0.7 s once per process: calls run the torch operations until
    # their pairs (this call's included) reach NUMBA_MIN_PAIRS, unless the loop is loaded
    # already; USE_NUMBA=False forbids it whatever the work.
    import sys

    from skrank.metrics import _ranks, _tiled_ranks, _torch_retrieval

    module = "skrank.metrics._tiled_kernel"
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(_tiled_ranks, "NUMBA_MIN_PAIRS", 250)
    monkeypatch.setattr(_tiled_ranks, "_pairs_without_numba", 0)
    assert [_tiled_ranks.numba_pays_off(10) for _ in range(3)] == [False, False, True]
    assert _tiled_ranks._pairs_without_numba == 200
    assert _tiled_ranks.numba_pays_off(16)  # 256 pairs in one call
    monkeypatch.setattr(_tiled_ranks, "USE_NUMBA", False)
    assert not _tiled_ranks.numba_pays_off(10**6)
    monkeypatch.setattr(_tiled_ranks, "USE_NUMBA", True)
    monkeypatch.setitem(sys.modules, module, object())
    assert _tiled_ranks.numba_pays_off(1)
    # The retrieval metrics decide once per call, and every block follows.
    monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(_torch_retrieval, "TILED_CPU", True)
    monkeypatch.setattr(_ranks, "SORT_FRACTION", 0)
    loads = []
    monkeypatch.setattr(_tiled_ranks, "_numba_kernels", lambda: loads.append(1))  # torch path
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(150, 4)), rng.integers(3, size=150)
    monkeypatch.setattr(_tiled_ranks, "NUMBA_MIN_PAIRS", 2 * 150**2)
    monkeypatch.setattr(_tiled_ranks, "_pairs_without_numba", 0)
    expected = mean_auprc_score(X, y, metric="cosine", device="cpu")
    assert not loads
    assert mean_auprc_score(X, y, metric="cosine", device="cpu") == expected
    assert loads


@pytest.mark.parametrize(
    ("use_numba", "shared_width"),
    [(True, 4), (False, 1), (False, 4)],
    ids=["numba", "torch-1", "torch-4"],
)
@pytest.mark.parametrize("cells_per_positive", [1, 64])
def test_tiled_ranks_equal_whole_row_ranks(
    use_numba, shared_width, cells_per_positive, monkeypatch
):
    # Scores rounded to a few values (ties within and across tiles of uneven widths), items in
    # a shuffled order: the tile-by-tile counts equal those of the whole rows. Without numba,
    # negatives in cells of up to ``shared_width`` positives are compared in one vector step.
    import torch

    from skrank.metrics import _ranks, _tiled_ranks

    monkeypatch.setattr(_tiled_ranks, "USE_NUMBA", use_numba)
    monkeypatch.setattr(_tiled_ranks, "SHARED_WIDTH", shared_width)
    monkeypatch.setattr(_tiled_ranks, "MIN_CELLS", 4)
    monkeypatch.setattr(_tiled_ranks, "CELLS_PER_POSITIVE", cells_per_positive)
    monkeypatch.setattr(_tiled_ranks, "TILE_ITEMS", 6)
    rng = np.random.default_rng(7)
    n_rows, n_class, n_items = 9, 17, 60
    scores = np.round(rng.normal(size=(n_rows, n_items)), 1).astype(np.float32)
    index = rng.permutation(n_items)  # item index of each column
    n_positives = rng.integers(1, n_class, size=n_rows)
    positive_columns = np.zeros((n_rows, n_class - 1), dtype=np.int64)
    for row in range(n_rows):  # positives among the class columns, by increasing item index
        chosen = rng.choice(n_class, size=n_positives[row], replace=False)
        chosen = chosen[np.argsort(index[chosen])]
        positive_columns[row, : len(chosen)] = chosen
        positive_columns[row, len(chosen) :] = chosen[0]
    class_scores = scores[:, :n_class].copy()
    is_positive = np.zeros((n_rows, n_class), dtype=bool)
    np.put_along_axis(is_positive, positive_columns, True, axis=1)
    class_scores[~is_positive] = -np.inf  # the query itself, and items of other classes...
    class_scores[:, ::5] = np.where(is_positive[:, ::5], class_scores[:, ::5], 0.5)  # ...or not
    tiles = [
        (torch.from_numpy(scores[:, start:stop].copy()), torch.from_numpy(index[start:stop]))
        for start, stop in ((17, 23), (23, 24), (24, 41), (41, 60))
    ]
    auprc, ranks = _tiled_ranks.tiled_positive_statistics(
        torch.from_numpy(class_scores.copy()),
        torch.from_numpy(positive_columns),
        torch.from_numpy(n_positives),
        iter(tiles),
        torch.from_numpy(index[:n_class]),
    )
    whole = np.empty_like(scores)  # the rows in item order
    whole[:, index] = np.concatenate([class_scores, scores[:, n_class:]], axis=1)
    expected_auprc, expected_ranks = _ranks.positive_statistics(
        torch.from_numpy(whole),
        torch.from_numpy(index[positive_columns]),
        torch.from_numpy(n_positives),
    )
    np.testing.assert_array_equal(ranks.numpy(), expected_ranks.numpy())
    np.testing.assert_allclose(auprc.numpy(), expected_auprc.numpy(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("shared_width", [1, 3, 4])
def test_grid_tables_without_numba_equal_their_definition(shared_width, monkeypatch):
    # Rows of tied, crowded and lone positives on a coarse grid: the lookup table (bin of the
    # positives in lower cells, + n_bins in a cell holding positives, + 2 n_bins beyond
    # SHARED_WIDTH of them) and the cell-mates' tables, against loops over their definition.
    import torch

    from skrank.metrics import _tiled_ranks
    from skrank.metrics._ranks import Workspace

    monkeypatch.setattr(_tiled_ranks, "SHARED_WIDTH", shared_width)
    monkeypatch.setattr(_tiled_ranks, "MIN_CELLS", 8)
    monkeypatch.setattr(_tiled_ranks, "CELLS_PER_POSITIVE", 1)
    rng = np.random.default_rng(11)
    n_rows, width = 7, 12
    n_positives = rng.integers(1, width + 1, size=n_rows)
    n_positives[0], n_positives[1] = width, 1
    thresholds = np.sort(np.round(rng.normal(size=(n_rows, width)), 1), axis=1)
    thresholds[2, :5] = 0.5  # a crowded cell
    thresholds[np.arange(width) >= n_positives[:, None]] = np.inf
    thresholds = np.sort(thresholds, axis=1).astype(np.float32)
    index = rng.integers(0, 1000, size=(n_rows, width))
    grid = _tiled_ranks._Grid(
        torch.from_numpy(thresholds),
        torch.from_numpy(n_positives),
        torch.from_numpy(index),
        Workspace(),
        use_numba=False,
    )
    n_cells = len(grid.lookup) // n_rows - 1
    cells = grid.cells(torch.from_numpy(thresholds), torch.empty(n_rows, width), None).numpy()
    lookup = grid.lookup.numpy()
    start = 0
    for row in range(n_rows):
        row_cells = list(cells[row, : n_positives[row]])
        for flat in range(row * (n_cells + 1) + 1, (row + 1) * (n_cells + 1)):
            in_cell = row_cells.count(flat)
            expected = start + row + 1 + sum(cell < flat for cell in row_cells)
            if in_cell:
                expected += grid.n_bins * (1 + (in_cell > shared_width))
            assert lookup[flat] == expected, (row, flat)
        for j in range(n_positives[row]):
            if j and row_cells[j] == row_cells[j - 1]:
                continue  # only a cell's first positive's bin is looked up
            bin_ = start + row + 1 + j
            assert grid.positive_of_bin(np.array([bin_]))[0] == start + j
            mates = np.append(thresholds[row, j:], [np.inf] * shared_width)[:shared_width]
            np.testing.assert_array_equal(grid.cell_scores[:, bin_], mates)
            assert grid.more[start + j] == row_cells.count(row_cells[j]) - 1
        start += n_positives[row]


def test_stable_argsort_rows_equals_torch_stable_sort():
    # Ties, signed zeros (equal scores), infinities, subnormals and huge values.
    import torch

    from skrank.metrics._tiled_ranks import stable_argsort_rows

    rng = np.random.default_rng(3)
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3e38, -3e38, 1.5, -1.5], dtype=np.float32
    )
    scores = rng.choice(special, size=(40, 33))
    scores[:20] = np.round(rng.normal(size=(20, 33)), 1)
    scores = torch.from_numpy(scores.astype(np.float32))
    expected = torch.sort(scores, dim=1, stable=True).indices
    np.testing.assert_array_equal(stable_argsort_rows(scores).numpy(), expected.numpy())


def test_positives_scored_at_least_equals_searchsorted():
    import torch

    from skrank.metrics._ranks import positives_scored_at_least

    rng = np.random.default_rng(4)
    thresholds = np.sort(np.round(rng.normal(size=(30, 12)), 0), axis=1)
    thresholds[:, -3:] = np.inf  # padding
    thresholds[0] = -0.0
    thresholds[0, ::2] = 0.0  # equal scores
    thresholds = torch.from_numpy(thresholds)
    n_positives = torch.full((30,), 9)
    expected = n_positives[:, None] - torch.searchsorted(thresholds, thresholds)
    result = positives_scored_at_least(thresholds, n_positives)
    np.testing.assert_array_equal(result.numpy(), expected.numpy())


@pytest.mark.parametrize("width", [1, 2, 3, 4, 8])
def test_count_true(width):
    from skrank.metrics._tiled_ranks import _count_true

    mask = np.random.default_rng(width).random((width, 50)) < 0.5
    mask[:, 0], mask[:, 1] = True, False
    np.testing.assert_array_equal(_count_true(mask), mask.sum(axis=0))


@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 1001])
def test_flat_at_least_equals_flatnonzero(n):
    from skrank.metrics._tiled_ranks import _flat_at_least

    rng = np.random.default_rng(n)
    n_words = -(-n // 8)
    masks = np.empty(8 * n_words + 5, dtype=bool), np.empty(n_words, dtype=bool)
    for density in (0.0, 0.03, 0.5, 1.0):
        values = np.where(rng.random(n) < density, 10, rng.integers(0, 10, n)).astype(np.int32)
        values[-1:] = 10 if density > 0.4 else values[-1:]  # a hit in the last, partial word
        expected = np.flatnonzero(values >= 10)
        np.testing.assert_array_equal(_flat_at_least(values, 10, masks), expected)
        for mask in masks:  # stale hits past the values in the reused masks must not count
            mask[:] = True


@pytest.mark.parametrize(
    "values", [[1, 1, 1, 4, 5, 5, 9], [3], [2, 2], [0, 1, 2], [7, 7, 8, 8, 8, 8, 9, 9]]
)
def test_run_starts_and_remainders(values):
    from skrank.metrics._tiled_ranks import _run_remainders, _run_starts

    values = np.array(values)
    starts = _run_starts(values)
    n = len(values)
    expected_starts = [i for i in range(n) if i == 0 or values[i] != values[i - 1]]
    np.testing.assert_array_equal(starts, expected_starts)
    expected = [np.sum(values[i + 1 :] == values[i]) for i in range(n)]
    np.testing.assert_array_equal(_run_remainders(starts, n), expected)
    out = np.full(n + 3, -5)
    _run_remainders(starts, n, out=out[:n])
    np.testing.assert_array_equal(out, expected + [-5] * 3)


def test_map_at_r_and_r_precision_equal_pytorch_metric_learning():
    accuracy_calculator = pytest.importorskip("pytorch_metric_learning.utils.accuracy_calculator")
    import torch

    X, y = clustered(150, n_features=8, n_classes=6, seed=2)
    X = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
    calculator = accuracy_calculator.AccuracyCalculator(
        include=("mean_average_precision_at_r", "r_precision", "mean_average_precision"),
        k=None,
        device=torch.device("cpu"),
    )
    reference = calculator.get_accuracy(X, y)
    scores = retrieval_scores(X, y, k=[], at_r=True, device="cpu")
    assert scores["map@r"] == pytest.approx(reference["mean_average_precision_at_r"], abs=1e-6)
    assert scores["r_precision"] == pytest.approx(reference["r_precision"], abs=1e-6)
    assert scores["mean_auprc"] == pytest.approx(reference["mean_average_precision"], abs=1e-6)
    assert map_at_r_score(X, y) == scores["map@r"]
    assert r_precision_score(X, y) == scores["r_precision"]


def test_query_auprc_scores_are_the_terms_of_the_mean():
    X, y = clustered(50, seed=9)
    y[3] = 7  # alone in its class
    per_query = query_auprc_scores(X, y, metric="euclidean")
    S = brute_similarity(X, "euclidean")
    np.testing.assert_allclose(per_query, brute_query_statistics(S, y, [1])[0], atol=1e-6)
    assert np.isnan(per_query[3])
    with pytest.warns(UserWarning):
        assert mean_auprc_score(X, y, metric="euclidean") == pytest.approx(np.nanmean(per_query))


def test_dask_array_equals_numpy_array():
    da = pytest.importorskip("dask.array")
    X, y = clustered(90, seed=10)
    chunked = da.from_array(X, chunks=((7, 40, 1, 42), (3, 2)))
    for device in ("cpu", "numpy"):
        kwargs = dict(k=[1, 5], metric="cosine", at_r=True, device=device)
        assert retrieval_scores(chunked, y, **kwargs) == retrieval_scores(X, y, **kwargs)
    assert mean_auprc_score(chunked, y) == mean_auprc_score(X, y)


def test_verbose_shows_a_progress_bar(capsys):
    X, y = clustered(30, seed=11)
    for device in ("cpu", "numpy"):
        mean_auprc_score(X, y, device=device, verbose=True, chunk_size=10)
        assert "retrieval metrics" in capsys.readouterr().err
    mean_auprc_score(X, y, device="cpu")
    assert "retrieval metrics" not in capsys.readouterr().err


def test_block_that_cannot_fit_raises_memory_error(monkeypatch):
    from skrank.metrics import _torch_retrieval

    X, y = clustered(40, seed=12)
    monkeypatch.setattr(_torch_retrieval, "_available_bytes", lambda device: 1000)
    with pytest.raises(MemoryError, match="smaller chunk_size.*working_memory"):
        mean_auprc_score(X, y, device="cpu", chunk_size=40)


@pytest.mark.parametrize("device", ["gpu", "cuda:banana", 3.5])
def test_bad_device_is_rejected(device):
    X, y = clustered(20, seed=13)
    with pytest.raises(ValueError, match="device="):
        mean_auprc_score(X, y, device=device)


def test_concurrent_cpu_evaluations_agree_and_restore_torch_thread_count(monkeypatch):
    # The tiled CPU path lowers torch's process-wide thread count while it runs. A second call
    # made while a first one is ranking (a threaded grid search) must give the serial result,
    # and the count must be what it was once both are done: without serialisation the second
    # call read the lowered count, ranked on its own thread and restored that count last, and
    # every thread started afterwards ran torch on one thread.
    import threading

    import torch

    from skrank.metrics import _tiled_ranks

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8)).astype(np.float32)  # one block of queries per call
    y = np.arange(60) % 20  # classes of 3 items, under n / 8: the tiled path
    expected = mean_auprc_score(X, y, device="cpu")
    count_block = _tiled_ranks.tiled_positive_statistics
    first_is_ranking, second_is_ranking = threading.Event(), threading.Event()
    first_is_done = threading.Event()
    results = []

    def evaluate():
        results.append(mean_auprc_score(X, y, device="cpu"))

    first, second = threading.Thread(target=evaluate), threading.Thread(target=evaluate)

    def observed_count_block(*args):
        if threading.current_thread() is second:
            second_is_ranking.set()
            first_is_done.wait(timeout=5.0)
        else:
            first_is_ranking.set()
            second_is_ranking.wait(timeout=1.0)  # times out when the calls are serialised
        return count_block(*args)

    monkeypatch.setattr(_tiled_ranks, "tiled_positive_statistics", observed_count_block)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        first.start()
        assert first_is_ranking.wait(timeout=30)
        second.start()
        first.join()
        first_is_done.set()
        second.join()
        counts = []  # as the main thread and a new thread see it (OpenMP keeps one per thread)
        reader = threading.Thread(target=lambda: counts.append(torch.get_num_threads()))
        reader.start()
        reader.join()
        assert [torch.get_num_threads(), *counts] == [2, 2]
    finally:
        torch.set_num_threads(before)
    assert results == [expected, expected]
