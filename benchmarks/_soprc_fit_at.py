"""The child of ``bench_soprc_disjoint.py --part causes``: SOPRCEmbedder of the skrank first on
the path (an earlier commit's, which may lack this checkout's data sets and metrics) fitted on
saved data, its test embeddings saved beside the data."""

import numpy as np
import torch
from _harness import timed


def fit_and_embed(folder, seeds, budget):
    """Fit on ``folder/data.npz`` (X, y) once per seed; embed its X_test into
    ``folder/embeddings.npz`` (one array per seed); return the seconds per fit and the batches
    of an epoch of the sampler (when the commit has one)."""
    from skrank import SOPRCEmbedder

    torch.set_num_threads(1)
    data = np.load(f"{folder}/data.npz")
    try:
        from skrank.sampling import ClassBalancedBatchSampler

        sampler = ClassBalancedBatchSampler(data["y"], 200, 4, random_state=0)
        sizes = [len(batch) for batch in sampler]
    except ImportError:
        sizes = [0]
    seconds, embeddings = [], {}
    for seed in seeds:
        estimator = SOPRCEmbedder(**budget, random_state=seed)
        model, fit_seconds = timed(estimator.fit, data["X"], data["y"])
        seconds.append(fit_seconds)
        embeddings[str(seed)] = model.transform(data["X_test"])
    np.savez(f"{folder}/embeddings.npz", **embeddings)
    return dict(seconds=seconds, steps=len(sizes), mean_batch=float(np.mean(sizes)))
