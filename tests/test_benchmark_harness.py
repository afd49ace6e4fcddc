"""benchmarks/_harness.py: the common arguments, a child process that writes its JSON for the
parent, its failures, its limits and the skrank it imports, a declared benchmark run method by
method, the summary of its runs, peak memory, and baselines."""

import importlib.util
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="the harness measures memory through /proc"
)


def _load_harness():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # the harness imports _results
    spec = importlib.util.spec_from_file_location("_harness", ROOT / "benchmarks" / "_harness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harness = _load_harness()
results = importlib.import_module("_results")  # on the path the harness's loading set

SCRIPT = """
import os, sys, time
import numpy as np

def measure(n, scale=1.0):
    return {"values": np.arange(n) * scale, "total": np.float32(n * scale)}

def nothing():
    return None

def fails():
    raise ValueError("a bad argument, named in the error")

def sleeps(seconds):
    time.sleep(seconds)
    return {}

def grows(mib):
    block = bytearray(mib * 2**20)
    time.sleep(30)
    return {"size": len(block)}

def imports_skrank():
    import skrank
    return {"file": skrank.__file__}
"""


BENCHMARK = """
import json
from pathlib import Path

from _harness import Benchmark, Method

def data(size, seed=0):
    return {"x": list(range(size)), "shift": seed}

def fit_sum(data, seed, scale=1.0, calls=None):
    if calls is not None:  # counts the fits that ran
        Path(calls).open("a").write("fit\\n")
    return sum(data["x"]) * scale + data["shift"] + seed

def fit_fails(data, seed):
    raise ValueError("a method that fails")

def predict_total(fitted, data):
    return {"total": fitted, "size": len(data["x"])}

def score(data, predicted):
    return {"total": predicted["total"], "size": predicted["size"]}

def benchmark(calls=None, split_by_seed=False):
    return Benchmark(
        "bench_toy", data, (
            Method("sum", fit_sum, {"calls": calls}),
            Method("sum x2", fit_sum, {"scale": 2.0}),
            Method("fails", fit_fails),
        ), predict_total, score, data_params={"size": 4}, split_by_seed=split_by_seed,
    )
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "bench_toy.py"
    path.write_text(textwrap.dedent(SCRIPT))
    return path


def test_the_common_arguments_are_spelt_and_named_alike():
    arguments = harness.parser("A toy benchmark.\n\nMore.", "quick", "seeds", "tag", seeds=[0, 1])
    args = arguments.parse_args([])
    assert (args.quick, args.seeds, args.tag) == (False, [0, 1], None)
    args = arguments.parse_args(["--quick", "--seeds", "3", "4", "--tag", "small"])
    assert (
        harness.results_name("bench_toy", args, "part", None, 2) == "bench_toy_part_2_quick_small"
    )
    assert arguments.description == "A toy benchmark."
    with pytest.raises(ValueError, match="No common argument"):
        harness.parser("Doc.", "quik")
    with pytest.raises(ValueError, match="No common argument"):
        harness.parser("Doc.", "quick", seeds=[0])  # a default of an argument not taken


def test_a_child_returns_its_value_through_json(script, tmp_path):
    found = harness.run_in_child(script, "measure", {"n": 3, "scale": 0.5})
    assert found == {"values": [0.0, 0.5, 1.0], "total": 1.5}
    kept = tmp_path / "runs" / "run.json"
    assert harness.run_in_child(script, "measure", {"n": 1}, output=kept) == {
        "values": [0.0],
        "total": 1.0,
    }
    assert kept.exists() and not kept.with_name("run.json.partial").exists()


def test_a_failed_child_says_why(script, tmp_path):
    with pytest.raises(harness.ChildFailed, match="a bad argument, named in the error") as error:
        harness.run_in_child(script, "fails")
    assert error.value.reason == "exit status 1"
    with pytest.raises(harness.ChildFailed, match="wrote no result"):
        harness.run_in_child(script, "nothing")
    log = tmp_path / "child.log"
    with pytest.raises(harness.ChildFailed, match="no result in 0.5 s") as error:
        harness.run_in_child(script, "sleeps", {"seconds": 30}, timeout=0.5, log=log)
    assert error.value.reason == "no result in 0.5 s" and log.exists()
    with pytest.raises(harness.ChildFailed, match="memory above 0.05 GiB"):
        harness.run_in_child(script, "grows", {"mib": 200}, memory_limit_gib=0.05)


def test_a_child_imports_the_skrank_of_its_source(script, tmp_path, monkeypatch):
    for name in ("baseline", "other"):
        (tmp_path / name / "skrank").mkdir(parents=True)
        (tmp_path / name / "skrank" / "__init__.py").write_text("")
    found = harness.run_in_child(script, "imports_skrank", source=tmp_path / "baseline")
    assert Path(found["file"]).resolve().is_relative_to((tmp_path / "baseline").resolve())
    # A source without skrank: the child would import another copy, which it refuses.
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "other"))
    with pytest.raises(harness.ChildFailed, match="not the skrank of"):
        harness.run_in_child(script, "imports_skrank", source=tmp_path / "empty")


def test_a_benchmark_runs_each_method_and_seed_in_a_child(tmp_path):
    path = tmp_path / "bench_declared.py"
    path.write_text(textwrap.dedent(BENCHMARK))
    sys.modules.pop("bench_declared", None)
    declared = harness._import_script(path)
    calls, runs, reported = tmp_path / "calls.txt", tmp_path / "runs", []
    records = harness.run_benchmark(
        declared.benchmark(str(calls)), [0, 1], runs=runs, report=reported.append
    )
    assert [(r["method"], r["seed"]) for r in records] == [
        ("sum", 0), ("sum", 1), ("sum x2", 0), ("sum x2", 1), ("fails", 0), ("fails", 1)
    ]  # fmt: skip
    assert reported == records
    assert [r["total"] for r in records[:4]] == [6.0, 7.0, 12.0, 13.0]
    assert all(r["size"] == 4 and r["fit_seconds"] >= 0 and r["peak_gib"] >= 0 for r in records[:4])
    assert set(records[0]) == {
        "method", "seed", "total", "size", "fit_seconds", "fit_cpu_seconds", "predict_seconds",
        "peak_gib",
    }  # fmt: skip
    assert records[4] == {"method": "fails", "seed": 0, "failed": "exit status 1"}
    # The runs kept are read back: the fits of "sum" do not run again.
    again = harness.run_benchmark(
        declared.benchmark(str(calls)), [0, 1], methods=["sum"], runs=runs
    )
    assert again == records[:2] and calls.read_text().count("fit") == 2
    # A split per seed: the data is drawn with the seed.
    by_seed = harness.run_benchmark(declared.benchmark(split_by_seed=True), [2], methods=["sum"])
    assert by_seed[0]["total"] == 6.0 + 2 + 2
    with pytest.raises(ValueError, match="No method"):
        harness.run_benchmark(declared.benchmark(), [0], methods=["summ"])
    rows = results.summary_rows(records, ["total"], means=("fit_seconds",))
    assert [row[0] for row in rows] == ["sum", "sum x2", "fails"]
    assert rows[0][1] == "6.5000 ± 0.5000" and rows[0][-1] == "2 of 2"
    assert rows[2][1:] == ["n/a", None, "0 of 2 (exit status 1)"]


def test_the_summary_is_mean_and_standard_deviation():
    assert results.summary([1.0, 2.0, 3.0], digits=2) == "2.00 ± 0.82"
    assert results.summary(np.array([0.5, np.nan, None, 0.7])) == "0.6000 ± 0.1000"
    assert results.summary([]) == "n/a"


def test_peak_memory_counts_what_the_region_allocates():
    held = np.ones(2**24)  # 128 MiB held before the region: not counted
    for anonymous in (False, True):
        with harness.PeakMemory(anonymous=anonymous) as memory:
            block = np.ones(2**23)  # 64 MiB, touched
            # The anonymous meter samples every millisecond: a block freed before a sample
            # is missed by design, so the block lives until a sample has seen it (or 5 s).
            deadline = time.monotonic() + 5
            while memory.increase_so_far() < 60 * 2**20 and time.monotonic() < deadline:
                time.sleep(0.001)
            del block
        assert 60 * 2**20 < memory.increase < 100 * 2**20, (anonymous, memory.increase)
        assert memory.peak - memory.start == memory.increase
    del held


def test_timing_helpers():
    order = []
    measured = harness.alternate(lambda name: order.append(name) or len(order), "ab", 2)
    assert order == ["a", "b", "a", "b"] and measured == {"a": [1, 3], "b": [2, 4]}
    assert harness.marginal_rate((1.0, 10), (3.0, 50)) == 20.0
    value, seconds = harness.timed(sum, [1, 2])
    assert value == 3 and seconds >= 0


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_baseline_is_the_skrank_of_a_revision():
    try:
        commit = harness.short_commit("HEAD")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    with harness.sources("HEAD") as checkouts:
        assert set(checkouts) == {None, commit} and checkouts[None] == harness.REPOSITORY
        folder = checkouts[commit]
        assert (folder / "skrank" / "__init__.py").exists()
    assert not folder.exists()
