"""File access shared by the dataset readers: gzip detection and shipped data files."""

import gzip
import io
import os
import zlib
from contextlib import contextmanager
from importlib import resources

_GZIP_MAGIC = b"\x1f\x8b"
# What reading a damaged gzip file raises: a bad header or checksum, a truncated stream, a
# corrupted block.
DECOMPRESSION_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def is_path(file):
    """Whether ``file`` names a file (``str`` or path-like) rather than being a file object."""
    return isinstance(file, (str, os.PathLike))


def file_name(file, unnamed="the file"):
    """How error messages name ``file``: its path, the name of a file object, or ``unnamed``."""
    return str(file) if is_path(file) else str(getattr(file, "name", unnamed))


@contextmanager
def open_binary(file):
    """Yield a binary stream of ``file``, decompressed if it is gzip-compressed.

    Parameters
    ----------
    file : str, path-like or binary file object
        A file object is left open. Compression is detected from the gzip magic number, which
        needs a seekable file object (a non-seekable one is read as is).

    Yields
    ------
    stream : binary file object
    """
    if is_path(file):
        with open(file, "rb") as raw, _gunzip_if_compressed(raw) as stream:
            yield stream
    elif hasattr(file, "read"):
        with _gunzip_if_compressed(file) as stream:
            yield stream
    else:
        raise TypeError(f"Expected a path or a file object, got {type(file).__name__}.")


@contextmanager
def _gunzip_if_compressed(raw):
    magic = b""
    if raw.seekable():
        magic = raw.read(2)
        raw.seek(-len(magic), io.SEEK_CUR)
    if magic == _GZIP_MAGIC:
        with gzip.GzipFile(fileobj=raw) as stream:
            yield stream
    else:
        yield raw


@contextmanager
def shipped_file(name):
    """Yield a binary stream of the data file ``name`` shipped in ``skrank/datasets/data``."""
    resource = resources.files(__package__).joinpath("data").joinpath(name)
    with resource.open("rb") as raw, _gunzip_if_compressed(raw) as stream:
        yield stream
