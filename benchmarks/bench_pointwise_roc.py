"""Pointwise ROC similarity: pair statistics without a pair loop, and the KKT solve against cvxpy.

On MNIST-10k reduced by PCA to d dimensions and L2-normalised, as ``PointwiseROCSimilarity``
uses it:

1. Exact ``P`` and ``N`` (mean symmetrised outer products over positive and negative pairs) from
   class sums and the Gram matrix (``PairStatistics``, O(n d^2)) against explicit pair loops
   (a Python loop over pairs, tiny n, and the loop vectorised over blocks of pairs); then the
   statistics of all 10,000 items at d = 784 (target: under 1 s).
2. The closed-form KKT solve (``solve_kkt``) against cvxpy with Clarabel (``solve_cvxpy``,
   tolerances 1e-10 and Clarabel's defaults 1e-8), constraint active: the relative Frobenius
   difference of A and the ratio of times (target: KKT >= 100x faster at d >= 256).
3. The threshold at a 5% false-positive rate from all negative pairs, in blocks, against the
   250,000 sampled negative pairs the estimator uses, and the sampled threshold's FPR on all.

Usage::

    python benchmarks/bench_pointwise_roc.py            # --quick: a smoke run
"""

import numpy as np
from _data import mnist_rows, pca
from _harness import parser, results_name, timed
from _results import Results

from skrank.similarity import (
    PairStatistics,
    negative_pair_similarities,
    solve_cvxpy,
    solve_kkt,
    threshold_at_fpr,
)


def median_time(repeats, function, *args, **kwargs):
    """Median and spread (max - min) of the wall times of ``repeats`` calls, and the last result."""
    runs = [timed(function, *args, **kwargs) for _ in range(repeats)]
    times = [seconds for _, seconds in runs]
    return float(np.median(times)), float(np.ptp(times)), runs[-1][0]


def mnist_features(d, n_samples):
    X, y = mnist_rows(n_samples, np.float64)
    Z = pca(X, n_components=d, svd_solver="auto")[0] if d < X.shape[1] else X - X.mean(axis=0)
    return Z / np.linalg.norm(Z, axis=1, keepdims=True), y


def statistics_from_sums(X, y):
    statistics = PairStatistics(X.shape[1]).update(X, y)
    return statistics.positive_matrix(), statistics.negative_matrix()


def statistics_python_loop(X, y):
    d = X.shape[1]
    sums = {True: np.zeros((d, d)), False: np.zeros((d, d))}
    counts = {True: 0, False: 0}
    for i in range(len(y)):
        for j in range(i + 1, len(y)):
            same = bool(y[i] == y[j])
            sums[same] += np.outer(X[i], X[j])
            counts[same] += 1
    return tuple((sums[s] + sums[s].T) / (2 * counts[s]) for s in (True, False))


def statistics_blocked_pairs(X, y, pairs_per_block=1 << 16):
    d = X.shape[1]
    sums = {True: np.zeros((d, d)), False: np.zeros((d, d))}
    counts = {True: 0, False: 0}
    all_first, all_second = np.triu_indices(len(y), k=1)
    for start in range(0, all_first.shape[0], pairs_per_block):
        first = all_first[start : start + pairs_per_block]
        second = all_second[start : start + pairs_per_block]
        same = y[first] == y[second]
        for s in (True, False):
            chosen = same == s
            sums[s] += X[first[chosen]].T @ X[second[chosen]]
            counts[s] += int(chosen.sum())
    return tuple((sums[s] + sums[s].T) / (2 * counts[s]) for s in (True, False))


def difference(first, second):
    return max(np.abs(a - b).max() for a, b in zip(first, second, strict=True))


def table_statistics(results, quick):
    cases = [(100, 16, statistics_python_loop), (1000, 16, statistics_blocked_pairs)]
    if not quick:
        cases += [
            (200, 64, statistics_python_loop),
            (2000, 64, statistics_blocked_pairs),
            (1000, 256, statistics_blocked_pairs),
        ]
    rows = []
    for n, d, loop in cases:
        X, y = mnist_features(d, n)
        loop_time, _, by_loop = median_time(1, loop, X, y)
        sums_time, _, by_sums = median_time(5, statistics_from_sums, X, y)
        name = "python" if loop is statistics_python_loop else "blocked numpy"
        rows.append(
            [n, d, name, loop_time, sums_time, loop_time / sums_time, difference(by_loop, by_sums)]
        )
    results.add_table(
        "1. Exact P and N: class sums and Gram matrix (PairStatistics) vs explicit pair loops "
        "(MNIST, PCA)",
        ["n", "d", "loop", "loop (s)", "class sums (s)", "ratio", "max abs diff"],
        rows,
        notes="python: a loop over the pairs i < j accumulating x_i x_j^T; blocked numpy: the "
        "same over blocks of 65,536 pairs. Loop: one call; class sums: median of 5.",
        show=True,
    )
    n, d = (2000, 784) if quick else (10000, 784)
    X, y = mnist_features(d, n)
    sums_time, spread, _ = median_time(5, statistics_from_sums, X, y)
    results.add_table(
        "1b. P and N of all items at d = 784 (target < 1 s at n = 10,000)",
        ["n", "d", "median of 5 (s)", "spread (s)"],
        [[n, d, sums_time, spread]],
        show=True,
    )


SOLVER_COLUMNS = ["d", "KKT (s)", "cvxpy (s)", "ratio", "rel. diff. A", "cvxpy 1e-8 (s)",
                  "ratio 1e-8", "rel. diff. A 1e-8"]  # fmt: skip


def table_solvers(results, quick):
    dims = [16, 64] if quick else [16, 64, 256, 784]
    rows = []
    for d in dims:
        X, y = mnist_features(d, 2000 if quick else 10000)
        P, N = statistics_from_sums(X, y)
        # Halfway between the lowest feasible level and the level where the constraint turns off.
        beta = (-np.linalg.norm(N) + np.vdot(N, P) / np.linalg.norm(P)) / 2
        kkt_time, _, kkt = median_time(20, solve_kkt, P, N, beta)
        assert kkt.case == "active"
        repeats = 1 if d >= 256 else 3
        tight_time, _, tight = median_time(repeats, solve_cvxpy, P, N, beta)
        loose_time, _, loose = median_time(
            repeats, solve_cvxpy, P, N, beta, tol_gap_abs=1e-8, tol_gap_rel=1e-8
        )
        tight_difference, loose_difference = (
            np.linalg.norm(solution.A - kkt.A) / np.linalg.norm(kkt.A)
            for solution in (tight, loose)
        )
        rows.append([d, kkt_time, tight_time, tight_time / kkt_time, tight_difference,
                     loose_time, loose_time / kkt_time, loose_difference])  # fmt: skip
    results.add_table(
        "2. KKT closed form (solve_kkt) vs cvxpy with Clarabel (solve_cvxpy), same problem, "
        f"constraint active (MNIST, n = {2000 if quick else 10000})",
        SOLVER_COLUMNS,
        rows,
        notes="KKT: median of 20 calls; cvxpy: median of 3 (one at d >= 256). cvxpy: duality-gap "
        "tolerances 1e-10 (solve_cvxpy's default); cvxpy 1e-8: Clarabel's own defaults. "
        "rel. diff. A = ||A_cvxpy - A_kkt||_F / ||A_kkt||_F. Target: KKT >= 100x faster at "
        "d >= 256.",
        show=True,
    )


CALIBRATION_COLUMNS = ["n", "d", "negative pairs", "all pairs (s)", "sampled (s)", "ratio",
                       "FPR of sampled threshold"]  # fmt: skip


def table_calibration(results, quick):
    cases = [(2000, 64)] if quick else [(5000, 64), (10000, 64), (10000, 784)]
    rows = []
    for n, d in cases:
        X, y = mnist_features(d, n)
        P, N = statistics_from_sums(X, y)
        A = solve_kkt(P, N, (-np.linalg.norm(N) + np.vdot(N, P) / np.linalg.norm(P)) / 2).A
        exact_time, _, exact = median_time(1, negative_pair_similarities, X, y, A, max_pairs=n * n)
        sample_time, _, sample = median_time(1, negative_pair_similarities, X, y, A, random_state=0)
        achieved = np.mean(exact > threshold_at_fpr(sample, 0.05))
        rows.append(
            [n, d, exact.shape[0], exact_time, sample_time, exact_time / sample_time, achieved]
        )
    sampled = sample.shape[0]  # the estimator's calibration sample (max_pairs=None)
    results.add_table(
        f"3. Threshold at FPR 5%: all negative pairs (in blocks) vs {sampled:,} "
        "sampled pairs (MNIST)",
        CALIBRATION_COLUMNS,
        rows,
        notes="FPR of sampled threshold: the false-positive rate, on all negative pairs, of the "
        "threshold computed from the sample (its standard error at 5%: "
        f"{np.sqrt(0.05 * 0.95 / sampled):.1e}).",
        show=True,
    )


def main(argv=None):
    args = parser(__doc__, "quick", "tag").parse_args(argv)
    results = Results(results_name("bench_pointwise_roc", args), packages=("cvxpy", "clarabel"))
    table_statistics(results, args.quick)
    table_solvers(results, args.quick)
    table_calibration(results, args.quick)
    results.save()


if __name__ == "__main__":
    main()
