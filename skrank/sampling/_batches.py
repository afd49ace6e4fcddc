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

    Each batch holds ``P = batch_size // samples_per_class`` groups (fewer if the data have
    fewer classes) of ``M = samples_per_class`` items, each group of a different class. Every
    epoch, each class is given a number of groups fixed in advance, and the groups are dealt
    into the batches at random:

    - ``class_weights="proportional"``: ``ceil(n_c / M)`` groups, so that **every item is drawn
      at least once per epoch** (and every class), as long as the class fits one group per
      batch (``n_c <= n_batches M``); a larger class is in every batch and visits its items
      over several epochs;
    - ``"uniform"``: ``floor(n_batches P / n_classes)`` groups for every class (small classes
      then recur within an epoch; with more classes than an epoch's groups, those left out vary
      from epoch to epoch).

    The groups left in a batch are filled with classes drawn without replacement among those
    not in it yet, in proportion to their size (``"proportional"``) or uniformly. A group
    takes its class's items in a random order reshuffled every epoch, cycling through the
    class: the ``k``-th group of a class in an epoch holds its items ``k M .. k M + M - 1``
    (modulo the class size). A class with fewer than ``M`` items contributes all of them, and
    the rest of its group is padding (``valid`` False, index 0). An epoch holds ``n_batches =
    ceil(n_samples / (P M))`` batches, or more when the classes' groups need more (classes of
    fewer than ``M`` items take a whole group). Batch ``b`` lists group ``g``'s items at
    positions ``g M .. g M + M - 1``, and ``groups[b, g]`` is the group's class code (codes
    index the sorted distinct labels).

    Everything is drawn at once per epoch on ``device`` with the sampler's generator; the cost is
    ``O(n_samples log n_samples + n_batches n_classes)`` per epoch.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels (any hashable values).
    batch_size : int
        Target number of items per batch (``P M``); must hold two groups.
    samples_per_class : int, default=4
        Items per class in a batch (``M``).
    class_weights : {"proportional", "uniform"}, default="proportional"
        How many groups each class gets per epoch: in proportion to its size, or as many for
        every class.
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
    >>> sorted(batches.indices[batches.valid].tolist()) == list(range(12))
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
        self._n_batches, groups = _epoch_groups(
            counts, self.classes_per_batch, self.samples_per_class, class_weights
        )
        self._codes = torch.as_tensor(codes, device=self.device)
        self._counts = torch.as_tensor(counts, device=self.device)
        self._class_starts = torch.as_tensor(np.cumsum(counts) - counts, device=self.device)
        self._groups_per_class = torch.as_tensor(groups, device=self.device)
        self._n_dealt = int(groups.sum())
        weights = counts if class_weights == "proportional" else np.ones_like(counts)
        self._weights = torch.as_tensor(weights, dtype=torch.float, device=self.device)

    @property
    def classes_per_batch(self):
        """Number of groups ``P`` per batch."""
        return min(self.batch_size // self.samples_per_class, self.n_classes)

    def __len__(self):
        return self._n_batches

    def _draw_classes(self, n_batches):
        """``(n_batches, P)`` distinct classes per row: each class's groups of the epoch dealt
        into distinct batches, the rest filled by ``_weights`` without replacement."""
        n_groups = self.classes_per_batch
        # The groups of the epoch, class by class in a random order of the classes: dealt
        # round-robin, the groups of a class (at most n_batches) land in distinct batches.
        order = torch.randperm(self.n_classes, generator=self.generator, device=self.device)
        dealt = torch.repeat_interleave(
            order, self._groups_per_class[order], output_size=self._n_dealt
        )
        position = torch.arange(dealt.shape[0], device=self.device)
        groups = torch.full((n_batches, n_groups), -1, dtype=torch.long, device=self.device)
        groups[position % n_batches, position // n_batches] = dealt
        # Batch b holds ceil((D - b) / n_batches) of the D dealt groups: known on the host.
        rows = torch.arange(n_batches, device=self.device)
        filled = self._n_dealt // n_batches + (rows < self._n_dealt % n_batches).long()
        missing = n_groups - self._n_dealt // n_batches
        if missing > 0:
            extra = self._draw_absent(groups, missing)
            slots = filled[:, None] + torch.arange(missing, device=self.device)[None, :]
            # Draws past a full row go to a spare column, dropped: fixed shapes, no host sync.
            spare = groups.new_empty(n_batches, 1)
            groups = torch.cat([groups, spare], 1).scatter_(1, slots.clamp_(max=n_groups), extra)
            groups = groups[:, :n_groups]
        return groups[torch.randperm(n_batches, generator=self.generator, device=self.device)]

    def _draw_absent(self, groups, n_draws):
        """For each row of ``groups`` (``-1``: an empty slot), ``n_draws`` classes not in it,
        drawn by ``_weights`` without replacement (exponential keys: the smallest ``E / w``,
        in order)."""
        rows_per_block = max(1, _DRAW_BLOCK_ENTRIES // (self.n_classes + 1))
        weights = torch.cat([self._weights, self._weights.new_ones(1)])
        blocks = []
        for start in range(0, groups.shape[0], rows_per_block):
            block = groups[start : start + rows_per_block]
            keys = torch.empty(block.shape[0], self.n_classes + 1, device=self.device)
            keys.exponential_(generator=self.generator).div_(weights)
            keys.scatter_(1, block.masked_fill(block < 0, self.n_classes), float("inf"))
            blocks.append(torch.topk(keys[:, :-1], n_draws, dim=1, largest=False).indices)
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


def _epoch_groups(counts, n_groups, size, class_weights):
    """The number of batches of an epoch and each class's number of groups in it (see
    :class:`ClassBalancedBatchSampler`)."""
    n_batches = -(-int(counts.sum()) // (n_groups * size))
    if class_weights == "uniform":
        return n_batches, np.full_like(counts, n_batches * n_groups // counts.shape[0])
    needed = -(-counts // size)
    # At most one group of a class per batch; more batches while the groups do not fit.
    while np.minimum(needed, n_batches).sum() > n_batches * n_groups:
        n_batches += 1
    return n_batches, np.minimum(needed, n_batches)
