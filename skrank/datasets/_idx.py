"""Reader of the IDX format of the MNIST files."""

import math
import struct

import numpy as np

from ._io import open_binary

# Third byte of the magic number -> element type (multi-byte types are big-endian).
_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(file):
    """Read an IDX file (plain or gzip-compressed) into an array of native byte order.

    The format: a magic number of four bytes (0, 0, element type, number of dimensions), each
    dimension as a big-endian uint32, then the elements in C order.

    Parameters
    ----------
    file : str, path-like or binary file object

    Returns
    -------
    array : ndarray
        Writable, with the shape and element type given by the header.

    Raises
    ------
    ValueError
        If the magic number is not that of an IDX file or the size does not match the header.
    """
    with open_binary(file) as stream:
        content = stream.read()
    magic = content[:4]
    if len(magic) < 4 or magic[:2] != b"\x00\x00" or magic[2] not in _IDX_DTYPES:
        raise ValueError(f"Not an IDX file: magic number {magic.hex()!r}.")
    n_dims = magic[3]
    header_size = 4 + 4 * n_dims
    if len(content) < header_size:
        raise ValueError(f"Truncated IDX file: header of {n_dims} dimensions is incomplete.")
    shape = struct.unpack(f">{n_dims}I", content[4:header_size])
    dtype = _IDX_DTYPES[magic[2]]
    expected_size = header_size + math.prod(shape) * dtype.itemsize
    if len(content) != expected_size:
        raise ValueError(
            f"IDX file has {len(content)} bytes but its header {shape} of {dtype} announces "
            f"{expected_size}."
        )
    array = np.frombuffer(content, dtype=dtype, offset=header_size).reshape(shape)
    return array.astype(dtype.newbyteorder("="))
