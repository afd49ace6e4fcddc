"""Results of the benchmarks: one JSON file per run, and the tables of ``benchmarks/README.md``.

Every benchmark script builds a :class:`Results` and calls :meth:`Results.save`, which writes
``benchmarks/results/<name>.json``: ``benchmark``, ``command`` (the exact command line),
``date`` (ISO, UTC), ``machine`` (host, platform, CPUs, memory, the GPU, the load average at
start and end), ``versions`` (Python, skrank and its git commit, numpy, scipy, scikit-learn,
torch and the peers named), ``tables`` (each ``{"title", "columns", "rows", "notes"}``) and
``figures`` (other measured values, by name). ``python benchmarks/report.py`` renders the tables
into ``benchmarks/README.md`` between ``<!-- results: <name> -->`` and ``<!-- end results -->``.
No path of a particular machine is kept: results live next to the scripts.
"""

import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
STUDIES_DIR = Path(__file__).resolve().parent / "studies" / "results"
REPOSITORY = Path(__file__).resolve().parent.parent

_BASE_PACKAGES = ("numpy", "scipy", "scikit-learn", "torch")


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*arguments):
    """The output of ``git <arguments>`` in this repository."""
    command = ["git", "-C", str(REPOSITORY), *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def _git_commit():
    try:
        commit = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+uncommitted" if dirty else "")


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib():
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _load_average():
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def _gpu():
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def machine_description():
    """Facts about the machine a benchmark runs on."""
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "gpu": _gpu(),
        "load_average_at_start": _load_average(),
    }


class Results:
    """The results of one benchmark run: ``name``, the file's name without ``.json`` (e.g.
    ``"bench_snm_scaling"`` for one part of a script); ``packages``, the libraries whose
    versions to record besides numpy, scipy, scikit-learn and torch (the peers)."""

    def __init__(self, name, packages=()):
        self.name = name
        self.data = {
            "benchmark": name,
            "command": " ".join(shlex.quote(arg) for arg in [Path(sys.executable).name, *sys.argv]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_description(),
            "versions": {
                "python": platform.python_version(),
                "skrank": _skrank_version(),
                "skrank_commit": _git_commit(),
                **{package: _version(package) for package in (*_BASE_PACKAGES, *packages)},
            },
            "tables": [],
            "figures": {},
        }

    def add_table(self, title, columns, rows, notes=None, show=False):
        """Add a table: ``rows`` is a list of lists (or of dicts keyed by ``columns``); ``show``
        also prints it, columns aligned."""
        rows = [[row[c] for c in columns] if isinstance(row, dict) else list(row) for row in rows]
        for row in rows:
            if len(row) != len(columns):
                raise ValueError(f"Row {row!r} does not have the {len(columns)} columns {columns}.")
        self.data["tables"].append(
            {"title": title, "columns": list(columns), "rows": rows, "notes": notes}
        )
        if show:
            print(text_table(title, columns, rows), flush=True)
        return self

    def add_figure(self, name, value):
        """Record a single measured value (a number, a string, a list or a dict)."""
        self.data["figures"][name] = value
        return self

    def save(self, directory=None):
        """Write ``<directory>/<name>.json`` (default ``benchmarks/results``); return the path."""
        directory = Path(directory) if directory is not None else RESULTS_DIR
        directory.mkdir(parents=True, exist_ok=True)
        self.data["machine"]["load_average_at_end"] = _load_average()
        path = directory / f"{self.name}.json"
        path.write_text(json.dumps(self.data, indent=1, default=jsonable) + "\n")
        shown = path.relative_to(REPOSITORY) if path.is_relative_to(REPOSITORY) else path
        print(f"results written to {shown}")
        return path


def text_table(title, columns, rows):
    """A table as aligned plain text, under its title (numbers to 4 significant digits)."""
    lines = [[str(column) for column in columns]]
    lines += [[f"{c:.4g}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    text = [f"\n{title}"]
    for index, line in enumerate(lines):
        text.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        if index == 0:
            text.append("  ".join("-" * width for width in widths))
    return "\n".join(text)


def summary(values, digits=4):
    """``"mean ± sd"`` of ``values`` (the population standard deviation, numpy's ``std``), to
    ``digits`` decimals; None and NaN values are left out, and none left is ``"n/a"``."""
    kept = [float(value) for value in values if value is not None and value == value]
    if not kept:
        return "n/a"
    return f"{statistics.fmean(kept):.{digits}f} ± {statistics.pstdev(kept):.{digits}f}"


def summary_rows(records, scores, means=("fit_seconds", "peak_gib"), digits=4):
    """The table of :func:`_harness.run_benchmark`'s records: a row a method, in their order.

    Each row: the method; ``"mean ± sd"`` over its seeds of each of ``scores`` (:func:`summary`);
    the mean of each of ``means`` (e.g. seconds, memory; None if no run finished); and
    ``"finished of runs"`` (e.g. ``"3 of 3"``), with the first failure's reason when a run failed.
    """
    methods = list(dict.fromkeys(record["method"] for record in records))
    rows = []
    for method in methods:
        runs = [record for record in records if record["method"] == method]
        done = [record for record in runs if "failed" not in record]
        cells = [summary([record[score] for record in done], digits) for score in scores]
        for name in means:
            values = [record[name] for record in done if record.get(name) is not None]
            cells.append(statistics.fmean(values) if values else None)
        failed = [record["failed"] for record in runs if "failed" in record]
        finished = f"{len(done)} of {len(runs)}" + (f" ({failed[0]})" if failed else "")
        rows.append([method, *cells, finished])
    return rows


def _skrank_version():
    """The version of the skrank the benchmark imports (the repository's when run from it)."""
    try:
        import skrank
    except ImportError:
        return None
    return skrank.__version__


def jsonable(value):
    """numpy scalars and arrays as Python numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
