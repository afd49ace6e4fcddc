"""Training inputs placed once where the training step reads them, and the batches it reads.

:class:`TrainingInputs` holds the rows of ``X`` as float32: on the device when they fit its
memory (dense rows as one tensor; sparse rows as a padded table of column indices and values,
densified per batch on the device or, for a module that reads them, handed over as
:class:`~skrank.nn.SparseRows`), otherwise in pinned host memory, gathered per batch on the
host and copied with ``non_blocking=True``. In the first case the batch indices are drawn on the
device (``index_device``), so a step reads no index from the host; in the second they are drawn
on the host, where the rows are.

A memory-mapped ``X`` (:class:`numpy.memmap`, ``np.load(..., mmap_mode="r")``) is never copied
whole: each batch reads its rows from the file, and a split of such an ``X`` into parts (the
validation split) is a :class:`RowSubset` of it, read the same way.

Image items, an ``X`` of shape ``(n_samples, channels, height, width)``, are held the same way;
``uint8`` images stay ``uint8`` (on the device or in their file) and each batch becomes float32
values / 255 on the device, so that no float copy of the whole set is ever made.

The items of an :class:`~skrank.nn.ItemDataset` (a torch Dataset, or image files) are read
batch by batch as well, by a :class:`torch.utils.data.DataLoader` of ``num_workers`` processes
that reads the next batches while the step trains on this one.
"""

import mmap
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import check_array

from ..utils._validation import canonical_csr, check_float32_range, naming_inputs
from ._device import indexed_device
from ._items import ItemDataset, item_loader
from ._sparse import SparseRows

# Share of the free memory of a CUDA device that the training inputs may take.
_DEVICE_DATA_FRACTION = 0.5
# A padded sparse table is used while it holds at most this many times the stored values.
_MAX_SPARSE_PADDING = 4
# Devices whose sparse rows come from the CSR matrix itself, in the flat layout (no padding,
# and fewer distinct rows for the step to update); elsewhere the padded table has fixed shapes.
_FLAT_SPARSE_ROW_DEVICES = {"cpu"}
# Devices whose image batches are handed over in the channels-last layout (the faster one for
# the convolutions of cuDNN, chosen by the layout of their inputs).
_CHANNELS_LAST_DEVICES = {"cuda"}
# Seeds of the reads of an epoch's items are drawn below this bound (and stay int64 when added
# to an item's place in the epoch).
_SEED_BOUND = 2**62


class _BatchParts(NamedTuple):
    """The rows of a batch this process reads, before they are read (see ``Batch``)."""

    indices: torch.Tensor
    valid: torch.Tensor
    groups: torch.Tensor | None
    global_indices: torch.Tensor | None
    part: slice
    global_valid: torch.Tensor | None
    global_groups: torch.Tensor | None
    seeds: list | None


class Batch(NamedTuple):
    """One mini-batch as the training step sees it.

    Attributes
    ----------
    inputs : torch.Tensor of shape (batch_size, \\*item_shape), float32, or skrank.nn.SparseRows
        The rows of the batch, on the training device (rows of padding entries are row 0):
        ``(batch_size, n_features)`` for feature rows, ``(batch_size, channels, height,
        width)`` for images; :class:`~skrank.nn.SparseRows` for a sparse ``X`` and a module
        that reads them.
    indices : torch.Tensor of shape (batch_size,), int64
        Their row numbers in the training data.
    valid : torch.Tensor of shape (batch_size,), bool
        Which entries are items (False: padding of the batch layout).
    groups : torch.Tensor or None
        For class-balanced batches, the class of each group of items (see
        :class:`~skrank.sampling.EpochBatches`); None otherwise.
    global_indices : torch.Tensor or None, default=None
        In a data-parallel fit, the indices of the whole batch over all ranks, of which this
        rank trains on ``global_indices[part]``; None: ``indices`` is the whole batch.
    part : slice, default=slice(None)
        This rank's part of the whole batch.
    global_valid, global_groups : torch.Tensor or None, default=None
        In a data-parallel fit, ``valid`` and ``groups`` of the whole batch (every rank draws
        the same batches, so no rank needs to gather them); None otherwise.
    """

    inputs: torch.Tensor
    indices: torch.Tensor
    valid: torch.Tensor
    groups: torch.Tensor | None
    global_indices: torch.Tensor | None = None
    part: slice = slice(None)
    global_valid: torch.Tensor | None = None
    global_groups: torch.Tensor | None = None


def input_dtypes(X):
    """The ``dtype`` of ``validate_data`` for the ``X`` of a torch estimator: float32 and
    float64 are kept and other dtypes become float64, except that a memory-mapped ``X`` of any
    real dtype is kept as it is (its rows become float32 batch by batch), never copied whole."""
    if memory_mapped(X) and X.dtype.kind in "biuf":
        return None
    return [np.float32, np.float64]


#: The shapes of ``X`` the torch estimators read, named by their errors.
ITEM_SHAPES = (
    "2-D (n_samples, n_features) feature rows, or images: 3-D (n_samples, height, width) with "
    "one channel or 4-D (n_samples, channels, height, width)"
)


def item_rank(X):
    """The number of dimensions of ``X`` (2 for a sparse matrix or a DataFrame), read without
    converting an array.

    Parameters
    ----------
    X : array-like or sparse matrix

    Returns
    -------
    ndim : int
    """
    if sp.issparse(X):
        return 2
    ndim = getattr(X, "ndim", None)
    if ndim is not None:
        return int(ndim)
    try:
        return np.asarray(X).ndim
    except (ValueError, TypeError):  # e.g. ragged lists: scikit-learn's checks say why
        return 2


def check_image_items(X, *, item_shape=None, input_name="X", estimator=None, fitting=True):
    """Validate image items: ``X`` of shape ``(n, H, W)`` (one channel) or ``(n, C, H, W)``.

    ``uint8`` images (and a memory-mapped ``X`` of any real dtype) are kept as they are, never
    copied: the engine reads them batch by batch, ``uint8`` as values / 255 in [0, 1] (as
    torchvision and kornia expect); float images are kept as float32 or float64 and must be
    finite; other dtypes become float64.

    Parameters
    ----------
    X : array-like of shape (n_samples, height, width) or (n_samples, channels, height, width)
        The images.
    item_shape : tuple of int or None, default=None
        The ``(channels, height, width)`` the images must have (those of the fit); None
        accepts any.
    input_name : str, default="X"
        Name of the input, for the messages.
    estimator : str or None, default=None
        Name of the estimator, for the messages.
    fitting : bool, default=True
        Whether ``X`` trains the network (see :func:`check_float32_range`).

    Returns
    -------
    X : ndarray of shape (n_samples, channels, height, width)
        A view of the input where it needs no conversion (3-D images get a channel axis of 1).

    Raises
    ------
    ValueError
        For another number of dimensions (naming the shapes read), an empty side, or items of
        another shape than ``item_shape`` (naming both).
    """
    who = estimator or "The estimator"
    if item_rank(X) not in (3, 4):
        raise ValueError(
            f"{input_name} must be {ITEM_SHAPES}; got an array of shape {np.shape(X)}."
        )
    if not hasattr(X, "dtype"):
        X = np.asarray(X)
    keep = X.dtype == np.uint8 or (memory_mapped(X) and X.dtype.kind in "biuf")
    with naming_inputs(input_name):
        X = check_array(
            X,
            dtype=None if keep else [np.float32, np.float64],
            allow_nd=True,
            input_name=input_name,
            estimator=estimator,
        )
    if X.ndim == 3:  # a view with the strides of a 4-D array (the layout the convolutions see)
        X = X.reshape(X.shape[0], 1, *X.shape[1:])
    if min(X.shape[1:]) < 1:
        raise ValueError(
            f"{input_name} has images of shape {X.shape[1:]}: every side must be at least 1."
        )
    if item_shape is not None and tuple(X.shape[1:]) != tuple(item_shape):
        raise ValueError(
            f"{input_name} has images of shape (channels, height, width) = {tuple(X.shape[1:])}, "
            f"but {who} was fitted on images of shape {tuple(item_shape)}."
        )
    if X.dtype != np.uint8:
        check_float32_range(X, estimator=who, input_name=input_name, fitting=fitting)
    return X


def memory_mapped(X):
    """Whether ``X`` reads its values from a memory-mapped file (a :class:`numpy.memmap`, an
    array viewing one, or a :class:`RowSubset` of one)."""
    if isinstance(X, RowSubset):
        return memory_mapped(X.data)
    while isinstance(X, np.ndarray):
        if isinstance(X, np.memmap):
            return True
        X = X.base
    return isinstance(X, mmap.mmap)


class RowSubset:
    """Rows ``rows`` of an array, read from it only when asked for: a part of a
    memory-mapped ``X`` that is never copied whole.

    Parameters
    ----------
    data : ndarray of shape (n_rows, n_features) or (n_rows, \\*item_shape)
        The array (typically a :class:`numpy.memmap`): feature rows or image items.
    rows : array-like of int of shape (n_samples,)
        The rows of ``data`` in the subset, in its order.

    Attributes
    ----------
    shape : tuple of int
        ``(n_samples, *data.shape[1:])``.
    ndim : int
        ``data.ndim``.
    dtype : numpy.dtype
        The dtype of ``data``.
    """

    def __init__(self, data, rows):
        if isinstance(data, RowSubset):
            data, rows = data.data, data.rows[np.asarray(rows)]
        self.data = data
        self.rows = np.asarray(rows, dtype=np.intp)
        self.shape = (self.rows.shape[0], *data.shape[1:])
        self.ndim = len(self.shape)
        self.dtype = data.dtype

    def __len__(self):
        return self.shape[0]

    def take(self, positions):
        """Rows ``positions`` of the subset, read from ``data``, as an ndarray."""
        return np.asarray(self.data[self.rows[positions]])

    def __getitem__(self, key):
        if isinstance(key, tuple):
            return self.take(key[0])[(slice(None), *key[1:])]
        return self.take(key)

    def __array__(self, dtype=None, copy=None):
        rows = self.take(slice(None))
        return rows if dtype is None else rows.astype(dtype, copy=False)


def _fits_on(device, n_bytes):
    if device.type != "cuda":
        return True  # host memory already holds X
    free, _ = torch.cuda.mem_get_info(device)
    return n_bytes <= _DEVICE_DATA_FRACTION * free


class TrainingInputs:
    """The rows of ``X`` as float32 tensors, resident on ``device`` when they fit.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features), ndarray of shape \
(n_samples, channels, height, width), or skrank.nn.ItemDataset
        Inputs: feature rows, or image items (``uint8`` images are read as values / 255), or
        the items of a Dataset or of image files.
    device : torch.device
        The training device.
    sparse_rows : bool, default=False
        For a sparse ``X``, hand out batches as :class:`~skrank.nn.SparseRows` (the non-zeros
        only) instead of dense rows: what a module with ``accepts_sparse_rows`` reads. Resident
        rows come in the padded layout (fixed shapes), streamed ones in the flat layout.
    num_workers : int, default=0
        For an :class:`~skrank.nn.ItemDataset` ``X``, the worker processes of the
        :class:`torch.utils.data.DataLoader` that reads its items in :meth:`batches` and
        :meth:`chunks` (0: this process). Other inputs are read by this process.

    Attributes
    ----------
    index_device : torch.device
        Where batch indices must be drawn: ``device`` if the rows live there, else the CPU.
    resident : bool
        Whether the rows live on ``device``.
    item_shape : tuple of int
        The shape of one item: ``(n_features,)``, or ``(channels, height, width)``.
    channels_last : bool
        Whether image batches are handed over in the channels-last memory layout (on CUDA).

    Notes
    -----
    A memory-mapped ``X`` (or a :class:`RowSubset` of one) stays in its file: each batch reads
    its rows, converts them to float32 and copies them to ``device``, so the process's
    anonymous memory holds a batch, not ``X``. Its values, and so a fit, are the same as from
    ``X`` in memory. ``uint8`` images are kept as ``uint8`` (four times smaller than float32)
    wherever they are held and copied; a batch becomes float32 on ``device``. The items of an
    :class:`~skrank.nn.ItemDataset` are read batch by batch (in pinned memory for CUDA); when
    its ``item_transform`` may draw random numbers, the reads of an epoch are seeded from one
    draw of torch's generator at its first batch and each item's place in the epoch, so that
    any ``num_workers`` reads the same values.
    """

    def __init__(self, X, device, sparse_rows=False, num_workers=0):
        self.device = indexed_device(device)
        self.num_workers = int(num_workers)
        self.n_samples = X.shape[0]
        self.item_shape = tuple(int(side) for side in X.shape[1:])
        self.n_features = int(np.prod(self.item_shape))
        self.sparse_rows = bool(sparse_rows) and sp.issparse(X)
        # Image values of uint8 are read as values / 255; uint8 feature rows as their values.
        self._scaled_uint8 = len(self.item_shape) > 1 and X.dtype == np.uint8
        self.channels_last = (
            len(self.item_shape) == 3 and self.device.type in _CHANNELS_LAST_DEVICES
        )
        self._dense = self._columns = self._values = self._csr = self._mapped = None
        self._items = self._epoch_seed = None
        if isinstance(X, ItemDataset):
            self._items = X
            self.resident = False
        elif memory_mapped(X):
            self._mapped = X if isinstance(X, RowSubset) else RowSubset(X, np.arange(X.shape[0]))
            self.resident = False
        elif sp.issparse(X):
            self._init_sparse(canonical_csr(X, dtype=np.float32, drop_zeros=True))
        else:
            # np.require copies read-only arrays (e.g. from pandas), which torch cannot wrap;
            # a wrapped array of the caller's is only read (batches are gathered copies).
            dtype = np.uint8 if self._scaled_uint8 else np.float32
            rows = torch.from_numpy(np.require(X, dtype=dtype, requirements=["C", "W"]))
            self.resident = _fits_on(self.device, rows.numel() * rows.element_size())
            if self.resident:
                self._dense = rows.to(self.device)
            else:
                self._dense = rows.pin_memory() if torch.cuda.is_available() else rows
        self.index_device = self.device if self.resident else torch.device("cpu")

    def _init_sparse(self, csr):
        lengths = np.diff(csr.indptr)
        width = max(int(lengths.max(initial=0)), 1)
        padded_entries = self.n_samples * width
        self.resident = (
            not (self.sparse_rows and self.device.type in _FLAT_SPARSE_ROW_DEVICES)
            and padded_entries <= _MAX_SPARSE_PADDING * max(csr.nnz, 1)
            and _fits_on(self.device, padded_entries * 12)
        )
        if not self.resident:
            self._csr = csr
            return
        rows = np.repeat(np.arange(self.n_samples), lengths)
        slots = np.arange(csr.nnz) - csr.indptr[rows]
        # Padding entries have value 0; sparse rows point them at SparseLinear's padding row.
        padding = self.n_features if self.sparse_rows else 0
        columns = np.full((self.n_samples, width), padding, dtype=np.int64)
        values = np.zeros((self.n_samples, width), dtype=np.float32)
        columns[rows, slots] = csr.indices
        values[rows, slots] = csr.data
        self._columns = torch.as_tensor(columns, device=self.device)
        self._values = torch.as_tensor(values, device=self.device)

    def rows(self, indices, seeds=None):
        """Rows ``indices`` (a tensor on ``index_device``) as float32 on the training device:
        dense (images of ``uint8`` as values / 255), or :class:`~skrank.nn.SparseRows` with
        ``sparse_rows``. ``seeds``, for the items of an :class:`~skrank.nn.ItemDataset`, seed
        the read of each (see :meth:`~skrank.nn.ItemDataset.read`)."""
        if self._items is not None:
            seeds = [None] * indices.shape[0] if seeds is None else seeds
            rows = torch.stack(
                [self._items.read(i, seed) for i, seed in zip(indices.tolist(), seeds, strict=True)]
            )
        elif self._dense is not None:
            rows = self._dense[indices]
        elif self._columns is not None and self.sparse_rows:
            return SparseRows(self._columns[indices], self._values[indices])
        elif self._columns is not None:
            rows = torch.zeros(
                indices.shape[0], self.n_features, dtype=torch.float32, device=self.device
            )
            rows.scatter_add_(1, self._columns[indices], self._values[indices])
            return rows
        elif self.sparse_rows:
            block = self._csr[indices.numpy()]
            rows = SparseRows(
                torch.from_numpy(block.indices.astype(np.int64)),
                torch.from_numpy(block.data),
                torch.from_numpy(block.indptr[:-1].astype(np.int64)),
            )
            return rows.to(self.device, non_blocking=True)
        elif self._mapped is not None:
            taken = self._mapped.take(indices.numpy())
            dtype = np.uint8 if self._scaled_uint8 else np.float32
            rows = torch.from_numpy(np.require(taken, dtype=dtype, requirements=["C", "W"]))
        else:
            rows = torch.from_numpy(self._csr[indices.numpy()].toarray())
        return self._placed(rows)

    def _placed(self, rows):
        """Dense rows read from the host or the device, as the step reads them on the device."""
        if rows.device != self.device:
            if torch.cuda.is_available() and not rows.is_pinned():
                rows = rows.pin_memory()
            rows = rows.to(self.device, non_blocking=True)
        if self._scaled_uint8:
            rows = rows.to(torch.float32).div_(255)
        if self.channels_last:
            rows = rows.contiguous(memory_format=torch.channels_last)
        return rows

    def chunks(self, chunk_size):
        """Consecutive chunks of rows, in order, as :meth:`rows` gives them (the items of an
        :class:`~skrank.nn.ItemDataset` read by ``num_workers`` processes, each seeded by its
        row number)."""
        starts = range(0, self.n_samples, chunk_size)
        if self._items is not None:
            keys = [
                [(row, row) for row in range(start, min(start + chunk_size, self.n_samples))]
                for start in starts
            ]
            for rows in self._loader(keys):
                yield self._placed(rows)
            return
        for start in starts:
            stop = min(start + chunk_size, self.n_samples)
            yield self.rows(torch.arange(start, stop, device=self.index_device))

    def _loader(self, keys):
        return item_loader(
            self._items,
            keys,
            num_workers=self.num_workers,
            pin_memory=self.device.type == "cuda",
        )

    def batch(self, epoch, number, context=None):
        """Batch ``number`` of an :class:`~skrank.sampling.EpochBatches`, as a :class:`Batch`:
        in a data-parallel ``context``, this rank's part of it."""
        parts = self._parts(epoch, number, context)
        return self._assembled(self.rows(parts.indices, parts.seeds), parts)

    def batches(self, epoch, context=None):
        """The batches of an :class:`~skrank.sampling.EpochBatches`, in order, as
        :meth:`batch` gives them; the items of an :class:`~skrank.nn.ItemDataset` are read
        ahead by ``num_workers`` processes."""
        n_batches = epoch.indices.shape[0]
        if self._items is None or self.num_workers == 0:
            for number in range(n_batches):
                yield self.batch(epoch, number, context)
            return
        parts = [self._parts(epoch, number, context) for number in range(n_batches)]
        keys = [
            list(zip(p.indices.tolist(), p.seeds or [None] * p.indices.shape[0], strict=True))
            for p in parts
        ]
        for batch_parts, rows in zip(parts, self._loader(keys), strict=True):
            yield self._assembled(self._placed(rows), batch_parts)

    def _parts(self, epoch, number, context):
        indices, valid = epoch.indices[number], epoch.valid[number]
        groups = None if epoch.groups is None else epoch.groups[number]
        global_indices, part = None, slice(None)
        global_valid = global_groups = None
        if context is not None and context.active:
            global_indices, global_valid, global_groups = indices, valid, groups
            size = indices.shape[0] // context.world_size
            part = slice(context.rank * size, (context.rank + 1) * size)
            indices, valid = indices[part], valid[part]
            if groups is not None:
                n_groups = groups.shape[0] // context.world_size
                groups = groups[context.rank * n_groups : (context.rank + 1) * n_groups]
        seeds = None
        if self._items is not None and self._items.item_transform is not None:
            if number == 0 or self._epoch_seed is None:
                self._epoch_seed = int(torch.randint(_SEED_BOUND, ()))
            # Seeds of the places of the whole batch: the same values on every rank.
            first = self._epoch_seed + number * epoch.indices.shape[1] + (part.start or 0)
            seeds = list(range(first, first + indices.shape[0]))
        return _BatchParts(
            indices, valid, groups, global_indices, part, global_valid, global_groups, seeds
        )

    def _assembled(self, rows, parts):
        indices, valid, groups, global_indices, part, global_valid, global_groups, _ = parts
        if self.index_device != self.device:  # streamed from the host
            indices, valid = indices.to(self.device), valid.to(self.device)
            groups = None if groups is None else groups.to(self.device)
            if global_indices is not None:
                global_indices = global_indices.to(self.device)
                global_valid = global_valid.to(self.device)
                if global_groups is not None:
                    global_groups = global_groups.to(self.device)
        return Batch(
            rows, indices, valid, groups, global_indices, part, global_valid, global_groups
        )
