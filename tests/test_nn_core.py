"""Tests of the shared torch core through a minimal estimator built on it."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.base import RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from skrank.exceptions import DivergenceWarning
from skrank.nn import MLP, BaseTorchEstimator, resolve_device
from skrank.nn import _base as base_module
from skrank.nn._modules import module_output_dim
from skrank.sampling import ClassBalancedBatchSampler, ShuffledBatchSampler


class LinearTorchRegressor(RegressorMixin, BaseTorchEstimator):
    """Least squares by SGD on the shared core: the smallest estimator that exercises it."""

    _parameter_constraints = dict(BaseTorchEstimator._torch_parameter_constraints)

    def __init__(
        self,
        optimizer="sgd",
        learning_rate=0.05,
        momentum=0.0,
        weight_decay=0.0,
        lr_milestones=None,
        lr_decay=0.1,
        batch_size=16,
        max_epochs=30,
        tol=None,
        n_iter_no_change=5,
        early_stopping=False,
        validation_fraction=None,
        warm_start=False,
        device="cpu",
        verbose=0,
        random_state=None,
    ):
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.lr_milestones = lr_milestones
        self.lr_decay = lr_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.warm_start = warm_start
        self.device = device
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y):
        self._validate_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", y_numeric=True)
        X_train, y_train, validation = self._split_validation(X, y)
        self._run_training(X_train, torch.as_tensor(y_train, dtype=torch.float32), validation)
        return self

    def _build_module(self, n_features):
        return nn.Linear(n_features, 1)

    def _batch_sampler(self, targets, random_state):
        return ShuffledBatchSampler(targets.shape[0], self.batch_size, random_state)

    def _batch_loss(self, inputs, targets, indices):
        prediction = self.module_(inputs).squeeze(1)
        return ((prediction - targets[indices].to(inputs.device)) ** 2).mean()

    def _validation_score(self, X_val, y_val):
        return -np.mean((self._forward_in_chunks(X_val).ravel() - y_val) ** 2)

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", reset=False)
        return self._forward_in_chunks(X).ravel()


def _regression(n=200, d=5, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, d))
    coef = rng.normal(size=d)
    return X, X @ coef + 0.01 * rng.normal(size=n)


def test_training_fits_a_linear_model_and_records_history():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=40, random_state=0).fit(X, y)
    assert model.score(X, y) > 0.99
    assert model.n_iter_ == 40 and len(model.history_) == 40
    losses = [record["loss"] for record in model.history_]
    assert losses[-1] < 0.05 * losses[0]
    assert {"epoch", "loss", "learning_rate", "duration"} <= set(model.history_[0])
    assert model.device_ == "cpu"


def test_same_random_state_gives_same_model_and_leaves_global_rng_alone():
    X, y = _regression()
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = LinearTorchRegressor(max_epochs=3, random_state=7).fit(X, y)
    after = torch.rand(1)
    b = LinearTorchRegressor(max_epochs=3, random_state=7).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert torch.equal(before, after)
    c = LinearTorchRegressor(max_epochs=3, random_state=8).fit(X, y)
    assert not np.array_equal(a.predict(X), c.predict(X))


def test_sparse_input_matches_dense():
    X, y = _regression()
    X[X < 0.5] = 0
    dense = LinearTorchRegressor(max_epochs=5, random_state=0).fit(X, y)
    sparse = LinearTorchRegressor(max_epochs=5, random_state=0).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(dense.predict(X), sparse.predict(sp.csr_matrix(X)), rtol=1e-5)


def test_step_decay_at_milestones():
    X, y = _regression()
    model = LinearTorchRegressor(
        max_epochs=5, lr_milestones=[2, 4], lr_decay=0.5, learning_rate=0.04, random_state=0
    ).fit(X, y)
    rates = [record["learning_rate"] for record in model.history_]
    np.testing.assert_allclose(rates, [0.04, 0.02, 0.02, 0.01, 0.01])
    with pytest.raises(ValueError, match="lr_milestones"):
        LinearTorchRegressor(lr_milestones=[0.5]).fit(X, y)


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_optimizers_all_train(optimizer):
    X, y = _regression()
    model = LinearTorchRegressor(optimizer=optimizer, max_epochs=30, random_state=0)
    assert model.fit(X, y).score(X, y) > 0.9


def test_warm_start_continues_training():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=2, warm_start=True, random_state=0).fit(X, y)
    first = model.predict(X)
    module = model.module_
    model.fit(X, y)
    assert model.module_ is module
    assert len(model.history_) == 4 and model.n_iter_ == 2
    assert not np.array_equal(first, model.predict(X))
    cold = LinearTorchRegressor(max_epochs=2, warm_start=False, random_state=0).fit(X, y)
    cold.fit(X, y)
    assert len(cold.history_) == 2


def test_convergence_test_on_training_loss():
    X, y = _regression()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = LinearTorchRegressor(
            max_epochs=500, tol=1e-3, n_iter_no_change=3, random_state=0
        ).fit(X, y)
    assert model.converged_ and model.n_iter_ < 500
    with pytest.warns(ConvergenceWarning, match="max_epochs=2"):
        unconverged = LinearTorchRegressor(max_epochs=2, tol=1e-4, random_state=0).fit(X, y)
    assert not unconverged.converged_
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        LinearTorchRegressor(max_epochs=2, tol=None, random_state=0).fit(X, y)


def test_early_stopping_keeps_the_best_validation_weights():
    X, y = _regression(n=300)
    model = LinearTorchRegressor(
        max_epochs=60,
        tol=0.0,
        n_iter_no_change=4,
        early_stopping=True,
        validation_fraction=0.2,
        learning_rate=0.02,
        random_state=0,
    ).fit(X, y)
    scores = [record["validation_score"] for record in model.history_]
    assert model.converged_ and model.n_iter_ < 60
    best = int(np.argmax(scores))
    assert len(scores) - 1 - best == model.n_iter_no_change
    # the kept weights are those of the best epoch
    X_train, _, (X_val, y_val) = model._split_validation(X, y)
    assert model._validation_score(X_val, y_val) == pytest.approx(scores[best], rel=1e-6)
    with pytest.raises(ValueError, match="validation_fraction"):
        LinearTorchRegressor(early_stopping=True).fit(X, y)


def test_divergence_keeps_last_finite_weights():
    X, y = _regression()
    with pytest.warns(DivergenceWarning, match="non-finite"):
        model = LinearTorchRegressor(learning_rate=50.0, max_epochs=50, random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.predict(X)))
    assert all(np.isfinite(record["loss"]) for record in model.history_)
    assert model.n_iter_ == len(model.history_) < 50


def test_pickle_round_trip_keeps_predictions():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=3, random_state=0).fit(X, y)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(model.predict(X), restored.predict(X))
    assert restored.history_ == model.history_
    assert isinstance(restored.module_, nn.Module)


def test_model_saved_on_gpu_loads_on_cpu(monkeypatch):
    """A model whose stored device is CUDA is loaded onto the CPU of a machine without CUDA."""
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=2, random_state=0).fit(X, y)
    model.device_ = "cuda:0"  # as if fitted on a GPU
    calls = []
    original_load = torch.load

    def recording_load(*args, **kwargs):
        calls.append(kwargs.get("map_location"))
        return original_load(*args, **kwargs)

    monkeypatch.setattr(base_module.torch, "load", recording_load)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restored = pickle.loads(pickle.dumps(model))
    assert calls and all(location == "cpu" for location in calls)
    assert restored._inference_device() == torch.device("cpu")
    np.testing.assert_array_equal(model.predict(X), restored.predict(X))


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ValueError, match="not a valid torch device"):
        resolve_device("tpu-9000")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
        X, y = _regression()
        with pytest.raises(ValueError, match="CUDA is not available"):
            LinearTorchRegressor(device="cuda").fit(X, y)


def test_verbose_shows_a_progress_bar(capsys):
    X, y = _regression()
    LinearTorchRegressor(max_epochs=2, verbose=1, random_state=0).fit(X, y)
    assert "LinearTorchRegressor" in capsys.readouterr().err
    LinearTorchRegressor(max_epochs=2, verbose=0, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""


def test_mlp_shapes_and_normalisation():
    torch.manual_seed(0)
    module = MLP(6, hidden_layer_sizes=(8, 8), n_outputs=3, batch_norm=True, dropout=0.1)
    out = module.eval()(torch.randn(4, 6))
    assert out.shape == (4, 3)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(4))
    raw = MLP(6, hidden_layer_sizes=(), n_outputs=3, normalize=False)
    assert isinstance(raw.layers[0], nn.Linear) and len(raw.layers) == 1
    with pytest.raises(ValueError, match="activation"):
        MLP(6, activation="swishy")


def test_module_output_dim_checks():
    assert module_output_dim(MLP(5, (4,), 3), 5, "cpu") == 3
    with pytest.raises(ValueError, match="2-D tensor"):
        module_output_dim(nn.Flatten(0), 5, "cpu")
    with pytest.raises(ValueError, match="could not process"):
        module_output_dim(nn.Linear(4, 2), 5, "cpu")


def test_shuffled_batch_sampler_covers_each_item_once_per_epoch():
    sampler = ShuffledBatchSampler(23, 5, random_state=0)
    assert len(sampler) == 5
    first, second = list(sampler), list(sampler)
    assert sorted(np.concatenate(first)) == list(range(23))
    assert not all(np.array_equal(a, b) for a, b in zip(first, second, strict=False))
    again = list(ShuffledBatchSampler(23, 5, random_state=0))
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=False))


def test_class_balanced_sampler_structure():
    rng = np.random.RandomState(0)
    sizes = {"a": 13, "b": 9, "c": 4, "d": 3, "e": 2, "f": 1, "g": 17, "h": 8}
    y = np.array([label for label, size in sizes.items() for _ in range(size)])
    y = y[rng.permutation(y.shape[0])]
    sampler = ClassBalancedBatchSampler(y, batch_size=16, samples_per_class=4, random_state=0)
    assert sampler.classes_per_batch == 4
    for _ in range(3):
        batches = list(sampler)
        items = np.concatenate(batches)
        assert sorted(items) == list(range(y.shape[0]))  # every item exactly once
        for batch in batches:
            labels, counts = np.unique(y[batch], return_counts=True)
            assert len(labels) >= 2  # every batch has negatives
            # no lone item of a class unless its class has a single item overall
            for label, count in zip(labels, counts, strict=False):
                assert count >= 2 or sizes[label] == 1
        assert abs(len(batches) - len(sampler)) <= 2


def test_class_balanced_sampler_is_deterministic_and_validates():
    y = np.repeat(np.arange(6), 12)
    a = list(ClassBalancedBatchSampler(y, 12, 3, random_state=1))
    b = list(ClassBalancedBatchSampler(y, 12, 3, random_state=1))
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=False))
    for batch in a[:-1]:
        assert len(np.unique(y[batch])) == 4 and len(batch) == 12
    with pytest.raises(ValueError, match="batch_size"):
        ClassBalancedBatchSampler(y, batch_size=5, samples_per_class=4)
    with pytest.raises(ValueError, match="samples_per_class"):
        ClassBalancedBatchSampler(y, batch_size=8, samples_per_class=0)
    with pytest.raises(ValueError, match="non-empty"):
        ClassBalancedBatchSampler([], batch_size=8)


def test_fitted_check_and_feature_count():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=1, random_state=0)
    with pytest.raises(Exception, match="not fitted"):
        model.predict(X)
    model.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :3])
