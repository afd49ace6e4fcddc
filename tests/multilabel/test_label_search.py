"""The top-k search of the label table: the exact scan against a full sort, the exact search
of the rows an index answers incompletely, the recall calibration and its fall-back."""

import numpy as np
import pytest
import torch
from helpers import brute_force_top_k
from sklearn.preprocessing import normalize

from skrank.multilabel import _label_search
from skrank.multilabel._label_search import (
    LabelSearch,
    check_search_with_centroids,
    sample_rows,
)


def _table(n_labels=60, dim=6, seed=0):
    rng = np.random.RandomState(seed)
    table = torch.tensor(rng.randint(-2, 3, size=(n_labels, dim)), dtype=torch.float32)
    queries = rng.randint(-2, 3, size=(25, dim)).astype(np.float32)  # many ties
    return (lambda start=0, stop=None: table[start:stop]), table.numpy(), queries


@pytest.mark.parametrize("k", [1, 4, 60])
def test_the_exact_search_is_a_full_sort_with_ties_to_the_smaller_label(k):
    table, array, queries = _table()
    scores, labels = LabelSearch(table, 60).top_k(queries, k)
    expected = brute_force_top_k(queries @ array.T, k)
    np.testing.assert_array_equal(labels, expected)
    np.testing.assert_array_equal(scores, np.take_along_axis(queries @ array.T, expected, axis=1))


def test_rows_an_index_answers_with_fewer_than_k_labels_are_searched_exactly():
    table, array, queries = _table()

    class PartialIndex:
        def search(self, embeddings, k):
            exact = brute_force_top_k(embeddings @ array.T, k)
            indices = exact[:, ::-1].copy()  # another order: kept where complete
            indices[::3, -1] = -1  # every third row: a label short
            return np.zeros(indices.shape, np.float32), indices

    search = LabelSearch(table, 60, "faiss")
    search.index = PartialIndex()
    scores, labels = search.top_k(queries, 5)
    exact = brute_force_top_k(queries @ array.T, 5)
    np.testing.assert_array_equal(labels[::3], exact[::3])
    np.testing.assert_array_equal(scores[::3], np.sort(queries @ array.T, axis=1)[::3, ::-1][:, :5])
    complete = np.setdiff1d(np.arange(25), np.arange(0, 25, 3))
    np.testing.assert_array_equal(labels[complete], exact[complete, ::-1])


def test_an_ivf_search_calibrates_its_probes_and_falls_back_below_the_target(monkeypatch):
    pytest.importorskip("faiss")
    rng = np.random.RandomState(0)
    centers = rng.normal(size=(20, 8))
    array = normalize(centers[rng.randint(20, size=800)] + 0.2 * rng.normal(size=(800, 8)))
    table = torch.tensor(array, dtype=torch.float32)
    sample = normalize(centers[rng.randint(20, size=100)] + 0.2 * rng.normal(size=(100, 8)))
    sample = sample.astype(np.float32)
    search = LabelSearch(lambda start=0, stop=None: table[start:stop], 800, "ivf", seed=0)
    recall = search.calibrate(lambda: sample, 5, fall_back=True)
    assert recall >= _label_search.RECALL_TARGET and search.probes() == search.n_probe >= 1
    assert LabelSearch(table, 800).calibrate(None, 5, fall_back=True) == 1.0  # exact: nothing
    monkeypatch.setattr(_label_search, "RECALL_TARGET", 1.01)
    kept = LabelSearch(lambda start=0, stop=None: table[start:stop], 800, "ivf", seed=0)
    assert kept.calibrate(lambda: sample, 5, fall_back=False) < 1.01 and kept.method == "ivf"
    fallen = LabelSearch(lambda start=0, stop=None: table[start:stop], 800, "ivf", seed=0)
    assert fallen.calibrate(lambda: sample, 5, fall_back=True) == 1.0
    assert (fallen.method, fallen.probes(), fallen.index) == ("exact", None, None)


def test_an_index_search_is_refused_with_the_nearest_centroid_rule():
    for search in ("ivf", "faiss"):
        with pytest.raises(ValueError, match="centroid_weight=2.0"):
            check_search_with_centroids(search, "centroid_weight", 2.0)
        check_search_with_centroids(search, "centroid_weight", 0.0)
        check_search_with_centroids(search, "centroid_weight", "auto")
    check_search_with_centroids("exact", "centroid_weight", 2.0)


def test_sample_rows_are_distinct_increasing_and_reproducible():
    rows = sample_rows(5000, seed=3)
    assert rows.size == _label_search.SAMPLE_ROWS and np.unique(rows).size == rows.size
    assert (np.diff(rows) > 0).all() and rows.max() < 5000
    np.testing.assert_array_equal(rows, sample_rows(5000, seed=3))
    np.testing.assert_array_equal(sample_rows(7, seed=0), np.arange(7))
