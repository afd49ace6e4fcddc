"""PECOS XR-Linear with its documented defaults, run in the PECOS environment.

``bench_xmc.py`` calls :func:`train_and_predict` in a child process running the Python of the
PECOS environment (``_harness.run_in_child(..., python=PECOS_PYTHON)``; see ``_harness.py``).
"""

import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _harness import PeakMemory


def train_and_predict(directory, k):
    """Train on ``X_train``, ``Y_train`` (scipy ``.npz`` of ``directory``) as the PECOS README's
    quick start does (PIFA label embedding, hierarchical clustering, ``XLinearModel.train``)
    and predict the top ``k`` labels of ``X_test``.

    Returns the label indices (best first, -1 where fewer than ``k``), the fit and prediction
    seconds, and the peak resident memory from the start of the fit to the end of prediction
    with its increase over the start (bytes), the data loaded before.
    """
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    directory = Path(directory)
    X_train, Y_train, X_test = (
        sp.load_npz(directory / f"{part}.npz").astype(np.float32).tocsr()
        for part in ("X_train", "Y_train", "X_test")
    )
    with PeakMemory() as memory:
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
    return {
        "top": top.tolist(),
        "fit_seconds": fit_seconds,
        "predict_seconds": predict_seconds,
        "peak_bytes": memory.peak,
        "peak_increase_bytes": memory.increase,
    }
