"""PECOS XR-Linear with its documented defaults, run in the PECOS environment.

Usage: ``python _pecos_xmc.py DATA_DIR OUT_DIR K``. Reads ``X_train``, ``Y_train`` and ``X_test``
(scipy ``.npz``) from ``DATA_DIR``, trains as the PECOS README's quick start does (PIFA label
embedding, hierarchical clustering, ``XLinearModel.train``), predicts the top ``K`` labels of
the test rows, and writes ``top.npy`` (their label indices, best first) and ``timing.json``
(fit and prediction seconds, peak resident memory of this process in bytes) to ``OUT_DIR``.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _peak_memory import peak_resident_bytes, reset_peak


def main():
    data, out, k = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    X_train = sp.load_npz(data / "X_train.npz").astype(np.float32).tocsr()
    Y_train = sp.load_npz(data / "Y_train.npz").astype(np.float32).tocsr()
    X_test = sp.load_npz(data / "X_test.npz").astype(np.float32).tocsr()
    reset_peak()
    start = time.perf_counter()
    label_features = LabelEmbeddingFactory.create(Y_train, X_train, method="pifa")
    cluster_chain = Indexer.gen(label_features)
    model = XLinearModel.train(X_train, Y_train, C=cluster_chain)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    scores = model.predict(X_test, only_topk=k).tocsr()
    predict_seconds = time.perf_counter() - start
    top = np.full((X_test.shape[0], k), -1, dtype=np.int64)
    for i in range(X_test.shape[0]):  # at most k entries a row, already computed
        row = slice(scores.indptr[i], scores.indptr[i + 1])
        order = np.argsort(-scores.data[row], kind="stable")[:k]
        top[i, : order.size] = scores.indices[row][order]
    np.save(out / "top.npy", top)
    (out / "timing.json").write_text(
        json.dumps(
            {
                "fit_seconds": fit_seconds,
                "predict_seconds": predict_seconds,
                "peak_bytes": peak_resident_bytes(),
            }
        )
    )


if __name__ == "__main__":
    main()
