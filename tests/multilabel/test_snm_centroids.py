"""SNMClassifier's nearest-centroid rule of the input space (``centroid_weight``)."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
import torch
from helpers import assert_predictions_follow, brute_force_top_k
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import normalize

from skrank import SNMClassifier
from skrank.datasets import make_extreme_classification
from skrank.multilabel import _centroids as centroids_module
from skrank.multilabel import _snm as snm_module
from skrank.multilabel._centroids import centroid_similarities, input_centroids

pytestmark = [
    pytest.mark.usefixtures("one_torch_thread"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

FAST = dict(
    embedding_dim=16,
    n_negatives=8,
    learning_rate=0.02,
    batch_size=64,
    max_epochs=4,
    device="cpu",
    random_state=0,
)


def brute_force_centroids(X, Y):
    """Loops: each label's sum of unit rows, scaled to unit norm (zero without rows)."""
    X = np.asarray(X, dtype=np.float64)
    centroids = np.zeros((Y.shape[1], X.shape[1]))
    for i in range(X.shape[0]):
        norm = np.linalg.norm(X[i])
        for label in np.flatnonzero(Y[i]):
            centroids[label] += X[i] / norm if norm > 0 else 0.0
    for label in range(Y.shape[1]):
        norm = np.linalg.norm(centroids[label])
        if norm > 0:
            centroids[label] /= norm
    return centroids


def brute_force_cosines(X, centroids):
    X = np.asarray(X, dtype=np.float64)
    cosines = np.zeros((X.shape[0], centroids.shape[0]))
    for i in range(X.shape[0]):
        norm = np.linalg.norm(X[i])
        for label in range(centroids.shape[0]):
            if norm > 0:
                cosines[i, label] = X[i] @ centroids[label] / norm
    return cosines


def extreme(n_samples=400, seed=0):
    """Sparse TF-IDF rows of more than 4,096 features: the network reads sparse inputs."""
    X, Y = make_extreme_classification(
        n_samples=n_samples, n_features=5000, n_labels=40, random_state=seed
    )[:2]
    return X, Y


def test_input_centroids_and_cosines_match_loops():
    rng = np.random.RandomState(0)
    dense = rng.poisson(0.4, size=(30, 12)).astype(float)
    dense[3] = 0  # a row without a feature: no direction, cosine 0
    Y = (rng.rand(30, 6) < 0.3).astype(np.int8)
    Y[:, 4] = 0  # a label without a row: a zero centroid
    expected = brute_force_centroids(dense, Y)
    for X in (dense, sp.csr_matrix(dense)):
        centroids = input_centroids(X, sp.csr_matrix(Y))
        assert sp.isspmatrix_csc(centroids) and centroids.dtype == np.float32
        np.testing.assert_allclose(centroids.toarray(), expected, atol=1e-6)
        cosines = centroid_similarities(X, centroids)
        assert isinstance(cosines, torch.Tensor) and cosines.dtype == torch.float32
        np.testing.assert_allclose(cosines.numpy(), brute_force_cosines(dense, expected), atol=1e-6)
    assert not centroids[[4]].nnz


@pytest.mark.parametrize("neighbor_weight", [0.0, 0.3])
def test_centroid_weight_adds_the_centroid_rule_to_every_prediction(neighbor_weight):
    """``(1 - a) (v + b s cos) + a s vote``: the centroid rule joins the label scores before
    the votes blend with them; training and early stopping are unchanged."""
    X, Y = extreme()
    X_test, Y_test = extreme(n_samples=60, seed=1)
    params = dict(FAST, neighbor_weight=neighbor_weight, n_neighbors=5)
    plain = SNMClassifier(centroid_weight=0.0, **params).fit(X, Y)
    blended = SNMClassifier(centroid_weight=2.0, **params).fit(X, Y)
    assert plain.centroids_ is None and plain.centroid_weight_ == 0.0
    assert [r["validation_score"] for r in plain.history_] == [
        r["validation_score"] for r in blended.history_
    ]
    inputs = blended._normalize_inputs(X_test, fitting=False)  # TF-IDF, as the network reads
    trained = blended.trained_labels_
    centroids = brute_force_centroids(X.toarray(), Y.toarray()[:, trained])
    np.testing.assert_allclose(blended.centroids_.toarray(), centroids, atol=1e-5)
    scale = blended.network_.score_scale
    label_scores = blended.forward(inputs).numpy() @ blended.network_.label_table().numpy().T
    with_centroids = label_scores + 2.0 * scale * brute_force_cosines(X_test.toarray(), centroids)
    expected = plain.decision_function(X_test)  # the votes blended in, without the centroids
    expected[:, trained] += (1 - neighbor_weight) * (with_centroids - label_scores)
    np.testing.assert_allclose(blended.decision_function(X_test), expected, atol=1e-4)
    assert (brute_force_top_k(expected, 1) != plain.predict_top_k(X_test, 1)).any()
    assert_predictions_follow(blended, X_test, expected)
    hits = Y_test.toarray()[np.arange(60), brute_force_top_k(expected, 1)[:, 0]]
    assert blended.score(X_test, Y_test) == pytest.approx(np.mean(hits))  # Precision@1
    restored = pickle.loads(pickle.dumps(blended))
    np.testing.assert_allclose(restored.decision_function(X_test), expected, atol=1e-4)


def test_auto_centroid_weight_is_the_best_on_the_validation_rows():
    """``"auto"``: the weight of ``CENTROID_WEIGHTS`` with the best validation P@1 (the
    smallest among ties), the centroids of the fitting rows; then those of every row."""
    X, Y = extreme(n_samples=500)
    clf = SNMClassifier(**dict(FAST, validation_fraction=0.3, neighbor_weight=0.0)).fit(X, Y)
    assert clf.sparse_input_ and clf.centroid_weight_ in snm_module.CENTROID_WEIGHTS
    train, held_out = train_test_split(np.arange(500), test_size=0.3, random_state=0)
    inputs = clf._normalize_inputs(X, fitting=False)
    Y_table = Y.toarray()[:, clf.trained_labels_]
    centroids = brute_force_centroids(X[train].toarray(), Y_table[train])  # rows as given
    cosines = brute_force_cosines(X[held_out].toarray(), centroids)
    scores = clf.forward(inputs[held_out]).numpy() @ clf.network_.label_table().numpy().T
    precision = []
    for weight in snm_module.CENTROID_WEIGHTS:
        top = brute_force_top_k(scores + weight * clf.network_.score_scale * cosines, 1)[:, 0]
        precision.append(np.mean(Y_table[held_out, top]))
    assert len(set(precision)) > 1  # the choice matters on these data
    assert clf.centroid_weight_ == snm_module.CENTROID_WEIGHTS[int(np.argmax(precision))] > 0
    np.testing.assert_allclose(
        clf.centroids_.toarray(), brute_force_centroids(X.toarray(), Y_table), atol=1e-5
    )
    positives = sp.csr_matrix(Y_table.astype(np.int8))
    chosen = clf._choose_blend_weights(
        inputs[train],
        positives[train],
        (inputs[held_out], positives[held_out]),
        X[train],
        X[held_out],
    )
    assert chosen == (0.0, clf.centroid_weight_)


def test_auto_centroid_weight_is_zero_where_it_does_not_apply():
    X, Y = extreme()
    unvalidated = SNMClassifier(**dict(FAST, validation_fraction=None, early_stopping=False))
    assert unvalidated.fit(X, Y).centroid_weight_ == 0.0


def test_auto_centroid_weight_is_zero_with_an_index_search():
    pytest.importorskip("faiss")
    X, Y = extreme()
    indexed = SNMClassifier(**dict(FAST, search="faiss")).fit(X, Y)
    assert indexed.centroid_weight_ == 0.0 and indexed.centroids_ is None


def test_centroid_weight_refuses_an_index_search():
    X, Y = extreme(n_samples=200)
    with pytest.raises(ValueError, match=r"search='ivf' .*centroid_weight=2\.0"):
        SNMClassifier(**dict(FAST, centroid_weight=2.0, search="ivf")).fit(X, Y)
    clf = SNMClassifier(**dict(FAST, centroid_weight=2.0)).fit(X, Y)
    clf.set_params(search="faiss")  # after the fit: refused at prediction
    with pytest.raises(ValueError, match=r"search='faiss' .*centroid_weight_=2\.0"):
        clf.predict_top_k(X[:5], 2)
    clf.set_params(search="exact")
    assert clf.predict_top_k(X[:5], 2).shape == (5, 2)


@pytest.mark.parametrize("block_entries", [2**21, 6, 1])
def test_centroid_similarities_of_zero_rows_and_unit_rows(monkeypatch, block_entries):
    """The same cosines whether the sparse products take all rows at once, or a row at a time
    (into the same output)."""
    monkeypatch.setattr(centroids_module, "SIMILARITY_BLOCK_ENTRIES", block_entries)
    centroids = input_centroids(np.eye(3), sp.csr_matrix(np.eye(3, dtype=np.int8)))
    rows = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    expected = np.array([[0, 0, 0], [1, 0, 0], [normalize([[1, 1]])[0, 0]] * 2 + [0]])
    np.testing.assert_allclose(centroid_similarities(rows, centroids).numpy(), expected, atol=1e-7)


def test_centroids_of_dense_rows_read_in_chunks_and_of_memory_mapped_rows(tmp_path):
    rng = np.random.RandomState(0)
    y = np.arange(300) % 6
    X = rng.normal(size=(6, 20))[y] + 0.5 * rng.normal(size=(300, 20))
    Y = sp.csr_matrix(np.eye(6, dtype=np.int8)[y])
    expected = brute_force_centroids(X, Y.toarray())
    with sklearn.config_context(working_memory=0.01):  # 10 KB: chunks of about 40 rows
        np.testing.assert_allclose(input_centroids(X, Y).toarray(), expected, atol=1e-6)
    mapped = np.memmap(tmp_path / "X.f64", dtype=np.float64, mode="w+", shape=X.shape)
    mapped[:] = X
    params = dict(FAST, centroid_weight=2.0)
    in_memory = SNMClassifier(**params).fit(X, y)
    from_file = SNMClassifier(**params).fit(mapped, y)
    np.testing.assert_allclose(from_file.centroids_.toarray(), in_memory.centroids_.toarray())
    np.testing.assert_allclose(
        from_file.decision_function(mapped), in_memory.decision_function(X), atol=1e-5
    )
