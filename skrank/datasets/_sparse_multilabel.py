"""Sparse bag-of-words data with many labels and few examples per label (extreme classification)."""

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .._compat import Interval, validate_params


@validate_params(
    {
        "n_labels": [Interval(Integral, 2, None, closed="left")],
        "samples_per_label": [Interval(Real, 0, None, closed="neither")],
        "n_features": [Interval(Integral, 2, None, closed="left")],
        "words_per_label": [Interval(Integral, 1, None, closed="left")],
        "words_per_sample": [Interval(Real, 1, None, closed="left")],
        "signal": [Interval(Real, 0, 1, closed="both")],
        "label_noise": [Interval(Real, 0, 1, closed="both")],
        "multilabel": ["boolean"],
        "labels_per_sample": [Interval(Real, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_sparse_multilabel_classification(
    n_labels=2000,
    samples_per_label=15,
    n_features=1000,
    *,
    words_per_label=20,
    words_per_sample=20,
    signal=0.3,
    label_noise=0.0,
    multilabel=False,
    labels_per_sample=3.0,
    random_state=None,
):
    """Draw sparse binary (bag-of-words) data with many labels and few examples per label.

    Construction (a topic model, like the text data of extreme classification). Label ``k`` has
    a topic: ``words_per_label`` features drawn at random without replacement, with weights
    from a flat Dirichlet distribution; topics of different labels share features. A sample
    has one label (``multilabel=False``) or ``1 + Poisson(labels_per_sample - 1)`` distinct
    labels; it draws ``1 + Poisson(words_per_sample - 1)`` words, each from the topic of one of
    its labels (chosen uniformly) with probability ``signal``, else from a background
    distribution over all features (Zipf-like, ``P(j) proportional to 1 / (j + 10)``); its
    features are the indicators of the words drawn. The first label of every sample cycles
    through the labels, so each label is the first label of ``samples_per_label`` samples on
    average (exactly, when ``samples_per_label`` is an integer). Label noise then replaces
    each label of the targets, with probability ``label_noise``, by a label drawn uniformly
    (the features keep the true topics).

    Memory: ``O(n_labels * words_per_label)`` for the topics and ``O(nnz)`` for the data.

    Parameters
    ----------
    n_labels : int, default=2000
        Number of labels ``K`` (10**3 to 10**5 are typical; more is fine).
    samples_per_label : float, default=15
        Average number of samples whose first label is a given label; ``n_samples =
        round(n_labels * samples_per_label)``.
    n_features : int, default=1000
        Number of (binary) features.
    words_per_label : int, default=20
        Size of each label's topic (at most ``n_features``).
    words_per_sample : float, default=20
        Mean number of words drawn per sample (repeated words count once, so rows have at most
        that many non-zeros on average).
    signal : float in [0, 1], default=0.3
        Probability that a word comes from the sample's topics rather than the background.
    label_noise : float in [0, 1], default=0.0
        Probability that each target label is replaced by a uniformly drawn one.
    multilabel : bool, default=False
        Several labels per sample (targets are an indicator matrix) or one (a label vector).
    labels_per_sample : float, default=3.0
        Mean number of labels of a multilabel sample; ignored for single-label data.
    random_state : int, RandomState instance or None, default=None
        Seed of the draws.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
        Binary features.
    y : ndarray of shape (n_samples,), int64, or scipy.sparse.csr_matrix of shape \
(n_samples, n_labels), int8
        Labels ``0 .. n_labels - 1``, or the multilabel indicator matrix.

    Examples
    --------
    >>> from skrank.datasets import make_sparse_multilabel_classification
    >>> X, y = make_sparse_multilabel_classification(n_labels=100, samples_per_label=5,
    ...                                              random_state=0)
    >>> X.shape, y.shape, int(y.max())
    ((500, 1000), (500,), 99)
    >>> X, Y = make_sparse_multilabel_classification(n_labels=100, multilabel=True,
    ...                                              random_state=0)
    >>> Y.shape
    (1500, 100)
    """
    if words_per_label > n_features:
        raise ValueError(
            f"words_per_label={words_per_label} exceeds n_features={n_features}: a topic is a "
            "set of distinct features."
        )
    rng = check_random_state(random_state)
    n_samples = max(1, int(round(n_labels * samples_per_label)))
    topics = _draw_topics(n_labels, n_features, words_per_label, rng)
    weights = rng.gamma(1.0, size=(n_labels, words_per_label))
    cumulative = np.cumsum(weights, axis=1)
    cumulative /= cumulative[:, -1:]

    first = np.arange(n_samples) % n_labels
    rng.shuffle(first)
    if multilabel:
        extra = rng.poisson(labels_per_sample - 1, size=n_samples)
        label_rows = np.repeat(np.arange(n_samples), 1 + extra)
        starts = np.cumsum(1 + extra) - (1 + extra)
        labels = rng.randint(n_labels, size=label_rows.size)
        labels[starts] = first
    else:
        label_rows, labels, starts = np.arange(n_samples), first, np.arange(n_samples)
    n_per_row = np.bincount(label_rows, minlength=n_samples)

    n_words = 1 + rng.poisson(words_per_sample - 1, size=n_samples)
    word_rows = np.repeat(np.arange(n_samples), n_words)
    from_topic = rng.random_sample(word_rows.size) < signal
    # Topic words: a label of the row drawn uniformly, then a word of its topic by its weights.
    rows = word_rows[from_topic]
    chosen = labels[starts[rows] + (rng.random_sample(rows.size) * n_per_row[rows]).astype(int)]
    # Row k of the weights, shifted by k, searched as one sorted array.
    shifted = (cumulative + np.arange(n_labels)[:, None]).ravel()
    flat = np.searchsorted(shifted, chosen + rng.random_sample(rows.size))
    topic_words = topics.ravel()[np.minimum(flat, (chosen + 1) * words_per_label - 1)]
    background = _draw_background(n_features, int((~from_topic).sum()), rng)
    columns = np.empty(word_rows.size, dtype=np.int64)
    columns[from_topic] = topic_words
    columns[~from_topic] = background
    X = sp.csr_matrix(
        (np.ones(word_rows.size), (word_rows, columns)), shape=(n_samples, n_features)
    )
    X.sum_duplicates()
    X.data[:] = 1.0

    if label_noise > 0:
        noisy = rng.random_sample(labels.size) < label_noise
        labels = labels.copy()
        labels[noisy] = rng.randint(n_labels, size=int(noisy.sum()))
    if not multilabel:
        return X, labels.astype(np.int64)
    Y = sp.csr_matrix(
        (np.ones(labels.size, dtype=np.int8), (label_rows, labels)), shape=(n_samples, n_labels)
    )
    Y.sum_duplicates()
    Y.data[:] = 1
    return X, Y


def _draw_topics(n_labels, n_features, words_per_label, rng):
    """``words_per_label`` distinct features per label, shape (n_labels, words_per_label)."""
    if words_per_label * 4 <= n_features:
        # Rejection of rows with repeats: rare when topics are small against the features.
        topics = rng.randint(n_features, size=(n_labels, words_per_label))
        while True:
            ordered = np.sort(topics, axis=1)
            repeated = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
            if repeated.size == 0:
                return topics
            topics[repeated] = rng.randint(n_features, size=(repeated.size, words_per_label))
    return np.argsort(rng.random_sample((n_labels, n_features)), axis=1)[:, :words_per_label]


def _draw_background(n_features, size, rng):
    """Features drawn with probabilities proportional to ``1 / (j + 10)``."""
    weights = 1.0 / (np.arange(n_features) + 10.0)
    cumulative = np.cumsum(weights)
    cumulative /= cumulative[-1]
    return np.minimum(np.searchsorted(cumulative, rng.random_sample(size)), n_features - 1)
