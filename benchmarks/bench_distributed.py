"""Data-parallel training: items per second of the torch estimators on 1 and 2 processes.

Each setting is launched with ``torchrun`` as a user would, gloo on the CPU (NCCL with
``--device cuda``), one torch thread a process, each training on its part of each batch.
Marginal throughput (the items of a 6-epoch fit minus a 2-epoch fit's, over the time difference,
after a warm-up fit); scaling efficiency = throughput with N processes / (N x throughput with
1). ``--baseline REV``: an earlier revision's skrank, measured alternately, rows named after its
commit. Data: 20,000 synthetic items of 64 features in 200 classes (2,000 with ``--quick``):
SOPRCEmbedder (MLP 64-512-64, 256 items a process), SNMClassifier (``n_negatives=64``, 1,024).

``--dask`` (``results/bench_distributed_dask.json``): fit time and peak anonymous memory of
``PointwiseROCSimilarity`` and ``MMC`` on a memory-mapped ``.npy`` input 4x a memory cap, read
by dask block by block (threads, 2 workers; ``working_memory`` = cap / 4), against the
in-memory fit (its peak counts the loaded copy); a child process a fit after a warm-up, the two
alternating, twice each.

Usage::

    python benchmarks/bench_distributed.py [--processes 1 2] [--device cpu] [--baseline REV]
        [--repeats N] [--tag TAG]
    python benchmarks/bench_distributed.py --dask [--cap-mib 64]
    python benchmarks/bench_distributed.py --quick [--dask]
"""

import tempfile
import time
from pathlib import Path

import numpy as np
from _harness import (
    PeakMemory,
    alternate,
    marginal_rate,
    parser,
    results_name,
    run_in_child,
    sources,
)
from _results import Results

# The torch estimators measured (their parameters but the epochs, device and seed).
ESTIMATORS = {
    "SOPRCEmbedder": dict(hidden_layer_sizes=(512,), n_components=64, batch_size=256),
    "SNMClassifier": dict(
        n_negatives=64, embedding_dim=64, hidden_layer_sizes=(512,), batch_size=1024
    ),
}
DASK_MODELS = {
    "PointwiseROCSimilarity(alpha=0.49)": ("PointwiseROCSimilarity", dict(alpha=0.49)),
    "MMC(negatives='pairs', n_samples=2000)": ("MMC", dict(negatives="pairs", n_samples=2000)),
}


def throughput(estimator, device, n_items):
    """Marginal items per second of one setting, in each process of a ``torchrun`` launch;
    the record of rank 0 (None on the other ranks)."""
    import warnings

    import torch
    import torch.distributed as dist

    import skrank

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    y = rng.integers(200, size=n_items)
    X = (rng.normal(size=(200, 64))[y] + rng.normal(size=(n_items, 64))).astype(np.float32)

    def fit(epochs):
        params = dict(ESTIMATORS[estimator], max_epochs=epochs, device=device, random_state=0)
        model = getattr(skrank, estimator)(**params)
        if dist.is_initialized():
            dist.barrier()
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
        items = epochs * len(model.sampler_) * model.batch_size * model.world_size_
        return seconds, items, model.world_size_

    fit(1)  # warm-up: imports, allocator, first collectives
    short, long = fit(2), fit(6)
    if dist.is_initialized() and dist.get_rank() != 0:
        return None
    return {"items_per_second": marginal_rate(short[:2], long[:2]), "world_size": long[2]}


def measure_throughput(estimator, processes, device, n_items, source):
    launcher = ("-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}")
    arguments = {"estimator": estimator, "device": device, "n_items": n_items}
    environment = {"OMP_NUM_THREADS": "1"}
    found = run_in_child(__file__, "throughput", arguments, launcher=launcher, source=source,
                         environment=environment)  # fmt: skip
    assert found["world_size"] == processes
    return found["items_per_second"]


def write_dask_input(folder, cap_mib):
    """A memory-mapped ``X.npy`` of 4 x the cap (64 features, 10 classes) and its ``y.npy``."""
    d = 64
    n = 4 * cap_mib * 2**20 // (8 * d)
    rng = np.random.RandomState(0)
    y = rng.randint(10, size=n)
    centres = rng.normal(size=(10, d))
    X = np.lib.format.open_memmap(folder / "X.npy", mode="w+", dtype=np.float64, shape=(n, d))
    for start in range(0, n, 8192):
        rows = slice(start, start + 8192)
        X[rows] = centres[y[rows]] + rng.normal(size=(X[rows].shape[0], d))
    X.flush()
    np.save(folder / "y.npy", y)
    return X.nbytes


def dask_fit(folder, model, method, cap_mib):
    """One fit from the memory-mapped file (``method``: "dask" or "in memory"), in a child
    process: its seconds, peak anonymous memory above its start, and learned matrix."""
    import dask
    import dask.array as da
    from sklearn import clone, config_context

    import skrank

    X = np.load(Path(folder) / "X.npy", mmap_mode="r")
    y = np.load(Path(folder) / "y.npy")
    class_name, params = DASK_MODELS[model]
    estimator = getattr(skrank, class_name)(**params, random_state=0)
    small = np.array(X[:600])
    clone(estimator).fit(da.from_array(small, chunks=100), y[:600])  # imports, first calls
    with (
        dask.config.set(scheduler="threads", num_workers=2),
        config_context(working_memory=cap_mib / 4),
        PeakMemory(anonymous=True) as memory,
    ):
        start = time.perf_counter()
        data = da.from_array(X, chunks=(X.shape[0] // 64, X.shape[1]))
        fitted = clone(estimator).fit(data if method == "dask" else np.array(X), y)
        seconds = time.perf_counter() - start
    matrix = fitted.A_ if hasattr(fitted, "A_") else fitted.get_mahalanobis_matrix()
    return {"seconds": seconds, "peak_bytes": memory.increase, "matrix": matrix}


def dask_rows(cap_mib):
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        n_bytes = write_dask_input(Path(folder), cap_mib)
        for model in DASK_MODELS:
            arguments = {"folder": folder, "model": model, "cap_mib": cap_mib}
            measured = alternate(
                lambda method, arguments=arguments: run_in_child(
                    __file__, "dask_fit", {**arguments, "method": method}
                ),
                ["dask", "in memory"],
                2,
            )
            matrices = [np.array(fits[0]["matrix"]) for fits in measured.values()]
            difference = np.abs(matrices[0] - matrices[1]).max()
            for method, fits in measured.items():
                seconds = min(fit["seconds"] for fit in fits)
                peak = max(fit["peak_bytes"] for fit in fits) / 2**20
                rows.append([model, method, n_bytes / 2**20, cap_mib, seconds, peak,
                             peak / cap_mib, difference])  # fmt: skip
                print(rows[-1], flush=True)
    return rows


def main(argv=None):
    arguments = parser(
        __doc__, "quick", "tag", "device", "repeats", "baseline", device="cpu", repeats=1
    )
    arguments.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    arguments.add_argument("--dask", action="store_true", help="the dask rows only")
    arguments.add_argument("--cap-mib", type=int, default=64)
    args = arguments.parse_args(argv)
    if args.dask:
        cap_mib = 8 if args.quick else args.cap_mib
        results = Results(results_name("bench_distributed", args, "dask"), packages=("dask",))
        results.add_table(
            "Fits on an input 4x larger than the memory cap: dask by row blocks vs in memory",
            ["estimator", "fit", "input (MiB)", "cap (MiB)", "fit time (s)",
             "peak above start (MiB)", "peak / cap", "max abs difference dask vs in memory"],
            dask_rows(cap_mib),
            notes="Input: a memory-mapped .npy file (64 features, 10 classes), 64 row blocks, "
            "threads scheduler with 2 workers, working_memory = cap / 4. The in-memory fit "
            "loads the file first (its peak holds that copy). Each fit in a child process, "
            "twice, alternated: the faster time, the larger peak of anonymous memory (heap and "
            "private pages, not the mapped file's) above the start of the fit.",
        )  # fmt: skip
        results.save()
        return
    n_items = 2_000 if args.quick else 20_000
    with sources(args.baseline) as checkouts:
        labels = {commit: "" if commit is None else f" @ {commit}" for commit in checkouts}
        rows = []
        for name in ESTIMATORS:
            single = {}
            for processes in args.processes:
                rates = alternate(
                    lambda commit, name=name, processes=processes: measure_throughput(
                        name, processes, args.device, n_items, checkouts[commit]
                    ),
                    checkouts,
                    args.repeats,
                )
                for commit, measured_rates in rates.items():
                    rate = float(np.median(measured_rates))
                    if processes == 1:
                        single[commit] = rate
                    efficiency = rate / (processes * single[commit]) if commit in single else None
                    rows.append([name + labels[commit], processes, args.device, rate, efficiency])
                    print(rows[-1], f"(of {[round(r) for r in measured_rates]})", flush=True)
    rows.sort(key=lambda row: row[0])
    baseline_note = " Rows '@ commit': the baseline revision, measured alternately."
    results = Results(results_name("bench_distributed", args, "baseline" if args.baseline else ""))
    results.add_table(
        "Training throughput under torchrun (marginal items per second)",
        ["estimator", "processes", "device", "items / s", "scaling efficiency"],
        rows,
        notes="Efficiency = throughput with N processes / (N x throughput with 1 process). "
        f"The 2-core machine runs 2 processes of one thread each; {n_items:,} items. Median of "
        f"{args.repeats} measurement(s) per row." + (baseline_note if args.baseline else ""),
    )
    results.save()


if __name__ == "__main__":
    main()
