"""``python -m skrank``: each estimator against a simple baseline on shipped data, on the CPU.

Every row fits one skrank estimator on a data set shipped with the package and compares it with a
plain baseline on held-out data; the whole job runs in about two minutes on two CPU cores. Rows are
the functions registered with :func:`_row`; ``--only NAME`` runs the rows whose estimator name
contains ``NAME``.
"""

import argparse
import sys
import time

_ROWS = []


def _row(estimator_name):
    """Register a row function returning ``(dataset, metric, baseline, baseline_value, value)``."""

    def register(function):
        _ROWS.append((estimator_name, function))
        return function

    return register


def _format_table(records):
    header = ("estimator", "data", "metric", "baseline", "baseline value", "skrank", "seconds")
    lines = [header] + [
        (
            r["estimator"],
            r["dataset"],
            r["metric"],
            r["baseline"],
            f"{r['baseline_value']:.4f}",
            f"{r['value']:.4f}",
            f"{r['seconds']:.1f}",
        )
        for r in records
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    rule = "  ".join("-" * w for w in widths)
    rendered = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=False)) for line in lines
    ]
    return "\n".join([rendered[0], rule, *rendered[1:]])


def main(argv=None):
    """Run the registered rows and print the comparison table; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m skrank", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only rows whose estimator contains this")
    args = parser.parse_args(argv)
    records = []
    for estimator_name, function in _ROWS:
        if args.only.lower() not in estimator_name.lower():
            continue
        print(f"running {estimator_name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        for dataset, metric, baseline, baseline_value, value in function():
            records.append(
                {
                    "estimator": estimator_name,
                    "dataset": dataset,
                    "metric": metric,
                    "baseline": baseline,
                    "baseline_value": baseline_value,
                    "value": value,
                    "seconds": time.perf_counter() - start,
                }
            )
    if not records:
        print("no rows to run", file=sys.stderr)
        return 1
    print(_format_table(records))
    return 0


@_row("MMC")
def _mmc_row():
    """MMC on MNIST (PCA 90%): test 5-NN accuracy versus Euclidean, for three settings.

    The defaults (trace penalty and rank control), the paper's criterion (Xing et al.), and the
    options selected by a grid search on 5 validation folds of the training part (Pipeline with
    KNeighborsClassifier, scored by accuracy; the grid includes no metric learning at all).
    """
    from sklearn.decomposition import PCA
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import Pipeline, make_pipeline

    from skrank import MMC
    from skrank.datasets import load_mnist

    X, y = load_mnist(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=3000, test_size=2000, stratify=y, random_state=0
    )
    pca = PCA(n_components=0.9, svd_solver="covariance_eigh").fit(X_train)
    X_train, X_test = pca.transform(X_train), pca.transform(X_test)
    sampled = dict(negatives="tuples", n_samples=1500, random_state=0)
    knn = KNeighborsClassifier(n_neighbors=5)
    euclidean = knn.fit(X_train, y_train).score(X_test, y_test)
    search = GridSearchCV(
        Pipeline([("mmc", MMC(**sampled)), ("knn", KNeighborsClassifier(n_neighbors=5))]),
        [
            {"mmc": ["passthrough"]},  # no metric learning at all is a candidate too
            {"mmc__scatter_ridge": [1.0, 10.0, 100.0], "mmc__min_rank": [0.25, 0.5, 0.75]},
        ],
        cv=StratifiedKFold(5, shuffle=True, random_state=0),
    ).fit(X_train, y_train)
    models = {
        "default": make_pipeline(MMC(**sampled), KNeighborsClassifier(n_neighbors=5)),
        "paper's MMC": make_pipeline(
            MMC(scatter_ridge=1e-8, min_rank=None, **sampled), KNeighborsClassifier(n_neighbors=5)
        ),
    }
    data = "MNIST 3k/2k PCA90"
    rows = [
        (
            data,
            f"test 5-NN acc, {name}",
            "Euclidean",
            euclidean,
            model.fit(X_train, y_train).score(X_test, y_test),
        )
        for name, model in models.items()
    ]
    rows.append(
        (data, "test 5-NN acc, CV-selected", "Euclidean", euclidean, search.score(X_test, y_test))
    )
    return rows


@_row("PointwiseROCSimilarity")
def _pointwise_roc_row():
    """TPR at FPR = 1% of held-out pairs versus cosine: the defaults and the paper's criterion.

    The paper's criterion is problem (6) with its level alpha chosen for the target FPR on
    held-out pairs of the training part (``alpha="auto", identity_weight=0``); the defaults add
    the pull toward the cosine similarity. Options selected by a grid search (slower: a minute
    or more) are in ``benchmarks/bench_pair_learners.py``.
    """
    import numpy as np
    from sklearn.decomposition import PCA

    from .datasets import load_mnist, make_sphere_classes
    from .metrics import pairwise_roc_score
    from .similarity import PointwiseROCSimilarity

    def cosine(X):
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        return X @ X.T

    metric = "TPR@FPR=0.01, held-out pairs"
    rows = []
    # The paper's Section 5.1 data.
    X, y = make_sphere_classes(2000, random_state=0)
    X_test, y_test = make_sphere_classes(1000, random_state=1)
    baseline = pairwise_roc_score(cosine(X_test), y_test, 0.01)
    settings = {"default": {}, "paper's criterion": {"identity_weight": 0.0}}
    for name, params in settings.items():
        model = PointwiseROCSimilarity(threshold_fpr=0.01, random_state=0, **params).fit(X, y)
        rows.append(
            (
                f"sphere-3 (paper 5.1), {name}",
                metric,
                "cosine",
                baseline,
                model.score(X_test, y_test),
            )
        )
    # MNIST-10k: 5,000 training items projected on their first 32 principal axes (not centred),
    # 2,000 test items.
    X, y = load_mnist(return_X_y=True)
    X_train, y_train, X_test, y_test = X[:5000], y[:5000], X[5000:7000], y[5000:7000]
    components = PCA(32, random_state=0).fit(X_train).components_
    Z_train, Z_test = X_train @ components.T, X_test @ components.T
    baseline = pairwise_roc_score(cosine(Z_test), y_test, 0.01)
    data = "MNIST-10k PCA-32"
    for name, params in settings.items():
        model = PointwiseROCSimilarity(threshold_fpr=0.01, random_state=0, **params)
        value = model.fit(Z_train, y_train).score(Z_test, y_test)
        rows.append((f"{data}, {name}", metric, "cosine", baseline, value))
    return rows


@_row("SOPRCEmbedder")
def _soprc_embedder_row():
    """Mean AUPRC of cosine retrieval among held-out MNIST digits: raw pixels vs the embedding."""
    import torch
    from sklearn.model_selection import train_test_split

    from .datasets import load_mnist
    from .embedding import SOPRCEmbedder
    from .metrics import mean_auprc_score

    X, y = load_mnist(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=3000, test_size=2000, stratify=y, random_state=0
    )
    # One torch thread: small batches run faster without a thread pool on a busy 2-core machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = SOPRCEmbedder(max_epochs=8, device="cpu", random_state=0).fit(X_train, y_train)
    finally:
        torch.set_num_threads(threads)
    raw = mean_auprc_score(X_test, y_test, metric="cosine")
    return [("MNIST 3000/2000", "mean AUPRC", "raw pixels", raw, model.score(X_test, y_test))]


@_row("SNMClassifier")
def _snm_row():
    """Bibtex (159 labels): top-1 SNM against negative sampling, same network, B and epochs.

    Negative sampling is shown at the estimator's default label learning rate and at the lower
    rate it prefers (0.005); top-1 SNM uses the defaults.
    """
    import torch

    from .datasets import load_bibtex
    from .snm import SNMClassifier

    train, test = load_bibtex(subset="train"), load_bibtex(subset="test")
    settings = dict(
        n_negatives=64,
        embedding_dim=64,
        hidden_layer_sizes=(128,),
        max_epochs=6,
        device="cpu",
        random_state=0,
    )
    runs = {
        "top-1 SNM": dict(negative_weights="topk"),
        "neg. sampling, B=64": dict(negative_weights="uniform"),
        "neg. sampling, B=64, label lr 0.005": dict(
            negative_weights="uniform", label_learning_rate=0.005
        ),
    }
    recalls = {}
    # One torch thread: small batches run faster without a thread pool on a busy 2-core machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, params in runs.items():
            model = SNMClassifier(**settings, **params).fit(train.data, train.target)
            recalls[name] = {
                k: model.set_params(score_k=k).score(test.data, test.target) for k in (1, 5)
            }
    finally:
        torch.set_num_threads(threads)
    return [
        ("Bibtex test", f"Recall@{k}", baseline, recalls[baseline][k], recalls["top-1 SNM"][k])
        for baseline in list(runs)[1:]
        for k in (1, 5)
    ]


if __name__ == "__main__":
    sys.exit(main())
