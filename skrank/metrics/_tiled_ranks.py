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
(:mod:`skrank.metrics._tiled_kernel`) does all of this per tile in one pass. Without numba,
torch and numpy operations give the same bins: the cells (five elementwise passes), the bins
(one ``index_select`` from the lookup table), the histogram (one int32 ``index_add_``), and
the list of the items sharing a cell with positives (one comparison, ``flatnonzero``); such an
item is compared with the up to ``SHARED_WIDTH`` positives of its cell in one vector step
(``SHARED_WIDTH`` per-bin tables of the scores of the row's positives from the cell's first
on, each one comparison over all such items), ties in a second vector step, only crowded
cells one positive at a time. Work arrays are kept from block to block in a ``Workspace`` (fresh
MiB allocations cost page faults).
"""

import sys

import numpy as np
import torch

from ._ranks import Workspace, _auprc, positives_scored_at_least

# Queries per block and items per tile: a (64, 4096) float32 tile is 1 MiB, so that the tile
# and its rows' bins stay in the L2 cache (sizes chosen on timed sweeps at N = 10^5; 32 x 8192,
# 64 x 8192, 32 x 16384 and 16 x 16384 were no faster on a 4 MiB L2).
TILE_QUERIES = 64
TILE_ITEMS = 4096
# Grid cells per positive of the widest row (at least MIN_CELLS): 16 rather than 8 halves the
# items sharing a cell with positives for a larger lookup table (faster at N = 1e4 to 1e5).
CELLS_PER_POSITIVE = 16
MIN_CELLS = 1024
USE_NUMBA = True  # the fused loop of ``_tiled_kernel`` when numba is installed
# Loading the fused loop (importing numba and its cached machine code) takes about 0.7 s once
# per process, and the loop saves about a fifth of the torch operations' time, which repays the
# load after about this many query-item pairs (20,000 items ranked once): until then calls run
# the torch operations, and count their pairs (numba_pays_off).
NUMBA_MIN_PAIRS = 20_000**2
_pairs_without_numba = 0
MAX_FLAT_CELLS = 2**23  # rows x cells stays exact in float32 (and int32)
SHARED_WIDTH = 4  # without numba, cells of at most this many positives are compared with an
# item in one vector step


class _Grid:
    """A block's cell map, lookup table and histograms (see the module docstring).

    Row ``r`` owns flat cells ``r * (G + 1) + 1 + cell`` (its first flat cell is a spacer)
    and histogram bins ``b(r, j) = start_r + r + 1 + j`` for ``j = 0 .. P_r`` (``start_r``: the
    positives of the rows before it); the lookup table maps a cell to the bin of the positives
    in lower cells, plus ``n_bins`` when the cell holds positives.
    """

    def __init__(self, thresholds, n_positives, positive_index, workspace, use_numba):
        n_rows, width = thresholds.shape
        self.n_rows, self.width = n_rows, width
        n_cells = int(
            min(max(MIN_CELLS, CELLS_PER_POSITIVE * width), max(MAX_FLAT_CELLS // n_rows, 8))
        )
        valid = (np.arange(width) < n_positives.numpy()[:, None]).reshape(-1)
        lowest = thresholds[:, :1].double()
        highest = thresholds.gather(1, (n_positives - 1)[:, None]).double()
        span = (highest - lowest).clamp(min=1e-300)
        # Lowest positive near cell 1.5, highest near n_cells - 2.5: items outside the positives'
        # range fall in clear cells 0 and n_cells - 1. The cap keeps x * scale finite.
        cap = 1e36 / torch.maximum(lowest.abs(), highest.abs()).clamp(min=1.0)
        self.scale = torch.minimum((n_cells - 4) / span, cap).float()
        self.shift = (lowest * self.scale.double() - 1.5).float()
        row_cells = torch.arange(n_rows) * (n_cells + 1)
        self.offsets = (row_cells + 1).float()[:, None]
        self.top = float(n_cells - 1)
        self.n_bins = n_bins = int(n_positives.sum()) + n_rows + 1
        n_flat = n_rows * (n_cells + 1)
        self.workspace = workspace
        # One entry past the last cell: the increments of a positive there land beyond it.
        lookup = workspace.get("lookup", (n_flat + 1,), torch.int32, "cpu")
        compiled = _numba_kernels() if use_numba else None
        self.kernel = None if compiled is None else compiled.count_tile
        if self.kernel is not None:
            self.row_terms = [
                x.reshape(-1).numpy() for x in (self.scale, self.shift, self.offsets)
            ] + [np.float32(self.top)]
            cells = np.empty(thresholds.shape, dtype=np.int64)
            compiled.cells(thresholds.numpy(), *self.row_terms, cells)
            compiled.build_lookup(
                cells, n_positives.numpy(), n_cells, n_bins, lookup[:n_flat].numpy()
            )
        else:
            cells = self.cells(thresholds, torch.empty_like(thresholds), None).numpy()
        positive_cells = cells.reshape(-1)[valid]
        n_total = len(positive_cells)
        # The positives in bin order, for the exact comparisons, padded for the scan of a cell.
        self.positive_scores = _compress(valid, thresholds, width, workspace, "positive_scores")
        self.positive_index = _compress(
            valid, positive_index, width + SHARED_WIDTH, workspace, "positive_index"
        )
        # Positives after each one in its cell.
        firsts = _run_starts(positive_cells)
        self.more = workspace.get("more", (n_total + width,), torch.int64, "cpu").numpy()
        self.more[n_total:] = 0
        _run_remainders(firsts, n_total, out=self.more[:n_total])
        if self.kernel is None:
            self._build_lookup(lookup, row_cells.numpy(), positive_cells[firsts], firsts)
            self._tables(thresholds.numpy(), n_positives, valid)
        self.lookup = lookup[:n_flat]
        self.spacer_bins = np.cumsum(n_positives.numpy() + 1)  # the last bin of each row
        self.row_start = torch.cumsum(n_positives, 0) - n_positives
        # Counts fit in int32: fewer than 2^31 items.
        self.histogram = workspace.get("histogram", (3 * n_bins,), torch.int32, "cpu").zero_()
        self.shared = workspace.get("shared", (2, n_bins), torch.int64, "cpu").zero_()
        self.shared_at_least, self.shared_before = self.shared.numpy()
        self.masks = None
        if self.kernel is None:  # for _flat_at_least: tiles of TILE_ITEMS columns at most
            self._get_masks(n_rows * TILE_ITEMS)

    def _get_masks(self, n):
        """The work arrays of :func:`_flat_at_least` for tiles of up to ``n`` scores."""
        if self.masks is None or len(self.masks[1]) < -(-n // 8):
            n_words = -(-n // 8)
            masks = self.workspace.get("masks", (9 * n_words,), torch.bool, "cpu").numpy()
            self.masks = masks[: 8 * n_words], masks[8 * n_words :]
        return self.masks

    def _build_lookup(self, lookup, row_cells, starts, firsts):
        """The lookup table without numba: the running count of the spacers and positives in
        lower cells, plus n_bins in a cell holding positives (2 n_bins beyond SHARED_WIDTH of
        them), as one running sum of increments (one ``index_add_``, one ``cumsum_``): +1 at
        each row's first cell, + the mark at each cell ``starts`` holding positives (``firsts``:
        its first positive's place), and past it the cell's positives less the mark."""
        n_rows, n_cells = len(row_cells), len(starts)
        work = self.workspace.get("lookup_terms", (2, n_rows + 2 * n_cells), torch.int32, "cpu")
        index, increments = work.numpy()
        np.add(row_cells, 1, out=index[:n_rows])
        index[n_rows : n_rows + n_cells] = starts
        np.add(starts, 1, out=index[n_rows + n_cells :])
        increments[:n_rows] = 1
        marks, after = increments[n_rows : n_rows + n_cells], increments[n_rows + n_cells :]
        in_cell = self.more[firsts]  # positives after the first: the cell holds 1 + more
        np.greater_equal(in_cell, SHARED_WIDTH, out=marks, casting="unsafe")
        marks += 1
        marks *= self.n_bins
        np.subtract(in_cell + 1, marks, out=after, casting="unsafe")
        lookup.zero_().index_add_(0, work[0], work[1]).cumsum_(0)  # in place

    def _tables(self, thresholds, n_positives, valid):
        """The torch path's tables: bin -> the scores of the row's positives from the cell's
        first on (+inf past the row's last), ``SHARED_WIDTH`` tables, one per place, for the
        bins that are a cell's first positive's (no other bin is looked up).

        Past the cell's last positive the scores are those of positives in higher cells,
        above every score of the cell (the cell map is monotone): no item of the cell
        counts them, nor ties with them.
        """
        n_rows, width = thresholds.shape
        padded = np.full((n_rows, width + SHARED_WIDTH), np.inf, dtype=np.float32)
        padded[:, :width] = thresholds  # +inf past each row's positives
        # Row r's bins, its positives' then the spacer after them, are contiguous: the entries
        # of its first n_positives[r] + 1 places, in row order, are bins 1 .. n_bins - 1.
        in_row = np.empty((n_rows, width + 1), dtype=bool)
        in_row[:, :width] = valid.reshape(n_rows, width)
        in_row[:, width] = False
        in_row[np.arange(n_rows), n_positives.numpy()] = True  # the spacer's place
        self.cell_scores = np.empty((SHARED_WIDTH, self.n_bins), dtype=np.float32)
        self.cell_scores[:, 0] = np.inf  # bin 0 belongs to no row
        for offset in range(SHARED_WIDTH):
            self.cell_scores[offset, 1:] = padded[:, offset : offset + width + 1][in_row]

    def positive_of_bin(self, bins):
        """The positive (in bin order) whose bin is ``bins``: bin ``b`` of row ``r`` holds
        positive ``b - r - 1``."""
        return bins - np.searchsorted(self.spacer_bins, bins, side="right") - 1

    def cells(self, scores, work, out):
        """Flat cells of ``scores`` (a monotone map in each row, see the class docstring)."""
        torch.mul(scores, self.scale, out=work)
        work.sub_(self.shift).clamp_(0, self.top).add_(self.offsets)
        if out is None:
            return work.to(torch.int64)
        return out.copy_(work)

    def count(self, scores, index, work, cells):
        """Count the negatives of one tile: ``scores`` (c, m), their item ``index`` (m,).

        ``work`` (float32) and ``cells`` (int32) are work arrays of the tile's shape.
        """
        if self.kernel is not None:
            self.kernel(
                scores.numpy(),
                index,
                *self.row_terms,
                self.lookup.numpy(),
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
        flat_bins = work.view(torch.int32).view(-1)  # the scaled scores are not needed again
        torch.index_select(self.lookup, 0, cells.view(-1), out=flat_bins)
        bins = flat_bins.numpy()
        shared = _flat_at_least(bins, self.n_bins, self._get_masks(len(bins)))
        if len(shared):
            bins[shared] = self._compare_shared(shared, scores.numpy().reshape(-1), index, bins)
        self.histogram.index_add_(0, flat_bins, _ones(flat_bins.numel(), torch.int32))

    def _compare_shared(self, shared, scores, index, flat_bins):
        """Exact bins of the negatives sharing a cell with positives (flat ``shared``): their
        histogram bin, or 0 (a bin of no row) for those counted in ``shared_*`` instead."""
        first_bin = flat_bins[shared] - self.n_bins
        score = scores[shared]
        crowded = np.flatnonzero(first_bin >= self.n_bins)  # more than SHARED_WIDTH positives
        if len(crowded):
            self._compare_many(
                shared[crowded], score[crowded], first_bin[crowded] - self.n_bins, index
            )
            first_bin[crowded] = 0  # +inf in every table: no positive at most, no tie
        # The cell's positives by increasing (score, -index), then higher positives or +inf
        # (above every score of the cell): one vector comparison per place, exact but for ties.
        thresholds = np.take(self.cell_scores, first_bin, axis=1)  # (SHARED_WIDTH, shared)
        at_least = first_bin + _count_true(np.less_equal(thresholds, score))
        equal = np.equal(thresholds, score)
        tied = np.flatnonzero(np.logical_or.reduce(equal, axis=0))
        if len(tied):  # tied: the negative ranks before the tied positives of larger index
            first_bin, equal, score = first_bin[tied], equal[:, tied], score[tied]
            positive = self.positive_of_bin(first_bin) + np.arange(SHARED_WIDTH)[:, None]
            later = self.positive_index[positive] > index[shared[tied] % len(index)]
            below = np.less(thresholds[:, tied], score)
            before = first_bin + _count_true(below) + _count_true(equal & later)
            np.add.at(self.shared_at_least, at_least[tied], 1)
            np.add.at(self.shared_before, before, 1)
            at_least[tied] = 0
        return at_least

    def _compare_many(self, shared, score, first_bin, index):
        """:meth:`_compare_shared` one positive at a time (cells of more than ``SHARED_WIDTH``
        positives)."""
        columns = shared % len(index)
        first = self.positive_of_bin(first_bin)  # the cell's first positive, in bin order
        at_least, before = first_bin.astype(np.int64), first_bin.astype(np.int64)
        active = np.arange(len(shared))
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
                where = active[tied]
                before[where] += self.positive_index[positive[tied]] > index[columns[where]]
            active = active[np.flatnonzero(at_most & (self.more[positive] > 0))]
            if not len(active):
                break
        for counts, bins in ((self.shared_at_least, at_least), (self.shared_before, before)):
            torch.from_numpy(counts).index_add_(0, torch.from_numpy(bins), _ones(len(bins)))

    def negatives_above(self, n_positives):
        """Per positive ``j`` (c, width): negatives scored ``>= t_j``, and ranked before it."""
        rows = torch.arange(self.n_rows)
        first = self.row_start + rows + 1
        bins = (first[:, None] + torch.arange(self.width)).clamp_(max=self.n_bins - 1)
        last = (first + n_positives)[:, None]
        # Both counts of each bin, plus its clear negatives, summed over the row's bins.
        at_most = self.shared.add_(self.histogram[: self.n_bins])
        torch.cumsum(at_most, 1, out=at_most)
        below = at_most.index_select(1, bins.view(-1)).view(2, *bins.shape)
        return torch.sub(at_most.index_select(1, last.view(-1))[:, :, None], below, out=below)


def _count_true(mask):
    """The true entries of each column of a boolean ``mask`` (w, k), as int32 (k,)."""
    total = mask[0].astype(np.int32)
    for row in mask[1:]:
        total += row
    return total


def _run_starts(values):
    """The places where a run of equal entries of the sorted ``values`` starts."""
    starts = np.empty(len(values), dtype=bool)
    starts[:1] = True
    np.not_equal(values[1:], values[:-1], out=starts[1:])
    return np.flatnonzero(starts)


def _run_remainders(starts, n, out=None):
    """For each of ``n`` sorted entries whose runs of equal entries start at ``starts``, how
    many entries after it are equal to it (int64, into ``out`` if given)."""
    ends = np.empty(len(starts), dtype=np.int64)  # the last place of each run
    np.subtract(starts[1:], 1, out=ends[:-1])
    ends[-1:] = n - 1
    if out is None:
        out = np.empty(n, dtype=np.int64)
    out[:] = np.repeat(ends, np.diff(starts, append=n))
    out -= np.arange(n)
    return out


def _flat_at_least(values, threshold, masks):
    """``np.flatnonzero(values >= threshold)`` for a few hits among many ``values`` (1-D): the
    mask's words of 8 bytes holding a hit first, then the hits in those words only (numpy's
    ``flatnonzero`` takes about 0.7 ns per byte of mask, a word test an eighth of that).

    ``masks``: two bool work arrays of at least ``len(values) + 7`` and ``len(values) / 8 + 1``.
    """
    n = len(values)
    n_words = -(-n // 8)
    mask = masks[0][: 8 * n_words]
    mask[n:] = False
    np.greater_equal(values, threshold, out=mask[:n])
    words = mask.view(np.uint64)
    hit_words = masks[1][:n_words]
    np.not_equal(words, 0, out=hit_words)
    hit_words = np.flatnonzero(hit_words)
    hits = np.flatnonzero(words[hit_words].view(bool))  # 8 mask bytes per hit word
    return hit_words[hits >> 3] * 8 + (hits & 7)


def _compress(valid, values, padding, workspace, name):
    """The entries of ``values`` (torch, c x w) where ``valid`` (numpy, c * w), row by row,
    then ``padding`` zeros, in a work buffer ``name``."""
    n = int(np.count_nonzero(valid))
    out = workspace.get(name, (n + padding,), values.dtype, "cpu").numpy()
    np.compress(valid, values.numpy().reshape(-1), out=out[:n])
    out[n:] = 0
    return out


def numba_pays_off(n_items):
    """Whether a call ranking ``n_items`` items against each other should run the fused loop:
    when numba is allowed (``USE_NUMBA``) and the loop is loaded in this process already, or
    this call's pairs and those ranked by the torch operations before reach
    ``NUMBA_MIN_PAIRS`` (the pairs that repay loading it; until then, the call's pairs are
    counted)."""
    global _pairs_without_numba
    if not USE_NUMBA or f"{__package__}._tiled_kernel" in sys.modules:
        return USE_NUMBA
    pairs = _pairs_without_numba + n_items**2
    if pairs >= NUMBA_MIN_PAIRS:
        return True
    _pairs_without_numba = pairs
    return False


def _numba_kernels():
    """The module of the fused loops, or None when numba is not installed."""
    try:
        from . import _tiled_kernel  # noqa: PLC0415 (imports numba: on first use only)
    except ImportError:  # pragma: no cover - numba is optional
        return None
    return _tiled_kernel


_ONES = {}


def _ones(n, dtype=torch.int64):
    """A read-only tensor of ``n`` ones (one shared buffer per dtype, grown as needed)."""
    ones = _ONES.get(dtype)
    if ones is None or len(ones) < n:
        ones = _ONES[dtype] = torch.ones(
            max(n, 2 * len(ones if ones is not None else ())), dtype=dtype
        )
    return ones[:n]


def tiled_positive_statistics(
    class_scores, positive_columns, n_positives, tiles, column_index, workspace=None,
    use_numba=None,
):  # fmt: skip
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
    workspace : Workspace, default=None
        Work buffers kept from call to call (:class:`skrank.metrics._ranks.Workspace`; not
        shared between threads); None for fresh ones.
    use_numba : bool or None, default=None
        Run the fused loop (when numba is installed); None: ``USE_NUMBA``.

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
    order = stable_argsort_rows(scores)
    thresholds = scores.gather(1, order)
    columns = columns.gather(1, order)
    class_scores.scatter_(1, columns, -torch.inf)  # positives are not negatives (nor padding)
    workspace = workspace or Workspace()
    use_numba = USE_NUMBA if use_numba is None else use_numba
    grid = _Grid(thresholds, n_positives, column_index[columns], workspace, use_numba)

    buffers = {}  # work arrays by tile shape (most tiles share one)

    def count(tile_scores, index):
        shape = tile_scores.shape
        if grid.kernel is not None:
            grid.count(tile_scores, index, None, None)
            return
        work = buffers.get(shape)
        if work is None:
            work = buffers[shape] = (
                workspace.get("work", shape, torch.float32, "cpu"),
                workspace.get("cells", shape, torch.int32, "cpu"),
            )
        grid.count(tile_scores, index, *work)

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
    ranks = 1 + positives_before + negatives_before
    # Decreasing along each row's positives (a positive ranks after every item that ranks
    # before a higher one): reversed, they are sorted.
    reverse = (n_positives[:, None] - 1 - torch.arange(width)).clamp_(min=0)
    return auprc, ranks.gather(1, reverse).masked_fill_(~valid, n_items + 1)


def stable_argsort_rows(scores):
    """``torch.sort(scores, dim=1, stable=True).indices`` for finite or infinite float32
    ``scores`` (c, w) on the CPU, from one sort of int64 keys (numpy's, several times faster).

    The key of an entry is its score's bits, mapped to an order-preserving int32 (``-0.0``
    made ``+0.0`` first: they are equal scores), above its column: equal scores keep their
    column order.
    """
    bits = (scores + 0.0).numpy().view(np.int32)
    keys = (bits ^ ((bits >> 31) & 0x7FFFFFFF)).astype(np.int64) << 32
    keys |= np.arange(scores.shape[1])
    keys.sort(axis=1)
    return torch.from_numpy(keys & 0xFFFFFFFF)
