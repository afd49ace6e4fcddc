"""Exact retrieval metrics over embeddings: mean AUPRC (mAP), Recall@k, Precision@k and the
mean precision-recall curve.

Every item is a query against all the others; its positives are the other items of its class.
Queries are processed in chunks, so memory is bounded by one (chunk, n) block of similarities.
"""

import warnings

import numpy as np
import torch
from sklearn.utils.validation import check_array

from ..utils._labels import encode_labels
from ..utils._memory import chunk_rows
from ..utils._validation import naming_inputs, normalize_rows, power_of_two_scale
from ._search import top_k_indices
from ._validation import check_chunk_size, check_k, check_same_length

_METRICS = ("cosine", "euclidean")


def _check_embedding(X):
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


def _similarity_function(X, metric):
    """Return ``similarity(rows) -> (len(rows), n)`` array of similarities of ``X[rows]`` to ``X``.

    "cosine" is the dot product of L2-normalised rows. "euclidean" returns the negative
    *squared* distance, which ranks items exactly as the negative distance does (the metrics
    here depend on the ranking only) and keeps integer inputs exact.
    """
    if metric == "cosine":
        unit, zero = normalize_rows(X)  # scaled norms: no overflow or underflow at any scale
        if zero.any():
            raise ValueError(
                f"X has {np.sum(zero)} all-zero row(s) (first indices: "
                f"{np.flatnonzero(zero)[:5].tolist()}); their cosine similarity is undefined. "
                "Remove them or use metric='euclidean'."
            )
        return lambda rows: unit[rows] @ unit.T
    if metric == "euclidean":
        # The ranking of distances does not depend on the scale: an exact power-of-two
        # rescaling keeps squared distances of data at 1e-300 or 1e300 from under/overflowing.
        X = X * power_of_two_scale(X)
        with np.errstate(over="ignore"):
            squared_norms = np.einsum("ij,ij->i", X, X)
        _check_no_overflow(squared_norms)

        def negative_squared_distance(rows):
            block = X[rows] @ X.T
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
    X, codes, *, ks, metric, chunk_size, average_precision, recall_levels=None
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
    for start in range(0, n_samples, chunk_size):
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


def _retrieval_scores(X, y, ks, metric, chunk_size, average_precision):
    """Validate the rest of the input and return the scores dict of :func:`retrieval_scores`."""
    codes = encode_labels(y)[1]
    check_same_length((X, codes), ("X", "y"))
    n_positives, query_auprc, positives_in_top_k, _ = _retrieval_statistics(
        X,
        codes,
        ks=ks,
        metric=_check_metric(metric),
        chunk_size=check_chunk_size(chunk_size),
        average_precision=average_precision,
    )
    has_positive = _queries_with_positives(n_positives)
    scores = {}
    if average_precision:
        scores["mean_auprc"] = float(np.mean(query_auprc[has_positive]))
    counts = positives_in_top_k[has_positive]
    for j, k_value in enumerate(ks.tolist()):
        scores[f"recall@{k_value}"] = float(np.mean(counts[:, j] > 0))
        scores[f"precision@{k_value}"] = float(np.mean(counts[:, j] / k_value))
    return scores


def retrieval_scores(X, y, *, k=(1,), metric="cosine", chunk_size=None, average_precision=True):
    """Mean AUPRC, Recall@k and Precision@k of a retrieval in one pass over the data.

    Every item of ``X`` is a query against all the other items (itself excluded); its
    positives are the other items with the same label. Queries without a positive (a class of
    one item) are excluded from every mean and counted in a ``UserWarning``.

    Ranking conventions:

    - AUPRC of a query is the step-wise form of :func:`auprc_score`: tied similarities count
      fully (precision at a positive scored ``t`` is computed over all items scored ``>= t``).
    - For the k nearest, ties are broken by index: among items of equal similarity the one
      that comes first in ``X`` ranks first (a stable descending sort).

    Similarities are computed in float64, exactly (no approximate search), in chunks of
    ``chunk_size`` queries; memory is O(chunk_size * n_samples).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Embeddings; finite, at least two rows.
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
        Whether to compute the mean AUPRC (the costly part: one sort per query).

    Returns
    -------
    scores : dict
        ``"mean_auprc"`` (if ``average_precision``), then ``"recall@k"`` and ``"precision@k"``
        for each ``k``, all floats.

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
    return _retrieval_scores(X, y, ks, metric, chunk_size, average_precision)


def mean_auprc_score(X, y, *, metric="cosine", chunk_size=None):
    """Mean over queries of the AUPRC of their retrieval (mAP), computed exactly.

    Every item of ``X`` is a query against all the others (itself excluded); its positives
    are the other items of its class. The AUPRC of a query is that of :func:`auprc_score`
    (tied similarities count fully). Queries without a positive are excluded from the mean
    and counted in a ``UserWarning``. See :func:`retrieval_scores` for the parameters.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Embeddings.
    y : array-like of shape (n_samples,)
        Class labels.
    metric : {"cosine", "euclidean"} or callable, default="cosine"
        Similarity used to rank the items.
    chunk_size : int, default=None
        Queries per chunk; None picks it from scikit-learn's ``working_memory``.

    Returns
    -------
    mean_auprc : float

    Raises
    ------
    ValueError
        On NaN/inf, fewer than two items, mismatched lengths, zero rows with "cosine", or
        when no query has a positive.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import mean_auprc_score
    >>> X = np.array([[1.0, 0.0], [0.9, 0.2], [0.0, 1.0], [0.5, 0.5]])
    >>> round(mean_auprc_score(X, [0, 0, 1, 1]), 4)
    0.8333
    """
    X = _check_embedding(X)
    no_k = np.zeros(0, dtype=np.int64)
    return _retrieval_scores(X, y, no_k, metric, chunk_size, True)["mean_auprc"]


def _at_k_score(X, y, k, metric, chunk_size, name):
    X = _check_embedding(X)
    ks, is_scalar = _check_retrieval_k(k, X)
    scores = _retrieval_scores(X, y, ks, metric, chunk_size, False)
    values = np.array([scores[f"{name}@{k_value}"] for k_value in ks.tolist()])
    return float(values[0]) if is_scalar else values


def recall_at_k_score(X, y, k=1, *, metric="cosine", chunk_size=None):
    """Recall@k of a retrieval: fraction of queries with a positive among their k nearest.

    Every item of ``X`` is a query against all the others; its positives are the other items
    of its class. Ties in similarity are broken by index (the item that comes first in ``X``
    ranks first). Queries without a positive are excluded (``UserWarning``).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Embeddings.
    y : array-like of shape (n_samples,)
        Class labels.
    k : int or list of int, default=1
        Number of nearest items, ``1 <= k <= n_samples - 1`` (larger raises ValueError).
    metric : {"cosine", "euclidean"} or callable, default="cosine"
        Similarity used to rank the items.
    chunk_size : int, default=None
        Queries per chunk; None picks it from scikit-learn's ``working_memory``.

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
    return _at_k_score(X, y, k, metric, chunk_size, "recall")


def precision_at_k_score(X, y, k=1, *, metric="cosine", chunk_size=None):
    """Precision@k of a retrieval: mean over queries of (positives among the k nearest) / k.

    Same conventions as :func:`recall_at_k_score` (ties by index, queries without a positive
    excluded with a ``UserWarning``).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Embeddings.
    y : array-like of shape (n_samples,)
        Class labels.
    k : int or list of int, default=1
        Number of nearest items, ``1 <= k <= n_samples - 1`` (larger raises ValueError).
    metric : {"cosine", "euclidean"} or callable, default="cosine"
        Similarity used to rank the items.
    chunk_size : int, default=None
        Queries per chunk; None picks it from scikit-learn's ``working_memory``.

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
    return _at_k_score(X, y, k, metric, chunk_size, "precision")


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
