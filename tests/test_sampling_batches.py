"""Batch samplers: fixed shapes, the class layout, the frequencies they promise, determinism."""

from collections import Counter

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from skrank.sampling import ClassBalancedBatchSampler, ShuffledBatchSampler

SIZES = {"a": 13, "b": 9, "c": 4, "d": 3, "e": 2, "f": 1, "g": 17, "h": 8}


def _labels():
    rng = np.random.RandomState(0)
    y = np.array([label for label, size in SIZES.items() for _ in range(size)])
    return y[rng.permutation(y.shape[0])]


def test_shuffled_batch_sampler_covers_each_item_once_per_epoch():
    sampler = ShuffledBatchSampler(23, 5, random_state=0)
    assert len(sampler) == 5
    epoch = sampler.epoch()
    assert epoch.indices.shape == epoch.valid.shape == (5, 5)
    assert epoch.valid.sum() == 23 and not epoch.valid[-1, 3:].any()
    assert sorted(epoch.indices[epoch.valid].tolist()) == list(range(23))
    first, second = list(sampler), list(sampler)
    assert sorted(np.concatenate(first)) == list(range(23))
    assert not all(np.array_equal(a, b) for a, b in zip(first, second, strict=False))
    again = ShuffledBatchSampler(23, 5, random_state=0)
    assert torch.equal(again.epoch().indices, epoch.indices)


def test_class_balanced_batches_have_distinct_classes_in_fixed_groups():
    y = _labels()
    codes = np.unique(y, return_inverse=True)[1]
    sampler = ClassBalancedBatchSampler(y, batch_size=16, samples_per_class=4, random_state=0)
    assert sampler.classes_per_batch == 4 and len(sampler) == -(-57 // 16)
    for _ in range(5):
        epoch = sampler.epoch()
        assert epoch.indices.shape == epoch.valid.shape == (len(sampler), 16)
        assert epoch.groups.shape == (len(sampler), 4)
        for indices, valid, groups in zip(epoch.indices, epoch.valid, epoch.groups, strict=True):
            assert len(set(groups.tolist())) == 4  # distinct classes: every query has negatives
            for group, members, keep in zip(
                groups, indices.view(4, 4), valid.view(4, 4), strict=True
            ):
                size = np.sum(codes == int(group))
                assert keep.sum() == min(size, 4)  # small classes are padded, never repeated
                assert np.all(codes[members[keep].numpy()] == int(group))
                assert len(set(members[keep].tolist())) == int(keep.sum())


def test_classes_are_drawn_in_proportion_to_their_size_and_cycled_through():
    y = np.repeat([0, 1, 2, 3], [40, 20, 12, 8])
    sampler = ClassBalancedBatchSampler(y, batch_size=8, samples_per_class=4, random_state=1)
    draws = Counter()
    for _ in range(300):
        epoch = sampler.epoch()
        draws.update(epoch.groups.ravel().tolist())
        # within an epoch, a class visits its items in a fixed cyclic order: a class drawn k
        # times with k M <= n_c shows k M distinct items
        items = epoch.indices[epoch.valid].numpy()
        for label, size in [(0, 40), (1, 20)]:
            seen = items[y[items] == label]
            assert len(set(seen.tolist())) == min(len(seen), size)
    counts = np.array([draws[c] for c in range(4)])
    # Two classes per batch without replacement: frequencies follow the Wallenius-like law,
    # checked against a direct simulation of the same draw.
    rng = np.random.default_rng(0)
    weights = np.array([40, 20, 12, 8], dtype=float)
    reference = Counter()
    for _ in range(counts.sum() // 2):
        reference.update(rng.choice(4, size=2, replace=False, p=weights / weights.sum()).tolist())
    expected = np.array([reference[c] for c in range(4)], dtype=float)
    expected *= counts.sum() / expected.sum()
    assert chisquare(counts, expected).pvalue > 1e-4
    uniform = ClassBalancedBatchSampler(
        y, batch_size=8, samples_per_class=4, class_weights="uniform", random_state=1
    )
    uniform_draws = Counter(c for _ in range(200) for c in uniform.epoch().groups.ravel().tolist())
    assert chisquare([uniform_draws[c] for c in range(4)]).pvalue > 1e-4


def test_class_balanced_sampler_is_deterministic_iterable_and_validates():
    y = np.repeat(np.arange(6), 12)
    a = ClassBalancedBatchSampler(y, 12, 3, random_state=1).epoch()
    b = ClassBalancedBatchSampler(y, 12, 3, random_state=1).epoch()
    assert torch.equal(a.indices, b.indices) and torch.equal(a.groups, b.groups)
    batches = list(ClassBalancedBatchSampler(y, 12, 3, random_state=1))
    assert all(len(np.unique(y[batch])) == 4 and len(batch) == 12 for batch in batches)
    with pytest.raises(ValueError, match="batch_size"):
        ClassBalancedBatchSampler(y, batch_size=5, samples_per_class=4)
    with pytest.raises(ValueError, match="samples_per_class"):
        ClassBalancedBatchSampler(y, batch_size=8, samples_per_class=0)
    with pytest.raises(ValueError, match="non-empty"):
        ClassBalancedBatchSampler([], batch_size=8)
    with pytest.raises(ValueError, match="only one class"):
        ClassBalancedBatchSampler([1, 1, 1], batch_size=8, samples_per_class=2)
    with pytest.raises(ValueError, match="class_weights"):
        ClassBalancedBatchSampler(y, 12, 3, class_weights="inverse")


def test_sampler_state_round_trip_replays_the_same_epochs():
    y = np.repeat(np.arange(5), 7)
    sampler = ClassBalancedBatchSampler(y, 10, 2, random_state=4)
    sampler.epoch()
    state = sampler.state_dict()
    expected = sampler.epoch()
    sampler.load_state_dict(state)
    assert torch.equal(sampler.epoch().indices, expected.indices)
