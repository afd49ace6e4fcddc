"""Shared torch core: modules, batch samplers, devices and the training loop of the estimators."""

from ._base import BaseTorchEstimator
from ._device import resolve_device
from ._label_embedding import LabelEmbeddingNetwork
from ._modules import MLP
from ._samplers import ClassBalancedBatchSampler, ShuffledBatchSampler
from ._search import top_k_inner_products

__all__ = [
    "MLP",
    "BaseTorchEstimator",
    "ClassBalancedBatchSampler",
    "LabelEmbeddingNetwork",
    "ShuffledBatchSampler",
    "resolve_device",
    "top_k_inner_products",
]
