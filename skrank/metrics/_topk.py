"""Exact top-k selection with a fixed tie rule, shared by the retrieval and label metrics."""

import numpy as np
import torch


def top_k_indices(scores, k):
    """Column indices of the ``k`` largest scores of each row, in decreasing order.

    Ties are broken by column index (the smaller index ranks first), exactly as a stable
    descending sort would order them, so every prefix ``[:, :j]`` is the top-j set under that
    rule. Cost: one ``torch.topk`` pass; only rows where a tie crosses position ``k`` are
    fully sorted.

    Parameters
    ----------
    scores : ndarray of shape (n_rows, n_columns), dtype float64
        Scores; ``-inf`` is allowed (it marks an excluded column).
    k : int
        Number of columns to return, ``1 <= k <= n_columns``.

    Returns
    -------
    indices : ndarray of shape (n_rows, k), dtype int64
    """
    n_columns = scores.shape[1]
    n_candidates = min(k + 1, n_columns)
    values, indices = torch.topk(torch.from_numpy(scores), n_candidates, dim=1, sorted=True)
    values, indices = values.numpy(), indices.numpy()
    # Within the candidates, order by (score descending, index ascending).
    order = np.lexsort((indices, -values), axis=1)
    values = np.take_along_axis(values, order, axis=1)
    indices = np.take_along_axis(indices, order, axis=1)
    if n_candidates > k:
        # A tie between positions k and k+1 may extend to columns outside the candidates,
        # some with a smaller index: sort those rows fully.
        boundary_tie = np.flatnonzero(values[:, k - 1] == values[:, k])
        if boundary_tie.size:
            rows = -scores[boundary_tie]
            indices[boundary_tie, :k] = np.argsort(rows, axis=1, kind="stable")[:, :k]
    return np.ascontiguousarray(indices[:, :k])
