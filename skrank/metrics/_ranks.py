"""Ranks of each query's positives in an exact retrieval, without sorting the rows (torch).

For one query with similarities ``s`` (``n`` items, the query itself at ``-inf``) and ``P``
positives, every retrieval metric of skrank is a function of two counts per positive of score
``t``:

- ``n_at_least(t)``: items scored ``>= t`` (tied items count fully: the AUPRC);
- ``rank``: its 1-based position when the items are sorted by decreasing score with ties broken
  by the smaller index (Recall@k, Precision@k, R-precision, MAP@R).

A sort of each row costs O(n log n). :func:`positive_statistics` counts instead: the scores of a
row are mapped by a monotone function onto a grid of ``G = n / 4`` cells (a subtraction, a
multiplication, a clamp and a truncation, each monotone), and one histogram pass counts the
items of each cell. An item in a cell holding no positive compares with every positive as its
cell does; only the items sharing a cell with a positive (the positives among them) are
compared exactly: listed by index, stably sorted by decreasing score, so that a positive's place
in that list counts the shared items that rank before it, tied items of smaller index
included. This is exact for any scores, ties included. A block whose positives are many (more
than ``n / 8`` per query) sorts its rows instead.

Everything runs on the device of the similarities (CPU or CUDA); counts are integers, and the
AUPRC is accumulated in float64.
"""

import torch

SORT_FRACTION = 8  # blocks whose positives exceed n / SORT_FRACTION sort their rows


GRID_CELLS_PER_ITEM = 0.25


def _grid_size(width, n_items):
    return int(max(1024, GRID_CELLS_PER_ITEM * n_items))


def _nonzero(mask):
    """Row and column indices of the true entries of a 2-D mask (numpy's is faster on CPU)."""
    if mask.device.type == "cpu":
        rows, columns = mask.numpy().nonzero()
        return torch.from_numpy(rows), torch.from_numpy(columns)
    return torch.nonzero(mask, as_tuple=True)


class Workspace:
    """Work buffers reused from block to block (fresh large allocations cost page faults)."""

    def __init__(self):
        self._buffers = {}

    def get(self, name, shape, dtype, device):
        """An uninitialised tensor of ``shape``, a view of a buffer kept under ``name``."""
        size = int(torch.Size(shape).numel())
        buffer = self._buffers.get(name)
        if buffer is None or buffer.numel() < size or buffer.dtype != dtype:
            buffer = torch.empty(size, dtype=dtype, device=device)
            self._buffers[name] = buffer
        return buffer[:size].view(shape)


def _cells(similarity, lowest, highest, n_grid, workspace):
    """Monotone map of each row's scores onto cells ``0 .. n_grid - 1`` (int64, (c, n)).

    Cell 1 starts near the row's lowest positive, cell ``n_grid - 1`` ends at its highest
    score; lower scores (and ``-inf``) fall in cell 0. Two correctly rounded operations and a
    clamp, each monotone, so ``cell(a) < cell(b)`` implies ``a < b`` for any two scores of a
    row, whatever the rounding.
    """
    span = (highest - lowest).to(torch.float64).clamp(min=1e-300)
    scale64 = (n_grid - 3) / span
    info = torch.finfo(similarity.dtype)
    scale = scale64.clamp(min=info.tiny, max=info.max).to(similarity.dtype)
    # Half a cell below: the lowest positive lands in cell 1 despite rounding.
    origin = (lowest.to(torch.float64) - 1.5 / scale.to(torch.float64)).to(similarity.dtype)
    # Where the row's scores are huge, origin may round to -inf: keep it finite (still monotone).
    origin = torch.where(torch.isfinite(origin), origin, lowest)
    work = workspace.get("work", similarity.shape, similarity.dtype, similarity.device)
    torch.sub(similarity, origin, out=work)
    work.mul_(scale)
    work.clamp_(min=0, max=n_grid - 1)
    cells = workspace.get("cells", similarity.shape, torch.int64, similarity.device)
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


def positive_statistics(similarity, positive_columns, n_positives, workspace=None):
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
    workspace : Workspace, default=None
        Buffers to reuse across calls (a new one when None).

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
    positives_at_least = positives_scored_at_least(thresholds, n_positives)
    if width * SORT_FRACTION > n_items:
        columns = positive_columns.gather(1, by_score)
        ranks, n_at_least = _ranks_by_sort(similarity, columns, valid)
        auprc = _auprc(positives_at_least, n_at_least, valid, n_positives)
        return auprc, ranks.sort(dim=1).values

    n_grid = _grid_size(width, n_items)
    workspace = workspace or Workspace()
    highest = similarity.amax(dim=1, keepdim=True)
    cells = _cells(similarity, thresholds[:, :1], highest, n_grid, workspace)
    columns_by_score = positive_columns.gather(1, by_score)
    # Cells of the positives (padding goes to the extra cell n_grid, which no item reaches).
    positive_cells = cells.gather(1, columns_by_score).masked_fill_(~valid, n_grid)
    occupied = torch.zeros((n_rows, n_grid + 1), dtype=torch.bool, device=device)
    occupied.scatter_(1, positive_cells, True)
    occupied = occupied[:, :n_grid]
    positive_cells.clamp_(max=n_grid - 1)
    # Items in cells without a positive are above a positive iff their cell is above its cell.
    clear = workspace.get("histogram", (n_rows, n_grid), torch.int64, device).zero_()
    clear.scatter_add_(1, cells, torch.ones((), dtype=torch.int64, device=device).expand_as(cells))
    clear_at_most = torch.cumsum(clear.masked_fill_(occupied, 0), dim=1, out=clear)
    clear_above = clear_at_most[:, -1:] - clear_at_most.gather(1, positive_cells)
    del clear, clear_at_most
    # Items sharing a cell with a positive (the positives among them) are compared exactly:
    # listed by column, then stably sorted by decreasing score, i.e. in rank order.
    shared = workspace.get("shared", similarity.shape, torch.bool, device)
    torch.gather(occupied, 1, cells, out=shared)
    del cells
    rows, columns = _nonzero(shared)
    del shared
    per_row = torch.bincount(rows, minlength=n_rows)
    n_shared = max(int(per_row.max()), 1) if len(rows) else 1
    slot = torch.arange(len(rows), device=device) - (per_row.cumsum(0) - per_row)[rows]
    shared_scores = torch.full(
        (n_rows, n_shared), -torch.inf, dtype=similarity.dtype, device=device
    )
    shared_scores[rows, slot] = similarity[rows, columns]
    shared_columns = torch.full((n_rows, n_shared), n_items, dtype=torch.int64, device=device)
    shared_columns[rows, slot] = columns.to(device)
    ordered_scores, order = torch.sort(shared_scores, dim=1, descending=True, stable=True)
    place = torch.empty_like(order)
    place.scatter_(1, order, torch.arange(n_shared, device=device).expand_as(order))
    where = torch.searchsorted(shared_columns, columns_by_score).clamp_(max=n_shared - 1)
    # Rank: 1 + items scored above (clear cells, then shared) + tied items of smaller index.
    ranks = clear_above + place.gather(1, where) + 1
    ranks.masked_fill_(~valid, n_items + 1)
    shared_at_least = torch.searchsorted(ordered_scores.neg(), thresholds.neg(), right=True)
    auprc = _auprc(positives_at_least, clear_above + shared_at_least, valid, n_positives)
    return auprc, ranks.sort(dim=1).values


def positives_scored_at_least(thresholds, n_positives):
    """Per sorted positive score ``t_j`` (c, w): the positives scored ``>= t_j`` (the padding,
    ``+inf``, sorts last and is never counted)."""
    slots = torch.arange(thresholds.shape[1], device=thresholds.device)
    run_start = torch.ones_like(thresholds, dtype=torch.bool)
    run_start[:, 1:] = thresholds[:, 1:] != thresholds[:, :-1]
    # The first index of each entry's run of equal scores (searchsorted's left side).
    first = torch.where(run_start, slots, 0).cummax(dim=1).values
    return n_positives[:, None] - first


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
