"""The torch backend of the retrieval metrics: blocks of queries on a device.

Queries are taken in blocks of consecutive items sized from scikit-learn's
``working_memory`` (each query's positives, the other items of its class, are read from one
list of the items grouped by class); each block's
similarities are computed on the device, in float32 for "cosine" and "euclidean" (the
user's float64 values for a callable), and reduced to per-query statistics by
:func:`skrank.metrics._ranks.positive_statistics`.
"""

import os

import numpy as np
import torch
from tqdm.auto import tqdm

from ..utils._memory import chunk_rows
from ..utils._validation import normalize_rows, power_of_two_scale
from ._ranks import Workspace, positive_statistics, rank_scores

CPU_BLOCK_QUERIES = 64


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


def torch_similarity(X, metric, device, numpy_similarity):
    """``similarity(rows) -> (len(rows), n)`` tensor on ``device`` for ``rows`` a slice.

    "cosine" normalises the rows in float64 and multiplies them in float32; "euclidean"
    gives ``2 x.y - |x|^2 - |y|^2`` in float32 (norms from float64); a callable is called on
    the host (``numpy_similarity``, its float64 values are kept).
    """
    if callable(metric):
        return lambda rows: torch.from_numpy(numpy_similarity(rows)).to(device)
    if metric == "cosine":
        unit, _ = normalize_rows(X)  # scaled norms: no overflow or underflow at any scale
        table = _to_table(unit, np.float32, device)
        return lambda rows: table[rows] @ table.T
    # Rankings do not depend on the scale: an exact power-of-two rescaling keeps X and its
    # squared norms within float32's range whatever the magnitude of the data.
    X = X * power_of_two_scale(X)
    table = _to_table(X, np.float32, device)
    squared_norms = _to_table(np.einsum("ij,ij->i", X, X), np.float32, device)

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
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


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
    X, codes, *, ks, metric, chunk_size, device, verbose, numpy_similarity, dtype=None
):
    """Per-query statistics of the exact retrieval on ``device``, block by block.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
    codes : ndarray of shape (n,), int
        Class codes ``0 .. n_classes - 1``.
    ks : ndarray of int
        Cut-offs of Recall@k and Precision@k.
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
    similarity = torch_similarity(X, metric, device, numpy_similarity)
    members = np.argsort(codes, kind="stable")  # the items of each class, contiguous
    starts = np.cumsum(sizes) - sizes
    itemsize = 8 if dtype == torch.float64 or callable(metric) else 4
    width = int(sizes.max())
    per_query = bytes_per_query(n_items, width, itemsize)
    if chunk_size is None:
        chunk_size = chunk_rows(n_items, per_query)
        if device.type == "cpu":
            # Measured faster on the CPU: a small block's work arrays stay in the caches.
            chunk_size = min(chunk_size, CPU_BLOCK_QUERIES)
    chunk_size = min(chunk_size, n_items)
    check_block_fits(chunk_size, n_items, chunk_size * per_query, device)

    query_auprc = np.full(n_items, np.nan)
    r_precision = np.full(n_items, np.nan)
    map_at_r = np.full(n_items, np.nan)
    positives_in_top_k = np.zeros((n_items, len(ks)), dtype=np.int64)
    to_device = lambda array: torch.from_numpy(np.ascontiguousarray(array)).to(device)  # noqa: E731
    codes_t, sizes_t, starts_t, members_t = map(to_device, (codes, sizes, starts, members))
    ks_t = to_device(np.asarray(ks, dtype=np.int64))
    workspace = Workspace()
    bar = tqdm(total=n_items, unit="query", desc="retrieval metrics", disable=not verbose)
    try:
        for start in range(0, n_items, chunk_size):
            rows = slice(start, min(start + chunk_size, n_items))
            block = np.arange(rows.start, rows.stop)[n_positives[rows] > 0]
            if len(block):
                scores = similarity(rows)
                if dtype is not None:
                    scores = scores.to(dtype)
                if len(block) < rows.stop - rows.start:
                    scores = scores[to_device(block - start)]
                queries = to_device(block)
                scores[torch.arange(len(block), device=device), queries] = -torch.inf
                class_size = sizes_t[codes_t[queries]]
                columns, n_block_positives = _positive_columns(
                    queries, class_size, starts_t[codes_t[queries]], members_t
                )
                auprc, ranks = positive_statistics(scores, columns, n_block_positives, workspace)
                del scores
                in_top_k, block_r_precision, block_map_at_r = rank_scores(
                    ranks, n_block_positives, ks_t
                )
                query_auprc[block] = auprc.cpu().numpy()
                r_precision[block] = block_r_precision.cpu().numpy()
                map_at_r[block] = block_map_at_r.cpu().numpy()
                positives_in_top_k[block] = in_top_k.cpu().numpy()
            bar.update(rows.stop - rows.start)
    except torch.OutOfMemoryError:
        raise _does_not_fit(chunk_size, n_items, chunk_size * per_query, device) from None
    finally:
        bar.close()
    return n_positives, query_auprc, r_precision, map_at_r, positives_in_top_k


def _positive_columns(rows, class_size, class_start, members):
    """Item indices of each query's positives (its class but itself), first in each row."""
    width = int(class_size.max())
    slots = torch.arange(width, device=rows.device)
    position = (class_start[:, None] + slots).clamp(max=len(members) - 1)
    columns = members[position]
    # Move the query itself and the slots beyond its class to the end of the row.
    invalid = (slots >= class_size[:, None]) | (columns == rows[:, None])
    order = torch.sort(invalid.to(torch.uint8), dim=1, stable=True).indices
    return columns.gather(1, order)[:, : width - 1], class_size - 1
