"""Exact retrieval metrics: skrank's torch and numpy paths, the matmul floor, PML, sklearn.

The methods (``torch`` on ``--device``, ``torch-no-numba``, ``numpy``, ``floor``: the products
``X[block] @ X.T`` in blocks of 1024 queries, ``pml``) and the embeddings: see
benchmarks/README.md, section "Exact retrieval metrics". ``torch-no-numba``, ``numpy`` and
``pml`` (memory growing as N^2, about 6.6 GB at N = 10,000) run up to ``--no-numba-max``,
``--numpy-max`` and ``--pml-max``. Each method runs in its own child process, killed past
``--memory-limit-gib`` or ``--timeout``; with ``--repeats R`` the methods of a size run R times,
alternated, each keeping its fastest. Time: the metric computation only; "peak": the child's
peak resident memory during it, "extra" the part above its start. Values are compared with
skrank's.

Usage::

    python benchmarks/bench_metrics.py                  # N in {10k, 30k, 100k}, CPU
    python benchmarks/bench_metrics.py --quick          # small smoke run
    python benchmarks/bench_metrics.py --device cuda --sizes 100000 1000000 --numpy-max 0
    OMP_NUM_THREADS=2 python benchmarks/bench_metrics.py --sizes 100000 --tag 2t
"""

import os
import sys

import numpy as np
from _harness import (
    ChildFailed,
    PeakMemory,
    alternate,
    parser,
    results_name,
    run_in_child,
    synchronize,
    timed,
)
from _results import Results

METHODS = ("torch", "torch-no-numba", "numpy", "floor", "pml")
KEYS = ("mean_auprc", "recall@1", "recall@10", "map@r", "r_precision")
FLOOR_BLOCK = 1024
DIMENSION, N_CLUSTERS, SPREAD = 128, 100, 2.0


def make_embeddings(n_samples, seed=0):
    """Normalised float32 embeddings around ``N_CLUSTERS`` Gaussian centres, and their labels."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(N_CLUSTERS, DIMENSION)).astype(np.float32)
    y = rng.integers(N_CLUSTERS, size=n_samples)
    X = centres[y] + SPREAD * rng.normal(size=(n_samples, DIMENSION)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, y


def load_skrank(device, numba=True):
    if not numba:
        sys.modules["numba"] = None  # as if numba were not installed: its import fails
    from skrank.metrics import retrieval_scores

    def run(X, y):
        scores = retrieval_scores(X, y, k=[1, 10], metric="cosine", at_r=True, device=device)
        synchronize(device)
        return {key: scores[key] for key in KEYS}

    return run


def load_floor(device):
    import torch

    def run(X, y):
        table = torch.from_numpy(X).to(device)
        for start in range(0, len(table), FLOOR_BLOCK):
            table[start : start + FLOOR_BLOCK] @ table.T
        synchronize(device)
        return {}

    return run


PML_KEYS = {"mean_average_precision": "mean_auprc", "precision_at_1": "recall@1",
            "mean_average_precision_at_r": "map@r", "r_precision": "r_precision"}  # fmt: skip


def load_pml(device):
    import torch
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    def run(X, y):
        pml = AccuracyCalculator(include=tuple(PML_KEYS), k=None, device=torch.device(device))
        scores = pml.get_accuracy(X, y)
        return {ours: scores[theirs] for theirs, ours in PML_KEYS.items()}

    return run


def worker(method, n_samples, device):
    """Child process: import, make the data, time one method; its record."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    loaders = {
        "torch": lambda: load_skrank(device),
        "torch-no-numba": lambda: load_skrank(device, numba=False),
        "numpy": lambda: load_skrank("numpy"),
        "floor": lambda: load_floor(device),
        "pml": lambda: load_pml(device),
    }
    run = loaders[method]()
    X, y = make_embeddings(n_samples)
    with PeakMemory() as memory:
        values, seconds = timed(run, X, y)
    peak, extra = memory.peak / 2**20, memory.increase / 2**20
    return {"seconds": seconds, "peak_mib": peak, "extra_mib": extra, **values}


COLUMNS = ["N", "method", "time (s)", "time / floor", "peak RSS (MiB)", "extra (MiB)",
           "mean AUPRC", "Recall@1", "Recall@10", "MAP@R", "R-precision",
           "max abs diff vs torch"]  # fmt: skip


def table_row(n_samples, method, result, reference, floor):
    """A row of the results table: a method's ``result``, the torch path's and the floor's."""
    if "failure" in result:
        return [n_samples, method, result["failure"]] + ["" for _ in COLUMNS[3:]]
    common = [key for key in KEYS if key in result and reference and key in reference]
    difference = max((abs(result[key] - reference[key]) for key in common), default=None)
    ratio = result["seconds"] / floor["seconds"] if floor and "seconds" in floor else None
    return [n_samples, method, round(result["seconds"], 2),
            None if ratio is None else round(ratio, 2), round(result["peak_mib"]),
            round(result["extra_mib"]), *[result.get(key) for key in KEYS], difference]  # fmt: skip


def main(argv=None):
    arguments = parser(
        __doc__, "quick", "tag", "device", "timeout", "repeats", device="cpu", timeout=3600.0,
        repeats=1,
    )  # fmt: skip
    arguments.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    arguments.add_argument("--numpy-max", type=int, default=30_000, help="largest N for numpy")
    arguments.add_argument(
        "--no-numba-max", type=int, default=30_000, help="largest N for torch-no-numba"
    )
    arguments.add_argument("--pml-max", type=int, default=10_000, help="largest N for pml")
    arguments.add_argument("--memory-limit-gib", type=float, default=12.0)
    args = arguments.parse_args(argv)
    if args.quick:
        args.sizes, args.numpy_max, args.pml_max = [1_000, 3_000], 3_000, 1_000
        args.no_numba_max = 3_000
    print(
        f"# embeddings: dim {DIMENSION}, {N_CLUSTERS} clusters, spread {SPREAD}; device "
        f"{args.device}; {os.cpu_count()} CPUs; memory limit {args.memory_limit_gib:g} GiB\n"
    )
    rows = []
    child_limits = {"timeout": args.timeout, "memory_limit_gib": args.memory_limit_gib}
    limits = {"torch-no-numba": args.no_numba_max, "numpy": args.numpy_max, "pml": args.pml_max}
    for n_samples in args.sizes:
        methods = ["floor", "torch", *(m for m, largest in limits.items() if n_samples <= largest)]

        def measure(method, n_samples=n_samples):
            """One method in a child process, killed past the memory limit or the timeout."""
            arguments = {"method": method, "n_samples": n_samples, "device": args.device}
            try:
                result = run_in_child(__file__, "worker", arguments, **child_limits)
            except ChildFailed as failure:
                result = {"failure": f"killed: {failure.reason}"}
            print(f"N={n_samples:,} {method}: {result}", file=sys.stderr, flush=True)
            return result

        results = {
            method: min(runs, key=lambda run: run.get("seconds", float("inf")))
            for method, runs in alternate(measure, methods, args.repeats).items()
        }
        reference = results["torch"] if "failure" not in results["torch"] else None
        floor = results["floor"] if "failure" not in results["floor"] else None
        rows += [table_row(n_samples, m, results[m], reference, floor) for m in methods]
    device = args.device.replace(":", "") if args.device != "cpu" else None
    results = Results(
        results_name("bench_metrics", args, device),
        packages=("pytorch-metric-learning", "faiss-cpu", "numba"),
    )
    results.add_table(
        f"Exact retrieval metrics, dimension {DIMENSION}, {N_CLUSTERS} clusters, "
        f"device {args.device}",
        COLUMNS,
        rows,
        notes=(
            f"{args.repeats} alternated run(s) per method, the fastest kept; "
            f"numpy path up to N = {args.numpy_max:,}, PML up to N = {args.pml_max:,}, "
            f"torch-no-numba (the torch CPU path without numba installed) up to N = "
            f"{args.no_numba_max:,}; "
            "time / floor divides by the float32 similarity products alone; max abs diff "
            "over the metrics a method shares with the torch path."
        ),
        show=True,
    )
    results.save()


if __name__ == "__main__":
    main()
