"""SNMClassifier's targets: their encoding as one sparse indicator, the label table's columns,
and the predictions decoded back, against loops."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import brute_force_top_k

from skrank.multilabel._targets import (
    UNTRAINED_LABEL_SCORE,
    RowsAlike,
    drop_rows_without_positives,
    encode_targets,
    indicator_of_top,
    one_hot,
    scores_of_every_label,
    table_labels,
    with_untrained_labels,
)


def test_multiclass_labels_are_encoded_one_hot():
    y = np.array(["b", "a", "c", "a"])
    classes, positives, multilabel_output = encode_targets(y)
    np.testing.assert_array_equal(classes, ["a", "b", "c"])
    assert sp.isspmatrix_csr(positives) and positives.dtype == np.int8
    np.testing.assert_array_equal(positives.toarray(), np.eye(3, dtype=np.int8)[[1, 0, 2, 0]])
    assert multilabel_output is False
    np.testing.assert_array_equal(one_hot(np.array([2, 0]), 3).toarray(), [[0, 0, 1], [1, 0, 0]])


@pytest.mark.parametrize("sparse", [False, True])
def test_a_multilabel_indicator_is_kept_with_its_format(sparse):
    Y = np.array([[1, 0, 1], [0, 0, 1], [0, 1, 0]], dtype=np.float32)
    classes, positives, multilabel_output = encode_targets(sp.csr_matrix(Y) if sparse else Y)
    np.testing.assert_array_equal(classes, np.arange(3))
    np.testing.assert_array_equal(positives.toarray(), Y)
    assert positives.nnz == 4  # no stored zeros
    assert multilabel_output == (sparse, np.dtype(np.float32).str)


def test_targets_of_another_kind_are_refused():
    with pytest.raises(ValueError, match="0/1"):
        encode_targets(np.array([[2, 0], [0, 1]]))
    with pytest.raises(ValueError, match="Unknown label type|continuous"):
        encode_targets(np.array([0.5, 1.5]))


def test_rows_without_a_positive_are_dropped_with_a_count():
    assert drop_rows_without_positives(sp.csr_matrix(np.eye(3))) is None
    positives = sp.csr_matrix(np.array([[1, 0], [0, 0], [0, 1], [0, 0]]))
    with pytest.warns(UserWarning, match="2 of 4 training examples"):
        np.testing.assert_array_equal(drop_rows_without_positives(positives), [0, 2])
    with pytest.raises(ValueError, match="No training example"):
        drop_rows_without_positives(sp.csr_matrix((3, 2)))


def test_the_table_holds_the_labels_with_a_positive_and_a_warm_start_keeps_them():
    positives = sp.csr_matrix(np.array([[1, 0, 0, 1], [0, 0, 0, 1]]))
    np.testing.assert_array_equal(table_labels(positives), [0, 3])
    np.testing.assert_array_equal(table_labels(positives, np.array([0, 2, 3])), [0, 2, 3])
    with pytest.raises(ValueError, match="column 3"):
        table_labels(positives, np.array([0, 1]))


@pytest.mark.parametrize("k", [1, 3, 5, 7])
def test_labels_without_a_table_row_come_last_in_the_top_k(k):
    rng = np.random.RandomState(0)
    trained = np.array([1, 2, 4, 6])
    table_scores = rng.randint(-3, 3, size=(6, 4)).astype(np.float32)
    dense = np.full((6, 7), UNTRAINED_LABEL_SCORE, dtype=np.float32)
    dense[:, trained] = table_scores
    np.testing.assert_array_equal(
        scores_of_every_label(torch.from_numpy(table_scores), trained, 7).numpy(), dense
    )
    rows = brute_force_top_k(table_scores, min(k, 4))
    scores, labels = with_untrained_labels(
        np.take_along_axis(table_scores, rows, axis=1), rows, trained, 7, k
    )
    # the full sort's order, ties broken by the smaller table row (the untrained labels' ties
    # by the smaller label)
    untrained = np.array([0, 3, 5])[: max(0, k - 4)]
    expected = np.hstack([trained[rows], np.broadcast_to(untrained, (6, untrained.size))])
    np.testing.assert_array_equal(labels, expected)
    np.testing.assert_array_equal(scores, np.take_along_axis(dense, expected, axis=1))


@pytest.mark.parametrize("sparse", [False, True])
def test_the_indicator_of_the_top_labels_has_the_format_of_the_targets(sparse):
    top = np.array([[2, 0], [1, 2]])
    indicator = indicator_of_top(top, 4, (sparse, np.dtype(np.int64).str))
    assert sp.issparse(indicator) == sparse and indicator.dtype == np.int64
    dense = indicator.toarray() if sparse else indicator
    np.testing.assert_array_equal(dense, [[1, 0, 1, 0], [0, 1, 1, 0]])


def test_rows_alike_index_every_array_and_map_a_memory_mapped_one(tmp_path):
    mapped = np.memmap(tmp_path / "X.f32", dtype=np.float32, mode="w+", shape=(5, 2))
    mapped[:] = np.arange(10).reshape(5, 2)
    labels = sp.csr_matrix(np.eye(5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        part = RowsAlike(labels, mapped)[np.array([3, 1])]
    rows_labels, rows = part.arrays
    np.testing.assert_array_equal(rows_labels.toarray(), np.eye(5)[[3, 1]])
    assert not isinstance(rows, np.memmap) or rows.shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(rows[:]), [[6, 7], [2, 3]])
