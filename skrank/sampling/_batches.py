"""Mini-batch samplers shared by the torch estimators."""

from numbers import Integral

import numpy as np
from sklearn.utils import check_random_state

from ..utils._labels import encode_labels


def _check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


class ShuffledBatchSampler:
    """Mini-batches of a random permutation of ``range(n_samples)``, one pass per epoch.

    Parameters
    ----------
    n_samples : int
        Number of items.
    batch_size : int
        Items per batch (the last batch of an epoch may be smaller).
    random_state : int, RandomState instance or None, default=None
        Seed or generator; successive epochs draw successive permutations.
    """

    def __init__(self, n_samples, batch_size, random_state=None):
        self.n_samples = _check_positive_int(n_samples, "n_samples")
        self.batch_size = _check_positive_int(batch_size, "batch_size")
        self._rng = check_random_state(random_state)

    def __len__(self):
        return -(-self.n_samples // self.batch_size)

    def __iter__(self):
        order = self._rng.permutation(self.n_samples)
        for start in range(0, self.n_samples, self.batch_size):
            yield order[start : start + self.batch_size]


class ClassBalancedBatchSampler:
    """Batches of ``P`` classes times ``M`` items, every item exactly once per epoch.

    Each epoch, the items of every class are shuffled and cut into groups of
    ``samples_per_class`` (``M``) items; a left-over group of a single item is merged into the
    previous group of its class so that no group lacks a positive partner (a class with fewer
    than ``M`` items forms one smaller group). Groups are then dealt in random order into batches
    of ``P = batch_size // M`` groups of *different* classes; a group whose class is already in the
    batch waits for the next batch. A final batch holding a single class (no negatives) is merged
    into the batch before it.

    Usable as the ``batch_sampler`` of a :class:`torch.utils.data.DataLoader`.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.
    batch_size : int
        Target number of items per batch; must be at least ``2 * samples_per_class``.
    samples_per_class : int, default=4
        Items per class in a batch (``M``).
    random_state : int, RandomState instance or None, default=None
        Seed or generator; successive epochs draw successive arrangements.

    Examples
    --------
    >>> from skrank.sampling import ClassBalancedBatchSampler
    >>> sampler = ClassBalancedBatchSampler([0] * 4 + [1] * 4 + [2] * 4, batch_size=4,
    ...                                     samples_per_class=2, random_state=0)
    >>> sorted(int(i) for batch in sampler for i in batch)
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    """

    def __init__(self, y, batch_size, samples_per_class=4, random_state=None):
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] == 0:
            raise ValueError(f"y must be a non-empty 1-D array of labels, got shape {y.shape}.")
        self.samples_per_class = _check_positive_int(samples_per_class, "samples_per_class")
        self.batch_size = _check_positive_int(batch_size, "batch_size")
        if self.batch_size < 2 * self.samples_per_class:
            raise ValueError(
                f"batch_size={batch_size} holds fewer than two classes of samples_per_class="
                f"{samples_per_class} items; use batch_size >= {2 * samples_per_class}."
            )
        codes = encode_labels(y)[1]
        order = np.argsort(codes, kind="stable")
        boundaries = np.flatnonzero(np.diff(codes[order])) + 1
        self._class_members = np.split(order, boundaries)
        self.n_samples = y.shape[0]
        self._rng = check_random_state(random_state)

    @property
    def classes_per_batch(self):
        """Number of classes ``P`` per batch."""
        return self.batch_size // self.samples_per_class

    def _groups_by_class(self):
        """Shuffled groups of at most ``M`` items (never a lone item) for each class."""
        groups = []
        for members in self._class_members:
            shuffled = self._rng.permutation(members)
            cuts = list(range(self.samples_per_class, shuffled.shape[0], self.samples_per_class))
            if cuts and shuffled.shape[0] - cuts[-1] == 1:
                cuts.pop()
            groups.append(np.split(shuffled, cuts))
        return groups

    def _epoch(self):
        groups = self._groups_by_class()
        remaining = np.array([len(g) for g in groups], dtype=np.float64)
        batches = []
        while remaining.sum() > 0:
            available = np.flatnonzero(remaining)
            n_classes = min(self.classes_per_batch, available.shape[0])
            # Classes with more groups left are drawn more often, so that classes run out together
            # and the tail of the epoch keeps several classes per batch.
            chosen = self._rng.choice(
                available, size=n_classes, replace=False, p=remaining[available] / remaining.sum()
            )
            batches.append([groups[c].pop() for c in chosen])
            remaining[chosen] -= 1
            if n_classes == 1 and len(batches) > 1:
                batches[-2].extend(batches.pop())
        return [np.concatenate(batch) for batch in batches]

    def __iter__(self):
        yield from self._epoch()

    def _n_groups(self):
        n_groups = 0
        for members in self._class_members:
            full, rest = divmod(members.shape[0], self.samples_per_class)
            n_groups += max(1, full + (rest >= 2))
        return n_groups

    def __len__(self):
        """Number of batches of an epoch if every batch but the last holds ``P`` groups.

        An actual epoch can differ by a batch or two: its last batches may hold fewer classes,
        and a last batch of a single class is merged into the one before.
        """
        return -(-self._n_groups() // self.classes_per_batch)
