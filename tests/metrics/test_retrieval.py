"""Retrieval metrics (``skrank.metrics._retrieval``, and the torch path of
``_torch_retrieval``) against brute-force references (explicit loops, scikit-learn)."""

import warnings

import numpy as np
import pytest
import torch
from helpers import brute_auprc
from sklearn import config_context
from sklearn.metrics import average_precision_score
from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances

from skrank.metrics import (
    map_at_r_score,
    mean_auprc_score,
    precision_at_k_score,
    query_auprc_scores,
    r_precision_score,
    recall_at_k_score,
    retrieval_scores,
    top_k_recall_score,
)

# ---------------------------------------------------------------- brute-force references


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


def test_map_at_r_and_r_precision_equal_pytorch_metric_learning():
    accuracy_calculator = pytest.importorskip("pytorch_metric_learning.utils.accuracy_calculator")

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
