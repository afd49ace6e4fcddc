"""Extreme classification data: the repository's text format and the generator."""

import gzip
import io

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

from skrank.datasets import (
    dump_extreme_file,
    load_extreme_file,
    load_extreme_split,
    make_extreme_classification,
)
from skrank.exceptions import ExtremeFormatError


def _small_problem(seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(30, 50, density=0.1, format="csr", random_state=rng)
    X.data = rng.normal(size=X.nnz) * 10.0 ** rng.randint(-8, 8, size=X.nnz)
    Y = sp.random(30, 12, density=0.2, format="csr", random_state=rng)
    Y.data[:] = 1
    X, Y = X.tolil(), Y.astype(np.int8).tolil()
    X[4], Y[4] = 0, 0  # neither features nor labels
    X[7] = 0  # labels only
    Y[9] = 0  # features only
    return X.tocsr(), Y.tocsr()


def test_round_trip_is_exact(tmp_path):
    X, Y = _small_problem()
    path = tmp_path / "data.txt"
    dump_extreme_file(X, Y, path)
    X_read, Y_read = load_extreme_file(path)
    assert X_read.shape == X.shape and Y_read.shape == Y.shape
    assert (X_read != X).nnz == 0 and X_read.nnz == X.nnz  # bitwise: 17 significant digits
    assert (Y_read != Y).nnz == 0 and Y_read.dtype == np.int8
    text = path.read_text().splitlines()
    assert text[0] == "30 50 12"
    assert text[5] == " 0:0"  # row 4: nothing to write, not an empty line
    # Written again from what was read: the same bytes.
    buffer = io.BytesIO()
    dump_extreme_file(X_read, Y_read, buffer)
    assert buffer.getvalue() == path.read_bytes()


def test_reads_the_documented_format_and_gzip(tmp_path):
    text = b"3 6 4\n0,3 1:0.5 4:2\n 2:1\n2 \n"
    X, Y = load_extreme_file(io.BytesIO(text))
    np.testing.assert_array_equal(
        X.toarray(), [[0, 0.5, 0, 0, 2, 0], [0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]]
    )
    np.testing.assert_array_equal(Y.toarray(), [[1, 0, 0, 1], [0, 0, 0, 0], [0, 0, 1, 0]])
    path = tmp_path / "data.txt.gz"
    path.write_bytes(gzip.compress(text))
    X_gz, Y_gz = load_extreme_file(path)
    assert (X_gz != X).nnz == 0 and (Y_gz != Y).nnz == 0


@pytest.mark.parametrize("read_only", [False, True])
def test_dump_leaves_a_float32_tfidf_matrix_unchanged(read_only):
    # TfidfVectorizer returns float32 CSR with unsorted indices: float64 values converted from
    # them must not be written under the caller's indices sorted in place.
    documents = ["the cat sat on the mat", "a dog ate my homework", "zebra apple cat dog the"]
    X = TfidfVectorizer(dtype=np.float32).fit_transform(documents)
    assert not X.has_sorted_indices
    before = X.toarray(), X.indices.copy(), X.data.copy()
    if read_only:
        for array in (X.data, X.indices, X.indptr):
            array.setflags(write=False)
    buffer = io.BytesIO()
    dump_extreme_file(X, sp.csr_matrix(np.eye(3, dtype=np.int8)), buffer)
    np.testing.assert_array_equal(X.indices, before[1])
    np.testing.assert_array_equal(X.data, before[2])
    buffer.seek(0)
    X_read, _ = load_extreme_file(buffer)
    np.testing.assert_array_equal(X_read.toarray(), before[0])


@pytest.mark.parametrize(
    "text, message",
    [
        (b"", "is empty"),
        (b"3 6\n0 1:1\n", "line 1: expected the header"),
        (b"2 6 4\n0 1:1\n", "announces 2 rows but the file has 1"),
        (b"1 6 4\n0 1:1\n1 2:1\n", "announces 1 rows but the file has 2"),
        (b"2 6 4\n0 1:1\n1 9:1\n", "line 3: feature index 9 is out of range"),
        (b"2 6 4\n0 1:1 1:2\n1 2:1\n", "line 2: feature 1 appears twice"),
        (b"1 6 4\n0 3:1 1:2\n", "line 2: feature indices are not increasing"),
        (b"2 6 4\n0 1:1\n7 2:1\n", "line 3: label 7 is not an integer in \\[0, 4\\)"),
        (b"1 6 4\n1.5 2:1\n", "line 2: label 1.5"),
        (b"2 6 4\n0 1:1\n1,1 2:1\n", "line 3: label 1 appears twice"),
        (b"1 6 4\n0 1:x\n", "line 2: feature '1:x' has no numeric value"),
        (b"1 6 4\n0 a:1\n", "line 2: feature 'a:1' is not 'index:value'"),
        (b"1 6 4\n0 qid:3 1:1\n", "line 2: feature 'qid:3' is not 'index:value'"),
        (b"1 6 4\n0 1:nan\n", "line 2: feature '1:nan' has a value that is not finite"),
        (b"1 6 4\n0 1:-inf\n", "line 2: feature '1:-inf' has a value that is not finite"),
        (b"1 6 4\n0 99999999999999999999:1\n", "line 2: feature index 99999999999999999999 is"),
        (b"1 99999999999999999999 4\n0 1:1\n", "line 1: the header announces 9+ features"),
        (b"2 6 4\n# a comment\n0 1:1\n7 2:1\n", "line 4: label 7 is not an integer"),
        (b"2 6 4\n\n0 1:1\n1,1 2:1\n", "line 4: label 1 appears twice"),
    ],
)
def test_malformed_files_raise_naming_file_and_line(text, message, tmp_path):
    path = tmp_path / "broken.txt"
    path.write_bytes(text)
    with pytest.raises(ExtremeFormatError, match=message) as error:
        load_extreme_file(path)
    assert str(path) in str(error.value)
    # A file object: the same line found by reading it again.
    with pytest.raises(ExtremeFormatError, match=message):
        load_extreme_file(io.BytesIO(text))


def test_a_value_beyond_float32_is_not_finite_in_float32():
    text = b"1 6 4\n0 1:1e39\n"
    with pytest.raises(ExtremeFormatError, match="line 2: .* not finite in float32"):
        load_extreme_file(io.BytesIO(text), dtype=np.float32)
    X, _ = load_extreme_file(io.BytesIO(text), dtype=np.float64)
    assert X[0, 1] == 1e39


@pytest.mark.parametrize("cut", ["truncated", "checksum"])
def test_damaged_gzip_compression_is_a_format_error_naming_the_file(cut, tmp_path):
    compressed = gzip.compress(b"1 6 4\n0 1:1\n")
    if cut == "truncated":
        compressed = compressed[:-3]
    else:
        compressed = compressed[:-8] + bytes(4) + compressed[-4:]
    path = tmp_path / "damaged.txt.gz"
    path.write_bytes(compressed)
    with pytest.raises(ExtremeFormatError, match="damaged gzip compression") as error:
        load_extreme_file(path)
    assert str(path) in str(error.value)


def test_a_header_with_zero_features_reads():
    X, Y = load_extreme_file(io.BytesIO(b"1 0 2\n1\n"))
    assert X.shape == (1, 0) and X.nnz == 0
    np.testing.assert_array_equal(Y.toarray(), [[0, 1]])


def test_split_files(tmp_path):
    path = tmp_path / "split.txt"
    path.write_text("3 1\n1 2\n5 4\n")
    np.testing.assert_array_equal(load_extreme_split(path), [[2, 0], [0, 1], [4, 3]])
    path.write_text("0 1\n")
    with pytest.raises(ExtremeFormatError, match="1-based"):
        load_extreme_split(path)
    path.write_text("")
    with pytest.raises(ExtremeFormatError, match="empty"):
        load_extreme_split(path)


def test_generator_statistics_match_its_parameters():
    params = dict(
        n_samples=6000,
        n_features=20_000,
        n_labels=3000,
        nonzeros_per_row=40,
        labels_per_row=3.0,
        label_exponent=0.8,
        cluster_share=0.5,
        cluster_size=8,
        random_state=0,
    )
    X, Y = make_extreme_classification(**params)
    assert X.shape == (6000, 20_000) and Y.shape == (6000, 3000)
    assert X.nnz / 6000 == pytest.approx(40, rel=0.02)
    assert Y.nnz / 6000 == pytest.approx(3.0, rel=0.03)
    np.testing.assert_allclose(sp.linalg.norm(X, axis=1), 1.0)  # TF-IDF rows of unit norm
    assert np.all(X.data > 0) and Y.dtype == np.int8 and np.all(Y.data == 1)
    # Without clusters, label frequencies follow the power law: the slope of log frequency
    # against log rank.
    _, Y_alone = make_extreme_classification(**{**params, "cluster_share": 0.0})
    frequencies = np.sort(np.diff(Y_alone.tocsc().indptr))[::-1]
    ranks = np.arange(1, 301)
    slope = np.polyfit(np.log(ranks[10:]), np.log(frequencies[10:300]), 1)[0]
    assert slope == pytest.approx(-0.8, abs=0.1)
    # The share of a row's later labels in its first label's cluster: about cluster_share
    # (plus the chance of a popular draw landing there), against almost none without clusters.
    assert _share_in_first_cluster(Y, 8) == pytest.approx(0.5, abs=0.05)
    assert _share_in_first_cluster(Y_alone, 8) < 0.05
    counts, _ = make_extreme_classification(**params, features="counts")
    assert np.all(counts.data == np.round(counts.data)) and counts.data.min() >= 1


def _share_in_first_cluster(Y, cluster_size):
    """Among the labels of rows with several, the share in the cluster of the row's first
    label drawn (the generator keeps labels sorted, so test every label against every other)."""
    shares = []
    for i in range(Y.shape[0]):
        clusters = Y.indices[Y.indptr[i] : Y.indptr[i + 1]] // cluster_size
        if clusters.size > 1:
            _, counts = np.unique(clusters, return_counts=True)
            shares.append((counts.max() - 1) / (clusters.size - 1))
    return np.mean(shares)


def test_generator_presets_and_overrides():
    X, Y = make_extreme_classification("amazon-670k", n_labels=5000, random_state=0)
    assert X.shape[1] == 135_909 and Y.shape[1] == 5000
    assert X.shape[0] == round(5000 * 3.99 / 5.45)
    assert Y.nnz / X.shape[0] == pytest.approx(5.45, rel=0.05)
    again, _ = make_extreme_classification("amazon-670k", n_labels=5000, random_state=0)
    assert (again != X).nnz == 0
    with pytest.raises(ValueError, match="words_per_label=30 exceeds n_features=20"):
        make_extreme_classification(n_features=20, words_per_label=30)
