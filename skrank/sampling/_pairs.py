"""Pair samplers for learning from the pairs implied by class labels.

A labelled sample ``(X, y)`` implies ``n (n - 1) / 2`` pairs ``i < j``: *positive* (similar) pairs
whose items share a class and *negative* (dissimilar) pairs whose items do not. Where the negative
pairs are needed one by one (a non-linear function of each pair, as in MMC's objective), they are
either enumerated in blocks (:func:`iter_negative_pairs`) or replaced by an *incomplete
U-statistic* (Section 4 of Vogel, Bellet & Clémençon, 2018):

* :func:`sample_negative_pairs`: ``B`` negative pairs drawn uniformly with replacement from the
  set of all negative pairs;
* :func:`sample_negative_tuples`: ``B`` K-tuples holding one random item of each class, each giving
  its ``K (K - 1) / 2`` pairs, weighted ``n_k n_l / n_-`` so that the estimate is unbiased.

Every sampler returns a :class:`PairSample` whose weights sum to one, so that
``sum(weight * f(X[first], X[second]))`` estimates (or, for :func:`iter_negative_pairs` summed over
all blocks, equals) the mean of ``f`` over all negative pairs.
"""

from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from ..utils._docstrings import fill_docs
from ..utils._labels import check_class_counts, encode_labels
from ..utils._memory import chunk_rows
from ..utils._validation import check_positive_int

__all__ = [
    "PairSample",
    "count_pairs",
    "iter_negative_pairs",
    "sample_negative_pairs",
    "sample_negative_tuples",
]


class PairSample(NamedTuple):
    """Pairs of row indices with weights.

    Attributes
    ----------
    first : ndarray of shape (n_pairs,)
        Index of the first item of each pair.
    second : ndarray of shape (n_pairs,)
        Index of the second item of each pair.
    weight : ndarray of shape (n_pairs,)
        Weight of each pair. For a sampler the weights sum to one.
    """

    first: np.ndarray
    second: np.ndarray
    weight: np.ndarray


def class_codes(y, *, negatives=False, input_name="y"):
    """Integer class codes ``0..K-1`` of the labels ``y`` and the count of each class.

    With ``negatives=True``, raise unless ``y`` has two classes (negative pairs exist).
    """
    if np.ndim(y) != 1:
        raise ValueError(
            f"{input_name} must be 1-dimensional, got an array of shape {np.shape(y)}."
        )
    if len(y) == 0:
        raise ValueError(
            f"{input_name} is empty: at least two items of two different classes are needed."
        )
    codes = encode_labels(y, input_name=input_name)[1]
    counts = np.bincount(codes)
    if negatives:
        check_class_counts(counts, positives=False, input_name=input_name)
    return codes, counts


def count_pairs(y):
    """Count the positive and the negative pairs ``i < j`` implied by class labels.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.

    Returns
    -------
    n_positive : int
        Number of pairs whose items share a class, ``sum_k n_k (n_k - 1) / 2``.
    n_negative : int
        Number of pairs whose items differ in class, ``sum_{k < l} n_k n_l``.

    Examples
    --------
    >>> from skrank.sampling import count_pairs
    >>> count_pairs([0, 0, 1, 1, 1])
    (4, 6)
    """
    _, counts = class_codes(y)
    counts = counts.astype(np.int64)
    n = int(counts.sum())
    n_positive = int((counts * (counts - 1)).sum() // 2)
    return n_positive, n * (n - 1) // 2 - n_positive


#: Parameters of the negative-pair samplers, documented once.
_DRAW_DOCS = {
    "labels": ("y", "array-like of shape (n_samples,)", "Class labels (at least two classes)."),
    "random_state": ("random_state", "int, RandomState instance or None", "Seed or generator."),
}


def _class_blocks(codes, counts):
    """Row indices sorted by class, and the start offset of each class block."""
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return order, starts


@fill_docs(_DRAW_DOCS)
def sample_negative_pairs(y, n_pairs, random_state=None):
    """Draw negative pairs uniformly with replacement from all negative pairs.

    Uniform over pairs, not over anchors: the first item ``i`` is drawn with probability
    proportional to its number of negative partners ``n - n_{y_i}``, then the second uniformly
    among the items of other classes. Every ordered negative pair thus has probability
    ``1 / (2 n_-)``; a pair of classes ``(k, l)`` is drawn with probability ``n_k n_l / n_-``.

    Parameters
    ----------
    {labels}
    n_pairs : int
        Number of pairs ``B`` to draw.
    {random_state}

    Returns
    -------
    sample : PairSample
        ``B`` pairs with weights ``1 / B``.

    Examples
    --------
    >>> from skrank.sampling import sample_negative_pairs
    >>> sample = sample_negative_pairs([0, 0, 1, 2], n_pairs=3, random_state=0)
    >>> len(sample.first), float(sample.weight.sum())
    (3, 1.0)
    """
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    codes, counts = class_codes(y, negatives=True)
    rng = check_random_state(random_state)
    n = codes.shape[0]
    partners = n - counts[codes]
    first = rng.choice(n, size=n_pairs, p=partners / partners.sum())
    order, starts = _class_blocks(codes, counts)
    first_class = codes[first]
    # Position among the items of the other classes, in class-sorted order, skipping the block of
    # the first item's class.
    position = (rng.random_sample(n_pairs) * partners[first]).astype(np.int64)
    position = np.minimum(position, partners[first] - 1)
    position += np.where(position >= starts[first_class], counts[first_class], 0)
    second = order[position]
    return PairSample(first, second, np.full(n_pairs, 1.0 / n_pairs))


@fill_docs(_DRAW_DOCS)
def sample_negative_tuples(y, n_tuples, random_state=None):
    """Draw K-tuples (one random item per class) and weight their pairs to be unbiased.

    Each of the ``B`` tuples holds one item drawn uniformly from each of the ``K`` classes and
    yields its ``K (K - 1) / 2`` pairs; the pair of classes ``(k, l)`` gets weight
    ``n_k n_l / (n_- B)``, so the weighted sum over the sample is an unbiased estimate of the mean
    over all negative pairs (the incomplete generalised K-sample U-statistic of Section 4 of Vogel,
    Bellet & Clémençon, 2018). The sample holds ``B K (K - 1) / 2`` pairs, balanced across class
    pairs: use it when classes are few.

    Parameters
    ----------
    {labels}
    n_tuples : int
        Number of tuples ``B`` to draw.
    {random_state}

    Returns
    -------
    sample : PairSample
        ``B K (K - 1) / 2`` pairs whose weights sum to one.

    Examples
    --------
    Class sizes 2, 1, 1 make ``n_- = 5`` negative pairs; each tuple yields the class pairs
    (0, 1), (0, 2), (1, 2), weighted ``n_k n_l / (n_- B)``:

    >>> from skrank.sampling import sample_negative_tuples
    >>> sample = sample_negative_tuples([0, 0, 1, 2], n_tuples=2, random_state=0)
    >>> sample.weight
    array([0.2, 0.2, 0.1, 0.2, 0.2, 0.1])
    """
    n_tuples = check_positive_int(n_tuples, "n_tuples")
    codes, counts = class_codes(y, negatives=True)
    rng = check_random_state(random_state)
    order, starts = _class_blocks(codes, counts)
    offsets = (rng.random_sample((n_tuples, counts.shape[0])) * counts).astype(np.int64)
    tuples = order[starts + np.minimum(offsets, counts - 1)]
    class_first, class_second = np.triu_indices(counts.shape[0], k=1)
    counts = counts.astype(np.float64)
    pair_weight = counts[class_first] * counts[class_second]
    pair_weight /= pair_weight.sum() * n_tuples
    return PairSample(
        tuples[:, class_first].ravel(),
        tuples[:, class_second].ravel(),
        np.tile(pair_weight, n_tuples),
    )


def iter_negative_pairs(y, max_pairs_per_block=None):
    """Enumerate all negative pairs ``i < j`` in blocks of bounded size.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.
    max_pairs_per_block : int or None, default=None
        Bound on the number of candidate pairs examined per block. A block covers consecutive
        rows ``i`` of the upper triangle, at least one row. None sizes the blocks so that their
        work arrays (about 26 bytes per candidate pair) fit scikit-learn's ``working_memory``.

    Yields
    ------
    block : PairSample
        Negative pairs with weight ``1 / n_-`` each; the weights of all blocks sum to one.
    """
    codes, counts = class_codes(y, negatives=True)
    n = codes.shape[0]
    weight = 1.0 / count_pairs(codes)[1]
    if max_pairs_per_block is None:
        rows_per_block = chunk_rows(n - 1, 26 * n)
    else:
        max_pairs_per_block = check_positive_int(max_pairs_per_block, "max_pairs_per_block")
        rows_per_block = max(1, max_pairs_per_block // n)
    columns = np.arange(n)
    for start in range(0, n - 1, rows_per_block):
        rows = np.arange(start, min(start + rows_per_block, n - 1))
        negative = (columns > rows[:, None]) & (codes[None, :] != codes[rows, None])
        first, second = np.nonzero(negative)
        if first.shape[0]:
            yield PairSample(rows[first], second, np.full(first.shape[0], weight))
