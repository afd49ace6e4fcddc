"""Tests of skrank.datasets: shipped real data, the ARFF and IDX readers, synthetic generators."""

import gzip
import io
import math
import struct
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.model_selection import train_test_split
from sklearn.neighbors import NearestCentroid

from skrank.datasets import (
    load_bibtex,
    load_corel5k,
    load_mnist,
    load_sparse_arff,
    make_large_output_classification,
    make_score_simulation,
    make_sphere_classes,
)
from skrank.datasets._idx import read_idx
from skrank.datasets._real import _read_mulan_label_names
from skrank.datasets._synthetic import _draw_zipf

SHIPPED_DATA = Path(__file__).resolve().parents[2] / "skrank" / "datasets" / "data"
ORIGINAL_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_originals = pytest.mark.skipif(
    not ORIGINAL_DATA.is_dir(), reason="original data folder shared/data is absent"
)


# ----------------------------------------------------------------------------- MNIST and IDX


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


def _idx_bytes(type_code, shape, payload):
    return bytes([0, 0, type_code, len(shape)]) + struct.pack(f">{len(shape)}I", *shape) + payload


@pytest.mark.parametrize(
    "type_code, array",
    [
        (0x08, np.arange(12, dtype=np.uint8).reshape(2, 3, 2)),
        (0x09, np.arange(-6, 6, dtype=np.int8).reshape(4, 3)),
        (0x0C, np.arange(-6, 6, dtype=">i4")),
        (0x0E, np.linspace(-1, 1, 12, dtype=">f8").reshape(2, 2, 3)),
    ],
)
def test_read_idx_round_trip(tmp_path, type_code, array):
    content = _idx_bytes(type_code, array.shape, array.tobytes())
    (tmp_path / "a.idx").write_bytes(content)
    (tmp_path / "a.idx.gz").write_bytes(gzip.compress(content))
    for source in (tmp_path / "a.idx", tmp_path / "a.idx.gz", io.BytesIO(content)):
        read = read_idx(source)
        np.testing.assert_array_equal(read, array)
        assert read.shape == array.shape and read.dtype.isnative and read.flags.writeable


@pytest.mark.parametrize(
    "content, match",
    [
        (b"\x00\x01\x08\x01" + struct.pack(">I", 1) + b"\x00", "magic number"),
        (b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"\x00", "magic number"),
        (b"\x00\x00", "magic number"),
        (b"\x00\x00\x08\x02" + struct.pack(">I", 2), "header"),
        (_idx_bytes(0x08, (2, 3), bytes(5)), "announces"),
        (_idx_bytes(0x08, (2, 3), bytes(7)), "announces"),
    ],
)
def test_read_idx_rejects_bad_files(content, match):
    with pytest.raises(ValueError, match=match):
        read_idx(io.BytesIO(content))


# ------------------------------------------------------------------------- ARFF reader

TOY_ARFF = """\
% a comment line
@RELATION 'toy data'

@attribute f_a numeric
@attribute 'label one' {0,1}
@ATTRIBUTE "f b"\tREAL
@attribute 'it\\'s' {0,1}
@attribute f_c integer
@attribute lab2 {0, 1}

@data
% comment inside the data
{0 1.5,1 1,2 -2,5 1}
{}

{4 7}
0,0,3,1,0,1
{ 1 1 , 3 1 }
"""
TOY_FEATURES = np.array([[1.5, -2, 0, 0], [0, 0, 0, 0], [0, 0, 0, 7], [0, 3, 1, 0], [0, 0, 1, 0]])


def _toy(**kwargs):
    return load_sparse_arff(io.StringIO(TOY_ARFF), **kwargs)


def test_load_sparse_arff_labels_by_name():
    bunch = _toy(label_names=["lab2", "label one"])
    np.testing.assert_array_equal(bunch.feature_names, ["f_a", "f b", "it's", "f_c"])
    np.testing.assert_array_equal(bunch.target_names, ["lab2", "label one"])
    assert bunch.relation == "toy data"
    assert sp.isspmatrix_csr(bunch.data) and bunch.data.dtype == np.float64
    assert sp.isspmatrix_csr(bunch.target) and bunch.target.dtype == np.int64
    assert bunch.data.has_canonical_format and bunch.target.has_canonical_format
    np.testing.assert_array_equal(bunch.data.toarray(), TOY_FEATURES)
    np.testing.assert_array_equal(bunch.target.toarray(), [[1, 1], [0, 0], [0, 0], [1, 0], [0, 1]])
    assert bunch.data.nnz == np.count_nonzero(TOY_FEATURES)  # the dense row's zeros dropped


def test_load_sparse_arff_last_attributes_as_labels():
    bunch = _toy(n_labels=1)
    np.testing.assert_array_equal(bunch.target_names, ["lab2"])
    np.testing.assert_array_equal(bunch.feature_names, ["f_a", "label one", "f b", "it's", "f_c"])
    np.testing.assert_array_equal(bunch.target.toarray(), [[1], [0], [0], [1], [0]])
    np.testing.assert_array_equal(bunch.data[:, 1].toarray().ravel(), [1, 0, 0, 0, 1])


def test_load_sparse_arff_label_values_must_be_binary():
    with pytest.raises(ValueError, match=r"line 16: label attribute 'f_c' has value 7"):
        _toy(label_names=["f_c"])


def test_load_sparse_arff_no_labels_and_no_rows():
    bunch = _toy(n_labels=0)
    assert bunch.data.shape == (5, 6) and bunch.target.shape == (5, 0)
    empty = load_sparse_arff(io.StringIO("@relation r\n@attribute a {0,1}\n@data\n"), n_labels=1)
    assert empty.data.shape == (0, 0) and empty.target.shape == (0, 1)


def test_load_sparse_arff_sources(tmp_path):
    expected = _toy(n_labels=1)
    plain, compressed = tmp_path / "toy.arff", tmp_path / "toy.arff.gz"
    plain.write_text(TOY_ARFF)
    compressed.write_bytes(gzip.compress(TOY_ARFF.encode()))
    sources = [
        plain,
        str(compressed),
        io.BytesIO(TOY_ARFF.encode()),
        io.BytesIO(gzip.compress(TOY_ARFF.encode())),
    ]
    for source in sources:
        bunch = load_sparse_arff(source, n_labels=1)
        assert (bunch.data != expected.data).nnz == 0
        assert (bunch.target != expected.target).nnz == 0
    binary = io.BytesIO(TOY_ARFF.encode())
    load_sparse_arff(binary, n_labels=1)
    assert not binary.closed


HEADER = "@relation r\n@attribute a numeric\n@attribute b {0,1}\n@data\n"


@pytest.mark.parametrize(
    "text, match",
    [
        (HEADER + "{0 1,1 1\n", r"line 5: malformed sparse row"),
        (HEADER + "{0 1 1}\n", r"line 5: malformed sparse row"),
        (HEADER + "{0 1 2,1}\n", r"line 5: malformed sparse row"),
        (HEADER + "{0 1,,1 1}\n", r"line 5: malformed sparse row"),
        (HEADER + "{}\n{x 1}\n", r"line 6: attribute indices must be integers"),
        (HEADER + "\n{2 1}\n", r"line 6: attribute index 2 is out of range \[0, 2\)"),
        (HEADER + "{-1 1}\n", r"line 5: attribute index -1 is out of range"),
        (HEADER + "{1 1,0 1}\n", r"line 5: attribute indices must increase within a row"),
        (HEADER + "{0 1,0 2}\n", r"line 5: attribute indices must increase within a row"),
        (HEADER + "{0 ?}\n", r"line 5: missing values"),
        (HEADER + "1,?\n", r"line 5: missing values"),
        (HEADER + "{0 abc}\n", r"line 5: value 'abc' is not a number"),
        (HEADER + "1,abc\n", r"line 5: value 'abc' is not a number"),
        (HEADER + "{0 nan}\n", r"line 5: non-finite value"),
        (HEADER + "{0 inf}\n", r"line 5: non-finite value"),
        (HEADER + "{1 2}\n", r"line 5: value 2 of nominal attribute 'b' is not one of"),
        (HEADER + "1,0,1\n", r"line 5: dense row has 3 values, expected 2"),
        ("@relation r\n@attribute a string\n@data\n", r"line 2: unsupported type 'string'"),
        ("@relation r\n@attribute a date\n@data\n", r"line 2: unsupported type"),
        ("@relation r\n@attribute a {x,y}\n@data\n", r"line 2: .*non-numeric values"),
        ("@relation r\n@attribute a {1,0}\n@data\n", r"line 2: the first value .* must be 0"),
        ("@relation r\n@attribute 'a b {0,1}\n@data\n", r"line 2: unterminated quote"),
        ("@relation r\n@attribute\n@data\n", r"line 2: missing name"),
        ("@relation r\n@attribute a numeric\n@attribute a numeric\n", r"line 3: duplicate"),
        ("@relation r\n@attribute a numeric\n", r"no @data section"),
        ("@relation r\n@data\n", r"line 2: @data before any @attribute"),
        ("@relation r\nfoo bar\n", r"line 2: expected @relation, @attribute or @data"),
    ],
)
def test_load_sparse_arff_errors_name_the_line(text, match):
    with pytest.raises(ValueError, match=match):
        load_sparse_arff(io.StringIO(text), n_labels=0)


@pytest.mark.parametrize(
    "data, match",
    [
        pytest.param(
            HEADER.encode() + b"{99999999999999999999 1}\n",
            r"line 5: attribute index out of range",
            id="huge-index",
        ),
        pytest.param(
            HEADER.encode() + b"{0 1}\n{0 \xff1}\n",
            r"line 6: the line is not UTF-8 text",
            id="not-utf8",
        ),
        pytest.param(
            b"@relation r\n@attribute 'a\\' numeric\n@data\n",
            r"line 2: unterminated quote",
            id="escaped-closing-quote",
        ),
        pytest.param(
            gzip.compress(HEADER.encode() + b"{0 1}\n")[:-3],
            r": damaged gzip compression",
            id="truncated-gzip",
        ),
    ],
)
def test_load_sparse_arff_hostile_bytes_raise_value_error_naming_the_file(data, match, tmp_path):
    path = tmp_path / "hostile.arff"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match) as error:
        load_sparse_arff(path, n_labels=0)
    assert error.type is ValueError  # not UnicodeDecodeError or another subclass
    assert str(path) in str(error.value)


def test_load_sparse_arff_drops_a_byte_order_mark():
    text = (HEADER + "{0 1}\n").encode()
    with_mark = load_sparse_arff(io.BytesIO(b"\xef\xbb\xbf" + text), n_labels=1)
    without = load_sparse_arff(io.BytesIO(text), n_labels=1)
    assert with_mark.feature_names == without.feature_names == ["a"]
    assert with_mark.relation == without.relation
    np.testing.assert_array_equal(with_mark.data.toarray(), without.data.toarray())


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({}, ValueError, "exactly one of label_names and n_labels"),
        ({"n_labels": 1, "label_names": ["b"]}, ValueError, "exactly one"),
        ({"n_labels": 3}, ValueError, r"n_labels=3 exceeds the number of attributes, 2"),
        ({"n_labels": -1}, ValueError, "'n_labels' parameter"),
        ({"label_names": ["b", "z"]}, ValueError, r"1 label name\(s\) are not attributes"),
        ({"label_names": ["b", "b"]}, ValueError, "duplicate"),
        ({"label_names": "b"}, TypeError, "'label_names' parameter"),
    ],
)
def test_load_sparse_arff_label_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        load_sparse_arff(io.StringIO(HEADER + "{1 1}\n"), **kwargs)


def test_load_sparse_arff_rejects_non_files():
    with pytest.raises(TypeError, match="'file' parameter"):
        load_sparse_arff(42, n_labels=0)


# ------------------------------------------------------------------- Bibtex and Corel5k

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


# ------------------------------------------------------------------- score simulation

SCORE_DISTRIBUTIONS = {
    "binormal": (stats.norm(0, 1), stats.norm(1, 1)),
    "bibeta": (stats.beta(2, 5), stats.beta(5, 2)),
    "offset_uniform": (stats.uniform(0, 1), stats.uniform(0.5, 1)),
}


@pytest.mark.parametrize("distribution", SCORE_DISTRIBUTIONS)
def test_make_score_simulation_distributions(distribution):
    y_score, y_true = make_score_simulation(distribution, n_samples=20_000, random_state=0)
    assert y_score.shape == y_true.shape == (20_000,)
    assert y_score.dtype == np.float64 and y_true.dtype == np.int64
    assert y_true.sum() == 2_000 and set(np.unique(y_true)) == {0, 1}
    negative, positive = SCORE_DISTRIBUTIONS[distribution]
    assert stats.kstest(y_score[y_true == 0], negative.cdf).pvalue > 1e-3
    assert stats.kstest(y_score[y_true == 1], positive.cdf).pvalue > 1e-3
    assert 0.3 < y_true[:10_000].mean() / 0.1 < 1.7  # shuffled, positives not all at the end


@pytest.mark.parametrize(
    "n_samples, positive_rate, n_positives",
    [(100_000, 0.1, 10_000), (1001, 0.1, 100), (15, 0.1, 2), (10, 0.25, 2), (3, 0.5, 2)],
)
def test_make_score_simulation_exact_positive_count(n_samples, positive_rate, n_positives):
    _, y_true = make_score_simulation(
        n_samples=n_samples, positive_rate=positive_rate, random_state=1
    )
    assert y_true.sum() == n_positives == round(positive_rate * n_samples)


def test_make_score_simulation_random_state():
    first = make_score_simulation("bibeta", n_samples=500, random_state=3)
    again = make_score_simulation("bibeta", n_samples=500, random_state=3)
    other = make_score_simulation("bibeta", n_samples=500, random_state=4)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], other[0])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"distribution": "normal"}, ValueError, "distribution"),
        ({"positive_rate": 0.0}, ValueError, "positive_rate"),
        ({"positive_rate": 1.0}, ValueError, "positive_rate"),
        ({"n_samples": 4, "positive_rate": 0.1}, ValueError, "gives 0 positives"),
        ({"n_samples": 4, "positive_rate": 0.9}, ValueError, "gives 4 positives"),
        ({"n_samples": 1}, ValueError, "n_samples"),
        ({"n_samples": 10.5}, TypeError, "n_samples"),
    ],
)
def test_make_score_simulation_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_score_simulation(**kwargs)


# ---------------------------------------------------------------------- sphere classes

COS_CAP = math.cos(math.pi / 4)


def test_make_sphere_classes_cap_membership_and_uniformity():
    X, y, centers = make_sphere_classes(30_000, return_centers=True, random_state=0)
    assert X.shape == (30_000, 3) and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y), [10_000, 10_000, 10_000])
    np.testing.assert_allclose(
        centers, [[math.cos(math.pi / 3), math.sin(math.pi / 3), 0], [0, 1, 0], [0, 0, 1]]
    )
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    for label, center in enumerate(centers):
        points = X[y == label]
        heights = points @ center  # cos of the angle to the class center
        assert heights.min() > COS_CAP and heights.max() <= 1.0
        assert stats.kstest(heights, stats.uniform(COS_CAP, 1 - COS_CAP).cdf).pvalue > 1e-3
        # uniform azimuth: second moment c c^T E[z^2] + (I - c c^T) E[1 - z^2] / 2
        mean_squared_height = (1 - COS_CAP**3) / (3 * (1 - COS_CAP))
        projector = np.outer(center, center)
        expected = (
            projector * mean_squared_height
            + (np.eye(3) - projector) * (1 - mean_squared_height) / 2
        )
        # tolerances: 5 standard errors of these means over 10,000 points
        np.testing.assert_allclose(points.T @ points / len(points), expected, atol=0.015)
        np.testing.assert_allclose(points.mean(axis=0), center * (1 + COS_CAP) / 2, atol=0.015)


def test_make_sphere_classes_counts_and_random_state():
    X, y = make_sphere_classes(7, random_state=5)
    np.testing.assert_array_equal(np.bincount(y), [3, 2, 2])
    X_again, y_again = make_sphere_classes(7, random_state=5)
    np.testing.assert_array_equal(X, X_again)
    np.testing.assert_array_equal(y, y_again)
    assert not np.array_equal(make_sphere_classes(7, random_state=6)[0], X)
    with pytest.raises(ValueError, match="n_samples"):
        make_sphere_classes(0)


# --------------------------------------------------------------- large-output generator


def _nearest_centroid_accuracy(X, y):
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0)
    return NearestCentroid().fit(X_train, y_train).score(X_test, y_test)


def test_make_large_output_classification_reaches_bayes_accuracy():
    """For K = 16 uniform labels the Bayes accuracy is Phi(1 / noise) ** 4 (docstring)."""
    X, y = make_large_output_classification(
        n_samples=8000, n_features=10, n_labels=16, noise=0.5, random_state=0
    )
    assert X.shape == (8000, 10) and X.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(np.unique(y), np.arange(16))
    bayes_accuracy = stats.norm.cdf(1 / 0.5) ** 4
    assert abs(_nearest_centroid_accuracy(X, y) - bayes_accuracy) < 0.03


def test_make_large_output_classification_multilabel_blocks_are_learnable():
    X, Y = make_large_output_classification(
        n_samples=8000,
        n_features=12,
        n_labels=33,
        noise=0.5,
        multilabel=True,
        n_labels_per_sample=2,
        random_state=1,
    )
    assert sp.isspmatrix_csr(Y) and Y.shape == (8000, 33) and Y.dtype == np.int64
    assert Y.has_canonical_format
    np.testing.assert_array_equal(Y.getnnz(axis=1), 2)
    first_block, second_block = Y.indices[0::2], Y.indices[1::2]  # blocks of 17 and 16 labels
    assert first_block.max() < 17 <= second_block.min() and second_block.max() < 33
    assert _nearest_centroid_accuracy(X, first_block) > 0.75  # chance: 1/17
    # the second block has 16 labels: every code used, Bayes accuracy Phi(1 / noise) ** 4
    accuracy = _nearest_centroid_accuracy(X, second_block)
    assert abs(accuracy - stats.norm.cdf(1 / 0.5) ** 4) < 0.03


def test_make_large_output_classification_never_allocates_per_label():
    """A (K, d) table for K = 2**50 could not exist; the generator needs O(n d + d log K)."""
    for label_distribution in ("uniform", "zipf"):
        X, y = make_large_output_classification(
            n_samples=50,
            n_features=60,
            n_labels=2**50,
            label_distribution=label_distribution,
            random_state=0,
        )
        assert X.shape == (50, 60) and 0 <= y.min() and y.max() < 2**50


def test_make_large_output_classification_zipf_frequencies():
    _, y = make_large_output_classification(
        n_samples=30_000,
        n_features=8,
        n_labels=20,
        label_distribution="zipf",
        zipf_exponent=1.5,
        random_state=2,
    )
    expected = np.arange(1, 21) ** -1.5
    expected *= len(y) / expected.sum()
    assert stats.chisquare(np.bincount(y, minlength=20), expected).pvalue > 1e-3


@pytest.mark.parametrize("exponent", [0.2, 1.0, 1.0 + 1e-12, 3.0, 4.0])
def test_draw_zipf_matches_the_exact_distribution(exponent):
    rng = np.random.RandomState(0)
    samples = _draw_zipf(12, exponent, 40_000, rng)
    expected = np.arange(1, 13) ** -float(exponent)
    expected *= len(samples) / expected.sum()
    observed = np.bincount(samples, minlength=12)
    rare = expected < 5  # chi-square needs expected counts of at least 5: pool the rare ranks
    if rare.any():
        observed = np.append(observed[~rare], observed[rare].sum())
        expected = np.append(expected[~rare], expected[rare].sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_make_large_output_classification_random_state():
    kwargs = {"n_samples": 30, "n_features": 16, "n_labels": 1000, "label_distribution": "zipf"}
    X, y = make_large_output_classification(**kwargs, random_state=4)
    X_again, y_again = make_large_output_classification(**kwargs, random_state=4)
    np.testing.assert_array_equal(X, X_again)
    np.testing.assert_array_equal(y, y_again)
    assert not np.array_equal(make_large_output_classification(**kwargs, random_state=5)[0], X)


def test_make_large_output_classification_noise_free_data_is_decodable():
    X, y = make_large_output_classification(
        n_samples=200, n_features=20, n_labels=1000, noise=0.0, random_state=0
    )
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), math.sqrt(10))  # 10 code bits
    n_distinct_points = len(np.unique(X.round(10), axis=0))
    assert n_distinct_points == len(np.unique(y))  # one point per label, distinct labels apart


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_features": 9, "n_labels": 1000}, ValueError, "n_features >= 10"),
        (
            {"n_features": 19, "n_labels": 2000, "multilabel": True, "n_labels_per_sample": 2},
            ValueError,
            "n_features >= 20",
        ),
        ({"n_labels_per_sample": 2}, ValueError, "needs multilabel=True"),
        (
            {"n_labels": 5, "multilabel": True, "n_labels_per_sample": 3},
            ValueError,
            "at least 2 labels",
        ),
        ({"n_labels": 1}, ValueError, "n_labels"),
        ({"n_labels": 2**54}, ValueError, "n_labels"),
        ({"noise": -0.1}, ValueError, "noise"),
        ({"label_distribution": "powerlaw"}, ValueError, "label_distribution"),
        ({"zipf_exponent": 0.0}, ValueError, "zipf_exponent"),
        ({"zipf_exponent": 4.5}, ValueError, "zipf_exponent"),
        ({"multilabel": 1}, TypeError, "multilabel"),
        ({"n_samples": 0}, ValueError, "n_samples"),
    ],
)
def test_make_large_output_classification_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_large_output_classification(**kwargs)


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


def test_load_sparse_arff_quoted_names_and_values():
    text = (
        "@relation r\n@attribute 'a x' numeric\n@attribute b {'0','1'}\n@data\n"
        "2.5,'1'\n{0 1,1 '0'}\n"
    )
    bunch = load_sparse_arff(io.StringIO(text), n_labels=1)
    assert bunch.feature_names == ["a x"] and bunch.target_names == ["b"]
    np.testing.assert_array_equal(bunch.data.toarray(), [[2.5], [1.0]])
    np.testing.assert_array_equal(bunch.target.toarray(), [[1], [0]])
