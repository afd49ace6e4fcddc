"""Torch losses usable on their own, in any training loop.

Ordered weighted losses and Stochastic Negative Mining (Reddi et al., AISTATS 2019): surrogates,
weight vectors, the POWL/BOWL losses and the negative-label sampler.
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

__all__ = [
    "NegativeLabelSampler",
    "OrderedWeightedLoss",
    "bowl",
    "draw_positive_labels",
    "exponential",
    "get_surrogate",
    "hinge",
    "logistic",
    "ordered_weighted_loss",
    "owl_weights",
    "powl",
    "ramp",
    "sample_distinct_labels",
    "squared_hinge",
]
