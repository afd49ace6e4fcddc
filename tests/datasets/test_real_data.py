"""The shipped real data sets (``skrank.datasets._real``): MNIST, Bibtex and Corel5k, against
the original files."""

import gzip
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from skrank.datasets import (
    load_bibtex,
    load_corel5k,
    load_mnist,
    load_sparse_arff,
)
from skrank.datasets._idx import read_idx
from skrank.datasets._real import _read_mulan_label_names

SHIPPED_DATA = Path(__file__).resolve().parents[2] / "skrank" / "datasets" / "data"
ORIGINAL_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_originals = pytest.mark.skipif(
    not ORIGINAL_DATA.is_dir(), reason="original data folder shared/data is absent"
)


def test_load_mnist_bunch():
    mnist = load_mnist()
    assert mnist.data.shape == (10_000, 784) and mnist.data.dtype == np.float32
    assert mnist.images.shape == (10_000, 28, 28)
    assert np.shares_memory(mnist.images, mnist.data)
    assert mnist.data.min() == 0.0 and mnist.data.max() == 1.0
    # values are k / 255 exactly as float32
    np.testing.assert_array_equal(
        np.round(mnist.data[:50] * 255) / np.float32(255), mnist.data[:50]
    )
    assert mnist.target.dtype == np.int64
    np.testing.assert_array_equal(
        np.bincount(mnist.target), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    )
    assert len(mnist.feature_names) == 784 and mnist.feature_names[29] == "pixel_1_1"
    np.testing.assert_array_equal(mnist.target_names, np.arange(10))
    assert "LeCun" in mnist.DESCR


def test_load_mnist_return_X_y():
    X, y = load_mnist(return_X_y=True)
    mnist = load_mnist()
    np.testing.assert_array_equal(X, mnist.data)
    np.testing.assert_array_equal(y, mnist.target)


@needs_originals
def test_load_mnist_matches_original_files():
    images = read_idx(ORIGINAL_DATA / "mnist" / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(ORIGINAL_DATA / "mnist" / "t10k-labels-idx1-ubyte.gz")
    mnist = load_mnist()
    np.testing.assert_array_equal(mnist.images, images / np.float32(255))
    np.testing.assert_array_equal(mnist.target, labels)


MULAN_SETS = {
    # loader: (xml file, n_train, n_test, n_features, n_labels, nnz of data/target train, test)
    load_bibtex: ("bibtex.xml.gz", 4880, 2515, 1836, 159, (334250, 11616), (173496, 6146)),
    load_corel5k: ("Corel5k.xml.gz", 4500, 500, 499, 374, (36794, 15847), (4557, 1763)),
}


@pytest.fixture(scope="module", params=list(MULAN_SETS), ids=lambda f: f.__name__)
def mulan_sets(request):
    loader = request.param
    return loader, {subset: loader(subset=subset) for subset in ("train", "test", "all")}


def test_mulan_loaders_shapes_and_contents(mulan_sets):
    loader, bunches = mulan_sets
    xml_file, n_train, n_test, n_features, n_labels, nnz_train, nnz_test = MULAN_SETS[loader]
    n_samples = {"train": n_train, "test": n_test, "all": n_train + n_test}
    for subset, bunch in bunches.items():
        assert bunch.data.shape == (n_samples[subset], n_features)
        assert bunch.target.shape == (n_samples[subset], n_labels)
        for matrix, dtype in ((bunch.data, np.float64), (bunch.target, np.int64)):
            assert sp.isspmatrix_csr(matrix) and matrix.dtype == dtype
            assert matrix.has_canonical_format
            assert 0 <= matrix.indices.min() and matrix.indices.max() < matrix.shape[1]
            np.testing.assert_array_equal(matrix.data, 1)  # binary features and labels
        assert bunch.target.getnnz(axis=1).min() >= 1  # every sample has a label
        assert len(set(bunch.feature_names)) == len(bunch.feature_names) == n_features
        with (SHIPPED_DATA / xml_file).open("rb") as raw, gzip.open(raw) as xml:
            np.testing.assert_array_equal(bunch.target_names, _read_mulan_label_names(xml))
        assert bunch.DESCR.strip()
    assert (bunches["train"].data.nnz, bunches["train"].target.nnz) == nnz_train
    assert (bunches["test"].data.nnz, bunches["test"].target.nnz) == nnz_test
    for attribute in ("data", "target"):
        stacked = sp.vstack([bunches["train"][attribute], bunches["test"][attribute]])
        assert (bunches["all"][attribute] != stacked).nnz == 0
    assert bunches["all"].target.getnnz(axis=0).min() >= 1  # every label occurs somewhere


def test_mulan_loaders_return_X_y(mulan_sets):
    loader, bunches = mulan_sets
    X, Y = loader(subset="test", return_X_y=True)
    assert (X != bunches["test"].data).nnz == 0 and (Y != bunches["test"].target).nnz == 0
    with pytest.raises(ValueError, match="'subset' parameter"):
        loader(subset="validation")


MULAN_FILES = {
    load_bibtex: ("bibtex", "bibtex-test.arff"),
    load_corel5k: ("corel5k", "Corel5k-test-sparse.arff"),
}


@needs_originals
def test_mulan_loaders_match_original_files(mulan_sets):
    """The label attributes are the last ones of the ARFF files, named as in the xml header."""
    loader, bunches = mulan_sets
    folder, test_file = MULAN_FILES[loader]
    n_labels = MULAN_SETS[loader][4]
    original = load_sparse_arff(ORIGINAL_DATA / folder / test_file, n_labels=n_labels)
    np.testing.assert_array_equal(original.target_names, bunches["test"].target_names)
    np.testing.assert_array_equal(original.feature_names, bunches["test"].feature_names)
    assert (original.data != bunches["test"].data).nnz == 0
    assert (original.target != bunches["test"].target).nnz == 0


SHIPPED_COPIES = {
    "t10k-images-idx3-ubyte.gz": "mnist/t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz": "mnist/t10k-labels-idx1-ubyte.gz",
    "bibtex-train.arff.gz": "bibtex/bibtex-train.arff",
    "bibtex-test.arff.gz": "bibtex/bibtex-test.arff",
    "bibtex.xml.gz": "bibtex/bibtex.xml",
    "Corel5k-train-sparse.arff.gz": "corel5k/Corel5k-train-sparse.arff",
    "Corel5k-test-sparse.arff.gz": "corel5k/Corel5k-test-sparse.arff",
    "Corel5k.xml.gz": "corel5k/Corel5k.xml",
}


@needs_originals
@pytest.mark.parametrize("shipped, original", SHIPPED_COPIES.items())
def test_shipped_copies_equal_originals(shipped, original):
    def content(path):
        raw = path.read_bytes()
        return gzip.decompress(raw) if path.suffix == ".gz" else raw

    assert content(SHIPPED_DATA / shipped) == content(ORIGINAL_DATA / original)


def test_mulan_loader_docstrings_state_the_loaded_sizes(mulan_sets):
    # The loaders' docstrings are made from the data set table: their size tables must say
    # what the loaders return.
    loader, bunches = mulan_sets
    n_train, n_test = (bunches[subset].data.shape[0] for subset in ("train", "test"))
    n_features, n_labels = bunches["all"].data.shape[1], bunches["all"].target.shape[1]
    assert f"{n_train:,} train, {n_test:,} test, {n_train + n_test:,} all" in loader.__doc__
    lines = {line.split()[0]: line.split()[-1] for line in loader.__doc__.splitlines()[4:9]}
    assert lines["Labels"] == f"{n_labels:,}" and lines["Dimensionality"] == f"{n_features:,}"
    assert loader.__name__ == loader.__qualname__ and loader.__module__ == "skrank.datasets._real"
