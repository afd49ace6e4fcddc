"""Write the saved models that ``test_saved_models.py`` loads: pickle and skops files of each
estimator, fitted by the skrank version named in ``outputs.npz``, and their outputs.

The files in this folder were written by skrank 0.2.0.dev0 before its parameter renames; they
stay as written, so that the test checks that models saved by that version still load and
predict the same. Run this script only to add a model (``python write_saved_models.py``).
"""

import pickle
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import skops.io as sio
from sklearn.datasets import make_blobs

import skrank
from skrank import MMC, PointwiseROCSimilarity, SNMClassifier, SOPRCEmbedder

HERE = Path(__file__).resolve().parent


def inputs():
    """The rows every model is fitted on and predicts: dense blobs, and sparse counts with
    multilabel targets (one label without a training row)."""
    X, y = make_blobs(n_samples=160, centers=4, n_features=6, random_state=0)
    counts = sp.csr_matrix(np.round(np.abs(X)))
    labels = np.insert((np.abs(X) > 1).astype(np.int8), 1, 0, axis=1)
    rng = np.random.RandomState(0)
    wide = sp.random(200, 5000, density=0.004, random_state=rng, format="csr", dtype=np.float64)
    wide.data[:] = 1.0
    wide_labels = np.zeros((200, 12), dtype=np.int8)
    wide_labels[np.arange(200), rng.randint(0, 12, 200)] = 1
    return X, y, counts, labels, wide, wide_labels


def models():
    X, y, counts, labels, wide, wide_labels = inputs()
    small = dict(max_epochs=2, random_state=0, device="cpu")
    yield "MMC", MMC(max_iter=20).fit(X, y), X
    yield "MMC-diagonal", MMC(diagonal=True, max_iter=20).fit(X, y), X
    yield "PointwiseROCSimilarity", PointwiseROCSimilarity().fit(X, y), X
    embedder = SOPRCEmbedder(hidden_layer_sizes=(16,), n_components=4, batch_size=32, **small)
    yield "SOPRCEmbedder", embedder.fit(X, y), X
    classifier = SNMClassifier(
        embedding_dim=8, hidden_layer_sizes=(16,), neighbor_weight=0.2, **small
    )
    yield "SNMClassifier", classifier.fit(X, y), X
    classifier = SNMClassifier(embedding_dim=8, neighbor_weight=0.2, centroid_weight=2.0, **small)
    yield "SNMClassifier-multilabel-tfidf-centroids", classifier.fit(counts, labels), counts
    classifier = SNMClassifier(embedding_dim=8, **small)
    yield "SNMClassifier-sparse-input", classifier.fit(wide, wide_labels), wide


def outputs(model, X):
    """The arrays a model computes from ``X``, by name."""
    if isinstance(model, PointwiseROCSimilarity):
        return {"pairwise_similarity": model.pairwise_similarity(X)}
    if isinstance(model, SNMClassifier):
        return {
            "decision_function": model.decision_function(X),
            "predict_top_k": model.predict_top_k(X, 2),
        }
    return {"transform": model.transform(X)}


def main():
    arrays = {"version": np.array(skrank.__version__)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model, X in models():
            (HERE / f"{name}.pkl").write_bytes(pickle.dumps(model))
            (HERE / f"{name}.skops").write_bytes(sio.dumps(model))
            for output, values in outputs(model, X).items():
                arrays[f"{name}/{output}"] = values
    np.savez_compressed(HERE / "outputs.npz", **arrays)


if __name__ == "__main__":
    main()
