"""The benchmarks' harness, standard library only (a child running in a peer's own environment
imports it too): declared benchmarks (:class:`Benchmark`, :class:`Method`, :func:`run_benchmark`;
see benchmarks/README.md, section "How a benchmark is written"; ``bench_soprc_disjoint.py`` is a
full one), the arguments the scripts share (:func:`parser`, :func:`results_name`), timing, child
processes (:func:`run_in_child`), peak memory (:class:`PeakMemory`), and the skrank of another
revision (``--baseline REV``: :func:`sources`).

The peers' environments (libpecos pins numpy < 2 and scipy < 1.14; metric-learn 0.7 does not
run with scikit-learn >= 1.8)::

    python3 -m venv benchmarks/.venv-pecos           # or set SKRANK_PECOS_PYTHON
    benchmarks/.venv-pecos/bin/pip install "numpy<2" "scipy<1.14" scikit-learn
    benchmarks/.venv-pecos/bin/pip install libpecos --no-deps
    python3 -m venv benchmarks/.venv-ml              # or set SKRANK_METRIC_LEARN_PYTHON
    benchmarks/.venv-ml/bin/pip install "scikit-learn<1.6" metric-learn numpy scipy
"""

import argparse
import contextlib
import dataclasses
import importlib.util
import inspect
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
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
    """An argument parser described by the first line of ``doc``, with the ``common``
    arguments (names of :data:`COMMON_ARGUMENTS`) and their ``defaults`` (None, or False for
    flags, unless given); the script adds its own arguments to it."""
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
    """Context manager: the resident memory of this process over a measured region (Linux):
    ``start``, ``peak`` and ``increase = peak - start`` in bytes (None where ``/proc`` does not
    tell them). Open it after the imports and the data loading every method shares.

    ``anonymous=False``: the resident set, its peak the kernel's high-water mark (``VmHWM``,
    reset on entry), exact. ``anonymous=True``: the anonymous resident memory only
    (``RssAnon``, not the pages of mapped files), sampled every millisecond by a thread: for
    code that reads memory-mapped files.
    """

    def __init__(self, anonymous=False):
        self.anonymous = anonymous
        self.start = self.peak = None
        self._done = None

    def __enter__(self):
        if self.anonymous:
            self.start = self.peak = _status_bytes("RssAnon")
            if self.start is None:
                raise OSError("RssAnon is not available: /proc/self/status has no such line.")
            self._done = threading.Event()
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
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

    def _sample(self):
        while not self._done.is_set():
            self.peak = max(self.peak, _status_bytes("RssAnon"))
            time.sleep(0.001)

    def __exit__(self, *exc_info):
        if self._done is not None:
            self._done.set()
            self._sampler.join()
            self.peak = max(self.peak, _status_bytes("RssAnon"))
        elif self.start is not None:
            self.peak = _status_bytes("VmHWM")

    @property
    def increase(self):
        return None if self.peak is None else self.peak - self.start

    def increase_so_far(self):
        """``increase`` up to now, inside the region (e.g. after one phase of several)."""
        if self._done is not None:
            return self.peak - self.start
        return None if self.start is None else _status_bytes("VmHWM") - self.start


def gib(n_bytes):
    """Bytes as GiB (None stays None)."""
    return None if n_bytes is None else n_bytes / 2**30


# ------------------------------------------------------------------------------ child processes
class ChildFailed(RuntimeError):
    """A child process exited with an error, was stopped at a limit, or wrote no result;
    ``reason``: what happened in a few words (e.g. ``"no result in 1800 s"``), for a cell."""

    def __init__(self, reason, output=""):
        super().__init__(reason + (f"; its output ends with:\n{output}" if output else ""))
        self.reason = reason


def run_in_child(script, function, arguments=None, *, python=None, launcher=(), source=REPOSITORY,
                 output=None, log=None, timeout=None, memory_limit_gib=None,
                 environment=None):  # fmt: skip
    """Call ``function(**arguments)`` of ``script`` in a fresh Python process; return its
    result, read back from JSON (a function returning None writes nothing, e.g. the ranks but
    one of a ``torchrun`` launch). The child imports ``script`` as a module.

    ``python``: a peer's environment's, else this one; ``launcher``: arguments between it and
    the script (e.g. ``("-m", "torch.distributed.run", "--nproc_per_node=2")``); ``source``:
    the folder whose ``skrank`` the child imports and checks it imported (None: none, a peer's
    environment); ``output``: where its JSON is kept (a temporary file when None); ``log``: its
    output's file (in memory when None); ``timeout`` (s) and ``memory_limit_gib`` (resident):
    limits at which it and its processes are killed; ``environment``: variables set for it.
    Raises :class:`ChildFailed` where the child fails, is killed, or writes no result.
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


def _import_script(script):
    """The module of the Python file ``script``, imported under its file's stem."""
    path = Path(script)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # the script's own imports and pickles find it
    spec.loader.exec_module(module)
    return module


def _child_main(script, function, arguments):
    """The child's side of :func:`run_in_child`."""
    value = getattr(_import_script(script), function)(**json.loads(arguments))
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


# ------------------------------------------------------------------------------ benchmarks
@dataclasses.dataclass(frozen=True)
class Method:
    """One method of a :class:`Benchmark`, a row of its table: ``fit(data, seed, **params)``,
    a module-level function of the script, is the measured call; ``predict(fitted, data)``
    (the benchmark's when None) returns what ``score`` reads, as JSON, timed apart; ``python``:
    a peer's own environment (:func:`environment_python`), else this one."""

    name: str
    fit: object
    params: dict = dataclasses.field(default_factory=dict)
    predict: object = None
    python: object = None


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A benchmark: ``name`` (the results file's stem), its data (``data(**data_params)``, with
    ``seed=`` where ``split_by_seed``; a function the methods' script defines or imports,
    loaded in each child before the measured region and in the parent for ``score``), its
    ``methods`` and its scores: ``score(data, predicted)`` returns ``{name: number}`` in the
    parent (None: ``predict`` returns the scores, in the child)."""

    name: str
    data: object
    methods: tuple
    predict: object
    score: object
    data_params: dict = dataclasses.field(default_factory=dict)
    split_by_seed: bool = False

    def load(self, seed=None):
        """The data of ``seed`` (of every seed unless ``split_by_seed``)."""
        params = {**self.data_params, **({"seed": seed} if self.split_by_seed else {})}
        return self.data(**params)


def run_benchmark(benchmark, seeds, *, methods=None, timeout=None, memory_limit_gib=None,
                  anonymous=False, environment=None, runs=None, report=None):  # fmt: skip
    """Every method of ``benchmark`` (or the ``methods`` named) on every seed, each fit in a
    child process of its own with the limits and ``environment`` of :func:`run_in_child`.

    ``runs``: a folder keeping each run's JSON (``<method>_<seed>.json``), read back, not run
    again, where it exists (``--resume``); ``report(record)`` is called after every run.
    Returns one record per method and seed: ``method``, ``seed``, the scores, ``fit_seconds``,
    ``fit_cpu_seconds``, ``predict_seconds``, ``peak_gib`` (the fit's peak above its start);
    or ``method``, ``seed`` and ``failed`` (the reason, e.g. ``"no result in 600 s"``).
    """
    chosen = [m for m in benchmark.methods if methods is None or m.name in methods]
    unknown = set(methods or ()).difference(m.name for m in benchmark.methods)
    if unknown:
        names = [m.name for m in benchmark.methods]
        raise ValueError(f"No method(s) {sorted(unknown)} in {benchmark.name}: {names}.")
    records, data = [], {}
    for method in chosen:
        for seed in seeds:
            key = seed if benchmark.split_by_seed else None
            own_data = {"seed": seed} if benchmark.split_by_seed else {}
            output = None
            if runs is not None:
                output = Path(runs) / f"{_file_name(method.name)}_{seed}.json"
            arguments = {
                "script": inspect.getfile(method.fit),
                "data": benchmark.data.__name__,
                "data_params": {**benchmark.data_params, **own_data},
                "fit": method.fit.__name__,
                "params": method.params,
                "predict": (method.predict or benchmark.predict).__name__,
                "seed": seed,
                "anonymous": anonymous,
            }
            record = {"method": method.name, "seed": seed}
            try:
                if output is not None and output.exists():
                    measured = json.loads(output.read_text())
                else:
                    measured = run_in_child(
                        __file__, "measure", arguments, python=method.python,
                        source=None if method.python else REPOSITORY, output=output,
                        timeout=timeout, memory_limit_gib=memory_limit_gib,
                        environment=environment,
                    )  # fmt: skip
            except ChildFailed as failure:
                record["failed"] = failure.reason
            else:
                predicted = measured.pop("predicted")
                if benchmark.score is not None:
                    if key not in data:
                        data[key] = benchmark.load(key)
                    predicted = benchmark.score(data[key], predicted)
                record.update(predicted, **measured)
            records.append(record)
            if report is not None:
                report(record)
    return records


def _file_name(text):
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text)


def measure(script, data, data_params, fit, params, predict, seed, anonymous=False):
    """The child's side of :func:`run_benchmark`: load the data, then fit (measured: seconds
    and peak memory), then predict (timed)."""
    module = sys.modules.get(Path(script).stem) or _import_script(script)
    loaded = getattr(module, data)(**data_params)
    with PeakMemory(anonymous=anonymous) as memory:
        fitted, wall, cpu = timed_cpu(getattr(module, fit), loaded, seed, **params)
    predicted, predict_seconds = timed(getattr(module, predict), fitted, loaded)
    return {
        "predicted": predicted,
        "fit_seconds": wall,
        "fit_cpu_seconds": cpu,
        "predict_seconds": predict_seconds,
        "peak_gib": gib(memory.increase),
    }


# ------------------------------------------------------------------------------ baselines
@contextlib.contextmanager
def sources(baseline=None):
    """``{None: this checkout, commit: folder}``: the sources to measure, as ``source`` of
    :func:`run_in_child`: this checkout, and when given the ``skrank`` package of the
    ``baseline`` revision (``git archive``) in a temporary folder, keyed by its abbreviated
    commit."""
    if baseline is None:
        yield {None: REPOSITORY}
        return
    archive = _git("archive", baseline, "skrank", text=False)
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        yield {None: REPOSITORY, short_commit(baseline): Path(folder)}


def _git(*arguments, text=True):
    command = ["git", "-C", str(REPOSITORY), *arguments]
    return subprocess.run(command, capture_output=True, text=text, check=True).stdout


def short_commit(revision="HEAD"):
    """The abbreviated commit of ``revision`` in this repository."""
    return _git("rev-parse", "--short", revision).strip()


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
