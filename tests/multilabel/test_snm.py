"""SNMClassifier, the estimator: learning, prediction, multilabel targets, sparse input, the
blend weights it chooses, saving and bad input (its modules have test files of their own)."""

import pickle
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import assert_predictions_follow, brute_force_top_k
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.metrics import f1_score
from sklearn.model_selection import GridSearchCV, KFold, train_test_split
from sklearn.preprocessing import normalize
from sklearn.utils import check_random_state
from snm_data import (
    FAST,
    FAST_LINEAR,
    bag_of_words,
    brute_force_centroids,
    brute_force_cosines,
    brute_force_votes,
    clustered,
    extreme,
    multilabel,
)

from skrank import SNMClassifier
from skrank.losses import owl_weights
from skrank.metrics import (
    FaissInnerProductIndex,
    get_scorer,
)
from skrank.metrics._search import overlap_recall
from skrank.multilabel import RowSparseOptimizer
from skrank.multilabel import _calibration as calibration_module
from skrank.multilabel import _label_search as label_search_module
from skrank.multilabel import _settings as settings_module
from skrank.multilabel import _snm as snm_module
from skrank.multilabel._blend import Blend
from skrank.multilabel._predictor import Predictor
from skrank.multilabel._settings import adagrad_label_rate, label_reads_per_epoch
from skrank.multilabel._targets import UNTRAINED_LABEL_SCORE, one_hot
from skrank.nn import Batch, Callback, SparseLinear, WeightAveraging
from skrank.sampling._labels import (
    _draws_for_distinct,
    draw_from_positive_table,
)
from skrank.utils import _memory as memory_module

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_learns_multiclass_with_string_labels_and_consistent_predictions():
    X, y = clustered()
    labels = np.array([f"label-{i}" for i in range(20)], dtype=object)[y]
    clf = SNMClassifier(random_state=0, **FAST).fit(X, labels)
    assert clf.score(X, labels) > 0.95
    assert clf.n_negatives_ == 8 and clf.n_iter_ == 15 and len(clf.history_) == 15
    np.testing.assert_array_equal(clf.classes_, np.unique(labels))

    scores = clf.decision_function(X[:40])
    assert scores.shape == (40, 20) and scores.dtype == np.float32
    # cosine similarities times the learned scale
    assert np.all(np.abs(scores) <= clf.module_.score_scale * (1 + 1e-5))
    top_labels, top_scores = clf.predict_top_k(X[:40], k=5, return_scores=True)
    order = brute_force_top_k(scores, 5)
    np.testing.assert_array_equal(top_labels, clf.classes_[order])
    np.testing.assert_allclose(top_scores, np.take_along_axis(scores, order, 1), atol=1e-6)
    np.testing.assert_array_equal(clf.predict(X[:40]), top_labels[:, 0])
    # score is Precision@score_k: a third of the top-3 accuracy here (one true label each)
    clf.set_params(score_k=3)
    hits = [label in row for label, row in zip(labels, clf.predict_top_k(X, 3), strict=True)]
    assert clf.score(X, labels) == pytest.approx(np.mean(hits) / 3)


def test_top_1_mining_beats_negative_sampling_on_hard_negatives():
    """Top-1 SNM against uniform weights at the same B and budget (the paper's claim)."""
    X, y = clustered(n_samples=600, n_labels=60, noise=0.9, seed=1)
    # the losses alone: no input-space centroids blended in
    params = dict(FAST, n_negatives=32, max_epochs=20, centroid_weight=0.0)
    snm = SNMClassifier(random_state=0, **params).fit(X, y).score(X, y)
    sampling = SNMClassifier(negative_weights="uniform", random_state=0, **params).fit(X, y)
    assert snm > sampling.score(X, y) + 0.05


@pytest.fixture
def sparse_layer_for_few_features(monkeypatch):
    """The sparse input layer for a sparse X of any width (it starts beyond 4,096 features)."""
    monkeypatch.setattr(settings_module, "SPARSE_INPUT_MIN_FEATURES", 0)


def test_sparse_input_layer_from_many_features_only():
    """A sparse X of few features keeps the dense input layer (cheap at that width, and the
    published results); beyond ``SPARSE_INPUT_MIN_FEATURES`` the layer reads sparse rows."""
    X, y = bag_of_words(n_samples=64, n_features=200)
    params = dict(FAST, hidden_layer_sizes=(), max_epochs=1, n_components=8, tol=None)
    assert not SNMClassifier(**params).fit(X, y).sparse_input_
    wide = sp.hstack([X, sp.csr_matrix((X.shape[0], settings_module.SPARSE_INPUT_MIN_FEATURES))])
    clf = SNMClassifier(**params).fit(wide.tocsr(), y)
    assert clf.sparse_input_ and isinstance(clf.module_.encoder.layers[0], SparseLinear)


@pytest.mark.parametrize("hidden_layer_sizes", [(32,), ()])
@pytest.mark.usefixtures("sparse_layer_for_few_features")
def test_sparse_input_matches_dense_input(hidden_layer_sizes):
    """The sparse input layer trains the model of the dense one where the two updates agree:
    plain SGD (a row that is not read has a zero gradient) and no input dropout (whose masks
    are drawn over the non-zeros only)."""
    X, y = clustered(n_samples=120, n_labels=6)
    X[np.abs(X) < 0.5] = 0
    params = dict(
        FAST,
        hidden_layer_sizes=hidden_layer_sizes,
        max_epochs=3,
        n_negatives=4,
        optimizer="sgd",
        momentum=0.0,
        input_optimizer="sgd",
        input_dropout=0.0,
    )
    params["input_learning_rate"] = params["learning_rate"]
    dense = SNMClassifier(random_state=0, **params).fit(X, y)
    sparse = SNMClassifier(random_state=0, **params).fit(sp.csr_matrix(X), y)
    assert sparse.sparse_input_ and not dense.sparse_input_
    assert isinstance(sparse.optimizers_[1], RowSparseOptimizer)
    np.testing.assert_allclose(
        dense.decision_function(X), sparse.decision_function(sp.csr_matrix(X)), atol=1e-5
    )


@pytest.mark.parametrize("sparse_targets", [False, True])
def test_multilabel_targets(sparse_targets):
    X, Y = multilabel()
    targets = sp.csr_matrix(Y) if sparse_targets else Y
    clf = SNMClassifier(random_state=0, score_k=3, **dict(FAST, max_epochs=25)).fit(X, targets)
    np.testing.assert_array_equal(clf.classes_, np.arange(15))
    predicted = clf.predict(X)
    assert sp.issparse(predicted) == sparse_targets and predicted.dtype == Y.dtype
    predicted = predicted.toarray() if sparse_targets else predicted
    # each row's labels of probability at least threshold_ among its 3 best (the most labels
    # of a training row), its best label in any case
    assert clf.n_set_candidates_ == 3 and 0 < clf.threshold_ < 1
    probabilities = clf.predict_proba(X)
    top = clf.predict_top_k(X, 3)
    rows = np.arange(len(X))[:, None]
    expected = np.zeros_like(probabilities, dtype=bool)
    expected[rows, top] = probabilities[rows, top] >= clf.threshold_
    expected[rows[:, 0], top[:, 0]] = True
    np.testing.assert_array_equal(predicted, expected)
    assert (predicted.sum(axis=1) <= 3).all() and len(np.unique(predicted.sum(axis=1))) > 1
    # without a threshold (a model fitted without validation rows), the score_k best labels
    clf.threshold_ = None
    predicted = clf.predict(X)
    predicted = predicted.toarray() if sparse_targets else predicted
    np.testing.assert_array_equal(predicted.sum(axis=1), 3)
    top = clf.predict_top_k(X, 3)
    np.testing.assert_array_equal(np.sort(top, axis=1), np.nonzero(predicted)[1].reshape(-1, 3))
    # score is Precision@3: true labels among the 3 best / 3
    found = np.array([Y[i, top[i]].sum() for i in range(len(Y))])
    assert clf.score(X, targets) == pytest.approx(np.mean(found / 3))
    # Recall@3, the scorer label_recall@3: true labels among the 3 best / number of true labels
    recall = np.mean(found / Y.sum(axis=1))
    assert get_scorer("label_recall@3")(clf, X, targets) == pytest.approx(recall)
    assert recall > 0.8


def test_multilabel_rows_without_labels_are_skipped_with_a_count():
    X, Y = multilabel(n_samples=60)
    Y[[3, 7, 11]] = 0
    with pytest.warns(UserWarning, match="3 of 60 training examples have no positive label"):
        SNMClassifier(random_state=0, **dict(FAST, max_epochs=1)).fit(X, Y)
    with pytest.raises(ValueError, match="No training example has a positive label"):
        SNMClassifier(**dict(FAST, max_epochs=1)).fit(X, np.zeros_like(Y))


@pytest.mark.parametrize("sparse_targets", [False, True])
@pytest.mark.parametrize("low, high", [(-1, 1), (0, 2)])
def test_multilabel_targets_must_be_0_1(sparse_targets, low, high):
    # type_of_target calls any two-valued integer matrix "multilabel-indicator": a -1/1
    # matrix trained with every label positive, and predicted 0/1.
    X, Y = multilabel(n_samples=60)
    targets = np.where(Y > 0, high, low)
    targets = sp.csr_matrix(targets) if sparse_targets else targets
    clf = SNMClassifier(**dict(FAST, max_epochs=1))
    values = f"[{high}]" if sparse_targets else f"[{low}, {high}]"  # the stored values
    message = re.escape(f"multilabel indicator matrix with values {values}") + ".*needs 0/1"
    if sparse_targets and low == -1:  # implicit zeros make it a three-valued matrix
        message = "a multilabel 0/1 indicator matrix; got targets of type 'multiclass-multioutput'"
    with pytest.raises(ValueError, match=message):
        clf.fit(X, targets)
    bool_fit = SNMClassifier(random_state=0, **dict(FAST, max_epochs=1)).fit(X, Y > 0)
    int_fit = SNMClassifier(random_state=0, **dict(FAST, max_epochs=1)).fit(X, Y)
    np.testing.assert_array_equal(bool_fit.decision_function(X), int_fit.decision_function(X))


def test_a_step_reads_and_updates_only_the_sampled_label_rows():
    rng = np.random.RandomState(0)
    n_labels = 5000
    X = rng.normal(size=(n_labels, 5))
    # One example a label: the label table holds every label.
    positives = one_hot(rng.permutation(n_labels), n_labels)  # multilabel form
    clf = SNMClassifier(
        label_optimizer="sgd", random_state=0, **dict(FAST, batch_size=16, max_epochs=1)
    ).fit(X, positives)
    assert len(clf.classes_) == clf.module_.label_embeddings.num_embeddings == n_labels
    targets = clf.prepare_targets(positives, torch.device("cpu"))
    batch = Batch(
        torch.tensor(X[:16], dtype=torch.float32),
        torch.arange(16),
        torch.ones(16, dtype=bool),
        None,
    )
    reads = []
    gather = clf._label_optimizer.gather
    clf._label_optimizer.gather = lambda rows: reads.append(rows) or gather(rows)
    table = clf.module_.label_embeddings.weight
    before = table.detach().clone()
    clf.train_step(batch, targets)
    read = set(torch.cat(reads).tolist())
    # 16 positives and one fixed-size draw of labels, whose repeats are masked.
    assert len(read) <= 16 + _draws_for_distinct(clf.n_negatives_ + 1, n_labels) < 40
    changed = torch.nonzero((table != before).any(dim=1)).ravel().tolist()
    assert 0 < len(changed) <= 16 + clf.n_negatives_ + 1 and set(changed) <= read
    assert table.grad is None  # the table is never in the autograd graph: no dense gradient


def test_row_sparse_optimizer_matches_torch_on_the_rows_read():
    """Adagrad and lazy Adam on gathered rows equal torch's dense Adagrad / SparseAdam."""
    rng = torch.Generator().manual_seed(0)
    start = torch.randn(50, 3, generator=rng)
    reads = [torch.tensor([4, 9, 4, 17]), torch.tensor([9, 30, 2])]
    gradients = [torch.randn(4, 3, generator=rng), torch.randn(3, 3, generator=rng)]
    for method, reference_class in [
        ("adagrad", torch.optim.Adagrad),
        ("sparse_adam", torch.optim.SparseAdam),
        ("sgd", torch.optim.SGD),
    ]:
        table = torch.nn.Parameter(start.clone())
        optimizer = RowSparseOptimizer(table, method=method, lr=0.1)
        reference = torch.nn.Embedding.from_pretrained(start.clone(), freeze=False, sparse=True)
        reference_optimizer = reference_class(reference.parameters(), lr=0.1)
        for rows, gradient in zip(reads, gradients, strict=True):
            optimizer.zero_grad()
            (optimizer.gather(rows) * gradient).sum().backward()
            optimizer.step()
            reference_optimizer.zero_grad()
            (reference(rows) * gradient).sum().backward()
            reference_optimizer.step()
        torch.testing.assert_close(table.detach(), reference.weight.detach())


@pytest.mark.parametrize("method", ["adagrad", "rowwise_adagrad", "sparse_adam", "sgd"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_row_sparse_optimizer_reads_the_whole_table_as_every_row(method, weight_decay):
    """gather() reads the whole table in place: its steps equal those of reading every row,
    alone or with another read in the same step."""
    rng = torch.Generator().manual_seed(0)
    start = torch.randn(30, 4, generator=rng)
    extra = torch.tensor([3, 3, 17])
    tables = []
    for whole in (True, False):
        table = torch.nn.Parameter(start.clone())
        optimizer = RowSparseOptimizer(table, method=method, lr=0.1, weight_decay=weight_decay)
        gradients = torch.Generator().manual_seed(1)
        for step in range(4):
            optimizer.zero_grad()
            rows = optimizer.gather() if whole else optimizer.gather(torch.arange(30))
            loss = (rows * torch.randn(30, 4, generator=gradients)).sum()
            if step % 2:
                loss = loss + (optimizer.gather(extra) ** 2).sum()
            loss.backward()
            optimizer.step()
        tables.append(table.detach())
    torch.testing.assert_close(tables[0], tables[1])
    assert not torch.equal(tables[0], start)


def test_a_step_scoring_every_label_is_the_owl_of_explicit_loops():
    """With n_negatives covering every other label, a step scores the whole label table:
    its loss is BOWL over each example's own negatives, written as loops."""
    rng = np.random.RandomState(0)
    n_labels = 6
    X = rng.normal(size=(60, 5)).astype(np.float32)
    Y = (rng.rand(60, n_labels) < 0.3).astype(int)
    Y[np.arange(60), rng.randint(0, n_labels, 60)] = 1
    clf = SNMClassifier(
        n_negatives=n_labels - 1, top_k_negatives=2, n_components=4, max_epochs=1,
        input_normalization=None, validation_fraction=None, early_stopping=False, tol=None,
        random_state=0,
    ).fit(X, Y)  # fmt: skip
    table, counts = clf.prepare_targets(sp.csr_matrix(Y), "cpu")
    indices = torch.arange(10, 20)
    valid = torch.ones(10, dtype=torch.bool)
    batch = Batch(torch.as_tensor(X[10:20]), indices, valid, None, None, slice(None), None, None)
    state = clf._label_sampler.generator.get_state()
    with torch.no_grad():
        loss = float(clf.get_loss(batch, (table, counts)))
        generator = torch.Generator().set_state(state)
        positives = draw_from_positive_table(table[indices], counts[indices], generator)
        embeddings = clf.module_(batch.inputs).double()
        vectors = torch.nn.functional.normalize(clf.module_.label_embeddings.weight, dim=1)
        scores = (embeddings @ vectors.double().T).numpy()
    weights = clf.criterion_.weights.double().numpy()
    expected = []
    for row, positive in zip(range(10, 20), positives.tolist(), strict=True):
        own = scores[row - 10]
        negatives = sorted((own[j] for j in range(n_labels) if not Y[row, j]), reverse=True)
        total = max(0.0, 1 - own[positive])
        total += sum(w * max(0.0, 1 + s) for w, s in zip(weights, negatives, strict=False))
        expected.append(total)
    assert loss == pytest.approx(np.mean(expected), rel=1e-5)


def test_binary_targets_follow_the_scikit_learn_convention():
    X, y = clustered(n_samples=100, n_labels=2)
    clf = SNMClassifier(random_state=0, **dict(FAST, n_negatives=1)).fit(X, y == 1)
    decision = clf.decision_function(X)
    assert decision.shape == (100,)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(decision > 0).astype(int)])


def test_negative_weight_options_reach_the_loss():
    X, y = clustered(n_samples=60, n_labels=10)
    fit = dict(FAST, max_epochs=1, n_negatives=4)
    cases = {
        "uniform": [0.25] * 4,
        "power": np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12),
    }
    for weights, expected in cases.items():
        clf = SNMClassifier(negative_weights=weights, **fit).fit(X, y)
        np.testing.assert_allclose(clf.negative_weights_, expected)
        np.testing.assert_allclose(clf.criterion_.weights.numpy(), expected, rtol=1e-6)
    clf = SNMClassifier(negative_weights=[2.0, 1.0, 1.0, 0.0], **fit).fit(X, y)
    np.testing.assert_allclose(clf.negative_weights_, [2.0, 1.0, 1.0, 0.0])
    clf = SNMClassifier(**fit).fit(X, y)  # top_k_negatives="auto": 1 of 4 negatives
    np.testing.assert_allclose(clf.negative_weights_, [1, 0, 0, 0])
    paper = owl_weights("topk", 4, top_k=2, scale="paper", n_labels=10)
    clf = SNMClassifier(negative_weights=paper, **fit).fit(X, y)
    np.testing.assert_allclose(clf.negative_weights_, [9 / 8, 9 / 8, 0, 0])  # (K-1)/(k'B)
    with pytest.warns(FutureWarning, match="'weight_scale' is deprecated"):
        deprecated = SNMClassifier(top_k_negatives=2, weight_scale="paper", **fit).fit(X, y)
    np.testing.assert_allclose(deprecated.negative_weights_, clf.negative_weights_)
    for loss in ("powl", "bowl"):
        for surrogate in ("logistic", "squared_hinge", "exponential", "ramp"):
            if (loss, surrogate) == ("bowl", "ramp"):
                continue  # refused: see test_every_surrogate_weighting_and_loss_trains
            clf = SNMClassifier(
                loss=loss, surrogate=surrogate, negative_weights="uniform", **fit
            ).fit(X, y)
            assert np.isfinite(clf.history_[0]["loss"])


def test_n_negatives_is_clamped_to_the_label_count_with_a_warning():
    X, y = clustered(n_samples=60, n_labels=5)
    with pytest.warns(UserWarning, match="n_negatives=16 exceeds the 4 negative labels"):
        clf = SNMClassifier(top_k_negatives=8, **dict(FAST, n_negatives=16, max_epochs=1))
        clf.fit(X, y)
    assert clf.n_negatives_ == 4
    np.testing.assert_allclose(clf.negative_weights_, [0.25] * 4)  # top-8 clamped to top-4


@pytest.mark.parametrize(
    "params, targets, match",
    [
        (dict(top_k_negatives=9), None, "top_k_negatives=9 exceeds n_negatives=8"),
        (dict(score_k=21), None, "score_k=21 exceeds the number of labels 20"),
        (dict(negative_weights=[1.0, 0.5]), None, "2 entries but n_negatives=8"),
        (dict(negative_weights=[0.1] + [0.5] * 7), None, "non-increasing"),
        ({}, "one", "at least two classes"),
        ({}, "continuous", "Unknown label type"),
        ({}, "multioutput", "multiclass-multioutput"),
    ],
)
def test_bad_settings_and_targets_raise_clear_errors(params, targets, match):
    X, y = clustered(n_samples=40)
    y = {
        None: y,
        "one": np.zeros(40),
        "continuous": np.linspace(0, 1, 40),
        "multioutput": np.stack([y, y], axis=1),
    }[targets]
    with pytest.raises(ValueError, match=match):
        SNMClassifier(**dict(FAST, **params, max_epochs=1)).fit(X, y)


def test_bad_inputs_at_fit_and_predict():
    X, y = clustered(n_samples=60)
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SNMClassifier(**FAST).fit(bad, y)
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        SNMClassifier(**FAST).fit(sp.csr_matrix(bad), y)
    clf = SNMClassifier(**FAST)
    with pytest.raises(NotFittedError):
        clf.predict_top_k(X, 1)
    clf.set_params(max_epochs=1).fit(X, y)
    for wrong in (X[:, :4], sp.csr_matrix(X[:, :4])):
        for method in (clf.predict, clf.decision_function, lambda Z: clf.predict_top_k(Z, 2)):
            with pytest.raises(ValueError, match="features"):
                method(wrong)
    for k in (0, 21, 2.5):
        with pytest.raises(ValueError, match=r"k must be an integer in \[1, 20\]"):
            clf.predict_top_k(X, k)
    with pytest.raises(ValueError, match="not among the labels"):
        clf.score(X, y + 100)


def test_early_stopping_scores_at_most_its_row_cap_of_the_validation_rows(monkeypatch, tmp_path):
    X, y = clustered(n_samples=200)
    monkeypatch.setattr(snm_module, "VALIDATION_SCORE_MAX_ROWS", 7)
    scored, held_out = [], []
    original = Predictor.table_top_k

    def counting_top_k(self, embeddings, rows, k):
        scored.append(embeddings.shape[0])
        return original(self, embeddings, rows, k)

    class Holdout(Callback):
        def on_train_begin(self, estimator, X, y, validation):
            held_out.append(validation)

    monkeypatch.setattr(Predictor, "table_top_k", counting_top_k)
    params = dict(FAST, max_epochs=3, validation_fraction=0.25, neighbor_weight=0.0)
    clf = SNMClassifier(random_state=0, callbacks=[Holdout()], **params).fit(X, y)
    # each epoch scores 7 rows; then the calibration of probabilities reads all 50
    assert scored == [7] * 3 + [50] and len(clf.history_) == 3
    # the first rows of the shuffled split: the score of the fitted model on them
    X_val, y_val = held_out[0]
    assert held_out[0][0].shape[0] == 50
    assert clf.validation_score(X_val, y_val) == clf.validation_score(X_val[:7], y_val[:7])
    # memory-mapped rows: the sample is read from the file (a RowSubset of the split)
    mapped = np.memmap(tmp_path / "X.f32", dtype=np.float32, mode="w+", shape=X.shape)
    mapped[:] = X
    from_file = SNMClassifier(random_state=0, **params).fit(mapped, y)
    np.testing.assert_allclose(
        [r["validation_score"] for r in from_file.history_],
        [r["validation_score"] for r in clf.history_],
    )


def test_decision_function_refuses_a_matrix_that_does_not_fit(monkeypatch):
    X, y = clustered(n_samples=60)
    clf = SNMClassifier(**dict(FAST, max_epochs=1)).fit(X, y)
    monkeypatch.setattr(memory_module, "available_host_bytes", lambda: 1000)
    with pytest.raises(MemoryError, match="predict_top_k"):
        clf.decision_function(X)
    assert clf.predict_top_k(X, 2).shape == (60, 2)  # top-k never builds the matrix


def test_reproducible_picklable_and_validation_history():
    X, y = clustered(n_samples=200)
    params = dict(FAST, max_epochs=4, validation_fraction=0.25)
    first = SNMClassifier(random_state=3, **params).fit(X, y)
    second = SNMClassifier(random_state=3, **params).fit(X, y)
    np.testing.assert_array_equal(first.decision_function(X), second.decision_function(X))
    assert all("validation_score" in record for record in first.history_)
    restored = pickle.loads(pickle.dumps(first))
    np.testing.assert_array_equal(restored.predict_top_k(X, 3), first.predict_top_k(X, 3))


def test_the_fitted_predictor_is_kept_and_built_again_when_a_prediction_setting_changes():
    X, y = clustered(n_samples=100)
    clf = SNMClassifier(random_state=0, **dict(FAST, max_epochs=2)).fit(X, y)
    predictor = clf._predictor()
    clf.predict(X), clf.decision_function(X), clf.score(X, y)
    assert clf._predictor() is predictor
    assert "_fitted_predictor" not in clf.__getstate__()
    clf.set_params(n_neighbors=3)
    assert clf._predictor() is not predictor and clf._predictor().blend.n_neighbors == 3
    clf.set_params(search="exact")  # the search the fit chose: the same predictor
    assert clf._predictor().settings.search == clf.search_ == "exact"
    kept = clf._predictor()
    assert clf._predictor() is kept
    clf.fit(X, y)
    assert clf._predictor() is not kept


def test_a_state_saved_before_the_prediction_attributes_existed_loads_with_those_of_its_fit():
    X, y = clustered(n_samples=100)
    params = dict(FAST, max_epochs=2, input_dropout=0.1, label_optimizer="adagrad")
    clf = SNMClassifier(neighbor_weight=0.0, centroid_weight=0.0, random_state=0, **params)
    clf.fit(X, y)
    state = clf.__getstate__()
    added = ("trained_labels_", "neighbor_weight_", "centroid_weight_", "neighbor_embeddings_")
    added += ("_neighbor_labels", "centroids_", "input_dropout_", "label_optimizer_")
    for name in (*added, "search_probes_", "_search_seed"):
        del state[name]
    earlier = SNMClassifier.__new__(SNMClassifier)
    earlier.__setstate__(state)
    np.testing.assert_array_equal(earlier.trained_labels_, np.arange(20))
    assert (earlier.input_dropout_, earlier.label_optimizer_) == (0.1, "adagrad")
    assert earlier.neighbor_weight_ == earlier.centroid_weight_ == 0.0
    np.testing.assert_array_equal(earlier.predict_top_k(X, 3), clf.predict_top_k(X, 3))
    np.testing.assert_array_equal(earlier.decision_function(X), clf.decision_function(X))


def test_faiss_search_agrees_with_exact_search_and_pickles():
    pytest.importorskip("faiss")
    X, y = clustered()
    clf = SNMClassifier(random_state=0, **FAST).fit(X, y)
    exact = clf.predict_top_k(X, 3)
    clf.set_params(search="faiss")
    approximate = clf.predict_top_k(X, 3)
    assert np.mean(approximate[:, 0] == exact[:, 0]) > 0.95
    restored = pickle.loads(pickle.dumps(clf))  # the cached index is dropped, then rebuilt
    np.testing.assert_array_equal(restored.predict_top_k(X, 3), approximate)
    # validation during training searches exactly; the index is built from the final weights
    params = dict(FAST, max_epochs=2, validation_fraction=0.2)
    fitted = SNMClassifier(search="faiss", **params).fit(X, y)
    search = fitted._predictor().search
    index = search.index
    fresh = FaissInnerProductIndex(fitted.module_.label_table().numpy())
    queries = fitted.forward(X).numpy()
    assert search.method == fitted.search_ == "faiss" and 0 < fitted.search_recall_ <= 1
    np.testing.assert_array_equal(index.search(queries, 3)[1], fresh.search(queries, 3)[1])


def test_warm_start_continues_and_checks_labels():
    X, y = clustered(n_samples=100)
    clf = SNMClassifier(warm_start=True, random_state=0, **dict(FAST, max_epochs=2)).fit(X, y)
    module = clf.module_
    clf.fit(X, y)
    assert clf.module_ is module and len(clf.history_) == 4
    with pytest.raises(ValueError, match="classes of the previous fit"):
        clf.fit(X, (y + 1) % 21)


def test_probabilities_follow_the_scores_and_multiclass_rows_sum_to_one():
    X, Y = multilabel(n_samples=160)
    Y[:, -1] = 0  # a label without a training row
    with pytest.warns(UserWarning):
        clf = SNMClassifier(random_state=0, **dict(FAST, max_epochs=5)).fit(X, Y)
    probabilities, scores = clf.predict_proba(X), clf.decision_function(X)
    assert probabilities.shape == Y.shape and probabilities.dtype == np.float32
    assert np.all(probabilities[:, -1] == 0) and np.all(probabilities[:, :-1] > 0)
    # one increasing map of the scores: the same order
    order = np.argsort(scores[:, :-1], axis=None)
    assert np.all(np.diff(probabilities[:, :-1].ravel()[order].astype(np.float64)) >= 0)
    top, top_probabilities = clf.predict_top_k(X, 4, return_proba=True)
    rows = np.arange(len(X))[:, None]
    np.testing.assert_allclose(top_probabilities, probabilities[rows, top], rtol=1e-6)
    for n_labels in (2, 6):
        X, y = clustered(n_samples=120, n_labels=n_labels)
        clf = SNMClassifier(random_state=0, **dict(FAST, max_epochs=3)).fit(X, y)
        probabilities = clf.predict_proba(X)
        assert probabilities.shape == (len(X), n_labels)
        np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-5)
        assert np.all(clf.classes_[probabilities.argmax(axis=1)] == clf.predict(X))
        if n_labels == 2:  # the second column follows the decision function
            order = np.argsort(clf.decision_function(X))
            assert np.all(np.diff(probabilities[order, 1].astype(np.float64)) >= 0)
        top, top_probabilities = clf.predict_top_k(X, 2, return_proba=True)
        columns = np.searchsorted(clf.classes_, top)
        np.testing.assert_allclose(
            top_probabilities, probabilities[np.arange(len(X))[:, None], columns], rtol=1e-5
        )


def test_without_validation_rows_probabilities_are_refused_and_predict_keeps_score_k():
    X, Y = multilabel(n_samples=120)
    params = dict(FAST, max_epochs=3, validation_fraction=None, early_stopping=False)
    clf = SNMClassifier(random_state=0, score_k=2, **params).fit(X, Y)
    assert clf.threshold == "auto" and clf.threshold_ is None
    assert clf.probability_knots_ is None and clf.probability_logits_ is None
    for method in (clf.predict_proba, lambda X: clf.predict_top_k(X, 2, return_proba=True)):
        with pytest.raises(ValueError, match=r"validation_fraction=None\).*validation_fraction"):
            method(X)
    # "auto" without validation rows: the score_k best labels of every row
    predicted = clf.predict(X)
    np.testing.assert_array_equal(predicted.sum(axis=1), 2)
    top = np.sort(clf.predict_top_k(X, 2), axis=1)
    np.testing.assert_array_equal(np.nonzero(predicted)[1].reshape(-1, 2), top)
    with pytest.raises(ValueError, match="threshold=0.5 is a probability.*validation_fraction"):
        SNMClassifier(threshold=0.5, **params).fit(X, Y)


def test_grid_search_over_the_threshold_scores_the_label_sets():
    X, Y = multilabel(n_samples=160)
    estimator = SNMClassifier(random_state=0, **dict(FAST, max_epochs=5))
    thresholds = [0.1, 0.5, 0.9]
    search = GridSearchCV(estimator, {"threshold": thresholds}, scoring="f1_samples", cv=2)
    search.fit(X, Y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and len(np.unique(scores)) == 3
    assert search.best_estimator_.threshold_ == search.best_params_["threshold"]
    # each split's score is the example-based F1 of predict's label sets
    train, test = next(KFold(2).split(X))
    fold = clone(estimator).set_params(threshold=0.9).fit(X[train], Y[train])
    expected = f1_score(Y[test], fold.predict(X[test]), average="samples")
    assert search.cv_results_["split0_test_score"][2] == pytest.approx(expected)


def test_a_warm_start_refits_the_calibration_and_the_threshold():
    X, Y = multilabel(n_samples=160)
    clf = SNMClassifier(warm_start=True, random_state=0, **dict(FAST, max_epochs=2)).fit(X, Y)
    knots, logits = clf.probability_knots_.copy(), clf.probability_logits_.copy()
    clf.threshold_ = 0.999  # never chosen
    clf.fit(X, Y)
    assert len(clf.history_) == 4
    assert not np.array_equal(clf.probability_knots_, knots)
    assert not np.array_equal(clf.probability_logits_, logits)
    assert clf.threshold_ in calibration_module.THRESHOLDS


def test_a_state_saved_with_a_temperature_and_a_bias_loads_as_that_sigmoid():
    X, Y = multilabel(n_samples=100)
    clf = SNMClassifier(random_state=0, **dict(FAST, max_epochs=2)).fit(X, Y)
    state = clf.__getstate__()
    del state["probability_knots_"], state["probability_logits_"]
    state |= {"probability_temperature_": 1.5, "probability_bias_": -2.0}
    loaded = SNMClassifier.__new__(SNMClassifier)
    loaded.__setstate__(state)
    expected = 1 / (1 + np.exp(-(1.5 * clf.decision_function(X).astype(np.float64) - 2.0)))
    np.testing.assert_allclose(loaded.predict_proba(X), expected, rtol=1e-5)
    assert not hasattr(loaded, "probability_temperature_")


def test_warm_start_with_other_features_is_refused_and_keeps_the_fit():
    X, y = clustered(n_samples=100)
    clf = SNMClassifier(warm_start=True, random_state=0, **dict(FAST, max_epochs=2)).fit(X, y)
    scores = clf.decision_function(X)
    n_features = X.shape[1]
    with pytest.raises(ValueError, match=f"X has {n_features - 1} features, but SNMClassifier"):
        clf.fit(X[:, :-1], y)
    assert clf.n_features_in_ == n_features
    np.testing.assert_array_equal(clf.decision_function(X), scores)


def test_an_int_hidden_layer_sizes_is_one_layer_as_in_mlp_classifier():
    X, y = clustered(n_samples=100)
    params = dict(FAST, max_epochs=2, random_state=0)
    as_int = SNMClassifier(**{**params, "hidden_layer_sizes": 8}).fit(X, y)
    as_tuple = SNMClassifier(**{**params, "hidden_layer_sizes": (8,)}).fit(X, y)
    np.testing.assert_array_equal(as_int.decision_function(X), as_tuple.decision_function(X))
    assert as_int.module_.encoder.layers[0].out_features == 8


def test_no_warning_in_a_normal_fit():
    X, y = clustered(n_samples=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SNMClassifier(random_state=0, **dict(FAST, max_epochs=2, tol=None)).fit(X, y).score(X, y)


@pytest.mark.parametrize("label_optimizer", ["adagrad", "rowwise_adagrad", "sparse_adam", "sgd"])
def test_every_label_optimizer_learns_without_warnings(label_optimizer):
    X, y = clustered(n_samples=200, n_labels=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = SNMClassifier(label_optimizer=label_optimizer, random_state=0, **FAST).fit(X, y)
    assert clf.score(X, y) > 0.9
    with pytest.raises(ValueError, match="method must be one of"):
        RowSparseOptimizer(clf.module_.label_embeddings.weight, method="adam")


def test_auto_label_optimizer_follows_the_reads_of_a_label_row():
    rng = np.random.RandomState(0)
    common = dict(n_negatives=64, batch_size=64, max_epochs=1, n_components=8, random_state=0)
    # 600 labels, 64 sampled a step: each row is read about 4 times an epoch.
    X, y = rng.normal(size=(600, 8)), np.arange(600)
    clf = SNMClassifier(validation_fraction=None, early_stopping=False, **common).fit(X, y)
    reads = label_reads_per_epoch(600, 600, 64, 64)
    assert clf.label_optimizer_ == "rowwise_adagrad"
    assert clf.label_learning_rate_ == adagrad_label_rate(reads)
    assert clf._label_optimizer.param_groups[0]["method"] == "rowwise_adagrad"
    assert clf._label_optimizer.param_groups[0]["lr"] == clf.label_learning_rate_ > 0.005
    # 20 labels read every step: per-coordinate Adagrad at its base rate.
    y = np.arange(600) % 20
    clf = SNMClassifier(validation_fraction=None, early_stopping=False, **common).fit(X, y)
    assert (clf.label_optimizer_, clf.label_learning_rate_) == ("adagrad", 0.005)
    # Given values are used as they are.
    given = dict(common, label_optimizer="rowwise_adagrad", label_learning_rate=0.2)
    clf = SNMClassifier(validation_fraction=None, early_stopping=False, **given).fit(X, y)
    assert (clf.label_optimizer_, clf.label_learning_rate_) == ("rowwise_adagrad", 0.2)
    assert clf._label_optimizer.param_groups[0]["lr"] == 0.2
    # A warm start keeps the choice.
    clf.set_params(warm_start=True, label_optimizer="auto", label_learning_rate=None).fit(X, y)
    assert clf.label_optimizer_ == "rowwise_adagrad"


def test_scorers_use_predict_top_k_and_match_score():
    X, Y = multilabel(n_samples=120)
    clf = SNMClassifier(random_state=0, score_k=5, **dict(FAST, max_epochs=5)).fit(X, Y)
    assert get_scorer("precision@5")(clf, X, Y) == pytest.approx(clf.score(X, Y))
    top = clf.predict_top_k(X, 3)
    expected = np.mean([Y[i, top[i]].sum() / 3 for i in range(len(Y))])
    assert get_scorer("precision@3")(clf, X, Y) == pytest.approx(expected)
    search = GridSearchCV(
        SNMClassifier(**dict(FAST, max_epochs=2)),
        {"negative_weights": ["topk", "uniform"]},
        scoring=get_scorer("label_recall@3"),
        cv=2,
    )
    X, y = clustered(n_samples=200, n_labels=10)
    search.fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.best_score_ > 0.5


def test_every_surrogate_weighting_and_loss_trains():
    """No combination collapses: each reaches 90% of the defaults' training P@1.
    Random label embeddings, so that the training (not the centroid start) is measured. The
    ramp combinations that cannot train (no gradient on errors) are refused with the reason."""
    X, y = clustered(n_samples=300, n_labels=30, noise=0.5, seed=2)
    params = dict(
        n_components=16, n_negatives=16, max_epochs=15, tol=None, validation_fraction=None,
        early_stopping=False, label_init="random", learning_rate=0.01, batch_size=32,
        label_learning_rate=0.05,
    )  # fmt: skip
    default = SNMClassifier(random_state=0, **params).fit(X, y).score(X, y)
    assert default > 0.8
    scores = {}
    for loss in ("bowl", "powl"):
        for surrogate in ("hinge", "logistic", "squared_hinge", "exponential", "ramp"):
            for weights in ("topk", "uniform", "power"):
                clf = SNMClassifier(
                    loss=loss, surrogate=surrogate, negative_weights=weights, random_state=0,
                    **params,
                )  # fmt: skip
                if surrogate == "ramp" and (loss == "bowl" or weights == "topk"):
                    with pytest.raises(ValueError, match="no gradient on errors"):
                        clf.fit(X, y)
                    continue
                scores[loss, surrogate, weights] = clf.fit(X, y).score(X, y)
    assert len(scores) == 26
    collapsed = {key: round(value, 3) for key, value in scores.items() if value < 0.9 * default}
    assert not collapsed, f"default {default:.3f}; collapsed: {collapsed}"


def test_steep_and_ramp_surrogates_see_unscaled_scores(monkeypatch):
    """The squared hinge, exponential and ramp surrogates get the cosines, not scaled scores."""
    X, y = clustered(n_samples=64, n_labels=8)
    seen = {}
    original = snm_module.OrderedWeightedLoss.forward
    cases = [
        ("hinge", "bowl"),
        ("squared_hinge", "bowl"),
        ("exponential", "bowl"),
        ("ramp", "powl"),
    ]
    for surrogate, loss in cases:
        clf = SNMClassifier(
            surrogate=surrogate, loss=loss, negative_weights="uniform", score_scale=7.0,
            random_state=0, **dict(FAST, max_epochs=1, early_stopping=False, tol=None),
        )  # fmt: skip

        def record(self, positive, negative, *args, surrogate=surrogate, **kwargs):
            seen[surrogate] = float(negative.detach().abs().max())
            return original(self, positive, negative, *args, **kwargs)

        monkeypatch.setattr(snm_module.OrderedWeightedLoss, "forward", record)
        clf.fit(X, y)
        monkeypatch.undo()
    assert 1.0 < seen["hinge"] <= 7.0 + 1e-3
    for surrogate in ("squared_hinge", "exponential", "ramp"):
        assert seen[surrogate] <= 1.0 + 1e-5


def test_linear_default_starts_as_the_input_space_centroid_rule(monkeypatch):
    """Validation that never beats the start keeps the start, rebuilt from every training row:
    the nearest-centroid rule on TF-IDF inputs, the scores scaled by 10."""
    X, y = bag_of_words()
    calls = []
    monkeypatch.setattr(
        SNMClassifier, "validation_score", lambda self, X, y: 1.0 if not calls.append(1) else 0.0
    )
    params = dict(
        n_negatives=8, max_epochs=3, learning_rate=0.05, neighbor_weight=0.0, centroid_weight=0.0
    )
    clf = SNMClassifier(random_state=0, **params).fit(X, y)
    assert len(calls) == 4 and len(clf.history_) == 3  # the start, then 3 epochs
    assert clf.input_normalization_ == "tfidf" and clf.n_components_ == 30  # n_features
    inputs = TfidfTransformer(sublinear_tf=True).fit(X).transform(X).toarray()
    centroids = np.array([inputs[y == k].mean(axis=0) for k in range(12)])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    np.testing.assert_allclose(clf.decision_function(X), 10 * inputs @ centroids.T, atol=1e-4)
    # an epoch that beats the start is kept instead
    calls.clear()
    monkeypatch.setattr(
        SNMClassifier, "validation_score", lambda self, X, y: len(calls.append(1) or calls)
    )
    trained = SNMClassifier(random_state=0, **params).fit(X, y)
    assert np.abs(trained.decision_function(X) - clf.decision_function(X)).max() > 0.1


def test_input_normalization_is_applied_at_fit_and_prediction():
    X, y = bag_of_words()
    params = dict(n_components=16, n_negatives=8, max_epochs=2, tol=None, random_state=0)
    for option, transform in [
        ("tfidf", TfidfTransformer(sublinear_tf=True).fit(X).transform),
        ("l2", normalize),
    ]:
        inside = SNMClassifier(input_normalization=option, **params).fit(X, y)
        outside = SNMClassifier(input_normalization=None, **params).fit(transform(X), y)
        np.testing.assert_allclose(
            inside.decision_function(X[:20]),
            outside.decision_function(transform(X[:20])),
            atol=1e-5,
        )
    # "auto": tf-idf for sparse non-negative inputs only
    assert SNMClassifier(**params).fit(X.toarray(), y).input_normalization_ is None
    negative = X.copy()
    negative.data[0] = -1.0
    assert SNMClassifier(**params).fit(negative, y).input_normalization_ is None
    with pytest.raises(ValueError, match="input_normalization='tfidf' needs non-negative"):
        SNMClassifier(input_normalization="tfidf", **params).fit(negative, y)


def test_weight_averaging_averages_the_label_table_and_the_network():
    # The label table is updated by the row-sparse optimiser, outside autograd: the average of
    # WeightAveraging must still cover it (and the encoder, and the learned score scale).
    X, y = clustered(n_samples=128, n_labels=10)
    decay = 0.6

    class Record(Callback):
        def on_train_begin(self, estimator, X, y, validation):
            self.states = []

        def on_batch_end(self, estimator, batch, loss):
            self.states.append(
                {k: v.detach().clone() for k, v in estimator.network_.state_dict().items()}
            )

    clf = SNMClassifier(
        callbacks=[Record(), WeightAveraging(decay=decay)],
        early_stopping=False,
        validation_fraction=None,
        tol=None,
        random_state=0,
        **dict(FAST, max_epochs=2, batch_size=32),
    ).fit(X, y)
    (record,) = [c for c in clf.callbacks_ if isinstance(c, Record)]
    states = record.states
    assert len(states) == 8  # 4 steps an epoch, 2 epochs
    expected = dict(states[0])
    for state in states[1:]:
        expected = {k: decay * v + (1 - decay) * state[k] for k, v in expected.items()}
    fitted = clf.network_.state_dict()
    for name in ("label_embeddings.weight", "log_scale", "encoder.layers.0.weight"):
        torch.testing.assert_close(fitted[name], expected[name])
        assert not torch.equal(fitted[name], states[-1][name])  # not the last training step
    table = expected["label_embeddings.weight"]
    scores = normalize(clf.network_(torch.tensor(X[:5], dtype=torch.float32)).detach().numpy())
    assert np.array_equal(
        clf.predict(X[:5]),
        clf.classes_[np.argmax(scores @ normalize(table.numpy()).T, axis=1)],
    )


# ---------------------------------------------------------------------- neighbour votes


def test_neighbor_votes_blend_into_every_prediction_and_leave_training_alone():
    X, Y = multilabel(n_samples=200, n_labels=12)
    X_test = X[:40] + 0.3 * np.random.RandomState(1).normal(size=X[:40].shape)
    params = dict(FAST, hidden_layer_sizes=(), random_state=0)
    plain = SNMClassifier(neighbor_weight=0.0, **params).fit(X, Y)
    assert plain.neighbor_weight_ == 0.0
    blended = SNMClassifier(neighbor_weight=0.4, n_neighbors=5, **params).fit(X, Y)
    assert plain.neighbor_embeddings_ is None
    # training and early stopping see the label scores alone
    assert [r["validation_score"] for r in plain.history_] == [
        r["validation_score"] for r in blended.history_
    ]
    embeddings = plain.forward(X_test).numpy()
    np.testing.assert_allclose(
        blended.neighbor_embeddings_, normalize(plain.forward(X).numpy()), atol=1e-6
    )
    scale = plain.network_.score_scale
    dense = 0.6 * plain.decision_function(X_test) + 0.4 * scale * brute_force_votes(
        embeddings, blended.neighbor_embeddings_, Y, 5
    )
    np.testing.assert_allclose(blended.decision_function(X_test), dense, atol=1e-4)
    assert_predictions_follow(blended, X_test, dense)
    restored = pickle.loads(pickle.dumps(blended))
    np.testing.assert_allclose(restored.decision_function(X_test), dense, atol=1e-4)


def test_the_calibration_scores_validation_rows_by_the_votes_of_the_other_rows(monkeypatch):
    """The probabilities are calibrated on the validation rows' best labels, blended with the
    votes of the fitting rows alone: a validation row never votes for its own labels."""
    X, y = clustered(n_samples=300, n_labels=20, noise=1.5)
    seen = []
    original = snm_module._calibration.fit_calibration

    def recording(scores, hits, **options):
        seen.append((np.array(scores), np.array(hits)))
        return original(scores, hits, **options)

    monkeypatch.setattr(snm_module._calibration, "fit_calibration", recording)
    params = dict(FAST, validation_fraction=0.3, neighbor_weight=0.5, centroid_weight=0.0)
    clf = SNMClassifier(random_state=0, **params).fit(X, y)
    train, held_out = train_test_split(
        np.arange(300), test_size=0.3, random_state=check_random_state(0)
    )
    Y = np.eye(20)[y]
    embeddings = clf.forward(X).numpy()
    label_scores = embeddings[held_out] @ clf.network_.label_table().numpy().T
    scale = clf.network_.score_scale

    def blended(keys, labels):
        votes = brute_force_votes(embeddings[held_out], normalize(keys), labels, clf.n_neighbors)
        return 0.5 * label_scores + 0.5 * scale * votes

    (scores, hits), k = seen[0], seen[0][0].shape[1]
    expected = blended(embeddings[train], Y[train])
    top = brute_force_top_k(expected, k)
    np.testing.assert_allclose(scores, np.take_along_axis(expected, top, axis=1), atol=1e-4)
    np.testing.assert_array_equal(hits, np.take_along_axis(Y[held_out], top, axis=1) > 0)
    # every training row votes at prediction, the validation rows among them
    leaky = blended(embeddings, Y)
    assert not np.allclose(np.sort(leaky, axis=1)[:, -k:][:, ::-1], scores, atol=1e-3)


def test_neighbor_votes_with_faiss_search_match_the_exact_search():
    """``search="faiss"`` gives the candidates of the blend: where the HNSW search of the label
    scores is exact (12 labels), the blended top-k equals the exact search's, scores included."""
    pytest.importorskip("faiss")
    X, Y = multilabel(n_samples=200, n_labels=12)
    X_test = X[:40] + 0.3 * np.random.RandomState(1).normal(size=X[:40].shape)
    params = dict(FAST, hidden_layer_sizes=(), random_state=0, n_neighbors=5)
    clf = SNMClassifier(neighbor_weight=0.4, **params).fit(X, Y)
    embeddings = clf.forward(X_test).numpy()
    scale = clf.network_.score_scale
    label_scores = embeddings @ clf.network_.label_table().numpy().T
    dense = 0.6 * label_scores + 0.4 * scale * brute_force_votes(
        embeddings, clf.neighbor_embeddings_, Y, 5
    )
    # the votes change the top-k here: a faiss path that skipped the blend would fail
    assert (brute_force_top_k(dense, 1) != brute_force_top_k(label_scores, 1)).any()
    for k in (1, 3):
        exact_labels, exact_scores = clf.predict_top_k(X_test, k, return_scores=True)
        clf.set_params(search="faiss")
        # the premise: HNSW finds the exact top-k of the label scores on these data
        _, hnsw = clf._predictor().search.top_k(embeddings, k)
        np.testing.assert_array_equal(
            np.sort(hnsw, axis=1), np.sort(brute_force_top_k(label_scores, k), axis=1)
        )
        labels, scores = clf.predict_top_k(X_test, k, return_scores=True)
        np.testing.assert_array_equal(labels, exact_labels)
        np.testing.assert_allclose(scores, exact_scores, atol=1e-5)
        np.testing.assert_array_equal(labels, brute_force_top_k(dense, k))
        assert clf._predictor().search.index is not None  # the blend went through the index
        clf.set_params(search="exact")


def test_auto_neighbor_weight_is_the_best_on_the_validation_rows():
    """``neighbor_weight="auto"``: the weight with the best validation P@1 (the smallest among
    ties), the fitting rows voting; then every training row votes."""
    X, y = clustered(n_samples=300, n_labels=20, noise=1.5)
    clf = SNMClassifier(**dict(FAST, validation_fraction=0.3, random_state=0)).fit(X, y)
    train, held_out = train_test_split(
        np.arange(300), test_size=0.3, random_state=check_random_state(0)
    )
    Y = np.eye(20)[y]
    embeddings = clf.forward(X).numpy()
    keys = normalize(embeddings[train])
    votes = brute_force_votes(embeddings[held_out], keys, Y[train], clf.n_neighbors)
    scores = embeddings[held_out] @ clf.network_.label_table().numpy().T
    precision = []
    for weight in settings_module.NEIGHBOR_WEIGHTS:
        blend = (1 - weight) * scores + weight * clf.network_.score_scale * votes
        precision.append(np.mean(Y[held_out, brute_force_top_k(blend, 1)[:, 0]]))
    assert len(set(precision)) > 1  # the choice matters on these data
    assert clf.neighbor_weight_ == settings_module.NEIGHBOR_WEIGHTS[int(np.argmax(precision))]
    if clf.neighbor_weight_ > 0:
        np.testing.assert_allclose(clf.neighbor_embeddings_, normalize(embeddings), atol=1e-6)
    # the choice runs each row through the network once: the voting rows, then the
    # validation rows (for their candidates and their votes alike)
    forwarded = []
    original = clf.forward
    clf.forward = lambda X_rows, **kw: forwarded.append(X_rows.shape[0]) or original(X_rows, **kw)
    positives = sp.csr_matrix(Y.astype(np.int8))
    validation = (X[held_out], positives[held_out])
    train_rows = (X[train], positives[train], X[train])
    held_out_rows = clf._held_out_scoring(train_rows, validation, X[held_out])
    chosen = clf._choose_blend_weights(held_out_rows)
    assert chosen == (clf.neighbor_weight_, clf.centroid_weight_)
    assert sorted(forwarded) == sorted([len(train), len(held_out)])
    del clf.forward
    # without validation rows there is nothing to choose on: no votes
    unvalidated = SNMClassifier(**dict(FAST, validation_fraction=None, random_state=0))
    unvalidated.set_params(early_stopping=False, max_epochs=2).fit(X, y)
    assert unvalidated.neighbor_weight_ == 0.0 and unvalidated.neighbor_embeddings_ is None


def test_encoder_start_choices():
    """The identity when the embedding holds every feature; the principal directions or a
    Gaussian projection otherwise (``encoder_init_``; the rule is in test_snm_settings)."""
    X, y = bag_of_words(n_samples=120, n_features=30)
    params = dict(FAST, hidden_layer_sizes=(), max_epochs=1, tol=None, random_state=0)
    exact = SNMClassifier(**dict(params, n_components=40)).fit(X, y)
    assert exact.encoder_init_ == "identity"  # 30 features, 40 dimensions
    few = dict(params, n_components=8)
    with pytest.warns(FutureWarning, match="'encoder_init' is deprecated"):
        svd = SNMClassifier(**few, encoder_init="svd").fit(X, y)
        random = SNMClassifier(**few, encoder_init="random").fit(X, y)
    assert (svd.encoder_init_, random.encoder_init_) == ("svd", "random")
    assert not np.allclose(svd.decision_function(X), random.decision_function(X))
    hidden = SNMClassifier(**dict(few, hidden_layer_sizes=(16,))).fit(X, y)
    assert hidden.encoder_init_ is None


def test_auto_neighbor_weights_are_compared_on_the_validation_rows(monkeypatch):
    X, y = clustered(n_samples=240, n_labels=12)
    params = dict(FAST, max_epochs=2, tol=None, random_state=0)
    compared = set()
    original = Blend.parts
    monkeypatch.setattr(
        Blend,
        "parts",
        lambda self, *chunk: compared.add(chunk[-1]) or original(self, *chunk),
    )
    SNMClassifier(**params).fit(X, y)
    assert compared == set(settings_module.NEIGHBOR_WEIGHTS)


@pytest.mark.usefixtures("sparse_layer_for_few_features")
def test_sparse_input_steps_read_only_the_features_present():
    """A fit's steps update the input layer's rows of the features present, no other row."""
    X, y = bag_of_words(n_samples=64, n_features=200)
    X = X.tolil()
    X[:, 150:] = 0  # features 150.. never appear
    X = X.tocsr()
    X.eliminate_zeros()

    class StartWeights(Callback):
        def on_train_begin(self, estimator, **kwargs):
            self.weight = estimator.module_.encoder.layers[0].weight.detach().clone()

    # Every row trains (none held out) with all its features (no input dropout).
    params = dict(FAST, hidden_layer_sizes=(), max_epochs=2, tol=None, random_state=0,
                  validation_fraction=None, early_stopping=False, input_dropout=0.0)  # fmt: skip
    clf = SNMClassifier(**params, callbacks=[StartWeights()]).fit(X, y)
    layer = clf.module_.encoder.layers[0]
    assert clf.sparse_input_ and isinstance(layer, SparseLinear)
    changed = (layer.weight.detach() != clf.callbacks_[-1].weight).any(dim=1).numpy()[:-1]
    np.testing.assert_array_equal(np.flatnonzero(changed), np.unique(X.indices))


def test_auto_search_uses_the_calibrated_ivf_index_on_many_labels(monkeypatch):
    pytest.importorskip("faiss")
    # 1,200 labels whose prototypes form 30 groups: label vectors with a cell structure.
    rng = np.random.RandomState(0)
    groups = rng.normal(size=(30, 16))
    prototypes = groups[np.arange(1200) // 40] + 0.3 * rng.normal(size=(1200, 16))
    y = np.arange(2400) % 1200
    X = prototypes[y] + 0.05 * rng.normal(size=(2400, 16))
    # Two epochs at Adagrad's base rate keep the label vectors near their grouped centroids.
    # The label scores alone (an index holds no input-space centroid term).
    params = dict(FAST, hidden_layer_sizes=(), n_components=16, max_epochs=2, tol=None,
                  label_optimizer="adagrad", label_learning_rate=0.005, centroid_weight=0.0,
                  random_state=0)  # fmt: skip
    small = SNMClassifier(**params).fit(X, y)
    assert (small.search_, small.search_recall_, small.search_probes_) == ("exact", 1.0, None)
    monkeypatch.setattr(settings_module, "AUTO_IVF_LABELS", 1000)
    # 1,200 labels: 30 cells, probed up to 7
    clf = SNMClassifier(**params).fit(X, y)
    assert clf.search_ == "ivf" and clf.search_recall_ >= 0.99 and clf.search_probes_ >= 1
    approximate = clf.predict_top_k(X, 5)
    exact = clf.set_params(search="exact").predict_top_k(X, 5)
    assert overlap_recall(approximate, exact) > 0.97
    restored = pickle.loads(pickle.dumps(clf.set_params(search="auto")))
    np.testing.assert_array_equal(restored.predict_top_k(X, 5), approximate)  # rebuilt alike
    # A recall target no number of probes reaches: "auto" falls back to the exact search.
    monkeypatch.setattr(label_search_module, "RECALL_TARGET", 1.01)
    fallback = SNMClassifier(**params).fit(X, y)
    assert fallback.search_ == "exact" and fallback.search_probes_ is None
    assert fallback.search_recall_ == 1.0
    forced = SNMClassifier(**dict(params, search="ivf")).fit(X, y)
    assert forced.search_ == "ivf" and forced.search_recall_ < 1.01
    # With the nearest-centroid rule on, every prediction scans the labels exactly.
    blended = SNMClassifier(**dict(params, centroid_weight=2.0)).fit(X, y)
    assert (blended.search_, blended.search_recall_) == ("exact", 1.0)


MEMORY_SCRIPT = """
import json, sys
import numpy as np
import sklearn
from skrank import SNMClassifier
from skrank.datasets import make_extreme_classification
from skrank.utils._memory import _proc_bytes

def resident(field):
    return _proc_bytes("/proc/self/status", field)

X, Y = make_extreme_classification(n_samples=3000, n_features=20_000, n_labels=100_000,
                                   labels_per_row=2.0, random_state=0)
with open("/proc/self/clear_refs", "w") as clear:
    clear.write("5")  # the peak (VmHWM) counts from here
start = resident("VmRSS")
sklearn.set_config(working_memory=64)  # the chunks of the exact top-k search: 64 MiB
clf = SNMClassifier(n_components=32, n_negatives=64, max_epochs=1, tol=None,
                    validation_fraction=None, early_stopping=False, random_state=0).fit(X, Y)
top = clf.predict_top_k(X, 5)
json.dump({"growth": resident("VmHWM") - start, "shape": list(top.shape),
           "search": clf.search_}, sys.stdout)
"""


@pytest.mark.slow
def test_memory_stays_bounded_on_a_hundred_thousand_labels():
    """Fit and top-5 prediction on 3,000 rows and 10^5 labels, in a child process, with
    scikit-learn's working_memory at 64 MiB: its peak resident memory grows by less than
    250 MiB (imports and first calls included), where one dense rows x labels float32 matrix
    alone would take 1.1 GiB (tracemalloc does not see torch's allocations)."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)
    assert result["shape"] == [3000, 5]
    assert result["growth"] < 250 * 2**20, result


# ---------------------------------------------------------------------- labels without examples
def _with_empty_columns(Y, empty):
    """``Y`` with all-zero columns inserted at the positions ``empty`` of the result."""
    n_labels = Y.shape[1] + len(empty)
    trained = np.setdiff1d(np.arange(n_labels), empty)
    wide = np.zeros((Y.shape[0], n_labels), dtype=Y.dtype)
    wide[:, trained] = Y
    return wide, trained


def test_labels_without_a_positive_are_left_out_of_the_table_and_scored_lowest():
    X, Y = multilabel(n_samples=200, n_labels=12)
    wide, trained = _with_empty_columns(Y, [0, 5, 13])
    fit = dict(FAST, max_epochs=3, random_state=0, neighbor_weight=0.0)
    clf = SNMClassifier(**fit).fit(X, wide)
    np.testing.assert_array_equal(clf.trained_labels_, trained)
    assert clf.module_.label_embeddings.num_embeddings == 12
    # The same model as a fit on the columns with positives: same table, same draws.
    narrow = SNMClassifier(**fit).fit(X, Y)
    scores = clf.decision_function(X)
    np.testing.assert_array_equal(scores[:, trained], narrow.decision_function(X))
    assert np.all(scores[:, [0, 5, 13]] == UNTRAINED_LABEL_SCORE)
    assert np.isfinite(scores).all()
    top, top_scores = clf.predict_top_k(X, 15, return_scores=True)
    np.testing.assert_array_equal(top, brute_force_top_k(scores, 15))
    np.testing.assert_array_equal(top[:, :12], trained[narrow.predict_top_k(X, 12)])
    np.testing.assert_array_equal(top[:, 12:], np.tile([0, 5, 13], (len(X), 1)))
    np.testing.assert_array_equal(top_scores, np.take_along_axis(scores, top, axis=1))
    predicted = clf.predict(X)
    assert predicted.shape == wide.shape and not predicted[:, [0, 5, 13]].any()
    assert clf.score(X, wide) == pytest.approx(narrow.score(X, Y))


def test_labels_without_a_positive_leave_memory_and_negatives_to_the_others():
    """The table, the auto dimension and the negatives count the labels with examples."""
    X, Y = multilabel(n_samples=120, n_labels=6)
    wide, _ = _with_empty_columns(Y, list(range(6, 3006)))
    clf = SNMClassifier(**dict(FAST, max_epochs=1, n_negatives=64, random_state=0))
    with pytest.warns(UserWarning, match="the labels with a positive example, minus one"):
        clf.fit(X, wide)
    assert clf.n_negatives_ == 5
    assert clf.module_.label_embeddings.num_embeddings == 6
    assert clf.predict_top_k(X, 3).max() < 6


def test_fitting_needs_two_labels_with_a_positive():
    X, Y = multilabel(n_samples=50, n_labels=4)
    Y[:, 1:] = 0
    Y[:, 0] = 1
    with pytest.raises(ValueError, match="SNMClassifier needs"):
        SNMClassifier(**FAST).fit(X, Y)


def test_a_warm_start_refuses_positives_of_labels_the_table_lacks():
    X, Y = multilabel(n_samples=120, n_labels=6)
    wide, _ = _with_empty_columns(Y, [6])
    clf = SNMClassifier(**dict(FAST, max_epochs=1, warm_start=True, random_state=0))
    clf.fit(X, wide)
    table = clf.module_.label_embeddings.weight.detach().clone()
    clf.fit(X, wide)  # the same labels: continues
    assert not torch.equal(table, clf.module_.label_embeddings.weight)
    wide[0, 6] = 1
    with pytest.raises(ValueError, match=r"positives for 1 other labels \(e.g. column 6\)"):
        clf.fit(X, wide)


@pytest.mark.parametrize("neighbor_weight", [0.0, 0.3])
def test_centroid_weight_adds_the_centroid_rule_to_every_prediction(neighbor_weight):
    """``(1 - a) (v + b s cos) + a s vote``: the centroid rule joins the label scores before
    the votes blend with them; training and early stopping are unchanged."""
    X, Y = extreme()
    X_test, Y_test = extreme(n_samples=60, seed=1)
    params = dict(FAST_LINEAR, neighbor_weight=neighbor_weight, n_neighbors=5)
    plain = SNMClassifier(centroid_weight=0.0, **params).fit(X, Y)
    blended = SNMClassifier(centroid_weight=2.0, **params).fit(X, Y)
    assert plain.centroids_ is None and plain.centroid_weight_ == 0.0
    assert [r["validation_score"] for r in plain.history_] == [
        r["validation_score"] for r in blended.history_
    ]
    inputs = blended._normalize_inputs(X_test, fitting=False)  # TF-IDF, as the network reads
    trained = blended.trained_labels_
    centroids = brute_force_centroids(X.toarray(), Y.toarray()[:, trained])
    np.testing.assert_allclose(blended.centroids_.toarray(), centroids, atol=1e-5)
    scale = blended.network_.score_scale
    label_scores = blended.forward(inputs).numpy() @ blended.network_.label_table().numpy().T
    with_centroids = label_scores + 2.0 * scale * brute_force_cosines(X_test.toarray(), centroids)
    expected = plain.decision_function(X_test)  # the votes blended in, without the centroids
    expected[:, trained] += (1 - neighbor_weight) * (with_centroids - label_scores)
    np.testing.assert_allclose(blended.decision_function(X_test), expected, atol=1e-4)
    assert (brute_force_top_k(expected, 1) != plain.predict_top_k(X_test, 1)).any()
    assert_predictions_follow(blended, X_test, expected)
    hits = Y_test.toarray()[np.arange(60), brute_force_top_k(expected, 1)[:, 0]]
    assert blended.score(X_test, Y_test) == pytest.approx(np.mean(hits))  # Precision@1
    restored = pickle.loads(pickle.dumps(blended))
    np.testing.assert_allclose(restored.decision_function(X_test), expected, atol=1e-4)


def test_auto_centroid_weight_is_the_best_on_the_validation_rows():
    """``"auto"``: the weight of ``CENTROID_WEIGHTS`` with the best validation P@1 (the
    smallest among ties), the centroids of the fitting rows; then those of every row."""
    X, Y = extreme(n_samples=500)
    clf = SNMClassifier(**dict(FAST_LINEAR, validation_fraction=0.3, neighbor_weight=0.0)).fit(X, Y)
    assert clf.sparse_input_ and clf.centroid_weight_ in settings_module.CENTROID_WEIGHTS
    train, held_out = train_test_split(np.arange(500), test_size=0.3, random_state=0)
    inputs = clf._normalize_inputs(X, fitting=False)
    Y_table = Y.toarray()[:, clf.trained_labels_]
    centroids = brute_force_centroids(X[train].toarray(), Y_table[train])  # rows as given
    cosines = brute_force_cosines(X[held_out].toarray(), centroids)
    scores = clf.forward(inputs[held_out]).numpy() @ clf.network_.label_table().numpy().T
    precision = []
    for weight in settings_module.CENTROID_WEIGHTS:
        top = brute_force_top_k(scores + weight * clf.network_.score_scale * cosines, 1)[:, 0]
        precision.append(np.mean(Y_table[held_out, top]))
    assert len(set(precision)) > 1  # the choice matters on these data
    assert clf.centroid_weight_ == settings_module.CENTROID_WEIGHTS[int(np.argmax(precision))] > 0
    np.testing.assert_allclose(
        clf.centroids_.toarray(), brute_force_centroids(X.toarray(), Y_table), atol=1e-5
    )
    positives = sp.csr_matrix(Y_table.astype(np.int8))
    train_rows = (inputs[train], positives[train], X[train])
    validation = (inputs[held_out], positives[held_out])
    chosen = clf._choose_blend_weights(clf._held_out_scoring(train_rows, validation, X[held_out]))
    assert chosen == (0.0, clf.centroid_weight_)


def test_auto_centroid_weight_is_zero_where_it_does_not_apply():
    X, Y = extreme()
    unvalidated = SNMClassifier(**dict(FAST_LINEAR, validation_fraction=None, early_stopping=False))
    assert unvalidated.fit(X, Y).centroid_weight_ == 0.0


def test_auto_centroid_weight_is_zero_with_an_index_search():
    pytest.importorskip("faiss")
    X, Y = extreme()
    indexed = SNMClassifier(**dict(FAST_LINEAR, search="faiss")).fit(X, Y)
    assert indexed.centroid_weight_ == 0.0 and indexed.centroids_ is None


def test_centroid_weight_refuses_an_index_search():
    X, Y = extreme(n_samples=200)
    with pytest.raises(ValueError, match=r"search='ivf' .*centroid_weight=2\.0"):
        SNMClassifier(**dict(FAST_LINEAR, centroid_weight=2.0, search="ivf")).fit(X, Y)
    clf = SNMClassifier(**dict(FAST_LINEAR, centroid_weight=2.0)).fit(X, Y)
    clf.set_params(search="faiss")  # after the fit: refused at prediction
    with pytest.raises(ValueError, match=r"search='faiss' .*centroid_weight_=2\.0"):
        clf.predict_top_k(X[:5], 2)
    clf.set_params(search="exact")
    assert clf.predict_top_k(X[:5], 2).shape == (5, 2)


def test_centroids_and_predictions_of_memory_mapped_rows_are_those_of_rows_in_memory(tmp_path):
    rng = np.random.RandomState(0)
    y = np.arange(300) % 6
    X = rng.normal(size=(6, 20))[y] + 0.5 * rng.normal(size=(300, 20))
    mapped = np.memmap(tmp_path / "X.f64", dtype=np.float64, mode="w+", shape=X.shape)
    mapped[:] = X
    params = dict(FAST_LINEAR, centroid_weight=2.0)
    in_memory = SNMClassifier(**params).fit(X, y)
    from_file = SNMClassifier(**params).fit(mapped, y)
    np.testing.assert_allclose(from_file.centroids_.toarray(), in_memory.centroids_.toarray())
    np.testing.assert_allclose(
        from_file.decision_function(mapped), in_memory.decision_function(X), atol=1e-5
    )


def _with_indices_reversed(matrix):
    """``matrix`` as a CSR matrix with each row's entries stored in reverse order (the same
    matrix, non-canonical storage)."""
    matrix = sp.csr_matrix(matrix, copy=True)
    for start, stop in zip(matrix.indptr[:-1], matrix.indptr[1:], strict=True):
        matrix.indices[start:stop] = matrix.indices[start:stop][::-1].copy()
        matrix.data[start:stop] = matrix.data[start:stop][::-1].copy()
    matrix.has_sorted_indices = False
    return matrix


def test_the_order_of_stored_indices_does_not_change_the_fit():
    """Equal sparse X and Y stored with their indices in another order train the same model:
    the positive drawn for a row, its negatives, the votes and the centroids read the labels
    in one order whatever the storage."""
    X, Y = extreme(n_samples=240)
    X, Y = sp.csr_matrix(X), sp.csr_matrix(Y)
    X.sort_indices()
    Y.sort_indices()
    assert (np.diff(Y.indptr) > 1).any()  # rows whose labels can be stored in another order
    params = dict(FAST_LINEAR, neighbor_weight=0.3, centroid_weight=1.0)
    canonical = SNMClassifier(**params).fit(X, Y)
    reordered = SNMClassifier(**params).fit(_with_indices_reversed(X), _with_indices_reversed(Y))
    np.testing.assert_array_equal(canonical.decision_function(X), reordered.decision_function(X))
    np.testing.assert_array_equal(
        canonical.predict_top_k(_with_indices_reversed(X), 5), canonical.predict_top_k(X, 5)
    )
