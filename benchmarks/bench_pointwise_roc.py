"""Pointwise ROC similarity: pair statistics without a pair loop, and the KKT solve against cvxpy.

Two tables, on MNIST-10k (``skrank.datasets.load_mnist``) reduced by PCA to d dimensions and
L2-normalised, as ``PointwiseROCSimilarity`` uses it:

1. Exact ``P`` and ``N`` (mean symmetrised outer products over positive and negative pairs) from
   class sums and the Gram matrix (``skrank.similarity.PairStatistics``, O(n d^2)) against explicit
   pair loops (O(n^2 d^2)): a Python loop over pairs (tiny n) and the same loop vectorised over
   blocks of pairs (small n). Both give the same matrices; the table gives the time ratio. Then
   the statistics of all 10,000 items at d = 784 (target: under 1 s).
2. The closed-form KKT solve (``skrank.similarity.solve_kkt``) against cvxpy with Clarabel
   (``solve_cvxpy``, duality-gap tolerances 1e-10, and Clarabel's defaults 1e-8) on the same
   problem, at a level where the constraint is active. Same optimum (relative Frobenius
   difference of A); the ratio of times (target: KKT >= 100x faster at d >= 256).
3. The cost of calibrating the decision threshold of ``PointwiseROCSimilarity`` at a 5%
   false-positive rate: scoring all negative pairs in blocks against the 250,000 uniformly
   sampled negative pairs the estimator uses beyond that many, and the false-positive rate the
   sampled threshold achieves on all negative pairs.

Run from the repository root: ``PYTHONPATH=. python benchmarks/bench_pointwise_roc.py``
(``--quick`` for a smoke run).
"""

import argparse
import time

import numpy as np
from sklearn.decomposition import PCA

from skrank.datasets import load_mnist
from skrank.similarity import PairStatistics, solve_cvxpy, solve_kkt
from skrank.similarity._pair_scores import (
    CALIBRATION_PAIRS,
    negative_pair_similarities,
    threshold_at_fpr,
)


def median_time(repeats, function, *args, **kwargs):
    """Median and spread (max - min) of the wall times of ``repeats`` calls, and the last result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return float(np.median(times)), float(np.ptp(times)), result


def mnist_features(d, n_samples):
    X, y = load_mnist(return_X_y=True)
    X, y = X[:n_samples].astype(np.float64), y[:n_samples]
    Z = PCA(d, random_state=0).fit_transform(X) if d < X.shape[1] else X - X.mean(axis=0)
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


def table_statistics(quick):
    print("\n1. Exact P and N: class sums and Gram matrix vs explicit pair loops (MNIST, PCA)")
    header = (
        f"{'n':>6} {'d':>4} {'loop':>14} {'loop s':>9} {'sums s':>9} {'ratio':>9} {'max diff':>9}"
    )
    print(header)
    cases = [(100, 16, statistics_python_loop), (1000, 16, statistics_blocked_pairs)]
    if not quick:
        cases += [
            (200, 64, statistics_python_loop),
            (2000, 64, statistics_blocked_pairs),
            (1000, 256, statistics_blocked_pairs),
        ]
    for n, d, loop in cases:
        X, y = mnist_features(d, n)
        loop_time, _, by_loop = median_time(1, loop, X, y)
        sums_time, _, by_sums = median_time(5, statistics_from_sums, X, y)
        name = "python" if loop is statistics_python_loop else "blocked numpy"
        print(
            f"{n:>6} {d:>4} {name:>14} {loop_time:>9.3f} {sums_time:>9.4f} "
            f"{loop_time / sums_time:>8.0f}x {difference(by_loop, by_sums):>9.1e}"
        )
    n, d = (2000, 784) if quick else (10000, 784)
    X, y = mnist_features(d, n)
    sums_time, spread, _ = median_time(5, statistics_from_sums, X, y)
    print(f"P and N of all {n} items at d = {d}: {sums_time:.3f} s (spread {spread:.3f} s, 5 runs)")


def table_solvers(quick):
    print("\n2. KKT closed form vs cvxpy (Clarabel), same problem, constraint active (MNIST-10k)")
    print(
        f"{'d':>4} {'kkt s':>9} {'cvxpy s':>9} {'ratio':>8} {'rel diff A':>11} "
        f"{'cvxpy 1e-8 s':>13} {'ratio':>8} {'rel diff A':>11}"
    )
    dims = [16, 64] if quick else [16, 64, 256, 784]
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
        print(
            f"{d:>4} {kkt_time:>9.5f} {tight_time:>9.3f} {tight_time / kkt_time:>7.0f}x "
            f"{tight_difference:>11.1e} {loose_time:>13.3f} {loose_time / kkt_time:>7.0f}x "
            f"{loose_difference:>11.1e}"
        )


def table_calibration(quick):
    print("\n3. Threshold at FPR 5%: all negative pairs (blocks) vs 250,000 sampled pairs (MNIST)")
    print(
        f"{'n':>6} {'d':>4} {'pairs':>10} {'exact s':>9} {'sample s':>9} {'ratio':>7} "
        f"{'FPR of sampled threshold':>25}"
    )
    cases = [(2000, 64)] if quick else [(5000, 64), (10000, 64), (10000, 784)]
    for n, d in cases:
        X, y = mnist_features(d, n)
        P, N = statistics_from_sums(X, y)
        A = solve_kkt(P, N, (-np.linalg.norm(N) + np.vdot(N, P) / np.linalg.norm(P)) / 2).A
        exact_time, _, exact = median_time(1, negative_pair_similarities, X, y, A, max_pairs=n * n)
        sample_time, _, sample = median_time(
            1, negative_pair_similarities, X, y, A, max_pairs=CALIBRATION_PAIRS, random_state=0
        )
        achieved = np.mean(exact > threshold_at_fpr(sample, 0.05))
        print(
            f"{n:>6} {d:>4} {exact.shape[0]:>10} {exact_time:>9.2f} {sample_time:>9.2f} "
            f"{exact_time / sample_time:>6.1f}x {achieved:>25.5f}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    table_statistics(args.quick)
    table_solvers(args.quick)
    table_calibration(args.quick)


if __name__ == "__main__":
    main()
