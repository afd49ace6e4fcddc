"""Device resolution: the ``device`` parameter of the torch estimators."""

import torch


def resolve_device(device):
    """Turn a ``device`` parameter into a :class:`torch.device`.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda"} or str or torch.device
        ``"auto"`` picks CUDA when available, else the CPU. Other values are passed to
        :class:`torch.device`.

    Returns
    -------
    device : torch.device
        The device to compute on.

    Raises
    ------
    ValueError
        If a CUDA device is requested and CUDA is not available, or the string is not a device.
    """
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a valid torch device.") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available on this machine; "
            "use device='auto' or 'cpu'."
        )
    return resolved


def available_device(device_name):
    """The stored device of a fitted model if this machine has it, else the CPU.

    A model fitted on a GPU and loaded on a CPU-only machine thus runs on the CPU.
    """
    device = torch.device(device_name)
    if device.type == "cuda" and not torch.cuda.is_available():
        return torch.device("cpu")
    return device


def indexed_device(device):
    """``device`` as tensors on it report theirs: a bare ``cuda`` becomes the current CUDA
    device (``cuda:0`` unless another is selected), which a tensor's ``.device`` equals."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device
