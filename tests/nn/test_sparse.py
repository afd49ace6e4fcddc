"""The sparse input layer: SparseRows and SparseLinear."""

import pytest
import torch
from helpers import as_sparse_rows, sparse_matrix_with_empty_row

from skrank.nn import (
    SparseLinear,
    _sparse,
)


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_sparse_layer_equals_dense_layer_values_and_gradients(layout):
    X = sparse_matrix_with_empty_row()
    torch.manual_seed(0)
    layer = SparseLinear(X.shape[1], 5).double()
    upstream = torch.randn(X.shape[0], 5, dtype=torch.float64)

    sparse_out = layer(as_sparse_rows(X, layout))
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
    X = sparse_matrix_with_empty_row(n_rows=30, n_features=60)
    torch.manual_seed(0)
    layer = SparseLinear(X.shape[1], 7).double()
    rows = as_sparse_rows(X, layout)
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
