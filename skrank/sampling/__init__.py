"""Samplers: every random draw of items, labels or pairs that skrank's learners make.

- Mini-batches of the torch estimators: :class:`ClassBalancedBatchSampler` (P classes x M items,
  for SOPRCEmbedder) and :class:`ShuffledBatchSampler` (for SNMClassifier).
- Labels for Stochastic Negative Mining: :class:`NegativeLabelSampler` (one shared sample of
  negative labels per mini-batch, each example's positives masked), :func:`draw_positive_labels`
  (one positive label per multilabel example), :func:`sample_distinct_labels`.
- Pairs implied by class labels, for the pair-based metric learners: :func:`sample_negative_pairs`
  and :func:`sample_negative_tuples` (incomplete U-statistics), :func:`iter_negative_pairs` (all of
  them, in blocks), :func:`count_pairs`, and the :class:`PairSample` they return.

Every sampler takes a ``random_state``; its cost does not grow with what it samples from where the
docstring says so (labels: independent of the number of labels ``K``).
"""

from ._batches import ClassBalancedBatchSampler, EpochBatches, ShuffledBatchSampler
from ._labels import NegativeLabelSampler, draw_positive_labels, sample_distinct_labels
from ._pairs import (
    PairSample,
    count_pairs,
    iter_negative_pairs,
    sample_negative_pairs,
    sample_negative_tuples,
)

__all__ = [
    "ClassBalancedBatchSampler",
    "EpochBatches",
    "NegativeLabelSampler",
    "PairSample",
    "ShuffledBatchSampler",
    "count_pairs",
    "draw_positive_labels",
    "iter_negative_pairs",
    "sample_distinct_labels",
    "sample_negative_pairs",
    "sample_negative_tuples",
]
