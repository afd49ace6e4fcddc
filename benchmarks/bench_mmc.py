"""Benchmark of MMC: fit time and achieved figure of merit, side by side in one run.

On the same data and evaluation (the figure of merit ``mean dissimilar d_A / sqrt(mean similar
d_A^2)`` over all pairs, and held-out kNN accuracy on MNIST): skrank's MMC against a cvxpy
(Clarabel) solve of the same convex problem on a small subsample of digits and against
metric-learn 0.7's ``MMC_Supervised`` in its own environment (``_harness.py``; its rows are
skipped with a message without it). Data: sklearn's digits (PCA 31, all 1,797 items) and
MNIST-10k (stratified 8,000 / 2,000, PCA fitted on the training part keeping 90% of the
variance).

Usage::

    python benchmarks/bench_mmc.py            # full run (~12 minutes)
    python benchmarks/bench_mmc.py --quick    # smoke run
"""

import sys

import numpy as np
from _data import mnist_split, pca
from _harness import METRIC_LEARN_PYTHON, ChildFailed, parser, results_name, timed, versions_in
from _metric_learn_fit import fit_metric_learn
from _results import Results
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier

from skrank import MMC
from skrank.similarity import figure_of_merit, similar_pair_scatter

DIGITS_NOTE = (
    "Figure of merit: mean d_A over dissimilar pairs / sqrt(mean d_A^2 over similar pairs), over "
    "all pairs (what MMC.score returns). metric-learn: MMC_Supervised, random_state=0, "
    "max_iter=100."
)


def merit(X, y, components):
    """Figure of merit of the metric ``A = L^T L`` over all pairs of ``(X, y)``."""
    return figure_of_merit(X @ components.T, y)[0]


def knn_accuracy(X_train, y_train, X_test, y_test, components=None, n_neighbors=5):
    """Held-out kNN accuracy in the metric (Euclidean when ``components`` is None)."""
    if components is not None:
        X_train, X_test = X_train @ components.T, X_test @ components.T
    knn = KNeighborsClassifier(n_neighbors=n_neighbors).fit(X_train, y_train)
    return knn.score(X_test, y_test)


def fit_skrank(X, y, **params):
    mmc = MMC(random_state=0, scatter_ridge=1e-8, min_rank=None, **params)
    _, seconds = timed(mmc.fit, X, y)
    return {
        "components": mmc.components_,
        "seconds": seconds,
        "n_iter": mmc.n_iter_,
        "converged": mmc.converged_,
    }


def fit_metric_learn_mmc(X, y, **params):
    """Fit MMC_Supervised in the metric-learn environment; ``None`` if it is unavailable."""
    try:
        return fit_metric_learn("MMC_Supervised", X, y, params)
    except ChildFailed as failure:
        print(f"  metric-learn: {failure.reason}", file=sys.stderr, flush=True)
        return None


def fit_cvxpy(X, y):
    """The same problem, all negative pairs, objective in DCP form, solved by Clarabel."""
    import cvxpy as cp

    first, second = np.triu_indices(X.shape[0], k=1)
    negative = y[first] != y[second]
    differences = X[first[negative]] - X[second[negative]]
    similar = similar_pair_scatter(X, y)[0]

    def solve():
        A = cp.Variable((X.shape[1], X.shape[1]), PSD=True)
        squared = cp.sum(cp.multiply(differences @ A, differences), axis=1)
        problem = cp.Problem(
            cp.Maximize(cp.sum(cp.sqrt(squared)) / differences.shape[0]),
            [cp.trace(similar @ A) <= 1],
        )
        problem.solve(solver="CLARABEL")
        return A

    A, seconds = timed(solve)
    eigenvalues, eigenvectors = np.linalg.eigh((A.value + A.value.T) / 2)
    components = (eigenvectors * np.sqrt(np.maximum(eigenvalues, 0))).T
    return {"components": components, "seconds": seconds, "n_iter": -1, "converged": True}


def announced(runs, X, y):
    """``[(name, fit(X, y, **params))]`` of ``runs`` = ``[(name, fit, params)]``, telling on
    stderr what runs (metric-learn fits take minutes)."""
    fits = []
    for name, fit, params in runs:
        print(f"  fitting {name} ...", file=sys.stderr, flush=True)
        fits.append((name, fit(X, y, **params)))
    return fits


def cvxpy_section(results, quick):
    X, y = load_digits(return_X_y=True)
    # 40 items span at most 30 within-class directions: with 31 dimensions the similar-pair
    # scatter is singular and the problem unbounded, so the smoke run keeps 10.
    d = 10 if quick else 31
    X = PCA(n_components=d, random_state=0).fit_transform(X)
    n = 40 if quick else 100
    index = np.random.RandomState(0).choice(X.shape[0], n, replace=False)
    X, y = X[index], y[index]
    reference, ours = fit_cvxpy(X, y), fit_skrank(X, y)
    reference_objective = figure_of_merit(X @ reference["components"].T, y)[1]
    rows = []
    for name, fit in (("cvxpy (Clarabel)", reference), ("skrank MMC (all pairs)", ours)):
        _, objective, constraint = figure_of_merit(X @ fit["components"].T, y)
        rows.append([name, round(fit["seconds"], 3), f"{objective:.6f}", f"{constraint:.6f}",
                     f"{objective / reference_objective - 1:+.1e}"])  # fmt: skip
    speed_up = reference["seconds"] / ours["seconds"]
    results.add_figure("cvxpy_seconds_over_skrank_seconds", speed_up)
    results.add_table(
        f"Digits subsample n={n}, PCA {d}: exactness against cvxpy (skrank {speed_up:.0f}x faster)",
        ["solver", "fit s", "objective", "constraint", "objective vs cvxpy"],
        rows,
        notes="objective vs cvxpy: relative difference of skrank's objective from Clarabel's "
        "(negative: below it).",
        show=True,
    )


def digits_section(results, quick):
    X, y = load_digits(return_X_y=True)
    X = PCA(n_components=31, random_state=0).fit_transform(X)
    if quick:
        X, y = X[:600], y[:600]
    n, most = X.shape[0], 2000 if quick else 20000
    runs = [
        ("skrank MMC, all pairs", fit_skrank, {}),
        ("skrank MMC, B=n tuples", fit_skrank, {"negatives": "tuples"}),
        (f"skrank MMC, B={most} pairs", fit_skrank, {"negatives": "pairs", "n_samples": most}),
        ("metric-learn, 200 constraints", fit_metric_learn_mmc, {"n_constraints": 200}),
        (f"metric-learn, {most} constraints", fit_metric_learn_mmc, {"n_constraints": most}),
    ]
    fits = announced(runs, X, y)
    reference = fits[-1][1]
    rows = [
        [name, round(fit["seconds"], 2), f"{merit(X, y, fit['components']):.4f}", fit["n_iter"],
         fit["converged"], round(reference["seconds"] / fit["seconds"], 1) if reference else None]
        for name, fit in fits
        if fit is not None
    ]  # fmt: skip
    rows.append(["Euclidean metric", "-", f"{merit(X, y, np.eye(X.shape[1])):.4f}", "-", "-", "-"])
    columns = ["method", "fit s", "figure of merit", "n_iter", "converged"]
    title = f"Digits n={n}, PCA 31: figure of merit over all pairs"
    results.add_table(
        title, [*columns, f"speed-up vs ML {most}"], rows, notes=DIGITS_NOTE, show=True
    )


def mnist_features(n_components, n_train=None, quick=False):
    X_train, X_test, y_train, y_test = mnist_split()
    if n_train is not None:
        X_train, y_train = X_train[:n_train], y_train[:n_train]
    if quick:
        X_test, y_test = X_test[:500], y_test[:500]
    return (*pca(X_train, X_test, n_components=n_components), y_train, y_test)


def mnist_section(results, quick, n_train, n_components, runs):
    X_train, X_test, y_train, y_test = mnist_features(n_components, n_train, quick)
    n, d = X_train.shape
    fits = announced(runs(n), X_train, y_train)

    def scores(components):
        return [f"{merit(X_train, y_train, components):.4f}",
                f"{merit(X_test, y_test, components):.4f}",
                f"{knn_accuracy(X_train, y_train, X_test, y_test, components):.4f}"]  # fmt: skip

    rows = [
        [name, round(fit["seconds"], 2), *scores(fit["components"]), fit["n_iter"],
         fit["converged"]]
        for name, fit in fits
        if fit is not None
    ]  # fmt: skip
    rows.append(["Euclidean metric", "-", *scores(np.eye(d)), "-", "-"])
    results.add_table(
        f"MNIST-10k, n_train={n}, d={d} (PCA), {X_test.shape[0]} test items",
        ["method", "fit s", "merit train", "merit test", "5-NN test acc", "n_iter", "converged"],
        rows,
        show=True,
    )


def main(argv=None):
    args = parser(__doc__, "quick", "tag").parse_args(argv)
    results = Results(results_name("bench_mmc", args), packages=("cvxpy", "clarabel"))
    if METRIC_LEARN_PYTHON.exists():
        results.add_figure(
            "metric_learn_versions",
            versions_in(METRIC_LEARN_PYTHON, ("metric-learn", "scikit-learn", "numpy", "scipy")),
        )
    else:
        print("metric-learn environment not found: its rows are skipped (see _harness.py).")

    cvxpy_section(results, args.quick)
    digits_section(results, args.quick)

    most = 2000 if args.quick else 20000
    mnist_section(results, args.quick, 1000 if args.quick else None, 0.9, lambda n: [
        ("skrank MMC, all pairs", fit_skrank, {}),
        ("skrank MMC, B=0.15n tuples", fit_skrank,
         {"negatives": "tuples", "n_samples": int(0.15 * n)}),
        ("skrank MMC, B=n tuples", fit_skrank, {"negatives": "tuples"}),
        (f"metric-learn, {most} constraints", fit_metric_learn_mmc, {"n_constraints": most}),
    ])  # fmt: skip
    if not args.quick:  # d = 100, n = 2,000, metric-learn's default constraints
        mnist_section(results, False, 2000, 100, lambda n: [
            ("skrank MMC, all pairs", fit_skrank, {}),
            ("metric-learn, default constraints", fit_metric_learn_mmc, {}),
        ])  # fmt: skip
    results.save()


if __name__ == "__main__":
    main()
