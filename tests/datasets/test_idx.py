"""The IDX reader (``skrank.datasets._idx``): round trips and bad files."""

import gzip
import io
import struct

import numpy as np
import pytest

from skrank.datasets._idx import read_idx


def _idx_bytes(type_code, shape, payload):
    return bytes([0, 0, type_code, len(shape)]) + struct.pack(f">{len(shape)}I", *shape) + payload


@pytest.mark.parametrize(
    "type_code, array",
    [
        (0x08, np.arange(12, dtype=np.uint8).reshape(2, 3, 2)),
        (0x09, np.arange(-6, 6, dtype=np.int8).reshape(4, 3)),
        (0x0C, np.arange(-6, 6, dtype=">i4")),
        (0x0E, np.linspace(-1, 1, 12, dtype=">f8").reshape(2, 2, 3)),
    ],
)
def test_read_idx_round_trip(tmp_path, type_code, array):
    content = _idx_bytes(type_code, array.shape, array.tobytes())
    (tmp_path / "a.idx").write_bytes(content)
    (tmp_path / "a.idx.gz").write_bytes(gzip.compress(content))
    for source in (tmp_path / "a.idx", tmp_path / "a.idx.gz", io.BytesIO(content)):
        read = read_idx(source)
        np.testing.assert_array_equal(read, array)
        assert read.shape == array.shape and read.dtype.isnative and read.flags.writeable


@pytest.mark.parametrize(
    "content, match",
    [
        (b"\x00\x01\x08\x01" + struct.pack(">I", 1) + b"\x00", "magic number"),
        (b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"\x00", "magic number"),
        (b"\x00\x00", "magic number"),
        (b"\x00\x00\x08\x02" + struct.pack(">I", 2), "header"),
        (_idx_bytes(0x08, (2, 3), bytes(5)), "announces"),
        (_idx_bytes(0x08, (2, 3), bytes(7)), "announces"),
    ],
)
def test_read_idx_rejects_bad_files(content, match):
    with pytest.raises(ValueError, match=match):
        read_idx(io.BytesIO(content))
