"""The training engine of skrank's torch estimators, usable to build your own.

- :class:`BaseTorchEstimator`: the engine and base class of :class:`~skrank.SOPRCEmbedder` and
  :class:`~skrank.SNMClassifier`, with public, overridable steps (``initialize_module``,
  ``initialize_weights``, ``get_loss``, ``train_step``, ``run_single_epoch``, ...) and the
  helpers a subclass calls (``split_validation``, ``forward``, ``training_device``, ...).
- Callbacks: :class:`Callback` (the base class), :class:`ProgressBar`, :class:`EarlyStopping`,
  :class:`LRScheduler`, :class:`WeightAveraging`, :class:`Checkpoint`.
- :class:`TrainingInputs` and :class:`Batch`: the training data on the device and the batches
  a step receives; :class:`RowSubset`, :func:`memory_mapped` and :func:`input_dtypes`, for
  inputs read from a memory-mapped file; :func:`check_image_items`, :func:`item_rank` and
  :data:`ITEM_SHAPES`, for image items; :class:`ItemDataset`, :func:`is_item_source` and
  :func:`read_image`, for the items of a torch Dataset or of image files; :class:`MLP`, the
  default network, and :class:`ConvNet`, the default network of image items, with
  :func:`layer_sizes` and :func:`module_output_dim`; :class:`SparseRows` and
  :class:`SparseLinear`, sparse batches and the layer that reads only their non-zero features;
  :class:`RowSparseOptimizer`, which updates only the rows of a table a step read;
  :func:`resolve_device`.
- Data-parallel fits: :class:`DistributedContext`, :func:`current_context`,
  :func:`gather_with_gradient`, :func:`gather_summing_gradient`.
- ONNX export: :func:`export_module`, :func:`check_onnx_installed`, :func:`dense_float32`,
  :class:`UnitRows`.
- :func:`store_parameters`, the one-line ``__init__`` of an estimator; :data:`ENGINE_DEFAULTS`,
  the engine's parameters and their defaults, :data:`TORCH_PARAMETER_CONSTRAINTS` their
  constraints; :class:`ComponentParameters`, the parameters an estimator takes from the loss
  or network it builds.
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
from ._data import (
    ITEM_SHAPES,
    Batch,
    RowSubset,
    TrainingInputs,
    check_image_items,
    input_dtypes,
    item_rank,
    memory_mapped,
)
from ._device import resolve_device
from ._distributed import (
    DistributedContext,
    current_context,
    gather_summing_gradient,
    gather_with_gradient,
)
from ._engine import (
    ENGINE_DEFAULTS,
    TORCH_ATTRIBUTE_DOCS,
    TORCH_INPUT_DOCS,
    TORCH_PARAMETER_CONSTRAINTS,
    TORCH_PARAMETER_DOCS,
    BaseTorchEstimator,
)
from ._items import ItemDataset, is_item_source, read_image
from ._modules import MLP, ConvNet, layer_sizes, module_output_dim
from ._onnx import UnitRows, check_onnx_installed, dense_float32, export_module
from ._optim import RowSparseOptimizer
from ._sparse import SparseLinear, SparseRows

__all__ = [
    "ENGINE_DEFAULTS",
    "ITEM_SHAPES",
    "MLP",
    "TORCH_ATTRIBUTE_DOCS",
    "TORCH_INPUT_DOCS",
    "TORCH_PARAMETER_CONSTRAINTS",
    "TORCH_PARAMETER_DOCS",
    "BaseTorchEstimator",
    "Batch",
    "Callback",
    "Checkpoint",
    "ComponentParameters",
    "ConvNet",
    "DistributedContext",
    "EarlyStopping",
    "ItemDataset",
    "LRScheduler",
    "ProgressBar",
    "RowSparseOptimizer",
    "RowSubset",
    "SparseLinear",
    "SparseRows",
    "TrainingInputs",
    "UnitRows",
    "WeightAveraging",
    "check_image_items",
    "check_onnx_installed",
    "current_context",
    "dense_float32",
    "export_module",
    "gather_summing_gradient",
    "gather_with_gradient",
    "input_dtypes",
    "is_item_source",
    "item_rank",
    "layer_sizes",
    "memory_mapped",
    "module_output_dim",
    "read_image",
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
