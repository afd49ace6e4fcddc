"""Torch losses usable on their own, in any training loop."""

from ._soprc import (
    SOPRCLoss,
    interpolate_scores,
    one_sided_huber,
    one_sided_sigmoid,
    soprc_query_loss,
)

__all__ = [
    "SOPRCLoss",
    "interpolate_scores",
    "one_sided_huber",
    "one_sided_sigmoid",
    "soprc_query_loss",
]
