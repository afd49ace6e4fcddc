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
    """MMC on MNIST (PCA 90%): held-out figure of merit and 5-NN accuracy versus Euclidean."""
    from sklearn.decomposition import PCA
    from sklearn.model_selection import train_test_split
    from sklearn.neighbors import KNeighborsClassifier

    from skrank import MMC
    from skrank.datasets import load_mnist
    from skrank.similarity._mmc_solver import figure_of_merit

    X, y = load_mnist(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=3000, test_size=2000, stratify=y, random_state=0
    )
    pca = PCA(n_components=0.9, svd_solver="covariance_eigh").fit(X_train)
    X_train, X_test = pca.transform(X_train), pca.transform(X_test)
    mmc = MMC(negatives="tuples", n_samples=1500, random_state=0).fit(X_train, y_train)
    knn = KNeighborsClassifier(n_neighbors=5)
    euclidean_accuracy = knn.fit(X_train, y_train).score(X_test, y_test)
    knn.fit(mmc.transform(X_train), y_train)
    mmc_accuracy = knn.score(mmc.transform(X_test), y_test)
    euclidean_merit = figure_of_merit(X_test, y_test)[0]
    data = "MNIST 3k/2k PCA90"
    return [
        (data, "test merit", "Euclidean", euclidean_merit, mmc.score(X_test, y_test)),
        (data, "test 5-NN acc", "Euclidean", euclidean_accuracy, mmc_accuracy),
    ]


@_row("PointwiseROCSimilarity")
def _pointwise_roc_row():
    """TPR at FPR = 1% of held-out pairs: fitted bilinear similarity vs cosine."""
    import numpy as np
    from sklearn.decomposition import PCA

    from .datasets import load_mnist, make_sphere_classes
    from .metrics import pairwise_roc_score
    from .similarity import PointwiseROCSimilarity, feasible_alpha_range

    def cosine(X):
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        return X @ X.T

    metric = "TPR@FPR=0.01, held-out pairs"
    rows = []
    # The paper's Section 5.1 data; a small alpha targets the low-FPR end.
    X, y = make_sphere_classes(2000, random_state=0)
    X_test, y_test = make_sphere_classes(1000, random_state=1)
    model = PointwiseROCSimilarity(alpha=0.31).fit(X, y)
    baseline = pairwise_roc_score(cosine(X_test), y_test, 0.01)
    value = pairwise_roc_score(model.pairwise_similarity(X_test), y_test, 0.01)
    rows.append(("sphere-3 (paper 5.1)", metric, "cosine", baseline, value))
    # MNIST-10k projected on its first 32 principal axes (not centred: on centred data the mean
    # negative cosine is ~0 and the feasible alpha form a sliver); alpha chosen on a validation
    # split over its feasible range.
    X, y = load_mnist(return_X_y=True)
    X_fit, y_fit, X_val, y_val = X[:4000], y[:4000], X[4000:5000], y[4000:5000]
    X_test, y_test = X[5000:7000], y[5000:7000]
    components = PCA(32, random_state=0).fit(X_fit).components_
    Z_fit, Z_val, Z_test = X_fit @ components.T, X_val @ components.T, X_test @ components.T
    unconstrained = PointwiseROCSimilarity(alpha=1.0).fit(Z_fit, y_fit)
    lowest = feasible_alpha_range(unconstrained.N_)[0]
    alphas = np.linspace(lowest, unconstrained.negative_risk_, 6)[1:]
    models = [PointwiseROCSimilarity(a, threshold_fpr=0.01).fit(Z_fit, y_fit) for a in alphas]
    best = max(models, key=lambda model: model.score(Z_val, y_val))
    baseline = pairwise_roc_score(cosine(Z_test), y_test, 0.01)
    rows.append(("MNIST-10k PCA-32", metric, "cosine", baseline, best.score(Z_test, y_test)))
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
