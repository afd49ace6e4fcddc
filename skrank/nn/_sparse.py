"""Sparse input rows and the linear layer that reads only their non-zero features."""

import math
from typing import NamedTuple

import scipy.sparse as sp
import torch
from torch import nn
from torch.nn import functional as F


class SparseRows(NamedTuple):
    """A mini-batch of sparse rows as column indices and values.

    Two layouts, both read by :func:`torch.nn.functional.embedding_bag`:

    - padded (``offsets`` None): ``columns`` and ``values`` of shape (n_rows, width), row ``i``
      holding its non-zeros first, then padding entries of value 0 whose column is
      ``n_features`` (a row of the layer's weight that no feature uses). Fixed shapes: what
      the training step reads from data resident on the device.
    - flat: ``columns`` and ``values`` of shape (nnz,), the non-zeros of every row in order,
      and ``offsets`` of shape (n_rows,), where each row starts (a CSR matrix's ``indptr``
      without its last entry). What rows streamed from host memory use, with no padding.

    Attributes
    ----------
    columns : torch.Tensor, int64
        Feature indices.
    values : torch.Tensor, float32
        Their values.
    offsets : torch.Tensor or None, default=None
        Start of each row in the flat layout; None for the padded one.
    """

    columns: torch.Tensor
    values: torch.Tensor
    offsets: torch.Tensor | None = None

    @property
    def n_rows(self):
        """Number of rows."""
        return self.columns.shape[0] if self.offsets is None else self.offsets.shape[0]

    @property
    def device(self):
        """Device of the tensors."""
        return self.values.device

    def to(self, device, non_blocking=False):
        """The rows on ``device``."""
        return SparseRows(
            *(
                None if tensor is None else tensor.to(device, non_blocking=non_blocking)
                for tensor in self
            )
        )

    def with_values(self, values):
        """The same sparsity pattern with other ``values`` (e.g. after dropout)."""
        return self._replace(values=values)


class SparseLinear(nn.Module):
    """``x W + b`` for inputs given as :class:`SparseRows` (or dense), reading only the rows of
    ``W`` of the features present.

    The weight is stored feature by feature, shape ``(in_features + 1, out_features)`` (the last
    row is the padding row of :class:`SparseRows`, multiplied by zeros only). On sparse rows the
    product is :func:`torch.nn.functional.embedding_bag` (a sum of weight rows scaled by the
    values), whose gradient is a sparse tensor of one row per non-zero read, in fixed shapes:
    an optimiser of those rows alone (:class:`~skrank.nn.RowSparseOptimizer`) makes a step cost
    ``O(nnz x out_features)``, whatever ``in_features``. Rows in the flat layout on the CPU
    train through a product over the batch's distinct features instead (a gradient of one
    summed row per feature); without a gradient (prediction, ``torch.no_grad()``) they take
    ``embedding_bag``'s fused sum, which gathers no block of weight rows. Dense inputs (e.g.
    for export) take the ordinary matrix product with the same weights.

    Parameters
    ----------
    in_features : int
        Number of input features.
    out_features : int
        Output dimension.
    bias : bool, default=True
        Whether to add a learned bias.

    Examples
    --------
    >>> import torch
    >>> from skrank.nn import SparseLinear, SparseRows
    >>> layer = SparseLinear(1000, 4)
    >>> columns = torch.tensor([[3, 17], [999, 1000]])  # 1000: the padding column
    >>> rows = SparseRows(columns, torch.tensor([[1.0, 2.0], [0.5, 0.0]]))
    >>> dense = torch.zeros(2, 1000)
    >>> dense[0, 3], dense[0, 17], dense[1, 999] = 1.0, 2.0, 0.5
    >>> bool(torch.allclose(layer(rows), layer(dense)))
    True
    """

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(in_features + 1, out_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """The initialisation of :class:`torch.nn.Linear` (uniform, bound ``1/sqrt(in)``), with
        the same draws: a ``SparseLinear`` starts as the ``Linear`` built from the same seed."""
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
        with torch.no_grad():
            # Drawn in Linear's (out, in) layout, then stored feature by feature.
            linear_weight = torch.empty(self.out_features, self.in_features)
            self.weight[:-1] = linear_weight.uniform_(-bound, bound).T
            self.weight[-1].zero_()
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        """The layer applied to :class:`SparseRows` or a dense (n, in_features) tensor."""
        if (
            isinstance(x, SparseRows)
            and x.offsets is not None
            and x.device.type == "cpu"
            and torch.is_grad_enabled()
            and self.weight.requires_grad
        ):
            # Training: one gradient row per distinct feature. Without a gradient,
            # embedding_bag's fused sum is faster and gathers no (features, out) block.
            out = _FlatRowsProduct.apply(self.weight, x.columns, x.values, x.offsets)
        elif isinstance(x, SparseRows):
            out = F.embedding_bag(
                x.columns,
                self.weight,
                x.offsets,
                mode="sum",
                sparse=True,
                per_sample_weights=x.values.to(self.weight.dtype),
            )
        else:
            out = x @ self.weight[:-1]
        return out if self.bias is None else out + self.bias

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class _FlatRowsProduct(torch.autograd.Function):
    """``rows @ weight`` for sparse rows in the flat layout on the CPU, whose gradient is the
    product of the transposed rows, as a sparse matrix over the distinct features of the batch,
    with the output's gradient: one summed row per distinct feature (a coalesced sparse
    tensor), without the row per non-zero of :func:`torch.nn.functional.embedding_bag`'s
    sparse gradient."""

    @staticmethod
    def forward(ctx, weight, columns, values, offsets):
        values = values.detach().to(weight.dtype)
        distinct, local_columns = torch.unique(columns, return_inverse=True)
        indptr = torch.cat([offsets, offsets.new_tensor([columns.shape[0]])])
        rows = sp.csr_matrix(
            (values.numpy(), local_columns.numpy(), indptr.numpy()),
            shape=(offsets.shape[0], distinct.shape[0]),
        )
        ctx.rows, ctx.weight_shape = rows, weight.shape
        ctx.save_for_backward(distinct)
        # embedding_bag's fused sum: the same product, without gathering the rows read.
        return F.embedding_bag(
            columns,
            weight.detach(),
            offsets,
            mode="sum",
            per_sample_weights=values,
        )

    @staticmethod
    def backward(ctx, grad_output):
        (distinct,) = ctx.saved_tensors
        # Row by row over the distinct features (a CSR product: faster than the CSC one).
        summed = torch.from_numpy(ctx.rows.T.tocsr() @ grad_output.contiguous().numpy())
        gradient = torch.sparse_coo_tensor(
            distinct[None], summed, ctx.weight_shape, is_coalesced=True, check_invariants=False
        )
        return gradient, None, None, None


def sparse_linear_layers(module):
    """The :class:`SparseLinear` layers of ``module``, by qualified name."""
    return {name: m for name, m in module.named_modules() if isinstance(m, SparseLinear)}
