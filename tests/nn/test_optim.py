"""Row-sparse optimisers (RowSparseOptimizer): the rows a step reads and the update rules."""

import numpy as np
import pytest
import torch
from helpers import as_sparse_rows, sparse_matrix_with_empty_row

from skrank.nn import (
    RowSparseOptimizer,
    SparseLinear,
    _optim,
)


@pytest.mark.parametrize("method", ["sparse_adam", "adagrad", "rowwise_adagrad", "sgd"])
@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_a_step_changes_only_the_rows_read(method, layout):
    X = sparse_matrix_with_empty_row(n_rows=4, n_features=60, density=0.05, seed=1)
    torch.manual_seed(0)
    layer = SparseLinear(X.shape[1], 3)
    optimizer = RowSparseOptimizer(layer.weight, method=method, lr=0.1)
    before = layer.weight.detach().clone()
    for _ in range(3):  # later steps too: Adam's moments must not move rows left unread
        optimizer.zero_grad()
        layer(as_sparse_rows(X, layout)).square().sum().backward()
        optimizer.step()
    changed = np.flatnonzero((layer.weight != before).any(dim=1).numpy())
    read = np.unique(X.indices)
    np.testing.assert_array_equal(changed[changed < X.shape[1]], read)
    assert layer.weight.grad is None  # the step consumed the sparse gradient


@pytest.mark.parametrize("method", ["sparse_adam", "adagrad", "rowwise_adagrad", "sgd"])
def test_fixed_shape_updates_equal_distinct_row_updates(method, monkeypatch):
    """The GPU's fixed-shape step (one entry per read) updates as the CPU's distinct rows."""
    X = sparse_matrix_with_empty_row(
        n_rows=16, n_features=20, density=0.4, seed=3
    )  # rows read many times
    tables = []
    for devices in ({"cpu"}, set()):
        monkeypatch.setattr(_optim, "_DISTINCT_ROW_DEVICES", devices)
        torch.manual_seed(0)
        layer = SparseLinear(X.shape[1], 3)
        optimizer = RowSparseOptimizer(layer.weight, method=method, lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            layer(as_sparse_rows(X, "flat")).tanh().sum().backward()
            optimizer.step()
        tables.append(layer.weight.detach())
    torch.testing.assert_close(tables[0], tables[1])


@pytest.mark.parametrize("method", ["sparse_adam", "adagrad", "rowwise_adagrad", "sgd"])
def test_a_step_on_flat_rows_takes_their_summed_rows_as_they_are(method, monkeypatch):
    """The flat layout's gradient has one row per distinct feature already: the step sums
    nothing again, and updates as the padded layout (one gradient row per non-zero) does."""
    X = sparse_matrix_with_empty_row(n_rows=16, n_features=20, density=0.4, seed=3)
    sums = []
    real_sum = _optim._summed_per_row
    monkeypatch.setattr(
        _optim,
        "_summed_per_row",
        lambda rows, grad: sums.append(rows.shape[0]) or real_sum(rows, grad),
    )
    tables = {}
    for layout in ("flat", "padded"):
        sums.clear()
        torch.manual_seed(0)
        layer = SparseLinear(X.shape[1], 3)
        optimizer = RowSparseOptimizer(layer.weight, method=method, lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            layer(as_sparse_rows(X, layout)).tanh().sum().backward()
            optimizer.step()
        tables[layout] = layer.weight.detach()
        assert (sums == []) == (layout == "flat")
    torch.testing.assert_close(tables["flat"], tables["padded"])


def test_rowwise_adagrad_follows_its_rule():
    """Row-wise Adagrad: a row's accumulator adds the mean square of its (summed) gradient,
    and the row moves by ``lr * gradient / (sqrt(accumulator) + eps)``; written out by hand."""
    X = sparse_matrix_with_empty_row(n_rows=6, n_features=30, density=0.2, seed=4)
    torch.manual_seed(0)
    layer = SparseLinear(X.shape[1], 5).double()
    optimizer = RowSparseOptimizer(layer.weight, method="rowwise_adagrad", lr=0.2)
    weight = layer.weight.detach().clone()
    accumulator = torch.zeros(weight.shape[0], dtype=weight.dtype)
    dense_in = torch.as_tensor(X.toarray())
    for _ in range(3):
        optimizer.zero_grad()
        layer(as_sparse_rows(X, "flat")).tanh().sum().backward()
        optimizer.step()
        reference = weight[:-1].clone().requires_grad_()
        (dense_in @ reference + layer.bias.detach()).tanh().sum().backward()
        gradient = torch.cat([reference.grad, torch.zeros(1, weight.shape[1], dtype=weight.dtype)])
        read = torch.as_tensor(np.unique(X.indices))
        accumulator[read] += gradient[read].square().mean(dim=1)
        weight[read] -= 0.2 * gradient[read] / (accumulator[read].sqrt()[:, None] + 1e-10)
        torch.testing.assert_close(layer.weight.detach(), weight)
    (state,) = optimizer.state.values()
    torch.testing.assert_close(state["sum"], accumulator)


def test_row_sparse_sgd_equals_dense_sgd():
    """Plain SGD on the rows read is SGD: the rows not read have a zero gradient."""
    X = sparse_matrix_with_empty_row(seed=2)
    torch.manual_seed(0)
    sparse_layer = SparseLinear(X.shape[1], 4).double()
    dense_weight = sparse_layer.weight.detach()[:-1].clone().requires_grad_()
    sparse_optimizer = RowSparseOptimizer(sparse_layer.weight, method="sgd", lr=0.3)
    dense_optimizer = torch.optim.SGD([dense_weight], lr=0.3)
    rows, dense_in = as_sparse_rows(X, "padded"), torch.as_tensor(X.toarray())
    for _ in range(3):
        sparse_optimizer.zero_grad()
        dense_optimizer.zero_grad()
        (sparse_layer(rows) - sparse_layer.bias).tanh().sum().backward()
        (dense_in @ dense_weight).tanh().sum().backward()
        sparse_optimizer.step()
        dense_optimizer.step()
    torch.testing.assert_close(sparse_layer.weight.detach()[:-1], dense_weight.detach())


def test_row_sparse_optimizer_weight_decay_acts_on_rows_read():
    table = torch.nn.Parameter(torch.full((5, 2), 2.0))
    optimizer = RowSparseOptimizer(table, method="sgd", lr=0.5, weight_decay=0.1)
    optimizer.gather(torch.tensor([1])).sum().backward()
    optimizer.step()
    np.testing.assert_allclose(table[1].detach(), 2.0 - 0.5 * (1.0 + 0.1 * 2.0))
    np.testing.assert_allclose(table[[0, 2, 3, 4]].detach(), 2.0)


def test_row_sparse_optimizer_refuses_a_dense_gradient():
    table = torch.nn.Parameter(torch.ones(3, 2))
    optimizer = RowSparseOptimizer(table, method="sgd")
    table.sum().backward()
    with pytest.raises(RuntimeError, match="must be sparse"):
        optimizer.step()
