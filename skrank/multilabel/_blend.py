"""SNMClassifier's prediction scores: the label scores, the nearest-centroid rule of the input
space and the neighbours' votes blended, in chunks of rows, and the choice of the two weights
on the validation rows.

For the neighbours' weight ``a``, the centroid weight ``b`` and the score scale ``s``, a label
``y`` of an input ``x`` scores ``(1 - a) (v_y(x) + b s cos(x, c_y)) + a s vote_y(x)``, computed
as ``base + term * b`` with ``base = (1 - a) v + a s vote`` and ``term = (1 - a) s cos``, so that
the weight choice (all weights ``b`` ranked at once, :func:`~skrank.metrics._search.
_weighted_sum_top_k`) and the predictions score identically. Everything here is built from
arrays: the label table, the voting rows (:class:`NeighborVotes`) and the centroids.
"""

from typing import NamedTuple

import numpy as np
import torch

from ..metrics._labels import mean_top_k_scores, top_k_hits
from ..metrics._search import _ordered_block_top_k, _weighted_sum_top_k
from ..sampling._labels import positive_table
from ..utils._memory import chunk_rows
from ._centroids import centroid_similarities, input_centroids
from ._neighbors import blend_dense, blended_top_k, nearest_keys, neighbor_votes, votes_of_neighbors


class NeighborVotes(NamedTuple):
    """The training rows whose labels vote at prediction: their unit input embeddings
    ``(n, d)`` and their labels as a padded table ``(n, width)`` with the counts ``(n,)``
    (``positive_table``'s layout), numpy arrays."""

    embeddings: np.ndarray
    labels: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_rows(cls, embeddings, positives):
        """The votes of rows of input ``embeddings`` (any norm) and indicator ``positives``."""
        table, counts = positive_table(positives, positives.shape[1])
        unit = torch.as_tensor(embeddings).cpu()
        # In place: the embeddings of every training row may be the largest array here.
        unit.div_(torch.linalg.vector_norm(unit, dim=1, keepdim=True).clamp_(min=1e-12))
        return cls(unit.numpy(), table.numpy(), counts.numpy())

    def on(self, device):
        """The three arrays as tensors on ``device`` (moved once per prediction)."""
        return tuple(torch.from_numpy(array).to(device) for array in self)


class Blend(NamedTuple):
    """What blends a fitted model's label scores: the score scale, the two weights, the voting
    rows and how many vote (``neighbors``, None without votes), the label centroids of the
    input space (``centroids``, a CSC matrix, or None without the rule), and the nearest voting
    rows of the rows scored (``nearest``: their similarities and indices, as
    :func:`~skrank.multilabel._neighbors.nearest_keys` gives them, found once for rows scored
    more than once; None: searched at each scoring)."""

    scale: float
    neighbor_weight: float = 0.0
    centroid_weight: float = 0.0
    neighbors: NeighborVotes | None = None
    n_neighbors: int = 10
    centroids: object = None
    nearest: tuple | None = None

    def votes(self, chunk, keys, part, n_labels):
        """The votes of the rows ``part`` (a slice) of the rows scored, whose input embeddings
        are ``chunk``, from the voting rows ``keys`` (:meth:`NeighborVotes.on`)."""
        if self.nearest is None:
            return neighbor_votes(chunk, *keys, self.n_neighbors, n_labels)
        similarities, neighbors = (found[part].to(chunk.device) for found in self.nearest)
        return votes_of_neighbors(similarities, neighbors, *keys[1:], n_labels)

    def chunks(self, embeddings, table, device, rows=None, label_scores=None):
        """Chunks of rows ``(scores, similarities, votes)`` on ``device``: the label scores of
        the input ``embeddings`` (a CPU array or tensor) against ``table`` (label vectors as
        scored; unused when ``label_scores`` gives the scores), the cosines of ``rows`` (the
        inputs as given) with the centroids (None without them or without ``rows``), and the
        neighbours' votes (None without them)."""
        n_rows, n_labels = embeddings.shape[0], _n_labels(table, label_scores)
        keys = None if self.neighbors is None else self.neighbors.on(device)
        centroids = self.centroids if rows is not None else None
        # Blocks of a sixteenth of the working memory (64 MiB by default): a few of them (the
        # label scores, cosines, blends and the sparse product of the cosines) come on top of
        # the model, and a block above glibc's largest mmap threshold (32 MiB) goes back to the
        # system when freed, where smaller ones of varying sizes fragment the heap.
        rows_per_chunk = chunk_rows(n_rows, 16 * 4 * n_labels)
        if label_scores is None:
            table = table.to(device)
        with torch.no_grad():
            for start in range(0, n_rows, rows_per_chunk):
                part = slice(start, start + rows_per_chunk)
                chunk = torch.as_tensor(embeddings[part]).to(device)
                if label_scores is None:
                    scores = chunk @ table.T
                else:
                    scores = torch.as_tensor(label_scores[part]).to(device)
                votes = None
                if keys is not None:
                    votes = self.votes(chunk, keys, part, n_labels)
                similarities = None
                if centroids is not None:
                    similarities = centroid_similarities(rows[part], centroids).to(device)
                yield scores, similarities, votes

    def parts(self, scores, similarities, votes, neighbor_weight=None):
        """``(base, term)`` of a chunk for the neighbours' weight ``a`` (default: the model's):
        ``base = (1 - a) v + a s vote`` (``v`` without votes or at ``a = 0``) and
        ``term = (1 - a) s cos`` (None without cosines)."""
        a = self.neighbor_weight if neighbor_weight is None else neighbor_weight
        base = scores
        if votes is not None and a:
            base = blend_dense(scores, votes, a, self.scale)
        term = None if similarities is None else similarities * ((1 - a) * self.scale)
        return base, term

    def scores(self, scores, similarities, votes):
        """The prediction scores of a chunk: ``base + term * b``."""
        base, term = self.parts(scores, similarities, votes)
        if term is None or not self.centroid_weight:
            return base
        return base + term * self.centroid_weight

    def scores_in_chunks(self, embeddings, table, device, rows=None, label_scores=None):
        """The prediction scores of :meth:`chunks`, chunk by chunk, on the CPU."""
        for chunk in self.chunks(embeddings, table, device, rows, label_scores):
            yield self.scores(*chunk).cpu()

    def top_k(self, embeddings, rows, k, search, network):
        """Scores and label rows (n, k) of the ``k`` best labels of the prediction scores of
        input ``embeddings`` (an ndarray) and ``rows`` (the inputs as given), best first: the
        label ``search``'s top-k (:class:`~skrank.multilabel._label_search.LabelSearch`),
        blended with the votes; with the nearest-centroid rule, a scan of every label."""
        device = next(network.parameters()).device
        if self.centroids is not None:
            return self.dense_top_k(embeddings, network.label_table(), device, rows, k)
        scores, indices = search.top_k(embeddings, k)
        if self.neighbors is None:
            return scores, indices
        n_labels = search.n_labels
        return self.voted_top_k(embeddings, network.label_vectors, n_labels, indices, device, k)

    def dense_top_k(self, embeddings, table, device, rows, k):
        """Scores and labels (n, k) of the ``k`` best labels of the blended scores, scanning
        every label in chunks of rows (the nearest-centroid rule reads every label)."""
        top_scores, top_labels = [], []
        for chunk in self.chunks(embeddings, table, device, rows):
            chunk_scores, chunk_labels = _ordered_block_top_k(self.scores(*chunk), k)
            top_scores.append(chunk_scores.cpu())
            top_labels.append(chunk_labels.cpu())
        return torch.cat(top_scores).numpy(), torch.cat(top_labels).numpy()

    def voted_top_k(self, embeddings, label_vectors, n_labels, candidates, device, k):
        """Scores and labels (n, k) of the ``k`` best labels of the label scores blended with
        the votes, from the label scores' own top-``k`` ``candidates`` and the voted labels
        (exact: :func:`~skrank.multilabel._neighbors.blended_top_k`), in chunks of rows;
        ``label_vectors(labels)`` gives the vectors of ``n_labels`` labels as scored."""
        keys = self.neighbors.on(device)
        width = k + self.n_neighbors * self.neighbors.labels.shape[1]
        rows_per_chunk = chunk_rows(
            embeddings.shape[0],
            4 * (self.neighbors.embeddings.shape[0] + width * (embeddings.shape[1] + 8)),
        )
        top_scores, top_labels = [], []
        with torch.no_grad():
            for start in range(0, embeddings.shape[0], rows_per_chunk):
                part = slice(start, start + rows_per_chunk)
                chunk = torch.from_numpy(embeddings[part]).to(device)
                chunk_scores, chunk_labels = blended_top_k(
                    chunk,
                    label_vectors,
                    torch.as_tensor(candidates[part], device=device),
                    self.votes(chunk, keys, part, n_labels),
                    self.neighbor_weight,
                    self.scale,
                    k,
                )
                top_scores.append(chunk_scores.cpu())
                top_labels.append(chunk_labels.cpu())
        return torch.cat(top_scores).numpy(), torch.cat(top_labels).numpy()


def choose_blend_weights(*, neighbor_weights, centroid_weights, held_out, blend, table, device, k):
    """The neighbours' and the centroids' weights with the best Precision@``k`` on held-out
    rows (ties: the smaller weight).

    The votes' weight is chosen from ``neighbor_weights`` without the nearest-centroid rule,
    then the centroids' from ``centroid_weights`` with the votes at the chosen weight; one pass
    over the held-out rows serves both (their label scores, votes and cosines are computed
    once). A single candidate each is returned as it is.

    Parameters
    ----------
    neighbor_weights, centroid_weights : tuple of float
        The candidate weights.
    held_out : tuple (embeddings, positives, rows) or None
        The held-out rows: their input embeddings (an ndarray), their positive labels and the
        rows as given (None: no choice to make).
    blend : Blend
        The score scale, ``n_neighbors``, and the voting rows and centroids of the training
        rows (:func:`held_out_blend`; needed where a candidate weight is positive).
    table : torch.Tensor of shape (n_labels, n_components)
        The label vectors as scored.
    device : torch.device
    k : int
        The ``k`` of Precision@k.

    Returns
    -------
    neighbor_weight, centroid_weight : float
    """
    if len(neighbor_weights) == 1 and len(centroid_weights) == 1:
        return neighbor_weights[0], centroid_weights[0]
    embeddings, y_held_out, rows_held_out = held_out
    # The votes' weight is compared without the centroids: a fixed centroid weight is left out.
    scored_weights = centroid_weights if len(centroid_weights) > 1 else (0.0,)
    blend = blend._replace(
        neighbors=blend.neighbors if any(neighbor_weights) else None,
        centroids=blend.centroids if len(scored_weights) > 1 else None,
    )
    labels = {(a, b): [] for a in neighbor_weights for b in scored_weights}
    for scores, similarities, votes in blend.chunks(embeddings, table, device, rows_held_out):
        for a in neighbor_weights:
            base, term = blend.parts(scores, similarities, votes, a)
            chunk_top = (
                [_ordered_block_top_k(base, k)]
                if term is None
                else _weighted_sum_top_k(base, term, scored_weights, k)
            )
            for b, (_, chunk_labels) in zip(scored_weights, chunk_top, strict=True):
                labels[a, b].append(chunk_labels.cpu())
            del base, term  # before the next weight's blocks are made
    top = {key: torch.cat(parts).numpy() for key, parts in labels.items()}
    tops = [top[a, 0.0] for a in neighbor_weights]
    neighbor_weight = best_weight(neighbor_weights, tops, y_held_out)
    if len(scored_weights) == 1:
        return neighbor_weight, centroid_weights[0]
    tops = [top[neighbor_weight, b] for b in scored_weights]
    return neighbor_weight, best_weight(scored_weights, tops, y_held_out)


def held_out_blend(blend, train, forward, embeddings, *, votes, centroids):
    """``blend`` as held-out rows are scored: with the voting rows (``votes``) and the label
    centroids (``centroids``) of the training rows alone, and the nearest voting rows of the
    held-out rows found once (``Blend.nearest``).

    Parameters
    ----------
    blend : Blend
        The score scale and ``n_neighbors``.
    train : tuple (X, positives, rows)
        The training rows as the network reads them, their positive labels and the rows as
        given: the rows that vote and give the centroids.
    forward : callable
        ``forward(X)``, the input embeddings of rows ``X`` (an ndarray).
    embeddings : ndarray of shape (n_held_out, n_components)
        The input embeddings of the held-out rows.
    votes, centroids : bool
        Whether to build the voting rows and the centroids.

    Returns
    -------
    blend : Blend
    """
    X, positives, rows = train
    neighbors = nearest = None
    if votes:
        neighbors = NeighborVotes.from_rows(forward(X), positives)
        nearest = nearest_keys(
            torch.as_tensor(embeddings),
            torch.from_numpy(neighbors.embeddings),
            blend.n_neighbors,
        )
    return blend._replace(
        neighbors=neighbors,
        centroids=input_centroids(rows, positives) if centroids else None,
        nearest=nearest,
    )


def best_weight(weights, tops, targets):
    """The weight whose top-k labels (``tops``, one (n, k) array a weight) have the best
    Precision@k on ``targets``; the smallest among ties."""
    precision = {
        weight: top_k_score(targets, top, "precision")
        for weight, top in zip(weights, tops, strict=True)
    }
    best = max(precision.values())
    return min(weight for weight, value in precision.items() if value == best)


def top_k_score(targets, top, kind):
    """Mean Precision@k or Recall@k (``kind``) of the top-k label columns ``top`` (n, k), by
    skrank.metrics' label core."""
    hits, n_true = top_k_hits(targets, top)
    return float(mean_top_k_scores(hits, n_true, np.array([top.shape[1]]), kind)[0])


def _n_labels(table, label_scores):
    return table.shape[0] if label_scores is None else label_scores.shape[1]
