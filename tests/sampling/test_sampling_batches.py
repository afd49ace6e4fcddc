"""Batch samplers: fixed shapes, the class layout, the frequencies they promise, determinism."""

from collections import Counter

import numpy as np
import pytest
import torch
from helpers import host_syncs

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
    # 57 items in ceil(n_c / 4) = 4 + 3 + 1 + 1 + 1 + 1 + 5 + 2 = 18 groups: 5 batches of 4
    assert sampler.classes_per_batch == 4 and len(sampler) == 5
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


def test_each_class_gets_its_share_of_groups_per_epoch_and_cycles_through_its_items():
    y = np.repeat([0, 1, 2, 3], [40, 20, 12, 8])
    sampler = ClassBalancedBatchSampler(y, batch_size=8, samples_per_class=4, random_state=1)
    assert len(sampler) == 10
    for _ in range(20):
        epoch = sampler.epoch()
        # ceil(n_c / M) groups of each class, every item once: 10 + 5 + 3 + 2 = 10 batches x 2
        assert Counter(epoch.groups.ravel().tolist()) == {0: 10, 1: 5, 2: 3, 3: 2}
        assert sorted(epoch.indices[epoch.valid].tolist()) == list(range(80))
    uniform = ClassBalancedBatchSampler(
        y, batch_size=8, samples_per_class=4, class_weights="uniform", random_state=1
    )
    assert Counter(uniform.epoch().groups.ravel().tolist()) == {0: 5, 1: 5, 2: 5, 3: 5}


def test_a_class_too_large_for_one_group_per_batch_is_in_every_batch_and_fills_follow_size():
    # 5 batches of 3 groups: class 0 needs 10 groups but fits one per batch; classes 1-4 get
    # one group each; the 15 - 9 places left are drawn without replacement among the classes a
    # batch lacks, by size (2, 2, 2, 1).
    y = np.repeat([0, 1, 2, 3, 4], [20, 2, 2, 2, 1])
    sampler = ClassBalancedBatchSampler(y, batch_size=6, samples_per_class=2, random_state=0)
    assert len(sampler) == 5
    draws = Counter()
    for _ in range(300):
        groups = sampler.epoch().groups
        assert (groups == 0).any(dim=1).all()  # the large class in every batch
        assert all(len(set(row.tolist())) == 3 for row in groups)
        draws.update(groups.ravel().tolist())
    filled = np.array([draws[c] for c in range(5)]) - np.array([5, 1, 1, 1, 1]) * 300
    assert filled[0] == 0 and filled.sum() == 6 * 300
    assert filled[4] < 0.75 * filled[1:4].min()


def test_classes_smaller_than_a_group_give_every_item_once_and_padding_is_masked():
    sizes = np.array([1, 2, 3, 2, 1, 3, 9, 2, 3, 14])
    y = np.repeat(np.arange(10), sizes)[np.random.RandomState(0).permutation(sizes.sum())]
    for samples_per_class in (4, 5):
        sampler = ClassBalancedBatchSampler(y, 4 * samples_per_class, samples_per_class)
        for _ in range(3):
            epoch = sampler.epoch()
            M = samples_per_class
            # every class every epoch; every item at least once, and once if its class is
            # no larger than a group
            assert set(epoch.groups.ravel().tolist()) == set(range(10))
            assert set(epoch.indices[epoch.valid].tolist()) == set(range(y.shape[0]))
            groups = epoch.groups.reshape(-1)
            indices = epoch.indices.view(-1, M)
            valid = epoch.valid.view(-1, M)
            # a small class fills the first n_c places of its group with all its items, the
            # rest of the group is padding (masked, index 0)
            expected = torch.arange(M)[None, :] < torch.as_tensor(sizes)[groups][:, None]
            assert torch.equal(valid, expected)
            assert (indices[~valid] == 0).all()
            for group, members, keep in zip(groups, indices, valid, strict=True):
                if sizes[group] <= M:
                    assert sorted(members[keep].tolist()) == np.flatnonzero(y == group).tolist()


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


@pytest.mark.parametrize("class_weights", ["proportional", "uniform"])
def test_drawing_an_epoch_reads_nothing_back_from_the_device(class_weights):
    """Drawing a class-balanced epoch (groups dealt, absent classes filled) needs no value
    from the device: on a GPU it never waits for it."""
    y = np.repeat(np.arange(60), np.arange(60) % 9 + 1)  # classes of 1 to 9 items
    sampler = ClassBalancedBatchSampler(y, 40, 4, class_weights=class_weights, random_state=0)
    assert not host_syncs(sampler.epoch)
