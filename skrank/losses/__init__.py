"""Torch losses usable on their own, in any training loop.

SOPRC (a surrogate of 1 - AUPRC for retrieval, with its per-class auxiliary state), and the ordered
weighted losses of Stochastic Negative Mining (Reddi et al., AISTATS 2019): surrogates, weight
vectors, the POWL/BOWL losses and the negative-label sampler.
"""

from ._owl import (
    OrderedWeightedLoss,
    bowl,
    exponential,
    get_surrogate,
    hinge,
    logistic,
    ordered_weighted_loss,
    owl_weights,
    powl,
    ramp,
    squared_hinge,
)
from ._sampling import NegativeLabelSampler, draw_positive_labels, sample_distinct_labels
from ._soprc import (
    SOPRCLoss,
    interpolate_scores,
    one_sided_huber,
    one_sided_sigmoid,
    soprc_query_loss,
)

__all__ = [
    "NegativeLabelSampler",
    "OrderedWeightedLoss",
    "SOPRCLoss",
    "bowl",
    "draw_positive_labels",
    "exponential",
    "get_surrogate",
    "hinge",
    "interpolate_scores",
    "logistic",
    "one_sided_huber",
    "one_sided_sigmoid",
    "ordered_weighted_loss",
    "owl_weights",
    "powl",
    "ramp",
    "sample_distinct_labels",
    "soprc_query_loss",
    "squared_hinge",
]
