"""SOPRCEmbedder on image items: shapes, values, the default network, augmentation, frozen batch
norm, and every path of the feature rows (validation, warm start, checkpoints, persistence,
ONNX) on images."""

import pickle

import numpy as np
import pytest
import sklearn
import torch
from helpers import assert_same_weights
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from torch import nn

from skrank import SOPRCEmbedder
from skrank.nn import MLP, Checkpoint, ConvNet, TrainingInputs, WeightAveraging
from skrank.nn import _data as nn_data


def _images(n_classes=6, per_class=12, shape=(8, 8), seed=0):
    """uint8 images whose class sets a bright block of a class's own place, on noise."""
    rng = np.random.RandomState(seed)
    y = np.repeat(np.arange(n_classes), per_class)
    X = rng.randint(0, 90, size=(y.shape[0], *shape)).astype(np.uint8)
    for label in range(n_classes):
        row, column = divmod(label, 3)
        X[y == label, 2 * row : 2 * row + 3, 2 * column : 2 * column + 3] = 250
    return X, y


SMALL = dict(hidden_layer_sizes=(4, 8), n_components=8, batch_size=24, max_epochs=2, random_state=0)


def _embedder(**params):
    return SOPRCEmbedder(**{**SMALL, "device": "cpu", **params})


def test_uint8_images_are_read_as_values_over_255(one_torch_thread):
    X, y = _images()
    model = _embedder().fit(X, y)
    assert model.item_shape_ == (1, 8, 8) and model.n_features_in_ == 64
    assert isinstance(model.module_, ConvNet) and model.module_.item_shape == (1, 8, 8)
    as_floats = _embedder().fit((X / np.float32(255)).astype(np.float32)[:, None], y)
    assert_same_weights(model, as_floats)
    embedding = model.transform(X)
    assert embedding.shape == (X.shape[0], 8) and embedding.dtype == np.float32
    np.testing.assert_array_equal(embedding, model.transform(X[:, None]))
    np.testing.assert_array_equal(
        embedding, as_floats.transform(X.astype(np.float32)[:, None] / 255)
    )
    assert model.score(X, y) == as_floats.score(X[:, None] / 255.0, y)


def test_uint8_images_stay_uint8_until_a_batch_is_read():
    X, _ = _images()
    inputs = TrainingInputs(X[:, None], torch.device("cpu"))
    assert inputs.item_shape == (1, 8, 8) and inputs._dense.dtype == torch.uint8
    assert inputs._dense.data_ptr() == torch.from_numpy(X).data_ptr()  # no copy of X
    rows = inputs.rows(torch.tensor([3, 0]))
    assert rows.dtype == torch.float32
    torch.testing.assert_close(rows, torch.from_numpy(X[[3, 0], None] / np.float32(255)))
    # uint8 feature rows (a memory-mapped X keeps its dtype) are read as their values.
    flat = TrainingInputs(X.reshape(X.shape[0], -1), torch.device("cpu"))
    assert flat.rows(torch.tensor([1])).max() > 1


def test_memory_mapped_images_fit_as_in_memory_bitwise(tmp_path, one_torch_thread):
    X, y = _images()
    np.save(tmp_path / "X.npy", X)
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    params = dict(validation_fraction=0.25)
    from_file = _embedder(**params).fit(mapped, y)
    in_memory = _embedder(**params).fit(X, y)
    assert_same_weights(in_memory, from_file)
    assert [r["validation_score"] for r in from_file.history_] == [
        r["validation_score"] for r in in_memory.history_
    ]
    np.testing.assert_array_equal(from_file.transform(mapped), in_memory.transform(X))


@pytest.mark.parametrize("shape", [(72,), (72, 1, 1, 8, 8)])
def test_other_ranks_are_refused_naming_the_shapes(shape):
    X = np.zeros(shape, dtype=np.uint8)
    y = np.repeat(np.arange(6), 12)
    with pytest.raises(ValueError, match=r"3-D \(n_samples, height, width\).*got an array"):
        _embedder().fit(X, y)


def test_transform_refuses_items_of_another_shape():
    X, y = _images()
    model = _embedder(max_epochs=1).fit(X, y)
    with pytest.raises(
        ValueError, match=r"\(1, 8, 7\), but SOPRCEmbedder was fitted on .*\(1, 8, 8\)"
    ):
        model.transform(X[:, :, :7])
    with pytest.raises(ValueError, match=r"\(3, 8, 8\), but .*\(1, 8, 8\)"):
        model.transform(np.repeat(X[:, None], 3, axis=1))
    with pytest.raises(ValueError, match=r"items of shape \(64,\), but .* fitted on images"):
        model.transform(X.reshape(X.shape[0], -1))
    with pytest.raises(ValueError, match="must be 2-D"):
        model.transform(X[:, None, None])
    rows = _embedder(max_epochs=1, hidden_layer_sizes=(8,)).fit(X.reshape(72, -1) / 255.0, y)
    assert rows.item_shape_ == (64,) and isinstance(rows.module_, MLP)
    with pytest.raises(ValueError, match=r"fitted on feature rows of shape \(n_samples, 64\)"):
        rows.transform(X)
    with pytest.raises(ValueError, match=r"\(1, 8, 7\), but .*\(1, 8, 8\)"):
        model.set_params(warm_start=True).fit(X[:, :, :7], y)


def test_transform_reads_images_in_chunks_of_working_memory(one_torch_thread):
    X, y = _images(per_class=50)
    model = _embedder(max_epochs=1).fit(X, y)
    sizes = []
    hook = model.module_.register_forward_pre_hook(lambda _, args: sizes.append(len(args[0])))
    expected = model.transform(X)
    with sklearn.config_context(working_memory=1):  # 1 MiB at 128 bytes a value: 128 images
        chunked = model.transform(X)
    hook.remove()
    assert sizes == [300, 128, 128, 44]
    np.testing.assert_allclose(chunked, expected, rtol=1e-5, atol=1e-6)


def test_default_network_of_images_is_a_conv_net_sized_from_the_items():
    X, y = _images(shape=(6, 10))
    model = SOPRCEmbedder(max_epochs=1, batch_size=24, device="cpu", random_state=0)
    model.fit(np.repeat(X[:, None], 3, axis=1), y)
    convolutions = [layer for layer in model.module_.features if isinstance(layer, nn.Conv2d)]
    assert [c.out_channels for c in convolutions] == [32, 64, 128]  # "auto"
    assert convolutions[0].in_channels == 3 and model.n_components_ == 64
    rows = SOPRCEmbedder(max_epochs=1, batch_size=24, device="cpu").fit(X.reshape(72, -1), y)
    assert [
        layer.out_features for layer in rows.module_.layers if isinstance(layer, nn.Linear)
    ] == [
        256,
        64,
    ]


def test_auto_schedules_are_off_for_images_and_on_for_feature_rows(one_torch_thread):
    from skrank.embedding._soprc_embedder import _PriorWarmUp

    def kinds(model):
        return {type(c) for c in model.callbacks_}

    X, y = _images()
    images = _embedder().fit(X, y)
    assert images.get_params()["prior_warmup"] == "auto"
    assert not kinds(images) & {_PriorWarmUp, WeightAveraging}
    rows = _embedder(hidden_layer_sizes=(8,)).fit(X.reshape(72, -1), y)
    assert {_PriorWarmUp, WeightAveraging} <= kinds(rows)
    (warm_up,) = [c for c in rows.callbacks_ if isinstance(c, _PriorWarmUp)]
    assert warm_up.fraction == 0.25
    # numbers still apply to images
    explicit = _embedder(prior_warmup=0.25, weight_averaging=0.4).fit(X, y)
    assert {_PriorWarmUp, WeightAveraging} <= kinds(explicit)
    np.testing.assert_array_equal(
        images.transform(X),
        _embedder(prior_warmup=None, weight_averaging=None).fit(X, y).transform(X),
    )


def test_a_users_module_receives_batches_of_item_shape(one_torch_thread):
    X, y = _images()
    shapes = []
    module = nn.Sequential(nn.Conv2d(1, 3, 3), nn.Flatten(), nn.Linear(3 * 6 * 6, 5))
    module.register_forward_pre_hook(lambda _, args: shapes.append(tuple(args[0].shape)))
    model = _embedder(module=module, n_components=None).fit(X, y)
    assert model.n_components_ == 5
    assert set(shapes) >= {(24, 1, 8, 8), (2, 1, 8, 8)}  # the batches, and the check of the module


def test_initialize_module_of_a_subclass_receives_the_item_shape():
    received = []

    class Subclass(SOPRCEmbedder):
        def initialize_module(self, n_features):  # the hook's signature before image items
            received.append(n_features)
            return super().initialize_module(n_features)

    X, y = _images()
    Subclass(**SMALL, device="cpu").fit(X, y)
    Subclass(**{**SMALL, "hidden_layer_sizes": (8,)}, device="cpu").fit(X.reshape(72, -1), y)
    assert received == [(1, 8, 8), 64]


def test_validation_warm_start_and_checkpoints_on_images(tmp_path, one_torch_thread):
    X, y = _images()
    # No schedule that depends on max_epochs: the run of 2 epochs is the start of the one of 3.
    params = dict(validation_fraction=0.25, max_epochs=3, weight_averaging=None)
    params.update(prior_warmup=None)
    whole = _embedder(**params).fit(X, y)
    assert [r["epoch"] for r in whole.history_] == [1, 2, 3]
    assert all(0 <= r["validation_score"] <= 1 for r in whole.history_)
    path = tmp_path / "run.ckpt"
    _embedder(**{**params, "max_epochs": 2}, callbacks=[Checkpoint(path)]).fit(X, y)
    resumed = _embedder(**params, warm_start=True, callbacks=[Checkpoint(path)]).fit(X, y)
    assert resumed.n_iter_ == 3
    assert_same_weights(whole, resumed)
    continued = _embedder(max_epochs=1).fit(X, y)
    continued.set_params(warm_start=True).fit(X, y)
    assert len(continued.history_) == 2


# ---------------------------------------------------------------------- augmentation
class CountingNoise:
    """Adds noise of torch's generator; records the shapes it was given."""

    def __init__(self):
        self.shapes = []

    def __call__(self, batch):
        self.shapes.append(tuple(batch.shape))
        return batch + 0.05 * torch.randn_like(batch)


def test_augmentation_applies_to_training_batches_only(one_torch_thread):
    X, y = _images()
    augmentation = CountingNoise()
    model = _embedder(augmentation=augmentation, validation_fraction=0.25).fit(X, y)
    counted = model.augmentation.shapes  # the parameter itself: fit copies nothing of it
    steps = model.max_epochs * len(model.sampler_)
    assert len(counted) == steps and set(counted) == {(24, 1, 8, 8)}
    model.transform(X)
    model.score(X, y)
    assert len(counted) == steps
    again = _embedder(augmentation=CountingNoise(), validation_fraction=0.25).fit(X, y)
    assert_same_weights(model, again)
    plain = _embedder(validation_fraction=0.25).fit(X, y)
    assert not torch.equal(plain.module_.projection.weight, model.module_.projection.weight)


def test_kornia_augmentation_is_seeded_by_random_state(one_torch_thread):
    augmentation = pytest.importorskip("kornia.augmentation")
    pipeline = augmentation.AugmentationSequential(
        augmentation.RandomAffine(degrees=10.0, translate=(0.1, 0.1), scale=(0.9, 1.1), p=1.0),
        augmentation.RandomHorizontalFlip(p=0.5),
    )
    X, y = _images()
    first = _embedder(augmentation=pipeline).fit(X, y)
    second = _embedder(augmentation=clone(first).augmentation).fit(X, y)
    assert_same_weights(first, second)
    other = _embedder(augmentation=pipeline, random_state=1).fit(X, y)
    assert not torch.equal(other.module_.projection.weight, first.module_.projection.weight)
    search = GridSearchCV(
        _embedder(max_epochs=1), {"augmentation": [None, pipeline]}, cv=2, error_score="raise"
    ).fit(X, y)
    assert len(search.cv_results_["mean_test_score"]) == 2


def test_augmentation_of_another_shape_is_an_error():
    X, y = _images()
    with pytest.raises(
        ValueError,
        match=r"augmentation must return .* \(24, 1, 8, 8\); it returned \(24, 1, 4, 4\)",
    ):
        _embedder(augmentation=lambda batch: batch[..., :4, :4]).fit(X, y)


def _shift(batch):
    return torch.roll(batch, shifts=1, dims=-1)


def test_a_saved_model_does_not_store_its_augmentation(tmp_path):
    sio = pytest.importorskip("skops.io")
    X, y = _images()
    model = _embedder(max_epochs=1, augmentation=_shift).fit(X, y)
    restored = pickle.loads(pickle.dumps(model))
    assert restored.augmentation is None and model.augmentation is _shift
    np.testing.assert_array_equal(restored.transform(X), model.transform(X))
    data = sio.dumps(model)
    untrusted = sio.get_untrusted_types(data=data)
    assert all(name.startswith("skrank.") for name in untrusted)
    loaded = sio.loads(data, trusted=untrusted)
    assert loaded.augmentation is None and loaded.item_shape_ == (1, 8, 8)
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


def test_a_model_with_a_kornia_augmentation_saves_with_skops():
    augmentation = pytest.importorskip("kornia.augmentation")
    sio = pytest.importorskip("skops.io")
    X, y = _images()
    pipeline = augmentation.AugmentationSequential(augmentation.RandomHorizontalFlip())
    model = _embedder(max_epochs=1, augmentation=pipeline).fit(X, y)
    data = sio.dumps(model)
    untrusted = sio.get_untrusted_types(data=data)
    assert untrusted and all(name.startswith("skrank.") for name in untrusted)
    loaded = sio.loads(data, trusted=untrusted)
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
    assert pickle.loads(pickle.dumps(model)).augmentation is None


def test_onnx_graph_of_images_equals_transform(tmp_path):
    pytest.importorskip("onnxscript")
    onnxruntime = pytest.importorskip("onnxruntime")
    X, y = _images()
    model = _embedder(max_epochs=1).fit(X, y)
    inputs = model.onnx_inputs(X)
    assert inputs.shape == (72, 1, 8, 8) and inputs.dtype == np.float32 and inputs.max() <= 1
    session = onnxruntime.InferenceSession(model.export_onnx(tmp_path / "images.onnx"))
    (embedding,) = session.run(None, {"X": inputs})
    np.testing.assert_allclose(embedding, model.transform(X), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- backbones
class Backbone(nn.Module):
    """A "pretrained" backbone with batch norm, and a projection head."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.head = nn.Linear(4, 6)
        with torch.no_grad():  # statistics and affine parameters of its "pretraining"
            self.body[1].running_mean.fill_(0.2)
            self.body[1].running_var.fill_(0.5)
            self.body[1].weight.fill_(1.5)
            self.body[1].bias.fill_(-0.1)
        self.modes = []

    def forward(self, x):
        self.modes.append(self.body[1].training)
        return self.head(self.body(x).mean(dim=(2, 3)))


def test_freeze_batchnorm_keeps_a_backbones_batch_norm(one_torch_thread):
    X, y = _images()
    backbone = Backbone()
    model = _embedder(module=backbone, n_components=None, freeze_batchnorm=True)
    model.set_params(validation_fraction=0.25).fit(X, y)
    trained = model.module_
    for name, value in backbone.body[1].state_dict().items():
        assert torch.equal(trained.body[1].state_dict()[name], value), name
    assert not torch.equal(trained.body[0].weight, backbone.body[0].weight)
    assert not torch.equal(trained.head.weight, backbone.head.weight)
    # In evaluation mode at every step, after each validation put the module in it and back.
    assert trained.modes and not any(trained.modes)
    free = _embedder(module=Backbone(), n_components=None).fit(X, y)
    assert not torch.equal(free.module_.body[1].running_mean, backbone.body[1].running_mean)
    assert any(free.module_.modes)


def test_freeze_batchnorm_is_refused_with_the_default_network():
    X, y = _images()
    with pytest.raises(ValueError, match="freeze_batchnorm=True .* module=None"):
        _embedder(freeze_batchnorm=True).fit(X, y)


def test_channels_last_batches_give_the_same_model(monkeypatch, one_torch_thread):
    X, y = _images()
    torch.manual_seed(0)
    module = ConvNet((1, 8, 8), (4, 8), 8)
    expected = _embedder(module=module).fit(X, y)
    monkeypatch.setattr(nn_data, "_CHANNELS_LAST_DEVICES", {"cpu"})
    layouts = []
    module.register_forward_pre_hook(
        lambda _, args: layouts.append(args[0].is_contiguous(memory_format=torch.channels_last))
    )
    model = _embedder(module=module).fit(X, y)
    assert len(layouts) > 1 and all(layouts[1:])  # after the check of the module on zeros
    for name, value in model.module_.state_dict().items():
        torch.testing.assert_close(value, expected.module_.state_dict()[name], rtol=1e-4, atol=1e-5)


def test_bfloat16_precision_trains_on_images(one_torch_thread):
    X, y = _images()
    model = _embedder(precision="bfloat16").fit(X, y)
    assert np.isfinite([r["loss"] for r in model.history_]).all()
    assert model.transform(X).dtype == np.float32
