"""The training core shared by skrank's torch estimators.

:class:`BaseTorchEstimator` owns everything that is not specific to a loss: seeding, device
placement, optimiser and learning-rate schedule, the epoch loop with a progress bar, the history,
the convergence test and early stopping, the guard against divergence, warm starts, chunked
inference and persistence (pickling a model fitted on a GPU yields one that loads on a CPU).

A subclass supplies the model and the loss through four hooks:

``_build_module(n_features)``
    The ``torch.nn.Module`` to train (``module_``).
``_build_criterion(targets)``
    A ``torch.nn.Module`` computing the loss, possibly with state of its own (``criterion_``), or
    ``None``.
``_batch_sampler(targets, random_state)``
    An iterable that yields, each time it is iterated, the index arrays of one epoch's batches.
``_batch_loss(inputs, targets, indices)``
    The scalar loss of a batch, from the input rows (a tensor on the device) and the targets.

and optionally ``_validation_score(X_val, y_val)`` (higher is better) and
``_build_optimizers(parameters)``.
"""

import io
import time
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state
from tqdm.auto import tqdm

from .._compat import Interval, StrOptions
from ..exceptions import DivergenceWarning
from ._device import BatchSource, available_device, resolve_device

_TORCH_PARAMETER_CONSTRAINTS = {
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
    "device": [str, torch.device],
    "verbose": ["verbose"],
    "random_state": ["random_state"],
}


class BaseTorchEstimator(BaseEstimator):
    """Base class of the torch estimators: training loop, history, devices and persistence.

    Not meant to be instantiated. Subclasses declare the shared parameters in their ``__init__``
    (scikit-learn requires explicit signatures) and merge ``_torch_parameter_constraints`` into
    their ``_parameter_constraints``. The shared parameters are:

    optimizer : {"sgd", "adam", "adamw"}
        Optimiser.
    learning_rate : float
        Initial learning rate.
    momentum : float
        Momentum of SGD (ignored by Adam).
    weight_decay : float
        L2 penalty (decoupled for AdamW).
    lr_milestones : array-like of int or None
        Epochs after which the learning rate is multiplied by ``lr_decay`` (step decay).
    lr_decay : float
        Factor of the step decay.
    batch_size : int
        Mini-batch size.
    max_epochs : int
        Maximum number of passes over the training data.
    tol : float or None
        Minimum improvement of the monitored quantity (training loss, or the validation score with
        ``early_stopping``) over ``n_iter_no_change`` epochs; ``None`` trains exactly
        ``max_epochs`` epochs with no convergence test and no warning.
    n_iter_no_change : int
        Epochs without an improvement of ``tol`` before training stops.
    early_stopping : bool
        Monitor the validation score (needs ``validation_fraction``) and keep the best weights.
    validation_fraction : float or None
        Fraction of the training data held out to compute a validation score each epoch.
    warm_start : bool
        Continue from the previous fit's weights and state instead of starting anew.
    device : str or torch.device
        ``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
    verbose : int
        Show a progress bar over epochs with the loss and validation score.
    random_state : int, RandomState instance or None
        Seeds weight initialisation, batch sampling and the validation split.
    """

    _torch_parameter_constraints = _TORCH_PARAMETER_CONSTRAINTS

    # ------------------------------------------------------------------ hooks
    def _build_module(self, n_features):
        raise NotImplementedError

    def _build_criterion(self, targets):
        return None

    def _batch_sampler(self, targets, random_state):
        raise NotImplementedError

    def _batch_loss(self, inputs, targets, indices):
        raise NotImplementedError

    def _validation_score(self, X_val, y_val):
        raise NotImplementedError

    def _build_optimizers(self, parameters):
        """One optimiser over ``parameters`` as set by the shared parameters."""
        if self.optimizer == "sgd":
            optimizer = torch.optim.SGD(
                parameters,
                lr=self.learning_rate,
                momentum=self.momentum,
                weight_decay=self.weight_decay,
            )
        else:
            optimizer_class = torch.optim.Adam if self.optimizer == "adam" else torch.optim.AdamW
            optimizer = optimizer_class(
                parameters, lr=self.learning_rate, weight_decay=self.weight_decay
            )
        return [optimizer]

    # ------------------------------------------------------------------ training
    def _check_training_parameters(self):
        if self.early_stopping and self.validation_fraction is None:
            raise ValueError(
                "early_stopping=True needs a validation set: set validation_fraction, e.g. 0.1."
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

    def _split_validation(self, X, y, *, stratify=None):
        """Hold out ``validation_fraction`` of ``(X, y)``.

        Returns ``(X_train, y_train, validation)`` with ``validation = (X_val, y_val)``, or
        ``None`` when ``validation_fraction`` is None. ``y`` may be any array or sparse matrix
        indexable by rows; ``stratify`` gives class labels to stratify on.
        """
        if self.validation_fraction is None:
            return X, y, None
        train, held_out = train_test_split(
            np.arange(X.shape[0]),
            test_size=self.validation_fraction,
            random_state=check_random_state(self.random_state),
            stratify=stratify,
        )
        return X[train], y[train], (X[held_out], y[held_out])

    def _trainable_parameters(self):
        parameters = list(self.module_.parameters())
        if self.criterion_ is not None:
            parameters += list(self.criterion_.parameters())
        return [p for p in parameters if p.requires_grad]

    def _snapshot(self):
        """Copy of the weights and criterion state (to restore after divergence or at the best)."""
        return {
            name: {key: value.detach().clone() for key, value in obj.state_dict().items()}
            for name, obj in self._stateful_objects().items()
        }

    def _restore(self, snapshot):
        for name, obj in self._stateful_objects().items():
            obj.load_state_dict(snapshot[name])

    def _stateful_objects(self):
        objects = {"module_": self.module_}
        if self.criterion_ is not None:
            objects["criterion_"] = self.criterion_
        return objects

    def _weights_are_finite(self):
        return all(
            bool(torch.isfinite(value).all())
            for obj in self._stateful_objects().values()
            for value in obj.state_dict().values()
            if value.is_floating_point()
        )

    def _run_training(self, X, targets, validation=None):
        """Train ``module_`` on ``(X, targets)``; sets the fitted attributes of the core.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
            Validated training inputs.
        targets : object
            Whatever the subclass's hooks index with batch indices (e.g. encoded labels).
        validation : tuple (X_val, y_val) or None
            Held-out data for ``_validation_score``.
        """
        self._check_training_parameters()
        device = resolve_device(self.device)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        fork_devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=fork_devices):
            torch.manual_seed(seed)
            self._train_epochs(X, targets, validation, device, rng)
        return self

    def _train_epochs(self, X, targets, validation, device, rng):
        continuing = self.warm_start and hasattr(self, "module_")
        if not continuing:
            self.module_ = self._build_module(X.shape[1])
            self.criterion_ = self._build_criterion(targets)
            self.history_ = []
        self.module_.to(device)
        if self.criterion_ is not None:
            self.criterion_.to(device)
        self.device_ = str(device)

        optimizers = self._build_optimizers(self._trainable_parameters())
        milestones = [] if self.lr_milestones is None else [int(m) for m in self.lr_milestones]
        schedulers = [
            torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=self.lr_decay)
            for opt in optimizers
        ]
        sampler = self._batch_sampler(targets, rng)
        source = BatchSource(X)

        monitor_validation = self.early_stopping
        best_value, best_snapshot, epochs_without_improvement = None, None, 0
        last_finite = self._snapshot()
        self.converged_ = False
        self.n_iter_ = 0
        progress = tqdm(
            range(self.max_epochs),
            desc=type(self).__name__,
            disable=not self.verbose,
            leave=True,
        )
        for _ in progress:
            start = time.perf_counter()
            epoch_loss = self._train_one_epoch(source, targets, sampler, optimizers, device)
            if epoch_loss is None or not self._weights_are_finite():
                self._restore(last_finite)
                warnings.warn(
                    f"{type(self).__name__}: the loss or the weights became non-finite in epoch "
                    f"{len(self.history_) + 1}; training stopped and the weights of the last "
                    "finite epoch were kept. Try a smaller learning_rate.",
                    DivergenceWarning,
                    stacklevel=4,
                )
                break
            for scheduler in schedulers:
                scheduler.step()
            self.n_iter_ += 1
            record = {
                "epoch": len(self.history_) + 1,
                "loss": epoch_loss,
                "learning_rate": optimizers[0].param_groups[0]["lr"],
            }
            if validation is not None:
                record["validation_score"] = float(self._validation_score(*validation))
            record["duration"] = time.perf_counter() - start
            self.history_.append(record)
            progress.set_postfix(
                {k: f"{v:.4g}" for k, v in record.items() if k in ("loss", "validation_score")}
            )
            last_finite = self._snapshot()

            if self.tol is None:
                continue
            # Improvement means a higher validation score or a lower training loss.
            value = record["validation_score"] if monitor_validation else -epoch_loss
            if best_value is None or value > best_value + self.tol:
                best_value, epochs_without_improvement = value, 0
                if monitor_validation:
                    best_snapshot = last_finite
            else:
                epochs_without_improvement += 1
            if epochs_without_improvement >= self.n_iter_no_change:
                self.converged_ = True
                break
        progress.close()

        if monitor_validation and best_snapshot is not None:
            self._restore(best_snapshot)
        if self.tol is not None and not self.converged_ and self.n_iter_ == self.max_epochs:
            quantity = "validation score" if monitor_validation else "training loss"
            warnings.warn(
                f"{type(self).__name__}: max_epochs={self.max_epochs} reached and the {quantity} "
                f"was still improving by more than tol={self.tol}. Increase max_epochs, or set "
                "tol=None to train for a fixed number of epochs.",
                ConvergenceWarning,
                stacklevel=4,
            )

    def _train_one_epoch(self, source, targets, sampler, optimizers, device):
        """Mean loss over the epoch's samples, or None if a batch loss was not finite."""
        self.module_.train()
        total, count = 0.0, 0
        for indices in sampler:
            inputs = source.get(indices, device)
            loss = self._batch_loss(inputs, targets, indices)
            loss_value = float(loss.detach())
            if not np.isfinite(loss_value):
                return None
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=True)
            loss.backward()
            for optimizer in optimizers:
                optimizer.step()
            total += loss_value * len(indices)
            count += len(indices)
        return total / max(count, 1)

    # ------------------------------------------------------------------ inference
    def _inference_device(self):
        return available_device(self.device_)

    def _forward_in_chunks(self, X, chunk_size=None):
        """``module_`` applied to ``X`` in chunks, in evaluation mode, as a numpy array."""
        device = self._inference_device()
        self.module_.to(device)
        self.module_.eval()
        chunk_size = chunk_size or max(self.batch_size, 1024)
        with torch.no_grad():
            outputs = [
                self.module_(inputs).cpu() for inputs in BatchSource(X).chunks(chunk_size, device)
            ]
        return torch.cat(outputs).numpy()

    # ------------------------------------------------------------------ persistence
    def __getstate__(self):
        # object.__getstate__ returns the instance's own __dict__: never modify it.
        state = dict(super().__getstate__())
        for key, value in state.items():
            if isinstance(value, torch.nn.Module | torch.Tensor):
                buffer = io.BytesIO()
                torch.save(value, buffer)
                state[key] = _SerializedTorch(buffer.getvalue())
        return state

    def __setstate__(self, state):
        state = dict(state)
        for key, value in state.items():
            if isinstance(value, _SerializedTorch):
                state[key] = value.load()
        super().__setstate__(state)


class _SerializedTorch:
    """A torch object saved with ``torch.save``; loads on the CPU (GPU models load anywhere)."""

    def __init__(self, payload):
        self.payload = payload

    def load(self):
        return torch.load(io.BytesIO(self.payload), map_location="cpu", weights_only=False)
