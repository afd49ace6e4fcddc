"""Data-parallel fits: two gloo processes on the CPU against one process with the doubled batch."""

import os
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from helpers import TensorItems

from skrank import SNMClassifier, SOPRCEmbedder
from skrank.multilabel import _settings as snm_settings

WORLD = 2


def _data():
    rng = np.random.RandomState(0)
    y = np.repeat(np.arange(8), 16)  # 128 items: whole batches for both settings below
    X = rng.normal(size=(8, 12))[y] + 0.5 * rng.normal(size=(128, 12))
    return X.astype(np.float32), y


def _image_module():
    """A network of image items without batch norm (whose statistics are each rank's own)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 4, 2), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(24, 8)
        )


def _flip_half(item):
    """A random item transform: each rank's reads are seeded by the item's global place."""
    return torch.flip(item, dims=(-1,)) if torch.rand(()) < 0.5 else item


ESTIMATORS = {
    "SOPRCEmbedder": (
        SOPRCEmbedder,
        dict(hidden_layer_sizes=(16,), n_components=8, max_epochs=3, device="cpu"),
    ),
    # The auxiliary vectors: every rank computes the whole batch's loss (not sharded by query).
    "SOPRCEmbedder-auxiliary": (
        SOPRCEmbedder,
        dict(
            hidden_layer_sizes=(16,),
            n_components=8,
            max_epochs=3,
            device="cpu",
            tpr_source="auxiliary",
        ),
    ),
    # uint8 images of shape (1, 3, 4), read as values / 255 batch by batch on each rank.
    "SOPRCEmbedder-images": (
        SOPRCEmbedder,
        dict(module=_image_module(), max_epochs=3, device="cpu"),
    ),
    # The same images as a Dataset, read by a DataLoader worker with a random item transform.
    "SOPRCEmbedder-dataset": (
        SOPRCEmbedder,
        dict(
            module=_image_module(),
            max_epochs=3,
            device="cpu",
            item_transform=_flip_half,
            num_workers=1,
        ),
    ),
    "SNMClassifier": (
        SNMClassifier,
        # No input dropout (its masks differ between one process and two) nor held-out rows.
        dict(
            n_negatives=4,
            n_components=8,
            hidden_layer_sizes=(16,),
            max_epochs=3,
            device="cpu",
            input_dropout=0.0,
            validation_fraction=None,
            early_stopping=False,
            tol=None,
        ),
    ),
}
# The same with sparse rows: the input layer read and updated row by row (rows of different
# counts on the two ranks, gathered outside DistributedDataParallel).
ESTIMATORS["SNMClassifier-sparse"] = ESTIMATORS["SNMClassifier"]
BATCH = 16  # per process: the single process trains with 2 x 16


def _fit(name, batch_size):
    cls, params = ESTIMATORS[name]
    X, y = _data()
    sparse_min_features = snm_settings.SPARSE_INPUT_MIN_FEATURES
    if name.endswith("-sparse"):
        X[np.abs(X) < 0.8] = 0
        X = sp.csr_matrix(X)
        snm_settings.SPARSE_INPUT_MIN_FEATURES = 0  # the sparse layer for these few features
    if name.endswith(("-images", "-dataset")):
        scaled = (X - X.min()) / (X.max() - X.min())
        X = np.round(255 * scaled).astype(np.uint8).reshape(-1, 1, 3, 4)
    if name.endswith("-dataset"):
        X = TensorItems(torch.from_numpy(X))
    try:
        model = cls(**params, batch_size=batch_size, random_state=0).fit(X, y)
    finally:
        snm_settings.SPARSE_INPUT_MIN_FEATURES = sparse_min_features
    weights = [p.detach().clone() for p in model.module_.parameters()]
    if cls is SNMClassifier:
        weights.append(model.module_.label_embeddings.weight.detach().clone())
    return weights, [record["loss"] for record in model.history_], model.world_size_


def _rank(rank, name, directory):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{directory}/init", rank=rank,
                            world_size=WORLD)  # fmt: skip
    try:
        torch.save(_fit(name, BATCH), f"{directory}/rank{rank}.pt")
        dist.barrier()  # no rank tears the group down while the other still uses it
    finally:
        dist.destroy_process_group()
    # Once a DistributedDataParallel wrapper was built, the group's gloo threads (two
    # pt_gloo_runloop, one gloo_tcp_loop) outlive destroy_process_group (torch 2.13), and the
    # interpreter's finalization and exit() would run beside them: the result is saved, so the
    # rank ends here, as a process that has nothing left to clean up.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_two_processes_equal_one_process_with_the_doubled_batch(name, tmp_path):
    mp.start_processes(_rank, args=(name, str(tmp_path)), nprocs=WORLD, start_method="spawn")
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD)]
    assert all(result[2] == WORLD for result in ranks)
    for a, b in zip(ranks[0][0], ranks[1][0], strict=True):
        assert torch.equal(a, b)  # every rank ends with the same model
    single_weights, single_losses, world = _fit(name, WORLD * BATCH)
    assert world == 1
    np.testing.assert_allclose(ranks[0][1], single_losses, rtol=1e-4)
    for a, b in zip(ranks[0][0], single_weights, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
