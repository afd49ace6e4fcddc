"""Data-parallel training on ``torch.distributed``: the process group, and the collectives the
estimators need.

A fit is data-parallel when ``torch.distributed`` is initialised (by the user, or by skrank from
the environment ``torchrun`` sets: ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``).
Every rank draws the same global batches (same seeds) and trains on its part of each; the
network's gradients are averaged by :class:`torch.nn.parallel.DistributedDataParallel`, and the
state that is not a parameter is updated identically on every rank from gathered values.
"""

import os
from typing import NamedTuple

import torch
import torch.distributed as dist

from ..utils._docstrings import fill_docs

#: The Parameters and Returns sections of the collectives for a step's loss.
_GATHER_DOCS = {
    "gather_parameters": {
        "Parameters": [
            ("tensor", "torch.Tensor", "This rank's part (the same shape on every rank)."),
            (
                "context",
                "DistributedContext",
                "The fit's context (:attr:`BaseTorchEstimator.training_context`).",
            ),
        ],
        "Returns": [
            ("gathered", "torch.Tensor", "``tensor`` itself when the fit is not data-parallel.")
        ],
    }
}


class DistributedContext(NamedTuple):
    """This process's place in a data-parallel fit (rank 0 of 1 when not distributed).

    Attributes
    ----------
    rank : int
        This process's rank.
    world_size : int
        The number of processes training together.
    """

    rank: int
    world_size: int

    @property
    def active(self):
        """Whether several processes train together."""
        return self.world_size > 1


def current_context(device):
    """The data-parallel context of a fit, initialising the process group from ``torchrun``'s
    environment if nobody did (NCCL for CUDA devices, gloo otherwise).

    Parameters
    ----------
    device : torch.device
        The training device (:func:`resolve_device`).

    Returns
    -------
    context : DistributedContext
    """
    if not dist.is_available():
        return DistributedContext(0, 1)
    if not dist.is_initialized():
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or "MASTER_ADDR" not in os.environ:
            return DistributedContext(0, 1)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistributedContext(dist.get_rank(), dist.get_world_size())


def rank_device(device, context):
    """The device of this rank: ``cuda:LOCAL_RANK`` for a bare ``cuda`` device in a
    data-parallel fit on one machine's GPUs, else ``device`` itself."""
    if context.active and device.type == "cuda" and device.index is None:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", context.rank)))
    return device


def gather(tensor, context):
    """The tensors of every rank concatenated along the first dimension, without gradient."""
    if not context.active:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(context.world_size)]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts)


def gather_uneven(tensor, context):
    """:func:`gather` of tensors whose first dimensions differ between the ranks (their sizes
    are exchanged first, which reads them back to the host)."""
    if not context.active:
        return tensor
    size = torch.tensor([tensor.shape[0]], device=tensor.device)
    sizes = [torch.empty_like(size) for _ in range(context.world_size)]
    dist.all_gather(sizes, size)
    sizes = [int(s) for s in sizes]
    padded = tensor.new_zeros((max(sizes), *tensor.shape[1:]))
    padded[: tensor.shape[0]] = tensor
    parts = [torch.empty_like(padded) for _ in range(context.world_size)]
    dist.all_gather(parts, padded)
    return torch.cat([part[:n] for part, n in zip(parts, sizes, strict=True)])


@fill_docs(_GATHER_DOCS)
def gather_with_gradient(tensor, context):
    """The tensors of every rank concatenated along the first dimension, with this rank's part
    still attached to its autograd graph and its gradient scaled by ``world_size``.

    Every rank then computes the same loss of the gathered batch, and the average of the ranks'
    gradients (DistributedDataParallel) is the gradient of that loss, as one process with the
    whole batch would compute it.


    {gather_parameters}
    """
    if not context.active:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(context.world_size)]
    dist.all_gather(parts, tensor.detach().contiguous())
    parts[context.rank] = _ScaleGradient.apply(tensor, float(context.world_size))
    return torch.cat(parts)


@fill_docs(_GATHER_DOCS)
def gather_summing_gradient(tensor, context):
    """The tensors of every rank concatenated along the first dimension, differentiable: the
    gradient of each rank's part is the sum over the ranks of the gradients their losses send it.

    When every rank computes its own share of a loss of the gathered batch (shares that add up
    to the loss), each part then receives the gradient of the whole loss.


    {gather_parameters}
    """
    if not context.active:
        return tensor
    return _GatherSummingGradient.apply(tensor, context.rank, context.world_size)


def mean_over_ranks(tensor, context):
    """The mean of ``tensor`` over the ranks (in place)."""
    if context.active:
        dist.all_reduce(tensor)
        tensor /= context.world_size
    return tensor


class _ScaleGradient(torch.autograd.Function):
    """Identity forward; the backward pass multiplies the gradient by ``factor``."""

    @staticmethod
    def forward(ctx, tensor, factor):
        ctx.factor = factor
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.factor, None


class _GatherSummingGradient(torch.autograd.Function):
    """All-gather forward; the backward pass all-reduces the gradient and keeps this rank's
    part."""

    @staticmethod
    def forward(ctx, tensor, rank, world_size):
        ctx.rank, ctx.size = rank, tensor.shape[0]
        parts = [torch.empty_like(tensor) for _ in range(world_size)]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output.contiguous()
        dist.all_reduce(grad)
        start = ctx.rank * ctx.size
        return grad[start : start + ctx.size], None, None
