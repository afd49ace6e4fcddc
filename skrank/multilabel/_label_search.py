"""The top-k search of SNMClassifier's label table: an exact chunked scan, or a faiss index
(inverted lists or an HNSW graph) whose recall of the exact top-k is measured at fit.

Built from arrays: the label table (the label vectors as scored, rows of a tensor) and the
input embeddings. faiss objects do not pickle: a fitted model keeps the method and the number
of cells probed, and :class:`LabelSearch` builds the index again on first use.
"""

import numpy as np
import torch

from ..metrics import FaissInnerProductIndex, FaissIVFIndex, top_k_inner_products
from ..metrics._search import overlap_recall

# The recall of the exact top-k that an "ivf" search reaches on up to SAMPLE_ROWS sample rows.
SAMPLE_ROWS = 1000
RECALL_TARGET = 0.99


class LabelSearch:
    """The ``k`` best labels of input embeddings by their label scores.

    Parameters
    ----------
    table : callable
        ``table(start, stop)`` returns rows ``start:stop`` of the label table as scored (a
        tensor); ``table()`` all of it.
    n_labels : int
        Rows of the table.
    method : {"exact", "ivf", "faiss"}, default="exact"
        A chunked exact scan, faiss inverted lists (:class:`~skrank.metrics.FaissIVFIndex`)
        or an HNSW graph (:class:`~skrank.metrics.FaissInnerProductIndex`).
    n_probe : int or None, default=None
        Cells probed by ``"ivf"`` (None: the index's default).
    seed : int, default=0
        Seed of the ``"ivf"`` k-means.
    device : torch.device or str, default="cpu"
        Where the exact scan runs.
    """

    def __init__(self, table, n_labels, method="exact", n_probe=None, seed=0, device="cpu"):
        self.table, self.n_labels, self.method = table, n_labels, method
        self.n_probe, self.seed, self.device = n_probe, seed, device
        self.index = None

    def top_k(self, embeddings, k):
        """Scores and label rows (n, k) of the ``k`` best labels of ``embeddings`` (an
        ndarray), best first; ties of the exact scan go to the smaller label."""
        if self.method == "exact":
            queries = torch.from_numpy(embeddings).to(self.device)
            scores, indices = top_k_inner_products(queries, self.table, self.n_labels, k)
            return scores.cpu().numpy(), indices.cpu().numpy()
        scores, indices = self._index().search(embeddings, k)
        incomplete = np.flatnonzero((indices < 0).any(axis=1))
        if incomplete.size:  # fewer than k labels in the cells probed: search those exactly
            exact = LabelSearch(self.table, self.n_labels, device=self.device)
            scores[incomplete], indices[incomplete] = exact.top_k(embeddings[incomplete], k)
        return scores, indices

    def _index(self):
        if self.index is None:
            table = self.table().cpu().numpy()
            if self.method == "faiss":
                self.index = FaissInnerProductIndex(table)
            else:
                self.index = FaissIVFIndex(table, random_state=self.seed)
                if self.n_probe is not None:
                    self.index.n_probe = self.n_probe
        return self.index

    def probes(self):
        """The cells an ``"ivf"`` search probes (None for the others)."""
        return self.n_probe if self.method == "ivf" else None

    def calibrate(self, sample, k, fall_back):
        """Measure the search's recall of the exact top ``k`` on the rows of ``sample()``
        (the input embeddings of a sample of rows, computed only for an index); ``"ivf"``
        takes the fewest cells whose recall reaches ``RECALL_TARGET``, and with ``fall_back``
        turns exact where none does.

        Returns
        -------
        recall : float
            1.0 for the exact search.
        """
        if self.method == "exact":
            return 1.0
        embeddings = sample()
        exact = LabelSearch(self.table, self.n_labels, device=self.device).top_k(embeddings, k)[1]
        if self.method == "faiss":
            return overlap_recall(self._index().search(embeddings, k)[1], exact)
        self.index = FaissIVFIndex(self.table().cpu().numpy(), random_state=self.seed)
        recall = self.index.calibrate(embeddings, exact, target=RECALL_TARGET)
        self.n_probe = self.index.n_probe
        if fall_back and recall < RECALL_TARGET:
            self.method, self.n_probe, self.index = "exact", None, None
            return 1.0
        return recall


def check_search_with_centroids(search, name, weight):
    """Refuse an index ``search`` with the nearest-centroid rule on (``name=weight``, a
    weight above 0): the rule is in no index of the label table."""
    if search in ("ivf", "faiss") and weight != "auto" and weight > 0:
        raise ValueError(
            f"search={search!r} searches an index of the label table, which the "
            f"nearest-centroid rule of the input space (here {name}={weight!r}) is not in: "
            "predictions with it scan every label exactly. Use search='exact' or 'auto', or "
            "centroid_weight=0."
        )


def faiss_available():
    """Whether faiss imports."""
    try:
        import faiss  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def sample_rows(n_rows, seed):
    """Up to ``SAMPLE_ROWS`` of ``n_rows`` rows, drawn with ``seed``, in increasing order."""
    rows = np.random.RandomState(seed).permutation(n_rows)
    return np.sort(rows[:SAMPLE_ROWS])
