"""Memory budgets (``skrank.utils._memory``): the host's available memory."""

import builtins
import os

import pytest

from skrank.utils import _memory


def _meminfo_available():
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="Linux only")
def test_available_host_bytes_reads_memavailable():
    # MemAvailable moves between two reads: compare within 256 MiB.
    assert abs(_memory.available_host_bytes() - _meminfo_available()) < 2**28


def test_available_host_bytes_falls_back_to_sysconf(monkeypatch):
    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if path == "/proc/meminfo":
            raise OSError("no /proc")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    monkeypatch.setattr(os, "sysconf", {"SC_AVPHYS_PAGES": 3, "SC_PAGE_SIZE": 4096}.__getitem__)
    assert _memory.available_host_bytes() == 3 * 4096

    def unknown(name):
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", unknown)
    assert _memory.available_host_bytes() is None
