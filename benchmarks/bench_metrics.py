"""Exact retrieval metrics: skrank's torch and numpy paths, the matmul floor, PML, sklearn.

Computes the exact mean AUPRC (mAP over all other items), Recall@1, Recall@10, MAP@R and
R-precision of N random clustered embeddings (dimension 128, 100 Gaussian clusters,
L2-normalised, cosine similarity) with:

- ``torch``: ``skrank.metrics.retrieval_scores(..., at_r=True, device=--device)`` (the torch
  path: float32 similarities, ranks counted without sorting, on the CPU tile by tile in a
  numba loop when numba is installed and the call is large enough to repay loading it; the
  default ``device="auto"``); ``torch-no-numba``: the same as users get without numba;
  ``torch-numba-at-once``: with numba's loop loaded by the first call whatever its size (as
  before 0.2), up to ``--at-once-max``;
- ``numpy``: the same with ``device="numpy"`` (float64, one sort per query), up to
  ``--numpy-max`` (641 s at N = 100,000 in an earlier run, hence not run there by default);
- ``floor``: the float32 similarity products alone, ``X[block] @ X.T`` for blocks of 1024
  queries on the same device, discarded (no metric can be faster than this);
- ``pml``: pytorch-metric-learning's ``AccuracyCalculator(k=None)`` ("mean_average_precision",
  "precision_at_1" = Recall@1, "mean_average_precision_at_r", "r_precision"), exact faiss k-NN
  over all N - 1 others in float32. Its memory grows as N^2 (about 6.6 GB at N = 10,000), so
  it only runs up to ``--pml-max``;
- ``sklearn``: a per-query loop of ``sklearn.metrics.average_precision_score`` and a stable
  argsort for Recall@k, up to ``--sklearn-max`` (off by default).

Each method runs in its own child process (so peak memories do not mix); the parent kills a
child whose resident memory exceeds ``--memory-limit-gib`` or that runs past ``--timeout``.
With ``--repeats R`` the methods of a size run R times, alternated (floor, torch, ..., floor,
torch, ...), and each keeps its fastest run: on a shared machine the ratios then compare runs
taken under similar load.
The time is the metric computation only (not imports or data generation); "peak" is the
child's peak resident memory, "extra" the part above the peak before the computation (imports
and data). Values are compared with skrank's (max absolute difference over the metrics both
report).

Results go to ``benchmarks/results/bench_metrics.json`` (``bench_metrics_quick`` for
``--quick``, ``bench_metrics_<device>`` for another device, ``--name`` for another name).

Usage::

    python benchmarks/bench_metrics.py                  # N in {10k, 30k, 100k}, CPU
    python benchmarks/bench_metrics.py --quick          # small smoke run
    python benchmarks/bench_metrics.py --device cuda --sizes 100000 1000000 --numpy-max 0
    OMP_NUM_THREADS=2 python benchmarks/bench_metrics.py --sizes 100000 --name bench_metrics_2t
    python benchmarks/bench_metrics.py --sizes 1000 3000 10000 --numpy-max 0 --pml-max 0 \
        --no-numba-max 10000 --at-once-max 10000 --repeats 3 --name bench_metrics_first_call
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import Results  # noqa: E402

METHODS = ("torch", "torch-no-numba", "torch-numba-at-once", "numpy", "floor", "pml", "sklearn")
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


def load_skrank(device, numba=True, numba_at_once=False):
    from skrank.metrics import _tiled_ranks, retrieval_scores

    _tiled_ranks.USE_NUMBA = numba  # False: the torch operations users get without numba
    if numba_at_once:  # the fused loop from the first call, however small (before 0.2)
        _tiled_ranks.NUMBA_MIN_PAIRS = 0

    def run(X, y):
        scores = retrieval_scores(X, y, k=[1, 10], metric="cosine", at_r=True, device=device)
        _synchronize(device)
        return {key: scores[key] for key in KEYS}

    return run


def _synchronize(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def load_floor(device):
    import torch

    def run(X, y):
        table = torch.from_numpy(X).to(device)
        for start in range(0, len(table), FLOOR_BLOCK):
            table[start : start + FLOOR_BLOCK] @ table.T
        _synchronize(device)
        return {}

    return run


def load_pml(device):
    import torch
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    def run(X, y):
        calculator = AccuracyCalculator(
            include=(
                "mean_average_precision",
                "precision_at_1",
                "mean_average_precision_at_r",
                "r_precision",
            ),
            k=None,
            device=torch.device(device),
        )
        scores = calculator.get_accuracy(X, y)
        return {
            "mean_auprc": scores["mean_average_precision"],
            "recall@1": scores["precision_at_1"],
            "map@r": scores["mean_average_precision_at_r"],
            "r_precision": scores["r_precision"],
        }

    return run


def load_sklearn(device):
    from sklearn.metrics import average_precision_score

    def run(X, y):
        X = X.astype(np.float64)
        precisions, hits_1, hits_10 = [], [], []
        for query in range(len(X)):
            similarity = np.delete(X @ X[query], query)
            is_positive = np.delete(y == y[query], query)
            if not is_positive.any():
                continue
            precisions.append(average_precision_score(is_positive, similarity))
            ranked = is_positive[np.argsort(-similarity, kind="stable")[:10]]
            hits_1.append(ranked[0])
            hits_10.append(ranked.any())
        return {
            "mean_auprc": float(np.mean(precisions)),
            "recall@1": float(np.mean(hits_1)),
            "recall@10": float(np.mean(hits_10)),
        }

    return run


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(method, n_samples, device):
    """Child process: import, make the data, time one method, print one JSON line."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    loaders = {
        "torch": lambda: load_skrank(device),
        "torch-no-numba": lambda: load_skrank(device, numba=False),
        "torch-numba-at-once": lambda: load_skrank(device, numba_at_once=True),
        "numpy": lambda: load_skrank("numpy"),
        "floor": lambda: load_floor(device),
        "pml": lambda: load_pml(device),
        "sklearn": lambda: load_sklearn(device),
    }
    run = loaders[method]()
    X, y = make_embeddings(n_samples)
    baseline = _peak_rss_mib()
    start = time.perf_counter()
    values = run(X, y)
    seconds = time.perf_counter() - start
    peak = _peak_rss_mib()
    print(
        json.dumps({"seconds": seconds, "peak_mib": peak, "extra_mib": peak - baseline, **values})
    )


def _rss_gib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**20
    except FileNotFoundError:
        pass
    return 0.0


def run_child(method, n_samples, device, memory_limit_gib, timeout):
    """Run one method in a child process, killing it past the memory limit or the timeout."""
    command = [sys.executable, __file__, "--worker", method, "--n", str(n_samples)]
    command += ["--device", device]
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    start = time.monotonic()
    while child.poll() is None:
        if _rss_gib(child.pid) > memory_limit_gib:
            child.kill()
            child.wait()
            return {"failure": f"killed: memory > {memory_limit_gib:g} GiB"}
        if time.monotonic() - start > timeout:
            child.kill()
            child.wait()
            return {"failure": f"killed: time > {timeout:g} s"}
        time.sleep(0.2)
    output, errors = child.communicate()
    if child.returncode != 0:
        return {"failure": f"exit {child.returncode}: {errors.strip().splitlines()[-1:]}"}
    return json.loads(output.strip().splitlines()[-1])


def _format(value, digits):
    return "n/a" if value is None else f"{value:.{digits}f}"


COLUMNS = [
    "N",
    "method",
    "time (s)",
    "time / floor",
    "peak RSS (MiB)",
    "extra (MiB)",
    "mean AUPRC",
    "Recall@1",
    "Recall@10",
    "MAP@R",
    "R-precision",
    "max abs diff vs torch",
]


def table_rows(rows):
    """Rows of the results table: ``rows`` holds (N, method, result, torch result, floor)."""
    table = []
    for n_samples, method, result, reference, floor in rows:
        if "failure" in result:
            table.append([n_samples, method, result["failure"]] + ["" for _ in COLUMNS[3:]])
            continue
        common = [key for key in KEYS if key in result and reference and key in reference]
        difference = max((abs(result[key] - reference[key]) for key in common), default=None)
        ratio = result["seconds"] / floor["seconds"] if floor and "seconds" in floor else None
        table.append(
            [
                n_samples,
                method,
                round(result["seconds"], 2),
                None if ratio is None else round(ratio, 2),
                round(result["peak_mib"]),
                round(result["extra_mib"]),
                *[result.get(key) for key in KEYS],
                difference,
            ]
        )
    return table


def print_table(table):
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in table:
        cells = [f"{row[0]:,}", row[1]]
        if isinstance(row[2], str):
            print("| " + " | ".join(cells + [row[2]]) + " |")
            continue
        cells += [f"{row[2]:.2f}", "n/a" if row[3] is None else f"{row[3]:.2f}x"]
        cells += [f"{row[4]}", f"{row[5]}"]
        cells += [_format(value, 6) for value in row[6:11]]
        cells.append("n/a" if row[11] is None else f"{row[11]:.1e}")
        print("| " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--device", default="cpu", help="torch device of 'torch' and 'floor'")
    parser.add_argument("--numpy-max", type=int, default=30_000, help="largest N for numpy")
    parser.add_argument(
        "--no-numba-max", type=int, default=30_000, help="largest N for torch-no-numba"
    )
    parser.add_argument(
        "--at-once-max",
        type=int,
        default=0,
        help="largest N for torch-numba-at-once (numba loaded by the first call)",
    )
    parser.add_argument("--pml-max", type=int, default=10_000, help="largest N for pml")
    parser.add_argument("--sklearn-max", type=int, default=0, help="largest N for sklearn")
    parser.add_argument("--memory-limit-gib", type=float, default=12.0)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per method")
    parser.add_argument(
        "--repeats", type=int, default=1, help="alternated runs per method (the fastest kept)"
    )
    parser.add_argument("--name", help="results file name (default: from --quick and --device)")
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.n, args.device)
        return
    if args.quick:
        args.sizes, args.numpy_max, args.pml_max = [1_000, 3_000], 3_000, 1_000
        args.no_numba_max = 3_000
    print(
        f"# embeddings: dim {DIMENSION}, {N_CLUSTERS} clusters, spread {SPREAD}; device "
        f"{args.device}; {os.cpu_count()} CPUs; memory limit {args.memory_limit_gib:g} GiB\n"
    )
    rows = []
    for n_samples in args.sizes:
        limits = (
            ("torch-no-numba", args.no_numba_max),
            ("torch-numba-at-once", args.at_once_max),
            ("numpy", args.numpy_max),
            ("pml", args.pml_max),
            ("sklearn", args.sklearn_max),
        )
        methods = ["floor", "torch"] + [name for name, largest in limits if n_samples <= largest]
        results = {}
        for _ in range(args.repeats):
            for method in methods:
                result = run_child(
                    method, n_samples, args.device, args.memory_limit_gib, args.timeout
                )
                print(f"N={n_samples:,} {method}: {result}", file=sys.stderr, flush=True)
                best = results.get(method)
                if (
                    best is None
                    or "failure" in best
                    or result.get("seconds", 1e300) < best["seconds"]
                ):
                    results[method] = result
        reference = results["torch"] if "failure" not in results["torch"] else None
        floor = results["floor"] if "failure" not in results["floor"] else None
        for method in methods:
            rows.append((n_samples, method, results[method], reference, floor))
    table = table_rows(rows)
    print_table(table)
    name = "bench_metrics_quick" if args.quick else "bench_metrics"
    if args.device != "cpu":
        name += "_" + args.device.replace(":", "")
    name = args.name or name
    results = Results(name, packages=("pytorch-metric-learning", "faiss-cpu", "numba"))
    results.add_table(
        f"Exact retrieval metrics, dimension {DIMENSION}, {N_CLUSTERS} clusters, "
        f"device {args.device}",
        COLUMNS,
        table,
        notes=(
            f"{args.repeats} alternated run(s) per method, the fastest kept; "
            f"numpy path up to N = {args.numpy_max:,}, PML up to N = {args.pml_max:,}, "
            f"torch-no-numba (the torch CPU path without numba installed) up to N = "
            f"{args.no_numba_max:,}"
            + (
                f", torch-numba-at-once (numba's loop loaded by the first call, as before 0.2) "
                f"up to N = {args.at_once_max:,}"
                if args.at_once_max
                else ""
            )
            + "; "
            "time / floor divides by the float32 similarity products alone; max abs diff "
            "over the metrics a method shares with the torch path."
        ),
    )
    results.save()


if __name__ == "__main__":
    main()
