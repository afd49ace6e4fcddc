"""Exact retrieval metrics over embeddings: mean AUPRC (mAP), Recall@k, Precision@k, MAP@R,
R-precision and the mean precision-recall curve.

Every item is a query against all the others; its positives are the other items of its class.
Queries are processed in chunks, so memory is bounded by one (chunk, n) block of similarities.
Two backends: the numpy path (``device="numpy"``: float64 similarities, one sort per query) and
the torch path (``_torch_retrieval``: float32 similarities on a CPU or CUDA device, ranks counted
without sorting).
"""

import warnings

import numpy as np
import torch
from sklearn.utils.validation import check_array

from ..utils._dask import is_dask_array
from ..utils._docstrings import fill_docs
from ..utils._labels import encode_labels
from ..utils._memory import chunk_rows
from ..utils._progress import progress_bar
from ..utils._validation import naming_inputs, normalize_rows, power_of_two_scale
from ._search import top_k_indices
from ._torch_retrieval import resolve_metric_device, torch_retrieval_statistics
from ._validation import check_chunk_size, check_k, check_same_length

_METRICS = ("cosine", "euclidean")


def _gather_dask(X):
    """The rows of a dask array as one float64 ndarray, computed and checked block by block.

    The (n, d) embeddings are small next to the (n, n) similarities, which are then evaluated
    in query blocks like those of any other input.
    """
    if X.ndim != 2:
        raise ValueError(
            f"X must be 2-D (n_samples, n_features); got a dask array of shape {X.shape}."
        )
    X = X.rechunk({1: -1})
    blocks = [
        check_array(block.compute(), dtype=np.float64, ensure_min_samples=0, input_name="X")
        for block in X.to_delayed().ravel()
    ]
    return check_array(np.concatenate(blocks), ensure_min_samples=2, input_name="X")


def _check_embedding(X):
    if is_dask_array(X):
        return _gather_dask(X)
    with naming_inputs("X"):
        return check_array(X, dtype=np.float64, ensure_min_samples=2, input_name="X")


def _check_metric(metric):
    if callable(metric) or metric in _METRICS:
        return metric
    raise ValueError(
        f"metric must be one of {_METRICS} or a callable similarity(X_chunk, X); got {metric!r}."
    )


def _check_no_overflow(norms):
    # Similarities are bounded by sums of two norms: finite if each is below max / 4.
    if not np.all(norms < np.finfo(np.float64).max / 4):
        raise ValueError("X has values so large that its similarities overflow; rescale X.")


def similarity_terms(X, metric):
    """What the built-in metrics' similarities are computed from, checked, in float64.

    "cosine": ``(unit, None)``, the L2-normalised rows (norms scaled: no overflow or underflow
    at any scale); all-zero rows are an error. "euclidean": ``(rows, squared_norms)``, the rows
    rescaled by an exact power of two (the ranking of distances does not depend on the scale,
    and squared distances of data at 1e-300 or 1e300 stay representable) and their squared
    norms; the similarity is ``2 x.y - |x|^2 - |y|^2``.
    """
    if metric == "cosine":
        unit, zero = normalize_rows(X)
        if zero.any():
            raise ValueError(
                f"X has {np.sum(zero)} all-zero row(s) (first indices: "
                f"{np.flatnonzero(zero)[:5].tolist()}); their cosine similarity is undefined. "
                "Remove them or use metric='euclidean'."
            )
        return unit, None
    X = X * power_of_two_scale(X)
    with np.errstate(over="ignore"):
        squared_norms = np.einsum("ij,ij->i", X, X)
    _check_no_overflow(squared_norms)
    return X, squared_norms


def _similarity_function(X, metric):
    """Return ``similarity(rows) -> (len(rows), n)`` array of similarities of ``X[rows]`` to ``X``.

    "cosine" is the dot product of L2-normalised rows. "euclidean" returns the negative
    *squared* distance, which ranks items exactly as the negative distance does (the metrics
    here depend on the ranking only) and keeps integer inputs exact.
    """
    if not callable(metric):
        table, squared_norms = similarity_terms(X, metric)
        if squared_norms is None:
            return lambda rows: table[rows] @ table.T

        def negative_squared_distance(rows):
            block = table[rows] @ table.T
            block *= 2
            block -= squared_norms[rows, None]
            block -= squared_norms[None, :]
            return block

        return negative_squared_distance

    def user_similarity(rows):
        queries = X[rows]
        # A copy: the block is modified in place, and may be the callable's own array.
        block = check_array(
            metric(queries, X), dtype=np.float64, copy=True, input_name="metric(X_chunk, X)"
        )
        if block.shape != (len(queries), len(X)):
            raise ValueError(
                f"metric(X_chunk, X) must return an array of shape {(len(queries), len(X))}; "
                f"got {block.shape}."
            )
        return block

    return user_similarity


def similarity_matrix(X, metric):
    """All-pairs similarity ``(n, n)`` of the rows of ``X`` with a retrieval metric.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Embeddings.
    metric : {"cosine", "euclidean"} or callable
        As in :func:`mean_auprc_score`; "euclidean" gives negative squared distances of ``X``
        rescaled by a power of two (so that they neither overflow nor underflow; rankings, and
        so every metric of them, do not change).

    Returns
    -------
    similarity : ndarray of shape (n_samples, n_samples)
    """
    X = _check_embedding(X)
    return _similarity_function(X, _check_metric(metric))(slice(None))


def _precision_at_positives(similarity, positive):
    """Precision and recall of each query at the score of each of its positives.

    ``similarity`` (c, n) holds ``-inf`` at excluded entries (the query itself) and is sorted
    in place; ``positive`` (c, n) marks the positives. For a positive scored ``t``: precision =
    (# positives scored ``>= t``) / (# items scored ``>= t``), recall = (# positives scored
    ``>= t``) / (# positives), both counted by binary search in sorted rows.

    Returns
    -------
    precision, recall : ndarray of shape (c, width), or None when no row has a positive
        ``width`` is the largest number of positives of a row. Each row lists its positives by
        increasing score (so recall does not increase along it) after ``width - n_positives``
        padding entries of precision 0 and recall ``width / n_positives``.
    n_positives : ndarray of shape (c,)
    """
    n_positives = positive.sum(axis=1)
    width = int(n_positives.max(initial=0))
    if width == 0:
        return None, None, n_positives
    rows, columns = np.nonzero(positive)
    slot = np.arange(len(rows)) - np.repeat(np.cumsum(n_positives) - n_positives, n_positives)
    positive_scores = np.full((len(similarity), width), -np.inf)
    positive_scores[rows, slot] = similarity[rows, columns]
    positive_scores.sort(axis=1)
    similarity.sort(axis=1)
    sorted_all = torch.from_numpy(similarity)
    sorted_positive = torch.from_numpy(positive_scores)
    n_at_least = similarity.shape[1] - torch.searchsorted(sorted_all, sorted_positive).numpy()
    positives_at_least = width - torch.searchsorted(sorted_positive, sorted_positive).numpy()
    precision = positives_at_least / n_at_least
    precision[positive_scores == -np.inf] = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = positives_at_least / n_positives[:, None]
    return precision, recall, n_positives


def _average_precision_rows(precision, n_positives):
    """AUPRC of each row of :func:`_precision_at_positives` (NaN where a row has no positive)."""
    if precision is None:
        return np.full(len(n_positives), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return precision.sum(axis=1) / n_positives


def _interpolated_precision_rows(precision, recall, n_positives, recall_levels):
    """Interpolated precision of each row at each recall level (NaN where no positive).

    The interpolated precision at level ``r`` is the largest precision over the thresholds
    whose recall is at least ``r``; it is reached at the score of a positive.
    """
    result = np.full((len(n_positives), len(recall_levels)), np.nan)
    if precision is None:
        return result
    # Best precision among the positives up to each column: recall >= that column's recall.
    best_precision = np.maximum.accumulate(precision, axis=1)
    ascending_recall = torch.from_numpy(recall[:, ::-1].copy())
    levels = torch.from_numpy(np.tile(recall_levels, (len(recall), 1)))
    n_reaching = recall.shape[1] - torch.searchsorted(ascending_recall, levels).numpy()
    has_positive = n_positives > 0
    result[has_positive] = np.take_along_axis(
        best_precision[has_positive], n_reaching[has_positive] - 1, axis=1
    )
    return result


def _bytes_per_entry(codes):
    """Estimated bytes of work arrays per (query, item) entry of a chunk.

    Similarities (8) and the positive mask (1), plus, per positive entry, its coordinates,
    padded score, two search results, precision, recall and their running maximum (about 88
    bytes). The largest class bounds the fraction of positive entries.
    """
    largest_class_fraction = np.bincount(codes).max() / len(codes)
    return 16 + int(88 * largest_class_fraction)


def _retrieval_statistics(
    X, codes, *, ks, metric, chunk_size, average_precision, recall_levels=None, verbose=False
):
    """Per-query statistics of the exact retrieval, computed chunk by chunk.

    Returns
    -------
    n_positives : ndarray of shape (n,)
        Number of positives of each query (items of its class other than itself).
    query_auprc : ndarray of shape (n,) or None
        AUPRC of each query (NaN without positives); None unless ``average_precision``.
    positives_in_top_k : ndarray of shape (n, len(ks))
        Positives among the ``ks[j]`` most similar other items (ties by index).
    query_precision : ndarray of shape (n, len(recall_levels)) or None
        Interpolated precision of each query at each recall level (NaN without positives);
        None when ``recall_levels`` is None.
    """
    similarity = _similarity_function(X, metric)
    n_samples = len(X)
    chunk_size = chunk_size or chunk_rows(n_samples, _bytes_per_entry(codes) * n_samples)
    n_positives = np.bincount(codes)[codes] - 1
    query_auprc = np.empty(n_samples) if average_precision else None
    positives_in_top_k = np.zeros((n_samples, len(ks)), dtype=np.int64)
    query_precision = None
    if recall_levels is not None:
        query_precision = np.empty((n_samples, len(recall_levels)))
    for start in progress_bar(
        range(0, n_samples, chunk_size), desc="retrieval metrics", unit="block", disable=not verbose
    ):
        rows = slice(start, min(start + chunk_size, n_samples))
        block = np.ascontiguousarray(similarity(rows))
        queries = np.arange(rows.start, rows.stop)
        block[queries - start, queries] = -np.inf
        positive = codes[rows, None] == codes[None, :]
        positive[queries - start, queries] = False
        if len(ks):
            top = top_k_indices(block, int(ks.max()))
            hits = np.take_along_axis(positive, top, axis=1).cumsum(axis=1)
            positives_in_top_k[rows] = hits[:, ks - 1]
        if not average_precision and recall_levels is None:
            continue
        precision, recall, block_positives = _precision_at_positives(block, positive)
        if average_precision:
            query_auprc[rows] = _average_precision_rows(precision, block_positives)
        if recall_levels is not None:
            query_precision[rows] = _interpolated_precision_rows(
                precision, recall, block_positives, recall_levels
            )
    return n_positives, query_auprc, positives_in_top_k, query_precision


def _queries_with_positives(n_positives):
    has_positive = n_positives > 0
    n_without = int(np.sum(~has_positive))
    if n_without == len(n_positives):
        raise ValueError(
            "No query has a positive: every class has a single item. Retrieval metrics need "
            "at least one class with two or more items."
        )
    if n_without:
        warnings.warn(
            f"{n_without} of {len(n_positives)} queries have no positive (their class has a "
            "single item); they are excluded from the mean.",
            UserWarning,
            stacklevel=4,
        )
    return has_positive


def _check_retrieval_k(k, X):
    return check_k(k, len(X) - 1, candidates="other items (n_samples - 1)")


def _per_query_statistics(
    X, codes, ks, metric, chunk_size, average_precision, device, verbose, at_r
):
    """Per-query statistics from the backend that ``device`` names.

    Returns ``n_positives``, ``query_auprc`` (or None), ``positives_in_top_k`` and, when
    ``at_r``, ``r_precision`` and ``map_at_r`` (else None).
    """
    torch_device = resolve_metric_device(device)
    if torch_device is None and not at_r:
        n_positives, query_auprc, positives_in_top_k, _ = _retrieval_statistics(
            X,
            codes,
            ks=ks,
            metric=metric,
            chunk_size=chunk_size,
            average_precision=average_precision,
            verbose=verbose,
        )
        return n_positives, query_auprc, positives_in_top_k, None, None
    # MAP@R and R-precision have no numpy implementation: "numpy" runs the torch code on the
    # CPU with float64 similarities, the numpy path's values.
    n_positives, query_auprc, r_precision, map_at_r, positives_in_top_k = (
        torch_retrieval_statistics(
            X,
            codes,
            ks=ks,
            metric=metric,
            chunk_size=chunk_size,
            device=torch_device or torch.device("cpu"),
            verbose=verbose,
            # float64 (the numpy path's values) for "numpy" and a callable, else float32
            # tables built on the device from the same checked terms.
            numpy_similarity=(
                _similarity_function(X, metric)
                if torch_device is None or callable(metric)
                else None
            ),
            terms=None if torch_device is None or callable(metric) else similarity_terms(X, metric),
            dtype=torch.float64 if torch_device is None else None,
        )
    )
    return n_positives, query_auprc, positives_in_top_k, r_precision, map_at_r


def _query_statistics(X, y, ks, metric, chunk_size, average_precision, device, verbose, at_r):
    """Validate ``y``, ``metric`` and ``chunk_size``; the statistics of every query."""
    codes = encode_labels(y)[1]
    check_same_length((X, codes), ("X", "y"))
    return _per_query_statistics(
        X,
        codes,
        ks,
        _check_metric(metric),
        check_chunk_size(chunk_size),
        average_precision,
        device,
        verbose,
        at_r,
    )


def _retrieval_scores(
    X, y, ks, metric, chunk_size, average_precision, device="auto", verbose=False, at_r=False
):
    """Validate the rest of the input and return the scores dict of :func:`retrieval_scores`."""
    n_positives, query_auprc, positives_in_top_k, r_precision, map_at_r = _query_statistics(
        X, y, ks, metric, chunk_size, average_precision, device, verbose, at_r
    )
    has_positive = _queries_with_positives(n_positives)
    scores = {}
    if average_precision:
        scores["mean_auprc"] = float(np.mean(query_auprc[has_positive]))
    counts = positives_in_top_k[has_positive]
    for j, k_value in enumerate(ks.tolist()):
        scores[f"recall@{k_value}"] = float(np.mean(counts[:, j] > 0))
        scores[f"precision@{k_value}"] = float(np.mean(counts[:, j] / k_value))
    if at_r:
        scores["map@r"] = float(np.mean(map_at_r[has_positive]))
        scores["r_precision"] = float(np.mean(r_precision[has_positive]))
    return scores


_BACKEND_DOC = """
    Backends (``device``): the torch path (``"auto"``, ``"cpu"``, ``"cuda"``, a
    :class:`torch.device`) computes the similarities in float32 on the device, by blocks of
    queries, and counts each positive's rank without sorting the rows; ``"numpy"`` is the
    float64 path (one sort per query), several times slower. ``"auto"`` is CUDA when present,
    else the torch CPU path. Both apply the same tie rules to the similarities they compute, so
    they give identical results when these are equal (e.g. embeddings of small integers, or a
    callable ``metric``, whose float64 values both use); float32 similarities may tie or swap
    pairs of items whose float64 similarities differ by less than about ``1e-7``, which moves
    the metrics by about that much (``docs/user_guide/metrics.rst``).
    """
_EMBEDDINGS_AND_LABELS = [
    ("X", "array-like or dask array of shape (n_samples, n_features)", "Embeddings."),
    ("y", "array-like of shape (n_samples,)", "Class labels."),
]
_K = (
    "k",
    "int or list of int",
    "Number of nearest items, ``1 <= k <= n_samples - 1`` (larger raises ValueError).",
)
_METRIC_AND_CHUNK_SIZE = [
    ("metric", '{"cosine", "euclidean"} or callable', "Similarity used to rank the items."),
    (
        "chunk_size",
        "int",
        "Queries per chunk; None picks it from scikit-learn's ``working_memory``.",
    ),
]
_DEVICE_PARAMETERS = [
    (
        "device",
        '{"auto", "numpy", "cpu", "cuda"} or torch.device',
        "Backend and device, see above.",
    ),
    ("verbose", "bool", "Show a progress bar over the queries (tqdm)."),
]
#: Docstring parts of the retrieval metrics, written once (markers of :func:`fill_docs`).
_RETRIEVAL_DOCS = {
    "backends": _BACKEND_DOC,
    "device_parameters": _DEVICE_PARAMETERS,
    "parameters": {
        "Parameters": _EMBEDDINGS_AND_LABELS + _METRIC_AND_CHUNK_SIZE + _DEVICE_PARAMETERS
    },
    "parameters_with_k": {
        "Parameters": [*_EMBEDDINGS_AND_LABELS, _K, *_METRIC_AND_CHUNK_SIZE, *_DEVICE_PARAMETERS]
    },
}


@fill_docs(_RETRIEVAL_DOCS)
def retrieval_scores(
    X,
    y,
    *,
    k=(1,),
    metric="cosine",
    chunk_size=None,
    average_precision=True,
    at_r=False,
    device="auto",
    verbose=False,
):
    """Mean AUPRC, Recall@k, Precision@k (and MAP@R, R-precision) of a retrieval in one pass.

    Every item of ``X`` is a query against all the other items (itself excluded); its
    positives are the other items with the same label. Queries without a positive (a class of
    one item) are excluded from every mean and counted in a ``UserWarning``.

    Ranking conventions:

    - AUPRC of a query is the step-wise form of :func:`auprc_score`: tied similarities count
      fully (precision at a positive scored ``t`` is computed over all items scored ``>= t``),
      which is :func:`sklearn.metrics.average_precision_score`.
    - For the k nearest (and MAP@R, R-precision), ties are broken by index: among items of
      equal similarity the one that comes first in ``X`` ranks first (a stable descending
      sort).

    Exact (no approximate search), in chunks of ``chunk_size`` queries; memory is
    O(chunk_size * n_samples).
    {backends}

    Parameters
    ----------
    X : array-like or dask array of shape (n_samples, n_features)
        Embeddings; finite, at least two rows. A dask array is computed block by block into
        one (n_samples, n_features) array (the ``dask`` extra).
    y : array-like of shape (n_samples,)
        Class labels (any hashable values: ints, strings, ...).
    k : int or list of int, default=(1,)
        Cut-offs for Recall@k and Precision@k, each in ``[1, n_samples - 1]``; an empty
        tuple skips them.
    metric : {"cosine", "euclidean"} or callable, default="cosine"
        Similarity: cosine similarity, or smaller euclidean distance = more similar. A
        callable ``similarity(X_chunk, X)`` returns a ``(len(X_chunk), n_samples)`` array,
        higher = more similar; the diagonal entries it returns for the queries are ignored.
    chunk_size : int, default=None
        Number of queries per chunk. None chooses it so that one chunk's work arrays fit
        scikit-learn's ``working_memory`` (1024 MiB unless set by
        ``sklearn.config_context(working_memory=...)``).
    average_precision : bool, default=True
        Whether to compute the mean AUPRC (with ``device="numpy"``, the costly part: one sort
        per query).
    at_r : bool, default=False
        Whether to add ``"map@r"`` (:func:`map_at_r_score`) and ``"r_precision"``
        (:func:`r_precision_score`).
    {device_parameters}

    Returns
    -------
    scores : dict
        ``"mean_auprc"`` (if ``average_precision``), then ``"recall@k"`` and ``"precision@k"``
        for each ``k``, then ``"map@r"`` and ``"r_precision"`` (if ``at_r``), all floats.

    Raises
    ------
    MemoryError
        When one chunk of queries cannot fit in the free memory of the device.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import retrieval_scores
    >>> X = np.array([[1.0, 0.0], [0.9, 0.2], [0.0, 1.0], [0.3, 0.9]])
    >>> retrieval_scores(X, ["a", "a", "b", "b"], k=[1, 2])
    {'mean_auprc': 1.0, 'recall@1': 1.0, 'precision@1': 1.0, 'recall@2': 1.0, 'precision@2': 0.5}
    """
    X = _check_embedding(X)
    if isinstance(k, tuple | list) and len(k) == 0:
        ks = np.zeros(0, dtype=np.int64)
    else:
        ks = _check_retrieval_k(k, X)[0]
    return _retrieval_scores(X, y, ks, metric, chunk_size, average_precision, device, verbose, at_r)


_NO_K = np.zeros(0, dtype=np.int64)


@fill_docs(_RETRIEVAL_DOCS)
def mean_auprc_score(X, y, *, metric="cosine", chunk_size=None, device="auto", verbose=False):
    """Mean over queries of the AUPRC of their retrieval (mAP), computed exactly.

    Every item of ``X`` is a query against all the others (itself excluded); its positives
    are the other items of its class. The AUPRC of a query is that of :func:`auprc_score`
    (tied similarities count fully), i.e. :func:`sklearn.metrics.average_precision_score`.
    Queries without a positive are excluded from the mean and counted in a ``UserWarning``.
    See :func:`retrieval_scores` for the parameters.
    {backends}

    {parameters}

    Returns
    -------
    mean_auprc : float

    Raises
    ------
    ValueError
        On NaN/inf, fewer than two items, mismatched lengths, zero rows with "cosine", or
        when no query has a positive.
    MemoryError
        When one chunk of queries cannot fit in the free memory of the device.

    Examples
    --------
    >>> from skrank.metrics import mean_auprc_score
    >>> X = [[1.0, 0.0], [0.9, 0.2], [0.0, 1.0], [0.5, 0.5]]
    >>> round(mean_auprc_score(X, [0, 0, 1, 1]), 4)
    0.8333
    """
    X = _check_embedding(X)
    return _retrieval_scores(X, y, _NO_K, metric, chunk_size, True, device, verbose)["mean_auprc"]


@fill_docs(_RETRIEVAL_DOCS)
def query_auprc_scores(X, y, *, metric="cosine", chunk_size=None, device="auto", verbose=False):
    """The AUPRC of each query's retrieval (the terms of :func:`mean_auprc_score`).

    {parameters}

    Returns
    -------
    auprc : ndarray of shape (n_samples,)
        The AUPRC of each item as a query; NaN for an item without a positive (no warning).

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import query_auprc_scores
    >>> X = np.array([[1.0, 0.0], [0.9, 0.2], [0.0, 1.0], [0.5, 0.5]])
    >>> query_auprc_scores(X, [0, 0, 1, 1]).round(4).tolist()
    [1.0, 1.0, 1.0, 0.3333]
    """
    X = _check_embedding(X)
    return _query_statistics(X, y, _NO_K, metric, chunk_size, True, device, verbose, False)[1]


def _at_r_score(X, y, metric, chunk_size, device, verbose, name):
    X = _check_embedding(X)
    return _retrieval_scores(X, y, _NO_K, metric, chunk_size, False, device, verbose, True)[name]


@fill_docs(_RETRIEVAL_DOCS)
def map_at_r_score(X, y, *, metric="cosine", chunk_size=None, device="auto", verbose=False):
    """MAP@R of a retrieval, as pytorch-metric-learning's ``AccuracyCalculator`` defines it.

    For a query with ``R`` positives (the other items of its class), the items are ranked by
    decreasing similarity (ties by index, as :func:`recall_at_k_score`) and

    .. math:: \\mathrm{MAP@R} = \\frac{1}{R} \\sum_{i=1}^{R} P(i) \\, \\mathrm{rel}(i)

    where ``rel(i)`` is 1 when the item at rank ``i`` is a positive and ``P(i)`` the precision
    of the first ``i`` items (Musgrave et al., "A metric learning reality check", 2020).
    The mean is over queries with a positive (others: ``UserWarning``). Exact, in blocks.
    {backends}

    {parameters}

    Returns
    -------
    map_at_r : float

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import map_at_r_score
    >>> X = np.array([[0.0], [0.1], [1.0], [0.3], [1.1]])
    >>> map_at_r_score(X, [0, 0, 0, 1, 1], metric="euclidean")
    0.2
    """
    return _at_r_score(X, y, metric, chunk_size, device, verbose, "map@r")


@fill_docs(_RETRIEVAL_DOCS)
def r_precision_score(X, y, *, metric="cosine", chunk_size=None, device="auto", verbose=False):
    """R-precision of a retrieval: mean over queries of (positives among the R nearest) / R.

    ``R`` is the number of positives of the query (the other items of its class); ties by
    index, as :func:`recall_at_k_score`; as pytorch-metric-learning's ``AccuracyCalculator``
    defines it. Queries without a positive are excluded (``UserWarning``).
    {backends}

    {parameters}

    Returns
    -------
    r_precision : float

    Examples
    --------
    The fourth item's two nearest (cosine) tie; the rule ranks the one first in ``X`` (a "cat")
    first, so that query scores 1/2 and the others 1:

    >>> from skrank.metrics import r_precision_score
    >>> X = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.7, 0.7], [0.1, 0.9]]
    >>> r_precision_score(X, ["cat", "cat", "dog", "dog", "dog"])
    0.9
    """
    return _at_r_score(X, y, metric, chunk_size, device, verbose, "r_precision")


def _at_k_score(X, y, k, metric, chunk_size, name, device, verbose):
    X = _check_embedding(X)
    ks, is_scalar = _check_retrieval_k(k, X)
    scores = _retrieval_scores(X, y, ks, metric, chunk_size, False, device, verbose)
    values = np.array([scores[f"{name}@{k_value}"] for k_value in ks.tolist()])
    return float(values[0]) if is_scalar else values


@fill_docs(_RETRIEVAL_DOCS)
def recall_at_k_score(X, y, k=1, *, metric="cosine", chunk_size=None, device="auto", verbose=False):
    """Recall@k of a retrieval: fraction of queries with a positive among their k nearest.

    Every item of ``X`` is a query against all the others; its positives are the other items
    of its class. Ties in similarity are broken by index (the item that comes first in ``X``
    ranks first). Queries without a positive are excluded (``UserWarning``).
    {backends}

    {parameters_with_k}

    Returns
    -------
    recall : float or ndarray of shape (len(k),)
        A float for an int ``k``, else one value per ``k`` (all from one pass).

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import recall_at_k_score
    >>> X = np.array([[0.0], [1.0], [1.5], [3.0]])
    >>> recall_at_k_score(X, [0, 1, 0, 1], k=[1, 2], metric="euclidean")
    array([0.  , 0.75])
    """
    return _at_k_score(X, y, k, metric, chunk_size, "recall", device, verbose)


@fill_docs(_RETRIEVAL_DOCS)
def precision_at_k_score(
    X, y, k=1, *, metric="cosine", chunk_size=None, device="auto", verbose=False
):
    """Precision@k of a retrieval: mean over queries of (positives among the k nearest) / k.

    Same conventions as :func:`recall_at_k_score` (ties by index, queries without a positive
    excluded with a ``UserWarning``).
    {backends}

    {parameters_with_k}

    Returns
    -------
    precision : float or ndarray of shape (len(k),)

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import precision_at_k_score
    >>> X = np.array([[0.0], [0.1], [1.0], [1.1]])
    >>> precision_at_k_score(X, [0, 0, 1, 1], k=2, metric="euclidean")
    0.5
    """
    return _at_k_score(X, y, k, metric, chunk_size, "precision", device, verbose)


def _check_recall_levels(recall_levels):
    if recall_levels is None:
        return np.linspace(0.0, 1.0, 101)
    levels = np.asarray(recall_levels, dtype=np.float64)
    if levels.ndim != 1 or levels.size == 0:
        raise ValueError(
            f"recall_levels must be a non-empty 1-D array of numbers; got {recall_levels!r}."
        )
    if not np.all((levels >= 0) & (levels <= 1)):
        raise ValueError(f"recall_levels must lie in [0, 1]; got {recall_levels!r}.")
    return levels


def mean_precision_curve_and_auprc(X, y, *, metric, recall_levels, chunk_size):
    """:func:`mean_precision_recall_curve` and :func:`mean_auprc_score` from one pass.

    Returns
    -------
    precision, recall : ndarray of shape (n_levels,)
        As returned by :func:`mean_precision_recall_curve`.
    mean_auprc : float
    """
    X = _check_embedding(X)
    recall_levels = _check_recall_levels(recall_levels)
    codes = encode_labels(y)[1]
    check_same_length((X, codes), ("X", "y"))
    n_positives, query_auprc, _, query_precision = _retrieval_statistics(
        X,
        codes,
        ks=np.zeros(0, dtype=np.int64),
        metric=_check_metric(metric),
        chunk_size=check_chunk_size(chunk_size),
        average_precision=True,
        recall_levels=recall_levels,
    )
    has_positive = _queries_with_positives(n_positives)
    precision = query_precision[has_positive].mean(axis=0)
    return precision, recall_levels, float(query_auprc[has_positive].mean())


def mean_precision_recall_curve(X, y, *, metric="cosine", recall_levels=None, chunk_size=None):
    """Mean over retrieval queries of their interpolated precision at given recall levels.

    Every item of ``X`` is a query against all the others (itself excluded); its positives
    are the other items of its class. For one query, a threshold ``t`` retrieves the items
    scored ``>= t`` (tied similarities count fully, as in :func:`auprc_score`), with precision
    and recall as in :func:`sklearn.metrics.precision_recall_curve`. The *interpolated*
    precision at recall level ``r`` is the largest precision over the thresholds whose recall
    is at least ``r``: a non-increasing function of ``r``. The curve returned is its mean over
    the queries with at least one positive (the mean PR curves of the SOPRC paper's Figure 2);
    queries without a positive are excluded and counted in a ``UserWarning``.

    Computed exactly in chunks of queries, like :func:`mean_auprc_score`: memory is
    O(chunk_size * n_samples), time one sort per query.

    Read more in the :ref:`User Guide <metrics>`.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Embeddings; finite, at least two rows.
    y : array-like of shape (n_samples,)
        Class labels.
    metric : {"cosine", "euclidean"} or callable, default="cosine"
        Similarity used to rank the items, as in :func:`retrieval_scores`.
    recall_levels : array-like of shape (n_levels,), default=None
        Recall levels in [0, 1] at which to read the curves; None means the 101 levels
        ``0, 0.01, ..., 1``.
    chunk_size : int, default=None
        Queries per chunk; None picks it from scikit-learn's ``working_memory``.

    Returns
    -------
    precision : ndarray of shape (n_levels,)
        Mean interpolated precision at each recall level.
    recall : ndarray of shape (n_levels,)
        The recall levels.

    Raises
    ------
    ValueError
        On bad input as in :func:`mean_auprc_score`, or recall levels outside [0, 1].

    See Also
    --------
    skrank.plotting.PrecisionRecallDisplay : Plots these curves for several estimators.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import mean_precision_recall_curve
    >>> X = np.array([[1.0, 0.0], [0.9, 0.2], [0.0, 1.0], [0.5, 0.5]])
    >>> precision, recall = mean_precision_recall_curve(X, [0, 0, 1, 1], recall_levels=[0, 1])
    >>> precision.round(4).tolist()
    [0.8333, 0.8333]
    """
    precision, recall, _ = mean_precision_curve_and_auprc(
        X, y, metric=metric, recall_levels=recall_levels, chunk_size=chunk_size
    )
    return precision, recall
