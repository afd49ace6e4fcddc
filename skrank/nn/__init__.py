"""Shared torch core: modules, devices and the training loop of the estimators."""

from ..utils._deprecation import moved_attributes
from ._base import BaseTorchEstimator
from ._device import resolve_device
from ._modules import MLP

__all__ = [
    "MLP",
    "BaseTorchEstimator",
    "resolve_device",
]

__getattr__ = moved_attributes(
    __name__,
    {
        "ClassBalancedBatchSampler": "skrank.sampling",
        "ShuffledBatchSampler": "skrank.sampling",
        "LabelEmbeddingNetwork": "skrank.multilabel",
        "top_k_inner_products": "skrank.metrics",
    },
)
