"""Ranking, retrieval, label and pair metrics, and scorers for model selection.

- Binary ranking: :func:`auprc_score` (step-wise AUPRC, ties counted fully) and
  :func:`pointwise_roc_score` (TPR at a given FPR on the interpolated ROC curve).
- Retrieval over embeddings, exact and chunked (bounded memory at any n):
  :func:`mean_auprc_score` (mAP), :func:`recall_at_k_score`, :func:`precision_at_k_score`,
  :func:`map_at_r_score` and :func:`r_precision_score` (as pytorch-metric-learning defines
  them), :func:`query_auprc_scores` (per query), and :func:`retrieval_scores` for all of them
  in one pass, on a torch device (``device="auto"``: CUDA when present) or in numpy;
  :func:`mean_precision_recall_curve` (mean interpolated precision over queries at given
  recall levels).
- Extreme classification: :func:`top_k_recall_score`, :func:`top_k_precision_score`,
  :func:`top_k_ndcg_score`, :func:`top_k_psp_score` (propensity-scored, with
  :func:`label_propensities`), and all of them at once from ranked top-k labels (no score
  matrix): :func:`top_k_label_scores`.
- Probabilities: :func:`expected_calibration_error` (equal-width bins).
- Pairs of a labelled set: :func:`pair_scores_and_labels`, :func:`pairwise_roc_score`.
- Exact top-k search with the tie rule every skrank metric uses (the smaller index first):
  :func:`top_k_indices`, :func:`top_k_inner_products` (chunked, over a large table), and the
  approximate :class:`FaissInnerProductIndex` and :class:`FaissIVFIndex`.
- Scorers for ``GridSearchCV``: :func:`get_scorer` ("mean_auprc", "recall@10",
  "precision@5", "tpr@fpr=0.01", ...), :func:`make_retrieval_scorer`.
"""

from ._calibration import expected_calibration_error
from ._extreme import (
    label_propensities,
    top_k_label_scores,
    top_k_ndcg_score,
    top_k_psp_score,
)
from ._labels import top_k_precision_score, top_k_recall_score
from ._ranking import (
    auprc_score,
    pair_scores_and_labels,
    pairwise_roc_score,
    pointwise_roc_score,
)
from ._retrieval import (
    map_at_r_score,
    mean_auprc_score,
    mean_precision_recall_curve,
    precision_at_k_score,
    query_auprc_scores,
    r_precision_score,
    recall_at_k_score,
    retrieval_scores,
)
from ._scorer import get_scorer, make_retrieval_scorer
from ._search import (
    FaissInnerProductIndex,
    FaissIVFIndex,
    top_k_indices,
    top_k_inner_products,
)

__all__ = [
    "FaissIVFIndex",
    "FaissInnerProductIndex",
    "auprc_score",
    "expected_calibration_error",
    "get_scorer",
    "label_propensities",
    "make_retrieval_scorer",
    "map_at_r_score",
    "mean_auprc_score",
    "mean_precision_recall_curve",
    "pair_scores_and_labels",
    "pairwise_roc_score",
    "pointwise_roc_score",
    "precision_at_k_score",
    "query_auprc_scores",
    "r_precision_score",
    "recall_at_k_score",
    "retrieval_scores",
    "top_k_indices",
    "top_k_inner_products",
    "top_k_label_scores",
    "top_k_ndcg_score",
    "top_k_precision_score",
    "top_k_psp_score",
    "top_k_recall_score",
]
