"""MMC's fit on one BLAS thread (``n_threads=1``, the default) against all cores (``None``).

Side by side in one run, alternating the two settings, on the same data with the same
parameters (the defaults): the fit's wall-clock time (median of ``--repeats`` fits each) and the
ratio of the two, with a check that both settings learn the same metric. Data: sklearn's
digits, PCA to 31 dimensions, all 1,797 items (as the MMC part of ``bench_pair_learners.py``);
MNIST-10k shipped with skrank, a stratified sample of 3,000 items (the training part of ``python
-m skrank``'s MMC row), PCA keeping 90% of the variance, with all negative pairs and with 3,000
sampled ones (``negatives="pairs"``). All cores means BLAS's own default (``n_threads=None``
without a ``threadpool_limits``), as many threads as the machine reports CPUs; on a shared
machine they compete with other processes (the load at the start and end is recorded). Writes
``benchmarks/studies/results/bench_mmc_threads[_quick].json``.

Usage::

    PYTHONPATH=benchmarks python benchmarks/studies/mmc_threads.py            # 5 fits a setting
    PYTHONPATH=benchmarks python benchmarks/studies/mmc_threads.py --quick    # smoke run
"""

import os

import numpy as np
from _data import mnist_split, pca
from _harness import alternate, parser, results_name, timed
from _results import STUDIES_DIR, Results
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_info

from skrank import MMC

SETTINGS = {"one thread (default)": 1, "all cores": None}


def datasets(quick=False):
    """``(name, X, y, parameters)`` of each fit compared."""
    X, y = load_digits(return_X_y=True)
    yield "digits, PCA 31, 1,797 items", pca(X, n_components=31, svd_solver="auto")[0], y, {}
    size = 1000 if quick else 3000
    X, _, y, _ = mnist_split(size, None, dtype=np.float32)
    Z = pca(X, svd_solver="auto")[0]
    name = f"MNIST, PCA 90% ({Z.shape[1]}), {size:,} items"
    yield f"{name}, all negative pairs", Z, y, {}
    yield f"{name}, {size:,} sampled pairs", Z, y, {"negatives": "pairs", "random_state": 0}


def compare(X, y, parameters, n_runs):
    """Median fit seconds of each setting (alternating), and the largest difference between
    the metrics they learn."""
    components = {}

    def fit_seconds(name):
        model, seconds = timed(MMC(n_threads=SETTINGS[name], **parameters).fit, X, y)
        components[name] = model.components_
        return seconds

    seconds = alternate(fit_seconds, SETTINGS, n_runs)
    difference = np.abs(components["all cores"] - components["one thread (default)"]).max()
    return {name: float(np.median(times)) for name, times in seconds.items()}, float(difference)


def main(argv=None):
    args = parser(__doc__, "quick", "tag", "repeats").parse_args(argv)
    n_runs = args.repeats or (2 if args.quick else 5)
    results = Results(results_name("bench_mmc_threads", args))
    blas = sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"})
    results.add_figure("blas_threads_by_default", blas)
    results.add_figure("cpu_count", os.cpu_count())
    rows = []
    for name, X, y, parameters in datasets(args.quick):
        medians, difference = compare(X, y, parameters, n_runs)
        one, every = medians["one thread (default)"], medians["all cores"]
        rows.append([name, round(one, 3), round(every, 3), round(every / one, 2), difference])
        print(rows[-1], flush=True)
    settings = ["one thread (default)", f"all cores ({blas} BLAS threads)"]
    results.add_table(
        f"MMC().fit: median seconds of {n_runs} fits per setting, alternating",
        ["data", *settings, "ratio all / one", "max |components difference|"],
        rows,
        notes="ratio > 1: the default one thread is faster.",
    )
    results.save(STUDIES_DIR)


if __name__ == "__main__":
    main()
