"""Mini-batch samplers of the torch estimators: a whole epoch of batches drawn at once, on device.

A sampler's :meth:`epoch` returns the index tensor of every batch of one epoch, of a fixed shape
``(n_batches, batch_size)``, with a mask of the valid entries (padding where a batch or a class
has fewer items), drawn on the sampler's device with its own seeded :class:`torch.Generator`. The
training step thus never draws random numbers on the host, copies indices, or changes shape, so
it needs no host synchronisation. Iterating a sampler yields the valid indices of each batch as
numpy arrays, so it also serves as the ``batch_sampler`` of a :class:`torch.utils.data.DataLoader`.
"""

from typing import NamedTuple

import numpy as np
import torch
from sklearn.utils import check_random_state

from ..utils._docstrings import fill_shared_docs
from ..utils._labels import encode_labels
from ..utils._validation import check_positive_int

__all__ = ["ClassBalancedBatchSampler", "EpochBatches", "ShuffledBatchSampler"]

# Rows of a (rows x classes) block of class weights drawn from at once: at most 2**24 entries.
_DRAW_BLOCK_ENTRIES = 2**24


class EpochBatches(NamedTuple):
    """The batches of one epoch.

    Attributes
    ----------
    indices : torch.Tensor of shape (n_batches, batch_size), int64
        Row indices of the items of each batch (0 where ``valid`` is False).
    valid : torch.Tensor of shape (n_batches, batch_size), bool
        Which entries are items (False: padding).
    groups : torch.Tensor of shape (n_batches, n_groups) or None
        For class-balanced batches, the class code of each group of ``samples_per_class``
        consecutive entries (distinct within a batch); None otherwise.
    """

    indices: torch.Tensor
    valid: torch.Tensor
    groups: torch.Tensor | None = None


def make_generator(random_state, device):
    """A :class:`torch.Generator` on ``device`` seeded from a scikit-learn ``random_state``."""
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    generator = torch.Generator(device=torch.device(device))
    generator.manual_seed(seed)
    return generator


#: The parameters of every epoch sampler, documented once (``{shared_parameters}``).
_SAMPLER_PARAMETER_DOCS = {
    "random_state": (
        "int, RandomState instance or None",
        "Seeds the sampler's generator; successive epochs draw successive batches.",
    ),
    "device": ("str or torch.device", "Where the index tensors are drawn and live."),
}


class _EpochSampler:
    """Shared behaviour: a generator, iteration as numpy batches, and the generator's state;
    the docs of the shared parameters (``random_state``, ``device``) in every subclass."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fill_shared_docs(_SAMPLER_PARAMETER_DOCS)(cls)

    def __init__(self, random_state, device):
        self.device = torch.device(device)
        self.generator = make_generator(random_state, self.device)

    def epoch(self):
        raise NotImplementedError

    def __iter__(self):
        batches = self.epoch()
        indices, valid = batches.indices.cpu().numpy(), batches.valid.cpu().numpy()
        for row, keep in zip(indices, valid, strict=True):
            yield row[keep]

    def state_dict(self):
        """The generator's state (to resume a run exactly)."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state):
        """Restore the generator's state saved by :meth:`state_dict`."""
        self.generator.set_state(state["generator"])


class ShuffledBatchSampler(_EpochSampler):
    """Mini-batches of a random permutation of ``range(n_samples)``, one pass per epoch.

    Each epoch is one permutation cut into ``ceil(n_samples / batch_size)`` batches; the last
    batch is padded (``valid`` False) when ``batch_size`` does not divide ``n_samples``.

    Parameters
    ----------
    n_samples : int
        Number of items.
    batch_size : int
        Items per batch.
    {shared_parameters}

    Examples
    --------
    >>> from skrank.sampling import ShuffledBatchSampler
    >>> sampler = ShuffledBatchSampler(10, batch_size=4, random_state=0)
    >>> batches = sampler.epoch()
    >>> tuple(batches.indices.shape), batches.valid.sum().item()
    ((3, 4), 10)
    >>> sorted(int(i) for batch in sampler for i in batch)
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """

    def __init__(self, n_samples, batch_size, *, random_state=None, device="cpu"):
        self.n_samples = check_positive_int(n_samples, "n_samples")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        super().__init__(random_state, device)

    def __len__(self):
        return -(-self.n_samples // self.batch_size)

    def epoch(self):
        """The batches of the next epoch (an :class:`EpochBatches`)."""
        n_batches, size = len(self), self.batch_size
        order = torch.randperm(self.n_samples, generator=self.generator, device=self.device)
        padded = torch.zeros(n_batches * size, dtype=torch.long, device=self.device)
        padded[: self.n_samples] = order
        valid = torch.arange(n_batches * size, device=self.device) < self.n_samples
        return EpochBatches(padded.view(n_batches, size), valid.view(n_batches, size))


class ClassBalancedBatchSampler(_EpochSampler):
    """Batches of ``P`` distinct classes times ``M`` items, of one fixed shape.

    Each batch draws ``P = batch_size // samples_per_class`` distinct classes (fewer if the data
    have fewer), each with probability proportional to its number of items
    (``class_weights="proportional"``, so that every item is drawn about once per epoch) or
    uniformly (``"uniform"``), and takes ``M = samples_per_class`` items of each: the items of a
    class are visited in a random order that is reshuffled every epoch, cycling through the
    class, so the ``k``-th time a class is drawn in an epoch it contributes its items
    ``k M .. k M + M - 1`` (modulo the class size). A class with fewer than ``M`` items
    contributes all of them, and the rest of its group is padding (``valid`` False). An epoch
    holds ``ceil(n_samples / (P M))`` batches. Batch ``b`` lists group ``g``'s items at
    positions ``g M .. g M + M - 1``, and ``groups[b, g]`` is the group's class code (codes
    index the sorted distinct labels).

    Everything is drawn at once per epoch on ``device`` with the sampler's generator; the cost is
    ``O(n_samples log n_samples)`` per epoch.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels (any hashable values).
    batch_size : int
        Target number of items per batch (``P M``); must hold two groups.
    samples_per_class : int, default=4
        Items per class in a batch (``M``).
    class_weights : {"proportional", "uniform"}, default="proportional"
        Probability of drawing a class: proportional to its size, or equal for all classes.
    {shared_parameters}

    Examples
    --------
    >>> from skrank.sampling import ClassBalancedBatchSampler
    >>> sampler = ClassBalancedBatchSampler([0] * 4 + [1] * 4 + [2] * 4, batch_size=4,
    ...                                     samples_per_class=2, random_state=0)
    >>> batches = sampler.epoch()
    >>> tuple(batches.indices.shape), tuple(batches.groups.shape)
    ((3, 4), (3, 2))
    >>> bool((batches.groups[:, 0] != batches.groups[:, 1]).all())
    True
    """

    def __init__(
        self,
        y,
        batch_size,
        samples_per_class=4,
        *,
        class_weights="proportional",
        random_state=None,
        device="cpu",
    ):
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] == 0:
            raise ValueError(f"y must be a non-empty 1-D array of labels, got shape {y.shape}.")
        self.samples_per_class = check_positive_int(samples_per_class, "samples_per_class")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        if self.batch_size < 2 * self.samples_per_class:
            raise ValueError(
                f"batch_size={batch_size} holds fewer than two classes of samples_per_class="
                f"{samples_per_class} items; use batch_size >= {2 * samples_per_class}."
            )
        if class_weights not in ("proportional", "uniform"):
            raise ValueError(
                f"class_weights must be 'proportional' or 'uniform', got {class_weights!r}."
            )
        codes = encode_labels(y)[1]
        counts = np.bincount(codes)
        if counts.shape[0] < 2:
            raise ValueError("y has only one class: class-balanced batches need two classes.")
        super().__init__(random_state, device)
        self.n_samples = y.shape[0]
        self.n_classes = counts.shape[0]
        self.class_weights = class_weights
        self._codes = torch.as_tensor(codes, device=self.device)
        self._counts = torch.as_tensor(counts, device=self.device)
        self._class_starts = torch.as_tensor(np.cumsum(counts) - counts, device=self.device)
        weights = counts if class_weights == "proportional" else np.ones_like(counts)
        self._weights = torch.as_tensor(weights, dtype=torch.float, device=self.device)

    @property
    def classes_per_batch(self):
        """Number of groups ``P`` per batch."""
        return min(self.batch_size // self.samples_per_class, self.n_classes)

    def __len__(self):
        return -(-self.n_samples // (self.classes_per_batch * self.samples_per_class))

    def _draw_classes(self, n_batches):
        """``(n_batches, P)`` distinct classes per row, drawn by ``_weights``."""
        rows_per_block = max(1, _DRAW_BLOCK_ENTRIES // self.n_classes)
        blocks = [
            torch.multinomial(
                self._weights.expand(min(rows_per_block, n_batches - start), -1),
                self.classes_per_batch,
                replacement=False,
                generator=self.generator,
            )
            for start in range(0, n_batches, rows_per_block)
        ]
        return torch.cat(blocks)

    def epoch(self):
        """The batches of the next epoch (an :class:`EpochBatches` with ``groups``)."""
        n_batches, size = len(self), self.samples_per_class
        # Items grouped by class, in a fresh random order within each class.
        keys = torch.rand(self.n_samples, generator=self.generator, device=self.device)
        members = torch.argsort(self._codes.to(torch.float64) + keys.to(torch.float64))
        groups = self._draw_classes(n_batches)
        drawn = groups.reshape(-1)
        # How many times each drawn class was drawn before in this epoch (its visit number).
        order = torch.argsort(drawn, stable=True)
        first = torch.searchsorted(drawn[order], drawn[order], right=False)
        visit = torch.empty_like(drawn)
        visit[order] = torch.arange(drawn.shape[0], device=self.device) - first
        slots = torch.arange(size, device=self.device)
        counts = self._counts[drawn][:, None]
        position = (visit[:, None] * size + slots[None, :]) % counts
        indices = members[self._class_starts[drawn][:, None] + position]
        valid = (slots[None, :] < counts).expand_as(indices)
        shape = (n_batches, groups.shape[1] * size)
        return EpochBatches(
            indices.masked_fill(~valid, 0).reshape(shape), valid.reshape(shape), groups
        )
