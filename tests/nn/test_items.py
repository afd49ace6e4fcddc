"""Items read one at a time (ItemDataset): a torch Dataset of item tensors or image files, the
errors that name the item, and their batches read by DataLoader workers."""

import sys

import numpy as np
import pytest
import torch
from helpers import TensorItems
from PIL import Image

from skrank.nn import ItemDataset, TrainingInputs, is_item_source, read_image
from skrank.nn._items import image_paths
from skrank.sampling import EpochBatches


def _random_shift(item):
    """A random transform drawing from torch's generator (module level: workers pickle it)."""
    return torch.roll(item, int(torch.randint(-2, 3, ())), dims=-1) + torch.rand(())


def _png_files(tmp_path, images):
    paths = []
    for i, image in enumerate(images):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(image).save(paths[-1])
    return paths


def test_image_files_decode_to_channels_first_uint8(tmp_path):
    rng = np.random.RandomState(0)
    gray = rng.randint(0, 256, size=(5, 7)).astype(np.uint8)
    rgb = rng.randint(0, 256, size=(5, 7, 3)).astype(np.uint8)
    Image.fromarray(gray).save(tmp_path / "gray.png")
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(rgb).convert("P").save(tmp_path / "palette.png")
    np.testing.assert_array_equal(read_image(tmp_path / "gray.png"), gray[None])
    np.testing.assert_array_equal(read_image(tmp_path / "rgb.png"), rgb.transpose(2, 0, 1))
    palette = read_image(tmp_path / "palette.png")
    assert palette.shape == (3, 5, 7) and palette.dtype == np.uint8
    expected = np.asarray(Image.open(tmp_path / "palette.png").convert("RGB"))
    np.testing.assert_array_equal(palette, expected.transpose(2, 0, 1))
    Image.fromarray(gray.astype(np.uint16) * 200).save(tmp_path / "deep.png")
    with pytest.raises(ValueError, match="mode 'I;16'"):
        read_image(tmp_path / "deep.png")


def test_sequences_of_paths_and_datasets_are_item_sources(tmp_path):
    paths = [str(tmp_path / "a.png"), tmp_path / "b.png"]
    assert image_paths(paths) == [str(tmp_path / "a.png"), str(tmp_path / "b.png")]
    assert image_paths(np.asarray(paths, dtype=object)) == image_paths(paths)
    assert image_paths(np.asarray([str(p) for p in paths])) == image_paths(paths)
    for other in ([], [1, 2], np.zeros((2, 3)), np.asarray([["a", "b"]]), "a.png"):
        assert image_paths(other) is None
    assert is_item_source(paths) and is_item_source(TensorItems([])) and is_item_source("a.png")
    assert not is_item_source(np.zeros((3, 4))) and not is_item_source([[1.0, 2.0]])
    with pytest.raises(TypeError, match="X is one path"):
        ItemDataset(str(tmp_path / "a.png"))


def test_dataset_items_are_read_as_arrays_are():
    """uint8 images as values / 255 with a channel axis, floats as float32, 1-D items as
    feature rows; a subset reads nothing and keeps the source's row numbers."""
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, size=(6, 4, 5)).astype(np.uint8)
    source = TensorItems([torch.from_numpy(image) for image in images])
    items = ItemDataset(source)
    assert items.shape == (6, 1, 4, 5) and items.ndim == 4 and items.dtype == np.float32
    expected = torch.from_numpy(images[:, None]).to(torch.float32).div_(255)
    assert torch.equal(items[2], expected[2])
    source.reads = 0
    subset = items[np.array([5, 1, 3])]
    assert source.reads == 0 and subset.shape == (3, 1, 4, 5) and len(items) == 6
    assert torch.equal(subset[0], expected[5])
    np.testing.assert_array_equal(np.asarray(subset), expected[[5, 1, 3]].numpy())
    assert items[1:3].shape == (2, 1, 4, 5) and items[[0, 2]].rows.tolist() == [0, 2]
    assert items[np.array([4, 0]), ...].rows.tolist() == [4, 0]  # as scikit-learn indexes
    floats = ItemDataset(TensorItems(list(rng.normal(size=(3, 2, 4, 4)))))  # float64 arrays
    assert floats[0].dtype == torch.float32 and floats.item_shape == (2, 4, 4)
    rows = ItemDataset(TensorItems(list(np.arange(12, dtype=np.uint8).reshape(3, 4))))
    assert rows.item_shape == (4,) and rows[2].tolist() == [8.0, 9.0, 10.0, 11.0]


@pytest.mark.parametrize(
    ("values", "error", "match"),
    [
        ([(torch.zeros(3), 1)] * 2, TypeError, r"X\[0\]: the item is a tuple, not"),
        ([torch.zeros(1, 1, 2, 2)] * 2, ValueError, r"X\[0\]: the item has shape \(1, 1, 2"),
        ([torch.zeros(2, 2), torch.zeros(2, 3)], ValueError, r"X\[1\] has an item of shape"),
        ([torch.zeros(2), torch.tensor([0.0, np.inf])], ValueError, r"X\[1\] has non-finite"),
    ],
)
def test_bad_items_are_errors_naming_them(values, error, match):
    """The first item is read when the dataset is built, the others as they are read."""
    with pytest.raises(error, match=match):
        ItemDataset(TensorItems(values))[1]


def test_a_dataset_without_a_length_or_items_is_refused():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            yield torch.zeros(2)

    with pytest.raises(TypeError, match="without a length"):
        ItemDataset(Stream())
    with pytest.raises(ValueError, match="holds no items"):
        ItemDataset(TensorItems([]))
    with pytest.raises(TypeError, match="must be a torch.utils.data.Dataset"):
        ItemDataset([1, 2])


def test_missing_corrupt_and_differently_sized_files_are_named(tmp_path):
    images = np.zeros((3, 4, 4), dtype=np.uint8)
    paths = _png_files(tmp_path, images)
    with pytest.raises(ValueError, match=r"X\[1\], the file '.*missing.png', does not exist"):
        ItemDataset([paths[0], tmp_path / "missing.png"])
    (tmp_path / "corrupt.png").write_bytes(b"not an image")
    items = ItemDataset([paths[0], tmp_path / "corrupt.png"])
    with pytest.raises(ValueError, match=r"X\[1\], the file '.*corrupt.png', cannot be read"):
        items[1]
    Image.fromarray(np.zeros((4, 5), dtype=np.uint8)).save(tmp_path / "wide.png")
    items = ItemDataset([*paths, tmp_path / "wide.png"])
    with pytest.raises(ValueError, match=r"X\[3\], the file '.*wide.png', has an item of shape"):
        items[3]
    # Resized by the item transform, every file has one shape; a fitted shape is checked.
    resized = ItemDataset([*paths, tmp_path / "wide.png"], item_transform=lambda x: x[..., :4])
    assert resized[3].shape == (1, 4, 4)
    fitted = ItemDataset(paths, item_shape=(1, 5, 5), estimator="SOPRCEmbedder")
    with pytest.raises(ValueError, match=r"SOPRCEmbedder was fitted on items of shape \(1, 5, 5"):
        fitted[0]


def test_reading_files_without_pillow_names_the_extra(tmp_path, monkeypatch):
    paths = _png_files(tmp_path, np.zeros((1, 2, 2), dtype=np.uint8))
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r"Pillow.*\.\[images\]"):
        ItemDataset(paths)


def test_item_transform_runs_seeded_and_leaves_torchs_generator_alone():
    items = ItemDataset(TensorItems(list(torch.rand(4, 6))), item_transform=_random_shift)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first = items.read(2, seed=11)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(items.read(2, seed=11), first)
    assert not torch.equal(items.read(2, seed=12), first)


def _epoch(n_items, n_batches=3, width=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    indices = torch.randint(n_items, (n_batches, width), generator=generator)
    valid = torch.ones(n_batches, width, dtype=torch.bool)
    valid[-1, -1] = False
    return EpochBatches(indices, valid, torch.arange(n_batches * 2).view(n_batches, 2))


def test_batches_read_by_workers_equal_those_of_the_main_process(one_torch_thread):
    """A random item transform draws the same values with 0 or 2 workers and batch by batch:
    each item's read is seeded from one draw of torch's generator per epoch and its place."""
    items = ItemDataset(TensorItems(list(torch.rand(10, 6))), item_transform=_random_shift)
    epoch = _epoch(10)
    read = {}
    for workers in (0, 2):
        inputs = TrainingInputs(items, torch.device("cpu"), num_workers=workers)
        assert not inputs.resident and inputs.index_device == torch.device("cpu")
        torch.manual_seed(3)
        read[workers] = list(inputs.batches(epoch))
        read[workers].append(torch.rand(()))  # the generator after the epoch
    one_by_one = TrainingInputs(items, torch.device("cpu"))
    torch.manual_seed(3)
    by_number = [one_by_one.batch(epoch, number) for number in range(3)]
    for a, b, c in zip(read[0][:3], read[2][:3], by_number, strict=True):
        assert torch.equal(a.inputs, b.inputs) and torch.equal(a.inputs, c.inputs)
        assert torch.equal(a.indices, b.indices) and torch.equal(a.groups, b.groups)
    assert torch.equal(read[0][3], read[2][3])
    assert not torch.equal(read[0][0].inputs[0], read[0][1].inputs[0])  # places differ
    # Inference reads every item once, in order, with the seed of its row.
    chunks = torch.cat(list(TrainingInputs(items, torch.device("cpu"), num_workers=2).chunks(4)))
    assert torch.equal(chunks, torch.stack([items.read(row, row) for row in range(10)]))


def test_workers_read_the_files_of_a_batch(tmp_path, one_torch_thread):
    images = np.random.RandomState(0).randint(0, 256, size=(8, 3, 3)).astype(np.uint8)
    inputs = TrainingInputs(ItemDataset(_png_files(tmp_path, images)), "cpu", num_workers=2)
    (batch,) = inputs.batches(_epoch(8, n_batches=1))
    expected = torch.from_numpy(images[batch.indices.numpy(), None]).to(torch.float32) / 255
    assert torch.equal(batch.inputs, expected)
