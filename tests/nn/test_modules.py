"""The torch modules of skrank.nn: the MLP and the output width check."""

import pytest
import torch
from helpers import sparse_matrix_with_empty_row
from torch import nn

from skrank.nn import (
    MLP,
    TrainingInputs,
    module_output_dim,
)


def test_mlp_shapes_and_normalisation():
    torch.manual_seed(0)
    module = MLP(6, hidden_layer_sizes=(8, 8), n_outputs=3, batch_norm=True, dropout=0.1)
    out = module.eval()(torch.randn(4, 6))
    assert out.shape == (4, 3)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(4))
    raw = MLP(6, hidden_layer_sizes=(), n_outputs=3, normalize=False)
    assert isinstance(raw.layers[0], nn.Linear) and len(raw.layers) == 1
    with pytest.raises(ValueError, match="activation"):
        MLP(6, activation="swishy")


def test_module_output_dim_checks():
    assert module_output_dim(MLP(5, (4,), 3), 5, "cpu") == 3
    with pytest.raises(ValueError, match="2-D tensor"):
        module_output_dim(nn.Flatten(0), 5, "cpu")
    with pytest.raises(ValueError, match="could not process"):
        module_output_dim(nn.Linear(4, 2), 5, "cpu")


def test_mlp_with_sparse_input_reads_sparse_rows_and_dense_rows_alike():
    X = sparse_matrix_with_empty_row(n_rows=6, n_features=25)
    torch.manual_seed(0)
    sparse_mlp = MLP(25, (8,), 4, sparse_input=True)
    torch.manual_seed(0)
    dense_mlp = MLP(25, (8,), 4)
    assert sparse_mlp.accepts_sparse_rows and not dense_mlp.accepts_sparse_rows
    rows = TrainingInputs(X, torch.device("cpu"), sparse_rows=True).rows(torch.arange(6))
    dense = torch.as_tensor(X.toarray(), dtype=torch.float32)
    torch.testing.assert_close(sparse_mlp(rows), dense_mlp(dense))
    torch.testing.assert_close(sparse_mlp(dense), dense_mlp(dense))
