"""The saved form of the torch state of fitted estimators: arrays, never pickled code.

A fitted torch estimator keeps modules (``module_``, ``criterion_``) and possibly tensors. When
it is saved (pickle, joblib, skops), each module the estimator can build again
(:meth:`~skrank.nn.BaseTorchEstimator.rebuild_module`) is stored as its weights, numpy arrays,
and rebuilt on load; a module it cannot build (a network the user passed) is stored as a
:class:`SavedModule`, loaded with ``torch.load(weights_only=True)`` allowing only the classes
and functions it records, which skops lists as types to trust. Nothing here calls
``torch.load(weights_only=False)`` or unpickles data it did not write.
"""

import io
import sys

import numpy as np
import torch

#: The key of the estimator's saved state holding its modules and tensors, by attribute name.
TORCH_STATE_KEY = "_torch_state"


def tensor_state(tensor):
    """A tensor as saved: a numpy array on the host, or, for a dtype numpy lacks (bfloat16),
    the bytes of ``torch.save`` (loaded with ``weights_only=True``)."""
    tensor = tensor.detach().cpu()
    try:
        return tensor.numpy()
    except TypeError:
        buffer = io.BytesIO()
        torch.save(tensor.clone(), buffer)
        return buffer.getvalue()


def tensor_from_state(value, name):
    """The tensor of a :func:`tensor_state` value, on the CPU; ``name`` names it in errors."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(f"The saved tensor {name!r} is an array of Python objects.")
        return torch.from_numpy(value if value.flags.writeable else value.copy())
    if isinstance(value, bytes):
        tensor = torch.load(io.BytesIO(value), map_location="cpu", weights_only=True)
        if isinstance(tensor, torch.Tensor):
            return tensor
    raise TypeError(
        f"The saved tensor {name!r} is a {type(value).__name__}, not an array or a saved tensor."
    )


def module_weights(module):
    """The ``state_dict`` of ``module`` as :func:`tensor_state` values."""
    return {key: tensor_state(value) for key, value in module.state_dict().items()}


def matches_weights(module, weights):
    """Whether ``module``'s state_dict has the keys and shapes of ``weights``."""
    state = module.state_dict()
    return state.keys() == weights.keys() and all(
        tuple(state[key].shape) == tuple(getattr(weights[key], "shape", state[key].shape))
        for key in state
    )


def load_weights(build, weights, name):
    """``build()``'s module filled with the saved ``weights``, in evaluation mode, on the CPU.

    The module is built on the meta device (no initialisation, no memory, no draw from torch's
    random generator) and takes the loaded tensors as they are; a module with tensors outside
    its ``state_dict`` (non-persistent buffers) is built on the CPU instead, with torch's random
    state restored afterwards.
    """
    if not isinstance(weights, dict):
        raise TypeError(f"The saved weights of {name!r} are a {type(weights).__name__}.")
    tensors = {key: tensor_from_state(value, f"{name}.{key}") for key, value in weights.items()}
    with torch.device("meta"):
        module = build()
    module.load_state_dict(tensors, assign=True)
    if any(t.is_meta for t in [*module.parameters(), *module.buffers()]):
        with torch.random.fork_rng(devices=[]):
            module = build()
        module.load_state_dict(tensors)
    return module.eval()


class SavedModule:
    """A torch module skrank cannot build again, saved whole.

    The module is written by :func:`torch.save` and read by ``torch.load(weights_only=True)``
    allowing the classes and functions it is made of (``allowed``, found when it is saved): a
    file whose module needs anything else fails to load instead of running it. skops lists
    the allowed classes as types to trust, so loading such a module is the user's choice;
    pickle and joblib import them, as they import every class of a pickle.

    Parameters
    ----------
    module : torch.nn.Module
        The module.

    Attributes
    ----------
    payload : bytes
        The output of ``torch.save(module)``.
    allowed : list of type or function
        The classes and functions the payload names beyond those ``torch.load`` allows itself.
    """

    def __init__(self, module):
        buffer = io.BytesIO()
        torch.save(module, buffer)
        self.payload = buffer.getvalue()
        buffer.seek(0)
        names = torch.serialization.get_unsafe_globals_in_checkpoint(buffer)
        self.allowed = [_import_global(name) for name in names]

    def load(self):
        """The module, on the CPU."""
        allowed = list(self.allowed)
        if not all(isinstance(item, type) or callable(item) for item in allowed):
            raise TypeError("A saved module allows only classes and functions.")
        with torch.serialization.safe_globals(allowed):
            module = torch.load(io.BytesIO(self.payload), map_location="cpu", weights_only=True)
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"The saved module is a {type(module).__name__}, not a torch module.")
        return module


def _import_global(name):
    """The class or function a pickle names ``module.qualified_name``, from the modules
    already imported (at save time the object was just pickled from this process)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found = sys.modules.get(".".join(parts[:cut]))
        try:
            for attribute in parts[cut:]:
                found = getattr(found, attribute)
        except AttributeError:
            continue
        if found is not None:
            return found
    raise ImportError(f"Cannot find {name!r}, named by the saved module.")


class _SerializedTorch:
    """The pickled torch objects of files written by skrank before 0.2, which skrank no longer
    loads (unpickling them could run any code)."""

    def __setstate__(self, state):
        raise ValueError(
            "This file was written by a skrank version before 0.2, whose estimators stored their "
            "networks as pickles, which loading would run as code; this version does not load "
            "them. If you trust the file, load it with the version that wrote it and save the "
            "estimator again with this one."
        )
