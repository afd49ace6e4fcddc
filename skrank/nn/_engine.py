"""The training engine of skrank's torch estimators.

:class:`BaseTorchEstimator` is the engine and the base class of ``SOPRCEmbedder`` and
``SNMClassifier``: a scikit-learn estimator whose ``fit`` runs an epoch loop whose steps are
public methods a subclass overrides, with callbacks around them (skorch's ``NeuralNet`` and
Lightning's ``Trainer`` are the models). Read more in the :ref:`User Guide <engine>`.
"""

import copy
import time
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state

from .._compat import Interval, StrOptions
from ..exceptions import DivergenceWarning
from ..sampling import ShuffledBatchSampler
from ..utils._deprecation import renamed_method
from ..utils._docstrings import render_entries
from ..utils._memory import chunk_rows
from ..utils._params import add_keyword_parameters
from ..utils._persistence import VersionedStateMixin
from ._callbacks import Callback, EarlyStopping, LRScheduler, ProgressBar
from ._data import RowSubset, TrainingInputs, memory_mapped
from ._device import available_device, resolve_device
from ._distributed import current_context, mean_over_ranks, rank_device
from ._optim import RowSparseOptimizer
from ._persistence import (
    TORCH_STATE_KEY,
    SavedModule,
    _SerializedTorch,  # noqa: F401 (named by files of skrank before 0.2, which it refuses)
    load_weights,
    matches_weights,
    module_weights,
    tensor_from_state,
    tensor_state,
)
from ._sparse import sparse_linear_layers

__all__ = [
    "ENGINE_DEFAULTS",
    "TORCH_ATTRIBUTE_DOCS",
    "TORCH_INPUT_DOCS",
    "TORCH_PARAMETER_CONSTRAINTS",
    "TORCH_PARAMETER_DOCS",
    "BaseTorchEstimator",
]

_PRECISIONS = {"float32": None, "bfloat16": torch.bfloat16}
# Bytes of the network's work a value of an image item takes at inference: the widest
# activation of a small convolutional network (32 float32 channels of a one-channel item at
# full resolution, as ConvNet's first block) is 128 bytes a value of its input.
_IMAGE_BYTES_PER_VALUE = 128

#: Documentation of the parameters every torch estimator shares, inserted into their docstrings
#: (``{shared_parameters}``) with each estimator's own defaults.
TORCH_PARAMETER_DOCS = {
    "optimizer": ('{"sgd", "adam", "adamw"}', "Optimiser of the network."),
    "learning_rate": ("float", "Initial learning rate."),
    "momentum": ("float", "Momentum of SGD (ignored by Adam and AdamW)."),
    "weight_decay": ("float", "L2 penalty (decoupled for AdamW)."),
    "lr_milestones": (
        "array-like of int or None",
        "Epochs after which the learning rate is multiplied by ``lr_decay`` (a step decay, run by "
        "an :class:`~skrank.nn.LRScheduler` callback).",
    ),
    "lr_decay": ("float", "Factor of the step decay."),
    "batch_size": ("int", "Items per mini-batch."),
    "max_epochs": ("int", "Maximum number of passes over the training data."),
    "tol": (
        "float or None",
        "Smallest improvement of the monitored quantity (the training loss, or the validation "
        "score with ``early_stopping``) that resets the patience of ``n_iter_no_change`` epochs "
        "(an :class:`~skrank.nn.EarlyStopping` callback). None trains exactly ``max_epochs`` "
        "epochs, with no convergence test and no warning.",
    ),
    "n_iter_no_change": ("int", "Epochs without an improvement of ``tol`` before stopping."),
    "early_stopping": (
        "bool",
        "Monitor the validation score (needs ``validation_fraction``) instead of the training "
        "loss, and keep the weights of the best epoch. :ref:`names` says why the torch "
        "estimators' defaults differ.",
    ),
    "validation_fraction": (
        "float or None",
        "Fraction of the training data held out to compute a validation score each epoch "
        "(``history_``), stratified by class when possible.",
    ),
    "warm_start": (
        "bool",
        "Continue from the previous fit's weights and state for ``max_epochs`` more epochs "
        "instead of starting anew; with a :class:`~skrank.nn.Checkpoint` whose file exists, "
        "resume the saved run up to ``max_epochs`` epochs in all.",
    ),
    "callbacks": (
        "list of skrank.nn.Callback or None",
        "Callbacks called during ``fit`` (:class:`~skrank.nn.Callback`), after those built from "
        "``lr_milestones``, ``tol`` and ``verbose``. They are copied at the start of ``fit``; "
        "the copies in use are ``callbacks_``.",
    ),
    "precision": (
        '{"float32", "bfloat16"}',
        "Precision of the forward pass: ``bfloat16`` runs it under :func:`torch.autocast` (the "
        "weights and the loss's own arithmetic stay float32). It speeds up large networks on "
        "recent GPUs and slows small ones on CPUs.",
    ),
    "compile": (
        "bool",
        "Train with the module compiled by :func:`torch.compile` (a one-off compilation cost "
        "of seconds to minutes; pays off on GPUs for long runs).",
    ),
    "device": (
        "str or torch.device",
        '``"auto"`` (CUDA when available, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, '
        "... The training data are put on the device once when they fit in half of its free "
        "memory, and streamed from pinned host memory otherwise. On the CPU, training and "
        "prediction run on torch's threads: set their number with "
        ":func:`torch.set_num_threads` (and numpy's and scipy's, for the parts that use them, "
        "with ``threadpoolctl``; see :ref:`threads`).",
    ),
    "num_workers": (
        "int",
        "Worker processes of the :class:`torch.utils.data.DataLoader` that reads the items of a "
        "torch Dataset or of image files (``SOPRCEmbedder``'s ``X``) at ``fit``, validation and "
        "``transform``, decoding and transforming the next batches while the network trains on "
        "this one (0: the main process). Arrays and sparse matrices (every input of "
        "``SNMClassifier``) are read by the main process whatever its value. The model does not "
        "depend on it.",
    ),
    "verbose": ("int", "Show a progress bar over epochs (a :class:`~skrank.nn.ProgressBar`)."),
    "random_state": (
        "int, RandomState instance or None",
        "Seeds the weights, the batches, every draw of the training step and the validation split.",
    ),
}

#: Documentation of the fitted attributes every torch estimator shares.
#: Entries of the torch estimators' method docstrings (markers of ``fill_docs``).
TORCH_INPUT_DOCS = {
    "training_X": (
        "X",
        "{array-like, sparse matrix} of shape (n_samples, n_features)",
        "Training items; a sparse matrix is densified one mini-batch at a time. The network "
        "computes in float32: the largest absolute value must lie in [2^-63, 2^63] (about "
        "1.1e-19 to 9.2e18), or an error asks to scale ``X``.",
    ),
    "X": ("X", "{array-like, sparse matrix} of shape (n_samples, n_features)", "Inputs."),
    "onnx_path": (
        "path",
        "str or os.PathLike",
        'The file to write (a ``.onnx`` file; weights beyond 1 GiB go to ``path + ".data"`` '
        "beside it).",
    ),
    "opset_version": (
        "opset_version",
        "int or None",
        "The ONNX operator set; None: the exporter's default.",
    ),
    "onnx_written": ("path", "str", "The file written."),
}

TORCH_ATTRIBUTE_DOCS = {
    "history_": (
        "list of dict",
        "One record per epoch: ``epoch``, ``loss`` (mean training loss), ``learning_rate`` (of "
        "the first optimiser, during the epoch), ``duration`` (seconds) and, with "
        "``validation_fraction``, ``validation_score``; callbacks may add entries.",
    ),
    "n_iter_": (
        "int",
        "Epochs run by the last ``fit`` (counting epochs resumed from a checkpoint).",
    ),
    "converged_": ("bool", "Whether the convergence test (``tol``) stopped training."),
    "device_": ("str", "The device the model was trained on."),
    "optimizers_": ("list of torch.optim.Optimizer", "The optimisers of the last fit."),
    "callbacks_": ("list of skrank.nn.Callback", "The callbacks of the last fit."),
}

#: The engine's parameters with their defaults, in signature order. A subclass changes
#: defaults with a class attribute ``engine_defaults`` (a dict of some of these names).
ENGINE_DEFAULTS = {
    "optimizer": "adam",
    "learning_rate": 1e-3,
    "momentum": 0.9,
    "weight_decay": 0.0,
    "lr_milestones": None,
    "lr_decay": 0.1,
    "batch_size": 256,
    "max_epochs": 20,
    "tol": None,
    "n_iter_no_change": 5,
    "early_stopping": False,
    "validation_fraction": None,
    "warm_start": False,
    "callbacks": None,
    "precision": "float32",
    "compile": False,
    "device": "auto",
    "num_workers": 0,
    "verbose": 0,
    "random_state": None,
}

#: The parameter constraints of the engine's parameters (scikit-learn's
#: ``_parameter_constraints`` form): a subclass merges them into its own,
#: ``_parameter_constraints = {**TORCH_PARAMETER_CONSTRAINTS, "margin": [...], ...}``.
TORCH_PARAMETER_CONSTRAINTS = {
    "optimizer": [StrOptions({"sgd", "adam", "adamw"})],
    "learning_rate": [Interval(Real, 0, None, closed="neither")],
    "momentum": [Interval(Real, 0, 1, closed="left")],
    "weight_decay": [Interval(Real, 0, None, closed="left")],
    "lr_milestones": ["array-like", None],
    "lr_decay": [Interval(Real, 0, 1, closed="right")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "max_epochs": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0, None, closed="left"), None],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
    "early_stopping": ["boolean"],
    "validation_fraction": [Interval(Real, 0, 1, closed="neither"), None],
    "warm_start": ["boolean"],
    "callbacks": [list, None],
    "precision": [StrOptions(set(_PRECISIONS))],
    "compile": ["boolean"],
    "device": [str, torch.device],
    "num_workers": [Interval(Integral, 0, None, closed="left")],
    "verbose": ["verbose"],
    "random_state": ["random_state"],
}


class BaseTorchEstimator(VersionedStateMixin, BaseEstimator):
    """Base class and training engine of skrank's torch estimators.

    ``fit`` of a subclass validates its input and calls :meth:`fit_loop`, which builds the
    network, the criterion, the optimisers and the batch sampler through the methods below,
    then trains epoch by epoch. Each of these methods is a documented extension point: a new
    estimator overrides :meth:`initialize_module` and :meth:`get_loss` (and, as needed, the
    others); see the gallery example "A new estimator on the training engine".

    ==============================  =============================================================
    method                          default
    ==============================  =============================================================
    :meth:`initialize_module`       none: must be overridden
    :meth:`initialize_weights`      nothing (weights as the module initialised them)
    :meth:`initialize_criterion`    None (the loss is computed in :meth:`get_loss`)
    :meth:`initialize_optimizers`   one SGD, Adam or AdamW over the trainable parameters
    :meth:`prepare_targets`         ``y`` as a tensor on the training device
    :meth:`get_batch_sampler`       :class:`~skrank.sampling.ShuffledBatchSampler`
    :meth:`get_loss`                none: must be overridden
    :meth:`train_step`              zero the gradients, :meth:`get_loss`, backward, step
    :meth:`run_single_epoch`        :meth:`set_training`, then :meth:`train_step` over the
                                    epoch's batches
    :meth:`set_training`            ``module_`` and ``criterion_`` in training mode
    :meth:`validation_score`        none (needed with ``validation_fraction``)
    :meth:`get_default_callbacks`   from ``lr_milestones``, ``tol`` and ``verbose``
    :meth:`rebuild_module`          None: modules are saved whole (see below)
    ==============================  =============================================================

    The engine keeps the training step free of host synchronisation: the data and each epoch's
    batch indices are on the device, the epoch's loss is accumulated there and read once per
    epoch, when the engine also checks that loss and weights are finite (a divergence restores
    the last finite epoch's weights with a :class:`~skrank.exceptions.DivergenceWarning`).
    A ``KeyboardInterrupt`` during ``fit`` ends training after restoring the weights of the last
    complete epoch, with a warning: the estimator is fitted and usable.

    Fitted estimators save with pickle, joblib or skops and load on the CPU when the machine has
    no GPU; the parameters a subclass names in its class attribute ``training_only_parameters``
    are saved as None. The modules that :meth:`rebuild_module` builds are saved as numpy arrays
    and rebuilt on load; other modules are saved whole and loaded with
    ``torch.load(weights_only=True)``, allowing the classes they are made of (see
    :ref:`persistence`). A file written by another skrank version loads with an
    :class:`~skrank.exceptions.InconsistentVersionWarning`.

    A subclass's ``__init__`` declares its own parameters and ends with ``**engine_parameters``
    (its body ``store_parameters(self, locals())``): the engine adds the shared parameters below
    to its signature, where scikit-learn's ``get_params``, ``clone`` and ``repr``, ``help`` and
    the docs read them, with the defaults of :data:`ENGINE_DEFAULTS` updated by the class
    attribute ``engine_defaults`` (e.g. ``engine_defaults = {"batch_size": 128}``). An
    ``__init__`` may instead list every parameter itself. A class attribute
    ``component_parameters`` (a :class:`~skrank.nn.ComponentParameters`) adds, before
    the engine's, the keyword parameters the estimator takes from the loss or network it builds
    (documented by the marker ``{component_parameters}``). Subclasses merge
    :data:`TORCH_PARAMETER_CONSTRAINTS` into their ``_parameter_constraints`` and document the
    shared parameters with ``{shared_parameters}`` (:data:`TORCH_PARAMETER_DOCS`).

    A subclass's ``fit`` and steps use the engine's public helpers, documented below:
    :meth:`warm_starting`, :meth:`set_classes` and :meth:`split_validation` before
    :meth:`fit_loop`; :attr:`training_device`, :attr:`training_context`,
    :meth:`shared_random_state` and :meth:`optimizers_for` during the fit; :meth:`forward`
    and :meth:`inference_device` to predict. Its members whose names start with ``_`` are the
    engine's own, free to change between versions. The parameters:

    {shared_parameters}

    Attributes
    ----------
    module_ : torch.nn.Module
        The trained network.
    criterion_ : torch.nn.Module or None
        The loss module (with its state, e.g. SOPRC's auxiliary vectors).
    {shared_attributes}
    """

    #: Parameters a saved estimator stores as None, so that loading it needs, and runs, nothing
    #: of theirs: those that serve training only (e.g. a data augmentation) and callables of
    #: the user's that a loaded model is given again where needed (e.g. a transform of items).
    training_only_parameters = ()

    _torch_parameter_constraints = TORCH_PARAMETER_CONSTRAINTS  # the name before 0.2

    # The helpers' former private names, served for one release.
    _split_validation = renamed_method("_split_validation", "split_validation")
    _set_classes = renamed_method("_set_classes", "set_classes")
    _warm_starting = renamed_method("_warm_starting", "warm_starting")
    _network_optimizers = renamed_method("_network_optimizers", "optimizers_for")
    _shared_random_state = renamed_method("_shared_random_state", "shared_random_state")
    _inference_device = renamed_method("_inference_device", "inference_device")
    _forward_in_chunks = renamed_method("_forward_in_chunks", "forward", as_numpy=True)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        defaults = dict(ENGINE_DEFAULTS)
        for klass in reversed(cls.__mro__):
            defaults.update(vars(klass).get("engine_defaults", {}))
        unknown = sorted(set(defaults) - set(ENGINE_DEFAULTS))
        if unknown:
            raise TypeError(
                f"{cls.__name__}.engine_defaults names {unknown}, which are not parameters of "
                f"the engine; those are {list(ENGINE_DEFAULTS)}."
            )
        component = getattr(cls, "component_parameters", None)
        taken = {} if component is None else component.defaults
        if set(taken) & set(defaults):
            raise TypeError(
                f"{cls.__name__}.component_parameters names engine parameters "
                f"{sorted(set(taken) & set(defaults))}."
            )
        add_keyword_parameters(cls, {**taken, **defaults})

    # ------------------------------------------------------------------ extension points
    def initialize_module(self, n_features):
        """Return the ``torch.nn.Module`` to train (stored as ``module_``).

        Parameters
        ----------
        n_features : int or tuple of int
            Number of input features; for image items (a 4-D ``X``), the shape of an item,
            ``(channels, height, width)``, which the module's batches have.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement initialize_module.")

    def initialize_weights(self, X, y):
        """Start the weights of the new ``module_`` from the training data (default: nothing).

        Called once per fit, right after :meth:`initialize_module` and before
        :meth:`initialize_criterion`, the module still on the CPU; not called when a warm start
        continues the previous fit. An override sets the weights in place (under
        ``torch.no_grad()``), e.g. each class's output row at the mean of its inputs, as
        :class:`~skrank.SNMClassifier` starts its label embeddings at their centroids. Its
        random draws come from torch's generator, seeded from ``random_state``.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix or skrank.nn.RowSubset of shape (n_samples, n_features)
            The training inputs given to :meth:`fit_loop` (without the validation part).
        y : object
            The training targets given to :meth:`fit_loop`.
        """

    def initialize_criterion(self, y):
        """Return the loss module (``criterion_``), possibly with state of its own, or None.

        Parameters
        ----------
        y : object
            The training targets as passed to :meth:`fit_loop`.
        """
        return None

    def initialize_optimizers(self):
        """Return the list of optimisers (``optimizers_``) of ``module_`` and ``criterion_``.

        The default is one optimiser over their trainable parameters, as set by ``optimizer``,
        ``learning_rate``, ``momentum`` and ``weight_decay``, and one
        :class:`~skrank.nn.RowSparseOptimizer` per :class:`~skrank.nn.SparseLinear` weight
        (see :meth:`optimizers_for`).
        """
        parameters = list(self.module_.parameters())
        if self.criterion_ is not None:
            parameters += list(self.criterion_.parameters())
        return self.optimizers_for([p for p in parameters if p.requires_grad])

    def optimizers_for(self, parameters, sparse_method=None, sparse_lr=None):
        """The optimisers of ``parameters``, as :meth:`initialize_optimizers` builds them.

        The weights of the module's :class:`~skrank.nn.SparseLinear` layers each get a
        :class:`~skrank.nn.RowSparseOptimizer` that updates only the rows a step read; the
        other parameters get one optimiser as set by ``optimizer``, ``learning_rate``,
        ``momentum`` and ``weight_decay``. An override of :meth:`initialize_optimizers` that
        adds optimisers of its own (e.g. for a table it reads row by row) builds the rest here.

        Parameters
        ----------
        parameters : list of torch.nn.Parameter
            The trainable parameters (of ``module_`` and ``criterion_``).
        sparse_method : {"sparse_adam", "adagrad", "rowwise_adagrad", "sgd"} or None, \
default=None
            The rule of the sparse layers' optimisers; None: lazy Adam for ``optimizer="adam"``
            or ``"adamw"``, plain SGD for ``"sgd"`` (momentum would decay every row).
        sparse_lr : float or None, default=None
            Their learning rate; None: ``learning_rate``.

        Returns
        -------
        optimizers : list of torch.optim.Optimizer
            The dense parameters' optimiser first.
        """
        row_sparse = {id(layer.weight) for layer in sparse_linear_layers(self.network_).values()}
        dense = [p for p in parameters if id(p) not in row_sparse]
        if sparse_method is None:
            sparse_method = "sgd" if self.optimizer == "sgd" else "sparse_adam"
        return [self._make_optimizer(dense)] + [
            RowSparseOptimizer(
                p,
                method=sparse_method,
                lr=self.learning_rate if sparse_lr is None else sparse_lr,
                weight_decay=self.weight_decay,
                synchronize=self._context.active,
            )
            for p in parameters
            if id(p) in row_sparse
        ]

    def _make_optimizer(self, parameters):
        # The fused kernels update every parameter in one operation (torch's fastest form), and
        # Adam's fused step reads no step count back to the host.
        fused = self._device.type in ("cpu", "cuda")
        if self.optimizer == "sgd":
            return torch.optim.SGD(
                parameters,
                lr=self.learning_rate,
                momentum=self.momentum,
                weight_decay=self.weight_decay,
                fused=fused,
            )
        optimizer_class = torch.optim.Adam if self.optimizer == "adam" else torch.optim.AdamW
        return optimizer_class(
            parameters, lr=self.learning_rate, weight_decay=self.weight_decay, fused=fused
        )

    def prepare_targets(self, y, device):
        """Return the targets in the form :meth:`get_loss` reads (default: a tensor on ``device``).

        Parameters
        ----------
        y : object
            The training targets as passed to :meth:`fit_loop`.
        device : torch.device
            The training device.
        """
        return torch.as_tensor(np.asarray(y), device=device)

    def get_batch_sampler(self, y, device, random_state):
        """Return the sampler of each epoch's batches (an object with ``epoch()``, see
        :class:`~skrank.sampling.EpochBatches`).

        In a data-parallel fit the sampler draws the global batches, ``world_size_`` times the
        batch of one process; every rank draws the same ones and trains on its part.

        Parameters
        ----------
        y : object
            The training targets as passed to :meth:`fit_loop`.
        device : torch.device
            Where the batch indices must live (the device, or the CPU when the data are
            streamed from the host).
        random_state : numpy.random.RandomState
            The fit's random generator, to seed the sampler.
        """
        return ShuffledBatchSampler(
            _n_rows(y), self.batch_size * self.world_size_, random_state=random_state, device=device
        )

    def get_loss(self, batch, targets):
        """Return the scalar loss of a batch.

        Parameters
        ----------
        batch : skrank.nn.Batch
            The batch: ``inputs`` (rows on the device), ``indices``, ``valid`` (False for
            padding entries, whose loss must not count) and ``groups``.
        targets : object
            The output of :meth:`prepare_targets`.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement get_loss.")

    def train_step(self, batch, targets):
        """One optimisation step on a batch; returns the loss (a detached tensor).

        The forward pass runs under :func:`torch.autocast` when ``precision="bfloat16"``.
        """
        for optimizer in self.optimizers_:
            optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            loss = self.get_loss(batch, targets)
        loss.backward()
        for optimizer in self.optimizers_:
            optimizer.step()
        return loss.detach()

    def run_single_epoch(self, inputs, targets, epoch_batches):
        """Train on every batch of an epoch; return the mean loss over its items (a tensor).

        Parameters
        ----------
        inputs : skrank.nn.TrainingInputs
            The training inputs.
        targets : object
            The output of :meth:`prepare_targets`.
        epoch_batches : skrank.sampling.EpochBatches
            The epoch's batches from the sampler.
        """
        self.set_training(True)
        n_batches = epoch_batches.indices.shape[0]
        losses = torch.zeros(n_batches, device=self._device)
        for number, batch in enumerate(inputs.batches(epoch_batches, self._context)):
            self._notify("on_batch_begin", batch=batch)
            loss = self.train_step(batch, targets)
            losses[number] = loss
            self._notify("on_batch_end", batch=batch, loss=loss)
        sizes = epoch_batches.valid.sum(dim=1).to(losses.device, losses.dtype)
        # Losses of the ranks' parts: their mean over ranks weighs every part alike.
        return mean_over_ranks((losses * sizes).sum() / sizes.sum().clamp(min=1), self._context)

    def set_training(self, training=True):
        """Put ``module_`` and ``criterion_`` in training mode, or evaluation mode.

        :meth:`run_single_epoch` calls it at the start of every epoch (a validation score
        between epochs puts the module in evaluation mode). An override may keep some layers
        in evaluation mode while training, as ``SOPRCEmbedder(freeze_batchnorm=True)`` keeps
        the batch-norm layers of a pretrained backbone.

        Parameters
        ----------
        training : bool, default=True
            The mode.
        """
        self.module_.train(training)
        if self.criterion_ is not None:
            self.criterion_.train(training)

    def validation_score(self, X_val, y_val):
        """Return the validation score (higher is better) of the current model on held-out data.

        Called once per epoch when ``validation_fraction`` is set.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no validation score: implement validation_score to use "
            "validation_fraction."
        )

    def get_default_callbacks(self):
        """The callbacks the estimator's parameters ask for, called before ``callbacks``.

        An :class:`~skrank.nn.LRScheduler` (step decay) when ``lr_milestones`` is set, an
        :class:`~skrank.nn.EarlyStopping` when ``tol`` is set, a
        :class:`~skrank.nn.ProgressBar` when ``verbose`` is set.
        """
        callbacks = []
        if self.lr_milestones is not None:
            milestones = [int(m) for m in self.lr_milestones]
            callbacks.append(
                LRScheduler(
                    torch.optim.lr_scheduler.MultiStepLR, milestones=milestones, gamma=self.lr_decay
                )
            )
        if self.tol is not None:
            callbacks.append(
                EarlyStopping(
                    monitor="validation_score" if self.early_stopping else "loss",
                    tol=self.tol,
                    patience=self.n_iter_no_change,
                    restore_best_weights=self.early_stopping,
                )
            )
        if self.verbose:
            callbacks.append(ProgressBar())
        return callbacks

    # ------------------------------------------------------------------ controls for callbacks
    def stop_training(self, reason=None):
        """Ask the engine to stop after the current epoch (callbacks call this).

        Parameters
        ----------
        reason : str or None, default=None
            Recorded as ``stop_reason`` in the current epoch's history record.
        """
        self._stop_requested = True
        if reason and self.history_:
            self.history_[-1]["stop_reason"] = reason

    def snapshot_weights(self, into=None):
        """A copy (on the device) of the module's and the criterion's state.

        ``into``, an earlier snapshot, is overwritten in place where its tensors have the
        shapes of the state's (so that the weights are never held three times over).
        """
        snapshot = {}
        for name, obj in self._stateful_objects().items():
            earlier = (into or {}).get(name, {})
            snapshot[name] = {}
            for key, value in obj.state_dict().items():
                copy = earlier.get(key)
                if copy is None or copy.shape != value.shape or copy.dtype != value.dtype:
                    copy = value.detach().clone()
                else:
                    copy.copy_(value.detach())
                snapshot[name][key] = copy
        return snapshot

    def restore_weights(self, snapshot):
        """Restore a :meth:`snapshot_weights` copy."""
        for name, obj in self._stateful_objects().items():
            obj.load_state_dict(snapshot[name])

    def training_state(self):
        """Everything a run needs to continue exactly, for :class:`~skrank.nn.Checkpoint`.

        Tensors, numbers, strings, lists and dicts only: loads with ``weights_only=True``.
        """
        return {
            "estimator": type(self).__name__,
            "epochs": self.n_iter_,
            "history": copy.deepcopy(self.history_),
            "weights": self.snapshot_weights(),
            "optimizers": [optimizer.state_dict() for optimizer in self.optimizers_],
            "sampler": self.sampler_.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "callbacks": [
                callback.state_dict() if hasattr(callback, "state_dict") else None
                for callback in self.callbacks_
            ],
        }

    def load_training_state(self, state):
        """Restore a :meth:`training_state` (called by :class:`~skrank.nn.Checkpoint`)."""
        if state["estimator"] != type(self).__name__:
            raise ValueError(
                f"The checkpoint was written by {state['estimator']}, not {type(self).__name__}."
            )
        self.restore_weights(state["weights"])
        for optimizer, saved in zip(self.optimizers_, state["optimizers"], strict=True):
            optimizer.load_state_dict(saved)
        self.sampler_.load_state_dict(state["sampler"])
        torch.set_rng_state(state["torch_rng"].cpu())
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda_rng"]])
        self.history_ = list(state["history"])
        self.n_iter_ = int(state["epochs"])
        for callback, saved in zip(self.callbacks_, state["callbacks"], strict=False):
            if saved is not None and hasattr(callback, "load_state_dict"):
                callback.load_state_dict(saved)

    # ------------------------------------------------------------------ helpers of fit
    def warm_starting(self):
        """Whether this fit continues the previous one: ``warm_start`` and a trained module.

        A subclass's ``fit`` validates the inputs of such a fit against the previous fit's
        (``validate_data(..., reset=not self.warm_starting())``): a different number of
        features is then a clear error, not a shape error inside the network, and leaves the
        fitted estimator as it was.

        Returns
        -------
        warm_starting : bool
        """
        return bool(self.warm_start) and hasattr(self, "module_")

    def set_classes(self, classes):
        """Set ``classes_``; a warm start must see the previous fit's classes.

        Parameters
        ----------
        classes : ndarray of shape (n_classes,)
            The sorted class labels of the training targets.

        Raises
        ------
        ValueError
            When this fit continues the previous one (``warm_start``) with other classes.
        """
        if (
            self.warm_start
            and hasattr(self, "classes_")
            and not np.array_equal(classes, self.classes_)
        ):
            raise ValueError(
                "warm_start=True needs the classes of the previous fit; got different classes."
            )
        self.classes_ = classes

    def _check_training_parameters(self):
        if self.early_stopping and self.validation_fraction is None:
            raise ValueError(
                "early_stopping=True needs a validation set: set validation_fraction, e.g. 0.1, "
                "or early_stopping=False."
            )
        if self.lr_milestones is not None:
            milestones = np.asarray(self.lr_milestones)
            if (
                milestones.ndim != 1
                or not np.all(milestones == np.round(milestones))
                or (milestones.size and milestones.min() < 1)
            ):
                raise ValueError(
                    f"lr_milestones must be positive epoch numbers, got {self.lr_milestones!r}."
                )
        for callback in self.callbacks or []:
            if not isinstance(callback, Callback):
                raise TypeError(
                    f"callbacks must be skrank.nn.Callback instances; got {callback!r} of type "
                    f"{type(callback).__name__}."
                )

    def split_validation(self, X, y, *, stratify=None):
        """Hold out ``validation_fraction`` of ``(X, y)`` for :meth:`validation_score`.

        The split is random, seeded by ``random_state`` (the same on every rank of a
        data-parallel fit). The parts of a memory-mapped ``X`` are
        :class:`~skrank.nn.RowSubset` views of it, never copies, and those of an
        :class:`~skrank.nn.ItemDataset` subsets of it, which read nothing.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix or skrank.nn.ItemDataset with n_samples rows
            Validated training inputs.
        y : array-like or scipy.sparse matrix with n_samples rows
            Targets, indexable by rows.
        stratify : array-like of shape (n_samples,) or None, default=None
            Class labels to stratify the split on.

        Returns
        -------
        X_train, y_train : the training part
        validation : tuple (X_val, y_val) or None
            The held-out part; None when ``validation_fraction`` is None (``X_train`` and
            ``y_train`` are then ``X`` and ``y``).
        """
        if self.validation_fraction is None:
            return X, y, None
        try:
            train, held_out = train_test_split(
                np.arange(X.shape[0]),
                test_size=self.validation_fraction,
                random_state=self.shared_random_state(),
                stratify=stratify,
            )
        except ValueError as error:  # sklearn's message names test_size, not the parameter
            what = (
                "a stratified split keeps every class in both parts; "
                if stratify is not None
                else ""
            )
            raise ValueError(
                f"validation_fraction={self.validation_fraction} cannot split these "
                f"{X.shape[0]} training items: {error}. Choose another validation_fraction "
                f"({what}None holds nothing out)."
            ) from error
        if memory_mapped(X):
            return RowSubset(X, train), y[train], (RowSubset(X, held_out), y[held_out])
        return X[train], y[train], (X[held_out], y[held_out])

    def fit_loop(self, X, y, validation=None):
        """Train ``module_`` on ``(X, y)``: what a subclass's ``fit`` calls after its checks.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix or skrank.nn.ItemDataset with n_samples rows
            Validated training inputs: feature rows, image items, or the items of a Dataset or
            of image files.
        y : object
            Training targets, as :meth:`prepare_targets` and :meth:`get_batch_sampler` read
            them (e.g. encoded labels).
        validation : tuple (X_val, y_val) or None, default=None
            Held-out data for :meth:`validation_score`.

        Returns
        -------
        self : BaseTorchEstimator
        """
        self._check_training_parameters()
        device = resolve_device(self.device)
        self._context = current_context(device)
        device = rank_device(device, self._context)
        self.world_size_ = self._context.world_size
        rng = self.shared_random_state()
        seed = int(rng.randint(np.iinfo(np.int32).max))
        fork_devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=fork_devices):
            torch.manual_seed(seed)
            self._train(X, y, validation, device, rng)
        return self

    def shared_random_state(self):
        """``random_state`` as a new generator, the same on every rank of a data-parallel fit.

        Draw a fit's random choices that are not torch's (e.g. a sample of rows) from it: an
        unseeded fit takes rank 0's seed, so that the ranks draw alike.

        Returns
        -------
        random_state : numpy.random.RandomState
        """
        context = current_context(resolve_device(self.device))
        if not context.active or self.random_state is not None:
            return check_random_state(self.random_state)
        seed = torch.randint(np.iinfo(np.int32).max, (1,))
        torch.distributed.broadcast(seed, src=0)
        return np.random.RandomState(int(seed))

    def _train(self, X, y, validation, device, rng):
        continuing = self.warm_starting()
        self._device = device
        self.device_ = str(device)
        if not continuing:
            self.module_ = self.initialize_module(_item_size(X))
            self.initialize_weights(X, y)
            self.criterion_ = self.initialize_criterion(y)
            self.history_ = []
        self.module_.to(device)
        if self.criterion_ is not None:
            self.criterion_.to(device)
        inputs = self._training_inputs(X, device)
        targets = self.prepare_targets(y, device)
        self.optimizers_ = self.initialize_optimizers()
        self.sampler_ = self.get_batch_sampler(y, inputs.index_device, rng)
        self.callbacks_ = self._callbacks_for_fit()
        if self.compile:
            self.module_.compile()
        if self._context.active:
            # Gradients are averaged over the ranks; module_ is the wrapper until fit returns.
            # The row-sparse optimisers synchronise the weights of SparseLinear layers.
            torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
                self.module_,
                [f"{name}.weight" for name in sparse_linear_layers(self.module_)],
            )
            self.module_ = torch.nn.parallel.DistributedDataParallel(
                self.module_, device_ids=[device] if device.type == "cuda" else None
            )
        self.converged_ = False
        self.n_iter_ = 0
        self._stop_requested = False
        self._notify("on_train_begin", X=X, y=y, validation=validation)
        # The weights to fall back on after a divergence or an interrupt: none kept while a
        # callback holds weights that it restores at the end (the best epoch's).
        last_finite = self._last_finite_weights(None)
        interrupted = False
        try:
            while self.n_iter_ < self.max_epochs and not self._stop_requested:
                start = time.perf_counter()
                self._notify("on_epoch_begin", epoch=self.n_iter_ + 1)
                learning_rate = self.optimizers_[0].param_groups[0]["lr"]
                mean_loss = self.run_single_epoch(inputs, targets, self.sampler_.epoch())
                loss, finite = self._read_epoch(mean_loss)
                if not finite:
                    if last_finite is not None:
                        self.restore_weights(last_finite)
                    interrupted = True
                    warnings.warn(
                        f"{type(self).__name__}: the loss or the weights became non-finite in "
                        f"epoch {len(self.history_) + 1}; training stopped and the weights of the "
                        "last finite epoch were kept. Try a smaller learning_rate.",
                        DivergenceWarning,
                        stacklevel=4,
                    )
                    break
                self.n_iter_ += 1
                self._notify("on_train_epoch_end", epoch=self.n_iter_)
                record = {"epoch": len(self.history_) + 1, "loss": loss}
                record["learning_rate"] = learning_rate
                if validation is not None:
                    record["validation_score"] = float(self.validation_score(*validation))
                self.history_.append(record)
                last_finite = self._last_finite_weights(last_finite)
                record["duration"] = time.perf_counter() - start
                self._notify("on_epoch_end", epoch=self.n_iter_, record=record)
        except KeyboardInterrupt:
            if last_finite is not None:
                self.restore_weights(last_finite)
            interrupted = True
            warnings.warn(
                f"{type(self).__name__}: fit was interrupted; the estimator keeps the weights of "
                f"the last complete epoch ({self.n_iter_} of max_epochs={self.max_epochs}) and "
                "its history.",
                UserWarning,
                stacklevel=4,
            )
        finally:
            self.module_ = self.network_
            self.module_.eval()
            if self.criterion_ is not None:
                self.criterion_.eval()
            if self.compile:
                # Back to the eager module: a compiled one neither pickles nor moves devices.
                self.module_._compiled_call_impl = None
        self._notify("on_train_end", interrupted=interrupted)

    def _last_finite_weights(self, earlier):
        """A snapshot of the weights (into ``earlier``), or None where a callback restores
        weights of its own when training ends."""
        if any(getattr(c, "restores_weights", bool)() for c in self.callbacks_):
            return None
        return self.snapshot_weights(into=earlier)

    def _callbacks_for_fit(self):
        """The default callbacks, then copies of the user's, the progress bar last (it shows
        the record once every other callback has written to it)."""
        defaults = self.get_default_callbacks()
        bars = [callback for callback in defaults if isinstance(callback, ProgressBar)]
        if self._context.rank != 0:
            bars = []  # one progress bar per fit, on rank 0
        others = [callback for callback in defaults if not isinstance(callback, ProgressBar)]
        return others + copy.deepcopy(list(self.callbacks or [])) + bars

    def _read_epoch(self, mean_loss):
        """The epoch's mean loss and whether it and the weights are finite: one host read."""
        flags = [torch.isfinite(mean_loss)]
        # A tensor is finite where its extremes are (NaN propagates to both): a reduction
        # without a temporary the size of the weights.
        flags += [
            torch.isfinite(torch.stack(torch.aminmax(value.detach()))).all()
            for obj in self._stateful_objects().values()
            for value in obj.state_dict().values()
            if value.is_floating_point() and value.numel()
        ]
        summary = torch.stack([mean_loss.float(), torch.stack(flags).all().float()])
        loss, finite = mean_over_ranks(summary, self._context).tolist()
        return loss, finite == 1.0

    def _notify(self, hook, **kwargs):
        for callback in self.callbacks_:
            try:
                getattr(callback, hook)(self, **kwargs)
            except KeyboardInterrupt:
                raise
            except Exception as error:
                raise RuntimeError(
                    f"The callback {callback!r} failed in {hook}: {type(error).__name__}: {error}"
                ) from error

    def _autocast(self):
        dtype = _PRECISIONS[self.precision]
        return torch.autocast(self._device.type, dtype=dtype, enabled=dtype is not None)

    @property
    def network_(self):
        """The trained network: ``module_``, or the network inside it while a data-parallel
        fit wraps it in ``DistributedDataParallel``."""
        module = self.module_
        return (
            module.module
            if isinstance(module, torch.nn.parallel.DistributedDataParallel)
            else module
        )

    def _stateful_objects(self):
        objects = {"module_": self.network_}
        if self.criterion_ is not None:
            objects["criterion_"] = self.criterion_
        return objects

    @property
    def training_device(self):
        """The :class:`torch.device` of the fit in progress (or of the last one): where
        ``module_``, ``criterion_`` and the training data are. Set when :meth:`fit_loop`
        starts; the hooks it calls create their tensors there."""
        return self._device

    @property
    def training_context(self):
        """This process's place in the fit in progress (or the last one), a
        :class:`~skrank.nn.DistributedContext`: ``rank`` and ``world_size`` (0 and 1 unless
        the fit is data-parallel) and ``active`` (several processes train together). Set when
        :meth:`fit_loop` starts; :func:`~skrank.nn.current_context` gives it before."""
        return self._context

    # ------------------------------------------------------------------ inference
    def inference_device(self):
        """The device predictions run on: the training device when this machine has it, else
        the CPU (a model fitted on a GPU and loaded on a machine without one).

        Returns
        -------
        device : torch.device
        """
        return available_device(self.device_)

    def forward(self, X, chunk_size=None, *, as_numpy=False):
        """``module_`` applied to ``X`` in evaluation mode, in chunks, without gradients.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n_samples, n_features), ndarray of \
shape (n_samples, channels, height, width), or skrank.nn.ItemDataset
            Validated inputs: feature rows or image items, or the items of a Dataset or of image
            files (read by ``num_workers`` processes).
        chunk_size : int or None, default=None
            Rows per chunk; None uses ``max(batch_size, 1024)`` for feature rows, and for
            images as many as fit scikit-learn's ``working_memory`` at 128 bytes a value of an
            item (the widest activation of a small convolutional network: 32 float32
            channels of a one-channel image).
        as_numpy : bool, default=False
            Return a numpy array (on the host) instead of a tensor.

        Returns
        -------
        outputs : torch.Tensor or ndarray of shape (n_samples, n_outputs), float32
            A tensor on :meth:`inference_device` (an array with ``as_numpy``).
        """
        device = self.inference_device()
        network = self.network_.to(device)
        network.eval()
        if chunk_size is None:
            chunk_size = max(self.batch_size, 1024)
            if X.ndim > 2:
                item_bytes = _IMAGE_BYTES_PER_VALUE * int(np.prod(X.shape[1:]))
                chunk_size = chunk_rows(X.shape[0], item_bytes)
        outputs, start = None, 0
        with torch.no_grad():
            for rows in self._training_inputs(X, device).chunks(chunk_size):
                chunk = network(rows)
                if outputs is None:  # filled in place: no second copy to concatenate
                    outputs = chunk.new_empty((X.shape[0], *chunk.shape[1:]))
                outputs[start : start + chunk.shape[0]] = chunk
                start += chunk.shape[0]
        return outputs.cpu().numpy() if as_numpy else outputs

    def _training_inputs(self, X, device):
        # An __init__ that lists every parameter itself, written before num_workers, reads in
        # the main process.
        workers = getattr(self, "num_workers", 0)
        return TrainingInputs(X, device, sparse_rows=self._reads_sparse_rows(), num_workers=workers)

    def _reads_sparse_rows(self):
        """Whether the network reads :class:`~skrank.nn.SparseRows` (``accepts_sparse_rows``)."""
        return bool(getattr(self.network_, "accepts_sparse_rows", False))

    # ------------------------------------------------------------------ persistence
    def rebuild_module(self, name):
        """Return an untrained module of the architecture of the fitted attribute ``name``, or
        None if the estimator cannot build it again.

        Saving a fitted estimator (pickle, joblib, skops) stores each module this method can
        build as its weights, numpy arrays; loading builds it here and fills it with them, so
        that loading runs no code but this method. A module it returns None for (the default,
        e.g. a network the user passed) is saved whole by :func:`torch.save` and loaded with
        ``torch.load(weights_only=True)`` allowing the classes it is made of, which skops then
        lists as types to trust (see :ref:`persistence`).

        Called on the fitted estimator, its parameters and other fitted attributes set, under
        ``torch.device("meta")`` (build with torch's factory functions, on no explicit device).

        Parameters
        ----------
        name : str
            The attribute: ``"module_"``, ``"criterion_"``, or the name of another attribute
            (or parameter) holding a module.

        Returns
        -------
        module : torch.nn.Module or None
        """
        return None

    def __getstate__(self):
        state = dict(super().__getstate__())
        # The training run's optimisers, samplers, device and process group: a fit rebuilds them.
        for key in ("optimizers_", "sampler_", "_device", "_context"):
            state.pop(key, None)
        for key in self.training_only_parameters:
            state[key] = None
        saved = {}
        for key, value in list(state.items()):
            if isinstance(value, torch.nn.Module):
                saved[key] = self._saved_module(key, value)
            elif isinstance(value, torch.Tensor):
                saved[key] = tensor_state(value)
            else:
                continue
            del state[key]
        state[TORCH_STATE_KEY] = saved
        return state

    def _saved_module(self, name, module):
        """The weights of a module :meth:`rebuild_module` builds again, else the whole module."""
        weights = module_weights(module)
        with torch.device("meta"):
            rebuilt = self.rebuild_module(name)
        if rebuilt is not None and matches_weights(rebuilt, weights):
            return weights
        return SavedModule(module)

    def __setstate__(self, state):
        state = dict(state)
        saved = state.pop(TORCH_STATE_KEY, {})
        super().__setstate__(state)
        for key, value in saved.items():
            if isinstance(value, SavedModule):
                loaded = value.load()
            elif isinstance(value, dict):
                loaded = load_weights(lambda key=key: self._rebuilt(key), value, key)
            else:
                loaded = tensor_from_state(value, key)
            setattr(self, key, loaded)

    def _rebuilt(self, name):
        module = self.rebuild_module(name)
        if module is None:
            raise ValueError(
                f"The file stores the weights of {type(self).__name__}.{name}, which "
                f"{type(self).__name__}.rebuild_module cannot build."
            )
        return module


def _n_rows(y):
    return y.shape[0] if hasattr(y, "shape") else len(y)


def _item_size(X):
    """What :meth:`BaseTorchEstimator.initialize_module` receives: the number of features of
    feature rows, the shape of an item of images."""
    return X.shape[1] if X.ndim == 2 else tuple(int(side) for side in X.shape[1:])


if BaseTorchEstimator.__doc__ is not None:  # None under python -OO
    BaseTorchEstimator.__doc__ = BaseTorchEstimator.__doc__.replace(
        "    {shared_parameters}", render_entries(TORCH_PARAMETER_DOCS)
    ).replace("    {shared_attributes}", render_entries(TORCH_ATTRIBUTE_DOCS))
