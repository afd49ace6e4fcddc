"""Tests of skrank.datasets.make_composite_digits."""

import numpy as np
import pytest

from skrank.datasets import load_mnist, make_composite_digits
from skrank.datasets._composite import _long_tailed_sizes


@pytest.fixture(scope="module")
def composite():
    return make_composite_digits(3_000, n_digits=2, n_classes=30, random_state=0)


def test_pixels_are_the_source_mnist_images_side_by_side(composite):
    mnist = load_mnist()
    assert composite.data.shape == (3_000, 2 * 784) and composite.data.dtype == np.float32
    assert composite.images.shape == (3_000, 28, 56)
    np.testing.assert_array_equal(composite.data, composite.images.reshape(3_000, -1))
    for position in range(2):
        block = composite.images[:, :, 28 * position : 28 * (position + 1)]
        np.testing.assert_array_equal(block, mnist.images[composite.source_indices[:, position]])
        # each image shows the digit its class names
        np.testing.assert_array_equal(
            mnist.target[composite.source_indices[:, position]], composite.digits[:, position]
        )
    np.testing.assert_array_equal(composite.target, composite.digits @ [10, 1])


def test_halves_are_class_disjoint_and_image_disjoint(composite):
    train = composite.subset == "train"
    assert 0 < train.sum() < 3_000
    assert np.intersect1d(composite.target[train], composite.target[~train]).size == 0
    assert (
        np.intersect1d(composite.source_indices[train], composite.source_indices[~train]).size == 0
    )
    np.testing.assert_array_equal(
        np.unique(composite.target[train]).shape[0], np.unique(composite.target[~train]).shape[0]
    )
    for subset in ("train", "test"):
        part = make_composite_digits(3_000, n_digits=2, n_classes=30, subset=subset, random_state=0)
        mask = composite.subset == subset
        np.testing.assert_array_equal(part.data, composite.data[mask])
        np.testing.assert_array_equal(part.target, composite.target[mask])
        np.testing.assert_array_equal(part.target_names, np.unique(composite.target[mask]))


def test_class_sizes_follow_the_tail(composite):
    sizes = np.sort(np.unique(composite.target, return_counts=True)[1])[::-1]
    np.testing.assert_array_equal(sizes, _long_tailed_sizes(3_000, 30, 0.5, 4))
    # odd size ranks train, even ranks test: both halves have the same tail
    train_sizes = np.sort(
        np.unique(composite.target[composite.subset == "train"], return_counts=True)[1]
    )[::-1]
    np.testing.assert_array_equal(train_sizes, sizes[::2])


@pytest.mark.parametrize("exponent", [0.0, 0.5, 1.0, 2.0])
def test_long_tailed_sizes_reference(exponent):
    sizes = _long_tailed_sizes(1_000, 7, exponent, 3)
    assert sizes.sum() == 1_000 and sizes.min() >= 3
    ideal = 3 + (1_000 - 21) * np.arange(1, 8) ** -exponent / (np.arange(1, 8) ** -exponent).sum()
    assert np.abs(sizes - ideal).max() < 1
    assert np.all(np.diff(sizes) <= 0)


@pytest.mark.parametrize(
    "n_samples, n_classes, exponent, min_size, max_size",
    [(35_000, 1_000, 0.5, 10, 300), (1_000, 7, 2.0, 3, 400), (95, 10, 1.0, 2, 10)]
    + [(100, 10, 1.0, 2, 10), (1_000, 7, 0.5, 3, 1_000)],
)
def test_long_tailed_sizes_capped(n_samples, n_classes, exponent, min_size, max_size):
    sizes = _long_tailed_sizes(n_samples, n_classes, exponent, min_size, max_size)
    assert sizes.sum() == n_samples and min_size <= sizes.min() and sizes.max() <= max_size
    assert np.all(np.diff(sizes) <= 0)
    # The uncapped classes share the rest in proportion to rank ** -exponent, and a capped
    # class's share would have passed the cap.
    capped = sizes == max_size
    if capped.all():  # n_samples == n_classes * max_size
        return
    weights = np.arange(1, n_classes + 1) ** -exponent
    rest = n_samples - capped.sum() * max_size - (~capped).sum() * min_size
    ideal = min_size + rest * weights / weights[~capped].sum()
    assert np.abs(sizes[~capped] - ideal[~capped]).max() < 1
    assert np.all(ideal[capped] >= max_size - 1)
    if not capped.any():
        expected = _long_tailed_sizes(n_samples, n_classes, exponent, min_size)
        np.testing.assert_array_equal(sizes[~capped], expected[~capped])


def test_max_class_size_caps_the_composite_classes():
    data = make_composite_digits(
        35_000, n_digits=3, tail_exponent=0.5, min_class_size=10, max_class_size=300,
        subset="train", random_state=0,
    )  # fmt: skip
    sizes = np.sort(np.unique(data.target, return_counts=True)[1])[::-1]
    expected = _long_tailed_sizes(35_000, 1_000, 0.5, 10, 300)[::2]
    np.testing.assert_array_equal(sizes, expected)
    assert sizes.max() == 300 and sizes.min() == 23


def test_random_state_and_classes():
    first = make_composite_digits(400, n_digits=3, n_classes=20, random_state=1)
    second = make_composite_digits(400, n_digits=3, n_classes=20, random_state=1)
    other = make_composite_digits(400, n_digits=3, n_classes=20, random_state=2)
    np.testing.assert_array_equal(first.data, second.data)
    assert not np.array_equal(first.target, other.target)
    assert first.images.shape == (400, 28, 84) and np.unique(first.target).shape[0] == 20
    np.testing.assert_array_equal(first.target, first.digits @ [100, 10, 1])
    X, y = make_composite_digits(400, n_digits=3, n_classes=20, return_X_y=True, random_state=1)
    np.testing.assert_array_equal(X, first.data)
    np.testing.assert_array_equal(y, first.target)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_digits=1, n_classes=11), "n_classes=11 exceeds the 10 sequences"),
        (dict(n_samples=30, n_classes=10), "n_samples >= 40"),
        (dict(subset="val"), "subset"),
        (dict(n_classes=10, max_class_size=9), "n_samples <= 90"),
        (dict(n_classes=10, min_class_size=5, max_class_size=4), "below min_class_size=5"),
    ],
)
def test_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_composite_digits(**{"n_samples": 100, **kwargs})
