"""Device resolution and conversion of (possibly sparse) mini-batches to tensors."""

import numpy as np
import scipy.sparse as sp
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


class BatchSource:
    """Rows of a dense array or a sparse matrix, served as float32 tensors per mini-batch.

    A dense array is converted to a tensor once; a sparse matrix is densified one mini-batch at a
    time, never as a whole.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        Inputs.
    """

    def __init__(self, X):
        if sp.issparse(X):
            self._sparse = sp.csr_matrix(X, dtype=np.float32)
            self._dense = None
        else:
            self._sparse = None
            # np.require copies read-only arrays (e.g. from pandas), which torch cannot wrap.
            self._dense = torch.from_numpy(np.require(X, dtype=np.float32, requirements="W"))
        self.n_samples = X.shape[0]

    def get(self, indices, device):
        """Rows ``indices`` as a float32 tensor on ``device``."""
        if self._dense is not None:
            rows = self._dense[torch.as_tensor(indices, dtype=torch.long)]
        else:
            rows = torch.from_numpy(self._sparse[indices].toarray())
        return rows.to(device, non_blocking=True)

    def chunks(self, chunk_size, device):
        """Consecutive chunks of rows, in order, as tensors on ``device``."""
        for start in range(0, self.n_samples, chunk_size):
            yield self.get(np.arange(start, min(start + chunk_size, self.n_samples)), device)
