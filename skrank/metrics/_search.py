"""Exact top-k selection with skrank's one tie rule, and top-k inner product search.

The tie rule, used by every metric and prediction of skrank: among equal scores the smaller
column (row, item or label index) ranks first, exactly as a stable descending sort orders them, so
every prefix ``[:, :j]`` of a top-k is the top-j under the same rule.

- :func:`top_k_indices`: the k best columns of each row of a score matrix.
- :func:`top_k_inner_products`: the k best rows of a large table by inner product with each
  query, walking the table and the queries in chunks (never the full score matrix), exact.
- :class:`FaissInnerProductIndex` and :class:`FaissIVFIndex`: the approximate alternatives
  (a faiss HNSW graph; faiss inverted lists over k-means cells, cheap to build for millions of
  rows).
"""

import numpy as np
import torch

from ..utils._memory import working_memory_bytes
from ..utils._optional import install_hint
from ..utils._validation import check_ndim
from ._validation import check_k


def _ordered_block_top_k(block, k):
    """Best ``k`` columns of each row of the tensor ``block``, ordered by (score desc, column asc).

    One ``torch.topk`` pass of ``k + 1`` candidates; only rows where a tie crosses position ``k``
    (tied columns outside the candidates may have a smaller index) are fully sorted.
    """
    n_candidates = min(k + 1, block.shape[1])
    values, columns = torch.topk(block, n_candidates, dim=1)
    columns, by_column = torch.sort(columns, dim=1)
    values = values.gather(1, by_column)
    values, by_value = torch.sort(values, dim=1, descending=True, stable=True)
    columns = columns.gather(1, by_value)
    if n_candidates > k:
        # A tie across position k may hide tied columns with a smaller index: sort those rows.
        tied = torch.nonzero(values[:, k - 1] == values[:, k]).squeeze(1)
        if tied.numel():
            full_values, full_columns = torch.sort(block[tied], dim=1, descending=True, stable=True)
            values[tied, :k] = full_values[:, :k]
            columns[tied, :k] = full_columns[:, :k]
    return values[:, :k], columns[:, :k]


def _weighted_sum_top_k(base, term, weights, k, n_candidates=64):
    """The best ``k`` columns of ``base + term * w`` for each weight ``w >= 0`` of ``weights``,
    as :func:`_ordered_block_top_k` orders them, the sums computed at candidate columns only.

    A row's candidates are its ``m = max(n_candidates, k)`` best columns of ``base`` and its
    ``m`` best of ``term``. Any other column has both parts at most the ``m``-th best ones, so
    its sum is at most ``base_m + term_m * w`` (rounding to nearest is monotone): where the
    ``k``-th best candidate exceeds that bound, the candidates hold the row's top ``k``, and the
    rows where it does not are summed in full. Exact, for two ``topk`` passes over the block
    whatever the number of weights, where a sum and a ``topk`` pass a weight would scan it
    ``2 len(weights)`` times.

    Parameters
    ----------
    base, term : torch.Tensor of shape (n_rows, n_columns)
        The two parts (finite).
    weights : sequence of float
        Non-negative weights of ``term``.
    k : int
        Columns per row, at most ``n_columns``.
    n_candidates : int, default=64
        Candidates taken from each part (at least ``k``).

    Returns
    -------
    top : list of (values, columns)
        One pair of (n_rows, k) tensors a weight: the sums ``base + term * w`` (computed as
        this expression computes them) and their columns.
    """
    n_columns = base.shape[1]
    m = max(n_candidates, k)
    if m >= n_columns:
        return [_ordered_block_top_k(base + term * weight, k) for weight in weights]
    base_best, base_columns = torch.topk(base, m, dim=1)
    term_best, term_columns = torch.topk(term, m, dim=1)
    # Increasing columns, each once: the candidates' ties then go to the smaller column.
    columns = torch.sort(torch.cat([base_columns, term_columns], dim=1), dim=1).values
    repeated = torch.zeros_like(columns, dtype=torch.bool)
    repeated[:, 1:] = columns[:, 1:] == columns[:, :-1]
    base_values, term_values = base.gather(1, columns), term.gather(1, columns)
    top = []
    for weight in weights:
        sums = (base_values + term_values * weight).masked_fill_(repeated, -torch.inf)
        values, positions = _ordered_block_top_k(sums, k)
        top_columns = columns.gather(1, positions)
        bound = base_best[:, m - 1] + term_best[:, m - 1] * weight
        unsettled = torch.nonzero(values[:, k - 1] <= bound).squeeze(1)
        if unsettled.numel():
            full = base[unsettled] + term[unsettled] * weight
            values[unsettled], top_columns[unsettled] = _ordered_block_top_k(full, k)
        top.append((values, top_columns))
    return top


def top_k_indices(scores, k):
    """Column indices of the ``k`` largest scores of each row, best first, ties by column.

    Parameters
    ----------
    scores : ndarray of shape (n_rows, n_columns)
        Scores; ``-inf`` is allowed (it marks an excluded column).
    k : int
        Number of columns to return, ``1 <= k <= n_columns``.

    Returns
    -------
    indices : ndarray of shape (n_rows, k), dtype int64

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import top_k_indices
    >>> top_k_indices(np.array([[0.5, 0.9, 0.5, 0.1]]), 3)
    array([[1, 0, 2]])
    """
    scores = np.asarray(scores)
    check_ndim(scores, 2, "(n_rows, n_columns)", input_name="scores")
    check_k(k, scores.shape[1], candidates="columns of scores")
    if scores.dtype.kind == "f" and np.isnan(scores).any():
        row = int(np.flatnonzero(np.isnan(scores).any(axis=1))[0])
        raise ValueError(
            f"scores contains NaN (first in row {row}): NaN has no rank. Replace it, e.g. with "
            "-inf to exclude a column."
        )
    indices = _ordered_block_top_k(torch.from_numpy(scores), k)[1]
    return np.ascontiguousarray(indices.numpy())


def top_k_inner_products(queries, table_chunk, n_rows, k, *, block_elements=None):
    """Exact top-k rows of a table by inner product with each query, in chunks.

    Parameters
    ----------
    queries : torch.Tensor of shape (n_queries, dim)
        Query vectors (on the device to compute on).
    table_chunk : callable
        ``table_chunk(start, stop)`` returns rows ``start:stop`` of the table as a tensor of
        shape (stop - start, dim) on the queries' device (e.g. normalising them on the fly).
    n_rows : int
        Number of rows of the table.
    k : int
        Number of rows to return per query, ``1 <= k <= n_rows``.
    block_elements : int or None, default=None
        Largest number of scores computed at once; sets the chunk sizes. None fits a block and
        its sorting work (about 16 bytes per score) in a quarter of scikit-learn's
        ``working_memory`` (256 MiB by default: larger blocks gained less than 5% in time on
        3,200 queries and 10^5 labels of 383 dimensions, and raised the peak memory of a fit).

    Returns
    -------
    scores : torch.Tensor of shape (n_queries, k)
        Inner products, decreasing along each row.
    indices : torch.Tensor of shape (n_queries, k), dtype int64
        Row indices; ties broken by the smaller index.

    Examples
    --------
    >>> import torch
    >>> from skrank.metrics import top_k_inner_products
    >>> table = torch.eye(4)
    >>> queries = torch.tensor([[0.0, 2.0, 1.0, 0.0]])
    >>> scores, indices = top_k_inner_products(queries, lambda a, b: table[a:b], 4, k=2)
    >>> indices.tolist(), scores.tolist()
    ([[1, 2]], [[2.0, 1.0]])
    """
    n_queries = queries.shape[0]
    if block_elements is None:
        block_elements = working_memory_bytes() // 64
    if not 1 <= k <= n_rows:
        raise ValueError(f"k={k} must lie in [1, {n_rows}] (the number of rows).")
    row_chunk = max(k, min(n_rows, block_elements // max(1, min(n_queries, 1024))))
    query_chunk = max(1, block_elements // row_chunk)
    best_scores = torch.full((n_queries, 0), -torch.inf, dtype=queries.dtype, device=queries.device)
    best_indices = torch.zeros((n_queries, 0), dtype=torch.long, device=queries.device)
    for start in range(0, n_rows, row_chunk):
        rows = table_chunk(start, min(start + row_chunk, n_rows))
        new_scores, new_indices = [], []
        for q_start in range(0, n_queries, query_chunk):
            q_stop = min(q_start + query_chunk, n_queries)
            block_scores, block_columns = _ordered_block_top_k(
                queries[q_start:q_stop] @ rows.T, min(k, rows.shape[0])
            )
            merged_scores = torch.cat([best_scores[q_start:q_stop], block_scores], dim=1)
            merged_indices = torch.cat([best_indices[q_start:q_stop], block_columns + start], dim=1)
            # Earlier chunks hold smaller indices: a stable sort keeps them first among ties.
            merged_scores, order = torch.sort(merged_scores, dim=1, descending=True, stable=True)
            new_scores.append(merged_scores[:, :k])
            new_indices.append(merged_indices.gather(1, order[:, :k]))
        best_scores, best_indices = torch.cat(new_scores), torch.cat(new_indices)
    return best_scores, best_indices


class FaissInnerProductIndex:
    """Approximate top-k inner product search with a faiss HNSW graph (the ``ann`` extra).

    Building the graph costs time once, and results are approximate (a true top-k row can be
    missed, more often for unstructured tables than for clustered ones). Measured on a 2-core CPU
    (``benchmarks/studies/results/bench_snm_search.json``), top-10 of 1,000 queries over
    ``10^5`` rows of dimension 128 (two runs): the exact chunked scan of
    :func:`top_k_inner_products` took 0.7-1 s;
    the graph took 7-48 s to build, then searched in 0.14-0.3 s with recall 0.996 on a clustered
    table but 0.4-1.5 s with recall 0.51 on a uniform one. The graph pays off when a very large,
    clustered table serves many queries.

    Parameters
    ----------
    table : ndarray of shape (n_rows, dim)
        Rows to search (copied into the index as float32).
    n_neighbors : int, default=32
        Graph degree ``M`` of HNSW.
    ef_search : int, default=128
        Breadth of the search; larger is more exact and slower (raised to ``k`` when smaller).
    """

    def __init__(self, table, n_neighbors=32, ef_search=128):
        try:
            import faiss
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"search='faiss' needs the faiss package: {install_hint('faiss-cpu', 'ann')}."
            ) from exc
        self._faiss = faiss
        table = np.ascontiguousarray(table, dtype=np.float32)
        self.index = faiss.IndexHNSWFlat(table.shape[1], n_neighbors, faiss.METRIC_INNER_PRODUCT)
        self.index.add(table)
        self.ef_search = ef_search

    def search(self, queries, k):
        """Scores and row indices (n_queries, k) of the (approximately) best rows."""
        self.index.hnsw.efSearch = max(self.ef_search, k)
        scores, indices = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return scores, indices.astype(np.int64)


class FaissIVFIndex:
    """Approximate top-k inner product search over faiss inverted lists (the ``ann`` extra).

    The rows are clustered by k-means into ``n_lists`` cells (10 iterations on a sample of
    at most 40 rows a cell); a query scans the rows of its ``n_probe`` best cells, exactly.
    Building costs the k-means and one pass over the rows (seconds for a million rows of
    dimension 128, where an HNSW graph takes minutes); a query costs about ``n_probe /
    n_lists`` of an exact scan, plus its comparison with the cell centroids. Results are
    approximate: a true top-k row in a cell not probed is missed. :meth:`calibrate` picks the
    smallest ``n_probe`` whose recall of the exact top-k on sample queries reaches a target.

    Parameters
    ----------
    table : ndarray or torch.Tensor of shape (n_rows, dim)
        Rows to search (copied into the index as float32).
    n_lists : int or None, default=None
        Number of cells; None: ``2 sqrt(n_rows)``, between 1 and ``n_rows / 40`` (faiss wants
        39 training rows a cell).
    n_probe : int, default=16
        Cells scanned per query.
    random_state : int, default=0
        Seed of the k-means and of its training sample.
    """

    def __init__(self, table, n_lists=None, n_probe=16, random_state=0):
        try:
            import faiss
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "An approximate search needs the faiss package: "
                f"{install_hint('faiss-cpu', 'ann')}."
            ) from exc
        table = np.ascontiguousarray(table, dtype=np.float32)
        n_rows, dim = table.shape
        if n_lists is None:
            n_lists = int(min(max(1, 2 * np.sqrt(n_rows)), max(1, n_rows // 40)))
        self.n_lists = int(n_lists)
        quantizer = faiss.IndexFlatIP(dim)
        self.index = faiss.IndexIVFFlat(quantizer, dim, self.n_lists, faiss.METRIC_INNER_PRODUCT)
        self.index.cp.seed = int(random_state)
        self.index.cp.niter = 10
        self.index.cp.max_points_per_centroid = 40
        rng = np.random.RandomState(random_state)
        n_train = min(n_rows, 40 * self.n_lists)
        sample = table if n_train == n_rows else table[np.sort(rng.choice(n_rows, n_train, False))]
        self.index.train(sample)
        self.index.add(table)
        self.n_probe = int(n_probe)

    def search(self, queries, k):
        """Scores and row indices (n_queries, k) of the (approximately) best rows, best first
        (a row index of -1 where fewer than ``k`` rows lie in the cells probed)."""
        self.index.nprobe = min(self.n_probe, self.n_lists)
        scores, indices = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return scores, indices.astype(np.int64)

    def calibrate(self, queries, exact, target=0.99, max_probe=None):
        """Set ``n_probe`` to the smallest power of two whose recall of ``exact`` reaches
        ``target`` (at most ``max_probe``, default a quarter of the cells; all of them give the
        exact result).

        Parameters
        ----------
        queries : ndarray of shape (n_queries, dim)
            Sample queries.
        exact : ndarray of shape (n_queries, k)
            Their exact top-k rows.
        target : float, default=0.99
            Recall wanted: the mean share of each query's exact top-k found.
        max_probe : int or None, default=None
            Largest ``n_probe`` tried.

        Returns
        -------
        recall : float
            The recall at the chosen ``n_probe`` (below ``target`` if even ``max_probe``
            does not reach it).
        """
        k = exact.shape[1]
        max_probe = max_probe or max(1, self.n_lists // 4)
        self.n_probe = 1
        while True:
            recall = overlap_recall(self.search(queries, k)[1], exact)
            if recall >= target or self.n_probe >= max_probe:
                return recall
            self.n_probe = min(2 * self.n_probe, max_probe)


def overlap_recall(found, exact):
    """Recall of an approximate top-k: the mean over rows of the share of ``exact[i]`` (the
    exact top-k indices of row ``i``) found in ``found[i]``."""
    found, exact = np.asarray(found), np.asarray(exact)
    hits = (found[:, :, None] == exact[:, None, :]).any(axis=1)
    return float(hits.mean())
