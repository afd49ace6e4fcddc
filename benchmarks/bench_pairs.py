"""Benchmark of learning from given pairs: equality with the label path, and metric-learn's MMC.

Pairs are drawn from labelled data, so that both paths see the same constraints.

1. **Equality with the label path** at fixed settings: MMC with the paper's criterion on all
   pairs of a labelled sample (as a (n_pairs, 2, n_features) array and as row indices into an
   item table), MMC on a sample of negative pairs (the same on both paths), and
   PointwiseROCSimilarity at a fixed ``alpha`` (``"auto"`` splits items on one path and pairs
   on the other).
2. **Against metric-learn's weakly supervised MMC** (``metric_learn.MMC.fit(pairs, y)``, in its
   own environment, its defaults, stopped after ``--timeout``) on the same pairs: half similar,
   half dissimilar, uniform over the pairs of MNIST training items (PCA to d = 20 or 100), 10^4
   and 10^5 pairs. Reported: the training figure of merit (the scale-invariant objective both
   solve), the fit time and its ratio, and the ROC AUC of held-out pairs of test items. skrank
   runs the paper's criterion (``scatter_ridge=1e-8, min_rank=None``); a row gives its defaults.
3. **A validation screen** of MMC's ``scatter_ridge`` and ``min_rank`` by the ROC AUC of
   validation pairs (training items held out of the fit, never the test items).

Usage::

    python benchmarks/bench_pairs.py            # full run
    python benchmarks/bench_pairs.py --quick    # smoke run (10^3 and 10^4 pairs, d = 20)
"""

import functools
import itertools

import numpy as np
from _data import mnist_split, pca
from _harness import ChildFailed, parser, results_name, timed
from _metric_learn_fit import fit_metric_learn
from _results import Results
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

from skrank import MMC, PointwiseROCSimilarity
from skrank.sampling import sample_negative_pairs

# The paper's criterion (no trace penalty to speak of, no rank control), as metric-learn solves.
PAPER = {"scatter_ridge": 1e-8, "min_rank": None}


def all_label_pairs(y):
    """Every pair ``i < j`` of a labelled sample, and 1 (same class) or -1 (different)."""
    first, second = np.triu_indices(y.shape[0], k=1)
    return np.stack([first, second], axis=1), np.where(y[first] == y[second], 1, -1)


def relative_difference(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


EQUALITY_COLUMNS = ["fit", "pairs", "A: max relative difference", "objective (relative)",
                    "n_iter labels / pairs"]  # fmt: skip


def equality_section(results, quick):
    X, y = load_digits(return_X_y=True)
    X = PCA(n_components=20, random_state=0).fit_transform(X)
    n = 200 if quick else 500
    X, y = X[:n], y[:n]
    indices, labels = all_label_pairs(y)
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
        EQUALITY_COLUMNS,
        rows,
        notes="A: largest entry of |A_pairs - A_labels| over the largest of |A_labels|. "
        "Objective: MMC's mean dissimilar distance at the end of each fit; PointwiseROC: the "
        "difference of the calibrated thresholds.",
    )
    for row in rows:
        print("  ".join(str(cell) for cell in row), flush=True)


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


def median_fit(model, X, y, repeats=3):
    """The model fitted, and the median of ``repeats`` fit times (the machine is shared)."""
    seconds = [timed(model.fit, X, y)[1] for _ in range(repeats)]
    return model, float(np.median(seconds))


def pair_distances(pairs, components):
    """The learned distance of each pair, ``||L (x - x')||``."""
    return np.linalg.norm((pairs[:, 0] - pairs[:, 1]) @ components.T, axis=1)


def merit(pairs, labels, components):
    """Mean distance over the dissimilar pairs / root mean squared over the similar ones."""
    distances = pair_distances(pairs, components)
    return distances[labels == -1].mean() / np.sqrt(np.mean(distances[labels == 1] ** 2))


def held_out_auc(pairs, labels, components):
    return roc_auc_score(labels == 1, -pair_distances(pairs, components))


def pair_scores(pairs, labels, test_pairs, test_labels, components):
    """The merit on the training pairs and the held-out ROC AUC of the metric ``components``."""
    return [f"{merit(pairs, labels, components):.4f}",
            f"{held_out_auc(test_pairs, test_labels, components):.4f}"]  # fmt: skip


def metric_learn_section(results, quick, timeout):
    X_train, X_test, y_train, y_test = mnist_split()
    sizes = [1_000, 10_000] if quick else [10_000, 100_000]
    dims = [20] if quick else [20, 100]
    rows = []
    for d in dims:
        Z_train, Z_test = pca(X_train, X_test, n_components=d)
        test_indices, test_labels = draw_pairs(y_test, 20_000, np.random.RandomState(1))
        test_pairs = Z_test[test_indices]
        for n_pairs in sizes:
            indices, labels = draw_pairs(y_train, n_pairs, np.random.RandomState(0))
            pairs = Z_train[indices]
            fits = {}
            for name, params in (
                ("skrank MMC (paper's criterion)", PAPER),
                ("skrank MMC (defaults)", {}),
            ):
                model, fit_seconds = median_fit(MMC(**params), pairs, labels)
                fits[name] = (model.components_, fit_seconds, model.n_iter_)
            index_seconds = median_fit(MMC(**PAPER, items=Z_train), indices, labels)[1]
            print(f"  d={d}, {n_pairs} pairs: fitting metric-learn ...", flush=True)
            try:
                fitted = fit_metric_learn("MMC", pairs, labels, timeout=timeout)
                components, seconds = fitted["components"], fitted["seconds"]
            except ChildFailed as failure:
                components, seconds = None, failure.reason
            speed_up = functools.partial(speed_up_over, seconds, timeout)
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
            for row in rows[-5:]:
                print("  ".join(str(cell) for cell in row), flush=True)
            add_metric_learn_table(results, rows, timeout)
            results.save()  # keep what is measured if a later fit is stopped


METRIC_LEARN_COLUMNS = ["d", "pairs", "method", "fit s", "metric-learn s / fit s",
                        "merit (training pairs)", "held-out pair ROC AUC", "n_iter"]  # fmt: skip


def add_metric_learn_table(results, rows, timeout):
    """Add (or replace) the table of the metric-learn comparison."""
    title = "MNIST pairs (half similar, half dissimilar): skrank MMC against metric-learn's MMC"
    results.data["tables"] = [t for t in results.data["tables"] if t["title"] != title]
    results.add_table(
        title,
        METRIC_LEARN_COLUMNS,
        rows,
        notes="Merit: mean distance over the training dissimilar pairs / root mean squared "
        "distance over the training similar ones (scale-invariant; the objective both solve "
        "with the paper's criterion). Held-out: 20,000 pairs drawn the same way from 2,000 "
        f"MNIST test items. skrank: median of 3 fits. metric-learn: one fit of MMC() with its "
        f"defaults (max_iter=100), a cap of {timeout:.0f} s per fit. 'row indices': the same "
        "fit from (n_pairs, 2) indices into the 8,000 training items (items=...).",
    )


def validation_section(results, quick):
    """Held-out pair ROC AUC of MMC's settings, on validation pairs of the training items."""
    X_train, _, y_train, _ = mnist_split()
    X_fit, X_val, y_fit, y_val = train_test_split(
        X_train, y_train, test_size=0.5, stratify=y_train, random_state=0
    )
    ridges = [1e-8, 1.0] if quick else [1e-8, 0.1, 1.0, 10.0]
    ranks = [None, 0.5] if quick else [None, 0.1, 0.25, 0.5]
    rows = []
    for d in [20] if quick else [20, 100]:
        Z_fit, Z_val = pca(X_fit, X_val, n_components=d)
        indices, labels = draw_pairs(y_fit, 10_000, np.random.RandomState(0))
        val_indices, val_labels = draw_pairs(y_val, 20_000, np.random.RandomState(1))
        euclidean = held_out_auc(Z_val[val_indices], val_labels, np.eye(d))
        for ridge, rank in itertools.product(ridges, ranks):
            model = MMC(scatter_ridge=ridge, min_rank=rank).fit(Z_fit[indices], labels)
            auc = held_out_auc(Z_val[val_indices], val_labels, model.components_)
            rows.append([d, ridge, str(rank), f"{auc:.4f}", f"{euclidean:.4f}"])
            print("  ".join(str(cell) for cell in rows[-1]), flush=True)
    results.add_table(
        "Validation screen: MMC settings on MNIST pairs (validation items, not the test items)",
        ["d", "scatter_ridge", "min_rank", "validation pair ROC AUC", "Euclidean"],
        rows,
        notes="10,000 training pairs (half similar) from 4,000 training items, 20,000 "
        "validation pairs from the other 4,000 (PCA fitted on the first); defaults: "
        "scatter_ridge=1, min_rank=0.5; the paper's criterion: 1e-8, None.",
    )


def main(argv=None):
    args = parser(__doc__, "quick", "tag", "timeout", timeout=900.0).parse_args(argv)
    results = Results(results_name("bench_pairs", args))
    equality_section(results, args.quick)
    validation_section(results, args.quick)
    results.save()
    metric_learn_section(results, args.quick, args.timeout)
    results.save()


if __name__ == "__main__":
    main()
