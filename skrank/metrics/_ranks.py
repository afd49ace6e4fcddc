"""Ranks of each query's positives in an exact retrieval, without sorting the rows (torch).

For one query with similarities ``s`` (``n`` items, the query itself at ``-inf``) and ``P``
positives, every retrieval metric of skrank is a function of two counts per positive of score
``t``:

- ``n_at_least(t)``: items scored ``>= t`` (tied items count fully: the AUPRC);
- ``rank``: its 1-based position when the items are sorted by decreasing score with ties broken
  by the smaller index (Recall@k, Precision@k, R-precision, MAP@R).

A sort of each row costs O(n log n). :func:`positive_statistics` counts instead: the scores of a
row are mapped by a monotone function onto a grid of ``G`` cells (one multiply-add, a
truncation), and one histogram pass counts the items of each cell. An item in a cell holding
no positive compares with every positive as its cell does; only the items sharing a cell with a
positive (few, on a grid finer than the positives) are compared exactly, by binary search among
the positives. The monotone map makes this exact for any scores, ties included. A row where a
non-positive item ties a positive (equal float scores) takes a stable sort for its ranks, and
a block whose positives are many (more than ``n / 8``) is sorted whole.

Everything runs on the device of the similarities (CPU or CUDA); counts are integers, and the
AUPRC is accumulated in float64.
"""

import torch

SORT_FRACTION = 8  # blocks whose positives exceed n / SORT_FRACTION sort their rows


def _suffix_sums(counts):
    """``out[:, j] = counts[:, j + 1:].sum(1)`` for each column ``j`` (int64)."""
    reverse = counts.flip(1).cumsum(1).flip(1)
    return torch.cat([reverse[:, 1:], torch.zeros_like(reverse[:, :1])], dim=1)


def _grid_size(width, n_items):
    return int(min(max(1024, 16 * width), max(n_items, 2)))


def _cells(similarity, lowest, highest, n_grid):
    """Monotone map of each row's scores onto cells ``0 .. n_grid - 1`` (int64, (c, n)).

    Cell 1 starts near the row's lowest positive, cell ``n_grid - 1`` ends at its highest
    score; lower scores (and ``-inf``) fall in cell 0. Two correctly rounded operations and a
    clamp, each monotone, so ``cell(a) < cell(b)`` implies ``a < b`` for any two scores of a
    row, whatever the rounding.
    """
    span = (highest - lowest).to(torch.float64).clamp(min=1e-300)
    scale64 = (n_grid - 2) / span
    info = torch.finfo(similarity.dtype)
    scale = scale64.clamp(min=info.tiny, max=info.max).to(similarity.dtype)
    origin = (lowest.to(torch.float64) - 1 / scale.to(torch.float64)).to(similarity.dtype)
    # Where the row's scores are huge, origin may round to -inf: keep it finite (still monotone).
    origin = torch.where(torch.isfinite(origin), origin, lowest)
    work = torch.sub(similarity, origin)
    work.mul_(scale)
    work.clamp_(min=0, max=n_grid - 1)
    cells = torch.empty(similarity.shape, dtype=torch.int64, device=similarity.device)
    cells.copy_(work)
    return cells


def _ranks_by_sort(similarity, positive_columns, valid):
    """Tie-by-index ranks (1-based) of the positives, and items scored ``>=`` each, by sorting.

    Returns ``ranks`` (c, w) (``n + 1`` at padding) and ``n_at_least`` (c, w).
    """
    n_items = similarity.shape[1]
    values, order = torch.sort(similarity, dim=1, descending=True, stable=True)
    position = torch.empty_like(order)
    position.scatter_(1, order, torch.arange(n_items, device=order.device).expand_as(order))
    ranks = position.gather(1, positive_columns) + 1
    scores = similarity.gather(1, positive_columns)
    ascending = values.neg()  # -scores, ascending
    n_at_least = torch.searchsorted(ascending, scores.neg(), right=True)
    ranks = ranks.masked_fill(~valid, n_items + 1)
    return ranks, n_at_least


def positive_statistics(similarity, positive_columns, n_positives):
    """Per-query AUPRC and sorted tie-by-index ranks of the positives.

    Parameters
    ----------
    similarity : torch.Tensor of shape (c, n)
        Scores of ``c`` queries against ``n`` items, finite except ``-inf`` at excluded items
        (the query itself); modified in no way.
    positive_columns : torch.Tensor of shape (c, w), int64
        Item indices of each query's positives in its first ``n_positives[i]`` columns; the
        rest (padding) may hold any valid index.
    n_positives : torch.Tensor of shape (c,), int64
        Number of positives of each query, each ``>= 1``.

    Returns
    -------
    auprc : torch.Tensor of shape (c,), float64
        Mean over the positives of (positives scored ``>= t``) / (items scored ``>= t``).
    ranks : torch.Tensor of shape (c, w), int64
        1-based ranks of the positives under the tie rule "smaller index first", increasing
        along each row; ``n + 1`` in the padding.
    """
    n_rows, n_items = similarity.shape
    width = positive_columns.shape[1]
    device = similarity.device
    slots = torch.arange(width, device=device)
    valid = slots < n_positives[:, None]
    scores = similarity.gather(1, positive_columns).masked_fill_(~valid, torch.inf)
    thresholds, by_score = torch.sort(scores, dim=1)
    # Positives scored >= and > each threshold (padding +inf sorts last, never counted).
    positives_at_least = n_positives[:, None] - torch.searchsorted(thresholds, thresholds)
    positives_above = n_positives[:, None] - torch.searchsorted(thresholds, thresholds, right=True)
    if width * SORT_FRACTION > n_items:
        columns = positive_columns.gather(1, by_score)
        ranks, n_at_least = _ranks_by_sort(similarity, columns, valid)
        auprc = _auprc(positives_at_least, n_at_least, valid, n_positives)
        return auprc, ranks.sort(dim=1).values

    n_grid = _grid_size(width, n_items)
    lowest = thresholds[:, :1]
    highest = similarity.amax(dim=1, keepdim=True)
    cells = _cells(similarity, lowest, highest, n_grid)
    # Cells of the positives (padding goes to the extra cell n_grid, which no item reaches).
    positive_cells = cells.gather(1, positive_columns.gather(1, by_score))
    positive_cells.masked_fill_(~valid, n_grid)
    occupied = torch.zeros((n_rows, n_grid + 1), dtype=torch.bool, device=device)
    occupied.scatter_(1, positive_cells, True)
    occupied = occupied[:, :n_grid]
    histogram = torch.zeros((n_rows, n_grid), dtype=torch.int64, device=device)
    histogram.scatter_add_(
        1, cells, torch.ones((), dtype=torch.int64, device=device).expand_as(cells)
    )
    # Items in cells without a positive: above threshold t iff their cell is above t's cell.
    clear = histogram.masked_fill(occupied, 0)
    clear_above = _suffix_sums(clear)
    above_cells = clear_above.gather(1, positive_cells.clamp(max=n_grid - 1))
    # Items sharing a cell with a positive: compared exactly with the row's thresholds.
    shared = occupied.gather(1, cells)
    del cells
    rows, columns = torch.nonzero(shared, as_tuple=True)
    del shared
    per_row = torch.bincount(rows, minlength=n_rows)
    n_shared = int(per_row.max()) if len(rows) else 0
    shared_scores = torch.full(
        (n_rows, max(n_shared, 1)), -torch.inf, dtype=similarity.dtype, device=device
    )
    slot = torch.arange(len(rows), device=device) - (per_row.cumsum(0) - per_row)[rows]
    shared_scores[rows, slot] = similarity[rows, columns]
    n_at_least = above_cells + _bin_suffix(thresholds, shared_scores, width, right=True)
    n_above = above_cells + _bin_suffix(thresholds, shared_scores, width, right=False)
    auprc = _auprc(positives_at_least, n_at_least, valid, n_positives)
    # Items tied with a positive beyond the positives themselves: order by index needs a sort.
    tied = ((n_at_least - n_above) > (positives_at_least - positives_above)) & valid
    # Otherwise the m-th best positive (m = n_positives - j) ranks after the items above it.
    ranks = (n_above - positives_above) + (n_positives[:, None] - slots)
    ranks = ranks.masked_fill(~valid, n_items + 1)
    tie_rows = torch.nonzero(tied.any(dim=1)).squeeze(1)
    if len(tie_rows):
        ranks[tie_rows] = _ranks_by_sort(
            similarity[tie_rows], positive_columns[tie_rows], valid[tie_rows]
        )[0]
    return auprc, ranks.sort(dim=1).values


def _bin_suffix(thresholds, values, width, *, right):
    """For each threshold ``j`` of each row, the ``values`` of the row ``>= t_j`` (right) or
    ``> t_j`` (left), counted by binary search among the sorted thresholds."""
    position = torch.searchsorted(thresholds, values, right=right)
    counts = torch.zeros((len(values), width + 1), dtype=torch.int64, device=values.device)
    counts.scatter_add_(
        1, position, torch.ones((), dtype=torch.int64, device=values.device).expand_as(position)
    )
    return _suffix_sums(counts)[:, :width]


def _auprc(positives_at_least, n_at_least, valid, n_positives):
    precision = positives_at_least.to(torch.float64) / n_at_least.clamp(min=1).to(torch.float64)
    return precision.masked_fill_(~valid, 0).sum(dim=1) / n_positives.to(torch.float64)


def rank_scores(ranks, n_positives, ks):
    """Positives in the top ``k`` for each ``k``, R-precision and MAP@R from sorted ranks.

    Parameters
    ----------
    ranks : torch.Tensor of shape (c, w)
        Sorted 1-based ranks of the positives (padding ranks beyond every ``k`` and ``R``).
    n_positives : torch.Tensor of shape (c,)
        ``R``, the number of positives of each query.
    ks : torch.Tensor of shape (n_k,)

    Returns
    -------
    in_top_k : torch.Tensor of shape (c, n_k), int64
    r_precision, map_at_r : torch.Tensor of shape (c,), float64
        As pytorch-metric-learning defines them: (positives in the top R) / R, and
        (1 / R) * sum over the top R positions i holding a positive of precision@i.
    """
    in_top_k = (ranks[:, None, :] <= ks[None, :, None]).sum(dim=2)
    within_r = ranks <= n_positives[:, None]
    r = n_positives.to(torch.float64)
    r_precision = within_r.sum(dim=1) / r
    order = torch.arange(1, ranks.shape[1] + 1, device=ranks.device, dtype=torch.float64)
    precision_at_rank = (order / ranks.to(torch.float64)).masked_fill_(~within_r, 0)
    return in_top_k, r_precision, precision_at_rank.sum(dim=1) / r
