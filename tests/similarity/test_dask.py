"""Fits of the pair-based learners on dask arrays: equal to the in-memory fits, bounded memory."""

import sys
import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn import clone, config_context

from skrank import MMC, PointwiseROCSimilarity
from skrank.similarity._dask import import_dask, is_dask_array

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

# Uneven row chunks, one of a single row.
CHUNKS = (400, 1, 300, 498, 1)


def _data(n=1200, d=6, n_classes=4, offset=3.0, seed=0):
    rng = np.random.RandomState(seed)
    y = rng.randint(n_classes, size=n)
    scales = rng.uniform(0.2, 2.0, d)
    X = offset + rng.normal(size=(n_classes, d))[y] + rng.normal(size=(n, d)) * scales
    return X, y


def _assert_same_fit(expected, actual, names, atol=1e-10):
    for name in names:
        want, got = getattr(expected, name), getattr(actual, name)
        if want is None:
            assert got is None, name
        elif isinstance(want, tuple):
            assert want == got, name
        elif np.asarray(want).dtype.kind in "biuf":
            np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


ROC_ATTRIBUTES = [
    "A_", "P_", "N_", "alpha_", "beta_", "lambda_", "gamma_", "active_constraints_",
    "positive_risk_", "negative_risk_", "threshold_", "alpha_levels_", "alpha_scores_",
    "input_mean_", "input_transform_", "item_classes_", "n_features_in_", "solver_",
]  # fmt: skip


@pytest.mark.parametrize(
    "params",
    [
        {},  # alpha="auto": the held-out split and its statistics in the same pass
        {"alpha": 0.49, "identity_weight": 0.0},
        {"alpha": 0.49, "negatives": "pairs", "n_samples": 500},
        {"negatives": "tuples", "n_samples": 300},
        {"preprocessing": "whiten"},
        {"alpha": 0.49, "preprocessing": "standardize"},
        {"alpha": 0.6, "preprocessing": "center", "normalize": False},
    ],
)
def test_pointwise_roc_on_dask_equals_in_memory_fit(params):
    X, y = _data()
    chunked = da.from_array(X, chunks=(CHUNKS, 3))  # columns are rechunked to one block
    expected = PointwiseROCSimilarity(random_state=0, **params).fit(X, y)
    actual = PointwiseROCSimilarity(random_state=0, **params).fit(chunked, y)
    _assert_same_fit(expected, actual, ROC_ATTRIBUTES)
    stats, dask_stats = expected.pair_statistics_, actual.pair_statistics_
    np.testing.assert_array_equal(stats.class_counts_, dask_stats.class_counts_)
    np.testing.assert_allclose(dask_stats.gram_, stats.gram_, rtol=0, atol=1e-10)
    # the reservoir kept for partial_fit holds the same items: the stream continues alike
    np.testing.assert_allclose(actual._reservoir.items, expected._reservoir.items, atol=1e-12)
    more_X, more_y = _data(n=300, seed=1)
    if params.get("preprocessing", "none") == "none" and "negatives" not in params:
        expected.partial_fit(more_X, more_y)
        actual.partial_fit(more_X, more_y)
        _assert_same_fit(expected, actual, ["A_", "threshold_", "alpha_"])


def test_pointwise_roc_dask_labels_and_single_row_chunks():
    X, y = _data(n=200)
    labels = np.array(["ant", "bee", "cat", "dog"])[y]
    expected = PointwiseROCSimilarity(alpha=0.49, random_state=0).fit(X, labels)
    actual = PointwiseROCSimilarity(alpha=0.49, random_state=0).fit(
        da.from_array(X, chunks=(1, 6)), da.from_array(labels, chunks=50)
    )
    _assert_same_fit(expected, actual, ["A_", "threshold_", "item_classes_"])


def test_dask_fit_equals_successive_partial_fit_over_its_blocks():
    X, y = _data(n=900)
    chunked = da.from_array(X, chunks=((400, 1, 499), 6))
    on_dask = PointwiseROCSimilarity(alpha=0.49, random_state=0).fit(chunked, y)
    streamed = PointwiseROCSimilarity(alpha=0.49, random_state=0)
    for block, rows in zip(chunked.blocks, np.split(np.arange(900), [400, 401]), strict=True):
        streamed.partial_fit(block.compute(), y[rows])
    np.testing.assert_allclose(streamed.A_, on_dask.A_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        streamed.pair_statistics_.gram_, on_dask.pair_statistics_.gram_, rtol=0, atol=1e-10
    )


@pytest.mark.parametrize(
    "params",
    [
        {"negatives": "pairs", "n_samples": 500},
        {"negatives": "tuples", "n_samples": 200, "init": "covariance"},
        {"negatives": "pairs", "n_samples": 300, "diagonal": True, "init": "covariance"},
        {"negatives": "tuples", "n_samples": 100, "scatter_ridge": 1e-8, "min_rank": None},
    ],
)
def test_mmc_on_dask_equals_in_memory_fit(params):
    X, y = _data()
    expected = MMC(random_state=0, **params).fit(X, y)
    actual = MMC(random_state=0, **params).fit(da.from_array(X, chunks=(CHUNKS, 6)), y)
    # Components are eigenvectors: compare the metric, unique where they are not.
    np.testing.assert_allclose(
        actual.get_mahalanobis_matrix(), expected.get_mahalanobis_matrix(), rtol=0, atol=1e-10
    )
    np.testing.assert_allclose(actual.objective_, expected.objective_, rtol=0, atol=1e-10)
    assert actual.n_iter_ == expected.n_iter_
    assert actual.converged_ == expected.converged_


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_mmc_on_dask_at_an_extreme_scale_equals_the_fit_at_scale_one(scale):
    # As in memory: MMC is scale-invariant, and the dask fit rescales by a power of two first,
    # so that the scatters (sums of x x^T at 1e400 or 1e-400) neither overflow nor underflow.
    X, y = _data(n=300)
    params = {"negatives": "pairs", "n_samples": 300, "random_state": 0}
    expected = MMC(**params).fit(X, y)
    actual = MMC(**params).fit(da.from_array(X * scale, chunks=((100, 1, 150, 49), 6)), y)
    # The metric up to the scale: the Gram matrices of the mapped items (rotation-invariant).
    Z_expected, Z_actual = expected.transform(X), actual.transform(X * scale)
    np.testing.assert_allclose(Z_actual @ Z_actual.T, Z_expected @ Z_expected.T, atol=1e-8)
    np.testing.assert_allclose(actual.objective_, expected.objective_, rtol=1e-8)
    assert actual.n_iter_ == expected.n_iter_


def test_mmc_on_dask_refuses_all_negative_pairs():
    X, y = _data(n=50)
    with pytest.raises(ValueError, match='negatives="pairs" or "tuples"'):
        MMC(negatives="all").fit(da.from_array(X, chunks=10), y)


def test_mmc_defaults_on_dask_sample_pairs_as_the_in_memory_fit():
    X, y = _data(n=80)
    on_dask = MMC(random_state=0).fit(da.from_array(X, chunks=25), y)
    in_memory = MMC(negatives="pairs", n_samples=80, random_state=0).fit(X, y)
    np.testing.assert_allclose(on_dask.components_, in_memory.components_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(on_dask.objective_, in_memory.objective_, rtol=1e-10)


def test_partial_fit_refuses_a_dask_array():
    X, y = _data(n=50)
    with pytest.raises(TypeError, match="X.blocks"):
        PointwiseROCSimilarity(alpha=0.5).partial_fit(da.from_array(X, chunks=10), y)


def test_dask_input_validation():
    X, y = _data(n=50)
    model = PointwiseROCSimilarity(alpha=0.49)
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        model.fit(da.from_array(X, chunks=10)[da.from_array(y, chunks=10) > 0], y[y > 0])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        model.fit(da.from_array(X, chunks=10), y[:-1])
    X_nan = X.copy()
    X_nan[33, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(da.from_array(X_nan, chunks=10), y)
    model.fit(da.from_array(X, chunks=10), y)
    assert model.n_features_in_ == 6 and not hasattr(model, "feature_names_in_")


@pytest.mark.parametrize(
    "scheduler", ["synchronous", "threads", pytest.param("processes", marks=pytest.mark.slow)]
)
def test_dask_schedulers_give_the_same_fit(scheduler):
    """Every task (block statistics, merges, row reads) runs on the chosen scheduler; with
    processes, each is pickled to a worker process (slow: the workers import skrank)."""
    X, y = _data(n=600)
    expected = PointwiseROCSimilarity(alpha=0.49, random_state=0).fit(X, y)
    with dask.config.set(scheduler=scheduler, num_workers=1 if scheduler == "processes" else 2):
        actual = PointwiseROCSimilarity(alpha=0.49, random_state=0).fit(
            da.from_array(X, chunks=((100, 1, 499), 6)), y
        )
    _assert_same_fit(expected, actual, ["A_", "threshold_"])


def test_dask_distributed_client():
    distributed = pytest.importorskip("distributed")
    X, y = _data(n=600)
    expected = MMC(negatives="tuples", n_samples=100, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the local cluster's own deprecation notes
        with distributed.Client(processes=False, n_workers=1, threads_per_worker=2):
            actual = MMC(negatives="tuples", n_samples=100, random_state=0).fit(
                da.from_array(X, chunks=((100, 1, 499), 6)), y
            )
    np.testing.assert_allclose(
        actual.get_mahalanobis_matrix(), expected.get_mahalanobis_matrix(), atol=1e-10
    )


def test_missing_dask_raises_an_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r'pip install "\.\[dask\]"'):
        import_dask("Fitting on a dask array")
    monkeypatch.setitem(sys.modules, "dask.array", None)
    assert not is_dask_array(np.zeros((2, 2)))


def _memmapped_classes(path, n, d, n_classes, seed=0):
    """Class-structured items written to a file by parts: never whole in memory."""
    rng = np.random.RandomState(seed)
    y = rng.randint(n_classes, size=n)
    centres = rng.normal(size=(n_classes, d))
    X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
    for start in range(0, n, 4096):
        rows = slice(start, start + 4096)
        X[rows] = centres[y[rows]] + rng.normal(size=(X[rows].shape[0], d))
    X.flush()
    return np.load(path, mmap_mode="r"), y


def test_fit_of_an_input_larger_than_the_memory_cap_stays_under_it(tmp_path, monkeypatch):
    """The traced peak (every NumPy allocation) of the fits of an input 4x the cap stays under
    the cap; the input is a file read by dask block by block (its pages are the OS's, like any
    data on disk). The cap also bounds the pair chunks, through working_memory.

    The threshold is calibrated on 10,000 sampled negative pairs instead of 250,000: their rows
    are read in chunks bounded by working_memory, one pass over the file per chunk, and the
    250,000 pairs' own arrays (10 MB of indices, weights and scores) do not depend on n."""
    monkeypatch.setattr("skrank.similarity._pair_scores.CALIBRATION_PAIRS", 10_000)
    n, d = 80_000, 64
    X, y = _memmapped_classes(tmp_path / "X.npy", n, d, n_classes=10)
    cap = X.nbytes // 4  # 10 MiB
    chunked = da.from_array(X, chunks=(2_000, d))
    models = [
        PointwiseROCSimilarity(alpha=0.49, random_state=0),
        MMC(negatives="pairs", n_samples=1_000, random_state=0),
    ]
    small_X, small_y = _data(n=300, d=d)
    for model in models:  # warm-up: modules imported on first use are not data
        clone(model).fit(da.from_array(small_X, chunks=100), small_y)
    for model in models:
        with (
            dask.config.set(scheduler="threads", num_workers=2),
            config_context(working_memory=cap / 4 / 2**20),
        ):
            tracemalloc.start()
            try:
                model.fit(chunked, y)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        assert peak < cap, (type(model).__name__, peak / 2**20, cap / 2**20)
    # and the fit is the in-memory one
    expected = PointwiseROCSimilarity(alpha=0.49, random_state=0).fit(np.asarray(X), y)
    np.testing.assert_allclose(models[0].A_, expected.A_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(models[0].threshold_, expected.threshold_, rtol=0, atol=1e-10)
