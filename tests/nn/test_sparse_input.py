"""The sparse input layer: SparseRows, SparseLinear and their row-sparse updates."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from skrank.nn import (
    MLP,
    RowSparseOptimizer,
    SparseLinear,
    SparseRows,
    TrainingInputs,
    _data,
    _optim,
    _sparse,
)


def _sparse_matrix(n_rows=9, n_features=40, density=0.15, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(n_rows, n_features, density=density, format="csr", random_state=rng)
    X.data = rng.normal(size=X.nnz)
    X = X.tolil()
    X[3] = 0  # a row without a non-zero
    return X.tocsr()


def _as_rows(X, layout):
    if layout == "flat":
        return SparseRows(
            torch.as_tensor(X.indices, dtype=torch.long),
            torch.as_tensor(X.data),
            torch.as_tensor(X.indptr[:-1], dtype=torch.long),
        )
    width = max(int(np.diff(X.indptr).max()), 1)
    columns = np.full((X.shape[0], width), X.shape[1])
    values = np.zeros((X.shape[0], width))
    for i in range(X.shape[0]):
        row = X[i]
        columns[i, : row.nnz], values[i, : row.nnz] = row.indices, row.data
    return SparseRows(torch.as_tensor(columns), torch.as_tensor(values))


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_sparse_layer_equals_dense_layer_values_and_gradients(layout):
    X = _sparse_matrix()
    torch.manual_seed(0)
    layer = SparseLinear(X.shape[1], 5).double()
    upstream = torch.randn(X.shape[0], 5, dtype=torch.float64)

    sparse_out = layer(_as_rows(X, layout))
    (sparse_out * upstream).sum().backward()
    sparse_grad = layer.weight.grad.to_dense()
    sparse_bias_grad = layer.bias.grad.clone()
    layer.zero_grad()

    dense_in = torch.as_tensor(X.toarray())
    dense_out = dense_in @ layer.weight[:-1] + layer.bias
    (dense_out * upstream).sum().backward()
    torch.testing.assert_close(sparse_out, dense_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(layer(dense_in), dense_out, rtol=1e-12, atol=1e-12)
    # The reference: d/dW of sum(upstream * (X W)) is X^T upstream; nothing on the padding row.
    torch.testing.assert_close(sparse_grad[:-1], dense_in.T @ upstream)
    assert torch.all(sparse_grad[-1] == 0)
    torch.testing.assert_close(sparse_grad, layer.weight.grad)
    torch.testing.assert_close(sparse_bias_grad, upstream.sum(0))


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_sparse_layer_without_gradient_equals_the_training_product(layout, monkeypatch):
    X = _sparse_matrix(n_rows=30, n_features=60)
    torch.manual_seed(0)
    layer = SparseLinear(X.shape[1], 7).double()
    rows = _as_rows(X, layout)
    training = layer(rows)
    products = []
    real_apply = _sparse._FlatRowsProduct.apply

    def counting_apply(*args):
        products.append(1)
        return real_apply(*args)

    monkeypatch.setattr(_sparse._FlatRowsProduct, "apply", counting_apply)
    with torch.no_grad():
        inference = layer(rows)
    frozen = SparseLinear(X.shape[1], 7).double().requires_grad_(False)
    frozen.load_state_dict(layer.state_dict())
    torch.testing.assert_close(inference, training.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(frozen(rows), training.detach(), rtol=1e-12, atol=1e-12)
    # Prediction takes embedding_bag's fused sum, not the product built for the gradient.
    assert products == []


def test_sparse_layer_starts_as_the_linear_layer_of_the_same_seed():
    torch.manual_seed(3)
    linear = torch.nn.Linear(11, 4)
    torch.manual_seed(3)
    sparse = SparseLinear(11, 4)
    assert torch.equal(sparse.weight[:-1].T, linear.weight)
    assert torch.equal(sparse.bias, linear.bias)
    assert torch.all(sparse.weight[-1] == 0)


@pytest.mark.parametrize("method", ["sparse_adam", "adagrad", "rowwise_adagrad", "sgd"])
@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_a_step_changes_only_the_rows_read(method, layout):
    X = _sparse_matrix(n_rows=4, n_features=60, density=0.05, seed=1)
    torch.manual_seed(0)
    layer = SparseLinear(X.shape[1], 3)
    optimizer = RowSparseOptimizer(layer.weight, method=method, lr=0.1)
    before = layer.weight.detach().clone()
    for _ in range(3):  # later steps too: Adam's moments must not move rows left unread
        optimizer.zero_grad()
        layer(_as_rows(X, layout)).square().sum().backward()
        optimizer.step()
    changed = np.flatnonzero((layer.weight != before).any(dim=1).numpy())
    read = np.unique(X.indices)
    np.testing.assert_array_equal(changed[changed < X.shape[1]], read)
    assert layer.weight.grad is None  # the step consumed the sparse gradient


@pytest.mark.parametrize("method", ["sparse_adam", "adagrad", "rowwise_adagrad", "sgd"])
def test_fixed_shape_updates_equal_distinct_row_updates(method, monkeypatch):
    """The GPU's fixed-shape step (one entry per read) updates as the CPU's distinct rows."""
    X = _sparse_matrix(n_rows=16, n_features=20, density=0.4, seed=3)  # rows read many times
    tables = []
    for devices in ({"cpu"}, set()):
        monkeypatch.setattr(_optim, "_DISTINCT_ROW_DEVICES", devices)
        torch.manual_seed(0)
        layer = SparseLinear(X.shape[1], 3)
        optimizer = RowSparseOptimizer(layer.weight, method=method, lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            layer(_as_rows(X, "flat")).tanh().sum().backward()
            optimizer.step()
        tables.append(layer.weight.detach())
    torch.testing.assert_close(tables[0], tables[1])


@pytest.mark.parametrize("method", ["sparse_adam", "adagrad", "rowwise_adagrad", "sgd"])
def test_a_step_on_flat_rows_takes_their_summed_rows_as_they_are(method, monkeypatch):
    """The flat layout's gradient has one row per distinct feature already: the step sums
    nothing again, and updates as the padded layout (one gradient row per non-zero) does."""
    X = _sparse_matrix(n_rows=16, n_features=20, density=0.4, seed=3)
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
            layer(_as_rows(X, layout)).tanh().sum().backward()
            optimizer.step()
        tables[layout] = layer.weight.detach()
        assert (sums == []) == (layout == "flat")
    torch.testing.assert_close(tables["flat"], tables["padded"])


def test_rowwise_adagrad_follows_its_rule():
    """Row-wise Adagrad: a row's accumulator adds the mean square of its (summed) gradient,
    and the row moves by ``lr * gradient / (sqrt(accumulator) + eps)``; written out by hand."""
    X = _sparse_matrix(n_rows=6, n_features=30, density=0.2, seed=4)
    torch.manual_seed(0)
    layer = SparseLinear(X.shape[1], 5).double()
    optimizer = RowSparseOptimizer(layer.weight, method="rowwise_adagrad", lr=0.2)
    weight = layer.weight.detach().clone()
    accumulator = torch.zeros(weight.shape[0], dtype=weight.dtype)
    dense_in = torch.as_tensor(X.toarray())
    for _ in range(3):
        optimizer.zero_grad()
        layer(_as_rows(X, "flat")).tanh().sum().backward()
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
    X = _sparse_matrix(seed=2)
    torch.manual_seed(0)
    sparse_layer = SparseLinear(X.shape[1], 4).double()
    dense_weight = sparse_layer.weight.detach()[:-1].clone().requires_grad_()
    sparse_optimizer = RowSparseOptimizer(sparse_layer.weight, method="sgd", lr=0.3)
    dense_optimizer = torch.optim.SGD([dense_weight], lr=0.3)
    rows, dense_in = _as_rows(X, "padded"), torch.as_tensor(X.toarray())
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


@pytest.mark.parametrize("layout", ["padded", "flat", "flat-on-cpu"])
def test_training_inputs_hand_out_sparse_rows(layout, monkeypatch):
    """Sparse rows from the padded table on the device (the layout of GPUs), or the flat
    layout from the CSR matrix (streamed, or on the CPU)."""
    if layout != "flat-on-cpu":
        monkeypatch.setattr(_data, "_FLAT_SPARSE_ROW_DEVICES", set())
    if layout == "flat":
        monkeypatch.setattr(_data, "_MAX_SPARSE_PADDING", 0)
    resident = layout == "padded"
    X = _sparse_matrix(n_rows=12, n_features=30)
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


def test_mlp_with_sparse_input_reads_sparse_rows_and_dense_rows_alike():
    X = _sparse_matrix(n_rows=6, n_features=25)
    torch.manual_seed(0)
    sparse_mlp = MLP(25, (8,), 4, sparse_input=True)
    torch.manual_seed(0)
    dense_mlp = MLP(25, (8,), 4)
    assert sparse_mlp.accepts_sparse_rows and not dense_mlp.accepts_sparse_rows
    rows = TrainingInputs(X, torch.device("cpu"), sparse_rows=True).rows(torch.arange(6))
    dense = torch.as_tensor(X.toarray(), dtype=torch.float32)
    torch.testing.assert_close(sparse_mlp(rows), dense_mlp(dense))
    torch.testing.assert_close(sparse_mlp(dense), dense_mlp(dense))
