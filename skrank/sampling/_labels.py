"""Labels for Stochastic Negative Mining, drawn at a cost independent of the number of labels.

One sample of labels is shared by all examples of a mini-batch (so the scores of a batch are one
matrix product with the sampled rows of the class table) and each example's own positive labels
are masked out of it. The sample is large enough, and the masking chosen, so that every example
receives ``min(B, K - |P_i|)`` negatives drawn uniformly without replacement from its
non-positive labels, where ``P_i`` is its set of positive labels: the shared sample changes the
joint distribution across the examples of a batch, never the distribution of any one example's
negatives.

Everything is written with fixed-shape torch operations, so that the same code draws on a GPU
inside a training step without synchronising with the host.
"""

import functools
from numbers import Integral

import numpy as np
import scipy.sparse as sp
import torch

from ..utils._validation import canonical_csr
from ._batches import make_generator

__all__ = ["NegativeLabelSampler", "draw_positive_labels", "sample_distinct_labels"]

# Probability, per sample, that a fixed-size draw yields fewer distinct labels than asked for.
_SHORTFALL_PROBABILITY = 1e-12


@functools.lru_cache(maxsize=64)
def _draws_for_distinct(size, n_labels):
    """Smallest number of uniform draws (with replacement) from ``n_labels`` values that holds
    ``size`` distinct values except with probability at most ``_SHORTFALL_PROBABILITY``.

    Exact: the distribution of the number of distinct values is propagated draw by draw (a
    Markov chain on ``0..size``, the last state absorbing). Only used for ``4 size < n_labels``,
    where it needs fewer than about ``1.4 size + 60`` draws.
    """
    p = np.zeros(size + 1)
    p[0] = 1.0
    seen = np.arange(size + 1) / n_labels  # probability that a draw repeats a seen value
    draws = 0
    while p[:size].sum() > _SHORTFALL_PROBABILITY:
        new = p * seen
        new[1:] += p[:-1] * (1.0 - seen[:-1])
        new[size] += p[size] * (1.0 - seen[size])  # the absorbing state keeps its mass
        p, draws = new, draws + 1
    return draws


def _distinct_labels(n_labels, size, generator, device):
    """``(labels, keep)``: a fixed-size vector of labels in random order whose ``keep`` entries
    are ``size`` distinct labels, a uniformly random ordered selection (fewer only with
    probability at most 1e-12 when ``4 size < n_labels``). Cost ``O(size log size)``."""
    if 4 * size >= n_labels:
        labels = torch.randperm(n_labels, generator=generator, device=device)[:size]
        return labels, torch.ones(size, dtype=torch.bool, device=device)
    n_draws = _draws_for_distinct(size, n_labels)
    labels = torch.randint(n_labels, (n_draws,), generator=generator, device=device)
    # The first occurrence of each value, in draw order: i.i.d. draws make that order uniform.
    sorted_labels, order = torch.sort(labels, stable=True)
    first = torch.ones_like(sorted_labels, dtype=torch.bool)
    first[1:] = sorted_labels[1:] != sorted_labels[:-1]
    is_first = torch.empty_like(first)
    is_first[order] = first
    return labels, is_first & (torch.cumsum(is_first, 0) <= size)


def _is_positive(positive_sets, labels, n_labels):
    """``(n_samples, len(labels))``: whether each label is among each row's positives (rows of
    :func:`positive_table`). A sample of at least a quarter of the labels reads a dense
    indicator of the rows' positives (``O(n K)``, fewer operations than a search); a smaller one
    searches each row's sorted positives (``O(n m log max|P_i|)``, whatever ``K``)."""
    if 4 * labels.shape[0] >= n_labels:
        return _positive_indicator(positive_sets, n_labels).index_select(1, labels)
    candidates = labels[None, :].expand(positive_sets.shape[0], -1).contiguous()
    position = torch.searchsorted(positive_sets, candidates).clamp(max=positive_sets.shape[1] - 1)
    return positive_sets.gather(1, position) == candidates


def _positive_indicator(positive_sets, n_labels):
    """``(n_samples, n_labels + 1)`` bool: whether each label (and the padding value
    ``n_labels``) is among each row's positives (rows of :func:`positive_table`)."""
    indicator = torch.zeros(
        (positive_sets.shape[0], n_labels + 1), dtype=torch.bool, device=positive_sets.device
    )
    return indicator.scatter_(1, positive_sets, True)


def every_negative_label(positive_sets, n_labels):
    """``(n_samples, n_labels)`` bool: whether each label is not among each row's positives
    (rows of :func:`positive_table`), the negatives of a step that scores every label."""
    return ~_positive_indicator(positive_sets, n_labels)[:, :n_labels]


def sample_distinct_labels(n_labels, size, random_state=None):
    """``size`` distinct labels of ``range(n_labels)`` in uniformly random order.

    Every ordered selection of ``size`` distinct labels is equally likely. The cost does not grow
    with ``n_labels``: for ``size < n_labels / 4`` the labels are the first distinct values of a
    stream of uniform draws (drawn again in the rare case, probability below 1e-12, of too few);
    otherwise a permutation of ``range(n_labels)``, at most four times ``size``.

    Parameters
    ----------
    n_labels : int
        Number of labels ``K``.
    size : int
        Number of labels to draw, ``0 <= size <= n_labels``.
    random_state : int, RandomState instance or None, default=None
        Seed or generator.

    Returns
    -------
    labels : ndarray of shape (size,), dtype int64

    Examples
    --------
    >>> from skrank.sampling import sample_distinct_labels
    >>> labels = sample_distinct_labels(10**9, 5, random_state=0)
    >>> labels.shape, len(set(labels.tolist()))
    ((5,), 5)
    """
    if not (isinstance(size, Integral) and isinstance(n_labels, Integral)) or not (
        0 <= size <= n_labels
    ):
        raise ValueError(f"Cannot draw {size!r} distinct labels out of {n_labels!r}.")
    generator = make_generator(random_state, "cpu")
    while True:
        labels, keep = _distinct_labels(int(n_labels), int(size), generator, "cpu")
        if int(keep.sum()) == size:
            return labels[keep].numpy()


def _positive_lists(positives):
    """(indptr, indices) of each example's positive labels, from 1-D labels or a sparse matrix."""
    if sp.issparse(positives):
        positives = canonical_csr(positives, drop_zeros=True)
        return positives.indptr, positives.indices.astype(np.int64, copy=False)
    positives = np.asarray(positives)
    if positives.ndim != 1 or positives.dtype.kind not in "iu":
        raise ValueError(
            "positives must be a 1-D array of integer labels (one positive per example) or a "
            "sparse indicator matrix of the examples' positive labels."
        )
    return np.arange(positives.shape[0] + 1), positives.astype(np.int64, copy=False)


def positive_table(positives, n_labels, device="cpu"):
    """Each example's positive labels as rows of a padded tensor.

    Parameters
    ----------
    positives : array-like of int of shape (n_samples,), or sparse matrix (n_samples, K)
        The positive label of each example, or an indicator matrix of its positive labels.
    n_labels : int
        Number of labels ``K``: the padding value (larger than every label).
    device : str or torch.device, default="cpu"
        Where the table lives.

    Returns
    -------
    table : torch.Tensor of shape (n_samples, max_positives), int64
        Row ``i`` lists example ``i``'s positive labels in increasing order, then ``n_labels``.
    counts : torch.Tensor of shape (n_samples,), int64
        Number of positive labels of each example.
    """
    indptr, indices = _positive_lists(positives)
    counts = np.diff(indptr)
    width = max(int(counts.max(initial=0)), 1)
    table = np.full((counts.shape[0], width), n_labels, dtype=np.int64)
    rows = np.repeat(np.arange(counts.shape[0]), counts)
    table[rows, np.arange(indices.shape[0]) - indptr[rows]] = indices
    return torch.as_tensor(table, device=device), torch.as_tensor(counts, device=device)


def draw_from_positive_table(table, counts, generator):
    """One label per row of :func:`positive_table`, uniform among the row's positives."""
    uniform = torch.rand(counts.shape[0], generator=generator, device=table.device)
    offsets = (uniform * counts).long().clamp(max=table.shape[1] - 1)
    return table.gather(1, offsets[:, None])[:, 0]


class NegativeLabelSampler:
    """Shared negative labels for a mini-batch, each example's positives masked.

    Each call draws ``m = min(K, B + max_i |P_i|)`` distinct labels in random order (as
    :func:`sample_distinct_labels`), shared by the whole batch; example ``i`` takes as its
    negatives the first ``B`` of them that are not among its positive labels ``P_i``. Because the
    sample is a uniformly random ordered selection, these are ``min(B, K - |P_i|)`` labels drawn
    uniformly without replacement from ``Y \\ P_i``, exactly as if each example had sampled alone
    (Algorithm 1 of Reddi et al., 2019). The cost of a call is ``O(m log m + n m log max|P_i|)``,
    independent of ``K``.

    :meth:`sample` takes and returns numpy arrays (for your own training loop); :meth:`draw` takes
    and returns tensors of fixed shapes on the sampler's device, drawing with its generator, so
    that a training step on a GPU needs no host synchronisation (what
    :class:`~skrank.SNMClassifier` calls). With ``4 m < K`` the fixed-size draw holds fewer than
    ``m`` distinct labels with probability below ``1e-12`` per call; :meth:`draw` then gives those
    examples fewer negatives (the mask says which), :meth:`sample` draws again.

    Parameters
    ----------
    n_labels : int
        Number of labels ``K``.
    n_negatives : int
        Number ``B`` of negatives per example, ``1 <= B <= K - 1``.
    random_state : int, RandomState instance or None, default=None
        Seeds the sampler's generator; successive calls draw successive samples.
    device : str or torch.device, default="cpu"
        Where :meth:`draw` draws and returns its tensors.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.sampling import NegativeLabelSampler
    >>> sampler = NegativeLabelSampler(n_labels=1000, n_negatives=8, random_state=0)
    >>> labels, mask = sampler.sample(np.array([3, 17, 3]))
    >>> mask.sum(axis=1)
    array([8, 8, 8])
    >>> bool(np.any((labels[None, :] == np.array([[3], [17], [3]])) & mask))
    False
    """

    def __init__(self, n_labels, n_negatives, random_state=None, device="cpu"):
        if not isinstance(n_labels, Integral) or n_labels < 2:
            raise ValueError(f"n_labels must be an integer >= 2, got {n_labels!r}.")
        if not isinstance(n_negatives, Integral) or not 1 <= n_negatives <= n_labels - 1:
            raise ValueError(
                f"n_negatives must be an integer in [1, n_labels - 1 = {n_labels - 1}], "
                f"got {n_negatives!r}."
            )
        self.n_labels = int(n_labels)
        self.n_negatives = int(n_negatives)
        self.device = torch.device(device)
        self.generator = make_generator(random_state, self.device)

    def draw(self, positive_sets):
        """Draw the shared negatives of one batch, as tensors of fixed shapes.

        Parameters
        ----------
        positive_sets : torch.Tensor of shape (n_samples, max_positives), int64
            Each example's positive labels in increasing order, padded with ``n_labels`` (rows
            of :func:`positive_table`), on the sampler's device.

        Returns
        -------
        labels : torch.Tensor of shape (n_draws,), int64
            The shared sample; ``n_draws`` depends on ``K``, ``B`` and ``max_positives`` only.
        mask : torch.Tensor of shape (n_samples, n_draws), bool
            ``mask[i, j]``: ``labels[j]`` is one of the negatives of example ``i``.
        """
        labels, _, mask = self._draw(positive_sets)
        return labels, mask

    def _draw(self, positive_sets):
        size = min(self.n_labels, self.n_negatives + positive_sets.shape[1])
        labels, keep = _distinct_labels(self.n_labels, size, self.generator, self.device)
        negative = keep[None, :] & ~_is_positive(positive_sets, labels, self.n_labels)
        return labels, keep, negative & (torch.cumsum(negative, dim=1) <= self.n_negatives)

    def sample(self, positives):
        """Draw the shared negatives of one batch.

        Parameters
        ----------
        positives : array-like of int of shape (n_samples,), or sparse matrix (n_samples, K)
            The positive label of each example, or an indicator matrix of all its positive
            labels (multilabel: every positive label is excluded from its negatives).

        Returns
        -------
        labels : ndarray of shape (m,), dtype int64
            The shared sample of ``m = min(K, B + max_i |P_i|)`` distinct labels.
        mask : ndarray of shape (n_samples, m), dtype bool
            ``mask[i, j]``: ``labels[j]`` is one of the ``B`` negatives of example ``i``.
        """
        indptr, indices = _positive_lists(positives)
        if indices.size and (indices.min() < 0 or indices.max() >= self.n_labels):
            raise ValueError(f"Positive labels must lie in [0, {self.n_labels}).")
        table, _ = positive_table(positives, self.n_labels, self.device)
        size = min(self.n_labels, self.n_negatives + table.shape[1])
        labels, keep, mask = self._draw(table)
        while int(keep.sum()) < size:  # probability below 1e-12
            labels, keep, mask = self._draw(table)
        return labels[keep].cpu().numpy(), mask[:, keep].cpu().numpy()


def draw_positive_labels(indicator, random_state=None):
    """One positive label per row, drawn uniformly among the row's positive labels.

    The paper's protocol for multilabel data: each time an example is visited (once per epoch),
    it is paired with one of its positive labels chosen uniformly at random.

    Parameters
    ----------
    indicator : sparse matrix of shape (n_samples, K)
        Positive-label indicator; every row needs at least one positive.
    random_state : int, RandomState instance or None, default=None
        Seed or generator.

    Returns
    -------
    labels : ndarray of shape (n_samples,), dtype int64
    """
    table, counts = positive_table(indicator, indicator.shape[1])
    if bool((counts == 0).any()):
        raise ValueError("Every row needs at least one positive label.")
    generator = make_generator(random_state, "cpu")
    return draw_from_positive_table(table, counts, generator).numpy()
