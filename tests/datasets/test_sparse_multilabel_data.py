"""make_sparse_multilabel_classification: sizes, balance, signal, label noise, multilabel."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from skrank.datasets import make_sparse_multilabel_classification


def _nearest_centroid_accuracy(X, y, n_labels):
    """Cosine nearest-centroid accuracy, fitted and scored on alternate rows."""
    train = np.arange(X.shape[0]) % 2 == 0
    indicator = sp.csr_matrix(
        (np.ones(train.sum()), (y[train], np.arange(train.sum()))), shape=(n_labels, train.sum())
    )
    centroids = normalize(indicator @ normalize(X[train]))
    scores = (normalize(X[~train]) @ centroids.T).toarray()
    return np.mean(scores.argmax(axis=1) == y[~train])


def test_single_label_shapes_balance_and_binary_features():
    X, y = make_sparse_multilabel_classification(
        n_labels=300, samples_per_label=7, n_features=500, random_state=0
    )
    assert sp.issparse(X) and X.format == "csr" and X.shape == (2100, 500)
    assert y.shape == (2100,) and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y, minlength=300), np.full(300, 7))
    np.testing.assert_array_equal(X.data, 1.0)
    # Distinct words: at most 1 + Poisson(19) per row, on average a bit fewer than 20.
    assert 15 < X.getnnz(axis=1).mean() <= 20


def test_same_seed_same_data_and_noise_changes_only_targets():
    X0, y0 = make_sparse_multilabel_classification(n_labels=200, random_state=3)
    X1, y1 = make_sparse_multilabel_classification(n_labels=200, random_state=3)
    assert (X0 != X1).nnz == 0
    np.testing.assert_array_equal(y0, y1)
    Xn, yn = make_sparse_multilabel_classification(n_labels=200, label_noise=0.4, random_state=3)
    assert (X0 != Xn).nnz == 0
    changed = np.mean(yn != y0)  # replaced with probability 0.4, by another label w.p. 199/200
    assert abs(changed - 0.4 * 199 / 200) < 0.03


def test_signal_controls_how_learnable_the_labels_are():
    accuracy = {
        signal: _nearest_centroid_accuracy(
            *make_sparse_multilabel_classification(
                n_labels=100, samples_per_label=20, signal=signal, random_state=0
            ),
            100,
        )
        for signal in (0.0, 0.3, 1.0)
    }
    assert accuracy[0.0] < 0.05  # chance is 0.01
    assert 0.3 < accuracy[0.3] < accuracy[1.0]
    assert accuracy[1.0] > 0.95


def test_multilabel_targets():
    X, Y = make_sparse_multilabel_classification(
        n_labels=500, samples_per_label=4, multilabel=True, labels_per_sample=3, random_state=0
    )
    assert X.shape[0] == Y.shape[0] == 2000 and Y.shape[1] == 500
    assert sp.issparse(Y) and Y.dtype == np.int8
    np.testing.assert_array_equal(Y.data, 1)
    counts = Y.getnnz(axis=1)
    assert counts.min() >= 1
    # 1 + Poisson(2) labels, duplicates (probability ~1/500 each) merged.
    assert abs(counts.mean() - 3) < 0.1
    assert Y.getnnz(axis=0).min() >= 4  # every label is the first label of 4 rows


def test_many_labels_is_cheap():
    X, y = make_sparse_multilabel_classification(
        n_labels=100_000, samples_per_label=1, random_state=0
    )
    assert X.shape == (100_000, 1000)
    np.testing.assert_array_equal(np.sort(y), np.arange(100_000))


def test_topics_larger_than_the_features_are_refused():
    with pytest.raises(ValueError, match="words_per_label=30 exceeds n_features=20"):
        make_sparse_multilabel_classification(n_features=20, words_per_label=30)
