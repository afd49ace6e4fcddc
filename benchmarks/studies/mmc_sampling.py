"""Figure 4 of Vogel, Bellet & Clémençon (2018): MMC on sampled K-tuples versus all pairs.

MNIST-10k shipped with skrank, split (stratified, seed 0) into 8,000 training and 2,000 test
items; PCA fitted on the training items keeping 90% of the variance. For each training size n
(a random subset of the training items, one per run) MMC is fitted on all negative pairs and on
B in {0.15 n, 0.5 n, n} K-tuples (one item per class, 45 pairs each); reported are the test-set
objective (mean distance over dissimilar test pairs) and constraint (mean squared distance over
similar test pairs), and the fit time, as mean and standard deviation over the runs. The claim
to show: a small loss in objective for a large saving in time. Writes
``benchmarks/studies/results/bench_mmc_sampling[_quick].json``.

Usage::

    PYTHONPATH=benchmarks python benchmarks/studies/mmc_sampling.py            # n to 8,000, 5 runs
    PYTHONPATH=benchmarks python benchmarks/studies/mmc_sampling.py --quick    # smoke run
"""

import numpy as np
from _data import mnist_split, pca
from _harness import parser, results_name, timed
from _results import STUDIES_DIR, Results, summary

from skrank import MMC

# Figure 4 of the pointwise-ROC paper is about MMC as the paper states it.
PAPER = {"scatter_ridge": 1e-8, "min_rank": None}
MEASURES = ("test_objective", "test_constraint", "seconds")


def settings(n):
    """``(label, MMC parameters)`` of the compared fits at training size ``n``."""
    tuples = [
        (f"B={fraction:g}n tuples", {"negatives": "tuples", "n_samples": int(fraction * n)})
        for fraction in (0.15, 0.5, 1.0)
    ]
    return tuples + [("all pairs", {})]


def run(sizes, n_runs):
    """A record a fit: ``n``, ``negatives``, the :data:`MEASURES` and ``converged``."""
    X_train, X_test, y_train, y_test = mnist_split()
    X_train, X_test = pca(X_train, X_test)
    print(f"MNIST-10k: {X_train.shape[0]} train / {X_test.shape[0]} test, d={X_train.shape[1]}")
    records = []
    for n in sizes:
        for seed in range(n_runs):
            subset = np.random.RandomState(seed).choice(X_train.shape[0], n, replace=False)
            for label, params in settings(n):
                mmc, seconds = timed(
                    MMC(random_state=seed, **PAPER, **params).fit, X_train[subset], y_train[subset]
                )
                objective, constraint = mmc.objective_and_constraint(X_test, y_test)
                records.append(dict(n=n, negatives=label, test_objective=objective,
                                    test_constraint=constraint, seconds=seconds,
                                    converged=mmc.converged_))  # fmt: skip
    return records


def summarise(results, records, sizes, n_runs):
    rows = []
    for n in sizes:
        by_label = {}
        for label, _ in settings(n):
            chosen = [r for r in records if r["n"] == n and r["negatives"] == label]
            values = np.array([[r[measure] for measure in MEASURES] for r in chosen])
            by_label[label] = values, all(r["converged"] for r in chosen)
        reference = by_label["all pairs"][0].mean(axis=0)
        for label, (values, converged) in by_label.items():
            mean = values.mean(axis=0)
            rows.append(
                [n, label, summary(values[:, 0]), summary(values[:, 1]),
                 summary(values[:, 2], digits=2), round(mean[0] / reference[0], 4),
                 round(reference[2] / mean[2], 1), converged]
            )  # fmt: skip
    results.add_table(
        f"Test objective and constraint versus all pairs (mean ± std over {n_runs} runs)",
        ["n", "negatives", "test objective", "test constraint", "fit s", "objective / all",
         "speed-up", "converged"],
        rows,
        notes="objective / all: mean test objective over the mean of the all-pairs fits; "
        "speed-up: mean all-pairs fit time over mean fit time; converged: every run converged.",
        show=True,
    )  # fmt: skip
    results.add_figure("runs", records)


def main(argv=None):
    arguments = parser(__doc__, "quick", "tag")
    arguments.add_argument("--runs", type=int, default=None, help="runs per training size")
    args = arguments.parse_args(argv)
    sizes = (250, 500) if args.quick else (500, 1000, 2000, 4000, 8000)
    n_runs = args.runs or (2 if args.quick else 5)
    results = Results(results_name("bench_mmc_sampling", args))
    summarise(results, run(sizes, n_runs), sizes, n_runs)
    results.save(STUDIES_DIR)


if __name__ == "__main__":
    main()
