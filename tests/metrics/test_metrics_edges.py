"""Edge cases of the retrieval and extreme-classification metrics, checked against values
computed by hand."""

import warnings

import numpy as np
import pytest

from skrank.metrics import (
    _retrieval,
    label_propensities,
    mean_precision_recall_curve,
    query_auprc_scores,
    top_k_psp_score,
)

X_LINE = np.array([[0.0], [0.1], [1.0], [3.0]])


@pytest.mark.parametrize("device", ["numpy", "cpu"])
def test_query_blocks_without_a_positive_give_nan(device):
    # chunk_size=1: the blocks of queries 2 and 3 (singleton classes) hold no positive at all.
    scores = query_auprc_scores(
        X_LINE, [0, 0, 1, 2], metric="euclidean", chunk_size=1, device=device
    )
    np.testing.assert_array_equal(scores, [1.0, 1.0, np.nan, np.nan])
    alone = query_auprc_scores(X_LINE, [0, 1, 2, 3], metric="euclidean", device=device)
    assert np.isnan(alone).all()


def test_precision_recall_curve_does_not_depend_on_blocks_without_positives():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # queries without a positive
        by_one = mean_precision_recall_curve(X_LINE, [0, 0, 1, 2], metric="euclidean", chunk_size=1)
        whole = mean_precision_recall_curve(X_LINE, [0, 0, 1, 2], metric="euclidean")
    for blocked, single in zip(by_one, whole, strict=True):
        np.testing.assert_array_equal(blocked, single)
    np.testing.assert_array_equal(whole[0], np.ones(101))  # both queries rank their positive 1st


def test_similarities_that_would_overflow_are_refused():
    _retrieval._check_no_overflow(np.array([1.0, np.finfo(np.float64).max / 5]))
    with pytest.raises(ValueError, match="similarities overflow; rescale X"):
        _retrieval._check_no_overflow(np.array([1.0, np.finfo(np.float64).max / 3]))


def test_dask_embeddings_must_be_two_dimensional():
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match=r"X must be 2-D .* dask array of shape \(4, 2, 1\)"):
        query_auprc_scores(da.zeros((4, 2, 1), chunks=2), [0, 0, 1, 1])


def test_psp_of_multiclass_targets_by_hand():
    # Row 1: label 0 (p=0.5) first; row 2: label 0 (wrong), then label 2 (p=0.25, true).
    # k=1: (1/0.5 + 0) / 2 = 1; k=2: ((1/0.5) / 2 + (1/0.25) / 2) / 2 = 1.5.
    scores = top_k_psp_score(
        [0, 2],
        [[0.9, 0.05, 0.05], [0.6, 0.1, 0.3]],
        k=[1, 2],
        propensities=[0.5, 0.5, 0.25],
        normalize=False,
    )
    np.testing.assert_allclose(scores, [1.0, 1.5])


def test_label_propensities_need_an_example():
    with pytest.raises(ValueError, match="at least 3 examples"):
        label_propensities(np.zeros((0, 3)))
