"""The networks of skrank.nn: the MLP, the convolutional network of image items and the output
width check."""

import pytest
import torch
from helpers import sparse_matrix_with_empty_row
from torch import nn

from skrank.nn import (
    MLP,
    ConvNet,
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


def test_conv_net_maps_images_to_outputs():
    torch.manual_seed(0)
    module = ConvNet((3, 8, 12), hidden_layer_sizes=(4, 6), n_outputs=5)
    out = module(torch.rand(7, 3, 8, 12))
    assert out.shape == (7, 5)
    assert module.item_shape == (3, 8, 12)
    normalized = ConvNet((3, 8, 12), (4,), 5, normalize=True).eval()
    torch.testing.assert_close(normalized(torch.rand(2, 3, 8, 12)).norm(dim=1), torch.ones(2))
    assert module_output_dim(ConvNet((1, 4, 4), 3, 2), (1, 4, 4), "cpu") == 2


def test_conv_net_blocks_pool_while_the_map_has_two_pixels():
    module = ConvNet((1, 28, 56), hidden_layer_sizes=(2, 3, 4, 5, 6, 7))
    kinds = [type(layer) for layer in module.features]
    assert kinds.count(nn.Conv2d) == 6 and kinds.count(nn.BatchNorm2d) == 6
    assert kinds.count(nn.ReLU) == 6
    # 28 x 56 -> 14 x 28 -> 7 x 14 -> 3 x 7 -> 1 x 3: four pools, then none.
    assert kinds.count(nn.MaxPool2d) == 4
    convolutions = [layer for layer in module.features if isinstance(layer, nn.Conv2d)]
    assert [c.out_channels for c in convolutions] == [2, 3, 4, 5, 6, 7]
    assert all(c.kernel_size == (3, 3) and c.padding == (1, 1) for c in convolutions)
    assert module.projection.in_features == 7 and module.projection.out_features == 64
    assert module(torch.rand(2, 1, 28, 56)).shape == (2, 64)


def test_conv_net_starts_from_kaiming_weights():
    torch.manual_seed(0)
    module = ConvNet((1, 8, 8), hidden_layer_sizes=(256,))
    weight = module.features[0].weight
    # Kaiming normal, fan-out mode: std sqrt(2 / (out_channels * 3 * 3)).
    expected = (2.0 / (256 * 9)) ** 0.5
    assert abs(weight.std().item() / expected - 1) < 0.05


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (((8, 8),), "item_shape"),
        (((1, 0, 8),), "item_shape"),
        (((1, 8, 8), ()), "hidden_layer_sizes"),
        (((1, 8, 8), (4, 0)), "hidden_layer_sizes"),
        (((1, 8, 8), (4,), 0), "n_outputs"),
    ],
)
def test_conv_net_refuses_bad_shapes(arguments, message):
    with pytest.raises(ValueError, match=message):
        ConvNet(*arguments)
