"""Callbacks of the training engine: progress bar, early stopping, learning-rate schedules,
weight averaging and checkpoints, and the :class:`Callback` base class to write your own.

A callback is handed to a torch estimator with ``callbacks=[...]``; the estimator also builds
the callbacks its own parameters ask for (``verbose``, ``tol``, ``lr_milestones``), see
:meth:`skrank.nn.BaseTorchEstimator.get_default_callbacks`. The engine calls, in this order::

    on_train_begin
        on_epoch_begin
            on_batch_begin, on_batch_end      (once per batch)
        on_train_epoch_end                     (after the steps, before the validation score)
        on_epoch_end                           (after history_[-1] is written)
    on_train_end                               (also after an interruption or a divergence)

Each hook receives the estimator being fitted and keyword arguments (below); a callback may read
and write ``estimator.history_[-1]`` (the record of the current epoch) and ask the engine to stop
with :meth:`~skrank.nn.BaseTorchEstimator.stop_training`. Values of a batch (``loss``) are
tensors on the training device: reading them (``float(loss)``) makes the host wait for the
device, so per-batch reads slow GPU training; per-epoch values are in the history.
"""

import os
import tempfile
import warnings
from numbers import Real
from pathlib import Path

import torch
from sklearn.exceptions import ConvergenceWarning
from torch.optim import lr_scheduler
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn, get_swa_multi_avg_fn

from ..utils._progress import progress_bar
from ..utils._validation import check_positive_int

_TORCH_SCHEDULER_PREFIX = "torch.optim.lr_scheduler."

__all__ = [
    "Callback",
    "Checkpoint",
    "EarlyStopping",
    "LRScheduler",
    "ProgressBar",
    "WeightAveraging",
]


class Callback:
    """Base class of the callbacks of skrank's torch estimators.

    Override any of the hooks; each receives the estimator and keyword arguments:

    - ``on_train_begin(estimator, X, y, validation)``: the training inputs and targets as the
      engine holds them, and the held-out ``(X_val, y_val)`` or None. The module, criterion,
      optimizers and sampler exist (``module_``, ``criterion_``, ``optimizers_``, ``sampler_``).
    - ``on_epoch_begin(estimator, epoch)``: ``epoch`` counts from 1.
    - ``on_batch_begin(estimator, batch)`` and ``on_batch_end(estimator, batch, loss)``: the
      :class:`~skrank.nn.Batch` and its loss (a tensor on the device).
    - ``on_train_epoch_end(estimator, epoch)``: after the epoch's training steps and the
      engine's check that loss and weights are finite, before the validation score and the
      history record. The weights the network holds from here to the next ``on_epoch_begin``
      are the ones evaluated (validation score), snapshotted (early stopping, checkpoints) and,
      after the last epoch, kept by the fitted estimator: a callback may put other weights in
      (copying into the parameters, never replacing them) if it puts the training weights back
      at the next ``on_epoch_begin``, as :class:`~skrank.nn.WeightAveraging` does.
    - ``on_epoch_end(estimator, epoch, record)``: ``record`` is ``estimator.history_[-1]``.
    - ``on_train_end(estimator, interrupted)``: whether training ended on a ``KeyboardInterrupt``
      or a divergence.

    A callback that holds weights and puts them back in ``on_train_end`` however training ends
    (:class:`EarlyStopping`'s best weights) says so through ``restores_weights()``: the engine
    then keeps no copy of its own for a divergence or an interrupt.

    A callback whose state must survive a checkpoint implements ``state_dict()`` and
    ``load_state_dict(state)`` (tensors, numbers, strings, lists and dicts only). Attributes
    named in the class attribute ``run_attributes`` (a tuple of names) hold the state of a
    training run (weights, a progress bar): they are neither saved with the fitted estimator
    nor copied, and ``on_train_begin`` must set them.

    Examples
    --------
    >>> from skrank.nn import Callback
    >>> class PrintLoss(Callback):
    ...     def on_epoch_end(self, estimator, epoch, record):
    ...         print(f"epoch {epoch}: loss {record['loss']:.3f}")
    """

    run_attributes = ()

    def __getstate__(self):
        return {key: value for key, value in vars(self).items() if key not in self.run_attributes}

    def on_train_begin(self, estimator, X, y, validation):
        """Called once, before the first epoch."""

    def on_epoch_begin(self, estimator, epoch):
        """Called at the start of each epoch."""

    def on_batch_begin(self, estimator, batch):
        """Called before each training step."""

    def on_batch_end(self, estimator, batch, loss):
        """Called after each training step."""

    def on_train_epoch_end(self, estimator, epoch):
        """Called after each epoch's training steps, before its validation score."""

    def on_epoch_end(self, estimator, epoch, record):
        """Called after each epoch, once its history record is written."""

    def on_train_end(self, estimator, interrupted):
        """Called once when training ends, however it ends."""

    def restores_weights(self):
        """Whether ``on_train_end`` will put weights it holds back into the network, however
        training ends (then the engine keeps no copy of the last finite epoch's weights)."""
        return False

    def __repr__(self):
        arguments = ", ".join(
            f"{key}={value!r}"
            for key, value in vars(self).items()
            if not key.startswith("_") and not key.endswith("_")  # nor fitted attributes
        )
        return f"{type(self).__name__}({arguments})"


class ProgressBar(Callback):
    """A tqdm progress bar over epochs showing the loss and the validation score.

    Built by the estimators when ``verbose`` is set; in a notebook it renders as a widget.
    """

    run_attributes = ("_bar",)

    def on_train_begin(self, estimator, X, y, validation):
        self._bar = progress_bar(
            total=estimator.max_epochs,
            initial=estimator.n_iter_,
            desc=type(estimator).__name__,
            leave=True,
        )

    def on_epoch_end(self, estimator, epoch, record):
        self._bar.update(1)
        self._bar.set_postfix(
            {key: f"{record[key]:.4g}" for key in ("loss", "validation_score") if key in record}
        )

    def on_train_end(self, estimator, interrupted):
        self._bar.close()


class EarlyStopping(Callback):
    """Stop when a monitored value stops improving, optionally keeping the best weights.

    Improvement means a validation score larger, or a training loss smaller, than the best so
    far by more than ``tol``. After ``patience`` epochs without improvement training stops and
    ``converged_`` is set; if training instead runs to ``max_epochs`` while still improving, a
    ``ConvergenceWarning`` says so.

    Parameters
    ----------
    monitor : {"validation_score", "loss"}, default="validation_score"
        The history entry to watch (the validation score needs ``validation_fraction``).
    tol : float, default=1e-4
        Smallest change that counts as an improvement.
    patience : int, default=5
        Epochs without improvement before stopping.
    restore_best_weights : bool, default=True
        At the end of training, restore the weights (module and criterion state) of the best
        epoch.
    score_start : bool, default=False
        Also score the untrained model (at the start of a fit that is not a warm start) and
        keep it when no epoch beats it: training still stops when the epochs stop improving on
        each other (a slow first epoch does not end training below a strong start), then the
        start's weights are restored (``restore_best_weights``), ``kept_start`` is True and
        no ``ConvergenceWarning`` is raised. While no epoch beats the start, its weights and
        the best epoch's are both kept. Needs ``monitor="validation_score"``.

    Attributes
    ----------
    kept_start : bool
        After training with ``score_start``: whether no epoch beat the untrained model and its
        weights were restored.
    """

    run_attributes = ("_best_weights", "_start_weights")

    def __init__(
        self,
        monitor="validation_score",
        tol=1e-4,
        patience=5,
        restore_best_weights=True,
        score_start=False,
    ):
        if monitor not in ("validation_score", "loss"):
            raise ValueError(f"monitor must be 'validation_score' or 'loss', got {monitor!r}.")
        if score_start and monitor != "validation_score":
            raise ValueError(
                "score_start=True needs monitor='validation_score' (the training loss has no "
                "value before the first epoch)."
            )
        if not isinstance(tol, Real) or tol < 0:
            raise ValueError(f"tol must be a non-negative number, got {tol!r}.")
        check_positive_int(patience, "patience")
        self.monitor = monitor
        self.tol = tol
        self.patience = patience
        self.restore_best_weights = restore_best_weights
        self.score_start = score_start

    def on_train_begin(self, estimator, X, y, validation):
        if self.monitor == "validation_score" and validation is None:
            raise ValueError(
                "EarlyStopping(monitor='validation_score') needs a validation set: set "
                "validation_fraction, e.g. 0.1, or monitor='loss'."
            )
        self._best, self._best_weights, self._waited, self._stopped = None, None, 0, False
        self._start, self._start_weights, self.kept_start = None, None, False
        if self.score_start and not estimator.history_:
            self._start = float(estimator.validation_score(*validation))
            if self.restore_best_weights:
                self._start_weights = estimator.snapshot_weights()

    def on_epoch_end(self, estimator, epoch, record):
        # Higher is better for a score, lower for a loss: compare signed values.
        value = record[self.monitor] if self.monitor != "loss" else -record["loss"]
        if self._best is None or value > self._best + self.tol:
            self._best, self._waited = value, 0
            if self._start is not None and value > self._start + self.tol:
                # The start is beaten for good: its copy holds the best epoch's from now on.
                self._start = None
                if self._start_weights is not None:
                    self._best_weights, self._start_weights = self._start_weights, None
            if self.restore_best_weights:
                self._best_weights = estimator.snapshot_weights(into=self._best_weights)
            return
        self._waited += 1
        if self._waited >= self.patience:
            self._stopped = True
            estimator.converged_ = True
            estimator.stop_training(
                f"{self.monitor} did not improve by more than tol={self.tol} for "
                f"{self.patience} epochs"
            )

    def restores_weights(self):
        return self.restore_best_weights and (
            self._best_weights is not None or self._start_weights is not None
        )

    def on_train_end(self, estimator, interrupted):
        if self._start is not None and estimator.n_iter_ > 0:
            # No epoch beat the start: the epochs stopped improving below it.
            self.kept_start = self._stopped = True
            estimator.converged_ = True
            if self._start_weights is not None:
                self._best_weights, self._start_weights = self._start_weights, None
        if self.restore_best_weights and self._best_weights is not None:
            estimator.restore_weights(self._best_weights)
            self._best_weights = None  # the fitted estimator holds them: no second copy
        if not (self._stopped or interrupted) and estimator.n_iter_ >= estimator.max_epochs:
            quantity = "validation score" if self.monitor == "validation_score" else "training loss"
            warnings.warn(
                f"{type(estimator).__name__}: max_epochs={estimator.max_epochs} reached and the "
                f"{quantity} had improved by more than tol={self.tol} within the last "
                f"{self.patience} epochs. Increase max_epochs, or set tol=None to train for a "
                "fixed number of epochs.",
                ConvergenceWarning,
                stacklevel=2,
            )

    def state_dict(self):
        return {"best": self._best, "waited": self._waited}

    def load_state_dict(self, state):
        self._best, self._waited = state["best"], state["waited"]


class LRScheduler(Callback):
    """A torch learning-rate scheduler on every optimiser of the estimator.

    Parameters
    ----------
    scheduler : type
        A class of :mod:`torch.optim.lr_scheduler` (e.g. ``MultiStepLR``, ``OneCycleLR``,
        ``LinearLR`` for a warm-up), instantiated once per optimiser as
        ``scheduler(optimizer, **kwargs)``.
    step_every : {"epoch", "batch"}, default="epoch"
        Step the scheduler after every epoch or after every training step.
    **kwargs
        Arguments of the scheduler.

    Examples
    --------
    >>> from torch.optim.lr_scheduler import LinearLR
    >>> from skrank.nn import LRScheduler
    >>> warm_up = LRScheduler(LinearLR, start_factor=0.1, total_iters=3)  # 3 epochs of warm-up
    """

    run_attributes = ("schedulers_",)

    def __init__(self, scheduler, step_every="epoch", **kwargs):
        if step_every not in ("epoch", "batch"):
            raise ValueError(f"step_every must be 'epoch' or 'batch', got {step_every!r}.")
        self.scheduler = scheduler
        self.step_every = step_every
        self.kwargs = kwargs

    def __repr__(self):
        arguments = "".join(f", {key}={value!r}" for key, value in self.kwargs.items())
        name = getattr(self.scheduler, "__name__", repr(self.scheduler))
        return f"LRScheduler({name}, step_every={self.step_every!r}{arguments})"

    def __getstate__(self):
        state = super().__getstate__()
        if getattr(lr_scheduler, getattr(self.scheduler, "__name__", ""), None) is self.scheduler:
            # torch's own schedulers by name: a saved estimator names no torch class.
            state["scheduler"] = _TORCH_SCHEDULER_PREFIX + self.scheduler.__name__
        return state

    def __setstate__(self, state):
        state = dict(state)
        scheduler = state["scheduler"]
        if isinstance(scheduler, str):
            name = scheduler.removeprefix(_TORCH_SCHEDULER_PREFIX)
            state["scheduler"] = getattr(lr_scheduler, name, None)
            if not (
                scheduler.startswith(_TORCH_SCHEDULER_PREFIX)
                and isinstance(state["scheduler"], type)
                and issubclass(state["scheduler"], lr_scheduler.LRScheduler)
            ):
                raise ValueError(f"{scheduler!r} is not a scheduler of torch.optim.lr_scheduler.")
        vars(self).update(state)

    def on_train_begin(self, estimator, X, y, validation):
        self.schedulers_ = [self.scheduler(opt, **self.kwargs) for opt in estimator.optimizers_]

    def on_batch_end(self, estimator, batch, loss):
        if self.step_every == "batch":
            for scheduler in self.schedulers_:
                scheduler.step()

    def on_epoch_end(self, estimator, epoch, record):
        if self.step_every == "epoch":
            for scheduler in self.schedulers_:
                scheduler.step()

    def state_dict(self):
        return {"schedulers": [scheduler.state_dict() for scheduler in self.schedulers_]}

    def load_state_dict(self, state):
        for scheduler, saved in zip(self.schedulers_, state["schedulers"], strict=True):
            scheduler.load_state_dict(saved)


class WeightAveraging(Callback):
    """Evaluate and keep a running average of the network's weights (EMA or SWA).

    After every training step from ``start_epoch`` on, the average of the network's parameters
    and floating-point buffers (e.g. batch normalisation's running statistics) is updated by
    :class:`torch.optim.swa_utils.AveragedModel`: an exponential moving average
    (``averaged = decay * averaged + (1 - decay) * current``) or, with ``decay=None``, the
    equal average of the weights after each step (stochastic weight averaging). Integer buffers
    (batch counts) are copied. The average starts as a copy of the weights after the first
    averaged step.

    At the end of each epoch the network holds the averaged weights: the validation score,
    :class:`EarlyStopping`'s best weights, :class:`Checkpoint` and the fitted estimator all see
    them; training itself continues from the training weights, put back at the start of the
    next epoch. A checkpoint stores both, so a resumed run equals an uninterrupted one. With
    ``warm_start`` (and no checkpoint), the next fit trains on from the averaged weights it
    kept, and its average starts anew.

    Parameters
    ----------
    decay : float or None, default=0.999
        Decay of the exponential moving average per training step, in [0, 1); about
        ``1 / (1 - decay)`` recent steps count. None: the equal average of every step since
        ``start_epoch``.
    start_epoch : int, default=1
        The first epoch (counted from 1 in each fit, resumed epochs included) whose steps are
        averaged; before it, the training weights are evaluated and kept.

    Attributes
    ----------
    averaged_model_ : torch.optim.swa_utils.AveragedModel
        The average, during a fit only (``averaged_model_.module`` holds its weights): at the
        end of training the network holds them, and it is dropped.
    n_averaged_ : int
        After training: the number of steps averaged.

    Notes
    -----
    The update is one fused ``torch._foreach_lerp_`` over the weights per step, with the step
    count kept on the host: it adds no host synchronisation to the training step (an
    :class:`~torch.optim.swa_utils.AveragedModel` holds the average, but its own
    ``update_parameters`` reads its count back from the device twice per step).

    Examples
    --------
    >>> from skrank import SOPRCEmbedder
    >>> from skrank.nn import WeightAveraging
    >>> embedder = SOPRCEmbedder(callbacks=[WeightAveraging(decay=0.99, start_epoch=2)])
    """

    run_attributes = ("averaged_model_", "_pairs", "_update", "_training_weights", "_pending_state")

    def __init__(self, decay=0.999, start_epoch=1):
        if decay is not None and (not isinstance(decay, Real) or not 0 <= decay < 1):
            raise ValueError(f"decay must be a number in [0, 1) or None, got {decay!r}.")
        check_positive_int(start_epoch, "start_epoch")
        self.decay = decay
        self.start_epoch = start_epoch

    def on_train_begin(self, estimator, X, y, validation):
        others = [c for c in estimator.callbacks_ if isinstance(c, WeightAveraging)]
        if len(others) > 1:
            raise ValueError(
                "Only one WeightAveraging callback can run in a fit (each would average the "
                f"other's weights); got {len(others)}."
            )
        self.averaged_model_ = AveragedModel(estimator.network_, use_buffers=True)
        # Updated here, not by AveragedModel.update_parameters, which reads its step count
        # back from the device twice per step; the count is kept on the host.
        self._update = (
            get_swa_multi_avg_fn() if self.decay is None else get_ema_multi_avg_fn(self.decay)
        )
        self._pairs = _averaged_pairs(self.averaged_model_.module, estimator.network_)
        self._n_averaged = 0
        self._epoch = 0
        self._training_weights = None  # while the network holds the average
        pending = getattr(self, "_pending_state", None)
        if pending is not None:  # a Checkpoint listed before this callback loaded it
            self._pending_state = None
            self.load_state_dict(pending)

    def on_epoch_begin(self, estimator, epoch):
        self._epoch = epoch
        if self._training_weights is not None:
            estimator.network_.load_state_dict(self._training_weights)
            self._training_weights = None

    def on_batch_end(self, estimator, batch, loss):
        if self._epoch < self.start_epoch:
            return
        averaged, current, averaged_other, current_other = self._pairs
        with torch.no_grad():
            if self._n_averaged == 0:
                _copy(averaged, current)
            elif averaged:
                self._update(averaged, current, self._n_averaged)
            _copy(averaged_other, current_other)  # integer buffers: copied
        self._n_averaged += 1

    def on_train_epoch_end(self, estimator, epoch):
        if self._epoch < self.start_epoch or self._n_averaged == 0:
            return
        self.averaged_model_.n_averaged.fill_(self._n_averaged)
        network = estimator.network_
        self._training_weights = _cloned_state(network)
        network.load_state_dict(self.averaged_model_.module.state_dict())

    def on_train_end(self, estimator, interrupted):
        # The network holds the averaged weights (or, after an interruption or a divergence,
        # the engine restored those of the last complete epoch): the copies can go, and the
        # callback, which the fitted estimator keeps in callbacks_, pickles.
        self.n_averaged_ = self._n_averaged
        del self.averaged_model_, self._pairs, self._update
        self._training_weights = None

    def state_dict(self):
        self.averaged_model_.n_averaged.fill_(self._n_averaged)
        return {
            "averaged": _cloned_state(self.averaged_model_),
            "training_weights": self._training_weights,
        }

    def load_state_dict(self, state):
        if not hasattr(self, "averaged_model_"):
            self._pending_state = state
            return
        self.averaged_model_.load_state_dict(state["averaged"])
        self._n_averaged = int(self.averaged_model_.n_averaged)  # once, at resume
        self._training_weights = state["training_weights"]


def _averaged_pairs(averaged, current):
    """The averaged module's floating-point parameters and buffers beside the network's, then
    its other (integer) buffers beside the network's."""
    pairs = list(
        zip(
            [*averaged.parameters(), *averaged.buffers()],
            [*current.parameters(), *current.buffers()],
            strict=True,
        )
    )
    floating = [(a.detach(), c.detach()) for a, c in pairs if a.is_floating_point()]
    other = [(a.detach(), c.detach()) for a, c in pairs if not a.is_floating_point()]
    return (
        [a for a, _ in floating],
        [c for _, c in floating],
        [a for a, _ in other],
        [c for _, c in other],
    )


def _copy(targets, sources):
    for target, source in zip(targets, sources, strict=True):
        target.copy_(source)


def _cloned_state(module):
    return {key: value.detach().clone() for key, value in module.state_dict().items()}


class Checkpoint(Callback):
    """Save the training state to a file every few epochs, and resume from it.

    The file holds everything a run needs to continue exactly: the weights and the criterion's
    state, the optimisers', schedulers' and callbacks' states, the random generators and the
    history. It is written with :func:`torch.save` (atomically: a partial file never replaces a
    good one) and read with ``torch.load(weights_only=True)``, so loading it never runs code.

    Resuming: fit an estimator with the same parameters and ``warm_start=True``; if the file
    exists, the run continues from the saved epoch up to ``max_epochs`` epochs in all. On the CPU
    the result is bitwise the same as an uninterrupted run with the same ``random_state``.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint file.
    every : int, default=1
        Save after every ``every`` epochs (and after the last one).

    Examples
    --------
    >>> from skrank import SOPRCEmbedder
    >>> from skrank.nn import Checkpoint
    >>> embedder = SOPRCEmbedder(callbacks=[Checkpoint("soprc.ckpt")], warm_start=True)
    """

    def __init__(self, path, every=1):
        check_positive_int(every, "every")
        self.path = os.fspath(path)
        self.every = every

    def on_train_begin(self, estimator, X, y, validation):
        if estimator.warm_start and Path(self.path).exists():
            state = torch.load(self.path, map_location=estimator.device_, weights_only=True)
            estimator.load_training_state(state)

    def on_epoch_end(self, estimator, epoch, record):
        if epoch % self.every == 0 or epoch >= estimator.max_epochs:
            self.save(estimator)

    def save(self, estimator):
        """Write the estimator's training state to ``path`` now (rank 0 of a data-parallel fit
        writes; the others, whose state is the same, do not)."""
        if estimator.training_context.rank != 0:
            return
        directory = Path(self.path).resolve().parent
        directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".checkpoint-")
        try:
            with os.fdopen(handle, "wb") as file:
                torch.save(estimator.training_state(), file)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
