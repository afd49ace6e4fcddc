"""Scorers for ``GridSearchCV(scoring=...)`` and ``cross_val_score``.

Protocol
--------
A scorer is called as ``scorer(estimator, X, y)`` and returns a float, higher = better.

- An *embedder* is an estimator with ``transform`` that is not a classifier (below; e.g.
  :class:`~skrank.MMC`, whose ``decision_function`` scores pairs). Retrieval
  metrics score ``transform(X)`` against ``y`` (every item a query against the others).
  The metric space is the scorer's ``metric`` when given; otherwise the estimator's class
  attribute ``retrieval_metric`` ("cosine" or "euclidean"; for a ``Pipeline``, that of its
  final step) if it has one; otherwise "euclidean".
- A *classifier* is an estimator with ``decision_function`` (n_samples, n_labels) or
  ``predict_top_k``, and ``classes_``. "label_recall@k", "precision@k" and "hit_rate@k" are
  then :func:`top_k_recall_score`, :func:`top_k_precision_score` and the share of examples
  with a true label among their k best. If it has ``predict_top_k(X, k)``, returning an
  (n, k) array of labels from ``classes_`` (best first), that is used instead of the full
  score matrix. For a ``Pipeline`` these methods are looked up on its final step, which
  receives ``X`` transformed by the other steps.
- A *similarity learner* is an estimator with ``pairwise_similarity(X, Y)`` (an (n_X, n_Y)
  matrix) and no ``transform`` (:class:`~skrank.PointwiseROCSimilarity`). Retrieval metrics
  rank the items of ``X`` by ``pairwise_similarity`` (as the metrics' callable ``metric``),
  and "hit_rate@k" and "precision@k" are retrieval metrics for it: its ``decision_function``
  scores pairs, not labels. For a ``Pipeline``, ``X`` first goes through the other steps.
- "tpr@fpr=a" scores all pairs ``i < j`` of ``X`` (positive pair: same class): pair scores
  are ``estimator.pairwise_similarity(X)`` (an (n, n) matrix) if the estimator (or a
  pipeline's final step, after the other steps' ``transform``) has it, else the similarity
  of ``transform(X)`` in the metric space above.
"""

import inspect
import re
import warnings

import numpy as np
from scipy import sparse
from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.pipeline import Pipeline

from ..utils._deprecation import MOVED_IN, REMOVED_IN
from ._extreme import _indicator, label_propensities, ndcg_from_hits, psp_from_top
from ._labels import (
    check_label_scores,
    check_label_targets,
    label_columns,
    mean_top_k_scores,
    top_k_hits,
)
from ._ranking import pairwise_roc_score
from ._retrieval import (
    map_at_r_score,
    mean_auprc_score,
    precision_at_k_score,
    r_precision_score,
    recall_at_k_score,
    similarity_matrix,
)
from ._search import top_k_indices
from ._validation import check_fpr

_TOP_K_NAME = re.compile(r"(recall|precision|hit_rate)@(\d+)")
_EXTREME_NAME = re.compile(r"(ndcg|psp|label_recall)@(\d+)")
_TPR_NAME = re.compile(r"tpr@fpr=(.+)")
_NAME_FORMS = (
    "'mean_auprc', 'map@r', 'r_precision', 'hit_rate@K', 'precision@K', 'label_recall@K', "
    "'ndcg@K', 'psp@K' (K a positive integer), 'tpr@fpr=A'"
)
_AT_R_SCORERS = {"map@r": map_at_r_score, "r_precision": r_precision_score}


def final_estimator(estimator):
    """The estimator itself, or the final step of a ``Pipeline``."""
    return estimator.steps[-1][1] if isinstance(estimator, Pipeline) else estimator


def retrieval_metric_of(estimator, metric=None):
    """The metric space in which ``estimator``'s embedding is ranked.

    ``metric`` when given; otherwise the class attribute ``retrieval_metric`` of the estimator
    (of a ``Pipeline``'s final step); otherwise "euclidean". The former private name
    ``_retrieval_metric`` is still read, with a ``FutureWarning``, until skrank 0.3.
    """
    if metric is not None:
        return metric
    final = final_estimator(estimator)
    if hasattr(final, "retrieval_metric"):
        return final.retrieval_metric
    if hasattr(final, "_retrieval_metric"):
        warnings.warn(
            f"{type(final).__name__}._retrieval_metric is deprecated and will not be read in "
            "skrank 0.3: name the class attribute retrieval_metric.",
            FutureWarning,
            stacklevel=3,
        )
        return final._retrieval_metric
    return "euclidean"


def _final_step_input(estimator, X):
    """``X`` as the final step of a ``Pipeline`` receives it (``X`` itself otherwise)."""
    if isinstance(estimator, Pipeline) and len(estimator.steps) > 1:
        return estimator[:-1].transform(X)
    return X


def _learns_similarity(estimator):
    """Whether the estimator (a pipeline's final step) has no embedding and scores items
    against items by ``pairwise_similarity(X, Y)``."""
    final = final_estimator(estimator)
    if hasattr(final, "transform") or not hasattr(final, "pairwise_similarity"):
        return False
    try:
        signature = inspect.signature(final.pairwise_similarity)
    except (TypeError, ValueError):
        return False
    return len(signature.parameters) >= 2  # (X, Y): queries against the scored items


def _scores_labels(estimator):
    """Whether the estimator (a pipeline's final step) ranks labels rather than embedding items."""
    final = final_estimator(estimator)
    if _learns_similarity(estimator):
        return False  # its decision_function scores pairs of items, not labels
    if hasattr(final, "predict_top_k"):
        return True
    # decision_function ranks labels only beside classes_ (MMC's scores pairs: an embedder).
    return hasattr(final, "decision_function") and hasattr(final, "classes_")


def _retrieval_input(estimator, X, metric, name):
    """The items a retrieval metric ranks and the metric that ranks them: ``transform(X)`` in
    the embedding's metric space, or, for a similarity learner, ``X`` (through a pipeline's
    other steps) ranked by its ``pairwise_similarity``."""
    if not _learns_similarity(estimator):
        return _embed(estimator, X, name), retrieval_metric_of(estimator, metric)
    if metric is not None:
        raise ValueError(
            f"The scorer {name!r} was given metric={metric!r}, but "
            f"{type(final_estimator(estimator)).__name__} ranks items by its own "
            "pairwise_similarity; leave metric=None."
        )
    return _final_step_input(estimator, X), final_estimator(estimator).pairwise_similarity


def _embed(estimator, X, name):
    if _scores_labels(estimator):
        raise ValueError(
            f"The scorer {name!r} scores an embedding (an estimator with transform that ranks "
            f"no labels); {type(estimator).__name__} ranks labels (it has classes_ and "
            "decision_function, or predict_top_k): it is a classifier."
        )
    if not hasattr(estimator, "transform"):
        raise ValueError(
            f"The scorer {name!r} needs an estimator with transform; "
            f"{type(estimator).__name__} has none."
        )
    return estimator.transform(X)


class _RankingScorer:
    """Base of the skrank scorers: a picklable ``scorer(estimator, X, y) -> float``."""

    def __init__(self, name, metric=None):
        self.name = name
        self.metric = metric

    def __repr__(self):
        metric = "" if self.metric is None else f", metric={self.metric!r}"
        return f"skrank.metrics.get_scorer({self.name!r}{metric})"

    def __call__(self, estimator, X, y, **kwargs):
        if kwargs:
            raise TypeError(
                f"The scorer {self.name!r} takes no extra arguments; got {sorted(kwargs)}."
            )
        return float(self._score(estimator, X, y))


class _EmbeddingScorer(_RankingScorer):
    """``score_func(transform(X), y, metric=..., **kwargs)`` for an embedder."""

    def __init__(self, name, score_func, metric=None, **kwargs):
        super().__init__(name, metric)
        self.score_func = score_func
        self.kwargs = kwargs

    def __repr__(self):
        if self.name is not None:
            return super().__repr__()
        arguments = [self.score_func.__name__, f"metric={self.metric!r}"]
        arguments += [f"{key}={value!r}" for key, value in self.kwargs.items()]
        return f"skrank.metrics.make_retrieval_scorer({', '.join(arguments)})"

    def _score(self, estimator, X, y):
        name = self.name or self.score_func.__name__
        items, metric = _retrieval_input(estimator, X, self.metric, name)
        return self.score_func(items, y, metric=metric, **self.kwargs)


class _TopKScorer(_EmbeddingScorer):
    """Hit rate / Precision@k (and the former "recall@k"): over labels for a classifier, over
    retrieval for an embedder."""

    def __init__(self, name, kind, k, metric=None):
        score_func = precision_at_k_score if kind == "precision" else recall_at_k_score
        super().__init__(name, score_func, metric, k=k)
        self.kind = kind
        self.k = k

    def _score(self, estimator, X, y):
        if not _scores_labels(estimator):
            return super()._score(estimator, X, y)
        final = final_estimator(estimator)
        classes = np.asarray(final.classes_)
        if hasattr(final, "predict_top_k"):
            top_labels = np.asarray(final.predict_top_k(_final_step_input(estimator, X), self.k))
            if top_labels.ndim != 2 or top_labels.shape[1] != self.k:
                raise ValueError(
                    f"predict_top_k(X, {self.k}) must return an array of shape "
                    f"(n_samples, {self.k}); got {top_labels.shape}."
                )
            top_k = label_columns(top_labels, classes)
        else:
            scores = check_label_scores(
                estimator.decision_function(X), input_name="decision_function(X)"
            )
            if scores.shape[1] != len(classes):
                raise ValueError(
                    f"The scorer {self.name!r} needs decision_function scores of shape "
                    f"(n_samples, {len(classes)}); got {scores.shape}."
                )
            top_k = top_k_indices(scores, min(self.k, scores.shape[1]))  # all, if k exceeds
        multilabel = sparse.issparse(y) or np.ndim(y) == 2
        targets = check_label_targets(y, len(classes), None if multilabel else classes)
        if self.kind == "psp":
            # Propensities of the scored targets: a scorer sees no training labels.
            propensities = label_propensities(_indicator(targets, len(classes)))
            return psp_from_top(targets, top_k, np.array([self.k]), propensities)[0]
        hits, n_true = top_k_hits(targets, top_k)
        if self.kind == "ndcg":
            return ndcg_from_hits(hits, n_true, np.array([self.k]))[0]
        kind = "recall" if self.kind == "label_recall" else self.kind
        return mean_top_k_scores(hits, n_true, np.array([self.k]), kind)[0]


class _ExtremeScorer(_TopKScorer):
    """Label Recall@k / nDCG@k / PSP@k over labels, for classifiers only."""

    def _score(self, estimator, X, y):
        if not _scores_labels(estimator):
            hint = f" For an embedder, 'hit_rate@{self.k}'." if self.kind == "label_recall" else ""
            raise ValueError(
                f"The scorer {self.name!r} scores label rankings: it needs a classifier "
                f"(decision_function or predict_top_k, and classes_).{hint}"
            )
        return super()._score(estimator, X, y)


class _PairROCScorer(_RankingScorer):
    """TPR at a fixed FPR over all pairs ``i < j`` of the scored set."""

    def __init__(self, name, fpr, metric=None):
        super().__init__(name, metric)
        self.fpr = fpr

    def _score(self, estimator, X, y):
        similarity = pair_similarity_matrix(estimator, X, self.metric, name=self.name)
        return pairwise_roc_score(similarity, y, self.fpr)


def pair_similarity_matrix(estimator, X, metric=None, *, name="pair ROC"):
    """The (n, n) similarities of the items of ``X`` by which a fitted estimator ranks pairs.

    ``estimator.pairwise_similarity(X)`` if it has that method, else the similarity of its
    embedding ``transform(X)`` in the metric space of the protocol above ("euclidean" gives
    negative squared distances: the ranking, hence the ROC curve, of negative distances).
    For a ``Pipeline`` whose final step has ``pairwise_similarity``, ``X`` first goes through
    the other steps. ``name`` names the caller in errors.
    """
    final = final_estimator(estimator)
    if hasattr(final, "pairwise_similarity"):
        return final.pairwise_similarity(_final_step_input(estimator, X))
    embedding = _embed(estimator, X, name)
    return similarity_matrix(embedding, retrieval_metric_of(estimator, metric))


def _parse_tpr_name(name, match):
    try:
        fpr = float(match.group(1))
    except ValueError:
        raise ValueError(
            f"Malformed scorer name {name!r}: {match.group(1)!r} is not a number."
        ) from None
    check_fpr(fpr)
    return fpr


def get_scorer(scoring, *, metric=None):
    """A scorer ``scorer(estimator, X, y)`` for ``GridSearchCV`` and ``cross_val_score``.

    Understands the ranking metrics below and falls back to
    :func:`sklearn.metrics.get_scorer` for any other name (or a callable). Pass the result as
    ``scoring=`` (names like "recall@10" are not known to scikit-learn itself); several
    scorers go in a dict, e.g. ``scoring={"map": get_scorer("mean_auprc"), ...}``.

    - ``"mean_auprc"``: :func:`mean_auprc_score` of ``transform(X)`` (of ``X`` ranked by
      ``pairwise_similarity(X, Y)`` for a similarity learner such as
      :class:`~skrank.PointwiseROCSimilarity`; a classifier raises ValueError); likewise
      ``"map@r"`` (:func:`map_at_r_score`) and
      ``"r_precision"`` (:func:`r_precision_score`). The retrieval scorers compute on
      ``device="auto"`` (CUDA when present, else the torch CPU path); pass another device
      through :func:`make_retrieval_scorer`.
    - ``"hit_rate@K"``: the share of queries with a positive among their ``K`` best; for an
      embedder or a similarity learner, the retrieval metric :func:`recall_at_k_score` of
      ``transform(X)`` (of ``X`` ranked by ``pairwise_similarity``), the "Recall@K" of
      metric-learning papers; for a classifier (``decision_function`` or
      ``predict_top_k``), the share of examples with a true label among their ``K`` best
      labels (using ``predict_top_k(X, K)`` when the estimator has it).
    - ``"precision@K"``: the share of the ``K`` best that are positives, averaged over
      queries: :func:`precision_at_k_score` of the retrieval, or for a classifier the label
      metric :func:`top_k_precision_score`.
    - ``"label_recall@K"``, ``"ndcg@K"``, ``"psp@K"``: classifiers only, the label metrics
      :func:`top_k_recall_score` (the share of each example's true labels among its ``K``
      best, the Recall@K of extreme classification), :func:`top_k_ndcg_score` and the
      normalised :func:`top_k_psp_score`, with the propensities of the scored ``y``
      (:func:`label_propensities`; a scorer never sees the training labels).
    - ``"recall@K"`` (deprecated, removed in 0.3): ``"label_recall@K"`` for a classifier,
      ``"hit_rate@K"`` otherwise.
    - ``"tpr@fpr=A"``: :func:`pairwise_roc_score` at FPR ``A`` over all pairs of ``X``, with
      pair scores from ``estimator.pairwise_similarity(X)`` or else from the embedding. It
      holds the (n, n) similarity matrix of the scored set: memory O(n^2).

    The metric space of an embedding is ``metric`` if given, else the estimator's (or a
    pipeline's final step's) ``retrieval_metric`` class attribute, else "euclidean". A
    similarity learner (``pairwise_similarity`` and no ``transform``) ranks by its own
    similarity: ``metric`` must then be None.

    Parameters
    ----------
    scoring : str or callable
        A name as above, a scikit-learn scorer name, or a callable (returned unchanged).
    metric : {"cosine", "euclidean"} or callable, default=None
        Metric space of embeddings, for the skrank ranking scorers only.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, picklable.

    Raises
    ------
    ValueError
        For a malformed ranking name (e.g. "hit_rate@0", "tpr@fpr=2") or an unknown name.

    Examples
    --------
    >>> from skrank.metrics import get_scorer
    >>> hit_rate = get_scorer("hit_rate@5")  # for PCA, an embedder: a retrieval metric
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.decomposition import PCA
    >>> from sklearn.model_selection import GridSearchCV
    >>> X, y = load_iris(return_X_y=True)
    >>> search = GridSearchCV(PCA(), {"n_components": [1, 2]}, scoring=hit_rate)
    >>> search.fit(X, y).best_params_
    {'n_components': 2}
    """
    if not isinstance(scoring, str):
        return _sklearn_get_scorer(scoring)
    if scoring == "mean_auprc":
        return _EmbeddingScorer(scoring, mean_auprc_score, metric)
    if scoring in _AT_R_SCORERS:
        return _EmbeddingScorer(scoring, _AT_R_SCORERS[scoring], metric)
    top_k = _TOP_K_NAME.fullmatch(scoring)
    if top_k:
        k = int(top_k.group(2))
        if k < 1:
            raise ValueError(f"Malformed scorer name {scoring!r}: k must be >= 1.")
        if top_k.group(1) == "recall":
            warnings.warn(
                f"The scorer name {scoring!r} is deprecated in skrank {MOVED_IN} and will be "
                f"removed in {REMOVED_IN}: it meant two recalls. Use 'hit_rate@{k}' (the share "
                f"of queries with a positive among their {k} best: retrieval's Recall@{k}) or "
                f"'label_recall@{k}' (the share of each example's true labels among its {k} "
                "best, for classifiers).",
                FutureWarning,
                stacklevel=2,
            )
        return _TopKScorer(scoring, top_k.group(1), k, metric)
    extreme = _EXTREME_NAME.fullmatch(scoring)
    if extreme:
        if int(extreme.group(2)) < 1:
            raise ValueError(f"Malformed scorer name {scoring!r}: k must be >= 1.")
        return _ExtremeScorer(scoring, extreme.group(1), int(extreme.group(2)))
    tpr = _TPR_NAME.fullmatch(scoring)
    if tpr:
        return _PairROCScorer(scoring, _parse_tpr_name(scoring, tpr), metric)
    if "@" in scoring:
        raise ValueError(
            f"Malformed scorer name {scoring!r}; the ranking scorers are {_NAME_FORMS}."
        )
    return _sklearn_get_scorer(scoring)


def make_retrieval_scorer(score_func, *, metric=None, **kwargs):
    """Make a scorer from a retrieval metric of an embedding.

    The scorer computes ``score_func(estimator.transform(X), y, metric=m, **kwargs)`` where
    ``m`` is ``metric`` if given, else the estimator's ``retrieval_metric`` class attribute
    (for a ``Pipeline``, its final step's), else "euclidean". Embedders (``transform`` and no
    ``decision_function``) and similarity learners (``pairwise_similarity`` and no
    ``transform``: ``X`` ranked by ``metric=estimator.pairwise_similarity``) can be scored.

    Parameters
    ----------
    score_func : callable
        ``score_func(X, y, *, metric, **kwargs) -> float``, higher = better, e.g.
        :func:`mean_auprc_score` or :func:`recall_at_k_score`. A module-level function keeps
        the scorer picklable (needed by ``GridSearchCV(n_jobs>1)``).
    metric : {"cosine", "euclidean"} or callable, default=None
        Metric space of the embedding.
    **kwargs
        Further keyword arguments of ``score_func`` (e.g. ``k=5``).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``.

    Examples
    --------
    >>> from skrank.metrics import make_retrieval_scorer, precision_at_k_score
    >>> make_retrieval_scorer(precision_at_k_score, metric="cosine", k=5)
    skrank.metrics.make_retrieval_scorer(precision_at_k_score, metric='cosine', k=5)
    """
    return _EmbeddingScorer(None, score_func, metric, **kwargs)
