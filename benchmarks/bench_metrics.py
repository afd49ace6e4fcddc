"""Exact retrieval metrics: skrank versus pytorch-metric-learning and a scikit-learn loop.

Computes the exact mean AUPRC (mAP over all other items), Recall@1 and Recall@10 of N random
clustered embeddings (dimension 128, 100 Gaussian clusters, L2-normalised, cosine similarity)
with:

- ``skrank``: ``skrank.metrics.retrieval_scores`` (chunked, exact, float64);
- ``pml``: pytorch-metric-learning's ``AccuracyCalculator(k=None)`` ("mean_average_precision"
  and "precision_at_1", which is Recall@1), exact faiss k-NN over all N - 1 others in float32.
  Its memory grows as N^2 (about 6.6 GB at N = 10,000), so it only runs up to ``--pml-max``;
- ``sklearn``: a per-query loop of ``sklearn.metrics.average_precision_score`` and a stable
  argsort for Recall@k, up to ``--sklearn-max``.

Each method runs in its own child process (so peak memories do not mix); the parent kills a
child whose resident memory exceeds ``--memory-limit-gib`` or that runs past ``--timeout``.
The time is the metric computation only (not imports or data generation); "peak" is the
child's peak resident memory, "extra" the part above the peak before the computation (imports
and data). Values are compared with skrank's (max absolute difference over the metrics both
report).

Usage::

    python benchmarks/bench_metrics.py            # N in {10k, 50k, 100k}
    python benchmarks/bench_metrics.py --quick    # small smoke run
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
METHODS = ("skrank", "pml", "sklearn")
DIMENSION, N_CLUSTERS, SPREAD = 128, 100, 2.0


def make_embeddings(n_samples, seed=0):
    """Normalised float32 embeddings around ``N_CLUSTERS`` Gaussian centres, and their labels."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(N_CLUSTERS, DIMENSION)).astype(np.float32)
    y = rng.integers(N_CLUSTERS, size=n_samples)
    X = centres[y] + SPREAD * rng.normal(size=(n_samples, DIMENSION)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, y


def load_skrank():
    from skrank.metrics import retrieval_scores

    def run(X, y):
        scores = retrieval_scores(X, y, k=[1, 10], metric="cosine")
        return {key: scores[key] for key in ("mean_auprc", "recall@1", "recall@10")}

    return run


def load_pml():
    import torch
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    def run(X, y):
        calculator = AccuracyCalculator(
            include=("mean_average_precision", "precision_at_1"),
            k=None,
            device=torch.device("cpu"),
        )
        scores = calculator.get_accuracy(X, y)
        return {
            "mean_auprc": scores["mean_average_precision"],
            "recall@1": scores["precision_at_1"],
        }

    return run


def load_sklearn():
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


def worker(method, n_samples):
    """Child process: import, make the data, time one method, print one JSON line."""
    run = {"skrank": load_skrank, "pml": load_pml, "sklearn": load_sklearn}[method]()
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


def run_child(method, n_samples, memory_limit_gib, timeout):
    """Run one method in a child process, killing it past the memory limit or the timeout."""
    command = [sys.executable, __file__, "--worker", method, "--n", str(n_samples)]
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


def print_table(rows):
    print(
        "| N | method | time (s) | time / skrank | peak RSS (MiB) | extra (MiB) | mean AUPRC "
        "| Recall@1 | Recall@10 | max abs diff vs skrank |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n_samples, method, result, reference in rows:
        if "failure" in result:
            print(f"| {n_samples:,} | {method} | {result['failure']} |||||||")
            continue
        common = [key for key in ("mean_auprc", "recall@1", "recall@10") if key in result]
        difference = max(abs(result[key] - reference[key]) for key in common) if reference else 0
        ratio = result["seconds"] / reference["seconds"] if reference else 1.0
        print(
            f"| {n_samples:,} | {method} | {result['seconds']:.2f} | {ratio:.1f}x "
            f"| {result['peak_mib']:.0f} | {result['extra_mib']:.0f} "
            f"| {_format(result.get('mean_auprc'), 6)} | {_format(result.get('recall@1'), 4)} "
            f"| {_format(result.get('recall@10'), 4)} | {difference:.1e} |"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--pml-max", type=int, default=10_000, help="largest N for pml")
    parser.add_argument("--sklearn-max", type=int, default=10_000, help="largest N for sklearn")
    parser.add_argument("--memory-limit-gib", type=float, default=12.0)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per method")
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.n)
        return
    if args.quick:
        args.sizes, args.pml_max, args.sklearn_max = [1_000, 3_000], 3_000, 1_000
    print(
        f"# embeddings: dim {DIMENSION}, {N_CLUSTERS} clusters, spread {SPREAD}; "
        f"{os.cpu_count()} CPUs; memory limit {args.memory_limit_gib:g} GiB per child\n"
    )
    rows = []
    for n_samples in args.sizes:
        reference = run_child("skrank", n_samples, args.memory_limit_gib, args.timeout)
        rows.append((n_samples, "skrank", reference, None))
        for method, largest in (("pml", args.pml_max), ("sklearn", args.sklearn_max)):
            if n_samples <= largest:
                result = run_child(method, n_samples, args.memory_limit_gib, args.timeout)
                ok = "failure" not in reference
                rows.append((n_samples, method, result, reference if ok else None))
        print(f"done N={n_samples:,}", file=sys.stderr)
    print_table(rows)


if __name__ == "__main__":
    main()
