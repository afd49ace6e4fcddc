"""Export of fitted networks to ONNX, for serving without Python's torch.

Graphs are written by :func:`torch.onnx.export` with the ``torch.export``-based exporter (the
default since torch 2.9; it needs ``onnxscript``), the maintained one: the TorchScript-based
exporter is deprecated. The first dimension of the input (the rows) is dynamic.
"""

import importlib.util
import os
import warnings

import numpy as np
import scipy.sparse as sp
import torch

from ..utils._optional import install_hint

#: Weights beyond this size are written to a file beside the graph (ONNX files hold 2 GiB).
EXTERNAL_DATA_BYTES = 2**30


class UnitRows(torch.nn.Module):
    """``module``'s output rows scaled to unit L2 norm (zero rows stay zero), as
    ``SOPRCEmbedder.transform`` scales them: the network of an embedding to export.

    Parameters
    ----------
    module : torch.nn.Module
        The embedding network.
    """

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        outputs = self.module(x)
        norms = outputs.norm(dim=1, keepdim=True)
        return outputs / norms.clamp(min=torch.finfo(outputs.dtype).tiny)


def dense_float32(X):
    """``X`` (an array or a sparse matrix) as a dense float32 array, as an ONNX graph reads it.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)

    Returns
    -------
    X_dense : ndarray of float32 of shape (n_samples, n_features)
    """
    return np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float32)


def check_onnx_installed(method):
    """Raise an ImportError naming the ``onnx`` extra when the exporter's packages are missing.

    Parameters
    ----------
    method : str
        The caller, named in the error (e.g. ``"SOPRCEmbedder.export_onnx"``).
    """
    missing = [name for name in ("onnx", "onnxscript") if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(
            f"{method} needs the packages {' and '.join(missing)} (torch's ONNX exporter), and "
            f"onnxruntime to run the graph: {install_hint('onnx onnxscript onnxruntime', 'onnx')}."
        )


def export_module(module, n_features, path, output_names, opset_version=None):
    """Write ``module`` (on the CPU, in evaluation mode) as an ONNX graph with the input ``X``
    of shape (n_samples, n_features) or (n_samples, \\*item_shape), float32, and the outputs
    ``output_names``.

    The number of rows of the graph's input is dynamic. Call :func:`check_onnx_installed`
    first for an error that names your method.

    Parameters
    ----------
    module : torch.nn.Module
        The network; it is moved to the CPU and put in evaluation mode.
    n_features : int or tuple of int
        Width of the input, or the shape of an item (e.g. ``(channels, height, width)``).
    path : str or os.PathLike
        The file to write.
    output_names : sequence of str
        Names of the module's outputs, in order.
    opset_version : int or None, default=None
        The ONNX operator set; None: the exporter's default.

    Returns
    -------
    path : str
        The graph's file (its weights in ``path + ".data"`` beside it when they exceed 1 GiB).
    """
    path = os.fspath(path)
    module = module.cpu().eval()
    weight_bytes = sum(t.numel() * t.element_size() for t in module.state_dict().values())
    n_samples = torch.export.Dim("n_samples")
    with torch.no_grad(), warnings.catch_warnings():
        # torch's exporter, not the user's code, uses this deprecated form (torch 2.13).
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
        torch.onnx.export(
            module,
            (torch.zeros(2, *np.atleast_1d(n_features).tolist()),),
            path,
            input_names=["X"],
            output_names=list(output_names),
            dynamic_shapes=({0: n_samples},),
            opset_version=opset_version,
            dynamo=True,
            external_data=weight_bytes > EXTERNAL_DATA_BYTES,
            verbose=False,
        )
    return path
