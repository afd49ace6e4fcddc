"""MMC's fit on one BLAS thread (``n_threads=1``, the default) against all cores (``None``).

Side by side in one run, alternating the two settings, on the same data with the same
parameters (the defaults): the fit's wall-clock time (median of ``--runs`` fits each) and the
ratio of the two, with a check that both settings learn the same metric. Data:

* sklearn's digits, PCA to 31 dimensions, all 1,797 items (as ``bench_mmc.py``);
* MNIST-10k shipped with skrank, a stratified sample of 3,000 items (the training part of
  ``python -m skrank``'s MMC row), PCA keeping 90% of the variance, with all negative pairs
  and with 3,000 sampled ones (``negatives="pairs"``).

All cores means BLAS's own default (``n_threads=None`` without a ``threadpool_limits``), as many
threads as the machine reports CPUs. The machine's load at the start and end is recorded: on a
shared machine the all-cores fits compete with other processes for the cores.

Usage::

    python benchmarks/bench_mmc_threads.py            # 5 fits per setting (~5 minutes)
    python benchmarks/bench_mmc_threads.py --quick    # smoke run

Writes ``benchmarks/results/bench_mmc_threads.json`` (``bench_mmc_threads_quick.json`` with
``--quick``).
"""

import argparse
import os
import time

import numpy as np
from _results import Results
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_info

from skrank import MMC
from skrank.datasets import load_mnist

SETTINGS = {"one thread (default)": 1, "all cores": None}


def datasets(quick=False):
    """``(name, X, y, parameters)`` of each fit compared."""
    X, y = load_digits(return_X_y=True)
    yield "digits, PCA 31, 1,797 items", PCA(31, random_state=0).fit_transform(X), y, {}
    X, y = load_mnist(return_X_y=True)
    size = 1000 if quick else 3000
    X, _, y, _ = train_test_split(X, y, train_size=size, stratify=y, random_state=0)
    Z = PCA(0.9, random_state=0).fit_transform(X)
    name = f"MNIST, PCA 90% ({Z.shape[1]}), {size:,} items"
    yield f"{name}, all negative pairs", Z, y, {}
    yield f"{name}, {size:,} sampled pairs", Z, y, {"negatives": "pairs", "random_state": 0}


def compare(X, y, parameters, n_runs):
    """Median fit seconds of each setting (alternating), and the largest difference between
    the metrics they learn."""
    seconds = {name: [] for name in SETTINGS}
    components = {}
    for _ in range(n_runs):
        for name, n_threads in SETTINGS.items():
            start = time.perf_counter()
            model = MMC(n_threads=n_threads, **parameters).fit(X, y)
            seconds[name].append(time.perf_counter() - start)
            components[name] = model.components_
    difference = np.abs(components["all cores"] - components["one thread (default)"]).max()
    return {name: float(np.median(times)) for name, times in seconds.items()}, float(difference)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--runs", type=int, default=None, help="fits per setting")
    args = parser.parse_args(argv)
    n_runs = args.runs or (2 if args.quick else 5)
    results = Results("bench_mmc_threads_quick" if args.quick else "bench_mmc_threads")
    blas = sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"})
    results.add_figure("blas_threads_by_default", blas)
    results.add_figure("cpu_count", os.cpu_count())
    rows = []
    for name, X, y, parameters in datasets(args.quick):
        medians, difference = compare(X, y, parameters, n_runs)
        one, every = medians["one thread (default)"], medians["all cores"]
        rows.append([name, round(one, 3), round(every, 3), round(every / one, 2), difference])
        print(rows[-1], flush=True)
    results.add_table(
        f"MMC().fit: median seconds of {n_runs} fits per setting, alternating",
        [
            "data",
            "one thread (default)",
            f"all cores ({blas} BLAS threads)",
            "ratio all / one",
            "max |components difference|",
        ],  # fmt: skip
        rows,
        notes="ratio > 1: the default one thread is faster.",
    )
    results.save()


if __name__ == "__main__":
    main()
