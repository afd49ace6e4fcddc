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
    # The 1 x 3 last map is pooled over 1 x 3 cells: 7 channels x 3 features.
    assert module.grid == (1, 3)
    assert module.projection.in_features == 21 and module.projection.out_features == 64
    assert module(torch.rand(2, 1, 28, 56)).shape == (2, 64)


@pytest.mark.parametrize(
    ("item_shape", "grid_cells", "grid"),
    [
        ((1, 28, 56), 2, (2, 5)),  # last map 3 x 7
        ((1, 28, 84), 2, (2, 7)),  # 3 x 10
        ((3, 32, 32), 2, (2, 2)),  # 4 x 4
        ((1, 84, 28), 2, (7, 2)),  # 10 x 3
        ((1, 8, 8), 2, (1, 1)),  # 1 x 1: at most the map's pixels
        ((1, 28, 56), 1, (1, 2)),
        ((1, 32, 32), 1, (1, 1)),  # global average pooling
        ((1, 28, 56), 3, (3, 7)),
    ],
)
def test_conv_net_pools_over_a_grid_of_about_square_cells(item_shape, grid_cells, grid):
    module = ConvNet(item_shape, grid_cells=grid_cells).eval()
    assert module.grid == grid
    pooled = module.features[:-1](torch.rand(3, *item_shape))
    assert pooled.shape == (3, 128 * grid[0] * grid[1])
    assert isinstance(module.features[-1], nn.BatchNorm1d)
    assert module.features[-1].num_features == module.projection.in_features == pooled.shape[1]


def test_conv_net_features_keep_where_a_pattern_is():
    # Two images that are each other's halves swapped: the 1 x 2 grid tells them apart; global
    # average pooling of the same last map all but cannot (only the borders differ).
    torch.manual_seed(0)
    left = torch.rand(1, 1, 16, 16)
    image = torch.cat([left, torch.zeros_like(left)], dim=-1)
    swapped = torch.cat([torch.zeros_like(left), left], dim=-1)
    module = ConvNet((1, 16, 32), (8,), grid_cells=1).eval()
    assert module.grid == (1, 2)

    def gap(pool):
        a, b = pool(image), pool(swapped)
        return ((a - b).norm() / a.norm()).item()

    assert gap(module.features[:-1]) > 0.5
    assert gap(lambda x: module.features[:-3](x).mean(dim=(2, 3))) < 0.1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (((8, 8),), "item_shape"),
        (((1, 0, 8),), "item_shape"),
        (((1, 8, 8), ()), "hidden_layer_sizes"),
        (((1, 8, 8), (4, 0)), "hidden_layer_sizes"),
        (((1, 8, 8), (4,), 0), "n_outputs"),
        (((1, 8, 8), (4,), 2, False, 0), "grid_cells"),
    ],
)
def test_conv_net_refuses_bad_shapes(arguments, message):
    with pytest.raises(ValueError, match=message):
        ConvNet(*arguments)
