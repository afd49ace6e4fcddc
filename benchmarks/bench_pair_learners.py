"""The pair learners (MMC, PointwiseROCSimilarity) against their peers, one part a results file.

``--part`` (default ``learners``), each part's protocol in its section of benchmarks/README.md:

* ``learners`` (``bench_pair_learners.json``; section "Pair learners at the measures users
  read"): MNIST-10k, stratified 3,000 / 2,000 splits (``python -m skrank``'s MMC row's split at
  seed 0), a seed a split; the k-NN task (PCA 90%) and the pair task (32 principal axes, not
  centred); fit times include the grid searches of the selected rows.
* ``mmc`` (``bench_mmc.json``; section "MMC"): MMC's fit time and figure of merit against a
  cvxpy (Clarabel) solve on a digits subsample and against metric-learn's ``MMC_Supervised``.
* ``solver`` (``bench_pointwise_roc.json``; section "Pointwise ROC similarity"): exact ``P``
  and ``N`` against pair loops, ``solve_kkt`` against cvxpy, the FPR-5% threshold.
* ``pairs`` (``bench_pairs.json``; section "Learning from given pairs"): fits on given pairs
  against the label path, a validation screen of MMC's settings, metric-learn's ``MMC``.

metric-learn runs in its own environment (``_metric_learn_fit.py``), each fit stopped after
``--timeout`` seconds (default 300 for ``learners``, 900 for ``pairs``); its rows say so where
it is absent.

Usage::

    python benchmarks/bench_pair_learners.py                  # seeds 0-4 (~30 minutes)
    python benchmarks/bench_pair_learners.py --part mmc       # ~6-12 minutes
    python benchmarks/bench_pair_learners.py --part solver    # ~3 minutes
    python benchmarks/bench_pair_learners.py --part pairs     # ~25 minutes
    python benchmarks/bench_pair_learners.py --part mmc --quick   # a smoke run of a part
"""

import functools
import itertools
import sys

import numpy as np
from _data import mnist_rows, mnist_split, pca
from _harness import METRIC_LEARN_PYTHON, ChildFailed, parser, results_name, timed, versions_in
from _metric_learn_fit import fit_metric_learn
from _results import Results, summary
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import (
    GridSearchCV,
    RepeatedStratifiedKFold,
    StratifiedKFold,
    train_test_split,
)
from sklearn.neighbors import KNeighborsClassifier, NeighborhoodComponentsAnalysis
from sklearn.pipeline import Pipeline
from threadpoolctl import threadpool_limits

from skrank import MMC, PointwiseROCSimilarity
from skrank.metrics import get_scorer, pairwise_roc_score
from skrank.sampling import sample_negative_pairs
from skrank.similarity import (
    PairStatistics,
    figure_of_merit,
    negative_pair_similarities,
    one_standard_error_rule,
    similar_pair_scatter,
    solve_cvxpy,
    solve_kkt,
    threshold_at_fpr,
)

# The paper's criterion (no trace penalty to speak of, no rank control), as metric-learn solves.
PAPER = {"scatter_ridge": 1e-8, "min_rank": None}
# MMC on sampled tuples (fast; see the user guide), as in python -m skrank's k-NN rows.
SAMPLED = {"negatives": "tuples", "n_samples": 1500, "random_state": 0}


# ------------------------------------------------------------------------------ shared pieces
def digits(n_components):
    """sklearn's digits on their first ``n_components`` principal axes: ``X, y``."""
    X, y = load_digits(return_X_y=True)
    return PCA(n_components=n_components, random_state=0).fit_transform(X), y


def median_time(repeats, function, *args, **kwargs):
    """Median and spread (max - min) of the wall times of ``repeats`` calls, and the last
    result (the machine is shared)."""
    runs = [timed(function, *args, **kwargs) for _ in range(repeats)]
    times = [seconds for _, seconds in runs]
    return float(np.median(times)), float(np.ptp(times)), runs[-1][0]


def label_merit(X, y, components):
    """Figure of merit of the metric ``A = L^T L`` over all pairs of ``(X, y)``."""
    return figure_of_merit(X @ components.T, y)[0]


def knn_accuracy(Z_train, y_train, Z_test, y_test, n_neighbors=5):
    return KNeighborsClassifier(n_neighbors).fit(Z_train, y_train).score(Z_test, y_test)


# ------------------------------------------------------------------------------ learners
ROC_GRID = {"preprocessing": ["none", "standardize"], "identity_weight": [0.0, 1.0, 3.0, 10.0]}
COLUMNS = ["method", "5-NN accuracy", "TPR@FPR=0.01", "TPR@FPR=0.05", "fit seconds"]


def linear_scores(Z_train, y_train, Z_test, y_test):
    """5-NN accuracy and pair TPRs of the Euclidean distance between rows of the embeddings."""
    squared = np.einsum("ij,ij->i", Z_test, Z_test)
    similarity = 2 * Z_test @ Z_test.T - squared[:, None] - squared[None, :]
    accuracy = knn_accuracy(Z_train, y_train, Z_test, y_test)
    return [accuracy, *pairwise_roc_score(similarity, y_test, [0.01, 0.05])]


def similarity_scores(similarity_to_train, similarity_test, y_train, y_test):
    """The same from similarities in [0, 1] (neighbours: the most similar training items)."""
    knn = KNeighborsClassifier(5, metric="precomputed").fit(
        np.zeros((len(y_train), len(y_train))), y_train
    )
    accuracy = knn.score(np.clip(1.0 - similarity_to_train, 0.0, None), y_test)
    return [accuracy, *pairwise_roc_score(similarity_test, y_test, [0.01, 0.05])]


def roc_model_scores(model, Z_train, y_train, Z_test, y_test):
    to_train, test = model.pairwise_similarity(Z_test, Z_train), model.pairwise_similarity(Z_test)
    return similarity_scores(to_train, test, y_train, y_test)


def validation_summary(search):
    """What the MMC selection saw on validation folds: Euclidean, best, its SE, the choice."""
    results = search.cv_results_
    n_splits = search.n_splits_
    best = int(np.argmax(results["mean_test_score"]))
    splits = np.array([results[f"split{i}_test_score"][best] for i in range(n_splits)])
    return [
        results["mean_test_score"][0],  # the first candidate: passthrough
        str({k.removeprefix("mmc__"): v for k, v in results["params"][best].items()}),
        results["mean_test_score"][best],
        splits.std(ddof=1) / np.sqrt(n_splits),
        str({k.removeprefix("mmc__"): v for k, v in search.best_params_.items()}),
    ]


def mmc_selection():
    """The user guide's selection of MMC's options by 5-NN accuracy (an unfitted search)."""
    all_pairs = {"scatter_ridge": [1.0, 10.0, 100.0], "min_rank": [0.25, 0.5, 0.75, "full"]}
    local = {"positives": ["nearest"], "negatives": ["nearest"], "n_neighbors": [10, 20],
             "scatter_ridge": [1.0, 10.0], "min_rank": [0.25, 0.5]}  # fmt: skip
    grid = [{"mmc": ["passthrough"]}] + [
        {f"mmc__{name}": values for name, values in candidates.items()}
        for candidates in (all_pairs, local)
    ]
    return GridSearchCV(
        Pipeline([("mmc", MMC(**SAMPLED)), ("knn", KNeighborsClassifier(n_neighbors=5))]),
        grid,
        scoring="accuracy",
        cv=RepeatedStratifiedKFold(n_splits=5, n_repeats=3, random_state=0),
        refit=one_standard_error_rule({"mmc": "passthrough"}),
    )


def knn_task(X_train, y_train, X_test, y_test, metric_learn, timeout, selection):
    Z_train, Z_test = pca(X_train, X_test)

    def row(name, embed, seconds):
        return [name, *linear_scores(embed(Z_train), y_train, embed(Z_test), y_test), seconds]

    rows = [row("Euclidean", lambda Z: Z, 0.0)]
    for name, params in (("MMC, defaults", {}), ("MMC, paper's criterion", PAPER)):
        model, seconds = timed(lambda params=params: MMC(**SAMPLED, **params).fit(Z_train, y_train))
        rows.append(row(name, model.transform, seconds))
    search, seconds = timed(lambda: mmc_selection().fit(Z_train, y_train))
    selection.append(validation_summary(search))
    embed = search.best_estimator_[:-1].transform  # the chosen MMC, or passthrough
    rows.append(row(f"MMC, CV-selected {selection[-1][-1]}", embed, seconds))
    nca = NeighborhoodComponentsAnalysis(random_state=0, max_iter=100)
    nca, seconds = timed(nca.fit, Z_train, y_train)
    rows.append(row("sklearn NCA (max_iter=100)", nca.transform, seconds))
    for learner, params in (("ITML_Supervised", {}), ("LMNN", {"n_neighbors": 5, "max_iter": 100})):
        name = f"metric-learn {learner} {params or '(defaults)'}"
        try:
            if not metric_learn:
                raise ChildFailed("not run (--quick)")
            fitted = fit_metric_learn(learner, Z_train, y_train, params, timeout)
        except ChildFailed as failure:
            print(f"{name}: skipped, {failure.reason}", file=sys.stderr)
            rows.append([name, None, None, None, failure.reason])
            continue
        rows.append(row(name, lambda Z, L=fitted["components"]: Z @ L.T, fitted["seconds"]))
    return rows


def pair_task(X_train, y_train, X_test, y_test):
    Z_train, Z_test = pca(X_train, X_test, n_components=32, centred=False, svd_solver="auto")
    U_train, U_test = (Z / np.linalg.norm(Z, axis=1, keepdims=True) for Z in (Z_train, Z_test))
    rows = [
        ["cosine", *similarity_scores(U_test @ U_train.T, U_test @ U_test.T, y_train, y_test), 0.0],
        ["Euclidean", *linear_scores(Z_train, y_train, Z_test, y_test), 0.0],
    ]
    base = {"threshold_fpr": 0.01, "random_state": 0}
    for name, params in (
        ("PointwiseROCSimilarity, defaults", {}),
        ("PointwiseROCSimilarity, paper's criterion", {"identity_weight": 0.0}),
    ):
        model, seconds = timed(PointwiseROCSimilarity(**base, **params).fit, Z_train, y_train)
        rows.append([name, *roc_model_scores(model, Z_train, y_train, Z_test, y_test), seconds])
    search = GridSearchCV(
        PointwiseROCSimilarity(**base),
        ROC_GRID,
        scoring=get_scorer("tpr@fpr=0.01"),
        cv=StratifiedKFold(5, shuffle=True, random_state=0),
    )
    search, seconds = timed(lambda: search.fit(Z_train, y_train))
    best = roc_model_scores(search.best_estimator_, Z_train, y_train, Z_test, y_test)
    rows.append([f"PointwiseROCSimilarity, CV-selected {search.best_params_}", *best, seconds])
    mmc, seconds = timed(lambda: MMC(**SAMPLED).fit(Z_train, y_train))
    embedded = linear_scores(mmc.transform(Z_train), y_train, mmc.transform(Z_test), y_test)
    rows.append(["MMC, defaults", *embedded, seconds])
    return rows


def summarise(per_seed):
    """Rows ``method, mean ± std of each metric`` over seeds (methods in the first seed's order)."""
    names = [row[0].split(" {")[0] for row in per_seed[0]]
    rows = []
    for index, name in enumerate(names):
        values = [rows[index][1:-1] for rows in per_seed]
        seconds = [rows[index][-1] for rows in per_seed]
        cells = [summary(column) for column in zip(*values, strict=True)]
        numeric = [s for s in seconds if isinstance(s, float)]
        rows.append([name, *cells, f"{np.mean(numeric):.1f}" if numeric else seconds[0]])
    return rows


def learners_part(results, args):
    seeds = [0] if args.quick else args.seeds
    tasks = {
        "k-NN task, MNIST 3k/2k, PCA 90%": [],
        "pair task, MNIST 3k/2k, PCA-32 (not centred)": [],
    }
    selection = []
    with threadpool_limits(limits=1):
        for seed in seeds:
            X_train, X_test, y_train, y_test = mnist_split(3000, 2000, seed, np.float32)
            for title, task in zip(tasks, (knn_task, pair_task), strict=True):
                extra = (not args.quick, args.timeout, selection) if task is knn_task else ()
                rows = task(X_train, y_train, X_test, y_test, *extra)
                tasks[title].append(rows)
                results.add_table(f"{title}, seed {seed}", COLUMNS, rows, show=True)
            results.save()  # after every seed: a long run leaves what it measured
    results.add_table(
        "MMC selection on validation folds (5 x 3 repeated stratified folds of the training part)",
        ["seed", "Euclidean CV", "best candidate", "best CV", "best SE", "chosen"],
        [[seed, *row] for seed, row in zip(seeds, selection, strict=True)],
        notes="Validation 5-NN accuracy only (no test data); the chosen candidate is the best "
        "unless the Euclidean metric is within one standard error of it.",
    )
    for title, per_seed in tasks.items():
        results.add_table(
            f"{title}: mean ± std over seeds {seeds}",
            COLUMNS,
            summarise(per_seed),
            notes="Test metrics; fit seconds: mean over seeds (one core, shared machine: noisy).",
        )


# ------------------------------------------------------------------------------ mmc
def fit_skrank(X, y, **params):
    mmc = MMC(random_state=0, **PAPER, **params)
    _, seconds = timed(mmc.fit, X, y)
    return {"components": mmc.components_, "seconds": seconds, "n_iter": mmc.n_iter_,
            "converged": mmc.converged_}  # fmt: skip


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
    # 40 items span at most 30 within-class directions: with 31 dimensions the similar-pair
    # scatter is singular and the problem unbounded, so the smoke run keeps 10.
    d, n = (10, 40) if quick else (31, 100)
    X, y = digits(d)
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
    X, y = digits(31)
    if quick:
        X, y = X[:600], y[:600]
    n, most = X.shape[0], 2000 if quick else 20000
    fits = announced([
        ("skrank MMC, all pairs", fit_skrank, {}),
        ("skrank MMC, B=n tuples", fit_skrank, {"negatives": "tuples"}),
        (f"skrank MMC, B={most} pairs", fit_skrank, {"negatives": "pairs", "n_samples": most}),
        ("metric-learn, 200 constraints", fit_metric_learn_mmc, {"n_constraints": 200}),
        (f"metric-learn, {most} constraints", fit_metric_learn_mmc, {"n_constraints": most}),
    ], X, y)  # fmt: skip
    reference = fits[-1][1]
    rows = [
        [name, round(fit["seconds"], 2), f"{label_merit(X, y, fit['components']):.4f}",
         fit["n_iter"], fit["converged"],
         round(reference["seconds"] / fit["seconds"], 1) if reference else None]
        for name, fit in fits
        if fit is not None
    ]  # fmt: skip
    euclidean = f"{label_merit(X, y, np.eye(X.shape[1])):.4f}"
    rows.append(["Euclidean metric", "-", euclidean, "-", "-", "-"])
    results.add_table(
        f"Digits n={n}, PCA 31: figure of merit over all pairs",
        ["method", "fit s", "figure of merit", "n_iter", "converged", f"speed-up vs ML {most}"],
        rows,
        notes="Figure of merit: mean d_A over dissimilar pairs / sqrt(mean d_A^2 over similar "
        "pairs), over all pairs (what MMC.score returns). metric-learn: MMC_Supervised, "
        "random_state=0, max_iter=100.",
        show=True,
    )


def mnist_section(results, quick, n_train, n_components, runs):
    X_train, X_test, y_train, y_test = mnist_split()
    X_train, y_train = X_train[:n_train], y_train[:n_train]
    if quick:
        X_test, y_test = X_test[:500], y_test[:500]
    X_train, X_test = pca(X_train, X_test, n_components=n_components)
    n, d = X_train.shape
    fits = announced(runs(n), X_train, y_train)

    def scores(components):
        Z_train, Z_test = X_train @ components.T, X_test @ components.T
        return [f"{label_merit(X_train, y_train, components):.4f}",
                f"{label_merit(X_test, y_test, components):.4f}",
                f"{knn_accuracy(Z_train, y_train, Z_test, y_test):.4f}"]  # fmt: skip

    rows = [[name, round(fit["seconds"], 2), *scores(fit["components"]), fit["n_iter"],
             fit["converged"]] for name, fit in fits if fit is not None]  # fmt: skip
    rows.append(["Euclidean metric", "-", *scores(np.eye(d)), "-", "-"])
    results.add_table(
        f"MNIST-10k, n_train={n}, d={d} (PCA), {X_test.shape[0]} test items",
        ["method", "fit s", "merit train", "merit test", "5-NN test acc", "n_iter", "converged"],
        rows,
        show=True,
    )


def mmc_part(results, args):
    if METRIC_LEARN_PYTHON.exists():
        packages = ("metric-learn", "scikit-learn", "numpy", "scipy")
        results.add_figure("metric_learn_versions", versions_in(METRIC_LEARN_PYTHON, packages))
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


# ------------------------------------------------------------------------------ solver
def unit_mnist(d, n_samples):
    """The first ``n_samples`` MNIST digits on ``d`` principal axes (centred), unit rows."""
    X, y = mnist_rows(n_samples, np.float64)
    Z = pca(X, n_components=d, svd_solver="auto")[0] if d < X.shape[1] else X - X.mean(axis=0)
    return Z / np.linalg.norm(Z, axis=1, keepdims=True), y


def statistics_from_sums(X, y):
    statistics = PairStatistics(X.shape[1]).update(X, y)
    return statistics.positive_matrix(), statistics.negative_matrix()


def statistics_by_pairs(X, y, pairs_per_block=None):
    """P and N summed over the pairs i < j: one by one in Python (``pairs_per_block`` None),
    else over blocks of ``pairs_per_block`` pairs in numpy."""
    d = X.shape[1]
    sums = {True: np.zeros((d, d)), False: np.zeros((d, d))}
    counts = {True: 0, False: 0}
    if pairs_per_block is None:
        for i in range(len(y)):
            for j in range(i + 1, len(y)):
                same = bool(y[i] == y[j])
                sums[same] += np.outer(X[i], X[j])
                counts[same] += 1
        return tuple((sums[s] + sums[s].T) / (2 * counts[s]) for s in (True, False))
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


def active_level(P, N):
    """Halfway between the lowest feasible level and the level where the constraint turns off."""
    return (-np.linalg.norm(N) + np.vdot(N, P) / np.linalg.norm(P)) / 2


def statistics_tables(results, args):
    cases = [(100, 16, None), (1000, 16, 1 << 16)]  # pairs per block: None, one by one
    if not args.quick:
        cases += [(200, 64, None), (2000, 64, 1 << 16), (1000, 256, 1 << 16)]
    rows = []
    for n, d, block in cases:
        X, y = unit_mnist(d, n)
        loop_time, _, by_loop = median_time(1, statistics_by_pairs, X, y, block)
        sums_time, _, by_sums = median_time(5, statistics_from_sums, X, y)
        name = "python" if block is None else "blocked numpy"
        difference = max(np.abs(a - b).max() for a, b in zip(by_loop, by_sums, strict=True))
        rows.append([n, d, name, loop_time, sums_time, loop_time / sums_time, difference])
    results.add_table(
        "1. Exact P and N: class sums and Gram matrix (PairStatistics) vs explicit pair loops "
        "(MNIST, PCA)",
        ["n", "d", "loop", "loop (s)", "class sums (s)", "ratio", "max abs diff"],
        rows,
        notes="python: a loop over the pairs i < j accumulating x_i x_j^T; blocked numpy: the "
        "same over blocks of 65,536 pairs. Loop: one call; class sums: median of 5.",
        show=True,
    )
    n, d = (2000, 784) if args.quick else (10000, 784)
    sums_time, spread, _ = median_time(5, statistics_from_sums, *unit_mnist(d, n))
    results.add_table(
        "1b. P and N of all items at d = 784 (target < 1 s at n = 10,000)",
        ["n", "d", "median of 5 (s)", "spread (s)"],
        [[n, d, sums_time, spread]],
        show=True,
    )


def solver_table(results, args):
    rows = []
    for d in [16, 64] if args.quick else [16, 64, 256, 784]:
        P, N = statistics_from_sums(*unit_mnist(d, 2000 if args.quick else 10000))
        beta = active_level(P, N)
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
        f"constraint active (MNIST, n = {2000 if args.quick else 10000})",
        ["d", "KKT (s)", "cvxpy (s)", "ratio", "rel. diff. A", "cvxpy 1e-8 (s)", "ratio 1e-8",
         "rel. diff. A 1e-8"],
        rows,
        notes="KKT: median of 20 calls; cvxpy: median of 3 (one at d >= 256). cvxpy: duality-gap "
        "tolerances 1e-10 (solve_cvxpy's default); cvxpy 1e-8: Clarabel's own defaults. "
        "rel. diff. A = ||A_cvxpy - A_kkt||_F / ||A_kkt||_F. Target: KKT >= 100x faster at "
        "d >= 256.",
        show=True,
    )  # fmt: skip


def calibration_table(results, args):
    rows = []
    for n, d in [(2000, 64)] if args.quick else [(5000, 64), (10000, 64), (10000, 784)]:
        X, y = unit_mnist(d, n)
        P, N = statistics_from_sums(X, y)
        A = solve_kkt(P, N, active_level(P, N)).A
        exact_time, _, exact = median_time(1, negative_pair_similarities, X, y, A, max_pairs=n * n)
        sample_time, _, sample = median_time(1, negative_pair_similarities, X, y, A, random_state=0)
        achieved = np.mean(exact > threshold_at_fpr(sample, 0.05))
        rows.append([n, d, exact.shape[0], exact_time, sample_time, exact_time / sample_time,
                     achieved])  # fmt: skip
    sampled = sample.shape[0]  # the estimator's calibration sample (max_pairs=None)
    results.add_table(
        f"3. Threshold at FPR 5%: all negative pairs (in blocks) vs {sampled:,} "
        "sampled pairs (MNIST)",
        ["n", "d", "negative pairs", "all pairs (s)", "sampled (s)", "ratio",
         "FPR of sampled threshold"],
        rows,
        notes="FPR of sampled threshold: the false-positive rate, on all negative pairs, of the "
        "threshold computed from the sample (its standard error at 5%: "
        f"{np.sqrt(0.05 * 0.95 / sampled):.1e}).",
        show=True,
    )  # fmt: skip


# ------------------------------------------------------------------------------ pairs
def relative_difference(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def equality_section(results, args):
    n = 200 if args.quick else 500
    X, y = (part[:n] for part in digits(20))
    first, second = np.triu_indices(n, k=1)  # every pair i < j: 1 (same class) or -1
    indices, labels = np.stack([first, second], axis=1), np.where(y[first] == y[second], 1, -1)
    pairs = X[indices]
    rows = []

    def mmc_row(name, n_pairs, labelled, given):
        A_given, A_labelled = given.get_mahalanobis_matrix(), labelled.get_mahalanobis_matrix()
        rows.append([name, n_pairs, f"{relative_difference(A_given, A_labelled):.1e}",
                     f"{given.objective_[-1] / labelled.objective_[-1] - 1:+.1e}",
                     f"{labelled.n_iter_} / {given.n_iter_}"])  # fmt: skip

    labelled = MMC(**PAPER).fit(X, y)
    n_all = indices.shape[0]
    mmc_row("MMC, all pairs, (n, 2, d) array", n_all, labelled, MMC(**PAPER).fit(pairs, labels))
    given = MMC(**PAPER, items=X).fit(indices, labels)
    mmc_row("MMC, all pairs, row indices", n_all, labelled, given)
    # The label path's sample of negative pairs (same random_state), given as pairs.
    n_samples = 2 * n
    labelled = MMC(**PAPER, negatives="pairs", n_samples=n_samples, random_state=0).fit(X, y)
    sample = sample_negative_pairs(y, n_samples, np.random.RandomState(0))
    similar = indices[labels == 1]
    sampled = np.concatenate([similar, np.stack([sample.first, sample.second], axis=1)])
    sampled_labels = np.r_[np.ones(similar.shape[0]), -np.ones(n_samples)]
    given = MMC(**PAPER, items=X).fit(sampled, sampled_labels)
    mmc_row("MMC, sampled negative pairs, row indices", sampled.shape[0], labelled, given)
    # A level where the constraint is active (PCA-centred data have a narrow useful range).
    alpha = PointwiseROCSimilarity(random_state=0).fit(X, y).alpha_
    labelled = PointwiseROCSimilarity(alpha=alpha).fit(X, y)
    given = PointwiseROCSimilarity(alpha=alpha).fit(pairs, labels)
    rows.append([f"PointwiseROC, alpha={alpha:.6f} (constraint active), (n, 2, d) array",
                 indices.shape[0], f"{relative_difference(given.A_, labelled.A_):.1e}",
                 f"threshold {given.threshold_ - labelled.threshold_:+.1e}", "-"])  # fmt: skip
    results.add_table(
        f"Equality with the label path: digits, {n} items, PCA 20",
        ["fit", "pairs", "A: max relative difference", "objective (relative)",
         "n_iter labels / pairs"],
        rows,
        notes="A: largest entry of |A_pairs - A_labels| over the largest of |A_labels|. "
        "Objective: MMC's mean dissimilar distance at the end of each fit; PointwiseROC: the "
        "difference of the calibrated thresholds.",
        show=True,
    )  # fmt: skip


def draw_pairs(y, n_pairs, rng):
    """``n_pairs`` pairs, half similar and half dissimilar, each uniform over its kind."""
    n_similar = n_pairs // 2
    order = np.argsort(y, kind="stable")
    counts = np.bincount(y)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    # Similar: a class drawn with probability proportional to its number of pairs, then two
    # distinct items of it.
    weights = counts * (counts - 1.0)
    classes = rng.choice(counts.shape[0], size=n_similar, p=weights / weights.sum())
    first = (rng.random_sample(n_similar) * counts[classes]).astype(np.int64)
    second = (rng.random_sample(n_similar) * (counts[classes] - 1)).astype(np.int64)
    second += second >= first
    similar = np.stack([order[starts[classes] + first], order[starts[classes] + second]], axis=1)
    dissimilar = sample_negative_pairs(y, n_pairs - n_similar, rng)
    indices = np.concatenate([similar, np.stack([dissimilar.first, dissimilar.second], axis=1)])
    labels = np.r_[np.ones(n_similar), -np.ones(n_pairs - n_similar)].astype(np.int64)
    return indices, labels


def speed_up_over(metric_learn_seconds, timeout, fit_seconds):
    """metric-learn's fit time over ``fit_seconds``; a lower bound when it reached the cap."""
    if not isinstance(metric_learn_seconds, str):
        return round(metric_learn_seconds / fit_seconds, 1)
    if metric_learn_seconds.startswith("no result"):
        return f"> {timeout / fit_seconds:.0f}"
    return "-"


def pair_distances(pairs, components):
    """The learned distance of each pair, ``||L (x - x')||``."""
    return np.linalg.norm((pairs[:, 0] - pairs[:, 1]) @ components.T, axis=1)


def held_out_auc(pairs, labels, components):
    return roc_auc_score(labels == 1, -pair_distances(pairs, components))


def pair_scores(pairs, labels, test_pairs, test_labels, components):
    """The merit on the training pairs (mean distance over the dissimilar ones / root mean
    squared over the similar ones) and the held-out ROC AUC of the metric ``components``."""
    distances = pair_distances(pairs, components)
    merit = distances[labels == -1].mean() / np.sqrt(np.mean(distances[labels == 1] ** 2))
    return [f"{merit:.4f}", f"{held_out_auc(test_pairs, test_labels, components):.4f}"]


def metric_learn_section(results, args):
    X_train, X_test, y_train, y_test = mnist_split()
    rows = []
    for d in [20] if args.quick else [20, 100]:
        Z_train, Z_test = pca(X_train, X_test, n_components=d)
        test_indices, test_labels = draw_pairs(y_test, 20_000, np.random.RandomState(1))
        test_pairs = Z_test[test_indices]
        for n_pairs in [1_000, 10_000] if args.quick else [10_000, 100_000]:
            indices, labels = draw_pairs(y_train, n_pairs, np.random.RandomState(0))
            pairs = Z_train[indices]
            fits = {}
            for name, params in (("skrank MMC (paper's criterion)", PAPER),
                                 ("skrank MMC (defaults)", {})):  # fmt: skip
                fit_seconds, _, model = median_time(3, MMC(**params).fit, pairs, labels)
                fits[name] = (model.components_, fit_seconds, model.n_iter_)
            index_seconds = median_time(3, MMC(**PAPER, items=Z_train).fit, indices, labels)[0]
            print(f"  d={d}, {n_pairs} pairs: fitting metric-learn ...", flush=True)
            try:
                fitted = fit_metric_learn("MMC", pairs, labels, timeout=args.timeout)
                components, seconds = fitted["components"], fitted["seconds"]
            except ChildFailed as failure:
                components, seconds = None, failure.reason
            speed_up = functools.partial(speed_up_over, seconds, args.timeout)
            scores = functools.partial(pair_scores, pairs, labels, test_pairs, test_labels)
            for name, (fitted, fit_seconds, n_iter) in fits.items():
                rows.append([d, n_pairs, name, round(fit_seconds, 3), speed_up(fit_seconds),
                             *scores(fitted), n_iter])  # fmt: skip
            index_row = ["skrank MMC (paper's criterion), row indices", round(index_seconds, 3)]
            rows.append([d, n_pairs, *index_row, speed_up(index_seconds), "-", "-", "-"])
            if components is not None:
                rows.append([d, n_pairs, "metric-learn MMC", round(seconds, 3), 1.0,
                             *scores(components), "-"])  # fmt: skip
            else:
                rows.append([d, n_pairs, f"metric-learn MMC: {seconds}", "-", "-", "-", "-", "-"])
            rows.append([d, n_pairs, "Euclidean metric", "-", "-", *scores(np.eye(d)), "-"])
            print(*rows[-5:], sep="\n", flush=True)
            add_metric_learn_table(results, rows, args.timeout)
            results.save()  # keep what is measured if a later fit is stopped


def add_metric_learn_table(results, rows, timeout):
    """Add (or replace) the table of the metric-learn comparison."""
    title = "MNIST pairs (half similar, half dissimilar): skrank MMC against metric-learn's MMC"
    results.data["tables"] = [t for t in results.data["tables"] if t["title"] != title]
    results.add_table(
        title,
        ["d", "pairs", "method", "fit s", "metric-learn s / fit s", "merit (training pairs)",
         "held-out pair ROC AUC", "n_iter"],
        rows,
        notes="Merit: mean distance over the training dissimilar pairs / root mean squared "
        "distance over the training similar ones (scale-invariant; the objective both solve "
        "with the paper's criterion). Held-out: 20,000 pairs drawn the same way from 2,000 "
        f"MNIST test items. skrank: median of 3 fits. metric-learn: one fit of MMC() with its "
        f"defaults (max_iter=100), a cap of {timeout:.0f} s per fit. 'row indices': the same "
        "fit from (n_pairs, 2) indices into the 8,000 training items (items=...).",
    )  # fmt: skip


def validation_section(results, args):
    """Held-out pair ROC AUC of MMC's settings, on validation pairs of the training items."""
    X_train, _, y_train, _ = mnist_split()
    X_fit, X_val, y_fit, y_val = train_test_split(
        X_train, y_train, test_size=0.5, stratify=y_train, random_state=0
    )
    ridges = [1e-8, 1.0] if args.quick else [1e-8, 0.1, 1.0, 10.0]
    ranks = [None, 0.5] if args.quick else [None, 0.1, 0.25, 0.5]
    rows = []
    for d in [20] if args.quick else [20, 100]:
        Z_fit, Z_val = pca(X_fit, X_val, n_components=d)
        indices, labels = draw_pairs(y_fit, 10_000, np.random.RandomState(0))
        val_indices, val_labels = draw_pairs(y_val, 20_000, np.random.RandomState(1))
        euclidean = held_out_auc(Z_val[val_indices], val_labels, np.eye(d))
        for ridge, rank in itertools.product(ridges, ranks):
            model = MMC(scatter_ridge=ridge, min_rank=rank).fit(Z_fit[indices], labels)
            auc = held_out_auc(Z_val[val_indices], val_labels, model.components_)
            rows.append([d, ridge, str(rank), f"{auc:.4f}", f"{euclidean:.4f}"])
            print(rows[-1], flush=True)
    results.add_table(
        "Validation screen: MMC settings on MNIST pairs (validation items, not the test items)",
        ["d", "scatter_ridge", "min_rank", "validation pair ROC AUC", "Euclidean"],
        rows,
        notes="10,000 training pairs (half similar) from 4,000 training items, 20,000 "
        "validation pairs from the other 4,000 (PCA fitted on the first); defaults: "
        "scatter_ridge=1, min_rank=0.5; the paper's criterion: 1e-8, None.",
    )


# ------------------------------------------------------------------------------ main
# Each part: its sections (each called as section(results, args)), its results file, the peers
# whose versions it records, its --timeout's default.
PARTS = {
    "learners": ([learners_part], "bench_pair_learners", ("cvxpy",), 300.0),
    "mmc": ([mmc_part], "bench_mmc", ("cvxpy", "clarabel"), None),
    "solver": ([statistics_tables, solver_table, calibration_table], "bench_pointwise_roc",
               ("cvxpy", "clarabel"), None),
    "pairs": ([equality_section, validation_section, metric_learn_section], "bench_pairs", (),
              900.0),
}  # fmt: skip


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag", "timeout", seeds=[0, 1, 2, 3, 4])
    arguments.add_argument("--part", choices=PARTS, default="learners", help="(default: learners)")
    args = arguments.parse_args(argv)
    sections, name, packages, timeout = PARTS[args.part]
    args.timeout = timeout if args.timeout is None else args.timeout
    results = Results(results_name(name, args), packages=packages)
    for section in sections:
        section(results, args)
        results.save()  # after every section: a long run leaves what it measured


if __name__ == "__main__":
    main()
