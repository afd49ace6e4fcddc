"""Negative-label sampler: exact per-example distribution, masking, cost independent of K."""

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.stats import chisquare

from skrank.sampling import NegativeLabelSampler, draw_positive_labels, sample_distinct_labels
from skrank.sampling._labels import _is_positive, every_negative_label, positive_table


@pytest.mark.parametrize("n_labels, size", [(10**12, 2000), (50, 49), (50, 10), (7, 7), (7, 0)])
def test_sample_distinct_labels_are_distinct_and_in_range(n_labels, size):
    labels = sample_distinct_labels(n_labels, size, random_state=0)
    assert labels.shape == (size,) and labels.dtype == np.int64
    assert len(np.unique(labels)) == size
    assert size == 0 or (labels.min() >= 0 and labels.max() < n_labels)


@pytest.mark.parametrize("n_labels", [5, 11])  # permutation branch, stream branch
def test_sample_distinct_labels_ordered_selections_are_uniform(n_labels):
    rng = np.random.RandomState(0)
    size, draws = 2, 20000
    counts = Counter(tuple(sample_distinct_labels(n_labels, size, rng)) for _ in range(draws))
    selections = list(itertools.permutations(range(n_labels), size))
    assert set(counts) == set(selections)
    assert chisquare([counts[s] for s in selections]).pvalue > 1e-3


def test_each_example_gets_a_uniform_subset_of_its_own_negatives():
    """Shared sample + masking: every example's negatives are uniform over Y minus its positives."""
    n_labels, n_negatives = 7, 2
    indicator = sp.csr_matrix(
        np.array(
            [
                [0, 1, 0, 0, 1, 0, 0],  # positives {1, 4}
                [1, 0, 0, 0, 0, 0, 0],  # {0}
                [0, 0, 1, 1, 1, 1, 0],  # {2, 3, 4, 5}: only 3 negatives left
            ]
        )
    )
    sampler = NegativeLabelSampler(n_labels, n_negatives, random_state=0)
    counts = [Counter() for _ in range(3)]
    for _ in range(6000):
        labels, mask = sampler.sample(indicator)
        for i in range(3):
            counts[i][frozenset(labels[mask[i]].tolist())] += 1
    for i in range(3):
        negatives = sorted(set(range(n_labels)) - set(indicator[i].indices.tolist()))
        subsets = [frozenset(s) for s in itertools.combinations(negatives, n_negatives)]
        assert set(counts[i]) == set(subsets)  # never a positive, always exactly B negatives
        assert chisquare([counts[i][s] for s in subsets]).pvalue > 1e-3


def test_multiclass_positives_and_examples_with_few_negatives():
    sampler = NegativeLabelSampler(n_labels=4, n_negatives=3, random_state=1)
    positives = np.array([0, 3, 3, 1])
    for _ in range(50):
        labels, mask = sampler.sample(positives)
        assert sorted(labels.tolist()) == [0, 1, 2, 3]  # B + 1 = K: the whole label set
        np.testing.assert_array_equal(mask.sum(axis=1), 3)
        assert not np.any(mask & (labels[None, :] == positives[:, None]))
    # an example with K - 1 positives keeps its single negative
    indicator = sp.csr_matrix(np.array([[1, 1, 1, 0], [1, 0, 0, 0]]))
    labels, mask = NegativeLabelSampler(4, 3, random_state=0).sample(indicator)
    assert labels[mask[0]].tolist() == [3] and mask[1].sum() == 3


def test_sampler_cost_does_not_depend_on_the_number_of_labels():
    """A sample at K = 10^12 needs memory for the sample only (an O(K) step could not run)."""
    sampler = NegativeLabelSampler(n_labels=10**12, n_negatives=1024, random_state=0)
    positives = np.random.RandomState(0).randint(0, 10**12, size=256)
    labels, mask = sampler.sample(positives)
    assert labels.shape == (1025,) and mask.shape == (256, 1025)
    np.testing.assert_array_equal(mask.sum(axis=1), 1024)


def test_sampler_is_reproducible_and_validates():
    first = NegativeLabelSampler(100, 5, random_state=3).sample(np.arange(4))
    second = NegativeLabelSampler(100, 5, random_state=3).sample(np.arange(4))
    np.testing.assert_array_equal(first[0], second[0])
    with pytest.raises(ValueError, match="n_negatives"):
        NegativeLabelSampler(10, 10)
    with pytest.raises(ValueError, match="n_labels"):
        NegativeLabelSampler(1, 1)
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        NegativeLabelSampler(10, 2).sample(np.array([3, 10]))
    with pytest.raises(ValueError, match="1-D array of integer labels"):
        NegativeLabelSampler(10, 2).sample(np.array([0.5]))
    with pytest.raises(ValueError, match="distinct labels"):
        sample_distinct_labels(3, 4)


def test_draw_positive_labels_is_uniform_over_each_rows_positives():
    indicator = sp.csr_matrix(np.array([[1, 0, 1, 1], [0, 1, 0, 0]]))
    rng = np.random.RandomState(0)
    draws = np.array([draw_positive_labels(indicator, rng) for _ in range(3000)])
    assert set(draws[:, 1]) == {1}
    counts = np.bincount(draws[:, 0], minlength=4)
    assert counts[1] == 0 and chisquare(counts[[0, 2, 3]]).pvalue > 1e-3
    with pytest.raises(ValueError, match="at least one positive"):
        draw_positive_labels(sp.csr_matrix(np.array([[1, 0], [0, 0]])))


def _shortfall_probability(n_draws, n_labels, size):
    """P(fewer than ``size`` distinct values among ``n_draws`` uniform draws from ``n_labels``),
    exactly: P(j distinct) = C(K, j) j! S(m, j) / K^m (S: Stirling numbers of the second kind)."""
    stirling = [1] + [0] * size  # S(0, j) for j <= size; then S(m, j) from S(m - 1, .)
    for _ in range(n_draws):
        stirling = [0] + [j * stirling[j] + stirling[j - 1] for j in range(1, size + 1)]
    return sum(
        Fraction(math.perm(n_labels, j) * stirling[j], n_labels**n_draws) for j in range(size)
    )


@pytest.mark.parametrize(
    "size, n_labels", [(1, 5), (2, 9), (3, 13), (5, 21), (10, 41), (8, 100), (30, 10**4)]
)
def test_draws_for_distinct_is_the_smallest_count_meeting_the_shortfall_bound(size, n_labels):
    """The Markov chain of ``_draws_for_distinct`` against the exact occupancy distribution."""
    from skrank.sampling._labels import _SHORTFALL_PROBABILITY, _draws_for_distinct

    n_draws = _draws_for_distinct(size, n_labels)
    bound = Fraction(_SHORTFALL_PROBABILITY)
    assert _shortfall_probability(n_draws, n_labels, size) <= bound
    assert _shortfall_probability(n_draws - 1, n_labels, size) > bound


@pytest.mark.parametrize("n_labels, size", [(40, 40), (40, 10), (40, 9), (1000, 30)])
def test_positive_lookup_matches_a_loop_over_the_rows(n_labels, size):
    """A large sample reads a dense indicator, a small one searches each row: both say which
    sampled labels are each row's positives, as a loop does."""
    rng = np.random.RandomState(0)
    rows = [rng.choice(n_labels, rng.randint(1, 6), replace=False) for _ in range(30)]
    indicator = sp.lil_matrix((30, n_labels), dtype=np.int8)
    for i, row in enumerate(rows):
        indicator[i, row] = 1
    table, _ = positive_table(indicator.tocsr(), n_labels)
    labels = torch.as_tensor(rng.permutation(n_labels)[:size])
    expected = np.array([[label in row for label in labels.tolist()] for row in rows])
    np.testing.assert_array_equal(_is_positive(table, labels, n_labels).numpy(), expected)


def test_every_negative_label_is_each_rows_complement_of_its_positives():
    rng = np.random.RandomState(0)
    n_labels = 12
    rows = [rng.choice(n_labels, rng.randint(1, 6), replace=False) for _ in range(20)]
    indicator = sp.lil_matrix((20, n_labels), dtype=np.int8)
    for i, row in enumerate(rows):
        indicator[i, row] = 1
    table, _ = positive_table(indicator.tocsr(), n_labels)
    expected = np.array([[label not in row for label in range(n_labels)] for row in rows])
    np.testing.assert_array_equal(every_negative_label(table, n_labels).numpy(), expected)
