"""Synthetic data of the papers behind skrank (DESIGN.md sections 5-7)."""

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .._compat import Interval, StrOptions, validate_params

# (negative sampler, positive sampler) of the SOPRC paper's simulation (its Appendix B.2).
_SCORE_DISTRIBUTIONS = {
    "binormal": (
        lambda rng, size: rng.normal(0.0, 1.0, size),
        lambda rng, size: rng.normal(1.0, 1.0, size),
    ),
    "bibeta": (
        lambda rng, size: rng.beta(2.0, 5.0, size),
        lambda rng, size: rng.beta(5.0, 2.0, size),
    ),
    "offset_uniform": (
        lambda rng, size: rng.uniform(0.0, 1.0, size),
        lambda rng, size: rng.uniform(0.5, 1.5, size),
    ),
}

# Classes of Section 5.1 of the pointwise-ROC paper: uniform on the unit sphere within
# _SPHERE_CAP_ANGLE of each center.
_SPHERE_CENTERS = np.array(
    [[np.cos(np.pi / 3), np.sin(np.pi / 3), 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
)
_SPHERE_CAP_ANGLE = np.pi / 4

_MAX_LABELS = 2**53  # label ranks are exact in float64 below this


@validate_params(
    {
        "distribution": [StrOptions(set(_SCORE_DISTRIBUTIONS))],
        "n_samples": [Interval(Integral, 2, None, closed="left")],
        "positive_rate": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_score_simulation(
    distribution="binormal", *, n_samples=100_000, positive_rate=0.1, random_state=None
):
    """Draw the scored items of the SOPRC paper's simulation (its Appendix B.2).

    Exactly ``round(positive_rate * n_samples)`` items are positive (Python's ``round``: halves
    go to the even number); scores are drawn independently given the label, and the items are
    returned in random order.

    ======================  ===============  ===============
    ``distribution``        negative scores  positive scores
    ======================  ===============  ===============
    ``"binormal"``          N(0, 1)          N(1, 1)
    ``"bibeta"``            Beta(2, 5)       Beta(5, 2)
    ``"offset_uniform"``    U(0, 1)          U(0.5, 1.5)
    ======================  ===============  ===============

    Parameters
    ----------
    distribution : {"binormal", "bibeta", "offset_uniform"}, default="binormal"
        The pair of score distributions.
    n_samples : int, default=100_000
        Number of scored items.
    positive_rate : float in (0, 1), default=0.1
        Fraction of positive items (the prior pi of the paper).
    random_state : int, RandomState instance or None, default=None
        Seed of the draws; pass an int for reproducible output.

    Returns
    -------
    y_score : ndarray of float64 of shape (n_samples,)
    y_true : ndarray of int64 of shape (n_samples,)
        1 for positive items, 0 for negative ones.

    Examples
    --------
    >>> from skrank.datasets import make_score_simulation
    >>> y_score, y_true = make_score_simulation("bibeta", n_samples=1000, random_state=0)
    >>> int(y_true.sum())
    100
    """
    n_positives = round(positive_rate * n_samples)
    if not 0 < n_positives < n_samples:
        raise ValueError(
            f"positive_rate={positive_rate} of n_samples={n_samples} gives {n_positives} "
            "positives; both classes need at least one item."
        )
    rng = check_random_state(random_state)
    draw_negatives, draw_positives = _SCORE_DISTRIBUTIONS[distribution]
    y_score = np.concatenate(
        [draw_negatives(rng, n_samples - n_positives), draw_positives(rng, n_positives)]
    )
    y_true = np.repeat(np.array([0, 1], dtype=np.int64), [n_samples - n_positives, n_positives])
    order = rng.permutation(n_samples)
    return y_score[order], y_true[order]


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "return_centers": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_sphere_classes(n_samples=300, *, return_centers=False, random_state=None):
    """Draw the 3-class data on the unit sphere of the pointwise-ROC paper (its Section 5.1).

    Class ``k`` is uniform on the spherical cap of points within an angle of pi/4 of its center
    ``c_k``, with ``c_0 = (cos(pi/3), sin(pi/3), 0)``, ``c_1 = e_2`` and ``c_2 = e_3`` (the
    paper's classes 1, 2, 3). Classes 0 and 1 overlap (their centers are pi/6 apart); class 2
    touches both only at the boundary. The class proportions are the paper's 1/3 each, realised
    exactly: the class counts differ by at most one.

    The cap is sampled exactly: by Archimedes' theorem the height ``z = cos(theta)`` of a uniform
    point on a cap about ``e_3`` is uniform on ``(cos(pi/4), 1]`` and its azimuth is uniform and
    independent; the points are then mapped onto the cap about ``c_k`` by the Householder
    reflection taking ``e_3`` to ``c_k``, which preserves the uniform distribution.

    Parameters
    ----------
    n_samples : int, default=300
        Total number of points.
    return_centers : bool, default=False
        If True, also return the class centers.
    random_state : int, RandomState instance or None, default=None
        Seed of the draws; pass an int for reproducible output.

    Returns
    -------
    X : ndarray of float64 of shape (n_samples, 3)
        Unit-norm points, in random class order.
    y : ndarray of int64 of shape (n_samples,)
        Class labels 0, 1, 2.
    centers : ndarray of shape (3, 3)
        The class centers, row ``k`` for class ``k``. Only if ``return_centers`` is True.

    Examples
    --------
    >>> from skrank.datasets import make_sphere_classes
    >>> X, y = make_sphere_classes(30, random_state=0)
    >>> X.shape, np.bincount(y)
    ((30, 3), array([10, 10, 10]))
    """
    rng = check_random_state(random_state)
    y = rng.permutation(np.arange(n_samples, dtype=np.int64) % len(_SPHERE_CENTERS))
    X = np.empty((n_samples, 3))
    for label, center in enumerate(_SPHERE_CENTERS):
        members = y == label
        X[members] = _sample_spherical_cap(center, _SPHERE_CAP_ANGLE, members.sum(), rng)
    if return_centers:
        return X, y, _SPHERE_CENTERS.copy()
    return X, y


def _sample_spherical_cap(center, max_angle, n_points, rng):
    """Uniform points of the unit sphere of R^3 at an angle below ``max_angle`` of ``center``."""
    heights = 1.0 - rng.random_sample(n_points) * (1.0 - np.cos(max_angle))
    azimuths = 2.0 * np.pi * rng.random_sample(n_points)
    radii = np.sqrt(1.0 - heights**2)
    about_e3 = np.column_stack([radii * np.cos(azimuths), radii * np.sin(azimuths), heights])
    return about_e3 @ _reflection_taking_e3_to(center)


def _reflection_taking_e3_to(center):
    """Symmetric orthogonal matrix ``H`` with ``H @ e_3 = center`` (unit vector)."""
    direction = np.array([0.0, 0.0, 1.0]) - center
    squared_norm = direction @ direction
    if squared_norm < 1e-24:
        return np.eye(3)
    return np.eye(3) - 2.0 * np.outer(direction, direction) / squared_norm


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_features": [Interval(Integral, 1, None, closed="left")],
        "n_labels": [Interval(Integral, 2, _MAX_LABELS, closed="both")],
        "noise": [Interval(Real, 0, None, closed="left")],
        "label_distribution": [StrOptions({"uniform", "zipf"})],
        "zipf_exponent": [Interval(Real, 0, 4, closed="right")],
        "multilabel": ["boolean"],
        "n_labels_per_sample": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_large_output_classification(
    n_samples=1000,
    n_features=64,
    n_labels=1000,
    *,
    noise=0.5,
    label_distribution="uniform",
    zipf_exponent=1.0,
    multilabel=False,
    n_labels_per_sample=1,
    random_state=None,
):
    """Draw learnable classification data with a very large label set, in O(n d + d log K) memory.

    Construction. Label ``k`` has a code ``b(k)`` in {-1, +1}^m: the ``m = ceil(log2 K)`` bits
    of ``k`` in binary. A fixed random matrix ``Q`` of shape (n_features, m) with orthonormal
    columns maps codes to prototypes ``Q b(k)``, and a sample of label ``k`` is
    ``x = Q b(k) + noise * eps`` with standard normal ``eps``. No (K, d) table is ever formed:
    only ``Q`` (d x log K) and the codes of the drawn labels. All prototypes have the same norm,
    so the Bayes classifier for uniform labels is linear, ``argmax_k <x, Q b(k)>`` (the label
    embeddings ``b(k) / sqrt(m)`` are unit vectors, as SNM assumes); it decodes each bit by the
    sign of ``<x, q_j>``, so for uniform labels and K a power of two its accuracy is
    ``Phi(1 / noise) ** m`` (with the default noise=0.5: 0.79 for K = 2**10, 0.63 for K = 2**20).

    Multilabel (``n_labels_per_sample = L``): the labels are split into L contiguous blocks of
    (nearly) equal size, each sample has exactly one label of each block, and each block has its
    own orthonormal columns of ``Q`` (orthogonal to the other blocks'), so ``x`` is the sum of
    its L prototypes plus noise and every label stays linearly decodable.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples.
    n_features : int, default=64
        Number of features; at least the total number of code bits (``ceil(log2 K)`` for
        single-label data).
    n_labels : int, default=1000
        Number of labels K, from 2 up to 2**53; 10**6 and more are cheap.
    noise : float >= 0, default=0.5
        Standard deviation of the Gaussian noise of each feature; the code bits have unit size.
    label_distribution : {"uniform", "zipf"}, default="uniform"
        Distribution of the labels (within each block for multilabel data): uniform, or Zipf,
        ``P(k) proportional to (k + 1) ** -zipf_exponent``, so label 0 is the most frequent,
        drawn by rejection sampling in O(n_samples) memory.
    zipf_exponent : float in (0, 4], default=1.0
        Exponent of the Zipf distribution; ignored for uniform labels.
    multilabel : bool, default=False
        If True, ``y`` is a sparse label-indicator matrix, else a vector of labels.
    n_labels_per_sample : int, default=1
        Number of labels of each sample; more than 1 requires ``multilabel=True``, and each
        block needs at least 2 labels (``n_labels >= 2 * n_labels_per_sample``).
    random_state : int, RandomState instance or None, default=None
        Seed of the draws (``Q``, labels and noise); pass an int for reproducible output.

    Returns
    -------
    X : ndarray of float64 of shape (n_samples, n_features)
    y : ndarray of int64 of shape (n_samples,), or CSR matrix of int64 of shape \
(n_samples, n_labels) if ``multilabel`` is True
        Labels in ``[0, n_labels)``.

    Examples
    --------
    >>> from skrank.datasets import make_large_output_classification
    >>> X, y = make_large_output_classification(
    ...     n_samples=5, n_features=32, n_labels=10**6, random_state=0)
    >>> X.shape, y.dtype
    ((5, 32), dtype('int64'))
    """
    _check_label_blocks(n_labels, multilabel, n_labels_per_sample)
    block_sizes = [
        n_labels // n_labels_per_sample + (block < n_labels % n_labels_per_sample)
        for block in range(n_labels_per_sample)
    ]
    block_starts = np.cumsum([0] + block_sizes[:-1])
    block_bits = [(size - 1).bit_length() for size in block_sizes]
    n_code_bits = sum(block_bits)
    if n_code_bits > n_features:
        bits_rule = "ceil(log2(n_labels))"
        if n_labels_per_sample > 1:
            bits_rule = f"ceil(log2(block size)) summed over {n_labels_per_sample} label blocks"
        raise ValueError(
            f"n_features={n_features} is too small: the label codes need {n_code_bits} "
            f"orthogonal directions ({bits_rule}); use n_features >= {n_code_bits}."
        )
    rng = check_random_state(random_state)
    prototype_map = np.linalg.qr(rng.standard_normal((n_features, n_code_bits)))[0]
    local_labels = [
        _draw_labels(size, n_samples, label_distribution, zipf_exponent, rng)
        for size in block_sizes
    ]
    codes = np.hstack(
        [_binary_codes(labels, bits) for labels, bits in zip(local_labels, block_bits, strict=True)]
    )
    X = codes @ prototype_map.T + noise * rng.standard_normal((n_samples, n_features))
    labels = np.column_stack(local_labels) + block_starts
    if not multilabel:
        return X, labels[:, 0]
    indicator = sp.csr_matrix(
        (
            np.ones(labels.size, dtype=np.int64),
            labels.ravel(),
            np.arange(0, labels.size + 1, n_labels_per_sample),
        ),
        shape=(n_samples, n_labels),
    )
    return X, indicator


def _check_label_blocks(n_labels, multilabel, n_labels_per_sample):
    if n_labels_per_sample > 1 and not multilabel:
        raise ValueError(
            f"n_labels_per_sample={n_labels_per_sample} needs multilabel=True; single-label "
            "data has one label per sample."
        )
    if n_labels < 2 * n_labels_per_sample:
        raise ValueError(
            f"n_labels={n_labels} is too small for n_labels_per_sample={n_labels_per_sample}: "
            "each of the label blocks needs at least 2 labels."
        )


def _binary_codes(labels, n_bits):
    """Rows of -1/+1: bit j (least significant first) of each label."""
    bits = (labels[:, np.newaxis] >> np.arange(n_bits, dtype=np.int64)) & 1
    return 2.0 * bits - 1.0


def _draw_labels(n_labels, size, distribution, zipf_exponent, rng):
    if distribution == "uniform":
        return rng.randint(0, n_labels, size=size, dtype=np.int64)
    return _draw_zipf(n_labels, zipf_exponent, size, rng)


def _draw_zipf(n_values, exponent, size, rng):
    """Integers ``k`` in [0, n_values) with P(k) proportional to (k + 1) ** -exponent.

    Exact rejection sampling in O(size) memory, whatever ``n_values``: propose ``x`` with density
    proportional to ``x ** -exponent`` on [1/2, n_values + 1/2) and round it to the rank
    ``r = k + 1``; accept with probability ``r ** -exponent / I(r)``, with ``I(r)`` the integral of
    ``x ** -exponent`` over [r - 1/2, r + 1/2], which is at most 1 because the density is convex.
    The acceptance rate is at least 0.38 for exponents up to 4 (0.91 for exponent 1).
    """
    samples = np.empty(size, dtype=np.int64)
    n_filled = 0
    while n_filled < size:
        proposals = _draw_power_law(0.5, n_values + 0.5, exponent, size - n_filled, rng)
        ranks = np.clip(np.floor(proposals + 0.5), 1, n_values)
        accepted = ranks[rng.random_sample(ranks.size) < _zipf_acceptance(ranks, exponent)]
        samples[n_filled : n_filled + accepted.size] = accepted.astype(np.int64) - 1
        n_filled += accepted.size
    return samples


def _draw_power_law(low, high, exponent, size, rng):
    """Draws of the density proportional to ``x ** -exponent`` on [low, high) (inverse CDF)."""
    uniform = rng.random_sample(size)
    log_range = np.log(high / low)
    if exponent == 1:
        return low * np.exp(uniform * log_range)
    power = 1.0 - exponent
    # low * (1 + uniform * ((high / low) ** power - 1)) ** (1 / power), stable near power = 0
    return low * np.exp(np.log1p(uniform * np.expm1(power * log_range)) / power)


def _zipf_acceptance(ranks, exponent):
    """``r ** -exponent / I(r)``, computed stably for large ranks."""
    log_ratio = np.log1p(1.0 / (ranks - 0.5))  # log((r + 1/2) / (r - 1/2))
    if exponent == 1:
        integral_scale = log_ratio
    else:
        integral_scale = np.expm1((1.0 - exponent) * log_ratio) / (1.0 - exponent)
    # I(r) = (r - 1/2) ** (1 - exponent) * integral_scale
    return np.exp(-exponent * np.log(ranks) - (1.0 - exponent) * np.log(ranks - 0.5)) / (
        integral_scale
    )
