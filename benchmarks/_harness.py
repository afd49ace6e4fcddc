"""The benchmarks' harness: common arguments, timing, child processes, peak memory, baselines.

The benchmark scripts measure through this module and write through ``_results.py``.

- **Arguments.** :func:`parser` adds the arguments the scripts share, spelt and meant the same
  everywhere (:data:`COMMON_ARGUMENTS`: ``--quick``, ``--seeds``, ``--tag``, ``--resume``,
  ``--report-only``, ``--timeout``, ``--repeats``, ``--device``, ``--baseline``);
  :func:`results_name` names the results file from them: ``<stem>[_<part>...][_quick][_<tag>]``.
- **Timing.** :func:`timed` (wall seconds of one call, CUDA synchronised before and after),
  :func:`timed_cpu` (wall and CPU seconds), :func:`alternate` (repeated measurements
  interleaved, so that a change of load on a shared machine hits every candidate alike) and
  :func:`marginal_rate` (work per second between a short and a long run, so that set-up costs
  cancel).
- **Child processes.** :func:`run_in_child` calls a function of a script in a fresh Python
  process: this environment's, a peer's own environment (:func:`environment_python`), or under a
  launcher such as ``torchrun``. One protocol: the child imports the script as a module, calls
  the function with keyword arguments given as JSON, and writes its return value as JSON to the
  file the parent names (``$SKRANK_BENCHMARK_OUTPUT``); the parent waits, enforcing an optional
  time and memory limit, and reads the file. A child that fails, is stopped or writes nothing
  raises :class:`ChildFailed` in the parent, with the end of its output.
- **Peak memory.** :class:`PeakMemory`: the resident memory at the start of a measured region,
  the peak within it, and the increase, which every table reports (one quantity for every
  method: imports and loaded data, held before the region, are not counted).
- **Baselines.** :func:`source_at` extracts the ``skrank`` package of an earlier git revision
  into a temporary folder (:func:`sources`: this checkout and that one); ``run_in_child(...,
  source=folder)`` runs a child on it instead of on this checkout (and checks that the child
  imported that copy).

The module uses the standard library only, so that a child running in another environment
(PECOS, metric-learn) imports it too.

Peers in environments of their own: libpecos (PECOS XR-Linear) pins numpy < 2 and scipy < 1.14,
and metric-learn 0.7 does not run with scikit-learn >= 1.8, so each runs with the Python of a
virtual environment beside the benchmarks (or the one an environment variable names)::

    python3 -m venv benchmarks/.venv-pecos           # or set SKRANK_PECOS_PYTHON
    benchmarks/.venv-pecos/bin/pip install "numpy<2" "scipy<1.14" scikit-learn
    benchmarks/.venv-pecos/bin/pip install libpecos --no-deps
    python3 -m venv benchmarks/.venv-ml              # or set SKRANK_METRIC_LEARN_PYTHON
    benchmarks/.venv-ml/bin/pip install "scikit-learn<1.6" metric-learn numpy scipy

Example: a script that times a fit in a child process per seed::

    from _harness import PeakMemory, parser, results_name, run_in_child, timed
    from _results import Results

    def measure(n_samples, seed):  # runs in the child: imports and data first
        from skrank import SOPRCEmbedder
        X, y = make_data(n_samples, seed)
        with PeakMemory() as memory:
            _, seconds = timed(SOPRCEmbedder(random_state=seed).fit, X, y)
        return {"seconds": seconds, "memory_gib": memory.increase / 2**30}

    def main(argv=None):
        args = parser(__doc__, "quick", "seeds", "tag", "timeout", seeds=[0, 1, 2]).parse_args(argv)
        n_samples = 1_000 if args.quick else 100_000
        rows = []
        for seed in args.seeds:
            found = run_in_child(__file__, "measure", {"n_samples": n_samples, "seed": seed},
                                 timeout=args.timeout)
            rows.append([seed, found["seconds"], found["memory_gib"]])
        results = Results(results_name("bench_example", args))
        results.add_table("Fit time", ["seed", "fit s", "peak above start GiB"], rows)
        results.save()

    if __name__ == "__main__":
        main()

A comparison with an earlier commit (``--baseline REV``) runs the same child on both::

    with sources(args.baseline) as checkouts:  # {None: this checkout, commit: its folder}
        times = alternate(
            lambda commit: run_in_child(
                __file__, "measure", {...}, source=checkouts[commit]
            )["seconds"],
            checkouts,
            args.repeats,
        )
"""

import argparse
import contextlib
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent
OUTPUT_VARIABLE = "SKRANK_BENCHMARK_OUTPUT"
SOURCE_VARIABLE = "SKRANK_BENCHMARK_SOURCE"

# ------------------------------------------------------------------------------ arguments
COMMON_ARGUMENTS = {
    "quick": dict(action="store_true", help="small sizes, a smoke run (results: <name>_quick)"),
    "seeds": dict(type=int, nargs="+", metavar="SEED", help="random seeds, one run each"),
    "tag": dict(metavar="TAG", help="suffix of the results file name (<name>_<TAG>.json)"),
    "resume": dict(action="store_true", help="skip the runs whose JSON exists"),
    "report_only": dict(action="store_true", help="only gather the runs already made"),
    "timeout": dict(type=float, metavar="SECONDS", help="seconds a child process may run"),
    "repeats": dict(type=int, metavar="N", help="alternated measurements of each row"),
    "device": dict(metavar="DEVICE", help="torch device of the measured code"),
    "baseline": dict(
        metavar="REV",
        help="a git revision whose skrank is measured alternately with this checkout's",
    ),
}
"""The arguments the scripts share: ``--<name>`` (underscores written as dashes)."""


def parser(doc, *common, **defaults):
    """An argument parser for a benchmark script, with the common arguments it takes.

    Parameters
    ----------
    doc : str
        The script's docstring: its first line is the description.
    *common : str
        Names of :data:`COMMON_ARGUMENTS` the script takes, e.g. ``"quick", "seeds"``.
    **defaults
        Defaults of those arguments (None, or False for flags, unless given here), e.g.
        ``seeds=[0, 1, 2]``.

    Returns
    -------
    parser : argparse.ArgumentParser
        The script adds its own arguments to it.
    """
    unknown = set(common).difference(COMMON_ARGUMENTS) | set(defaults).difference(common)
    if unknown:
        raise ValueError(f"No common argument(s) {sorted(unknown)}: {sorted(COMMON_ARGUMENTS)}.")
    made = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    for name in common:
        options = dict(COMMON_ARGUMENTS[name])
        if name in defaults:
            options["default"] = defaults[name]
            options["help"] += " (default: %(default)s)"
        made.add_argument("--" + name.replace("_", "-"), **options)
    return made


def results_name(stem, args, *parts):
    """``<stem>[_<part>...][_quick][_<tag>]``: the results file of a run of ``args``."""
    name = "_".join([stem, *(str(part) for part in parts if part)])
    if getattr(args, "quick", False):
        name += "_quick"
    if getattr(args, "tag", None):
        name += f"_{args.tag}"
    return name


# ------------------------------------------------------------------------------ timing
def synchronize(device):
    """Wait for the work queued on a CUDA ``device``; nothing for other devices."""
    if device is not None and str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def timed(function, *args, device=None, **kwargs):
    """``(function(*args, **kwargs), wall seconds)``, the CUDA ``device`` synchronised around
    it (``device`` is the harness's argument, not passed on to ``function``)."""
    synchronize(device)
    start = time.perf_counter()
    value = function(*args, **kwargs)
    synchronize(device)
    return value, time.perf_counter() - start


def timed_cpu(function, *args, **kwargs):
    """``(function(*args, **kwargs), wall seconds, CPU seconds of this process)``: on a shared
    machine the CPU time of a one-thread run says what its wall time would be alone."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - wall, time.process_time() - cpu


def alternate(measure, candidates, repeats):
    """``{candidate: [measure(candidate) of each round]}`` over ``repeats`` rounds, each round
    measuring every candidate in turn (so that a drift of the machine's load hits them alike)."""
    measured = {candidate: [] for candidate in candidates}
    for _ in range(repeats):
        for candidate in measured:
            measured[candidate].append(measure(candidate))
    return measured


def marginal_rate(short, long):
    """Units per second between two runs, each ``(seconds, units)``: ``(units_long -
    units_short) / (seconds_long - seconds_short)``, set-up costs common to both cancelling."""
    return (long[1] - short[1]) / (long[0] - short[0])


# ------------------------------------------------------------------------------ peak memory
def _status_bytes(field, pid="self"):
    """The ``field:`` line of ``/proc/<pid>/status`` in bytes, or None where unknown."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class PeakMemory:
    """Context manager: the resident memory of this process over a measured region (Linux).

    Open it after the imports and the data loading that every method shares: ``increase`` is
    then what the measured code itself needs, the quantity the tables report.

    Parameters
    ----------
    anonymous : bool, default=False
        False: the resident set (``VmRSS``); its peak is the kernel's high-water mark
        (``VmHWM``), reset to the current size on entry (``/proc/self/clear_refs``), exact.
        True: the anonymous resident memory only (``RssAnon``: heap and private pages, not the
        pages of mapped files, which belong to the page cache), sampled every millisecond by a
        thread (:class:`skrank.utils._memory.PeakAnonymousMemory`): for code that reads
        memory-mapped files.

    Attributes
    ----------
    start, peak, increase : int or None
        Bytes on entry, the largest within the region, and ``peak - start``; None where
        ``/proc`` does not tell them.
    """

    def __init__(self, anonymous=False):
        self.anonymous = anonymous
        self.start = self.peak = None
        self._sampler = None

    def __enter__(self):
        if self.anonymous:
            from skrank.utils._memory import PeakAnonymousMemory

            self._sampler = PeakAnonymousMemory().__enter__()
            self.start = self._sampler.start
            return self
        self.start = _status_bytes("VmRSS")
        if self.start is not None:
            try:
                with open("/proc/self/clear_refs", "w") as clear:
                    clear.write("5")  # VmHWM := VmRSS
            except OSError as error:
                raise OSError(
                    "The peak resident memory cannot be reset (/proc/self/clear_refs): "
                    "PeakMemory would report the peak of the whole process."
                ) from error
        return self

    def __exit__(self, *exc_info):
        if self._sampler is not None:
            self._sampler.__exit__(*exc_info)
            self.peak = self._sampler.peak
        elif self.start is not None:
            self.peak = _status_bytes("VmHWM")

    @property
    def increase(self):
        return None if self.peak is None else self.peak - self.start

    def increase_so_far(self):
        """``increase`` up to now, inside the region (e.g. after one phase of several)."""
        if self._sampler is not None:
            return self._sampler.peak - self.start
        return None if self.start is None else _status_bytes("VmHWM") - self.start


def gib(n_bytes):
    """Bytes as GiB (None stays None)."""
    return None if n_bytes is None else n_bytes / 2**30


# ------------------------------------------------------------------------------ child processes
class ChildFailed(RuntimeError):
    """A child process exited with an error, was stopped at a limit, or wrote no result.

    Attributes
    ----------
    reason : str
        What happened, in a few words (e.g. ``"no result in 1800 s"``), for a table's cell.
    """

    def __init__(self, reason, output=""):
        super().__init__(reason + (f"; its output ends with:\n{output}" if output else ""))
        self.reason = reason


def run_in_child(
    script,
    function,
    arguments=None,
    *,
    python=None,
    launcher=(),
    source=REPOSITORY,
    output=None,
    log=None,
    timeout=None,
    memory_limit_gib=None,
    environment=None,
):
    """Call ``function(**arguments)`` of ``script`` in a fresh Python process; return its result.

    Parameters
    ----------
    script : path-like
        A Python file; the child imports it as a module named after the file (its
        ``__main__`` block does not run) and calls its ``function``.
    function : str
        Name of the function; its return value must be JSON (numpy numbers and arrays are
        converted); a child whose function returns None writes nothing (e.g. the ranks but one
        of a ``torchrun`` launch).
    arguments : dict or None, default=None
        Keyword arguments of the function, as JSON.
    python : path-like or None, default=None
        The Python that runs the child: this one by default, or a peer's environment's.
    launcher : sequence of str, default=()
        Arguments between the Python and the script, e.g. ``("-m", "torch.distributed.run",
        "--standalone", "--nproc_per_node=2")``.
    source : path-like or None, default=REPOSITORY
        The folder whose ``skrank`` the child imports (first on its ``PYTHONPATH``): this
        checkout, or a baseline from :func:`source_at`; the child checks that it imported that
        copy. None: no skrank on the path (a peer's environment).
    output : path-like or None, default=None
        Where the child writes its JSON, kept (e.g. a run that ``--resume`` skips); a
        temporary file when None.
    log : path-like or None, default=None
        File of the child's standard output and error; kept in memory when None (the end of it
        is in the error of a failed child).
    timeout : float or None, default=None
        Seconds after which the child (and every process it started) is killed.
    memory_limit_gib : float or None, default=None
        Resident memory (GiB) of the child process above which it is killed.
    environment : dict or None, default=None
        Environment variables set for the child (e.g. ``{"OMP_NUM_THREADS": "1"}``).

    Returns
    -------
    result : object
        What the function returned, read back from JSON.

    Raises
    ------
    ChildFailed
        The child exited with an error, was killed at a limit, or wrote no result.
    """
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(output) if output is not None else Path(scratch) / "result.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        source = None if source is None else Path(source).resolve()
        paths = [str(source)] if source is not None else []
        paths += [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
        variables = {**os.environ, **(environment or {}), OUTPUT_VARIABLE: str(target)}
        variables["PYTHONPATH"] = os.pathsep.join(paths)
        variables.pop(SOURCE_VARIABLE, None)
        if source is not None:
            variables[SOURCE_VARIABLE] = str(source)
        command = [str(python or sys.executable), *launcher, str(HERE / "_harness.py")]
        command += [str(Path(script).resolve()), function, json.dumps(arguments or {})]
        log_path = Path(log) if log is not None else Path(scratch) / "output.log"
        with open(log_path, "w") as stream:
            child = subprocess.Popen(
                command, stdout=stream, stderr=subprocess.STDOUT, env=variables,
                start_new_session=True,  # its own process group: a kill reaches its children
            )  # fmt: skip
            reason = _wait(child, timeout, memory_limit_gib)
        if reason is None and child.returncode != 0:
            reason = f"exit status {child.returncode}"
        if reason is None and not target.exists():
            reason = "the child wrote no result"
        if reason is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise ChildFailed(reason, tail if log is None else f"(see {log_path})\n{tail}")
        return json.loads(target.read_text())


def _wait(child, timeout, memory_limit_gib):
    """Wait for ``child``; kill its process group at a limit and say which, else None."""
    start = time.monotonic()
    while True:
        try:
            child.wait(timeout=0.2)
            return None
        except subprocess.TimeoutExpired:
            pass
        reason = None
        if timeout is not None and time.monotonic() - start > timeout:
            reason = f"no result in {timeout:g} s"
        elif memory_limit_gib is not None:
            resident = _status_bytes("VmRSS", child.pid)
            if resident is not None and resident > memory_limit_gib * 2**30:
                reason = f"memory above {memory_limit_gib:g} GiB"
        if reason is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return reason


def _child_main(script, function, arguments):
    """The child's side of :func:`run_in_child`."""
    path = Path(script)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # the script's own imports and pickles find it
    spec.loader.exec_module(module)
    value = getattr(module, function)(**json.loads(arguments))
    source = os.environ.get(SOURCE_VARIABLE)
    skrank = sys.modules.get("skrank")
    imported = Path(skrank.__file__) if skrank is not None else None
    if source is not None and imported is not None and Path(source) not in imported.parents:
        raise RuntimeError(f"The child imported {skrank.__file__}, not the skrank of {source}.")
    if value is not None:
        from _results import jsonable

        target = Path(os.environ[OUTPUT_VARIABLE])
        partial = target.with_name(target.name + ".partial")
        partial.write_text(json.dumps(value, indent=1, default=jsonable) + "\n")
        partial.replace(target)  # a reader never sees half a file


# ------------------------------------------------------------------------------ baselines
@contextlib.contextmanager
def source_at(revision):
    """The ``skrank`` package of git ``revision`` of this repository, in a temporary folder.

    Yields the folder, to pass as ``source`` to :func:`run_in_child` (``git archive``: nothing
    is checked out or installed; the folder is removed on exit).
    """
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY), "archive", revision, "skrank"],
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        yield Path(folder)


@contextlib.contextmanager
def sources(baseline=None):
    """``{None: this checkout, commit: folder}``: the sources to measure, as ``source`` of
    :func:`run_in_child`: this checkout, and the skrank of the ``baseline`` revision (keyed by
    its abbreviated commit) when one is given."""
    if baseline is None:
        yield {None: REPOSITORY}
        return
    with source_at(baseline) as folder:
        yield {None: REPOSITORY, short_commit(baseline): folder}


def short_commit(revision="HEAD"):
    """The abbreviated commit of ``revision`` in this repository."""
    return subprocess.run(
        ["git", "-C", str(REPOSITORY), "rev-parse", "--short", revision],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


# ------------------------------------------------------------------------------ environments
def environment_python(variable, folder):
    """The Python of a peer's own environment: ``$variable``, else ``benchmarks/<folder>``'s."""
    return Path(os.environ.get(variable, HERE / folder / "bin" / "python"))


PECOS_PYTHON = environment_python("SKRANK_PECOS_PYTHON", ".venv-pecos")
METRIC_LEARN_PYTHON = environment_python("SKRANK_METRIC_LEARN_PYTHON", ".venv-ml")


def versions_in(python, packages):
    """``{package: version}`` in the environment of ``python``, or None if it does not run."""
    code = (
        "import importlib.metadata as m, json, sys; "
        "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    )
    try:
        found = subprocess.run(
            [str(python), "-c", code, *packages], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return json.loads(found.stdout)


if __name__ == "__main__":
    _child_main(*sys.argv[1:4])
