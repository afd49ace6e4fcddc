"""Items read one at a time: a torch Dataset of item tensors, or image files decoded by Pillow.

:class:`ItemDataset` holds such a source as the engine reads it, as it reads an array: its
``shape`` is ``(n_items, *item_shape)``, ``X[i]`` is item ``i`` as a float32 tensor and
``X[rows]`` (row numbers, a slice or a mask) a subset, which reads nothing.
:class:`~skrank.nn.TrainingInputs` reads its batches with a :class:`torch.utils.data.DataLoader`
of ``num_workers`` processes (:func:`item_loader`).

Each item of a fit is read with torch's generator seeded from the fit's seed and the item's
place in the epoch, so that a random ``item_transform`` draws the same values in any process:
the model is the same for every ``num_workers``.
"""

import copy
import os
from numbers import Integral

import numpy as np
import torch

from ..utils._optional import install_hint

__all__ = ["ItemDataset", "image_paths", "is_item_source", "item_loader", "read_image"]

# Pillow's modes read as they are, and those converted first (palettes keep transparency).
_KEPT_MODES = {"L", "LA", "RGB", "RGBA"}
_CONVERTED_MODES = {"1": "L", "PA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB"}
_CONVERTED_MODES["HSV"] = "RGB"

_ITEM_RANKS = (
    "1-D feature rows (n_features,) or images: (height, width) with one channel or (channels, "
    "height, width)"
)


def _pillow():
    try:
        from PIL import Image
    except ImportError as error:
        raise ImportError(
            "Reading image files needs Pillow (the images extra): "
            f"{install_hint('pillow', 'images')}."
        ) from error
    return Image


def read_image(path):
    """An image file decoded by Pillow, as a ``uint8`` array of shape (channels, height, width).

    Grayscale (mode ``L``), grayscale with alpha (``LA``), ``RGB`` and ``RGBA`` images keep
    their 1, 2, 3 or 4 channels; bilevel images become ``L``, palette images ``RGB`` (``RGBA``
    with transparency), ``CMYK``, ``YCbCr``, ``LAB`` and ``HSV`` images ``RGB``. Images of 16 or
    32 bits a value are refused: give them as a Dataset of tensors.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    image : ndarray of uint8 of shape (channels, height, width)

    Raises
    ------
    ImportError
        When Pillow is not installed.
    OSError
        When the file is missing or cannot be decoded (Pillow's error).
    ValueError
        For an image of a mode of more than 8 bits a value.
    """
    Image = _pillow()
    with Image.open(path) as image:
        image.load()
        mode = image.mode
        if mode == "P":
            mode = "RGBA" if "transparency" in image.info else "RGB"
        mode = _CONVERTED_MODES.get(mode, mode)
        if mode not in _KEPT_MODES:
            raise ValueError(
                f"the image has Pillow's mode {image.mode!r}; images of 8 bits a value are read "
                f"(modes {sorted(_KEPT_MODES | set(_CONVERTED_MODES) | {'P'})})."
            )
        values = np.asarray(image if mode == image.mode else image.convert(mode))
    values = values[None] if values.ndim == 2 else values.transpose(2, 0, 1)
    return np.require(values, requirements=["C", "W"])


def image_paths(X):
    """The paths of a sequence of image files, as a list of str, or None when ``X`` is not one.

    A list or tuple whose elements are all ``str`` or :class:`os.PathLike`, or a 1-D array (or
    Series) of dtype ``object`` or ``str`` holding such elements.

    Parameters
    ----------
    X : object

    Returns
    -------
    paths : list of str or None
    """
    if not isinstance(X, (list, tuple)):
        dtype = getattr(X, "dtype", None)
        if getattr(X, "ndim", None) != 1 or dtype is None or np.dtype(dtype).kind not in "OU":
            return None
        X = np.asarray(X).tolist()
    if len(X) == 0 or not all(isinstance(path, (str, os.PathLike)) for path in X):
        return None
    return [os.fspath(path) for path in X]


def is_item_source(X):
    """Whether ``X`` is read as an :class:`ItemDataset`: a torch Dataset, a sequence of image
    paths (see :func:`image_paths`), or one path (which :class:`ItemDataset` refuses, naming
    the sequence it needs).

    Parameters
    ----------
    X : object

    Returns
    -------
    is_item_source : bool
    """
    return isinstance(X, (torch.utils.data.Dataset, str, os.PathLike)) or image_paths(X) is not None


def _as_item(value, name, what):
    """``value`` as a float32 item tensor on the CPU: 1-D, or (channels, height, width) with
    ``uint8`` images read as values / 255."""
    if isinstance(value, np.ndarray):  # torch wraps writable arrays only
        value = torch.from_numpy(np.require(value, requirements=["W"]))
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{name}: {what} is a {type(value).__name__}, not a tensor; a Dataset X gives one "
            "item tensor an index (its labels go to y)."
        )
    if value.ndim not in (1, 2, 3):
        raise ValueError(f"{name}: {what} has shape {tuple(value.shape)}; items are {_ITEM_RANKS}.")
    if value.ndim == 2:
        value = value[None]
    scaled = value.ndim == 3 and value.dtype == torch.uint8
    value = value.detach().to(device="cpu", dtype=torch.float32)
    return value.div_(255) if scaled else value


class ItemDataset(torch.utils.data.Dataset):
    """Items of a torch Dataset or of image files, read one at a time as float32 tensors.

    The engine reads it as an array of items: ``shape`` is ``(n_items, *item_shape)``,
    ``X[i]`` is item ``i`` and ``X[rows]`` (row numbers, a slice or a boolean mask) the subset
    of those rows, which reads nothing. Items are read as the arrays of the torch estimators
    are: 1-D items are feature rows, 2-D items images of one channel, 3-D items images
    ``(channels, height, width)``; ``uint8`` images become values / 255 in [0, 1], other values
    float32 as they are. ``item_transform`` then maps each item (e.g. resizes it), and every
    item must have the shape of the first (or ``item_shape``), finite values.

    Parameters
    ----------
    source : torch.utils.data.Dataset or sequence of str or os.PathLike
        A Dataset whose ``source[i]`` is the tensor (or array) of item ``i`` and whose
        ``len`` is the number of items, or the paths of image files, decoded by Pillow
        (:func:`read_image`; the ``images`` extra): a list, or a 1-D array of dtype ``object``
        or ``str``.
    item_transform : callable or None, default=None
        Maps an item (a float32 tensor on the CPU, of shape ``(channels, height, width)`` or
        ``(n_features,)``) to the tensor the network reads, read by the rules above. It runs in
        the process that reads the item (a DataLoader worker with ``num_workers > 0``); its
        random draws must come from torch's generator, which each read seeds.
    item_shape : tuple of int or None, default=None
        The shape every item must have after ``item_transform`` (a fitted model's); None: the
        shape of the first item, which is read at once.
    input_name : str, default="X"
        Name of the input, for the messages.
    estimator : str or None, default=None
        Name of the estimator, for the messages.

    Attributes
    ----------
    shape : tuple of int
        ``(n_items, *item_shape)``.
    ndim : int
        ``1 + len(item_shape)``.
    dtype : numpy.dtype
        float32, the dtype of the items read.
    item_shape : tuple of int
        The shape of an item.
    rows : ndarray of int
        The rows of ``source`` in the subset, in its order.
    paths : list of str or None
        The files of ``source`` when it is a sequence of paths.

    Raises
    ------
    ValueError
        For an empty source, a missing file (naming it), or a first item that cannot be read.
    TypeError
        When ``source`` is neither a Dataset nor a sequence of paths.
    """

    dtype = np.dtype(np.float32)

    def __init__(
        self, source, item_transform=None, item_shape=None, *, input_name="X", estimator=None
    ):
        if isinstance(source, (str, bytes, os.PathLike)):
            raise TypeError(
                f"{input_name} is one path, {source!r}: give a sequence of paths, one an item."
            )
        self.paths = image_paths(source)
        if self.paths is None and not isinstance(source, torch.utils.data.Dataset):
            raise TypeError(
                f"{input_name} must be a torch.utils.data.Dataset of item tensors or a sequence "
                f"of image paths; got {type(source).__name__}."
            )
        self.source = source if self.paths is None else None
        self.item_transform = item_transform
        self.input_name = input_name
        self.estimator = estimator or "The estimator"
        n_items = len(self.paths) if self.paths is not None else _length(source, input_name)
        if n_items == 0:
            raise ValueError(f"{input_name} holds no items.")
        if self.paths is not None:
            _pillow()
            for row, path in enumerate(self.paths):
                if not os.path.isfile(path):
                    raise ValueError(f"{self._name(row)} does not exist (or is not a file).")
        self.rows = np.arange(n_items)
        self._fitted_shape = item_shape is not None
        self.item_shape = None if item_shape is None else tuple(item_shape)
        if self.item_shape is None:
            self.item_shape = tuple(self.read(0, seed=0).shape)
        self._set_shape()

    def _set_shape(self):
        self.shape = (self.rows.shape[0], *self.item_shape)
        self.ndim = len(self.shape)

    def _name(self, row):
        if self.paths is None:
            return f"{self.input_name}[{row}]"
        return f"{self.input_name}[{row}], the file {self.paths[row]!r},"

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        if isinstance(key, tuple) and all(
            k is Ellipsis or (isinstance(k, slice) and k == slice(None)) for k in key[1:]
        ):
            key = key[0]  # X[rows, ...], as scikit-learn indexes arrays
        if isinstance(key, Integral):
            return self.read(int(key))
        subset = copy.copy(self)
        subset.rows = self.rows[np.asarray(key) if isinstance(key, list) else key]
        subset._set_shape()
        return subset

    def read(self, position, seed=None):
        """Item ``position`` of the subset, checked, as a float32 tensor of ``item_shape``.

        Parameters
        ----------
        position : int
            Its place in the subset.
        seed : int or None, default=None
            Seed of torch's generator for ``item_transform`` (restored afterwards); None
            draws from the generator as it is.

        Returns
        -------
        item : torch.Tensor of shape item_shape, float32
        """
        row = int(self.rows[position])
        name = self._name(row)
        if self.paths is not None:
            try:
                values = read_image(self.paths[row])
            except (OSError, ValueError) as error:
                raise ValueError(f"{name} cannot be read as an image: {error}") from error
            item = _as_item(values, name, "the image")
        else:
            item = _as_item(self.source[row], name, "the item")
        if self.item_transform is not None:
            with torch.random.fork_rng(devices=[], enabled=seed is not None):
                if seed is not None:
                    torch.manual_seed(seed)
                item = _as_item(self.item_transform(item), name, "the output of item_transform")
        if self.item_shape is not None and tuple(item.shape) != self.item_shape:
            known = (
                f"{self.estimator} was fitted on items of shape {self.item_shape}"
                if self._fitted_shape
                else f"the first item has shape {self.item_shape}"
            )
            transformed = " after item_transform" if self.item_transform is not None else ""
            raise ValueError(
                f"{name} has an item of shape {tuple(item.shape)}{transformed}, but {known}; "
                + (
                    "resize the items with item_transform."
                    if self.item_transform is None
                    else "item_transform must give every item one shape."
                )
            )
        decoded = self.paths is not None and self.item_transform is None  # uint8 / 255
        if not decoded and not torch.isfinite(item).all():
            raise ValueError(f"{name} has non-finite values.")
        return item

    def __array__(self, dtype=None, copy=None):
        # Seeded as TrainingInputs.chunks reads them (by position), as transform sees them.
        items = torch.stack([self.read(i, seed=i) for i in range(len(self))]).numpy()
        return items if dtype is None else items.astype(dtype, copy=False)


def _length(dataset, input_name):
    try:
        return len(dataset)
    except TypeError as error:
        raise TypeError(
            f"{input_name} is a Dataset without a length: items are read by index, so it must "
            "define __len__ (an IterableDataset cannot be read in class-balanced batches)."
        ) from error


class _SeededReads(torch.utils.data.Dataset):
    """What a DataLoader reads: ``(position, seed)`` keys of an :class:`ItemDataset`."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, key):
        return self.items.read(*key)


def item_loader(items, batches, *, num_workers=0, pin_memory=False):
    """A DataLoader of the batches of ``items``, in order, each stacked in one tensor.

    Parameters
    ----------
    items : ItemDataset
        The items.
    batches : iterable of list of (int, int or None)
        The ``(position, seed)`` of the items of each batch (see :meth:`ItemDataset.read`).
    num_workers : int, default=0
        Worker processes reading the items (0: the calling process).
    pin_memory : bool, default=False
        Put the batches in pinned host memory (for a copy to CUDA).

    Returns
    -------
    loader : torch.utils.data.DataLoader
        Its batches are float32 tensors of shape ``(len(batch), *items.item_shape)``. It draws
        from a generator of its own, never from torch's global one.
    """
    return torch.utils.data.DataLoader(
        _SeededReads(items),
        batch_sampler=batches,
        num_workers=num_workers,
        collate_fn=torch.stack,
        pin_memory=pin_memory,
        generator=torch.Generator(),
    )
