"""The fused per-tile loop of :mod:`skrank.metrics._tiled_ranks`, compiled by numba.

One pass over a (queries x items) tile of float32 scores does what the torch fallback does in
about ten: each score goes to its cell (the same float32 operations, so the same cell as in
torch: a multiplication, a subtraction, a clamp, an addition and a truncation, each correctly
rounded, and no fused multiply-add: numba does not contract without ``fastmath``), the lookup
table gives its bin, and a negative sharing a cell with positives is compared with them at
once. The functions are None when numba is not installed.
"""

import numpy as np

try:
    import numba
except ImportError:  # pragma: no cover - numba is optional
    numba = None

count_tile = None

cells = None
build_lookup = None

if numba is not None:
    _jit = numba.njit(cache=True, nogil=True, boundscheck=False)

    @_jit
    def _cell(score, scale, shift, top, offset):
        """The flat cell of a score, with the operations (and float32 roundings) of torch's."""
        value = score * scale
        value = value - shift
        value = min(max(value, numba.float32(0.0)), top)  # NaN-free scores: a plain clamp
        return int(value + offset)

    @_jit
    def cells(scores, scale, shift, offsets, top, out):
        """Flat cells of ``scores`` (c, w) into ``out`` (c, w), int64."""
        for row in range(scores.shape[0]):
            for column in range(scores.shape[1]):
                out[row, column] = _cell(
                    scores[row, column], scale[row], shift[row], top, offsets[row]
                )

    @_jit
    def build_lookup(positive_cells, n_positives, n_cells, n_bins, lookup):
        """Flat cell -> bin of the row's positives in lower cells, plus ``n_bins`` in a cell
        holding positives (``positive_cells`` (c, w): the increasing flat cells of each row's
        first ``n_positives``); see ``_Grid``."""
        start = 0
        for row in range(positive_cells.shape[0]):
            base = start + row + 1
            first_cell = row * (n_cells + 1)
            lookup[first_cell] = base  # the spacer, never looked up
            j = 0
            count = n_positives[row]
            for cell in range(first_cell + 1, first_cell + n_cells + 1):
                lower = j
                while j < count and positive_cells[row, j] == cell:
                    j += 1
                lookup[cell] = base + lower + (n_bins if j > lower else 0)
            start += count

    @_jit
    def count_tile(  # noqa: PLR0913
        scores,
        index,
        scale,
        shift,
        offsets,
        top,
        lookup,
        n_bins,
        histogram,
        positive_scores,
        positive_index,
        more,
        shared_at_least,
        shared_before,
    ):
        """Add the negatives of ``scores`` (c, m) to the bins (see ``_Grid.count``).

        Every score adds one to its lookup bin (a negative in a cell holding positives to a bin
        ``>= n_bins``, never read), and the columns of those are listed without a branch; they
        are then compared with the positives of their cell.
        """
        n_rows, n_columns = scores.shape
        shared = np.empty(n_columns + 1, dtype=np.int64)
        for row in range(n_rows):
            row_scale = scale[row]
            row_shift = shift[row]
            row_offset = offsets[row]
            n_shared = 0
            for column in range(n_columns):
                bin_ = lookup[_cell(scores[row, column], row_scale, row_shift, top, row_offset)]
                histogram[bin_] += 1
                shared[n_shared] = column
                n_shared += bin_ >= n_bins
            for k in range(n_shared):
                column = shared[k]
                score = scores[row, column]
                first_bin = lookup[_cell(score, row_scale, row_shift, top, row_offset)] - n_bins
                positive = first_bin - row - 1  # the cell's first positive
                at_least = first_bin
                before = first_bin
                while True:  # the positives of the cell, by increasing (score, -index)
                    threshold = positive_scores[positive]
                    if threshold > score:
                        break
                    at_least += 1
                    if threshold < score or positive_index[positive] > index[column]:
                        before += 1
                    if more[positive] == 0:
                        break
                    positive += 1
                shared_at_least[at_least] += 1
                shared_before[before] += 1
