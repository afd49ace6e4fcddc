"""Data-parallel training: items per second of the torch estimators on 1 and 2 processes.

Each setting is launched with ``torchrun`` exactly as a user would (``python -m
torch.distributed.run --nproc_per_node N``), the gloo backend on the CPU (NCCL on GPUs, with
``--device cuda``): every process trains on its own part of each batch (``batch_size`` items),
so N processes train on N times more items per step. Throughput is marginal: the items of a
6-epoch fit minus those of a 2-epoch fit, over the time difference (after a warm-up fit), so
that start-up does not count. Scaling efficiency = throughput with N processes / (N x
throughput with 1); each process runs one torch thread.

Data: 20,000 synthetic items of 64 features in 200 classes, MLP 64-512-64 (SOPRCEmbedder,
batches of 256 items per process: 64 classes x 4) and the same items with their class as the
label (SNMClassifier, ``n_negatives=64``, batches of 1,024 per process).

Dask (``--dask``, written to ``results/bench_distributed_dask.json``): fit time and traced peak
memory (tracemalloc: every NumPy allocation) of ``PointwiseROCSimilarity`` and ``MMC`` on an
input 4x larger than a memory cap, a memory-mapped ``.npy`` file read by dask block by block
(threads scheduler, 2 workers; ``working_memory`` = cap / 4 bounds the pair chunks), against
the in-memory fit of the same data (loaded into memory first: its peak counts the loaded
copy). Times are taken without tracing, peaks in a second, traced fit; the two methods
alternate.

Usage::

    python benchmarks/bench_distributed.py [--processes 1 2] [--device cpu] [--baseline DIR]
        [--repeats N] [--name NAME]
    python benchmarks/bench_distributed.py --dask [--cap-mib 64]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _results import REPOSITORY, Results

WORKER = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np, torch, torch.distributed as dist
torch.set_num_threads(1)
from skrank import SNMClassifier, SOPRCEmbedder
name, device, output = sys.argv[1], sys.argv[2], sys.argv[3]
rng = np.random.default_rng(0)
y = rng.integers(200, size=20_000)
X = (rng.normal(size=(200, 64))[y] + rng.normal(size=(20_000, 64))).astype(np.float32)
def fit(epochs):
    if name == "SOPRCEmbedder":
        model = SOPRCEmbedder(hidden_layer_sizes=(512,), n_components=64, batch_size=256,
                              max_epochs=epochs, device=device, random_state=0)
    else:
        model = SNMClassifier(n_negatives=64, embedding_dim=64, hidden_layer_sizes=(512,),
                              batch_size=1024, max_epochs=epochs, device=device, random_state=0)
    if dist.is_initialized():
        dist.barrier()
    start = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - start
    batches = len(model.sampler_)
    items = epochs * batches * model.batch_size * model.world_size_
    return seconds, items, model.world_size_
fit(1)  # warm-up: imports, allocator, first collectives
one, three = fit(2), fit(6)
if not dist.is_initialized() or dist.get_rank() == 0:
    rate = (three[1] - one[1]) / (three[0] - one[0])
    json.dump({"items_per_second": rate, "world_size": three[2]}, open(output, "w"))
"""


def throughput(name, processes, device, repository=REPOSITORY):
    with tempfile.TemporaryDirectory() as directory:
        worker = Path(directory) / "worker.py"
        worker.write_text(WORKER)
        output = Path(directory) / "result.json"
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={processes}", str(worker), name, device, str(output),
        ]  # fmt: skip
        environment = {**os.environ, "PYTHONPATH": str(repository), "OMP_NUM_THREADS": "1"}
        finished = subprocess.run(command, capture_output=True, text=True, env=environment)
        if finished.returncode:
            raise RuntimeError(
                f"{name} on {processes} process(es) failed:\n{finished.stderr[-4000:]}"
            )
        return json.loads(output.read_text())


def _dask_fits(cap_mib):
    import time
    import tracemalloc

    import dask
    import dask.array as da
    import numpy as np
    from sklearn import clone, config_context

    from skrank import MMC, PointwiseROCSimilarity

    cap = cap_mib * 2**20
    d = 64
    n = 4 * cap // (8 * d)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "X.npy"
        rng = np.random.RandomState(0)
        y = rng.randint(10, size=n)
        centres = rng.normal(size=(10, d))
        X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
        for start in range(0, n, 8192):
            rows = slice(start, start + 8192)
            X[rows] = centres[y[rows]] + rng.normal(size=(X[rows].shape[0], d))
        X.flush()
        X = np.load(path, mmap_mode="r")
        chunked = da.from_array(X, chunks=(n // 64, d))
        models = {
            "PointwiseROCSimilarity(alpha=0.49)": PointwiseROCSimilarity(alpha=0.49),
            "MMC(negatives='pairs', n_samples=2000)": MMC(negatives="pairs", n_samples=2000),
        }

        def dask_fit(model):
            return clone(model).fit(chunked, y)

        def memory_fit(model):
            return clone(model).fit(np.array(X), y)

        rows = []
        small = np.array(X[:600])
        for name, model in models.items():
            model.set_params(random_state=0)
            clone(model).fit(da.from_array(small, chunks=100), y[:600])  # imports, first calls
            measured = {}
            for method, fit in [("dask", dask_fit), ("in memory", memory_fit)] * 2:
                with (
                    dask.config.set(scheduler="threads", num_workers=2),
                    config_context(working_memory=cap_mib / 4),
                ):
                    start = time.perf_counter()
                    fitted = fit(model)
                    seconds = time.perf_counter() - start
                    if method in measured:  # second round: the traced peak
                        tracemalloc.start()
                        fit(model)
                        peak = tracemalloc.get_traced_memory()[1]
                        tracemalloc.stop()
                        measured[method] = (min(measured[method][0], seconds), peak, fitted)
                    else:
                        measured[method] = (seconds, None, fitted)
            dask_model, memory_model = measured["dask"][2], measured["in memory"][2]
            if hasattr(dask_model, "A_"):
                difference = np.abs(dask_model.A_ - memory_model.A_).max()
            else:
                difference = np.abs(
                    dask_model.get_mahalanobis_matrix() - memory_model.get_mahalanobis_matrix()
                ).max()
            for method in ["dask", "in memory"]:
                seconds, peak, _ = measured[method]
                rows.append([name, method, X.nbytes / 2**20, cap_mib, seconds, peak / 2**20,
                             peak / cap, difference])  # fmt: skip
                print(rows[-1])
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dask", action="store_true", help="the dask rows only")
    parser.add_argument("--cap-mib", type=int, default=64)
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="a checkout of another commit (e.g. a git worktree), measured alternately with "
        "this one; its rows are named after its commit",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="measurements of each row, the median kept"
    )
    parser.add_argument("--name", help="results file name (default: from --dask, --baseline)")
    args = parser.parse_args(argv)
    if args.dask:
        results = Results("bench_distributed_dask", packages=("dask",))
        results.add_table(
            "Fits on an input 4x larger than the memory cap: dask by row blocks vs in memory",
            ["estimator", "fit", "input (MiB)", "cap (MiB)", "fit time (s)",
             "traced peak (MiB)", "peak / cap", "max abs difference dask vs in memory"],
            _dask_fits(args.cap_mib),
            notes="Input: a memory-mapped .npy file (64 features, 10 classes), 64 row blocks, "
            "threads scheduler with 2 workers, working_memory = cap / 4. The in-memory fit "
            "loads the file first (its peak holds that copy). Fit time: the faster of two "
            "untraced fits; peak: a third, traced fit (tracemalloc).",
        )  # fmt: skip
        results.save()
        return
    checkouts = {"": REPOSITORY}
    if args.baseline:
        commit = subprocess.run(
            ["git", "-C", args.baseline, "rev-parse", "--short", "HEAD"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        checkouts[f" @ {commit}"] = Path(args.baseline).resolve()
    results = Results(args.name or "bench_distributed" + ("_baseline" if args.baseline else ""))
    rows = []
    for name in ["SOPRCEmbedder", "SNMClassifier"]:
        single = {}
        for processes in args.processes:
            rates = {suffix: [] for suffix in checkouts}
            for _ in range(args.repeats):
                for suffix, repository in checkouts.items():  # alternated
                    measured = throughput(name, processes, args.device, repository)
                    assert measured["world_size"] == processes
                    rates[suffix].append(measured["items_per_second"])
            for suffix, measured_rates in rates.items():
                rate = float(np.median(measured_rates))
                if processes == 1:
                    single[suffix] = rate
                efficiency = rate / (processes * single[suffix]) if suffix in single else None
                rows.append([name + suffix, processes, args.device, rate, efficiency])
                print(
                    f"{name}{suffix}: {processes} process(es): {rate:.0f} items/s (of "
                    f"{[round(r) for r in measured_rates]}), efficiency {efficiency}"
                )
    rows.sort(key=lambda row: row[0])
    results.add_table(
        "Training throughput under torchrun (marginal items per second)",
        ["estimator", "processes", "device", "items / s", "scaling efficiency"],
        rows,
        notes="Efficiency = throughput with N processes / (N x throughput with 1 process). "
        f"The 2-core machine runs 2 processes of one thread each. Median of {args.repeats} "
        "measurement(s) per row."
        + (
            " Rows '@ commit': the baseline checkout, measured alternately."
            if args.baseline
            else ""
        ),
    )
    results.save()


if __name__ == "__main__":
    main()
