"""Shared torch core: modules, batch samplers, devices and the training loop of the estimators."""

from ._base import BaseTorchEstimator
from ._device import resolve_device
from ._modules import MLP
from ._samplers import ClassBalancedBatchSampler, ShuffledBatchSampler

__all__ = [
    "MLP",
    "BaseTorchEstimator",
    "ClassBalancedBatchSampler",
    "ShuffledBatchSampler",
    "resolve_device",
]
