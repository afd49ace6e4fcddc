"""SNMClassifier's "auto" settings: the one function that resolves them from the data's shape,
checked directly, and the fitted attributes that hold what it resolved."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from skrank import SNMClassifier
from skrank.multilabel import RowSparseOptimizer, _label_search, _settings
from skrank.multilabel._settings import (
    TrainingData,
    adagrad_label_rate,
    auto_n_components,
    describe_training_data,
    epoch_seconds,
    label_reads_per_epoch,
    principal_seconds,
    resolve_settings,
)
from skrank.utils._deprecation import resolve_deprecated_parameters

# A Bibtex-shaped fit: 4,392 training rows of 1,836 counts, 159 labels.
BIBTEX = TrainingData(
    n_rows=4392,
    n_features=1836,
    n_labels=159,
    nnz=300_000,
    sparse=True,
    counts=True,
    nonnegative=True,
    validated=True,
    batch_size=256,
)


def resolve(data=BIBTEX, **parameters):
    """:func:`resolve_settings` of an SNMClassifier with ``parameters`` on ``data``, as its
    fit calls it (the deprecated parameters' values in effect included)."""
    estimator = SNMClassifier(**parameters)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        deprecated = resolve_deprecated_parameters(estimator)
    return resolve_settings({**estimator.get_params(deep=False), **deprecated}, data)


def test_input_weighting_reweights_counts_only():
    assert resolve().input_normalization == "tfidf"
    tfidf_rows = BIBTEX._replace(counts=False)  # already weighted: read as given
    assert resolve(tfidf_rows).input_normalization is None
    assert resolve(BIBTEX._replace(sparse=False)).input_normalization is None
    assert resolve(hidden_layer_sizes=(32,)).input_normalization is None
    assert resolve(input_normalization="l2").input_normalization == "l2"
    negative = BIBTEX._replace(counts=False, nonnegative=False)
    with pytest.raises(ValueError, match="needs non-negative features"):
        resolve(negative, input_normalization="tfidf")


def test_describe_training_data_reads_counts_and_signs():
    counts = sp.csr_matrix(np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]]))
    data = describe_training_data(counts, n_rows=1, n_labels=4, validated=True, batch_size=8)
    assert data == TrainingData(1, 3, 4, 2, True, True, True, True, 8)  # nnz of 1 row of 2
    weighted = counts.multiply(0.5).tocsr()
    assert not describe_training_data(weighted, 2, 4, False, 8).counts
    dense = np.array([[1.0, -1.0]])
    described = describe_training_data(dense, 1, 2, False, 8)
    assert (described.sparse, described.counts, described.nonnegative) == (False, False, False)


def test_sparse_input_layer_beyond_a_width():
    wide = BIBTEX._replace(n_features=_settings.SPARSE_INPUT_MIN_FEATURES + 1)
    assert not resolve().sparse_input and resolve(wide).sparse_input
    assert not resolve(wide._replace(sparse=False)).sparse_input


def test_the_sparse_input_layer_trains_by_sgd_without_dropout():
    wide = BIBTEX._replace(n_features=_settings.SPARSE_INPUT_MIN_FEATURES + 1, counts=False)
    settings = resolve(wide, batch_size=128)
    assert settings.input_optimizer == "sgd"
    assert settings.input_learning_rate == _settings.SPARSE_INPUT_SGD_RATE * 256  # data's batch
    assert settings.input_dropout == 0.0
    assert resolve(wide, input_dropout=0.1).input_dropout == 0.1
    dense = resolve(learning_rate=0.002)  # Bibtex's 1,836 features: a dense input layer
    assert (dense.input_optimizer, dense.input_learning_rate) == (None, None)
    assert dense.input_dropout == _settings.DENSE_INPUT_DROPOUT
    adagrad = SNMClassifier(input_optimizer="rowwise_adagrad", learning_rate=0.002)
    estimator = SNMClassifier(input_learning_rate=0.5, input_optimizer="sparse_adam")
    with pytest.warns(FutureWarning) as caught:
        deprecated = resolve_deprecated_parameters(estimator)
        adagrad_deprecated = resolve_deprecated_parameters(adagrad)
    assert {str(w.message).split("=")[0] for w in caught} == {
        "input_learning_rate",
        "input_optimizer",
    }
    given = resolve_settings({**estimator.get_params(deep=False), **deprecated}, wide)
    assert (given.input_optimizer, given.input_learning_rate) == ("sparse_adam", 0.5)
    by_rate = resolve_settings({**adagrad.get_params(deep=False), **adagrad_deprecated}, wide)
    assert by_rate.input_learning_rate == _settings.SPARSE_INPUT_ADAGRAD_FACTOR * 0.002


def test_negative_weights_and_their_count():
    for n_negatives, top_k in ((200, 16), (64, 8), (7, 1)):
        settings = resolve(BIBTEX._replace(n_labels=1000), n_negatives=n_negatives)
        expected = np.r_[np.full(top_k, 1 / top_k), np.zeros(n_negatives - top_k)]
        np.testing.assert_allclose(settings.negative_weights, expected)
    assert resolve().n_negatives == 158  # "auto": every other label of 159
    assert resolve(BIBTEX._replace(n_labels=5000)).n_negatives == 1024
    with pytest.warns(UserWarning, match="n_negatives=2000 exceeds the 158 negative labels"):
        assert resolve(n_negatives=2000).n_negatives == 158
    with pytest.raises(ValueError, match="top_k_negatives=9 exceeds n_negatives=8"):
        resolve(n_negatives=8, top_k_negatives=9)


def test_ramp_surrogate_trains_with_powl_and_spread_weights_only():
    assert resolve(surrogate="ramp", loss="powl", negative_weights="uniform")
    for loss, weights, why in (
        ("bowl", "uniform", "BOWL's errors"),
        ("powl", "topk", "hardest sampled negatives"),
    ):
        with pytest.raises(ValueError, match=why):
            resolve(surrogate="ramp", loss=loss, negative_weights=weights)


def test_adagrad_label_rate_moves_rarely_read_rows_as_far_an_epoch():
    rate, reference = _settings.LABEL_ADAGRAD_RATE, _settings.LABEL_REFERENCE_READS
    assert adagrad_label_rate(reference) == rate
    assert adagrad_label_rate(100 * reference) == rate  # never below the base
    for reads in (0.1, 1.0, reference / 2):
        # Adagrad moves a row by about rate * sqrt(reads): the reference's movement.
        assert adagrad_label_rate(reads) * np.sqrt(reads) == pytest.approx(
            rate * np.sqrt(reference)
        )


def test_label_optimizer_and_rate_follow_the_reads_of_a_label_row():
    # Bibtex: 4,392 rows, 159 labels, 158 negatives a step: rows read often.
    assert label_reads_per_epoch(4392, 159, 158, 256) > _settings.LABEL_REFERENCE_READS
    settings = resolve()
    assert (settings.label_optimizer, settings.label_learning_rate) == ("adagrad", 0.005)
    # 600 labels, 64 sampled a step of 64 rows: each row read about 4 times an epoch.
    few_reads = TrainingData(600, 8, 600, 4800, False, False, False, False, 64)
    reads = label_reads_per_epoch(600, 600, 64, 64)
    settings = resolve(few_reads, n_negatives=64)
    assert reads < _settings.LABEL_REFERENCE_READS
    assert settings.label_optimizer == "rowwise_adagrad"
    assert settings.label_learning_rate == adagrad_label_rate(reads) > 0.005
    given = resolve(few_reads, label_optimizer="adagrad", label_learning_rate=0.2)
    assert (given.label_optimizer, given.label_learning_rate) == ("adagrad", 0.2)
    assert resolve(label_optimizer="sgd", batch_size=64).label_learning_rate == 6.4
    assert resolve(label_optimizer="sparse_adam", learning_rate=0.01).label_learning_rate == 0.01


@pytest.mark.parametrize(
    "n_features, n_labels, expected",
    [
        (30, 12, 30),  # the number of features
        (5000, 159, 1024),  # at most 1024
        (100_000, 1_000_000, 78),  # within the budget
        (1_000_000, 100_000_000, 16),  # at least 16
    ],
)
def test_auto_n_components_keeps_parameters_within_the_budget(n_features, n_labels, expected):
    n_components = auto_n_components(n_features, n_labels)
    assert n_components == expected
    if 16 < n_components < min(n_features, 1024):
        used = (12 * n_labels + 16 * n_features) * n_components
        assert used <= _settings.AUTO_COMPONENTS_BYTES < used + 12 * n_labels + 16 * n_features


def test_auto_n_components_counts_the_optimizer_states():
    # Row-wise Adagrad keeps one number a row: 8 bytes an entry with the copy of the best
    # weights, against Adagrad's 12 and a dense layer's Adam 16.
    assert auto_n_components(135_909, 670_091, 8, 8) == 2**30 // (8 * 670_091 + 8 * 135_909)
    amazon = TrainingData(32_000, 135_909, 670_091, 2_500_000, True, False, True, True, 256)
    settings = resolve(amazon)
    assert settings.sparse_input and settings.label_optimizer == "rowwise_adagrad"
    assert settings.n_components == auto_n_components(135_909, 670_091, 8, 8) == 166
    assert resolve(n_components=12).n_components == 12
    # A sparse input layer takes at most 512 dimensions, a dense one 1,024.
    wide = BIBTEX._replace(n_features=20_000, counts=False)
    assert resolve(wide).n_components == _settings.AUTO_MAX_SPARSE_COMPONENTS == 512
    assert resolve(wide._replace(sparse=False)).n_components == 1024
    with pytest.warns(FutureWarning, match="'embedding_dim' was renamed 'n_components'"):
        estimator = SNMClassifier(embedding_dim=12)
        assert resolve_deprecated_parameters(estimator)["n_components"] == 12


def test_encoder_start_follows_the_cost_of_the_principal_directions():
    assert resolve().encoder_init == "svd"  # Bibtex: cheaper than an epoch
    assert resolve(BIBTEX._replace(n_features=900)).encoder_init == "identity"  # d >= p
    wide = BIBTEX._replace(n_features=_settings.EXACT_PRINCIPAL_FEATURES + 1)
    assert resolve(wide).encoder_init == "random"
    # Few rows: an epoch costs less than the eigendecomposition.
    assert resolve(BIBTEX._replace(n_rows=20, nnz=1000)).encoder_init == "random"
    assert resolve(hidden_layer_sizes=(16,)).encoder_init is None
    assert resolve(label_init="random").encoder_init is None
    # Bibtex's training rows: the exact directions cost about an epoch (measured: 0.8 of one).
    assert 0.5 < principal_seconds(1836) / epoch_seconds(4392, 303_000, 159, 1024) < 1.5
    assert principal_seconds(4096) > 10 * principal_seconds(1836)
    assert epoch_seconds(2000, 0, 1, 1) == 6 * 2000 * 2 / 2e9


def test_blend_weights_to_compare():
    settings = resolve()
    assert settings.neighbor_weights == _settings.NEIGHBOR_WEIGHTS
    assert settings.centroid_weights == _settings.CENTROID_WEIGHTS
    unvalidated = resolve(BIBTEX._replace(validated=False))
    assert unvalidated.neighbor_weights == unvalidated.centroid_weights == (0.0,)
    many_rows = BIBTEX._replace(n_rows=_settings.AUTO_NEIGHBOR_MAX_ROWS + 1)
    assert resolve(many_rows).neighbor_weights == (0.0,)
    assert resolve(search="ivf").centroid_weights == (0.0,)
    fixed = resolve(neighbor_weight=0.3, centroid_weight=2.0)
    assert (fixed.neighbor_weights, fixed.centroid_weights) == ((0.3,), (2.0,))


def test_search_tries_an_index_from_many_labels_on(monkeypatch):
    many = _settings.AUTO_IVF_LABELS
    assert _settings.search_method("auto", n_labels=many - 1) == "exact"
    monkeypatch.setattr(_label_search, "faiss_available", lambda: True)
    assert _settings.search_method("auto", n_labels=many) == "ivf"
    # the nearest-centroid rule is in no index
    assert _settings.search_method("auto", n_labels=many, centroid_weight=2.0) == "exact"
    monkeypatch.setattr(_label_search, "faiss_available", lambda: False)
    assert _settings.search_method("auto", n_labels=many) == "exact"
    for given in ("exact", "ivf", "faiss"):
        assert _settings.search_method(given, n_labels=10, centroid_weight=2.0) == given
    # after the fit, "auto" is what the fit chose, and a search set since is used as given
    assert _settings.search_method("auto", fitted="ivf") == "ivf"
    assert _settings.search_method("faiss", fitted="ivf") == "faiss"


def test_a_fit_stores_what_was_resolved():
    rng = np.random.RandomState(0)
    X = sp.random(80, 30, density=0.3, random_state=rng, format="csr")
    X.data = np.ceil(3 * X.data)  # counts
    y = rng.randint(0, 6, 80)
    clf = SNMClassifier(max_epochs=1, tol=None, random_state=0).fit(X, y)
    data = describe_training_data(X, 72, 6, True, 256)
    expected = resolve(data)
    assert clf.input_normalization_ == expected.input_normalization == "tfidf"
    assert clf.n_components_ == expected.n_components == 30
    assert clf.encoder_init_ == expected.encoder_init == "identity"
    assert clf.label_optimizer_ == expected.label_optimizer
    assert clf.label_learning_rate_ == expected.label_learning_rate
    assert clf.input_learning_rate_ == expected.input_learning_rate is None
    assert clf.input_dropout_ == expected.input_dropout == 0.2
    assert clf.n_negatives_ == expected.n_negatives == 5
    np.testing.assert_array_equal(clf.negative_weights_, expected.negative_weights)
    assert clf.search_ == "exact"


def test_an_exact_search_by_auto_does_not_import_faiss(monkeypatch):
    """A label set that "auto" searches exactly never asks for faiss (whose libraries would
    add to the memory of every fit)."""

    def fail():
        raise AssertionError("faiss_available() was called")

    monkeypatch.setattr(_label_search, "faiss_available", fail)
    rng = np.random.RandomState(0)
    clf = SNMClassifier(max_epochs=1, tol=None, random_state=0)
    clf.fit(rng.normal(size=(60, 8)), rng.randint(0, 5, 60))
    assert clf.search_ == "exact"


def test_label_reads_per_epoch_counts_the_rows_a_fit_reads(monkeypatch):
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(640, 8)), rng.randint(0, 2000, 640)
    read = []
    gather = RowSparseOptimizer.gather
    monkeypatch.setattr(
        RowSparseOptimizer,
        "gather",
        lambda self, rows: read.append(rows.numel()) or gather(self, rows),
    )
    clf = SNMClassifier(n_negatives=256, batch_size=64, max_epochs=1, n_components=8,
                        validation_fraction=None, early_stopping=False, random_state=0)  # fmt: skip
    clf.fit(X, y)
    n_labels = len(clf.classes_)
    expected = label_reads_per_epoch(640, n_labels, 256, 64)
    # The shared draw takes a few more labels than n_negatives (repeats are masked).
    assert expected <= sum(read) / n_labels <= 1.1 * expected
