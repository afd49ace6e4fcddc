"""Data and brute-force references shared by the tests of SNMClassifier and its modules."""

import numpy as np
import scipy.sparse as sp

from skrank.datasets import make_extreme_classification

FAST = dict(
    n_components=16,
    hidden_layer_sizes=(32,),
    n_negatives=8,
    learning_rate=0.02,
    batch_size=64,
    max_epochs=15,
    device="cpu",
)


def clustered(n_samples=300, n_labels=20, n_features=10, noise=0.3, seed=0):
    rng = np.random.RandomState(seed)
    centers = rng.normal(size=(n_labels, n_features))
    y = np.arange(n_samples) % n_labels
    return centers[y] + noise * rng.normal(size=(n_samples, n_features)), y


def multilabel(n_samples=300, n_labels=15, n_features=12, seed=0):
    """Each example has 1-3 labels; its features are the sum of its labels' prototypes."""
    rng = np.random.RandomState(seed)
    prototypes = rng.normal(size=(n_labels, n_features))
    Y = np.zeros((n_samples, n_labels), dtype=np.int64)
    for i in range(n_samples):
        Y[i, rng.choice(n_labels, rng.randint(1, 4), replace=False)] = 1
    return Y @ prototypes + 0.1 * rng.normal(size=(n_samples, n_features)), Y


def bag_of_words(n_samples=240, n_labels=12, n_features=30, seed=0):
    """Sparse non-negative counts whose words depend on the label."""
    rng = np.random.RandomState(seed)
    y = np.arange(n_samples) % n_labels
    topics = rng.dirichlet(np.full(n_features, 0.3), size=n_labels)
    counts = np.array([rng.multinomial(12, 0.5 * topics[label] + 0.5 / n_features) for label in y])
    return sp.csr_matrix(counts.astype(np.float64)), y


def brute_force_votes(queries, keys, Y_keys, n_neighbors):
    """Dense votes: cosine top-n neighbours (ties to the smaller index), weights clipped at 0
    and normalised, summed per label."""
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    similarities = queries @ keys.T
    votes = np.zeros((queries.shape[0], Y_keys.shape[1]))
    for i, row in enumerate(similarities):
        neighbors = np.argsort(-row, kind="stable")[:n_neighbors]
        weights = np.clip(row[neighbors], 0, None)
        weights = weights / weights.sum() if weights.sum() > 0 else weights
        votes[i] = weights @ Y_keys[neighbors]
    return votes


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


FAST_LINEAR = dict(
    n_components=16,
    n_negatives=8,
    learning_rate=0.02,
    batch_size=64,
    max_epochs=4,
    device="cpu",
    random_state=0,
)
