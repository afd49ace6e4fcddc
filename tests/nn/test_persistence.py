"""Saving and loading fitted estimators (pickle, joblib, skops) without running code."""

import copy
import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
import sklearn.exceptions
import torch
from helpers import fit_small_estimator, onnx_session, small_blobs
from torch import nn

import skrank
from skrank import PointwiseROCSimilarity, SNMClassifier, SOPRCEmbedder
from skrank.exceptions import InconsistentVersionWarning
from skrank.nn import Checkpoint
from skrank.nn._engine import _SerializedTorch
from skrank.nn._persistence import TORCH_STATE_KEY, SavedModule

sio = pytest.importorskip("skops.io")

SIDE_EFFECTS = []


def record_side_effect(message):
    """What a malicious payload would run (``os.system`` in a real attack)."""
    SIDE_EFFECTS.append(message)


class Payload:
    """An object whose unpickling runs :func:`record_side_effect`."""

    def __reduce__(self):
        return (record_side_effect, ("the payload ran",))


class TinyNet(nn.Module):
    """A network of the user's, which skrank cannot build again."""

    def __init__(self, n_features=6, width=5):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_features, 8), nn.Tanh(), nn.Linear(8, width))

    def forward(self, x):
        return self.body(x)


NAMES = [
    "MMC",
    "PointwiseROCSimilarity",
    "SOPRCEmbedder",
    "SOPRCEmbedder-auxiliary-schedule-bar",
    "SNMClassifier",
    "SNMClassifier-multilabel-tfidf",
    "SNMClassifier-multilabel-tfidf-centroids",
]


@pytest.fixture(scope="module")
def fitted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: fit_small_estimator(name) for name in NAMES}


def _outputs(model, X):
    if isinstance(model, PointwiseROCSimilarity):
        return model.pairwise_similarity(X)
    if isinstance(model, SNMClassifier):
        return model.decision_function(X), model.predict_top_k(X, 2)
    return model.transform(X)


def _assert_same_outputs(model, restored, X):
    for before, after in zip(_outputs(model, X), _outputs(restored, X), strict=True):
        np.testing.assert_array_equal(before, after)


def _skops_round_trip(model):
    data = sio.dumps(model)
    untrusted = sio.get_untrusted_types(data=data)
    return sio.loads(data, trusted=untrusted), untrusted


@pytest.mark.parametrize("name", NAMES)
def test_skops_trusts_skrank_classes_only_and_keeps_predictions(fitted, name):
    model, X = fitted[name]
    restored, untrusted = _skops_round_trip(model)
    assert untrusted and all(type_name.startswith("skrank.") for type_name in untrusted)
    assert f"{type(model).__module__}.{type(model).__name__}" in untrusted
    _assert_same_outputs(model, restored, X)
    with pytest.raises(sio.exceptions.UntrustedTypesFoundException):
        sio.loads(sio.dumps(model), trusted=[])


@pytest.mark.parametrize("name", NAMES)
def test_pickle_and_joblib_keep_predictions(fitted, name, tmp_path):
    model, X = fitted[name]
    _assert_same_outputs(model, pickle.loads(pickle.dumps(model)), X)
    joblib.dump(model, tmp_path / "model.joblib")
    _assert_same_outputs(model, joblib.load(tmp_path / "model.joblib"), X)


@pytest.mark.parametrize("name", ["SOPRCEmbedder-auxiliary-schedule-bar", "SNMClassifier"])
def test_torch_state_is_saved_as_arrays(fitted, name):
    model, _ = fitted[name]
    state = model.__getstate__()
    saved = state[TORCH_STATE_KEY]
    assert set(saved) == {"module_", "criterion_"}
    for weights in saved.values():
        assert all(isinstance(array, np.ndarray) for array in weights.values())
    for key in ("optimizers_", "sampler_", "_device", "_context", "_label_optimizer"):
        assert key not in state
    restored = pickle.loads(pickle.dumps(model))
    for name_ in ("module_", "criterion_"):
        before, after = getattr(model, name_).state_dict(), getattr(restored, name_).state_dict()
        assert before.keys() == after.keys()
        for key in before:
            assert torch.equal(before[key].cpu(), after[key])
        assert not getattr(restored, name_).training


def test_auxiliary_vectors_and_callbacks_survive(fitted):
    model, _ = fitted["SOPRCEmbedder-auxiliary-schedule-bar"]
    restored, _ = _skops_round_trip(model)
    assert torch.equal(model.criterion_.auxiliary, restored.criterion_.auxiliary)
    assert restored.criterion_.class_seen.any()
    schedule = restored.callbacks_[0]
    assert schedule.scheduler is torch.optim.lr_scheduler.MultiStepLR
    assert not hasattr(schedule, "schedulers_")  # the run's schedulers are not saved
    assert [type(c).__name__ for c in restored.callbacks_] == [
        type(c).__name__ for c in model.callbacks_
    ]
    pairs = {
        type(c).__name__: (c, r) for c, r in zip(model.callbacks_, restored.callbacks_, strict=True)
    }
    averaging, restored_averaging = pairs["WeightAveraging"]
    assert restored_averaging.n_averaged_ == averaging.n_averaged_
    warm_up, restored_warm_up = pairs["_PriorWarmUp"]  # SOPRCEmbedder's prior_warmup
    assert restored_warm_up.state_dict() == warm_up.state_dict()


def test_loaded_estimator_trains_on(fitted):
    model, X = fitted["SOPRCEmbedder-auxiliary-schedule-bar"]
    y = small_blobs()[1]
    for restored in (pickle.loads(pickle.dumps(model)), _skops_round_trip(model)[0]):
        restored.set_params(warm_start=True, max_epochs=1, verbose=0).fit(X, y)
        assert restored.n_iter_ == 1 and len(restored.history_) == 3


def test_loading_is_the_users_choice_for_their_own_module():
    X, y = small_blobs()
    model = SOPRCEmbedder(module=TinyNet(), batch_size=32, max_epochs=1, random_state=0)
    model.fit(X, y)
    saved = model.__getstate__()[TORCH_STATE_KEY]
    assert isinstance(saved["module_"], SavedModule) and isinstance(saved["module"], SavedModule)
    data = sio.dumps(model)
    untrusted = sio.get_untrusted_types(data=data)
    assert f"{__name__}.TinyNet" in untrusted
    assert "torch.nn.modules.linear.Linear" in untrusted
    skrank_types = [name for name in untrusted if name.startswith("skrank.")]
    with pytest.raises(sio.exceptions.UntrustedTypesFoundException, match="TinyNet"):
        sio.loads(data, trusted=skrank_types)
    restored = sio.loads(data, trusted=untrusted)
    assert isinstance(restored.module_, TinyNet) and isinstance(restored.module, TinyNet)
    np.testing.assert_array_equal(model.transform(X), restored.transform(X))
    np.testing.assert_array_equal(
        model.transform(X), pickle.loads(pickle.dumps(model)).transform(X)
    )


def test_loading_draws_nothing_from_torchs_generator(fitted):
    data = {name: pickle.dumps(fitted[name][0]) for name in NAMES}
    state = torch.get_rng_state()
    for name in NAMES:
        pickle.loads(data[name])
    assert torch.equal(state, torch.get_rng_state())


def test_numpy_random_state_parameter_needs_no_trust():
    X, y = small_blobs()
    model = SOPRCEmbedder(
        hidden_layer_sizes=(8,), batch_size=32, max_epochs=1, random_state=np.random.RandomState(0)
    ).fit(X, y)
    restored, untrusted = _skops_round_trip(model)
    assert all(type_name.startswith("skrank.") for type_name in untrusted)
    np.testing.assert_array_equal(model.transform(X), restored.transform(X))


def test_changed_architecture_is_saved_whole(fitted):
    model, X = fitted["SOPRCEmbedder"]
    changed = copy.deepcopy(model).set_params(hidden_layer_sizes=(3,))
    assert isinstance(changed.__getstate__()[TORCH_STATE_KEY]["module_"], SavedModule)
    np.testing.assert_array_equal(
        model.transform(X), pickle.loads(pickle.dumps(changed)).transform(X)
    )


# ---------------------------------------------------------------------- files from strangers
def _torch_payload(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _crafted(model, monkeypatch, edit):
    """skops and pickle files of ``model`` whose saved state ``edit`` changed."""
    state = model.__getstate__()
    edit(state)
    monkeypatch.setattr(type(model), "__getstate__", lambda self: state)
    files = {"skops": sio.dumps(model), "pickle": pickle.dumps(model)}
    monkeypatch.undo()
    return files


def _load(kind, data):
    if kind == "pickle":
        return pickle.loads(data)
    return sio.loads(data, trusted=sio.get_untrusted_types(data=data))


def _saved_module_with_payload(allowed):
    saved = SavedModule(nn.Linear(2, 2))
    saved.payload = _torch_payload(Payload())
    saved.allowed = allowed
    return saved


@pytest.mark.parametrize(
    "place",
    [
        "weights",  # a payload in place of one of the network's arrays
        "module",  # a whole module's bytes, nothing allowed
        "module-allowing-torch",  # a whole module's bytes allowing a torch class
        "tensor",  # in place of a tensor attribute
    ],
)
def test_crafted_payload_never_runs(fitted, monkeypatch, place):
    model, _ = fitted["SOPRCEmbedder"]

    def edit(state):
        saved = state[TORCH_STATE_KEY]
        if place == "weights":
            saved["module_"]["layers.0.weight"] = _torch_payload(Payload())
        elif place == "module":
            saved["module_"] = _saved_module_with_payload([])
        elif place == "module-allowing-torch":
            saved["module_"] = _saved_module_with_payload([nn.Linear])
        else:
            saved["extra_"] = _torch_payload(Payload())

    SIDE_EFFECTS.clear()
    for kind, data in _crafted(model, monkeypatch, edit).items():
        if kind == "skops":
            untrusted = sio.get_untrusted_types(data=data)
            assert all(name.startswith(("skrank.", "torch.nn.")) for name in untrusted)
        with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
            _load(kind, data)
    assert SIDE_EFFECTS == []


def test_arrays_of_objects_are_refused(fitted, monkeypatch):
    model, _ = fitted["SOPRCEmbedder"]

    def edit(state):
        state[TORCH_STATE_KEY]["module_"]["layers.0.weight"] = np.array([Payload()], dtype=object)

    data = _crafted(model, monkeypatch, edit)["pickle"]
    SIDE_EFFECTS.clear()
    with pytest.raises(TypeError, match="array of Python objects"):
        pickle.loads(data)


def test_weights_of_a_module_the_estimator_cannot_build_are_refused(fitted, monkeypatch):
    model, _ = fitted["SOPRCEmbedder"]

    def edit(state):
        state[TORCH_STATE_KEY]["module"] = state[TORCH_STATE_KEY]["module_"]

    data = _crafted(model, monkeypatch, edit)["skops"]
    with pytest.raises(ValueError, match="rebuild_module cannot build"):
        _load("skops", data)


def test_files_of_earlier_versions_are_refused_without_running_them():
    legacy = _SerializedTorch.__new__(_SerializedTorch)
    legacy.__dict__["payload"] = _torch_payload(Payload())
    SIDE_EFFECTS.clear()
    with pytest.raises(ValueError, match="before 0.2"):
        pickle.loads(pickle.dumps({"module_": legacy}))
    assert SIDE_EFFECTS == []


def test_torch_load_is_never_asked_to_run_code(fitted, monkeypatch, tmp_path):
    """Every load path: pickle, joblib, skops, a copy, a user's module, a checkpoint."""
    X, y = small_blobs()
    custom = SOPRCEmbedder(module=TinyNet(), batch_size=32, max_epochs=1, random_state=0)
    custom.fit(X, y)
    checkpoint = tmp_path / "run.ckpt"
    params = dict(hidden_layer_sizes=(8,), n_components=4, batch_size=32, random_state=0)
    SOPRCEmbedder(max_epochs=1, callbacks=[Checkpoint(checkpoint)], **params).fit(X, y)
    calls = []
    original_load = torch.load

    def checked_load(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        assert kwargs.get("weights_only") is True
        return original_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", checked_load)
    models = [fitted[name][0] for name in NAMES] + [custom]
    for model in models:
        pickle.loads(pickle.dumps(model))
        joblib.load(io.BytesIO(_joblib_bytes(model)))
        _skops_round_trip(model)
        copy.deepcopy(model)
    resumed = SOPRCEmbedder(
        max_epochs=2, warm_start=True, callbacks=[Checkpoint(checkpoint)], **params
    ).fit(X, y)
    assert resumed.n_iter_ == 2
    assert calls and all(calls)


def _joblib_bytes(model):
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    return buffer.getvalue()


# ---------------------------------------------------------------------- versions and devices
@pytest.mark.parametrize(
    "name", ["MMC", "PointwiseROCSimilarity", "SOPRCEmbedder", "SNMClassifier"]
)
def test_another_version_warns_on_load(fitted, monkeypatch, name):
    model, _ = fitted[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", InconsistentVersionWarning)
        pickle.loads(pickle.dumps(model))  # the same version: no warning
    monkeypatch.setattr(skrank, "__version__", "0.1.0")
    files = {"pickle": pickle.dumps(model), "skops": sio.dumps(model)}
    monkeypatch.undo()
    for kind, data in files.items():
        with pytest.warns(InconsistentVersionWarning, match="saved by skrank 0.1.0") as record:
            _load(kind, data)
        warning = record[0].message
        assert isinstance(warning, sklearn.exceptions.InconsistentVersionWarning)
        assert (warning.original_version, warning.current_version) == ("0.1.0", skrank.__version__)


def test_model_fitted_on_a_gpu_loads_on_a_cpu(fitted, monkeypatch):
    """A model whose training device was CUDA loads its tensors on the CPU of a machine
    without CUDA and predicts there."""
    model, X = fitted["SNMClassifier"]
    model = copy.deepcopy(model)
    model.device_ = "cuda:0"  # as if fitted on a GPU
    data = sio.dumps(model)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restored = sio.loads(data, trusted=sio.get_untrusted_types(data=data))
    assert restored.inference_device() == torch.device("cpu")
    assert all(t.device.type == "cpu" for t in restored.module_.state_dict().values())
    np.testing.assert_array_equal(model.decision_function(X), restored.decision_function(X))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["SOPRCEmbedder", "SNMClassifier"])
def test_gpu_fitted_round_trip(name, monkeypatch, tmp_path):
    X, y = small_blobs()
    small = dict(max_epochs=2, random_state=0, device="cuda")
    if name == "SOPRCEmbedder":
        model = SOPRCEmbedder(hidden_layer_sizes=(16,), n_components=4, batch_size=32, **small)
    else:
        model = SNMClassifier(n_components=8, neighbor_weight=0.2, **small)
    model.fit(X, y)
    expected = _outputs(model, X)
    data = sio.dumps(model)
    untrusted = sio.get_untrusted_types(data=data)
    assert all(type_name.startswith("skrank.") for type_name in untrusted)
    on_gpu = sio.loads(data, trusted=untrusted)
    for before, after in zip(expected, _outputs(on_gpu, X), strict=True):
        np.testing.assert_array_equal(before, after)
    session = onnx_session(model, tmp_path)  # exported from the GPU's weights
    outputs = session.run(None, {"X": model.onnx_inputs(X)})
    if name == "SOPRCEmbedder":
        np.testing.assert_allclose(outputs[0], expected, rtol=1e-5, atol=1e-5)
    else:
        finished = model.decision_function_from_onnx(*outputs)
        np.testing.assert_allclose(finished, expected[0], rtol=1e-5, atol=1e-4)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    on_cpu = pickle.loads(pickle.dumps(model))
    assert all(t.device.type == "cpu" for t in on_cpu.module_.state_dict().values())
    for before, after in zip(expected, _outputs(on_cpu, X), strict=True):
        np.testing.assert_allclose(before, after, rtol=1e-5, atol=1e-5)
