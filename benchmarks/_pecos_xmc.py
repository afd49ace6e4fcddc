"""PECOS XR-Linear with its documented defaults: ``bench_xmc.py`` calls
:func:`train_and_predict` with the Python of the PECOS environment (``_harness.run_in_child``)."""

from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _harness import PeakMemory, gib, timed, timed_cpu


def train_and_predict(directory, k, threads=-1):
    """Fit on the ``.npz`` rows of ``directory`` as the PECOS README's quick start does (PIFA
    label embedding, hierarchical clustering, ``XLinearModel.train``) and predict the top ``k``
    labels of ``X_test`` (-1 where fewer), on ``threads`` threads (-1: PECOS's default, every
    CPU; it does not read ``OMP_NUM_THREADS``); with the fit's and prediction's seconds and the
    peak memory of both (GiB), the data loaded before."""
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    X_train, Y_train, X_test = (
        sp.load_npz(Path(directory) / f"{part}.npz").astype(np.float32).tocsr()
        for part in ("X_train", "Y_train", "X_test")
    )

    def fit():
        features = LabelEmbeddingFactory.create(Y_train, X_train, method="pifa", threads=threads)
        chain = Indexer.gen(features, threads=threads)
        return XLinearModel.train(X_train, Y_train, C=chain, threads=threads)

    with PeakMemory() as memory:
        model, fit_seconds, fit_cpu_seconds = timed_cpu(fit)
        scores, predict_seconds = timed(
            lambda: model.predict(X_test, only_topk=k, threads=threads).tocsr()
        )
    top = np.full((X_test.shape[0], k), -1, dtype=np.int64)
    for i in range(X_test.shape[0]):  # at most k entries a row, already computed
        row = slice(scores.indptr[i], scores.indptr[i + 1])
        order = np.argsort(-scores.data[row], kind="stable")[:k]
        top[i, : order.size] = scores.indices[row][order]
    return {
        "top": top.tolist(),
        "fit_seconds": fit_seconds,
        "fit_cpu_seconds": fit_cpu_seconds,
        "predict_seconds": predict_seconds,
        "peak_gib": gib(memory.peak),
        "peak_increase_gib": gib(memory.increase),
    }
