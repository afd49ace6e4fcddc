"""The training engine (skrank.nn) through the smallest estimator built on its public steps."""

import copy
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import host_syncs
from sklearn.base import RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from skrank.exceptions import DivergenceWarning
from skrank.nn import (
    TORCH_PARAMETER_CONSTRAINTS,
    BaseTorchEstimator,
    Callback,
    Checkpoint,
    EarlyStopping,
    LRScheduler,
    TrainingInputs,
    WeightAveraging,
)
from skrank.nn import _engine as engine_module
from skrank.utils._params import store_parameters


class LinearTorchRegressor(RegressorMixin, BaseTorchEstimator):
    """Least squares on the engine: initialize_module, get_loss and validation_score only."""

    _parameter_constraints = dict(TORCH_PARAMETER_CONSTRAINTS)

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
        callbacks=None,
        precision="float32",
        compile=False,
        device="cpu",
        verbose=0,
        random_state=None,
    ):
        store_parameters(self, locals())

    def fit(self, X, y):
        self._validate_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", y_numeric=True)
        X_train, y_train, validation = self.split_validation(X, y)
        return self.fit_loop(X_train, y_train.astype(np.float32), validation)

    def initialize_module(self, n_features):
        return nn.Linear(n_features, 1)

    def get_loss(self, batch, targets):
        residual = self.module_(batch.inputs).squeeze(1) - targets[batch.indices]
        return (residual.square() * batch.valid).sum() / batch.valid.sum()

    def validation_score(self, X_val, y_val):
        return -np.mean((self.forward(X_val, as_numpy=True).ravel() - y_val) ** 2)

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", reset=False)
        return self.forward(X, as_numpy=True).ravel()


def _regression(n=200, d=5, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, d))
    coef = rng.normal(size=d)
    return X, X @ coef + 0.01 * rng.normal(size=n)


def _weights(model):
    return [p.detach().clone() for p in model.module_.parameters()]


class Recorder(Callback):
    """Records every hook call in order."""

    def __init__(self):
        self.calls = []

    def on_train_begin(self, estimator, X, y, validation):
        self.calls.append("train_begin")

    def on_epoch_begin(self, estimator, epoch):
        self.calls.append(f"epoch_begin {epoch}")

    def on_batch_begin(self, estimator, batch):
        self.calls.append("batch_begin")

    def on_batch_end(self, estimator, batch, loss):
        self.calls.append("batch_end")

    def on_train_epoch_end(self, estimator, epoch):
        self.calls.append(f"train_epoch_end {epoch}")

    def on_epoch_end(self, estimator, epoch, record):
        assert estimator.history_[-1] is record and record["epoch"] == epoch
        record["recorded"] = True
        self.calls.append(f"epoch_end {epoch}")

    def on_train_end(self, estimator, interrupted):
        self.calls.append(f"train_end interrupted={interrupted}")


def test_training_fits_a_linear_model_and_records_history():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=40, random_state=0).fit(X, y)
    assert model.score(X, y) > 0.99
    assert model.n_iter_ == 40 and len(model.history_) == 40
    losses = [record["loss"] for record in model.history_]
    assert losses[-1] < 0.05 * losses[0]
    assert {"epoch", "loss", "learning_rate", "duration"} <= set(model.history_[0])
    assert model.device_ == "cpu"


def test_callbacks_are_called_in_order_and_may_write_the_history():
    X, y = _regression(n=40)
    recorder = Recorder()
    model = LinearTorchRegressor(max_epochs=2, batch_size=16, callbacks=[recorder]).fit(X, y)
    batch_calls = ["batch_begin", "batch_end"] * 3  # 40 items in batches of 16
    assert model.callbacks_[0].calls == [
        "train_begin",
        "epoch_begin 1",
        *batch_calls,
        "train_epoch_end 1",
        "epoch_end 1",
        "epoch_begin 2",
        *batch_calls,
        "train_epoch_end 2",
        "epoch_end 2",
        "train_end interrupted=False",
    ]
    assert recorder.calls == []  # the estimator works on a copy: the parameter is unchanged
    assert all(record["recorded"] for record in model.history_)


def test_a_failing_callback_is_named_in_the_error():
    class Broken(Callback):
        def on_epoch_end(self, estimator, epoch, record):
            raise KeyError("missing")

    X, y = _regression(n=40)
    with pytest.raises(RuntimeError, match=r"callback Broken\(\) failed in on_epoch_end: KeyError"):
        LinearTorchRegressor(max_epochs=2, callbacks=[Broken()]).fit(X, y)
    with pytest.raises(TypeError, match="callbacks must be skrank.nn.Callback instances"):
        LinearTorchRegressor(callbacks=[print]).fit(X, y)


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


def test_model_data_and_state_live_on_the_training_device():
    X, y = _regression(n=40)
    model = LinearTorchRegressor(max_epochs=1).fit(X, y)
    assert all(p.device == torch.device("cpu") for p in model.module_.parameters())
    assert model.sampler_.device == torch.device("cpu")
    assert model.sampler_.generator.device == torch.device("cpu")


def test_step_decay_at_milestones_records_the_rate_of_each_epoch():
    X, y = _regression()
    model = LinearTorchRegressor(
        max_epochs=5, lr_milestones=[2, 4], lr_decay=0.5, learning_rate=0.04, random_state=0
    ).fit(X, y)
    rates = [record["learning_rate"] for record in model.history_]
    np.testing.assert_allclose(rates, [0.04, 0.04, 0.02, 0.02, 0.01])
    with pytest.raises(ValueError, match="lr_milestones"):
        LinearTorchRegressor(lr_milestones=[0.5]).fit(X, y)


def test_a_warm_up_schedule_per_batch():
    X, y = _regression(n=64)
    warm_up = LRScheduler(torch.optim.lr_scheduler.LinearLR, step_every="batch", total_iters=8)
    model = LinearTorchRegressor(max_epochs=3, learning_rate=0.04, callbacks=[warm_up]).fit(X, y)
    rates = [record["learning_rate"] for record in model.history_]
    # LinearLR starts at a third of the rate and reaches it after 8 steps (4 per epoch here).
    np.testing.assert_allclose(rates, [0.04 / 3, 0.04 * (1 / 3 + 2 / 3 * 4 / 8), 0.04])


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


class LeastSquaresStart(LinearTorchRegressor):
    """Starts its weights at the least-squares solution of the training data it is shown."""

    def initialize_weights(self, X, y):
        self.seen = (X.copy(), y.copy(), self.training_device, self.module_.weight.device)
        solution = np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)[0]
        with torch.no_grad():
            self.module_.weight.copy_(torch.as_tensor(solution[None, :-1]))
            self.module_.bias.fill_(float(solution[-1]))


def test_initialize_weights_starts_a_new_module_from_the_training_part():
    X, y = _regression()
    model = LeastSquaresStart(max_epochs=1, learning_rate=1e-9, validation_fraction=0.25,
                              random_state=0).fit(X, y)  # fmt: skip
    X_seen, y_seen, device, weight_device = model.seen
    X_train, y_train, (X_val, _) = model.split_validation(X, y)
    np.testing.assert_array_equal(X_seen, X_train)  # the training part, without validation
    np.testing.assert_allclose(y_seen, y_train.astype(np.float32))
    assert device == torch.device("cpu") and weight_device == torch.device("cpu")
    # Trained for one epoch at a vanishing rate: the model is the start the hook set.
    assert np.sqrt(np.mean((model.predict(X) - y) ** 2)) < 0.02
    model.seen = None
    model.set_params(warm_start=True).fit(X, y)
    assert model.seen is None  # a warm start continues the previous weights


def test_helpers_under_their_former_private_names_warn_and_work():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=1, random_state=0).fit(X, y)
    with pytest.warns(FutureWarning, match=r"_forward_in_chunks was renamed forward .*"
                      r"call forward\(\.\.\., as_numpy=True\)"):  # fmt: skip
        outputs = model._forward_in_chunks(X)
    np.testing.assert_array_equal(outputs, model.forward(X, as_numpy=True))
    with pytest.warns(FutureWarning, match="_split_validation was renamed split_validation"):
        assert model._split_validation(X, y)[2] is None
    with pytest.warns(FutureWarning, match="_inference_device was renamed inference_device"):
        assert model._inference_device() == torch.device("cpu")
    assert model.training_device == torch.device("cpu")
    assert (model.training_context.rank, model.training_context.world_size) == (0, 1)


@pytest.mark.parametrize("estimator_params", [{}, {"lr_milestones": [2], "tol": 1e-9}])
def test_a_resumed_checkpoint_equals_an_uninterrupted_run(tmp_path, estimator_params):
    X, y = _regression()
    path = tmp_path / "run.ckpt"
    params = dict(max_epochs=5, optimizer="adam", random_state=3, **estimator_params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        straight = LinearTorchRegressor(**params).fit(X, y)
        first = LinearTorchRegressor(**{**params, "max_epochs": 2})
        first.set_params(callbacks=[Checkpoint(path)]).fit(X, y)
        resumed = LinearTorchRegressor(**params, warm_start=True, callbacks=[Checkpoint(path)])
        resumed.fit(X, y)
    for a, b in zip(_weights(straight), _weights(resumed), strict=True):
        assert torch.equal(a, b)  # bitwise on the CPU
    assert resumed.n_iter_ == 5 and len(resumed.history_) == 5
    assert [r["loss"] for r in resumed.history_] == [r["loss"] for r in straight.history_]
    # the file is plain tensors and containers: it loads without running code
    state = torch.load(path, weights_only=True)
    assert state["epochs"] == 5 and state["estimator"] == "LinearTorchRegressor"


def test_a_checkpoint_is_written_every_few_epochs_and_after_the_last(tmp_path):
    path = tmp_path / "run.ckpt"

    class ReadCheckpoint(Callback):  # listed after the Checkpoint: sees what it wrote
        def on_epoch_end(self, estimator, epoch, record):
            saved = torch.load(path, weights_only=True)["epochs"] if path.exists() else None
            self.saved = getattr(self, "saved", []) + [saved]

    X, y = _regression(n=40)
    model = LinearTorchRegressor(
        max_epochs=5, random_state=0, callbacks=[Checkpoint(path, every=2), ReadCheckpoint()]
    ).fit(X, y)
    assert model.callbacks_[1].saved == [None, 2, 2, 4, 5]


def test_a_checkpoint_of_another_estimator_is_refused(tmp_path):
    X, y = _regression(n=40)
    path = tmp_path / "run.ckpt"
    LinearTorchRegressor(max_epochs=1, callbacks=[Checkpoint(path)]).fit(X, y)
    state = torch.load(path, weights_only=True)
    state["estimator"] = "SOPRCEmbedder"
    torch.save(state, path)
    with pytest.raises(RuntimeError, match="written by SOPRCEmbedder"):
        LinearTorchRegressor(max_epochs=2, warm_start=True, callbacks=[Checkpoint(path)]).fit(X, y)


class BatchNormRegressor(LinearTorchRegressor):
    """A hidden layer with batch normalisation: buffers to average besides parameters."""

    def initialize_module(self, n_features):
        return nn.Sequential(
            nn.Linear(n_features, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1)
        )


class RecordSteps(Callback):
    """The network's state (parameters and buffers) after every step, with its epoch."""

    def on_train_begin(self, estimator, X, y, validation):
        self.states, self.validation = [], validation

    def on_epoch_begin(self, estimator, epoch):
        self.epoch = epoch

    def on_batch_end(self, estimator, batch, loss):
        state = {k: v.detach().clone() for k, v in estimator.network_.state_dict().items()}
        self.states.append((self.epoch, state))


def _hand_average(states, decay):
    """Exponential (or, with decay None, equal) average of a list of state dicts, by formula;
    integer entries (batch counts) are the last state's."""
    average = dict(states[0])
    for n, state in enumerate(states[1:], start=1):
        for key, value in state.items():
            if not value.is_floating_point():
                average[key] = value
            elif decay is None:
                average[key] = average[key] + (value - average[key]) / (n + 1)
            else:
                average[key] = decay * average[key] + (1 - decay) * value
    return average


@pytest.mark.parametrize("decay", [0.7, None])
def test_weight_averaging_evaluates_and_keeps_a_hand_computed_average(decay):
    X, y = _regression(n=120)
    params = dict(max_epochs=4, batch_size=16, validation_fraction=0.25, random_state=0)
    averaging = WeightAveraging(decay=decay, start_epoch=2)
    plain = BatchNormRegressor(**params, callbacks=[RecordSteps()]).fit(X, y)
    model = BatchNormRegressor(**params, callbacks=[RecordSteps(), averaging]).fit(X, y)
    recorder = model.callbacks_[0]
    # averaging never changes the training trajectory
    for (_, a), (_, b) in zip(plain.callbacks_[0].states, recorder.states, strict=True):
        for key in a:
            assert torch.equal(a[key], b[key])
    X_val, y_val = recorder.validation
    reference = copy.deepcopy(model.module_)
    for epoch, record in enumerate(model.history_, start=1):
        steps = [state for e, state in recorder.states if e <= epoch]
        if epoch < 2:  # before start_epoch: the training weights
            expected = steps[-1]
        else:
            expected = _hand_average([s for e, s in recorder.states if 2 <= e <= epoch], decay)
        reference.load_state_dict(expected)
        reference.eval()
        with torch.no_grad():
            predicted = reference(torch.as_tensor(X_val, dtype=torch.float32)).numpy().ravel()
        # the validation score is that of the averaged weights (buffers included)
        assert record["validation_score"] == pytest.approx(-np.mean((predicted - y_val) ** 2))
    kept = model.module_.state_dict()
    assert kept["1.num_batches_tracked"] == recorder.states[-1][1]["1.num_batches_tracked"]
    for key, value in expected.items():
        torch.testing.assert_close(kept[key], value, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(kept["0.weight"], recorder.states[-1][1]["0.weight"])


def test_early_stopping_keeps_the_best_averaged_weights(monkeypatch):
    class RecordEpochs(RecordSteps):
        def on_epoch_end(self, estimator, epoch, record):
            self.kept = getattr(self, "kept", []) + [_weights(estimator)]

    X, y = _regression(n=200)
    scores = iter([1.0, 3.0, 2.0, 0.0, 0.0])  # the second epoch is the best
    monkeypatch.setattr(LinearTorchRegressor, "validation_score", lambda self, X, y: next(scores))
    model = LinearTorchRegressor(
        max_epochs=5,
        tol=0.0,
        n_iter_no_change=5,
        early_stopping=True,
        validation_fraction=0.2,
        random_state=0,
        callbacks=[WeightAveraging(decay=0.9), RecordEpochs()],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    recorder = model.callbacks_[-1]
    best_average = _hand_average([state for e, state in recorder.states if e <= 2], 0.9)
    for kept, seen, key in zip(_weights(model), recorder.kept[1], ("weight", "bias"), strict=True):
        assert torch.equal(kept, seen)  # the weights scored at the best epoch, and they are
        torch.testing.assert_close(kept, best_average[key])  # the average of its steps
    last_step = [state for e, state in recorder.states if e == 2][-1]
    assert not torch.allclose(_weights(model)[0], last_step["weight"])


@pytest.mark.parametrize("checkpoint_first", [True, False])
def test_a_resumed_averaging_run_equals_an_uninterrupted_run(tmp_path, checkpoint_first):
    X, y = _regression(n=120)
    path = tmp_path / "run.ckpt"
    params = dict(max_epochs=5, batch_size=16, optimizer="adam", random_state=3)

    def callbacks():
        both = [Checkpoint(path), WeightAveraging(decay=0.8, start_epoch=2)]
        return both if checkpoint_first else both[::-1]

    straight = BatchNormRegressor(**params, callbacks=[WeightAveraging(0.8, 2)]).fit(X, y)
    BatchNormRegressor(**{**params, "max_epochs": 3}, callbacks=callbacks()).fit(X, y)
    resumed = BatchNormRegressor(**params, warm_start=True, callbacks=callbacks()).fit(X, y)
    for key, value in straight.module_.state_dict().items():
        assert torch.equal(value, resumed.module_.state_dict()[key])  # bitwise on the CPU
    assert [r["loss"] for r in resumed.history_] == [r["loss"] for r in straight.history_]


def test_warm_start_with_weight_averaging_trains_on_from_the_kept_average():
    class RecordStart(Callback):
        def on_train_begin(self, estimator, X, y, validation):
            self.weights = [p.detach().clone() for p in estimator.module_.parameters()]

    X, y = _regression()
    model = LinearTorchRegressor(
        max_epochs=2, warm_start=True, random_state=0, callbacks=[WeightAveraging(decay=0.9)]
    ).fit(X, y)
    kept = _weights(model)
    model.set_params(callbacks=[RecordStart(), WeightAveraging(decay=0.9)]).fit(X, y)
    for start, previous in zip(model.callbacks_[0].weights, kept, strict=True):
        assert torch.equal(start, previous)
    assert len(model.history_) == 4 and model.callbacks_[1].n_averaged_ == 2 * 13


def test_keyboard_interrupt_leaves_a_fitted_usable_model():
    class Interrupt(Callback):
        def on_batch_end(self, estimator, batch, loss):
            if estimator.n_iter_ == 2:
                raise KeyboardInterrupt

    X, y = _regression()
    with pytest.warns(UserWarning, match=r"interrupted.*last complete epoch \(2 of max_epochs=9"):
        model = LinearTorchRegressor(max_epochs=9, random_state=0, callbacks=[Interrupt()])
        model.fit(X, y)
    assert model.n_iter_ == 2 and len(model.history_) == 2
    reference = LinearTorchRegressor(max_epochs=2, random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), reference.predict(X))


def test_convergence_test_on_training_loss():
    X, y = _regression()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = LinearTorchRegressor(
            max_epochs=500, tol=1e-3, n_iter_no_change=3, random_state=0
        ).fit(X, y)
    assert model.converged_ and model.n_iter_ < 500
    assert "did not improve" in model.history_[-1]["stop_reason"]
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
    _, _, (X_val, y_val) = model.split_validation(X, y)
    assert model.validation_score(X_val, y_val) == pytest.approx(scores[best], rel=1e-6)
    # ... and, restored, they are held once: by the estimator, not also by the callback
    (stopper,) = [c for c in model.callbacks_ if isinstance(c, EarlyStopping)]
    assert stopper._best_weights is None and not stopper.restores_weights()
    with pytest.raises(
        ValueError, match="set validation_fraction, e.g. 0.1, or early_stopping=False"
    ):
        LinearTorchRegressor(early_stopping=True).fit(X, y)
    with pytest.raises(RuntimeError, match="EarlyStopping.*needs a validation set"):
        LinearTorchRegressor(callbacks=[EarlyStopping()]).fit(X, y)


@pytest.mark.parametrize("monitor", ["validation_score", "loss"])
def test_early_stopping_counts_only_improvements_larger_than_tol(monitor, monkeypatch):
    """Gains of at most ``tol`` neither reset the patience nor move the kept weights."""

    class RecordEpochs(Callback):
        def on_epoch_end(self, estimator, epoch, record):
            self.kept = getattr(self, "kept", []) + [_weights(estimator)]

    # epoch:   1    2     3     4    5     6     7     (tol=0.1, patience=3)
    values = [1.0, 1.05, 1.09, 1.5, 1.55, 1.58, 1.6] + [9.0] * 5
    sign = 1.0 if monitor == "validation_score" else -1.0  # a lower loss is better
    sequence = iter(sign * v for v in values)
    if monitor == "validation_score":
        monkeypatch.setattr(
            LinearTorchRegressor, "validation_score", lambda self, X, y: next(sequence)
        )
    else:
        real_read = engine_module.BaseTorchEstimator._read_epoch
        monkeypatch.setattr(
            engine_module.BaseTorchEstimator,
            "_read_epoch",
            lambda self, mean_loss: (next(sequence), real_read(self, mean_loss)[1]),
        )
    X, y = _regression(n=200)
    stopper = EarlyStopping(monitor=monitor, tol=0.1, patience=3)
    model = LinearTorchRegressor(
        max_epochs=12,
        validation_fraction=0.2 if monitor == "validation_score" else None,
        random_state=0,
        callbacks=[stopper, RecordEpochs()],
    ).fit(X, y)
    # 1.05 and 1.09 are within tol of 1.0; 1.5 improves; 1.55, 1.58, 1.6 do not: stop at 7.
    assert model.n_iter_ == 7 and model.converged_
    for kept, best in zip(_weights(model), model.callbacks_[1].kept[3], strict=True):
        torch.testing.assert_close(kept, best, rtol=0, atol=0)  # epoch 4's weights


def test_early_stopping_that_scores_the_start_keeps_an_unbeaten_start(monkeypatch):
    X, y = _regression(n=300)
    params = dict(max_epochs=6, validation_fraction=0.2, learning_rate=0.02, random_state=0)

    class RecordStart(Callback):
        def on_train_begin(self, estimator, X, y, validation):
            self.weights = [p.detach().clone() for p in estimator.module_.parameters()]

    # every epoch scores below the untrained model: its weights come back, without a warning
    scores = iter([1.0] + [0.0] * 10)
    monkeypatch.setattr(LinearTorchRegressor, "validation_score", lambda self, X, y: next(scores))
    stopper = EarlyStopping(tol=0.0, patience=10, score_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = LinearTorchRegressor(**params, callbacks=[RecordStart(), stopper]).fit(X, y)
    start, stopper = model.callbacks_  # the fit's copies
    assert stopper.kept_start and model.converged_ and model.n_iter_ == 6
    for kept, initial in zip(model.module_.parameters(), start.weights, strict=True):
        torch.testing.assert_close(kept, initial, rtol=0, atol=0)
    # an epoch that beats the start is kept instead, and running to max_epochs warns
    scores = iter([1.0, 2.0] + [0.0] * 10)
    stopper = EarlyStopping(tol=0.0, patience=10, score_start=True)
    with pytest.warns(ConvergenceWarning, match="max_epochs=6"):
        model = LinearTorchRegressor(**params, callbacks=[stopper]).fit(X, y)
    assert not model.callbacks_[0].kept_start


def test_early_stopping_that_scores_the_start_waits_for_epochs_that_still_improve(monkeypatch):
    """A slow first epoch below a strong start does not end training: patience counts the
    epochs that stop improving on each other, and an epoch that beats the start is kept."""
    X, y = _regression(n=300)
    params = dict(max_epochs=8, validation_fraction=0.2, learning_rate=0.02, random_state=0)
    scores = iter([1.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 1.4, 1.3])  # the start, then 8 epochs
    monkeypatch.setattr(LinearTorchRegressor, "validation_score", lambda self, X, y: next(scores))
    stopper = EarlyStopping(tol=0.0, patience=2, score_start=True)
    model = LinearTorchRegressor(**params, callbacks=[stopper]).fit(X, y)
    assert model.n_iter_ == 8 and model.converged_
    assert not model.callbacks_[0].kept_start


def test_divergence_keeps_last_finite_weights():
    X, y = _regression()
    with pytest.warns(DivergenceWarning, match="non-finite"):
        # (diverges in epoch 11: ten finite epochs before it)
        model = LinearTorchRegressor(learning_rate=1.0, max_epochs=50, random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.predict(X)))
    assert all(np.isfinite(record["loss"]) for record in model.history_)
    assert 0 < model.n_iter_ == len(model.history_) < 50
    # the weights kept are those at the end of the last finite epoch: the same run stopped there
    finite_run = LinearTorchRegressor(
        learning_rate=1.0, max_epochs=model.n_iter_, random_state=0
    ).fit(X, y)
    for kept, expected in zip(_weights(model), _weights(finite_run), strict=True):
        torch.testing.assert_close(kept, expected, rtol=0, atol=0)


def test_the_epoch_read_flags_any_non_finite_weight():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=1, random_state=0).fit(X, y)
    loss = torch.tensor(0.5)
    assert model._read_epoch(loss) == (0.5, True)
    weight = next(model.module_.parameters())
    for bad in (float("nan"), float("inf"), -float("inf")):
        with torch.no_grad():
            original = weight.view(-1)[-1].item()
            weight.view(-1)[-1] = bad
        assert model._read_epoch(loss) == (0.5, False)
        with torch.no_grad():
            weight.view(-1)[-1] = original
    assert model._read_epoch(torch.tensor(float("nan")))[1] is False


def test_the_training_step_never_waits_for_the_host():
    """No host-synchronising op inside an epoch's steps: one read per epoch, at its end."""
    X, y = _regression(n=320)
    model = LinearTorchRegressor(max_epochs=1, batch_size=16).fit(X, y)  # builds everything
    inputs = TrainingInputs(X, torch.device("cpu"))
    targets = model.prepare_targets(y.astype(np.float32), torch.device("cpu"))
    epoch = model.sampler_.epoch()
    syncs = host_syncs(lambda: model.run_single_epoch(inputs, targets, epoch))
    assert not syncs, syncs


@pytest.mark.parametrize("decay", [0.9, None])
def test_weight_averaging_adds_no_host_synchronisation(decay):
    """The averaging step keeps its count on the host: a fit with it reads back from the
    device exactly as often as one without it."""
    X, y = _regression(n=320)

    def syncs(callbacks):
        model = LinearTorchRegressor(max_epochs=3, batch_size=16, callbacks=callbacks)
        return host_syncs(lambda: model.fit(X, y))

    assert syncs([WeightAveraging(decay=decay)]) == syncs(None)


def test_bfloat16_precision_trains():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=20, precision="bfloat16", random_state=0).fit(X, y)
    assert model.score(X, y) > 0.95


@pytest.mark.slow
def test_compiled_training_matches_eager():
    X, y = _regression(n=64)
    eager = LinearTorchRegressor(max_epochs=2, random_state=0).fit(X, y)
    compiled = LinearTorchRegressor(max_epochs=2, compile=True, random_state=0).fit(X, y)
    np.testing.assert_allclose(eager.predict(X), compiled.predict(X), rtol=1e-5, atol=1e-6)
    pickle.loads(pickle.dumps(compiled))  # back to an eager, picklable module


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

    monkeypatch.setattr(engine_module.torch, "load", recording_load)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restored = pickle.loads(pickle.dumps(model))
    assert calls and all(location == "cpu" for location in calls)
    assert restored.inference_device() == torch.device("cpu")
    np.testing.assert_array_equal(model.predict(X), restored.predict(X))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_fit_on_cuda_without_cuda_is_refused():
    X, y = _regression()
    with pytest.raises(ValueError, match="CUDA is not available"):
        LinearTorchRegressor(device="cuda").fit(X, y)


def test_verbose_shows_a_progress_bar(capsys):
    X, y = _regression()
    LinearTorchRegressor(max_epochs=2, verbose=1, random_state=0).fit(X, y)
    assert "LinearTorchRegressor" in capsys.readouterr().err
    LinearTorchRegressor(max_epochs=2, verbose=0, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""


def test_fitted_check_and_feature_count():
    X, y = _regression()
    model = LinearTorchRegressor(max_epochs=1, random_state=0)
    with pytest.raises(Exception, match="not fitted"):
        model.predict(X)
    model.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :3])


def test_shared_parameter_docs_show_each_estimators_defaults():
    from skrank import SNMClassifier, SOPRCEmbedder

    assert 'optimizer : {"sgd", "adam", "adamw"}, default="sgd"' in SOPRCEmbedder.__doc__
    assert 'optimizer : {"sgd", "adam", "adamw"}, default="adam"' in SNMClassifier.__doc__
    for estimator in (SOPRCEmbedder, SNMClassifier):
        assert "{shared_" not in estimator.__doc__
        assert "callbacks : list of skrank.nn.Callback or None, default=None" in estimator.__doc__
