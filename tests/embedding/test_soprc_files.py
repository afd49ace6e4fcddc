"""SOPRCEmbedder on the items of a torch Dataset and of image files: the same model as from an
array, for every num_workers; item_transform; errors naming a file; validation, warm start,
persistence and grid search on such an X."""

import gc
import pickle
import weakref

import numpy as np
import pytest
import torch
from helpers import TensorItems, assert_same_weights
from PIL import Image
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV

from skrank import SNMClassifier, SOPRCEmbedder
from skrank.nn import Checkpoint, ItemDataset


def _digits(n_classes=6, per_class=12):
    """uint8 8 x 8 digit images, ``per_class`` of each of ``n_classes`` digits."""
    digits = load_digits()
    rows = np.concatenate(
        [np.flatnonzero(digits.target == label)[:per_class] for label in range(n_classes)]
    )
    images = np.round(digits.images[rows] * 255 / 16).astype(np.uint8)
    return images, digits.target[rows]


def _png_files(directory, images):
    paths = []
    for i, image in enumerate(images):
        paths.append(str(directory / f"{i}.png"))
        Image.fromarray(image).save(paths[-1])
    return np.asarray(paths)


def _pad_and_shift(item):
    """Pad to 10 x 10, then a random shift of up to one pixel (from torch's generator)."""
    padded = torch.nn.functional.pad(item, (1, 1, 1, 1))
    return torch.roll(padded, tuple(torch.randint(-1, 2, (2,)).tolist()), dims=(1, 2))


SMALL = dict(
    hidden_layer_sizes=(4, 8),
    n_components=8,
    batch_size=24,
    max_epochs=2,
    validation_fraction=0.25,
    random_state=0,
    device="cpu",
)


def _embedder(**params):
    return SOPRCEmbedder(**{**SMALL, **params})


@pytest.fixture(scope="module")
def digit_files(tmp_path_factory):
    images, y = _digits()
    return images, y, _png_files(tmp_path_factory.mktemp("digits"), images)


def test_png_files_and_a_dataset_give_the_model_of_the_array(digit_files, one_torch_thread):
    images, y, paths = digit_files
    from_array = _embedder().fit(images, y)
    from_files = _embedder().fit(list(paths), y)
    assert from_files.item_shape_ == (1, 8, 8) and from_files.n_features_in_ == 64
    assert_same_weights(from_array, from_files)
    assert from_files.history_ == [
        {**record, "duration": other["duration"]}
        for record, other in zip(from_array.history_, from_files.history_, strict=True)
    ]
    dataset = TensorItems(torch.from_numpy(images))
    assert_same_weights(from_array, _embedder().fit(dataset, y))
    embedding = from_array.transform(images)
    np.testing.assert_array_equal(from_files.transform(paths), embedding)
    np.testing.assert_array_equal(from_array.transform(dataset), embedding)
    assert from_files.score(paths, y) == from_array.score(images, y)
    np.testing.assert_array_equal(from_files.onnx_inputs(paths), from_array.onnx_inputs(images))


def test_the_model_does_not_depend_on_num_workers(digit_files, one_torch_thread):
    """A random item transform and an augmentation, the sampler's batches: seeded alike with
    0 and 2 worker processes."""
    _, y, paths = digit_files

    def augmentation(batch):
        return batch + 0.05 * torch.randn_like(batch)

    params = dict(item_transform=_pad_and_shift, augmentation=augmentation)
    main = _embedder(**params).fit(paths, y)
    workers = _embedder(**params, num_workers=2).fit(paths, y)
    assert main.item_shape_ == (1, 10, 10)
    assert_same_weights(main, workers)
    assert [r["validation_score"] for r in main.history_] == [
        r["validation_score"] for r in workers.history_
    ]
    np.testing.assert_array_equal(main.transform(paths), workers.transform(paths))
    other_seed = _embedder(**params, random_state=1).fit(paths, y)
    assert not torch.equal(other_seed.module_.projection.weight, main.module_.projection.weight)


def test_warm_start_and_persistence_of_a_model_of_files(digit_files, one_torch_thread):
    _, y, paths = digit_files
    model = _embedder(item_transform=_pad_and_shift, warm_start=True).fit(paths, y)
    model.fit(paths, y)
    assert len(model.history_) == 4
    loaded = pickle.loads(pickle.dumps(model))
    assert loaded.item_transform is None and loaded.item_shape_ == (1, 10, 10)
    with pytest.raises(ValueError, match=r"X\[0\], the file .* has an item of shape \(1, 8, 8\)"):
        loaded.transform(paths)
    loaded.set_params(item_transform=_pad_and_shift)
    np.testing.assert_array_equal(loaded.transform(paths), model.transform(paths))
    sio = pytest.importorskip("skops.io")
    data = sio.dumps(model)
    untrusted = sio.get_untrusted_types(data=data)
    assert all(name.startswith("skrank.") for name in untrusted)
    from_skops = sio.loads(data, trusted=untrusted)
    assert from_skops.item_transform is None and model.item_transform is _pad_and_shift
    from_skops.set_params(item_transform=_pad_and_shift)
    np.testing.assert_array_equal(from_skops.transform(paths), model.transform(paths))


def test_a_fitted_model_keeps_no_reference_to_its_dataset(digit_files, one_torch_thread):
    images, y, _ = digit_files
    dataset = TensorItems(torch.from_numpy(images))
    reference = weakref.ref(dataset)
    model = _embedder(max_epochs=1).fit(dataset, y)
    del dataset
    gc.collect()
    assert reference() is None and model.transform(images).shape == (72, 8)


def test_a_checkpointed_run_of_files_resumes_exactly(digit_files, tmp_path, one_torch_thread):
    """The seeds of the random item transform come from torch's generator, which the
    checkpoint saves: 2 epochs and a resumed third are the run of 3."""
    _, y, paths = digit_files
    params = dict(max_epochs=3, weight_averaging=None, prior_warmup=None)
    params.update(item_transform=_pad_and_shift)
    whole = _embedder(**params).fit(paths, y)
    path = tmp_path / "run.ckpt"
    _embedder(**{**params, "max_epochs": 2}, callbacks=[Checkpoint(path)]).fit(paths, y)
    resumed = _embedder(**params, warm_start=True, callbacks=[Checkpoint(path)]).fit(paths, y)
    assert resumed.n_iter_ == 3
    assert_same_weights(whole, resumed)


def test_grid_search_indexes_an_array_of_paths(digit_files, one_torch_thread):
    _, y, paths = digit_files
    search = GridSearchCV(
        _embedder(max_epochs=1, validation_fraction=None),
        {"learning_rate": [0.01, 0.05]},
        cv=2,
    ).fit(paths, y)
    assert search.best_estimator_.item_shape_ == (1, 8, 8)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_grid_search_indexes_an_item_dataset_without_reading_it(digit_files, one_torch_thread):
    """scikit-learn indexes an ItemDataset as an array (a subset a fold): the fits read its
    items with item_transform, where a bare Dataset would become a list of its tensors."""
    images, y, _ = digit_files
    search = GridSearchCV(
        _embedder(max_epochs=1, validation_fraction=None, item_transform=_pad_and_shift),
        {"learning_rate": [0.05]},
        cv=2,
    ).fit(ItemDataset(TensorItems(torch.from_numpy(images))), y)
    assert search.best_estimator_.item_shape_ == (1, 10, 10)


def test_errors_name_the_file(digit_files, tmp_path):
    images, y, paths = digit_files
    missing = list(paths)
    missing[5] = str(tmp_path / "gone.png")
    with pytest.raises(ValueError, match=r"X\[5\], the file '.*gone.png', does not exist"):
        _embedder().fit(missing, y)
    (tmp_path / "bad.png").write_bytes(b"\x89PNG broken")
    corrupt = list(paths)
    corrupt[7] = str(tmp_path / "bad.png")
    with pytest.raises(ValueError, match=r"X\[7\], the file '.*bad.png', cannot be read"):
        _embedder(num_workers=2).fit(corrupt, y)
    Image.fromarray(np.zeros((8, 9), dtype=np.uint8)).save(tmp_path / "wide.png")
    model = _embedder(max_epochs=1).fit(paths, y)
    with pytest.raises(ValueError, match=r"X\[1\], the file '.*wide.png', has an item of shape"):
        model.transform([paths[0], str(tmp_path / "wide.png")])
    with pytest.raises(ValueError, match="item_transform applies to the items of a torch"):
        _embedder(item_transform=_pad_and_shift).fit(images, y)
    with pytest.raises(TypeError, match="X is one path"):
        model.transform(paths[0])


def test_snm_classifier_takes_num_workers_and_reads_arrays_in_the_main_process(one_torch_thread):
    X, y = load_digits(return_X_y=True)
    params = dict(max_epochs=1, random_state=0, device="cpu")
    main = SNMClassifier(**params).fit(X[:200], y[:200])
    workers = SNMClassifier(**params, num_workers=2).fit(X[:200], y[:200])
    assert workers.get_params()["num_workers"] == 2
    np.testing.assert_array_equal(
        main.decision_function(X[200:260]), workers.decision_function(X[200:260])
    )
