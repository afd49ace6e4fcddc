"""Label votes of the nearest training rows in a learned embedding, blended with label scores.

The prediction rule of embedding methods such as SLEEC (Bhatia et al., 2015) and AnnexML
(Tagami, 2017): the training rows nearest to an input in the learned input embedding vote for
their labels. :class:`~skrank.multilabel.SNMClassifier` mixes these votes into its label
scores at prediction time (``neighbor_weight``); training is unchanged.
"""

import torch
from torch.nn import functional as F

from ..metrics import top_k_inner_products
from ..metrics._search import _ordered_block_top_k
from ..utils._memory import working_memory_bytes


def neighbor_votes(queries, keys, key_labels, key_counts, n_neighbors, n_labels):
    """Each query's label votes from its ``n_neighbors`` nearest keys (cosine similarity).

    Neighbour ``j`` of a query has weight ``w_j = max(0, cos(query, key_j))``, normalised to sum
    to 1 over the neighbours (all zero if every similarity is non-positive); the vote for label
    ``y`` is the sum of the weights of the neighbours that have ``y``. Votes lie in [0, 1].

    Parameters
    ----------
    queries : torch.Tensor of shape (n_queries, dim)
        Query embeddings (any norm: they are normalised here).
    keys : torch.Tensor of shape (n_keys, dim)
        Key embeddings, rows of unit norm.
    key_labels : torch.Tensor of shape (n_keys, width), int64
        Each key's labels, padded with ``n_labels`` (as ``positive_table`` of
        ``skrank.sampling._labels`` lays them out).
    key_counts : torch.Tensor of shape (n_keys,), int64
        Number of labels of each key.
    n_neighbors : int
        Neighbours per query (at most ``n_keys``).
    n_labels : int
        Number of labels ``K``.

    Returns
    -------
    votes : torch.Tensor, sparse COO of shape (n_queries, n_labels), coalesced
        The non-zero votes (and explicit zeros for labels of neighbours of weight zero).
    """
    similarities, neighbors = nearest_keys(queries, keys, n_neighbors)
    return votes_of_neighbors(similarities, neighbors, key_labels, key_counts, n_labels)


def nearest_keys(queries, keys, n_neighbors):
    """The cosine similarities and indices ``(n_queries, min(n_neighbors, n_keys))`` of each
    query's nearest keys, nearest first (``queries`` of any norm, ``keys`` of unit norm, as
    :func:`neighbor_votes` takes them)."""
    n_neighbors = min(n_neighbors, keys.shape[0])
    # Blocks of similarities of a 64th of the working memory (16 MiB by default, work
    # included): they come on top of a fitted model and its voting rows.
    return top_k_inner_products(
        F.normalize(queries, dim=1),
        lambda start, stop: keys[start:stop],
        keys.shape[0],
        n_neighbors,
        block_elements=working_memory_bytes() // 1024,
    )


def votes_of_neighbors(similarities, neighbors, key_labels, key_counts, n_labels):
    """The votes of :func:`neighbor_votes` from the queries' nearest keys, their
    ``similarities`` and indices ``neighbors`` (:func:`nearest_keys`)."""
    weights = similarities.clamp(min=0)
    weights = weights / weights.sum(dim=1, keepdim=True).clamp(min=torch.finfo(weights.dtype).tiny)
    labels = key_labels[neighbors]  # (n_queries, n_neighbors, width)
    width = labels.shape[2]
    valid = torch.arange(width, device=labels.device) < key_counts[neighbors][..., None]
    rows = torch.arange(neighbors.shape[0], device=labels.device)[:, None, None].expand_as(labels)
    values = weights[..., None].expand_as(labels)
    return torch.sparse_coo_tensor(
        torch.stack([rows[valid], labels[valid]]),
        values[valid],
        (neighbors.shape[0], n_labels),
        check_invariants=False,
    ).coalesce()


def blend_dense(scores, votes, weight, scale):
    """``(1 - weight) * scores + weight * scale * votes`` with ``scores`` a dense (n, K) tensor."""
    blended = (1 - weight) * scores
    rows, labels = votes.indices()
    blended.index_put_((rows, labels), weight * scale * votes.values(), accumulate=True)
    return blended


def blended_top_k(embeddings, label_vectors, candidates, votes, weight, scale, k):
    """Top-``k`` labels of the blended scores, from the label scores' own top-``k`` candidates.

    The blended score of label ``y`` is ``(1 - weight) * <e, u_y> + weight * scale * vote_y``
    with ``e`` the (scaled) input embedding and ``u_y`` the label vector as scored. Votes are
    non-negative, so a label outside the ``k`` best of the label scores and without a vote
    is outranked by those ``k`` (or tied with them): the ``k`` best blended scores lie among
    the labels of ``candidates`` and the voted labels, scored here exactly.

    Parameters
    ----------
    embeddings : torch.Tensor of shape (n, dim)
        Input embeddings, as scored (times the score scale).
    label_vectors : callable
        ``label_vectors(labels)`` returns the label vectors as scored, shape (m, dim), for a
        LongTensor of labels.
    candidates : torch.Tensor of shape (n, k), int64
        The ``k`` best labels of each row by label score.
    votes : torch.Tensor, sparse COO of shape (n, K), coalesced
        Neighbour votes (:func:`neighbor_votes`).
    weight : float
        Weight of the votes, in [0, 1].
    scale : float
        The score scale ``s`` (votes are scaled alike, so that the blend mixes scores of the
        same range).
    k : int
        Labels per row.

    Returns
    -------
    scores : torch.Tensor of shape (n, k)
        Blended scores, decreasing along each row.
    labels : torch.Tensor of shape (n, k), int64
        Their labels; ties broken by the smaller label.
    """
    n = embeddings.shape[0]
    device = embeddings.device
    rows = torch.arange(n, device=device)[:, None].expand_as(candidates).reshape(-1)
    union = torch.sparse_coo_tensor(
        torch.cat([votes.indices(), torch.stack([rows, candidates.reshape(-1)])], dim=1),
        torch.cat([votes.values(), votes.values().new_zeros(rows.shape[0])]),
        votes.shape,
        check_invariants=False,
    ).coalesce()  # sorted by (row, label); sums duplicates
    pair_rows, pair_labels = union.indices()
    # The pairs' vectors in blocks of a 256th of the working memory (4 MiB by default), as the
    # neighbours' similarities: gathered at once, they would be a prediction's largest arrays.
    block = max(1, working_memory_bytes() // (256 * 4 * embeddings.shape[1]))
    parts = [slice(start, start + block) for start in range(0, pair_rows.shape[0], block)]
    scores = torch.cat(
        [(embeddings[pair_rows[p]] * label_vectors(pair_labels[p])).sum(dim=1) for p in parts]
    )
    blended = (1 - weight) * scores + weight * scale * union.values()
    # Rows of variable length to a padded (n, width) block, labels increasing along each row.
    counts = torch.bincount(pair_rows, minlength=n)
    starts = torch.cumsum(counts, 0) - counts
    position = torch.arange(pair_rows.shape[0], device=device) - starts[pair_rows]
    width = int(counts.max())
    block = torch.full((n, width), -torch.inf, dtype=blended.dtype, device=device)
    block_labels = torch.zeros((n, width), dtype=torch.long, device=device)
    block[pair_rows, position] = blended
    block_labels[pair_rows, position] = pair_labels
    # Ties go to the smaller column, i.e. the smaller label.
    top_scores, columns = _ordered_block_top_k(block, k)
    return top_scores, block_labels.gather(1, columns)
