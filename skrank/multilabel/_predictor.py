"""SNMClassifier's fitted predictor: what every prediction method reads, built from the fitted
arrays.

A :class:`Predictor` holds the blend of the label scores with the neighbours' votes and the
nearest-centroid rule (:class:`~skrank.multilabel._blend.Blend`: the weights, the voting rows,
the centroids), the network on the device that predicts, the top-k search of the label table
and its recall settings (:class:`~skrank.multilabel._label_search.LabelSearch`), and the labels
of the table's rows. The estimator builds it on first use and keeps it while the
prediction-time settings it was built for (:class:`PredictionSettings`) hold; a fit, or a
change of ``search``, ``n_neighbors`` or the device, builds another. It is never saved: a faiss
index does not pickle, and the arrays it is built from are saved.
"""

from typing import NamedTuple

import numpy as np
import torch

from ._blend import Blend
from ._label_search import LabelSearch, check_search_with_centroids
from ._targets import scores_of_every_label, with_untrained_labels


class PredictionSettings(NamedTuple):
    """The settings a predictor is built for, which may change after the fit: the search
    method (``"exact"``, ``"ivf"`` or ``"faiss"``), the number of voting neighbours and the
    device that predicts."""

    search: str
    n_neighbors: int
    device: torch.device


class Predictor(NamedTuple):
    """A fitted model's predictions: its ``blend`` (:class:`~skrank.multilabel._blend.Blend`),
    its ``network`` (on the device that predicts), the label ``search`` of its table
    (:class:`~skrank.multilabel._label_search.LabelSearch`), the labels of the table's rows
    (``trained``) among ``n_classes``, and the ``settings`` it was built for (None: a predictor
    of the model while it trains, never kept)."""

    blend: Blend
    network: object
    search: LabelSearch
    trained: np.ndarray
    n_classes: int
    settings: PredictionSettings | None = None

    def table_top_k(self, embeddings, rows, k):
        """Scores and table rows (n, k) of the ``k`` best labels of the table, best first."""
        return self.blend.top_k(embeddings, rows, k, self.search, self.network)

    def top_k(self, embeddings, rows, k):
        """Scores and labels (indices into the classes, (n, k)) of the ``k`` best labels, best
        first, the labels without a row of the table last (:func:`~skrank.multilabel._targets.
        with_untrained_labels`)."""
        scores, indices = self.table_top_k(embeddings, rows, min(k, len(self.trained)))
        return with_untrained_labels(scores, indices, self.trained, self.n_classes, k)

    def scores(self, embeddings, rows=None, label_scores=None):
        """The (n, n_classes) prediction scores of ``embeddings`` (a CPU tensor), in chunks of
        rows, from the table's ``label_scores`` when given (else computed here)."""
        table = self.network.label_table() if label_scores is None else None
        device = next(self.network.parameters()).device
        chunks = self.blend.scores_in_chunks(embeddings, table, device, rows, label_scores)
        every_label = [scores_of_every_label(s, self.trained, self.n_classes) for s in chunks]
        return torch.cat(every_label).numpy()


def label_scores_predictor(network, trained, n_classes, device):
    """The predictor of a network's label scores alone, searched exactly (what early stopping
    scores while the network trains: an index built from mid-training weights would go
    stale)."""
    network = network.to(device)
    search = LabelSearch(network.label_table, len(trained), "exact", device=device)
    return Predictor(Blend(network.score_scale), network, search, trained, n_classes)


def build_predictor(
    settings,
    *,
    network,
    trained,
    n_classes,
    neighbor_weight,
    centroid_weight,
    neighbors,
    centroids,
    n_probe,
    search_seed,
    search=None,
):
    """The :class:`Predictor` of a fitted model for ``settings``.

    Parameters
    ----------
    settings : PredictionSettings
    network : LabelEmbeddingNetwork
        The trained network (moved to ``settings.device``).
    trained : ndarray of int
        The labels of the label table's rows, indices into the classes.
    n_classes : int
    neighbor_weight, centroid_weight : float
        The blend's weights.
    neighbors : NeighborVotes or None
        The voting rows (None without votes).
    centroids : scipy.sparse.csc_matrix or None
        The label centroids of the input space (None without the rule).
    n_probe : int or None
        Cells an ``"ivf"`` search probes (None: the index's default).
    search_seed : int
        Seed of the ``"ivf"`` k-means.
    search : LabelSearch or None, default=None
        A search of ``settings.search`` already built on this table (the fit's, whose index
        measured its recall), kept instead of a new one.

    Returns
    -------
    predictor : Predictor
    """
    if centroids is not None:
        check_search_with_centroids(settings.search, "centroid_weight_", centroid_weight)
    network = network.to(settings.device)
    if search is None or search.method != settings.search:
        search = LabelSearch(
            network.label_table,
            len(trained),
            settings.search,
            n_probe,
            search_seed,
            settings.device,
        )
    blend = Blend(
        network.score_scale,
        neighbor_weight,
        centroid_weight,
        neighbors,
        settings.n_neighbors,
        centroids,
    )
    return Predictor(blend, network, search, trained, n_classes, settings)
