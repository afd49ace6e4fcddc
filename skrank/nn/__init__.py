"""The training engine of skrank's torch estimators, usable to build your own.

- :class:`BaseTorchEstimator`: the engine and base class of :class:`~skrank.SOPRCEmbedder` and
  :class:`~skrank.SNMClassifier`, with public, overridable steps (``initialize_module``,
  ``get_loss``, ``train_step``, ``run_single_epoch``, ...).
- Callbacks: :class:`Callback` (the base class), :class:`ProgressBar`, :class:`EarlyStopping`,
  :class:`LRScheduler`, :class:`WeightAveraging`, :class:`Checkpoint`.
- :class:`TrainingInputs` and :class:`Batch`: the training data on the device and the batches
  a step receives; :class:`MLP`, the default network; :class:`SparseRows` and
  :class:`SparseLinear`, sparse batches and the layer that reads only their non-zero features;
  :class:`RowSparseOptimizer`, which updates only the rows of a table a step read;
  :func:`resolve_device`;
  :func:`store_parameters`, the one-line ``__init__`` of an estimator; :data:`ENGINE_DEFAULTS`,
  the engine's parameters and their defaults; :class:`ComponentParameters`, the parameters an
  estimator takes from the loss or network it builds.
"""

from ..utils._deprecation import moved_attributes
from ..utils._params import ComponentParameters, store_parameters
from ._callbacks import (
    Callback,
    Checkpoint,
    EarlyStopping,
    LRScheduler,
    ProgressBar,
    WeightAveraging,
)
from ._data import Batch, TrainingInputs
from ._device import resolve_device
from ._engine import (
    ENGINE_DEFAULTS,
    TORCH_ATTRIBUTE_DOCS,
    TORCH_INPUT_DOCS,
    TORCH_PARAMETER_DOCS,
    BaseTorchEstimator,
)
from ._modules import MLP
from ._optim import RowSparseOptimizer
from ._sparse import SparseLinear, SparseRows

__all__ = [
    "ENGINE_DEFAULTS",
    "MLP",
    "TORCH_ATTRIBUTE_DOCS",
    "TORCH_INPUT_DOCS",
    "TORCH_PARAMETER_DOCS",
    "BaseTorchEstimator",
    "Batch",
    "Callback",
    "Checkpoint",
    "ComponentParameters",
    "EarlyStopping",
    "LRScheduler",
    "ProgressBar",
    "RowSparseOptimizer",
    "SparseLinear",
    "SparseRows",
    "TrainingInputs",
    "WeightAveraging",
    "resolve_device",
    "store_parameters",
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
