"""Ranks of each query's positives, counted tile by tile (the torch CPU path).

:mod:`skrank.metrics._ranks` ranks a whole block of similarity rows at once: a dozen passes over
rows much larger than the CPU caches. Here the items are taken in tiles of a few thousand
columns (queries x tile stays in the L2 cache while every pass runs on it) and the items are
grouped by class, so that the positives of a block of queries are one contiguous tile, computed
first: their scores set each row's grid, and every other item is then a negative, counted into
per-row histograms that accumulate over the tiles.

For a row with positives sorted by (score, -index), ``t_0 <= ... <= t_{P-1}``, each negative
falls on a grid of ``G`` cells by a monotone map (a multiplication, a subtraction, a clamp and a
truncation, each monotone, applied the same way to the positives). A lookup table gives, for
each cell without a positive, the number ``j`` of positives in lower cells: the negative ranks
above exactly positives ``0 .. j - 1``, and one histogram bin counts it. A negative sharing a
cell with positives (few: the grid has several cells per positive) is compared exactly with
those positives (their scores, ties broken by the smaller item index). Then, for the positive ``j``:

- negatives scored ``>= t_j``: the negatives of the bins above ``j`` (the AUPRC);
- its rank (ties broken by the smaller index): ``1 + (P - 1 - j)`` positives and the negatives
  of the rank bins above ``j``.

Exact for any finite float32 scores, ties included. With numba installed, one compiled loop
(:mod:`skrank.metrics._tiled_kernel`) does all of this per tile in one pass; else torch and
numpy operations do it in about ten passes (slower; the same bins).
"""

import numpy as np
import torch

from ._ranks import _auprc, positives_scored_at_least

# Queries per block and items per tile: a (64, 4096) float32 tile is 1 MiB, so that the tile
# and its rows' bins stay in the L2 cache (2 MiB here; sizes chosen on a timed sweep, N = 10^5).
TILE_QUERIES = 64
TILE_ITEMS = 4096
CELLS_PER_POSITIVE = 8  # grid cells per positive of the widest row (at least MIN_CELLS)
MIN_CELLS = 1024
USE_NUMBA = True  # the fused loop of ``_tiled_kernel`` when numba is installed
MAX_FLAT_CELLS = 2**23  # rows x cells stays exact in float32 (and int32)


class _Grid:
    """A block's cell map, lookup table and histograms (see the module docstring).

    Row ``r`` owns flat cells ``r * (G + 1) + 1 + cell`` (its first flat cell is a spacer)
    and histogram bins ``b(r, j) = start_r + r + 1 + j`` for ``j = 0 .. P_r`` (``start_r``: the
    positives of the rows before it); the lookup table maps a cell to the bin of the positives
    in lower cells, plus ``n_bins`` when the cell holds positives.
    """

    def __init__(self, thresholds, n_positives, positive_index):
        n_rows, width = thresholds.shape
        self.n_rows, self.width = n_rows, width
        n_cells = int(
            min(max(MIN_CELLS, CELLS_PER_POSITIVE * width), max(MAX_FLAT_CELLS // n_rows, 8))
        )
        valid = torch.arange(width) < n_positives[:, None]
        lowest = thresholds[:, :1].double()
        highest = thresholds.gather(1, (n_positives - 1)[:, None]).double()
        span = (highest - lowest).clamp(min=1e-300)
        # Lowest positive near cell 1.5, highest near n_cells - 2.5: items outside the positives'
        # range fall in clear cells 0 and n_cells - 1. The cap keeps x * scale finite.
        cap = 1e36 / torch.maximum(lowest.abs(), highest.abs()).clamp(min=1.0)
        self.scale = torch.minimum((n_cells - 4) / span, cap).float()
        self.shift = (lowest * self.scale.double() - 1.5).float()
        row_cells = torch.arange(n_rows, dtype=torch.float32) * (n_cells + 1)
        self.offsets = (row_cells + 1)[:, None]
        self.top = float(n_cells - 1)
        self.n_bins = n_bins = int(n_positives.sum()) + n_rows + 1
        compiled = _numba_kernels() if USE_NUMBA else None
        self.kernel = None if compiled is None else compiled.count_tile
        if self.kernel is not None:
            self.row_terms = [
                x.reshape(-1).numpy() for x in (self.scale, self.shift, self.offsets)
            ] + [np.float32(self.top)]
            cells = np.empty(thresholds.shape, dtype=np.int64)
            compiled.cells(thresholds.numpy(), *self.row_terms, cells)
            cells = torch.from_numpy(cells)
            lookup = np.empty(n_rows * (n_cells + 1), dtype=np.int32)
            compiled.build_lookup(cells.numpy(), n_positives.numpy(), n_cells, n_bins, lookup)
            positive_cells = cells[valid]
        else:
            positive_cells = self.cells(thresholds, torch.empty_like(thresholds), None)[valid]
            # Lookup: exclusive running count of positives, the spacers counting one each.
            counts = torch.zeros(n_rows * (n_cells + 1), dtype=torch.int32)
            counts[row_cells.long()] = 1
            counts.index_add_(0, positive_cells, _ones(len(positive_cells), torch.int32))
            lookup = torch.cumsum(counts, 0, dtype=torch.int32).sub_(counts)
            lookup[positive_cells] = lookup[positive_cells] + n_bins
            lookup = lookup.numpy()
        self.lookup = lookup
        self.row_start = torch.cumsum(n_positives, 0) - n_positives
        # The positives in bin order, for the exact comparisons, padded for the scan of a cell.
        positive_cells = positive_cells.numpy()
        self.positive_scores = np.append(thresholds[valid].numpy(), np.zeros(width, np.float32))
        self.positive_index = np.append(positive_index[valid].numpy(), np.zeros(width, np.int64))
        # Positives after each one in its cell.
        run_end = np.searchsorted(positive_cells, positive_cells, side="right")
        self.more = np.append(run_end - 1 - np.arange(len(run_end)), np.zeros(width, np.int64))
        self.histogram = torch.zeros(2 * n_bins, dtype=torch.int64)
        self.shared_bins = []
        self.shared_at_least = np.zeros(n_bins, dtype=np.int64)  # from the fused loop
        self.shared_before = np.zeros(n_bins, dtype=np.int64)

    def cells(self, scores, work, out):
        """Flat cells of ``scores`` (a monotone map in each row, see the class docstring)."""
        torch.mul(scores, self.scale, out=work)
        work.sub_(self.shift).clamp_(0, self.top).add_(self.offsets)
        if out is None:
            return work.to(torch.int64)
        return out.copy_(work)

    def count(self, scores, index, work, cells, bins):
        """Count the negatives of one tile: ``scores`` (c, m), their item ``index`` (m,)."""
        if self.kernel is not None:
            self.kernel(
                scores.numpy(),
                index,
                *self.row_terms,
                self.lookup,
                self.n_bins,
                self.histogram.numpy(),
                self.positive_scores,
                self.positive_index,
                self.more,
                self.shared_at_least,
                self.shared_before,
            )
            return
        self.cells(scores, work, cells)
        flat_bins = bins.view(-1)
        np.take(self.lookup, cells.view(-1).numpy(), out=flat_bins.numpy(), mode="wrap")
        self.histogram.index_add_(0, flat_bins, _ones(flat_bins.numel()))
        shared = np.flatnonzero(flat_bins.numpy() >= self.n_bins)
        if len(shared):
            self._compare_shared(shared, scores, index, flat_bins)

    def _compare_shared(self, shared, scores, index, flat_bins):
        """Exact bins of the negatives sharing a cell with positives."""
        n_columns = scores.shape[1]
        rows = shared // n_columns
        score = scores.reshape(-1).numpy()[shared]
        first_bin = flat_bins.numpy()[shared].astype(np.int64) - self.n_bins
        first = first_bin - rows - 1  # the cell's first positive, in bin order
        # Bins: after the positives scored <= the negative, and after those it ranks before.
        at_least, before = first_bin, first_bin.copy()
        active = slice(None)
        for offset in range(self.width):  # the positives of the cell, by increasing score
            positive = first[active] + offset
            threshold = self.positive_scores[positive]
            item_score = score[active]
            at_most = threshold <= item_score
            below = threshold < item_score
            at_least[active] += at_most
            before[active] += below
            tied = np.flatnonzero(at_most != below)
            if len(tied):  # tied: the negative ranks before positives of larger index
                where = np.arange(len(shared))[active][tied]
                columns = shared[where] - rows[where] * n_columns
                before[where] += self.positive_index[positive[tied]] > index[columns]
            next_active = np.flatnonzero(at_most & (self.more[positive] > 0))
            if not len(next_active):
                break
            active = next_active if offset == 0 else active[next_active]
        self.shared_bins.append((at_least, before))

    def negatives_above(self, n_positives):
        """Per positive ``j`` (c, width): negatives scored ``>= t_j``, and ranked before it."""
        rows = torch.arange(self.n_rows)
        first = self.row_start + rows + 1
        bins = (first[:, None] + torch.arange(self.width)).clamp_(max=self.n_bins - 1)
        last = (first + n_positives)[:, None]
        clear = self.histogram[: self.n_bins]
        results = []
        lists = zip(*self.shared_bins, strict=True) if self.shared_bins else ((), ())
        for fused, shared in zip((self.shared_at_least, self.shared_before), lists, strict=True):
            if shared:
                fused = fused + np.bincount(np.concatenate(shared), minlength=self.n_bins)
            at_most = torch.cumsum(clear + torch.from_numpy(fused), 0)
            results.append(at_most[last] - at_most[bins])
        return results


def _numba_kernels():
    """The module of the fused loops, or None when numba is not installed."""
    try:
        from . import _tiled_kernel  # noqa: PLC0415 (imports numba: on first use only)
    except ImportError:  # pragma: no cover - numba is optional
        return None
    return _tiled_kernel


_ONES = torch.ones(0, dtype=torch.int64)
_WORK_DTYPES = (torch.float32, torch.int32, torch.int32)  # scaled scores, cells, bins


def _ones(n, dtype=torch.int64):
    global _ONES  # noqa: PLW0603 (one shared read-only buffer of ones)
    if len(_ONES) < n:
        _ONES = torch.ones(max(n, 2 * len(_ONES)), dtype=torch.int64)
    return _ONES[:n] if dtype == torch.int64 else _ONES[:n].to(dtype)


def tiled_positive_statistics(class_scores, positive_columns, n_positives, tiles, column_index):
    """Per-query AUPRC and sorted tie-by-index ranks of the positives, tile by tile.

    Parameters
    ----------
    class_scores : torch.Tensor of shape (c, m0), float32
        Scores of the ``c`` queries against the first tile: every item of the queries' classes
        (and of the classes between them); modified in place.
    positive_columns : torch.Tensor of shape (c, w), int64
        Columns of ``class_scores`` holding each query's positives, in increasing item index,
        in the first ``n_positives[i]`` entries (the rest may hold any column).
    n_positives : torch.Tensor of shape (c,), int64
        Number of positives of each query, each ``>= 1``.
    tiles : iterable of (torch.Tensor, torch.Tensor)
        The queries' scores (c, m) against the other items, tile by tile, and those items'
        indices (m,) (each tile may reuse the previous one's memory). The query itself is in
        no tile (it is among the columns of ``class_scores``, set to ``-inf`` by the caller).
    column_index : torch.Tensor of shape (m0,), int64
        Item indices of the columns of ``class_scores``.

    Returns
    -------
    auprc : torch.Tensor of shape (c,), float64
    ranks : torch.Tensor of shape (c, w), int64
        As :func:`skrank.metrics._ranks.positive_statistics` (``n + 1`` in the padding, with
        ``n`` the number of items: all the columns of ``class_scores`` and of the tiles).
    """
    n_rows, width = positive_columns.shape
    valid = torch.arange(width) < n_positives[:, None]
    # Positives by (score, -index): reverse the (increasing-index) columns, then sort stably.
    columns = positive_columns.flip(1)
    scores = class_scores.gather(1, columns)
    scores.masked_fill_(~valid.flip(1), torch.inf)
    thresholds, order = torch.sort(scores, dim=1, stable=True)
    columns = columns.gather(1, order)
    class_scores.scatter_(1, columns, -torch.inf)  # positives are not negatives (nor padding)
    grid = _Grid(thresholds, n_positives, column_index[columns])
    buffers = []  # work arrays of the torch operations, grown to the largest tile

    def count(tile_scores, index):
        size, shape = tile_scores.numel(), tile_scores.shape
        if grid.kernel is not None:
            grid.count(tile_scores, index, None, None, None)
            return
        if not buffers or len(buffers[0]) < size:
            buffers[:] = [torch.empty(size, dtype=dtype) for dtype in _WORK_DTYPES]
        grid.count(tile_scores, index, *(buffer[:size].view(shape) for buffer in buffers))

    for start in range(0, class_scores.shape[1], TILE_ITEMS):
        part = slice(start, start + TILE_ITEMS)
        count(class_scores[:, part].contiguous(), column_index[part].numpy())
    n_items = class_scores.shape[1]
    for tile_scores, index in tiles:
        count(tile_scores, index.numpy())
        n_items += tile_scores.shape[1]
    negatives_at_least, negatives_before = grid.negatives_above(n_positives)
    positives_at_least = positives_scored_at_least(thresholds, n_positives)
    positives_before = n_positives[:, None] - 1 - torch.arange(width)  # ranked before it
    auprc = _auprc(positives_at_least, positives_at_least + negatives_at_least, valid, n_positives)
    ranks = (1 + positives_before + negatives_before).masked_fill_(~valid, n_items + 1)
    return auprc, ranks.sort(dim=1).values
