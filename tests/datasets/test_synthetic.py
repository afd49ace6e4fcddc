"""The synthetic generators (``skrank.datasets._synthetic``): the score simulation, the
paper's sphere classes and the large-output generator."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.model_selection import train_test_split
from sklearn.neighbors import NearestCentroid

from skrank.datasets import (
    make_large_output_classification,
    make_score_simulation,
    make_sphere_classes,
)
from skrank.datasets._synthetic import _draw_zipf

SCORE_DISTRIBUTIONS = {
    "binormal": (stats.norm(0, 1), stats.norm(1, 1)),
    "bibeta": (stats.beta(2, 5), stats.beta(5, 2)),
    "offset_uniform": (stats.uniform(0, 1), stats.uniform(0.5, 1)),
}


@pytest.mark.parametrize("distribution", SCORE_DISTRIBUTIONS)
def test_make_score_simulation_distributions(distribution):
    y_score, y_true = make_score_simulation(distribution, n_samples=20_000, random_state=0)
    assert y_score.shape == y_true.shape == (20_000,)
    assert y_score.dtype == np.float64 and y_true.dtype == np.int64
    assert y_true.sum() == 2_000 and set(np.unique(y_true)) == {0, 1}
    negative, positive = SCORE_DISTRIBUTIONS[distribution]
    assert stats.kstest(y_score[y_true == 0], negative.cdf).pvalue > 1e-3
    assert stats.kstest(y_score[y_true == 1], positive.cdf).pvalue > 1e-3
    assert 0.3 < y_true[:10_000].mean() / 0.1 < 1.7  # shuffled, positives not all at the end


@pytest.mark.parametrize(
    "n_samples, positive_rate, n_positives",
    [(100_000, 0.1, 10_000), (1001, 0.1, 100), (15, 0.1, 2), (10, 0.25, 2), (3, 0.5, 2)],
)
def test_make_score_simulation_exact_positive_count(n_samples, positive_rate, n_positives):
    _, y_true = make_score_simulation(
        n_samples=n_samples, positive_rate=positive_rate, random_state=1
    )
    assert y_true.sum() == n_positives == round(positive_rate * n_samples)


def test_make_score_simulation_random_state():
    first = make_score_simulation("bibeta", n_samples=500, random_state=3)
    again = make_score_simulation("bibeta", n_samples=500, random_state=3)
    other = make_score_simulation("bibeta", n_samples=500, random_state=4)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], other[0])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"distribution": "normal"}, ValueError, "distribution"),
        ({"positive_rate": 0.0}, ValueError, "positive_rate"),
        ({"positive_rate": 1.0}, ValueError, "positive_rate"),
        ({"n_samples": 4, "positive_rate": 0.1}, ValueError, "gives 0 positives"),
        ({"n_samples": 4, "positive_rate": 0.9}, ValueError, "gives 4 positives"),
        ({"n_samples": 1}, ValueError, "n_samples"),
        ({"n_samples": 10.5}, TypeError, "n_samples"),
    ],
)
def test_make_score_simulation_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_score_simulation(**kwargs)


COS_CAP = math.cos(math.pi / 4)


def test_make_sphere_classes_cap_membership_and_uniformity():
    X, y, centers = make_sphere_classes(30_000, return_centers=True, random_state=0)
    assert X.shape == (30_000, 3) and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y), [10_000, 10_000, 10_000])
    np.testing.assert_allclose(
        centers, [[math.cos(math.pi / 3), math.sin(math.pi / 3), 0], [0, 1, 0], [0, 0, 1]]
    )
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    for label, center in enumerate(centers):
        points = X[y == label]
        heights = points @ center  # cos of the angle to the class center
        assert heights.min() > COS_CAP and heights.max() <= 1.0
        assert stats.kstest(heights, stats.uniform(COS_CAP, 1 - COS_CAP).cdf).pvalue > 1e-3
        # uniform azimuth: second moment c c^T E[z^2] + (I - c c^T) E[1 - z^2] / 2
        mean_squared_height = (1 - COS_CAP**3) / (3 * (1 - COS_CAP))
        projector = np.outer(center, center)
        expected = (
            projector * mean_squared_height
            + (np.eye(3) - projector) * (1 - mean_squared_height) / 2
        )
        # tolerances: 5 standard errors of these means over 10,000 points
        np.testing.assert_allclose(points.T @ points / len(points), expected, atol=0.015)
        np.testing.assert_allclose(points.mean(axis=0), center * (1 + COS_CAP) / 2, atol=0.015)


def test_make_sphere_classes_counts_and_random_state():
    X, y = make_sphere_classes(7, random_state=5)
    np.testing.assert_array_equal(np.bincount(y), [3, 2, 2])
    X_again, y_again = make_sphere_classes(7, random_state=5)
    np.testing.assert_array_equal(X, X_again)
    np.testing.assert_array_equal(y, y_again)
    assert not np.array_equal(make_sphere_classes(7, random_state=6)[0], X)
    with pytest.raises(ValueError, match="n_samples"):
        make_sphere_classes(0)


def _nearest_centroid_accuracy(X, y):
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0)
    return NearestCentroid().fit(X_train, y_train).score(X_test, y_test)


def test_make_large_output_classification_reaches_bayes_accuracy():
    """For K = 16 uniform labels the Bayes accuracy is Phi(1 / noise) ** 4 (docstring)."""
    X, y = make_large_output_classification(
        n_samples=8000, n_features=10, n_labels=16, noise=0.5, random_state=0
    )
    assert X.shape == (8000, 10) and X.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(np.unique(y), np.arange(16))
    bayes_accuracy = stats.norm.cdf(1 / 0.5) ** 4
    assert abs(_nearest_centroid_accuracy(X, y) - bayes_accuracy) < 0.03


def test_make_large_output_classification_multilabel_blocks_are_learnable():
    X, Y = make_large_output_classification(
        n_samples=8000,
        n_features=12,
        n_labels=33,
        noise=0.5,
        multilabel=True,
        n_labels_per_sample=2,
        random_state=1,
    )
    assert sp.isspmatrix_csr(Y) and Y.shape == (8000, 33) and Y.dtype == np.int64
    assert Y.has_canonical_format
    np.testing.assert_array_equal(Y.getnnz(axis=1), 2)
    first_block, second_block = Y.indices[0::2], Y.indices[1::2]  # blocks of 17 and 16 labels
    assert first_block.max() < 17 <= second_block.min() and second_block.max() < 33
    assert _nearest_centroid_accuracy(X, first_block) > 0.75  # chance: 1/17
    # the second block has 16 labels: every code used, Bayes accuracy Phi(1 / noise) ** 4
    accuracy = _nearest_centroid_accuracy(X, second_block)
    assert abs(accuracy - stats.norm.cdf(1 / 0.5) ** 4) < 0.03


def test_make_large_output_classification_never_allocates_per_label():
    """A (K, d) table for K = 2**50 could not exist; the generator needs O(n d + d log K)."""
    for label_distribution in ("uniform", "zipf"):
        X, y = make_large_output_classification(
            n_samples=50,
            n_features=60,
            n_labels=2**50,
            label_distribution=label_distribution,
            random_state=0,
        )
        assert X.shape == (50, 60) and 0 <= y.min() and y.max() < 2**50


def test_make_large_output_classification_zipf_frequencies():
    _, y = make_large_output_classification(
        n_samples=30_000,
        n_features=8,
        n_labels=20,
        label_distribution="zipf",
        zipf_exponent=1.5,
        random_state=2,
    )
    expected = np.arange(1, 21) ** -1.5
    expected *= len(y) / expected.sum()
    assert stats.chisquare(np.bincount(y, minlength=20), expected).pvalue > 1e-3


@pytest.mark.parametrize("exponent", [0.2, 1.0, 1.0 + 1e-12, 3.0, 4.0])
def test_draw_zipf_matches_the_exact_distribution(exponent):
    rng = np.random.RandomState(0)
    samples = _draw_zipf(12, exponent, 40_000, rng)
    expected = np.arange(1, 13) ** -float(exponent)
    expected *= len(samples) / expected.sum()
    observed = np.bincount(samples, minlength=12)
    rare = expected < 5  # chi-square needs expected counts of at least 5: pool the rare ranks
    if rare.any():
        observed = np.append(observed[~rare], observed[rare].sum())
        expected = np.append(expected[~rare], expected[rare].sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_make_large_output_classification_random_state():
    kwargs = {"n_samples": 30, "n_features": 16, "n_labels": 1000, "label_distribution": "zipf"}
    X, y = make_large_output_classification(**kwargs, random_state=4)
    X_again, y_again = make_large_output_classification(**kwargs, random_state=4)
    np.testing.assert_array_equal(X, X_again)
    np.testing.assert_array_equal(y, y_again)
    assert not np.array_equal(make_large_output_classification(**kwargs, random_state=5)[0], X)


def test_make_large_output_classification_noise_free_data_is_decodable():
    X, y = make_large_output_classification(
        n_samples=200, n_features=20, n_labels=1000, noise=0.0, random_state=0
    )
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), math.sqrt(10))  # 10 code bits
    n_distinct_points = len(np.unique(X.round(10), axis=0))
    assert n_distinct_points == len(np.unique(y))  # one point per label, distinct labels apart


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_features": 9, "n_labels": 1000}, ValueError, "n_features >= 10"),
        (
            {"n_features": 19, "n_labels": 2000, "multilabel": True, "n_labels_per_sample": 2},
            ValueError,
            "n_features >= 20",
        ),
        ({"n_labels_per_sample": 2}, ValueError, "needs multilabel=True"),
        (
            {"n_labels": 5, "multilabel": True, "n_labels_per_sample": 3},
            ValueError,
            "at least 2 labels",
        ),
        ({"n_labels": 1}, ValueError, "n_labels"),
        ({"n_labels": 2**54}, ValueError, "n_labels"),
        ({"noise": -0.1}, ValueError, "noise"),
        ({"label_distribution": "powerlaw"}, ValueError, "label_distribution"),
        ({"zipf_exponent": 0.0}, ValueError, "zipf_exponent"),
        ({"zipf_exponent": 4.5}, ValueError, "zipf_exponent"),
        ({"multilabel": 1}, TypeError, "multilabel"),
        ({"n_samples": 0}, ValueError, "n_samples"),
    ],
)
def test_make_large_output_classification_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_large_output_classification(**kwargs)
