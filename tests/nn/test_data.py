"""The engine's training inputs (TrainingInputs): resident and streamed rows, sparse rows and
data-parallel batches."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import sparse_matrix_with_empty_row

from skrank.nn import (
    SparseLinear,
    SparseRows,
    TrainingInputs,
    _data,
)


@pytest.mark.parametrize("sparse", [False, True])
def test_training_inputs_are_resident_and_densify_rows(sparse):
    X = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0], [0.0, 0.0, 0.0], [4.0, 5.0, 6.0]])
    inputs = TrainingInputs(sp.csr_matrix(X) if sparse else X, torch.device("cpu"))
    assert inputs.resident and inputs.index_device == torch.device("cpu")
    rows = inputs.rows(torch.tensor([3, 0, 2, 3]))
    assert rows.dtype == torch.float32 and rows.device == torch.device("cpu")
    np.testing.assert_array_equal(rows.numpy(), X[[3, 0, 2, 3]])
    chunks = torch.cat(list(inputs.chunks(3)))
    np.testing.assert_array_equal(chunks.numpy(), X)


def test_skewed_sparse_rows_are_served_from_the_host():
    """A padded table would be mostly padding: rows stay in CSR and indices on the host."""
    X = sp.lil_matrix((50, 200))
    X[0, :] = 1.0  # one dense row among rows of one entry
    for i in range(1, 50):
        X[i, i] = 2.0
    inputs = TrainingInputs(sp.csr_matrix(X), torch.device("cpu"))
    assert not inputs.resident and inputs.index_device == torch.device("cpu")
    np.testing.assert_array_equal(inputs.rows(torch.tensor([0, 7])).numpy(), X[[0, 7]].toarray())


def test_a_data_parallel_batch_holds_its_part_and_the_whole_batch():
    """In a data-parallel context each rank's Batch is its part of the global batch, with the
    whole batch's indices, padding and classes (the same on every rank, never gathered)."""
    from skrank.nn._distributed import DistributedContext
    from skrank.sampling import EpochBatches

    X = np.arange(40, dtype=np.float32).reshape(20, 2)
    inputs = TrainingInputs(X, torch.device("cpu"))
    indices = torch.tensor([[3, 4, 9, 8, 0, 0, 15, 16]])
    valid = torch.tensor([[True, True, True, True, False, False, True, True]])
    groups = torch.tensor([[5, 2, 7, 1]])  # groups of two entries
    epoch = EpochBatches(indices, valid, groups)
    whole = inputs.batch(epoch, 0)
    assert whole.global_indices is whole.global_valid is whole.global_groups is None
    for rank in range(2):
        batch = inputs.batch(epoch, 0, DistributedContext(rank, 2))
        part = slice(4 * rank, 4 * rank + 4)
        assert batch.part == part
        torch.testing.assert_close(batch.indices, indices[0, part])
        torch.testing.assert_close(batch.valid, valid[0, part])
        torch.testing.assert_close(batch.groups, groups[0, 2 * rank : 2 * rank + 2])
        torch.testing.assert_close(batch.inputs, torch.from_numpy(X[indices[0, part].numpy()]))
        torch.testing.assert_close(batch.global_indices, indices[0])
        torch.testing.assert_close(batch.global_valid, valid[0])
        torch.testing.assert_close(batch.global_groups, groups[0])


@pytest.mark.parametrize("layout", ["padded", "flat", "flat-on-cpu"])
def test_training_inputs_hand_out_sparse_rows(layout, monkeypatch):
    """Sparse rows from the padded table on the device (the layout of GPUs), or the flat
    layout from the CSR matrix (streamed, or on the CPU)."""
    if layout != "flat-on-cpu":
        monkeypatch.setattr(_data, "_FLAT_SPARSE_ROW_DEVICES", set())
    if layout == "flat":
        monkeypatch.setattr(_data, "_MAX_SPARSE_PADDING", 0)
    resident = layout == "padded"
    X = sparse_matrix_with_empty_row(n_rows=12, n_features=30)
    inputs = TrainingInputs(X, torch.device("cpu"), sparse_rows=True)
    assert inputs.resident is resident
    indices = torch.tensor([5, 3, 0, 5, 11])
    rows = inputs.rows(indices)
    assert isinstance(rows, SparseRows) and rows.n_rows == 5
    assert (rows.offsets is None) is resident
    layer = SparseLinear(X.shape[1], 3)
    dense = torch.as_tensor(X[indices.numpy()].toarray(), dtype=torch.float32)
    torch.testing.assert_close(layer(rows), layer(dense))
    chunks = list(inputs.chunks(5))
    assert [chunk.n_rows for chunk in chunks] == [5, 5, 2]
    # Without sparse_rows (or for dense X) the batches are dense, as before.
    dense_inputs = TrainingInputs(X, torch.device("cpu"))
    torch.testing.assert_close(dense_inputs.rows(indices), dense)
