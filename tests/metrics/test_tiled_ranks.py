"""The ranks of positives counted tile by tile (``skrank.metrics._tiled_ranks``): against the
whole rows' ranks, torch's stable sort and loops over the definitions."""

import numpy as np
import pytest
import torch

from skrank.metrics import (
    mean_auprc_score,
)


def test_the_fused_loop_is_loaded_once_the_work_repays_it(monkeypatch):
    # Loading numba costs about 0.7 s once per process: calls run the torch operations until
    # their pairs (this call's included) reach NUMBA_MIN_PAIRS, unless the loop is loaded
    # already; USE_NUMBA=False forbids it whatever the work.
    import sys

    from skrank.metrics import _ranks, _tiled_ranks, _torch_retrieval

    module = "skrank.metrics._tiled_kernel"
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(_tiled_ranks, "NUMBA_MIN_PAIRS", 250)
    monkeypatch.setattr(_tiled_ranks, "_pairs_without_numba", 0)
    assert [_tiled_ranks.numba_pays_off(10) for _ in range(3)] == [False, False, True]
    assert _tiled_ranks._pairs_without_numba == 200
    assert _tiled_ranks.numba_pays_off(16)  # 256 pairs in one call
    monkeypatch.setattr(_tiled_ranks, "USE_NUMBA", False)
    assert not _tiled_ranks.numba_pays_off(10**6)
    monkeypatch.setattr(_tiled_ranks, "USE_NUMBA", True)
    monkeypatch.setitem(sys.modules, module, object())
    assert _tiled_ranks.numba_pays_off(1)
    # The retrieval metrics decide once per call, and every block follows.
    monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(_torch_retrieval, "TILED_CPU", True)
    monkeypatch.setattr(_ranks, "SORT_FRACTION", 0)
    loads = []
    monkeypatch.setattr(_tiled_ranks, "_numba_kernels", lambda: loads.append(1))  # torch path
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(150, 4)), rng.integers(3, size=150)
    monkeypatch.setattr(_tiled_ranks, "NUMBA_MIN_PAIRS", 2 * 150**2)
    monkeypatch.setattr(_tiled_ranks, "_pairs_without_numba", 0)
    expected = mean_auprc_score(X, y, metric="cosine", device="cpu")
    assert not loads
    assert mean_auprc_score(X, y, metric="cosine", device="cpu") == expected
    assert loads


@pytest.mark.parametrize(
    ("use_numba", "shared_width"),
    [(True, 4), (False, 1), (False, 4)],
    ids=["numba", "torch-1", "torch-4"],
)
@pytest.mark.parametrize("cells_per_positive", [1, 64])
def test_tiled_ranks_equal_whole_row_ranks(
    use_numba, shared_width, cells_per_positive, monkeypatch
):
    # Scores rounded to a few values (ties within and across tiles of uneven widths), items in
    # a shuffled order: the tile-by-tile counts equal those of the whole rows. Without numba,
    # negatives in cells of up to ``shared_width`` positives are compared in one vector step.

    from skrank.metrics import _ranks, _tiled_ranks

    monkeypatch.setattr(_tiled_ranks, "USE_NUMBA", use_numba)
    monkeypatch.setattr(_tiled_ranks, "SHARED_WIDTH", shared_width)
    monkeypatch.setattr(_tiled_ranks, "MIN_CELLS", 4)
    monkeypatch.setattr(_tiled_ranks, "CELLS_PER_POSITIVE", cells_per_positive)
    monkeypatch.setattr(_tiled_ranks, "TILE_ITEMS", 6)
    rng = np.random.default_rng(7)
    n_rows, n_class, n_items = 9, 17, 60
    scores = np.round(rng.normal(size=(n_rows, n_items)), 1).astype(np.float32)
    index = rng.permutation(n_items)  # item index of each column
    n_positives = rng.integers(1, n_class, size=n_rows)
    positive_columns = np.zeros((n_rows, n_class - 1), dtype=np.int64)
    for row in range(n_rows):  # positives among the class columns, by increasing item index
        chosen = rng.choice(n_class, size=n_positives[row], replace=False)
        chosen = chosen[np.argsort(index[chosen])]
        positive_columns[row, : len(chosen)] = chosen
        positive_columns[row, len(chosen) :] = chosen[0]
    class_scores = scores[:, :n_class].copy()
    is_positive = np.zeros((n_rows, n_class), dtype=bool)
    np.put_along_axis(is_positive, positive_columns, True, axis=1)
    class_scores[~is_positive] = -np.inf  # the query itself, and items of other classes...
    class_scores[:, ::5] = np.where(is_positive[:, ::5], class_scores[:, ::5], 0.5)  # ...or not
    tiles = [
        (torch.from_numpy(scores[:, start:stop].copy()), torch.from_numpy(index[start:stop]))
        for start, stop in ((17, 23), (23, 24), (24, 41), (41, 60))
    ]
    auprc, ranks = _tiled_ranks.tiled_positive_statistics(
        torch.from_numpy(class_scores.copy()),
        torch.from_numpy(positive_columns),
        torch.from_numpy(n_positives),
        iter(tiles),
        torch.from_numpy(index[:n_class]),
    )
    whole = np.empty_like(scores)  # the rows in item order
    whole[:, index] = np.concatenate([class_scores, scores[:, n_class:]], axis=1)
    expected_auprc, expected_ranks = _ranks.positive_statistics(
        torch.from_numpy(whole),
        torch.from_numpy(index[positive_columns]),
        torch.from_numpy(n_positives),
    )
    np.testing.assert_array_equal(ranks.numpy(), expected_ranks.numpy())
    np.testing.assert_allclose(auprc.numpy(), expected_auprc.numpy(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("shared_width", [1, 3, 4])
def test_grid_tables_without_numba_equal_their_definition(shared_width, monkeypatch):
    # Rows of tied, crowded and lone positives on a coarse grid: the lookup table (bin of the
    # positives in lower cells, + n_bins in a cell holding positives, + 2 n_bins beyond
    # SHARED_WIDTH of them) and the cell-mates' tables, against loops over their definition.

    from skrank.metrics import _tiled_ranks
    from skrank.metrics._ranks import Workspace

    monkeypatch.setattr(_tiled_ranks, "SHARED_WIDTH", shared_width)
    monkeypatch.setattr(_tiled_ranks, "MIN_CELLS", 8)
    monkeypatch.setattr(_tiled_ranks, "CELLS_PER_POSITIVE", 1)
    rng = np.random.default_rng(11)
    n_rows, width = 7, 12
    n_positives = rng.integers(1, width + 1, size=n_rows)
    n_positives[0], n_positives[1] = width, 1
    thresholds = np.sort(np.round(rng.normal(size=(n_rows, width)), 1), axis=1)
    thresholds[2, :5] = 0.5  # a crowded cell
    thresholds[np.arange(width) >= n_positives[:, None]] = np.inf
    thresholds = np.sort(thresholds, axis=1).astype(np.float32)
    index = rng.integers(0, 1000, size=(n_rows, width))
    grid = _tiled_ranks._Grid(
        torch.from_numpy(thresholds),
        torch.from_numpy(n_positives),
        torch.from_numpy(index),
        Workspace(),
        use_numba=False,
    )
    n_cells = len(grid.lookup) // n_rows - 1
    cells = grid.cells(torch.from_numpy(thresholds), torch.empty(n_rows, width), None).numpy()
    lookup = grid.lookup.numpy()
    start = 0
    for row in range(n_rows):
        row_cells = list(cells[row, : n_positives[row]])
        for flat in range(row * (n_cells + 1) + 1, (row + 1) * (n_cells + 1)):
            in_cell = row_cells.count(flat)
            expected = start + row + 1 + sum(cell < flat for cell in row_cells)
            if in_cell:
                expected += grid.n_bins * (1 + (in_cell > shared_width))
            assert lookup[flat] == expected, (row, flat)
        for j in range(n_positives[row]):
            if j and row_cells[j] == row_cells[j - 1]:
                continue  # only a cell's first positive's bin is looked up
            bin_ = start + row + 1 + j
            assert grid.positive_of_bin(np.array([bin_]))[0] == start + j
            mates = np.append(thresholds[row, j:], [np.inf] * shared_width)[:shared_width]
            np.testing.assert_array_equal(grid.cell_scores[:, bin_], mates)
            assert grid.more[start + j] == row_cells.count(row_cells[j]) - 1
        start += n_positives[row]


def test_stable_argsort_rows_equals_torch_stable_sort():
    # Ties, signed zeros (equal scores), infinities, subnormals and huge values.

    from skrank.metrics._tiled_ranks import stable_argsort_rows

    rng = np.random.default_rng(3)
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3e38, -3e38, 1.5, -1.5], dtype=np.float32
    )
    scores = rng.choice(special, size=(40, 33))
    scores[:20] = np.round(rng.normal(size=(20, 33)), 1)
    scores = torch.from_numpy(scores.astype(np.float32))
    expected = torch.sort(scores, dim=1, stable=True).indices
    np.testing.assert_array_equal(stable_argsort_rows(scores).numpy(), expected.numpy())


@pytest.mark.parametrize("width", [1, 2, 3, 4, 8])
def test_count_true(width):
    from skrank.metrics._tiled_ranks import _count_true

    mask = np.random.default_rng(width).random((width, 50)) < 0.5
    mask[:, 0], mask[:, 1] = True, False
    np.testing.assert_array_equal(_count_true(mask), mask.sum(axis=0))


@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 1001])
def test_flat_at_least_equals_flatnonzero(n):
    from skrank.metrics._tiled_ranks import _flat_at_least

    rng = np.random.default_rng(n)
    n_words = -(-n // 8)
    masks = np.empty(8 * n_words + 5, dtype=bool), np.empty(n_words, dtype=bool)
    for density in (0.0, 0.03, 0.5, 1.0):
        values = np.where(rng.random(n) < density, 10, rng.integers(0, 10, n)).astype(np.int32)
        values[-1:] = 10 if density > 0.4 else values[-1:]  # a hit in the last, partial word
        expected = np.flatnonzero(values >= 10)
        np.testing.assert_array_equal(_flat_at_least(values, 10, masks), expected)
        for mask in masks:  # stale hits past the values in the reused masks must not count
            mask[:] = True


@pytest.mark.parametrize(
    "values", [[1, 1, 1, 4, 5, 5, 9], [3], [2, 2], [0, 1, 2], [7, 7, 8, 8, 8, 8, 9, 9]]
)
def test_run_starts_and_remainders(values):
    from skrank.metrics._tiled_ranks import _run_remainders, _run_starts

    values = np.array(values)
    starts = _run_starts(values)
    n = len(values)
    expected_starts = [i for i in range(n) if i == 0 or values[i] != values[i - 1]]
    np.testing.assert_array_equal(starts, expected_starts)
    expected = [np.sum(values[i + 1 :] == values[i]) for i in range(n)]
    np.testing.assert_array_equal(_run_remainders(starts, n), expected)
    out = np.full(n + 3, -5)
    _run_remainders(starts, n, out=out[:n])
    np.testing.assert_array_equal(out, expected + [-5] * 3)
