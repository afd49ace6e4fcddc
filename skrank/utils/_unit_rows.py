"""Rows scaled to unit L2 norm, as ``torch.nn.functional.normalize``, with a backward pass in a
few operations: the label rows of SNMClassifier and the embeddings of SOPRC's cosine Gram."""

import torch
from torch.nn import functional as F


def unit_rows(x):
    """The rows of ``x`` (n, d) L2-normalised, as ``torch.nn.functional.normalize(x, dim=1)``
    (divided by ``max(norm, 1e-12)``), with a backward pass in a few operations."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _UnitRows.apply(x)
    return F.normalize(x, dim=1)


def unit_rows_and_norms(x):
    """``(unit, norms)``: the rows of ``x`` divided by their norms (at least 1e-12), and those
    norms (n, 1)."""
    norms = torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_(min=1e-12)
    return x / norms, norms


def unit_rows_gradient(grad_unit, unit, norms):
    """The gradient ``(dU - U <dU, U>) / |x|`` of the rows of ``x`` from that of
    ``U = unit_rows(x)``."""
    radial = torch.linalg.vecdot(grad_unit, unit, dim=1)[:, None]
    return torch.addcmul(grad_unit, unit, radial, value=-1).div_(norms)


class _UnitRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        unit, norms = unit_rows_and_norms(x)
        ctx.save_for_backward(unit, norms)
        return unit

    @staticmethod
    def backward(ctx, grad_unit):
        unit, norms = ctx.saved_tensors
        return unit_rows_gradient(grad_unit, unit, norms)
