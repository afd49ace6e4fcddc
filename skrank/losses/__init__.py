"""Torch losses usable on their own, in any training loop.

SOPRC (a surrogate of 1 - AUPRC for retrieval, with its per-class auxiliary state), and the ordered
weighted losses of Stochastic Negative Mining (Reddi et al., AISTATS 2019): surrogates, weight
vectors and the POWL/BOWL losses. The negative-label sampler that feeds them lives in
:mod:`skrank.sampling`.
"""

from ..utils._deprecation import moved_attributes
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
from ._soprc import (
    SOPRCLoss,
    interpolate_scores,
    one_sided_huber,
    one_sided_sigmoid,
    soprc_query_loss,
)

__all__ = [
    "OrderedWeightedLoss",
    "SOPRCLoss",
    "bowl",
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
    "soprc_query_loss",
    "squared_hinge",
]

__getattr__ = moved_attributes(
    __name__,
    dict.fromkeys(
        ["NegativeLabelSampler", "draw_positive_labels", "sample_distinct_labels"],
        "skrank.sampling",
    ),
)
