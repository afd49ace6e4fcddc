"""Memory budgets of chunked computations, all taken from scikit-learn's ``working_memory``.

Every skrank computation that works in blocks (retrieval metrics, top-k search, pair blocks of
MMC and of the pointwise ROC threshold, gathered pair outer products) sizes its blocks with
:func:`chunk_rows`, so that ``sklearn.set_config(working_memory=...)`` or
``sklearn.config_context(working_memory=...)`` bounds them all, as it bounds
``sklearn.metrics.pairwise_distances_chunked``.
"""

import os
import threading
import time

from sklearn import get_config


def working_memory_bytes():
    """The budget of one block's work arrays: ``working_memory`` MiB (1024 by default)."""
    return int(get_config()["working_memory"] * 2**20)


def chunk_rows(n_rows, bytes_per_row, *, at_least=1):
    """Rows per block so that one block's work arrays fit the ``working_memory`` budget.

    Parameters
    ----------
    n_rows : int
        Number of rows to process (the result never exceeds it, nor goes below ``at_least``).
    bytes_per_row : int
        Bytes of work arrays per row of a block.
    at_least : int, default=1
        Smallest useful block (a block of one row may exceed the budget: the computation cannot
        be cut finer).

    Returns
    -------
    rows : int
    """
    rows = working_memory_bytes() // max(int(bytes_per_row), 1)
    return int(max(at_least, min(n_rows, rows)))


def available_host_bytes():
    """Host memory a new allocation may use, or None if unknown.

    Linux's ``MemAvailable`` (free memory plus what the page cache can give back), else the
    free physical pages that ``os.sysconf`` reports.
    """
    available = _proc_bytes("/proc/meminfo", "MemAvailable")
    if available is not None:
        return available
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_dense_fits(n_rows, n_columns, what, instead):
    """Refuse (``MemoryError``) a float32 ``n_rows x n_columns`` matrix that would take more
    than half of the available host memory; ``what`` builds it, ``instead`` avoids it."""
    needed = 4 * n_rows * n_columns
    available = available_host_bytes()
    if available is not None and needed > available / 2:
        raise MemoryError(
            f"{what} would build a {n_rows} x {n_columns} score matrix "
            f"({needed / 2**30:.1f} GiB), more than half of the {available / 2**30:.1f} GiB of "
            f"available memory. {instead}"
        )


def anonymous_resident_bytes():
    """The process's anonymous resident memory, or None if unknown.

    Linux's ``RssAnon`` (``/proc/self/status``): the heap and private pages the process holds
    in memory, not the pages of the files it maps (the page cache's, which the system frees
    under pressure).
    """
    return _proc_bytes("/proc/self/status", "RssAnon")


def _proc_bytes(path, field):
    """The ``field: <n> kB`` line of a Linux ``/proc`` file, in bytes, or None."""
    try:
        with open(path) as file:
            for line in file:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class PeakAnonymousMemory:
    """Context manager: the peak of :func:`anonymous_resident_bytes` while it is open, sampled
    by a thread every ``interval`` seconds (what tests and benchmarks of memory bounds read).

    Attributes
    ----------
    start : int
        Anonymous resident bytes on entry.
    peak : int
        The largest value sampled so far.
    growth : int
        ``peak - start``.
    """

    def __init__(self, interval=0.001):
        self.interval = interval

    def __enter__(self):
        self.start = self.peak = anonymous_resident_bytes()
        if self.start is None:
            raise OSError("RssAnon is not available: /proc/self/status has no such line.")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._done.is_set():
            self.peak = max(self.peak, anonymous_resident_bytes())
            time.sleep(self.interval)

    def __exit__(self, *exc_info):
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, anonymous_resident_bytes())

    @property
    def growth(self):
        return self.peak - self.start
