"""Tests of SOPRCEmbedder: learning, inputs and outputs, bad input, persistence."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import host_syncs
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from torch import nn

from skrank import SOPRCEmbedder
from skrank.embedding._soprc_embedder import averaging_fraction
from skrank.exceptions import DivergenceWarning
from skrank.metrics import mean_auprc_score
from skrank.nn import Callback, Checkpoint, WeightAveraging

# These tiny models train faster on one thread than on a busy thread pool.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


FAST = dict(hidden_layer_sizes=(32,), n_components=8, batch_size=32, max_epochs=4, device="cpu")


def _data(n_samples=240, seed=0):
    """Four classes in 20 dimensions, only 5 of them informative."""
    X, y = make_classification(
        n_samples=n_samples,
        n_features=20,
        n_informative=5,
        n_redundant=0,
        n_classes=4,
        n_clusters_per_class=1,
        class_sep=2.0,
        random_state=seed,
    )
    return X.astype(np.float32), y


def test_learns_an_embedding_better_than_the_raw_features():
    X, y = _data(400)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0, stratify=y)
    model = SOPRCEmbedder(**{**FAST, "max_epochs": 8}, random_state=0).fit(X_train, y_train)
    raw = mean_auprc_score(X_test, y_test, metric="cosine")
    learned = model.score(X_test, y_test)
    assert learned > raw + 0.1, (raw, learned)
    assert model.n_iter_ == 8 and len(model.history_) == 8
    assert model.history_[-1]["loss"] < model.history_[0]["loss"]


def test_transform_returns_unit_rows_and_labels_can_be_any_hashable():
    X, y = _data()
    names = np.array(["ant", "bee", "cat", "dog"], dtype=object)[y]
    model = SOPRCEmbedder(**FAST, random_state=0).fit(X, names)
    np.testing.assert_array_equal(model.classes_, ["ant", "bee", "cat", "dog"])
    embedding = model.transform(X)
    assert embedding.shape == (X.shape[0], 8) and embedding.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embedding, axis=1), 1, rtol=1e-5)
    assert model.score(X, names) == pytest.approx(mean_auprc_score(embedding, names))
    np.testing.assert_allclose(model.transform(sp.csr_matrix(X)), embedding, rtol=1e-5)
    assert SOPRCEmbedder.retrieval_metric == "cosine"


def test_same_random_state_same_model():
    X, y = _data()
    a = SOPRCEmbedder(**FAST, random_state=3).fit(X, y).transform(X)
    b = SOPRCEmbedder(**FAST, random_state=3).fit(X, y).transform(X)
    c = SOPRCEmbedder(**FAST, random_state=4).fit(X, y).transform(X)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_auxiliary_vectors_are_sorted_estimates_of_positive_scores():
    X, y = _data()
    model = SOPRCEmbedder(**FAST, tpr_source="auxiliary", random_state=0).fit(X, y)
    loss = model.criterion_
    counts = np.bincount(y)
    assert loss.auxiliary_lengths.tolist() == list(counts - 1)
    embedding = model.transform(X)
    for c in range(4):
        vector = loss.auxiliary_vector(c)
        assert torch.all(torch.diff(vector) >= -1e-6)
        members = embedding[y == c]
        scores = members @ members.T
        true_median = np.median(scores[~np.eye(len(members), dtype=bool)])
        assert abs(float(vector.median()) - true_median) < 0.3


def test_default_batch_tpr_keeps_no_auxiliary_state():
    X, y = _data()
    model = SOPRCEmbedder(**FAST, random_state=0).fit(X, y)
    assert model.criterion_.tpr_source == "batch"
    assert model.criterion_.auxiliary.numel() == 0 and not model.criterion_.class_seen.any()
    resumed = pickle.loads(pickle.dumps(model)).set_params(warm_start=True, max_epochs=1)
    resumed.fit(X, y)
    assert resumed.criterion_.auxiliary.numel() == 0


def test_validation_history_and_early_stopping():
    X, y = _data(300)
    model = SOPRCEmbedder(
        **{**FAST, "max_epochs": 30},
        validation_fraction=0.25,
        early_stopping=True,
        tol=0.0,
        n_iter_no_change=3,
        random_state=0,
    ).fit(X, y)
    scores = [record["validation_score"] for record in model.history_]
    assert all(0 < s <= 1 for s in scores)
    if model.converged_:
        assert len(scores) - 1 - int(np.argmax(scores)) == 3


@pytest.mark.parametrize(
    "ablation",
    [{"prior": "batch"}, {"tpr_source": "auxiliary"}, {"lambda_pos": 0.0, "lambda_neg": 0.0}],
)
def test_ablations_learn(ablation):
    X, y = _data(400)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0, stratify=y)
    model = SOPRCEmbedder(**{**FAST, "max_epochs": 8}, random_state=0, **ablation)
    model.fit(X_train, y_train)
    for name, value in ablation.items():
        assert getattr(model.criterion_, name) == value
    raw = mean_auprc_score(X_test, y_test, metric="cosine")
    assert model.score(X_test, y_test) > raw + 0.1


def test_user_module_replaces_the_mlp_and_is_not_modified():
    X, y = _data()
    torch.manual_seed(0)
    user_module = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 5))
    before = [p.detach().clone() for p in user_module.parameters()]
    model = SOPRCEmbedder(user_module, **{**FAST, "n_components": None}, random_state=0).fit(X, y)
    assert model.n_components_ == 5 and model.transform(X).shape == (X.shape[0], 5)
    np.testing.assert_allclose(np.linalg.norm(model.transform(X), axis=1), 1, rtol=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(before, user_module.parameters(), strict=True))
    assert model.module_ is not user_module


def test_user_module_of_another_width_than_n_components_is_refused():
    X, y = _data()
    user_module = nn.Linear(20, 5)
    with pytest.raises(ValueError, match=r"maps to 5 dimensions but n_components=8"):
        SOPRCEmbedder(user_module, **FAST).fit(X, y)


def test_feature_names_and_pandas_output():
    pd = pytest.importorskip("pandas")
    X, y = _data()
    model = SOPRCEmbedder(**FAST, random_state=0).fit(X, y)
    names = model.get_feature_names_out()
    assert list(names) == [f"soprcembedder{i}" for i in range(8)]
    frame = model.set_output(transform="pandas").transform(pd.DataFrame(X))
    assert list(frame.columns) == list(names)


def test_warm_start_continues_and_checks_classes():
    X, y = _data()
    model = SOPRCEmbedder(**FAST, warm_start=True, random_state=0).fit(X, y)
    module, first = model.module_, model.transform(X)
    model.fit(X, y)
    assert model.module_ is module and len(model.history_) == 2 * FAST["max_epochs"]
    assert not np.array_equal(first, model.transform(X))
    with pytest.raises(ValueError, match="classes of the previous fit"):
        model.fit(X, (y + 1) % 5)


def test_warm_start_with_other_features_is_refused_and_keeps_the_fit():
    # As MLPClassifier(warm_start=True): the features must be those of the previous fit.
    X, y = _data()
    model = SOPRCEmbedder(**FAST, warm_start=True, random_state=0).fit(X, y)
    embedding = model.transform(X)
    with pytest.raises(ValueError, match="X has 19 features, but SOPRCEmbedder is expecting 20"):
        model.fit(X[:, :19], y)
    assert model.n_features_in_ == 20
    np.testing.assert_array_equal(model.transform(X), embedding)
    model.set_params(warm_start=False).fit(X[:, :19], y)  # a cold fit starts afresh
    assert model.transform(X[:, :19]).shape == (X.shape[0], 8)


@pytest.mark.parametrize("batch_size", [3, 7])
def test_batch_of_fewer_than_two_groups_names_the_users_parameters(batch_size):
    # The sampler saw batch_size // samples_per_class * samples_per_class (0 or 4), and said so.
    X, y = _data()
    model = SOPRCEmbedder(**dict(FAST, batch_size=batch_size), samples_per_class=4)
    message = f"batch_size={batch_size} holds fewer than two classes of samples_per_class=4"
    with pytest.raises(ValueError, match=message + r".*use batch_size >= 8"):
        model.fit(X, y)
    assert not hasattr(model, "module_")


def test_an_int_hidden_layer_sizes_is_one_layer_as_in_mlp_classifier():
    # MLPClassifier(hidden_layer_sizes=16) is one layer of 16; here it was an InvalidParameterError.
    X, y = _data()
    params = dict(FAST, random_state=0)
    as_int = SOPRCEmbedder(**{**params, "hidden_layer_sizes": 16}).fit(X, y)
    as_tuple = SOPRCEmbedder(**{**params, "hidden_layer_sizes": (16,)}).fit(X, y)
    np.testing.assert_array_equal(as_int.transform(X), as_tuple.transform(X))
    assert as_int.module_.layers[0].out_features == 16


def test_bad_input_gets_clear_errors():
    X, y = _data()
    model = SOPRCEmbedder(**FAST)
    with pytest.raises(ValueError, match="only one class"):
        model.fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="two or more items"):
        model.fit(X[:10], np.arange(10))
    X_nan = X.copy()
    X_nan[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(X_nan, y)
    with pytest.raises(ValueError, match="two or more items"):  # float labels, all distinct
        model.fit(X, np.linspace(0, 1, X.shape[0]))
    model.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.transform(X[:, :5])
    X_inf = X.copy()
    X_inf[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        model.transform(X_inf)
    with pytest.raises(ValueError, match="2-D tensor"):
        SOPRCEmbedder(nn.Flatten(0), **FAST).fit(X, y)
    with pytest.raises(ValueError, match="validation set"):
        # two singletons held out (classes of one item prevent stratification)
        one_pair = np.r_[0, 0, np.arange(1, 11)]
        SOPRCEmbedder(**FAST, validation_fraction=0.2, random_state=0).fit(X[:12], one_pair)
    with pytest.raises(ValueError, match="batch_size"):
        SOPRCEmbedder(**{**FAST, "batch_size": 6}).fit(X, y)
    # sklearn's split error named its own test_size, not the estimator's parameter
    message = (
        r"validation_fraction=0.01 cannot split these 240 training items: The test_size = 3 "
        r"should be greater or equal to the number of classes = 4.*stratified split"
    )
    with pytest.raises(ValueError, match=message):
        SOPRCEmbedder(**FAST, validation_fraction=0.01).fit(X, y)


class _ExplodingModule(nn.Module):
    """A linear map whose output becomes NaN from the third training step on."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(20, 4)
        self.steps = 0

    def forward(self, x):
        if self.training:
            self.steps += 1
            if self.steps >= 3:
                return self.linear(x) * float("nan")
        return self.linear(x)


def test_divergence_stops_with_a_warning_and_keeps_finite_weights():
    X, y = _data()
    with pytest.warns(DivergenceWarning, match="non-finite"):
        model = SOPRCEmbedder(_ExplodingModule(), **{**FAST, "n_components": None}).fit(X, y)
    assert np.all(np.isfinite(model.transform(X)))
    assert all(np.isfinite(p.detach().numpy()).all() for p in model.module_.parameters())


def test_pickle_and_joblib_round_trips(tmp_path):
    X, y = _data()
    model = SOPRCEmbedder(**FAST, tpr_source="auxiliary", random_state=0).fit(X, y)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(model.transform(X), restored.transform(X))
    assert model.criterion_.auxiliary.abs().sum() > 0  # the vectors were fitted
    torch.testing.assert_close(restored.criterion_.auxiliary, model.criterion_.auxiliary)
    path = tmp_path / "embedder.joblib"
    joblib.dump(model, path)
    np.testing.assert_array_equal(model.transform(X), joblib.load(path).transform(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert restored.score(X, y) == pytest.approx(model.score(X, y))


def test_default_weight_averaging_is_an_ema_over_a_fraction_of_the_steps():
    X, y = _data()
    model = SOPRCEmbedder(**FAST, random_state=0).fit(X, y)
    (averaging,) = [c for c in model.callbacks_ if isinstance(c, WeightAveraging)]
    steps = FAST["max_epochs"] * len(model.sampler_)
    assert averaging.decay == pytest.approx(1 - 1 / (0.4 * steps))
    assert averaging.n_averaged_ == steps
    # the kept weights are the average, not the last step's: a plain fit differs only there
    plain = SOPRCEmbedder(**FAST, weight_averaging=None, random_state=0).fit(X, y)
    assert not any(isinstance(c, WeightAveraging) for c in plain.callbacks_)
    assert [r["loss"] for r in plain.history_] == [r["loss"] for r in model.history_]
    assert not np.allclose(model.transform(X), plain.transform(X))
    # a WeightAveraging in callbacks replaces the default; None turns it off
    own = SOPRCEmbedder(**FAST, callbacks=[WeightAveraging(decay=0.5)], random_state=0).fit(X, y)
    assert [c.decay for c in own.callbacks_ if isinstance(c, WeightAveraging)] == [0.5]
    with pytest.raises(RuntimeError, match="Only one WeightAveraging callback"):
        SOPRCEmbedder(**FAST, callbacks=[WeightAveraging(), WeightAveraging()]).fit(X, y)


def test_averaging_fraction_follows_the_share_of_the_classes_a_batch_holds():
    assert averaging_fraction(50, 30) == pytest.approx(0.4)  # every class in every batch
    assert averaging_fraction(50, 50) == pytest.approx(0.4)
    assert averaging_fraction(50, 75) == pytest.approx(0.4 * 50 / 75)
    assert averaging_fraction(50, 100) == pytest.approx(0.2)
    assert averaging_fraction(50, 300) == pytest.approx(0.2)


def test_auto_weight_averaging_shortens_the_horizon_when_batches_hold_few_classes():
    X, y = _data(n_samples=240)
    n_classes = np.unique(y).shape[0]
    # 2 classes a batch out of n_classes >= 4: the horizon is 0.2 of the steps
    model = SOPRCEmbedder(**{**FAST, "batch_size": 8}, random_state=0).fit(X, y)
    assert model.sampler_.classes_per_batch == 2 and n_classes >= 4
    (averaging,) = [c for c in model.callbacks_ if isinstance(c, WeightAveraging)]
    steps = FAST["max_epochs"] * len(model.sampler_)
    assert averaging.decay == pytest.approx(1 - 1 / (0.2 * steps))
    explicit = SOPRCEmbedder(**{**FAST, "batch_size": 8}, weight_averaging=0.2, random_state=0)
    np.testing.assert_array_equal(explicit.fit(X, y).transform(X), model.transform(X))


class _RecordPriorWeight(Callback):
    def on_train_begin(self, estimator, X, y, validation):
        self.weights = []

    def on_batch_begin(self, estimator, batch):
        self.weights.append(estimator.criterion_.dataset_prior_weight)


def test_the_prior_warms_up_from_the_batch_rate_over_a_fraction_of_the_steps():
    X, y = _data()
    model = SOPRCEmbedder(**FAST, callbacks=[_RecordPriorWeight()], random_state=0).fit(X, y)
    steps = FAST["max_epochs"] * len(model.sampler_)
    weights = model.callbacks_[-1].weights
    np.testing.assert_allclose(weights, np.minimum(np.arange(steps) / (0.25 * steps), 1))
    assert model.criterion_.dataset_prior_weight == 1.0
    # a warm start trains on with the dataset prior
    model.set_params(warm_start=True).fit(X, y)
    assert model.callbacks_[-1].weights == [1.0] * steps
    # no warm-up: the dataset prior throughout; the batch prior ignores the weight
    for params in ({"prior_warmup": None}, {"prior": "batch"}):
        plain = SOPRCEmbedder(**FAST, **params, callbacks=[_RecordPriorWeight()]).fit(X, y)
        assert plain.callbacks_[-1].weights == [1.0] * steps
    # the warm-up reaches the steps: the first epoch's loss differs from the dataset prior's
    dataset = SOPRCEmbedder(**FAST, prior_warmup=None, random_state=0).fit(X, y)
    fresh = SOPRCEmbedder(**FAST, random_state=0).fit(X, y)
    assert fresh.history_[0]["loss"] != dataset.history_[0]["loss"]


def test_a_run_resumed_within_the_prior_warm_up_equals_an_uninterrupted_run(tmp_path):
    X, y = _data()
    path = tmp_path / "run.ckpt"
    params = dict(FAST, prior_warmup=0.9, random_state=0)
    straight = SOPRCEmbedder(**params).fit(X, y)

    class StopAfterTwoEpochs(Callback):  # a run of 4 epochs cut after its second
        def on_epoch_end(self, estimator, epoch, record):
            if epoch == 2:
                estimator.stop_training()

    SOPRCEmbedder(**params, callbacks=[Checkpoint(path), StopAfterTwoEpochs()]).fit(X, y)
    resumed = SOPRCEmbedder(**params, warm_start=True, callbacks=[Checkpoint(path)]).fit(X, y)
    assert [r["loss"] for r in resumed.history_] == [r["loss"] for r in straight.history_]
    np.testing.assert_array_equal(resumed.transform(X), straight.transform(X))


def test_an_epoch_reads_nothing_back_from_the_device():
    """Steps, batch sampling, prior warm-up and weight averaging of an epoch hold no
    host-syncing op: a fit of two epochs syncs as often as a fit of one (the epoch's one
    read of its loss, a copy to the host, is no such op on the CPU)."""
    X, y = _data(96)

    def syncs(epochs):
        model = SOPRCEmbedder(**{**FAST, "max_epochs": epochs}, random_state=0)
        return host_syncs(lambda: model.fit(X, y))

    assert syncs(2) == syncs(1)
