"""The torch backend of the retrieval metrics: blocks of queries on a device.

Queries are taken in blocks of consecutive items sized from scikit-learn's
``working_memory`` (each query's positives, the other items of its class, are read from one
list of the items grouped by class); each block's
similarities are computed on the device, in float32 for "cosine" and "euclidean" (the
user's float64 values for a callable), and reduced to per-query statistics by
:func:`skrank.metrics._ranks.positive_statistics`. On the CPU, float32 built-in metrics take
:func:`tiled_retrieval_statistics` instead (:mod:`skrank.metrics._tiled_ranks`: items grouped
by class, tiles that stay in the CPU caches, a fused numba loop when numba is installed).
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from ..utils._memory import available_host_bytes, chunk_rows, working_memory_bytes
from ..utils._progress import progress_bar
from ..utils._threads import torch_threads
from . import _ranks, _tiled_ranks
from ._ranks import Workspace, positive_statistics, rank_scores

CPU_BLOCK_QUERIES = 64  # queries ranked at once on the CPU
CPU_CHUNK_QUERIES = 1024  # queries per matrix product on the CPU
# torch's thread count is process-wide: evaluations that lower it run one at a time, so that
# concurrent calls (e.g. a threaded grid search) cannot restore each other's lowered value.
_THREAD_COUNT_LOCK = threading.Lock()
TILED_CPU = True  # float32 built-in metrics on the CPU: the tiled path (``_tiled_ranks``)


def resolve_metric_device(device):
    """``None`` for the numpy path (``device="numpy"``), else the :class:`torch.device`.

    ``"auto"`` is CUDA when available, else the torch CPU path (faster than the numpy path at
    every size measured, ``benchmarks/bench_metrics.py``).
    """
    if isinstance(device, str) and device == "numpy":
        return None
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    from ..nn._device import resolve_device  # noqa: PLC0415 (skrank.nn imports much more)

    try:
        return resolve_device(device)
    except ValueError as exc:
        raise ValueError(
            f"device={device!r} is not a device for the retrieval metrics: use 'auto', "
            "'numpy', 'cpu', 'cuda' or a torch.device. " + str(exc)
        ) from None


def _to_table(X, dtype, device):
    return torch.from_numpy(np.ascontiguousarray(X, dtype=dtype)).to(device)


def torch_similarity(device, *, terms=None, numpy_similarity=None):
    """``similarity(rows) -> (len(rows), n)`` tensor on ``device`` for ``rows`` a slice.

    With ``numpy_similarity`` (a callable metric, or float64 values wanted), its float64 values
    are computed on the host and moved to the device. Otherwise ``terms`` are the checked
    float64 terms of a built-in metric (:func:`~skrank.metrics._retrieval.similarity_terms`),
    multiplied on the device in float32: unit rows for "cosine", rows rescaled by a power of
    two and their squared norms for "euclidean" (``2 x.y - |x|^2 - |y|^2``).
    """
    if numpy_similarity is not None:
        return lambda rows: torch.from_numpy(numpy_similarity(rows)).to(device)
    rows_table, squared_norms = terms
    table = _to_table(rows_table, np.float32, device)
    if squared_norms is None:
        return lambda rows: table[rows] @ table.T
    squared_norms = _to_table(squared_norms, np.float32, device)

    def negative_squared_distance(rows):
        block = table[rows] @ table.T
        block.mul_(2)
        block.sub_(squared_norms[rows, None])
        block.sub_(squared_norms[None, :])
        return block

    return negative_squared_distance


def bytes_per_query(n_items, width, itemsize):
    """Work bytes of one query row: similarities and their grid copy (``2 * itemsize``), grid
    cells (8), cell histogram and flags (9), shared-cell flags (1), sort buffers of the rows
    that need one (``8``), and about 100 bytes per positive."""
    return (2 * itemsize + 26) * n_items + 100 * width


def _available_bytes(device):
    """Memory a block may use: free CUDA memory, or the host's available memory (or None)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return available_host_bytes()


def _does_not_fit(n_queries, n_items, n_bytes, device):
    return MemoryError(
        f"A block of {n_queries} queries x {n_items} items needs about {n_bytes / 2**20:.0f} MiB "
        f"of work memory, more than {device} has free. Pass a smaller chunk_size, or lower "
        "scikit-learn's working_memory (sklearn.set_config(working_memory=...), in MiB)."
    )


def check_block_fits(n_queries, n_items, n_bytes, device):
    """Raise a clear MemoryError when one block's work arrays cannot fit on ``device``."""
    available = _available_bytes(device)
    if available is not None and n_bytes > available:
        raise _does_not_fit(n_queries, n_items, n_bytes, device)


def torch_retrieval_statistics(
    X, codes, *, ks, metric, chunk_size, device, verbose, numpy_similarity, terms, dtype=None
):
    """Per-query statistics of the exact retrieval on ``device``, block by block.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
    codes : ndarray of shape (n,), int
        Class codes ``0 .. n_classes - 1``.
    ks : ndarray of int
        Cut-offs of Recall@k and Precision@k.
    numpy_similarity, terms : callable or None, tuple or None
        Where the similarities come from, as in :func:`torch_similarity` (one of them).
    dtype : torch.dtype, default=None
        Force the similarities to this dtype (float64 reproduces the numpy path's values).

    Returns
    -------
    n_positives : ndarray of shape (n,)
    query_auprc, r_precision, map_at_r : ndarray of shape (n,), NaN without a positive
    positives_in_top_k : ndarray of shape (n, len(ks))
    """
    n_items = len(X)
    sizes = np.bincount(codes)
    n_positives = sizes[codes] - 1
    if (
        TILED_CPU
        and device.type == "cpu"
        and numpy_similarity is None
        and dtype is None
        and sizes.max() * _ranks.SORT_FRACTION <= n_items
    ):
        return tiled_retrieval_statistics(
            terms, codes, ks=ks, chunk_size=chunk_size, device=device, verbose=verbose
        )
    similarity = torch_similarity(device, terms=terms, numpy_similarity=numpy_similarity)
    members = np.argsort(codes, kind="stable")  # the items of each class, contiguous
    starts = np.cumsum(sizes) - sizes
    itemsize = 8 if dtype == torch.float64 or callable(metric) else 4
    width = int(sizes.max())
    per_query = bytes_per_query(n_items, width, itemsize)
    # One matrix product per chunk; on the CPU the ranking runs on sub-blocks of a few
    # queries (measured faster: their work arrays stay in the caches), whose work arrays
    # are counted once.
    sub_block = CPU_BLOCK_QUERIES if device.type == "cpu" else None
    if chunk_size is None:
        if sub_block is None:
            chunk_size = chunk_rows(n_items, per_query)
        else:
            budget_left = working_memory_bytes() - sub_block * per_query
            chunk_size = min(max(budget_left, 0) // (itemsize * n_items), CPU_CHUNK_QUERIES)
    chunk_size = max(1, min(chunk_size, n_items))
    sub_block = min(sub_block or chunk_size, chunk_size)
    n_bytes = chunk_size * itemsize * n_items + sub_block * per_query
    check_block_fits(chunk_size, n_items, n_bytes, device)

    query_auprc = np.full(n_items, np.nan)
    r_precision = np.full(n_items, np.nan)
    map_at_r = np.full(n_items, np.nan)
    positives_in_top_k = np.zeros((n_items, len(ks)), dtype=np.int64)
    to_device = lambda array: torch.from_numpy(np.ascontiguousarray(array)).to(device)  # noqa: E731
    codes_t, sizes_t, starts_t, members_t = map(to_device, (codes, sizes, starts, members))
    place_in_class = np.empty(n_items, dtype=np.int64)
    place_in_class[members] = np.arange(n_items) - np.repeat(starts, sizes)
    place_t = to_device(place_in_class)
    ks_t = to_device(np.asarray(ks, dtype=np.int64))
    workspace = Workspace()
    bar = progress_bar(total=n_items, unit="query", desc="retrieval metrics", disable=not verbose)
    try:
        for start in range(0, n_items, chunk_size):
            rows = slice(start, min(start + chunk_size, n_items))
            chunk_scores = similarity(rows)
            if dtype is not None:
                chunk_scores = chunk_scores.to(dtype)
            for sub_start in range(rows.start, rows.stop, sub_block):
                sub_rows = slice(sub_start, min(sub_start + sub_block, rows.stop))
                block = np.arange(sub_rows.start, sub_rows.stop)[n_positives[sub_rows] > 0]
                if len(block):
                    scores = chunk_scores[sub_rows.start - start : sub_rows.stop - start]
                    if len(block) < sub_rows.stop - sub_rows.start:
                        scores = scores[to_device(block - sub_rows.start)]
                    statistics = _query_statistics(
                        scores,
                        to_device(block),
                        codes_t,
                        sizes_t,
                        starts_t,
                        members_t,
                        place_t,
                        ks_t,
                        workspace,
                    )
                    for output, values in zip(
                        (query_auprc, r_precision, map_at_r, positives_in_top_k),
                        statistics,
                        strict=True,
                    ):
                        output[block] = values.cpu().numpy()
                bar.update(sub_rows.stop - sub_rows.start)
            del chunk_scores
    except torch.OutOfMemoryError:
        raise _does_not_fit(chunk_size, n_items, n_bytes, device) from None
    finally:
        bar.close()
    return n_positives, query_auprc, r_precision, map_at_r, positives_in_top_k


def _query_statistics(scores, queries, codes, sizes, starts, members, place, ks, workspace):
    """AUPRC, R-precision, MAP@R and positives in the top k of a block of queries.

    ``scores`` (c, n) are the queries' similarities (their own entries are set to ``-inf``
    here, in place).
    """
    scores[torch.arange(len(queries), device=scores.device), queries] = -torch.inf
    query_codes = codes[queries]
    columns, n_positives = _positive_columns(
        place[queries], sizes[query_codes], starts[query_codes], members
    )
    auprc, ranks = positive_statistics(scores, columns, n_positives, workspace)
    in_top_k, r_precision, map_at_r = rank_scores(ranks, n_positives, ks)
    return auprc, r_precision, map_at_r, in_top_k


def _positive_columns(place_in_class, class_size, class_start, members):
    """Item indices of each query's positives (its class but itself), first in each row.

    ``members`` lists the items class by class; a query is item ``place_in_class`` of its
    class, which starts at ``class_start``. Returns the (c, w) columns (padding repeats a
    valid one) and the number of positives of each query.
    """
    width = int(class_size.max()) - 1
    slots = torch.arange(width, device=class_size.device)
    skip_self = (slots >= place_in_class[:, None]).to(slots.dtype)
    n_positives = class_size - 1
    slots = torch.minimum(slots + skip_self, n_positives[:, None])  # padding: the last member
    return members[class_start[:, None] + slots], n_positives


def tiled_retrieval_statistics(terms, codes, *, ks, chunk_size, device, verbose):
    """:func:`torch_retrieval_statistics` on the CPU, tile by tile (:mod:`._tiled_ranks`).

    The items are grouped by class; blocks of ``TILE_QUERIES`` queries (fewer with a smaller
    ``chunk_size``) take their classes' items first (one matrix product gives their positives'
    scores), then the other items in tiles of ``TILE_ITEMS``, each one matrix product whose
    result stays in the CPU caches while it is counted.
    """
    rows_table, squared_norms = terms
    n_items = len(codes)
    sizes = np.bincount(codes)
    members = np.argsort(codes, kind="stable")  # class by class, by increasing index
    sorted_codes = codes[members]
    class_start = (np.cumsum(sizes) - sizes)[sorted_codes]
    class_end = class_start + sizes[sorted_codes]
    table = torch.from_numpy(np.ascontiguousarray(rows_table[members], dtype=np.float32))
    norms = None
    if squared_norms is not None:
        norms = torch.from_numpy(np.ascontiguousarray(squared_norms[members], dtype=np.float32))
    members_t = torch.from_numpy(members)
    block_size = _tiled_ranks.TILE_QUERIES
    if chunk_size is not None:
        block_size = max(1, min(block_size, chunk_size))
    width = int(sizes.max()) - 1
    n_bytes = table.numel() * 4 + block_size * (
        4 * int(sizes.max()) * 3  # class tile, its scores by rank, keys
        + 4 * 2 * _tiled_ranks.CELLS_PER_POSITIVE * max(width, 64)  # lookup, counts
        # per positive: sort keys, scores, indices, the grid's tables, histograms, temporaries
        + 300 * max(width, 64)
        + 16 * _tiled_ranks.TILE_ITEMS  # tile, cells (then bins), work, mask
    )
    check_block_fits(block_size, n_items, n_bytes, device)

    def similarity(queries, start, stop, out=None):
        """Scores of the rows ``queries = (table rows, their squared norms)`` to items."""
        rows, row_norms = queries
        scores = torch.mm(rows, table[start:stop].T, out=out)
        if norms is not None:
            scores.mul_(2).sub_(row_norms).sub_(norms[None, start:stop])
        return scores

    def tiles(queries, skip_start, skip_stop, workspace):
        buffer = workspace.get(
            "tile", (len(queries[0]) * _tiled_ranks.TILE_ITEMS,), torch.float32, "cpu"
        )
        for first, last in ((0, skip_start), (skip_stop, n_items)):
            for start in range(first, last, _tiled_ranks.TILE_ITEMS):
                stop = min(start + _tiled_ranks.TILE_ITEMS, last)
                out = buffer[: len(queries[0]) * (stop - start)].view(-1, stop - start)
                yield similarity(queries, start, stop, out=out), members_t[start:stop]

    n_positives = sizes[codes] - 1
    query_auprc = np.full(n_items, np.nan)
    r_precision = np.full(n_items, np.nan)
    map_at_r = np.full(n_items, np.nan)
    positives_in_top_k = np.zeros((n_items, len(ks)), dtype=np.int64)
    ks_t = torch.from_numpy(np.asarray(ks, dtype=np.int64))

    workspaces = threading.local()  # one per thread
    use_numba = _tiled_ranks.numba_pays_off(n_items)

    def rank_block(block_start):
        block = np.arange(block_start, min(block_start + block_size, n_items))
        bar.update(len(block))
        block = block[sizes[sorted_codes[block]] > 1]
        if not len(block):
            return
        first, last = int(class_start[block].min()), int(class_end[block].max())
        queries = torch.from_numpy(block)
        rows = (table[queries], None if norms is None else norms[queries, None])
        class_scores = similarity(rows, first, last)
        class_scores[torch.arange(len(block)), queries - first] = -torch.inf
        starts = torch.from_numpy(class_start[block] - first)
        columns, block_positives = _positive_columns(
            queries - first - starts,
            torch.from_numpy(sizes[sorted_codes[block]]),
            starts,
            torch.arange(last - first),
        )
        workspace = getattr(workspaces, "workspace", None)
        if workspace is None:
            workspace = workspaces.workspace = Workspace()
        auprc, ranks = _tiled_ranks.tiled_positive_statistics(
            class_scores,
            columns,
            block_positives,
            tiles(rows, first, last, workspace),
            members_t[first:last],
            workspace,
            use_numba,
        )
        statistics = (auprc, *rank_scores(ranks, block_positives, ks_t))
        where = members[block]
        query_auprc[where] = statistics[0].numpy()
        positives_in_top_k[where] = statistics[1].numpy()
        r_precision[where] = statistics[2].numpy()
        map_at_r[where] = statistics[3].numpy()

    # torch's threads: one block per thread, each block on one thread (the fused loop and the
    # small products of a block gain nothing from more, and idle OpenMP threads spinning
    # beside the loop would slow it down).
    # While it runs, torch's intra-op thread count in this process is 1.
    bar = progress_bar(total=n_items, unit="query", desc="retrieval metrics", disable=not verbose)
    with bar, _THREAD_COUNT_LOCK, torch_threads(1) as n_threads:
        starts = range(0, n_items, block_size)
        if n_threads == 1:
            for block_start in starts:
                rank_block(block_start)
        else:
            with ThreadPoolExecutor(n_threads) as pool:
                for _ in pool.map(rank_block, starts):
                    pass
    return n_positives, query_auprc, r_precision, map_at_r, positives_in_top_k
