"""Extreme-classification label metrics: nDCG@k and propensity-scored Precision@k.

Conventions of the Extreme Classification Repository (Bhatia, Dahiya, Jain, Kar, Mittal,
Prabhu & Varma) and of Jain, Prabhu & Varma, "Extreme Multi-label Loss Functions for
Recommendation, Tagging, Ranking & Other Missing Label Applications", KDD 2016:

* relevance is binary (a label is true or not), examples without a true label are excluded
  (with a ``UserWarning``, as by the other label metrics of skrank), and ties in the scores are
  broken by column index, the smaller first;
* ``nDCG@k = DCG@k / IDCG@k`` with ``DCG@k = sum_{r <= k} y_(r) / log2(r + 1)`` over the ``k``
  best-scored labels and ``IDCG@k = sum_{r <= min(k, |y|)} 1 / log2(r + 1)``, the DCG of a
  ranking that puts the true labels first; averaged over examples;
* ``PSP@k`` weighs each true label ``l`` found among the ``k`` best by its inverse propensity
  ``1 / p_l`` (rare labels, more often missing from the annotations, count more):
  ``(1/k) sum_{r <= k} y_(r) / p_(r)``, averaged over examples, divided (``normalize=True``,
  the repository's reported figure) by the same mean for the best achievable ranking, each
  example's true labels sorted by decreasing ``1 / p_l``. The propensities are
  ``p_l = 1 / (1 + C (N_l + B) ** -A)``, ``C = (log N - 1) (B + 1) ** A``, from the label
  counts ``N_l`` of a training set of ``N`` examples (:func:`label_propensities`).
"""

import numbers

import numpy as np
from scipy import sparse
from sklearn.utils.validation import check_array

from ..utils._docstrings import fill_docs
from ..utils._labels import values_outside_zero_one
from ..utils._validation import canonical_csr
from ._labels import (
    TOP_K_LABEL_DOCS,
    check_top_k_labels,
    mean_top_k_scores,
    top_k_hits,
)

__all__ = ["label_propensities", "top_k_label_scores", "top_k_ndcg_score", "top_k_psp_score"]


def label_propensities(y, *, A=0.55, B=1.5):
    """Propensity ``p_l`` of each label being annotated when relevant (Jain et al., 2016).

    ``p_l = 1 / (1 + C (N_l + B) ** -A)`` with ``C = (log N - 1) (B + 1) ** A``, ``N`` the number
    of examples and ``N_l`` the number of examples of label ``l``. The defaults ``A = 0.55``,
    ``B = 1.5`` are the Extreme Classification Repository's for most data sets (it uses
    ``A = 0.6, B = 2.6`` for Amazon and ``A = 0.5, B = 0.4`` for Wikipedia data).

    Parameters
    ----------
    y : array-like or sparse matrix of shape (n_samples, n_labels)
        Multilabel 0/1 indicator of the (training) examples.
    A : float, default=0.55
        Exponent of the model (positive, finite).
    B : float, default=1.5
        Offset of the model (positive, finite).

    Returns
    -------
    propensities : ndarray of shape (n_labels,)
        In ``(0, 1)``; frequent labels get propensities close to 1.

    Raises
    ------
    ValueError
        For fewer than 3 examples (the model is defined for ``N > e``), or values other than
        0 and 1 in ``y``.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.metrics import label_propensities
    >>> y = np.zeros((1000, 3), dtype=int)
    >>> y[:500, 0] = 1; y[:5, 1] = 1
    >>> label_propensities(y).round(3)
    array([0.758, 0.223, 0.113])
    """
    for name, value in (("A", A), ("B", B)):
        if not (isinstance(value, numbers.Real) and 0 < value < np.inf):
            raise ValueError(
                f"{name} must be a positive finite number; got {name}={value!r} (the defaults "
                "are A=0.55, B=1.5)."
            )
    y = canonical_csr(y)
    n_samples = y.shape[0]
    if n_samples < 3:
        # C = (log N - 1) (B + 1) ** A is not positive below: propensities above 1, or inf.
        raise ValueError(
            f"label_propensities needs at least 3 examples (the model's C = (log N - 1) "
            f"(B + 1) ** A is positive only for N > e); got {n_samples}."
        )
    values = values_outside_zero_one(y)
    if values is not None:
        raise ValueError(
            f"y must be a multilabel indicator matrix of 0s and 1s; it holds {values}."
        )
    counts = np.asarray((y != 0).sum(axis=0), dtype=np.float64).ravel()
    c = (np.log(n_samples) - 1.0) * (B + 1.0) ** A
    return 1.0 / (1.0 + c * (counts + B) ** -A)


def _discounts(k):
    return 1.0 / np.log2(np.arange(2, k + 2))


def ndcg_from_hits(hits, n_true, ks):
    """Mean nDCG@k for each ``k`` in ``ks`` from :func:`~skrank.metrics._labels.top_k_hits`."""
    has_label = n_true > 0
    mean_top_k_scores(hits[:, :1], n_true, np.array([1]), "precision")  # warns, or raises
    hits, n_true = hits[has_label], n_true[has_label]
    discounts = _discounts(hits.shape[1])
    dcg = np.cumsum(hits * discounts, axis=1)[:, ks - 1]
    ideal = np.concatenate([[0.0], np.cumsum(discounts)])
    idcg = ideal[np.minimum(n_true[:, None], ks[None, :])]
    return np.mean(dcg / idcg, axis=0)


def psp_from_top(targets, top_k, ks, propensities, normalize=True):
    """Mean PSP@k for each ``k`` in ``ks`` from the top-k columns ``top_k`` (best first)."""
    hits, n_true = top_k_hits(targets, top_k)
    has_label = n_true > 0
    mean_top_k_scores(hits[:, :1], n_true, np.array([1]), "precision")  # warns, or raises
    inverse = 1.0 / np.asarray(propensities, dtype=np.float64)
    weighted = np.cumsum(hits * inverse[top_k], axis=1)[has_label][:, ks - 1] / ks
    result = weighted.mean(axis=0)
    if not normalize:
        return result
    indicator = _indicator(targets, len(inverse))[has_label]
    best = np.zeros((indicator.shape[0], int(ks.max())))
    for row in range(indicator.shape[0]):  # each example's true labels, rarest first
        start, stop = indicator.indptr[row], indicator.indptr[row + 1]
        values = np.sort(inverse[indicator.indices[start:stop]])[::-1][: best.shape[1]]
        best[row, : values.size] = values
    ideal = (np.cumsum(best, axis=1)[:, ks - 1] / ks).mean(axis=0)
    return result / ideal


def _indicator(targets, n_labels):
    if targets.ndim == 1:
        n = targets.shape[0]
        return sparse.csr_matrix(
            (np.ones(n), targets, np.arange(n + 1)), shape=(n, n_labels), dtype=np.float64
        )
    return canonical_csr(targets, dtype=np.float64, drop_zeros=True)


@fill_docs(TOP_K_LABEL_DOCS)
def top_k_ndcg_score(y_true, y_score, k=1, *, labels=None):
    """nDCG@k over labels with binary relevance (the extreme-classification convention).

    ``DCG@k / IDCG@k`` per example, averaged: see the module notes. With binary relevance it
    equals :func:`sklearn.metrics.ndcg_score` (``ignore_ties=True``) when the scores have no
    ties and every example has a true label; it differs in that examples without a true label
    are excluded here (sklearn scores them 0) and ties are broken by column index (sklearn,
    by default, averages over tied orders).

    {sections}

    Examples
    --------
    A sparse indicator matrix of true labels (never densified):

    >>> from scipy.sparse import csr_matrix
    >>> from skrank.metrics import top_k_ndcg_score
    >>> y_true = csr_matrix([[1, 0, 1], [0, 1, 0]])
    >>> top_k_ndcg_score(y_true, [[0.9, 0.5, 0.1], [0.2, 0.3, 0.8]], k=[1, 3]).round(3)
    array([0.5  , 0.775])
    """
    targets, top, ks, is_scalar, _ = check_top_k_labels(y_true, y_score, k, labels)
    scores = ndcg_from_hits(*top_k_hits(targets, top), ks)
    return float(scores[0]) if is_scalar else scores


@fill_docs(TOP_K_LABEL_DOCS)
def top_k_psp_score(y_true, y_score, k=1, *, propensities, labels=None, normalize=True):
    """Propensity-scored Precision@k (PSP@k, Jain et al., 2016).

    See the module notes; compute ``propensities`` on the training labels with
    :func:`label_propensities`.

    Parameters
    ----------
    {inputs}
    propensities : array-like of shape (n_labels,)
        Propensity of each label, in ``(0, 1]``.
    {labels}
    normalize : bool, default=True
        Divide by the PSP@k of the best achievable ranking (the repository's figure, in
        ``[0, 1]``); False gives the raw mean of ``(1/k) sum_r y_(r) / p_(r)``.

    {returns}

    Examples
    --------
    Propensities from the training labels; the second example ranks its more frequent true
    label first, which the propensity-scored precision counts a little below the best order:

    >>> from skrank.metrics import label_propensities, top_k_psp_score
    >>> propensities = label_propensities([[1, 0, 1], [1, 0, 0], [1, 1, 0], [0, 0, 1]])
    >>> propensities.round(3)
    array([0.782, 0.721, 0.757])
    >>> y_score = [[0.2, 0.9, 0.1], [0.8, 0.1, 0.3]]
    >>> psp = top_k_psp_score([[0, 1, 0], [1, 0, 1]], y_score, k=[1, 2], propensities=propensities)
    >>> psp.round(3)
    array([0.985, 1.   ])
    """
    targets, top, ks, is_scalar, n_labels = check_top_k_labels(y_true, y_score, k, labels)
    propensities = np.asarray(propensities, dtype=np.float64)
    if propensities.shape != (n_labels,):
        raise ValueError(
            f"propensities must have one entry per label ({n_labels}); got shape "
            f"{propensities.shape}."
        )
    if not np.all((propensities > 0) & (propensities <= 1)):
        raise ValueError("propensities must lie in (0, 1]; use label_propensities(y_train).")
    scores = psp_from_top(targets, top, ks, propensities, normalize)
    return float(scores[0]) if is_scalar else scores


def top_k_label_scores(y_true, top_k, k=(1, 3, 5), *, propensities=None):
    """Precision@k, Recall@k, nDCG@k and PSP@k of ranked labels, without a score matrix.

    The metrics of :func:`~skrank.metrics.top_k_precision_score`,
    :func:`~skrank.metrics.top_k_recall_score`, :func:`top_k_ndcg_score` and
    :func:`top_k_psp_score` (normalised), computed from each example's best labels as a ranker
    returns them (e.g. :meth:`SNMClassifier.predict_top_k <skrank.SNMClassifier.predict_top_k>`
    of an indicator fit, or a peer library's top-k lists), never from an ``n x K`` matrix.
    Examples without a true label are excluded with a ``UserWarning``.

    Parameters
    ----------
    y_true : array-like or sparse matrix of shape (n_samples, n_labels)
        Indicator matrix of the true labels (a sparse one is never densified).
    top_k : array-like of int of shape (n_samples, m)
        Column indices of each example's best labels, best first; ``-1`` where the ranker gave
        fewer than ``m`` labels (a miss).
    k : int or sequence of int, default=(1, 3, 5)
        Cut-offs, each at most ``m``.
    propensities : array-like of shape (n_labels,) or None, default=None
        Label propensities (:func:`label_propensities` of the training labels): PSP@k is
        computed when given.

    Returns
    -------
    scores : dict
        ``"precision@k"``, ``"label_recall@k"`` and ``"ndcg@k"`` for each ``k`` (the names of
        :func:`~skrank.metrics.get_scorer`), then ``"psp@k"`` with ``propensities``; floats.

    Examples
    --------
    >>> from skrank.metrics import top_k_label_scores
    >>> y_true = [[1, 0, 1], [0, 1, 0]]
    >>> top_k_label_scores(y_true, [[0, 1], [2, -1]], k=[1, 2])
    {'precision@1': 0.5, 'precision@2': 0.25, 'label_recall@1': 0.25, 'label_recall@2': 0.25, \
'ndcg@1': 0.5, 'ndcg@2': 0.3065735963827292}
    """
    if not sparse.issparse(y_true):
        y_true = check_array(y_true, dtype=None, input_name="y_true")
    y_true = canonical_csr(y_true, dtype=np.float64, drop_zeros=True)
    if values_outside_zero_one(y_true) is not None:
        raise ValueError("y_true must be a multilabel indicator matrix of 0s and 1s.")
    top_k = np.asarray(top_k)
    n_samples, n_labels = y_true.shape
    if top_k.ndim != 2 or top_k.shape[0] != n_samples or not np.issubdtype(top_k.dtype, np.integer):
        raise ValueError(
            f"top_k must be an integer array of shape ({n_samples}, m); got {top_k.dtype} "
            f"{top_k.shape}."
        )
    if top_k.size and (top_k.min() < -1 or top_k.max() >= n_labels):
        raise ValueError(f"top_k holds columns outside -1 .. {n_labels - 1}.")
    ks = np.atleast_1d(np.asarray(k))
    if ks.ndim != 1 or not np.issubdtype(ks.dtype, np.integer) or ks.min() < 1:
        raise ValueError(f"k must be positive integers; got {k!r}.")
    if ks.max() > top_k.shape[1]:
        raise ValueError(f"k={k!r} exceeds the {top_k.shape[1]} labels of top_k a row.")
    # A missing label points at an extra column that no example holds.
    targets = sparse.hstack([y_true, sparse.csr_matrix((n_samples, 1))], format="csr")
    top_k = np.where(top_k < 0, n_labels, top_k)
    hits, n_true = top_k_hits(targets, top_k)
    scores = {}
    for kind, name in (("precision", "precision"), ("recall", "label_recall")):
        values = mean_top_k_scores(hits, n_true, ks, kind)
        scores |= {f"{name}@{cut}": float(value) for cut, value in zip(ks, values, strict=True)}
    ndcg = ndcg_from_hits(hits[:, : ks.max()], n_true, ks)
    scores |= {f"ndcg@{cut}": float(value) for cut, value in zip(ks, ndcg, strict=True)}
    if propensities is not None:
        propensities = np.append(np.asarray(propensities, dtype=np.float64), 1.0)
        if propensities.shape != (n_labels + 1,):
            raise ValueError(f"propensities must have shape ({n_labels},).")
        psp = psp_from_top(targets, top_k[:, : ks.max()], ks, propensities)
        scores |= {f"psp@{cut}": float(value) for cut, value in zip(ks, psp, strict=True)}
    return scores
