"""The sparse ARFF reader (``skrank.datasets._arff``): toy files, sources and bad input."""

import gzip
import io

import numpy as np
import pytest
import scipy.sparse as sp

from skrank.datasets import load_sparse_arff

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


def test_load_sparse_arff_quoted_names_and_values():
    text = (
        "@relation r\n@attribute 'a x' numeric\n@attribute b {'0','1'}\n@data\n"
        "2.5,'1'\n{0 1,1 '0'}\n"
    )
    bunch = load_sparse_arff(io.StringIO(text), n_labels=1)
    assert bunch.feature_names == ["a x"] and bunch.target_names == ["b"]
    np.testing.assert_array_equal(bunch.data.toarray(), [[2.5], [1.0]])
    np.testing.assert_array_equal(bunch.target.toarray(), [[1], [0]])
