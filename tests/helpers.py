"""Helpers shared by test modules (the test modules never import each other)."""

import itertools
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.datasets import make_blobs

from skrank import MMC, PointwiseROCSimilarity, SNMClassifier, SOPRCEmbedder
from skrank.nn import SparseRows
from skrank.sampling import PairSample

# Ops that read a value back to the host: on a GPU each one waits for the device.
HOST_SYNCING_OPS = {
    "aten::_local_scalar_dense",
    "aten::item",
    "aten::nonzero",
    "aten::_unique2",
    "aten::unique_dim",
    "aten::unique_consecutive",
    "aten::masked_select",
}

_PAIRS_INPUT = (
    "predict and decision_function take pairs of shape (n_pairs, 2, n_features) while fit takes "
    "items (n_samples, n_features); the check calls them on 2D items, which is rightly refused. "
    "tests/similarity/test_pointwise_roc.py checks the same property on pairs."
)
_MMC_PAIRS_INPUT = (
    "decision_function takes pairs of shape (n_pairs, 2, n_features); the check calls it on 2D "
    "items, which is rightly refused. tests/similarity/test_given_pairs.py checks the same "
    "properties on pairs."
)
# Checks that call every method of a fitted estimator on 2D items.
_METHOD_CHECKS = [
    "check_dict_unchanged",
    "check_estimators_dtypes",
    "check_estimators_pickle",
    "check_fit_idempotent",
    "check_methods_sample_order_invariance",
    "check_methods_subset_invariance",
    "check_n_features_in_after_fitting",
]

# {estimator class name: {check name: reason}}
EXPECTED_FAILED_CHECKS = {
    "PointwiseROCSimilarity": {
        check: _PAIRS_INPUT
        for check in [
            *_METHOD_CHECKS,
            "check_dtype_object",
            "check_f_contiguous_array_estimator",
        ]
    },
    "MMC": dict.fromkeys(_METHOD_CHECKS, _MMC_PAIRS_INPUT),
}


def brute_force_top_k(scores, k):
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def assert_predictions_follow(model, X, scores):
    """``predict_top_k`` (labels and scores, k = 1 and 3) and the multilabel ``predict`` of
    ``model`` on ``X`` follow the dense prediction ``scores``: each label set holds the best
    label and only labels among the ``n_set_candidates_`` best."""
    for k in (1, 3):
        labels, top_scores = model.predict_top_k(X, k, return_scores=True)
        np.testing.assert_array_equal(labels, brute_force_top_k(scores, k))
        np.testing.assert_allclose(
            top_scores, np.take_along_axis(scores, labels, axis=1), atol=1e-4
        )
    predicted = model.predict(X)
    predicted = predicted.toarray() if hasattr(predicted, "toarray") else np.asarray(predicted)
    top = brute_force_top_k(scores, model.n_set_candidates_)
    rows = np.arange(predicted.shape[0])[:, None]
    assert predicted[rows[:, 0], top[:, 0]].all()  # the best label in every label set
    assert predicted.sum() == predicted[rows, top].sum()  # only among the best candidates


def host_syncs(function):
    """The host-syncing ops (``HOST_SYNCING_OPS``, at any depth) that ``function()`` runs, as
    a Counter of their names, counted by the torch profiler on the CPU."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        function()
    return Counter(event.name for event in profile.events() if event.name in HOST_SYNCING_OPS)


def loop_nearest_pairs(X, y, k, same_class):
    """Each item with its k nearest items of its class (or of the others), by a pair loop."""
    pairs = set()
    for i in range(len(y)):
        others = [j for j in range(len(y)) if j != i and (y[j] == y[i]) == same_class]
        others.sort(key=lambda j: np.sum((X[i] - X[j]) ** 2))
        pairs.update((min(i, j), max(i, j)) for j in others[:k])
    first, second = np.array(sorted(pairs)).T
    return PairSample(first, second, np.full(len(pairs), 1.0 / len(pairs)))


def brute_auprc(is_positive, scores):
    """Mean over positives of #{positives scored >= s} / #{items scored >= s}."""
    precisions = []
    for i in np.flatnonzero(is_positive):
        retrieved = scores >= scores[i]
        precisions.append(np.sum(retrieved & is_positive) / np.sum(retrieved))
    return np.mean(precisions)


def tiny_labelled_items(seed=0, n=13, d=4, n_classes=3):
    """Gaussian items with random class labels, every class present."""
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, d))
    y = rng.randint(n_classes, size=n)
    y[:n_classes] = np.arange(n_classes)
    return X, y


def pairs_by_loop(y, same):
    """Pairs ``i < j`` of the same class (``same``) or of different classes, by a loop."""
    return [(i, j) for i, j in itertools.combinations(range(len(y)), 2) if (y[i] == y[j]) == same]


def sparse_matrix_with_empty_row(n_rows=9, n_features=40, density=0.15, seed=0):
    """A random CSR matrix of normal values whose fourth row has no non-zero."""
    rng = np.random.RandomState(seed)
    X = sp.random(n_rows, n_features, density=density, format="csr", random_state=rng)
    X.data = rng.normal(size=X.nnz)
    X = X.tolil()
    X[3] = 0  # a row without a non-zero
    return X.tocsr()


def as_sparse_rows(X, layout):
    """``SparseRows`` of a CSR ``X``: the flat layout (CSR arrays) or the padded one."""
    if layout == "flat":
        return SparseRows(
            torch.as_tensor(X.indices, dtype=torch.long),
            torch.as_tensor(X.data),
            torch.as_tensor(X.indptr[:-1], dtype=torch.long),
        )
    width = max(int(np.diff(X.indptr).max()), 1)
    columns = np.full((X.shape[0], width), X.shape[1])
    values = np.zeros((X.shape[0], width))
    for i in range(X.shape[0]):
        row = X[i]
        columns[i, : row.nnz], values[i, : row.nnz] = row.indices, row.data
    return SparseRows(torch.as_tensor(columns), torch.as_tensor(values))


def small_blobs():
    """160 items of 4 classes in 6 dimensions: the data of the small fits."""
    return make_blobs(n_samples=160, centers=4, n_features=6, random_state=0)


def fit_small_estimator(name):
    """A small fitted estimator of the kind ``name`` and the items it was fitted on.

    The names are those of ``tests/nn/test_persistence.py``'s ``NAMES``.
    """
    X, y = small_blobs()
    small = dict(max_epochs=2, random_state=0, device="cpu")
    if name == "MMC":
        return MMC(max_iter=20).fit(X, y), X
    if name == "PointwiseROCSimilarity":
        return PointwiseROCSimilarity().fit(X, y), X
    if name == "SOPRCEmbedder":
        model = SOPRCEmbedder(hidden_layer_sizes=(16,), n_components=4, batch_size=32, **small)
        return model.fit(X, y), X
    if name == "SOPRCEmbedder-auxiliary-schedule-bar":
        model = SOPRCEmbedder(
            hidden_layer_sizes=(16,),
            n_components=4,
            batch_size=32,
            tpr_source="auxiliary",
            lr_milestones=[1],
            verbose=1,
            **small,
        )
        return model.fit(X, y), X
    if name == "SNMClassifier":
        model = SNMClassifier(
            n_components=8, hidden_layer_sizes=(16,), neighbor_weight=0.2, **small
        )
        return model.fit(X, y), X
    if name.startswith("SNMClassifier-multilabel-tfidf"):
        counts = sp.csr_matrix(np.round(np.abs(X)))
        labels = (np.abs(X) > 1).astype(int)
        labels = np.insert(labels, 1, 0, axis=1)  # a label without examples: not in the table
        centroid_weight = 2.0 if name.endswith("centroids") else 0.0
        model = SNMClassifier(
            n_components=8, neighbor_weight=0.2, centroid_weight=centroid_weight, **small
        )
        return model.fit(counts, labels), counts
    raise ValueError(name)


def onnx_session(model, tmp_path):
    """An onnxruntime session of ``model`` exported to ``tmp_path`` (skips without ONNX)."""
    pytest.importorskip("onnxscript")
    onnxruntime = pytest.importorskip("onnxruntime")
    path = model.export_onnx(tmp_path / "model.onnx")
    assert path == str(tmp_path / "model.onnx")
    return onnxruntime.InferenceSession(path)


class TensorItems(torch.utils.data.Dataset):
    """A torch Dataset whose item ``i`` is ``items[i]`` (a tensor or an array), counting reads."""

    def __init__(self, items):
        self.items = items
        self.reads = 0

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        self.reads += 1
        return self.items[i]


def assert_same_weights(a, b):
    """The fitted networks of ``a`` and ``b`` hold bitwise equal weights and buffers."""
    expected = a.module_.state_dict()
    for name, value in b.module_.state_dict().items():
        assert torch.equal(value, expected[name]), name
