"""Figure 4 of Vogel, Bellet & Clémençon (2018): MMC on sampled K-tuples versus all pairs.

MNIST-10k shipped with skrank, split (stratified, seed 0) into 8,000 training and 2,000 test
items; PCA fitted on the training items keeping 90% of the variance. For each training size n
(a random subset of the training items, one per run) MMC is fitted on all negative pairs and on
B in {0.15 n, 0.5 n, n} K-tuples (one item per class, 45 pairs each); reported are the test-set
objective (mean distance over dissimilar test pairs) and constraint (mean squared distance over
similar test pairs), and the fit time, as mean and standard deviation over the runs. The claim
to show: a small loss in objective for a large saving in time.

Usage::

    PYTHONPATH=. python benchmarks/bench_mmc_sampling.py            # n up to 8,000, 5 runs
    PYTHONPATH=. python benchmarks/bench_mmc_sampling.py --quick    # smoke run
"""

import argparse
import time

import numpy as np
from bench_mmc import print_table
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split

from skrank import MMC
from skrank.datasets import load_mnist

# Figure 4 of the pointwise-ROC paper is about MMC as the paper states it.
PAPER = {"scatter_ridge": 1e-8, "min_rank": None}

TUPLE_FRACTIONS = (0.15, 0.5, 1.0)


def mnist_pca_split(variance=0.9, test_size=2000):
    """Train/test split of MNIST-10k with a PCA fitted on the training part."""
    X, y = load_mnist(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X.astype(np.float64), y, test_size=test_size, stratify=y, random_state=0
    )
    pca = PCA(n_components=variance, svd_solver="covariance_eigh").fit(X_train)
    return pca.transform(X_train), pca.transform(X_test), y_train, y_test


def settings(n):
    """``(label, MMC parameters)`` of the compared fits at training size ``n``."""
    tuples = [
        (f"B={fraction:g}n tuples", {"negatives": "tuples", "n_samples": int(fraction * n)})
        for fraction in TUPLE_FRACTIONS
    ]
    return tuples + [("all pairs", {})]


def run(sizes, n_runs):
    X_train, X_test, y_train, y_test = mnist_pca_split()
    print(f"MNIST-10k: {X_train.shape[0]} train / {X_test.shape[0]} test, d={X_train.shape[1]}")
    records = []
    for n in sizes:
        for seed in range(n_runs):
            subset = np.random.RandomState(seed).choice(X_train.shape[0], n, replace=False)
            for label, params in settings(n):
                start = time.perf_counter()
                mmc = MMC(random_state=seed, **PAPER, **params).fit(
                    X_train[subset], y_train[subset]
                )
                seconds = time.perf_counter() - start
                objective, constraint = mmc.objective_and_constraint(X_test, y_test)
                records.append((n, label, objective, constraint, seconds, mmc.converged_))
    return records


def summarise(records, sizes):
    header = [
        "n",
        "negatives",
        "test objective",
        "test constraint",
        "fit s",
        "objective / all",
        "speed-up",
        "converged",
    ]
    rows = []
    for n in sizes:
        by_label = {}
        for label, _ in settings(n):
            chosen = [r for r in records if r[0] == n and r[1] == label]
            by_label[label] = np.array([r[2:5] for r in chosen]), all(r[5] for r in chosen)
        reference = by_label["all pairs"][0].mean(axis=0)
        for label, (values, converged) in by_label.items():
            mean, std = values.mean(axis=0), values.std(axis=0)
            rows.append(
                [
                    n,
                    label,
                    f"{mean[0]:.4f} ± {std[0]:.4f}",
                    f"{mean[1]:.4f} ± {std[1]:.4f}",
                    f"{mean[2]:.2f} ± {std[2]:.2f}",
                    f"{mean[0] / reference[0]:.4f}",
                    f"{reference[2] / mean[2]:.1f}",
                    converged,
                ]
            )
    print_table(
        "Test objective and constraint versus all pairs (mean ± std over runs)", header, rows
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--runs", type=int, default=None, help="runs per training size")
    args = parser.parse_args(argv)
    sizes = (250, 500) if args.quick else (500, 1000, 2000, 4000, 8000)
    n_runs = args.runs or (2 if args.quick else 5)
    summarise(run(sizes, n_runs), sizes)


if __name__ == "__main__":
    main()
