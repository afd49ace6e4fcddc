"""Torch modules shared by the torch estimators."""

from numbers import Integral

import torch
from torch import nn
from torch.nn import functional as F

from ._sparse import SparseLinear

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "leaky_relu": nn.LeakyReLU}


def layer_sizes(hidden_layer_sizes):
    """``hidden_layer_sizes`` as a tuple: an int is one hidden layer, as in scikit-learn.

    Parameters
    ----------
    hidden_layer_sizes : int or sequence of int
        A parameter in the form of :class:`MLP`'s.

    Returns
    -------
    sizes : tuple of int
        ``()`` for no hidden layer.
    """
    if isinstance(hidden_layer_sizes, Integral) and not isinstance(hidden_layer_sizes, bool):
        return (hidden_layer_sizes,)
    return tuple(hidden_layer_sizes)


class MLP(nn.Module):
    """Multi-layer perceptron with an optionally L2-normalised output.

    Parameters
    ----------
    n_features : int
        Input dimension.
    hidden_layer_sizes : int or tuple of int, default=(256,)
        Width of each hidden layer (an int: one hidden layer, as in scikit-learn's
        ``MLPClassifier``); ``()`` gives a linear map.
    n_outputs : int, default=64
        Output dimension.
    activation : {"relu", "gelu", "tanh", "leaky_relu"}, default="relu"
        Non-linearity after each hidden layer.
    dropout : float, default=0.0
        Dropout probability after each hidden activation.
    batch_norm : bool, default=False
        Whether to insert batch normalisation before each hidden activation.
    normalize : bool, default=True
        Whether to L2-normalise the output rows (cosine geometry).
    sparse_input : bool, default=False
        Make the first layer a :class:`~skrank.nn.SparseLinear`, which reads
        :class:`~skrank.nn.SparseRows` (only the weights of the features present; dense inputs
        work too). The engine then hands such a module the batches of a sparse ``X`` as
        sparse rows (``accepts_sparse_rows``), and updates that layer's weight row by row.

    Examples
    --------
    >>> import torch
    >>> from skrank.nn import MLP
    >>> module = MLP(n_features=10, hidden_layer_sizes=(32,), n_outputs=4)
    >>> out = module(torch.randn(5, 10))
    >>> tuple(out.shape), bool(torch.allclose(out.norm(dim=1), torch.ones(5)))
    ((5, 4), True)
    """

    def __init__(
        self,
        n_features,
        hidden_layer_sizes=(256,),
        n_outputs=64,
        *,
        activation="relu",
        dropout=0.0,
        batch_norm=False,
        normalize=True,
        sparse_input=False,
    ):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}."
            )
        hidden_layer_sizes = layer_sizes(hidden_layer_sizes)
        sizes_ok = (isinstance(h, Integral) and not isinstance(h, bool) for h in hidden_layer_sizes)
        if not all(sizes_ok) or any(h < 1 for h in hidden_layer_sizes):
            raise ValueError(
                "hidden_layer_sizes must hold positive integers (a layer of zero units gives "
                f"constant outputs); got {tuple(hidden_layer_sizes)!r}."
            )
        layers = []
        width = n_features
        for hidden in hidden_layer_sizes:
            layers.append(_linear(width, hidden, sparse_input and not layers))
            if batch_norm:
                layers.append(nn.BatchNorm1d(hidden))
            layers.append(_ACTIVATIONS[activation]())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = hidden
        layers.append(_linear(width, n_outputs, sparse_input and not layers))
        self.layers = nn.Sequential(*layers)
        self.normalize = normalize
        self.accepts_sparse_rows = bool(sparse_input)

    def forward(self, x):
        """Map a batch of inputs to outputs.

        Parameters
        ----------
        x : torch.Tensor of shape (batch_size, n_features), or skrank.nn.SparseRows
            Inputs (sparse rows when ``sparse_input``).

        Returns
        -------
        out : torch.Tensor of shape (batch_size, n_outputs)
            Outputs, L2-normalised rows if ``normalize``.
        """
        out = self.layers(x)
        if self.normalize:
            out = F.normalize(out, dim=1)
        return out


class ConvNet(nn.Module):
    """Small convolutional network for image items: the default network of image inputs.

    One block per entry of ``hidden_layer_sizes`` (a 3x3 convolution, batch normalisation,
    ReLU, and a 2x2 max-pooling while both sides of the map are at least 2 pixels). The last
    map is then averaged over a coarse grid of cells, ``grid_cells`` along its shorter side and
    about square cells along the other, so that the features keep where in the image a pattern
    is (global average pooling, as in a ResNet, cannot tell "12" from "21"). The pooled
    features are batch-normalised and projected linearly to ``n_outputs``. The convolutions
    start from Kaiming-normal weights (He et al., 2015, for ReLU), the projection from torch's
    default.

    Parameters
    ----------
    item_shape : tuple of int
        ``(channels, height, width)`` of an item.
    hidden_layer_sizes : int or tuple of int, default=(32, 64, 128)
        Output channels of each convolution block (an int: one block); at least one block.
    n_outputs : int, default=64
        Output dimension.
    normalize : bool, default=False
        Whether to L2-normalise the output rows (cosine geometry).
    grid_cells : int, default=2
        Cells of the pooling grid along the shorter side of the last map (at most its pixels);
        the longer side gets ``round(grid_cells * longer / shorter)`` cells, at most its pixels.
        A 28 x 56 image has a 3 x 7 last map with the default channels, pooled over 2 x 5
        cells.

    Attributes
    ----------
    item_shape : tuple of int
        ``(channels, height, width)``.
    grid : tuple of int
        ``(rows, columns)`` of the pooling grid.

    Examples
    --------
    >>> import torch
    >>> from skrank.nn import ConvNet
    >>> module = ConvNet((1, 28, 56), hidden_layer_sizes=(8, 16), n_outputs=4)
    >>> module.grid
    (2, 4)
    >>> tuple(module(torch.rand(5, 1, 28, 56)).shape)
    (5, 4)
    """

    def __init__(
        self,
        item_shape,
        hidden_layer_sizes=(32, 64, 128),
        n_outputs=64,
        normalize=False,
        grid_cells=2,
    ):
        super().__init__()
        item_shape = tuple(item_shape)
        if len(item_shape) != 3 or not all(_positive_int(side) for side in item_shape):
            raise ValueError(
                "item_shape must be (channels, height, width), three positive integers; got "
                f"{item_shape!r}."
            )
        channels = layer_sizes(hidden_layer_sizes)
        if not channels or not all(_positive_int(c) for c in channels):
            raise ValueError(
                "hidden_layer_sizes must hold at least one positive integer (the channels of "
                f"each convolution block); got {channels!r}."
            )
        if not _positive_int(n_outputs):
            raise ValueError(f"n_outputs must be a positive integer; got {n_outputs!r}.")
        if not _positive_int(grid_cells):
            raise ValueError(f"grid_cells must be a positive integer; got {grid_cells!r}.")
        self.item_shape = tuple(int(side) for side in item_shape)
        in_channels, height, width = self.item_shape
        layers = []
        for out_channels in channels:
            convolution = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
            nn.init.kaiming_normal_(convolution.weight, mode="fan_out", nonlinearity="relu")
            layers += [convolution, nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]
            if min(height, width) >= 2:
                layers.append(nn.MaxPool2d(2))
                height, width = height // 2, width // 2
            in_channels = out_channels
        shorter = min(height, width)
        self.grid = tuple(
            min(side, max(1, round(grid_cells * side / shorter))) for side in (height, width)
        )
        pooled = in_channels * self.grid[0] * self.grid[1]
        layers += [nn.AdaptiveAvgPool2d(self.grid), nn.Flatten(), nn.BatchNorm1d(pooled)]
        self.features = nn.Sequential(*layers)
        self.projection = nn.Linear(pooled, n_outputs)
        self.normalize = normalize

    def forward(self, x):
        """Map a batch of images to outputs.

        Parameters
        ----------
        x : torch.Tensor of shape (batch_size, channels, height, width)
            Images, float.

        Returns
        -------
        out : torch.Tensor of shape (batch_size, n_outputs)
            Outputs, L2-normalised rows if ``normalize``.
        """
        out = self.projection(self.features(x))
        if self.normalize:
            out = F.normalize(out, dim=1)
        return out


def _positive_int(value):
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= 1


def _linear(in_features, out_features, sparse):
    return (
        SparseLinear(in_features, out_features) if sparse else nn.Linear(in_features, out_features)
    )


def module_output_dim(module, n_features, device):
    """The output width of ``module``, from a two-row batch of zeros run through it.

    Checks a network given by the user before training: the error says what shape it
    returned.

    Parameters
    ----------
    module : torch.nn.Module
        The network (left in its training or evaluation mode).
    n_features : int or tuple of int
        Width of its input, or the shape of an input item (e.g. ``(channels, height, width)``
        for images).
    device : torch.device
        Where the module is.

    Returns
    -------
    n_outputs : int

    Raises
    ------
    ValueError
        If the module fails on the batch or does not map ``(batch, *item_shape)`` to
        ``(batch, n_outputs)``.
    """
    item_shape = (n_features,) if isinstance(n_features, Integral) else tuple(n_features)
    batch_shape = (2, *item_shape)
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            out = module(torch.zeros(batch_shape, device=device))
    except Exception as exc:
        raise ValueError(
            f"The module could not process a batch of shape {batch_shape}: {exc}"
        ) from exc
    finally:
        module.train(was_training)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != 2:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        expected = "n_features" if len(item_shape) == 1 else ", ".join(map(str, item_shape))
        raise ValueError(
            f"The module must map a batch of shape (batch_size, {expected}) to a 2-D tensor of "
            f"shape (batch_size, n_outputs); for a batch of 2 it returned {shape}."
        )
    return int(out.shape[1])
