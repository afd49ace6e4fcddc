"""``python -m skrank``: each estimator against a simple baseline on shipped data, on the CPU.

Every row fits one skrank estimator on a data set shipped with the package and compares it with a
plain baseline on held-out data; the whole job takes about two minutes on a 2-core CPU
(a third of it the cross-validated selection of MMC: 105 fits). Rows are
the functions registered with :func:`_row`; ``--only NAME`` runs the rows whose estimator name
contains ``NAME``; ``--quick`` runs the same code on small subsamples with short training in
seconds (a smoke run, tested in ``tests/test_main.py``; its values are not the ones to read).
"""

import argparse
import sys
import time

from .utils._threads import torch_threads

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
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the same code on small subsamples with short training, in seconds: a smoke run "
        "whose values are not the ones to read",
    )
    args = parser.parse_args(argv)
    records = []
    for estimator_name, function in _ROWS:
        if args.only.lower() not in estimator_name.lower():
            continue
        print(f"running {estimator_name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        for dataset, metric, baseline, baseline_value, value in function(quick=args.quick):
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


def mnist_knn_split(seed=0, quick=False):
    """MNIST train / test parts for k-NN (PCA fitted on the training part, 90% of the variance).

    A stratified 3,000 / 2,000 split (400 / 200 with ``quick``) of the shipped MNIST-10k.
    Returns ``Z_train, Z_test, y_train, y_test``.
    """
    from sklearn.decomposition import PCA
    from sklearn.model_selection import train_test_split

    from .datasets import load_mnist

    X, y = load_mnist(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X,
        y,
        train_size=400 if quick else 3000,
        test_size=200 if quick else 2000,
        stratify=y,
        random_state=seed,
    )
    pca = PCA(n_components=0.9, svd_solver="covariance_eigh").fit(X_train)
    return pca.transform(X_train), pca.transform(X_test), y_train, y_test


# MMC in the k-NN rows: tuples of the sampled objective (fast; see the user guide).
MMC_SAMPLED = {"negatives": "tuples", "n_samples": 1500, "random_state": 0}


def mmc_folds(quick=False):
    """The number of validation folds of :func:`mmc_search`: 5 (3 with ``quick``)."""
    return 3 if quick else 5


def mmc_search(quick=False):
    """The selection of MMC's options by 5-NN accuracy on validation folds (unfitted search).

    Candidates: no metric learning (``"passthrough"``: the Euclidean metric); MMC with all
    pairs (Xing et al.'s sets), ``scatter_ridge`` in {1, 10, 100} and ``min_rank`` in
    {0.25, 0.5, 0.75, "full"} (the defaults 1 / 0.5 among them; large ridges and
    ``min_rank="full"`` approach the Euclidean metric); and MMC with local pairs
    (``positives="nearest", negatives="nearest"``: each item's nearest same-class and
    other-class items),
    ``n_neighbors`` in {10, 20}, ``scatter_ridge`` in {1, 10} and ``min_rank`` in {0.25, 0.5}.
    Validation: 5 stratified folds (:func:`mmc_folds`; with ``quick``: 3 folds, ridges
    {1, 100} and ``min_rank=0.5`` only, local pairs with ``n_neighbors=10`` and ridge 1). The
    user guide's procedure repeats the folds 3 times (315 fits, three times the time): on the
    job's split both choose MMC with local pairs, at a test 5-NN accuracy of 0.9425 (5 folds)
    and 0.9395 (5 x 3), against 0.9365 for the Euclidean metric.
    Choice: the best mean 5-NN accuracy unless the Euclidean metric is within one standard
    error of it (:func:`~skrank.similarity.one_standard_error_rule`).
    """
    from sklearn.model_selection import GridSearchCV, RepeatedStratifiedKFold
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import Pipeline

    from .similarity import MMC, one_standard_error_rule

    return GridSearchCV(
        Pipeline([("mmc", MMC(**MMC_SAMPLED)), ("knn", KNeighborsClassifier(n_neighbors=5))]),
        [
            {"mmc": ["passthrough"]},
            {
                "mmc__scatter_ridge": [1.0, 100.0] if quick else [1.0, 10.0, 100.0],
                "mmc__min_rank": [0.5] if quick else [0.25, 0.5, 0.75, "full"],
            },
            {
                "mmc__positives": ["nearest"],
                "mmc__negatives": ["nearest"],
                "mmc__n_neighbors": [10] if quick else [10, 20],
                "mmc__scatter_ridge": [1.0] if quick else [1.0, 10.0],
                "mmc__min_rank": [0.5] if quick else [0.25, 0.5],
            },
        ],
        scoring="accuracy",
        cv=RepeatedStratifiedKFold(n_splits=mmc_folds(quick), n_repeats=1, random_state=0),
        refit=one_standard_error_rule({"mmc": "passthrough"}),
    )


@_row("MMC")
def _mmc_row(quick=False):
    """MMC on MNIST (PCA 90%): test 5-NN accuracy versus Euclidean, for three settings.

    The defaults (trace penalty and rank control), the paper's criterion (Xing et al.), and the
    options selected by :func:`mmc_search` on validation folds of the training part (the row
    says how many).
    """
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    from .similarity import MMC

    Z_train, Z_test, y_train, y_test = mnist_knn_split(quick=quick)
    knn = KNeighborsClassifier(n_neighbors=5)
    euclidean = knn.fit(Z_train, y_train).score(Z_test, y_test)
    search = mmc_search(quick).fit(Z_train, y_train)
    models = {
        "default": make_pipeline(MMC(**MMC_SAMPLED), KNeighborsClassifier(n_neighbors=5)),
        "paper's MMC": make_pipeline(
            MMC(scatter_ridge=1e-8, min_rank=None, **MMC_SAMPLED),
            KNeighborsClassifier(n_neighbors=5),
        ),
    }
    data = "MNIST 400/200 PCA90" if quick else "MNIST 3k/2k PCA90"
    rows = [
        (
            data,
            f"test 5-NN acc, {name}",
            "Euclidean",
            euclidean,
            model.fit(Z_train, y_train).score(Z_test, y_test),
        )
        for name, model in models.items()
    ]
    selected = f"test 5-NN acc, selected on {mmc_folds(quick)} folds"
    rows.append((data, selected, "Euclidean", euclidean, search.score(Z_test, y_test)))
    return rows


def sphere_split(quick=False):
    """The paper's Section 5.1 data: 2,000 training and 1,000 test items (300 / 200 with quick).

    Returns ``X_train, X_test, y_train, y_test``.
    """
    from .datasets import make_sphere_classes

    X, y = make_sphere_classes(300 if quick else 2000, random_state=0)
    X_test, y_test = make_sphere_classes(200 if quick else 1000, random_state=1)
    return X, X_test, y, y_test


def mnist_pair_split(quick=False):
    """MNIST-10k for the pair rows: items 0-4,999 to train, 5,000-6,999 to test (500 / 300).

    Both projected on the first 32 principal axes of the training part, not centred. Returns
    ``Z_train, Z_test, y_train, y_test``.
    """
    from sklearn.decomposition import PCA

    from .datasets import load_mnist

    X, y = load_mnist(return_X_y=True)
    n_train, n_test = (500, 300) if quick else (5000, 2000)
    X_train, y_train = X[:n_train], y[:n_train]
    X_test, y_test = X[5000 : 5000 + n_test], y[5000 : 5000 + n_test]
    components = PCA(32, random_state=0).fit(X_train).components_
    return X_train @ components.T, X_test @ components.T, y_train, y_test


@_row("PointwiseROCSimilarity")
def _pointwise_roc_row(quick=False):
    """TPR at FPR = 1% of held-out pairs versus cosine: the defaults and the paper's criterion.

    The paper's criterion is problem (6) with its level alpha chosen for the target FPR on
    held-out pairs of the training part (``alpha="auto", identity_weight=0``); the defaults add
    the pull toward the cosine similarity. Options selected by a grid search (slower: a minute
    or more) are in ``benchmarks/bench_pair_learners.py``.
    """
    import numpy as np

    from .metrics import pairwise_roc_score
    from .similarity import PointwiseROCSimilarity

    def cosine(X):
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        return X @ X.T

    metric = "TPR@FPR=0.01, held-out pairs"
    rows = []
    X, X_test, y, y_test = sphere_split(quick)
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
    Z_train, Z_test, y_train, y_test = mnist_pair_split(quick)
    baseline = pairwise_roc_score(cosine(Z_test), y_test, 0.01)
    data = f"MNIST {len(y_train)}/{len(y_test)} PCA-32"
    for name, params in settings.items():
        model = PointwiseROCSimilarity(threshold_fpr=0.01, random_state=0, **params)
        value = model.fit(Z_train, y_train).score(Z_test, y_test)
        rows.append((f"{data}, {name}", metric, "cosine", baseline, value))
    return rows


def one_torch_thread():
    """One torch thread: small batches run faster without a thread pool on a busy 2-core machine."""
    return torch_threads(1)


def mnist_retrieval_split(quick=False):
    """Raw MNIST pixels: a stratified 3,000 / 2,000 split (300 / 200 with quick).

    Returns ``X_train, X_test, y_train, y_test``.
    """
    from sklearn.model_selection import train_test_split

    from .datasets import load_mnist

    X, y = load_mnist(return_X_y=True)
    return train_test_split(
        X,
        y,
        train_size=300 if quick else 3000,
        test_size=200 if quick else 2000,
        stratify=y,
        random_state=0,
    )


def soprc_embedder(quick=False):
    """The SOPRCEmbedder of the main job (unfitted): 8 epochs (1 with quick), on the CPU."""
    from .embedding import SOPRCEmbedder

    return SOPRCEmbedder(max_epochs=1 if quick else 8, device="cpu", random_state=0)


@_row("SOPRCEmbedder")
def _soprc_embedder_row(quick=False):
    """Mean AUPRC of cosine retrieval among held-out MNIST digits: raw pixels vs the embedding."""
    from .metrics import mean_auprc_score

    X_train, X_test, y_train, y_test = mnist_retrieval_split(quick)
    with one_torch_thread():
        model = soprc_embedder(quick).fit(X_train, y_train)
    raw = mean_auprc_score(X_test, y_test, metric="cosine")
    data = f"MNIST {len(y_train)}/{len(y_test)}"
    return [(data, "mean AUPRC", "raw pixels", raw, model.score(X_test, y_test))]


def bibtex_split(quick=False):
    """Bibtex's train and test parts (their first 488 and 250 rows with quick).

    Returns ``X_train, X_test, Y_train, Y_test`` (sparse).
    """
    from .datasets import load_bibtex

    train, test = load_bibtex(subset="train"), load_bibtex(subset="test")
    X_train, Y_train, X_test, Y_test = train.data, train.target, test.data, test.target
    if quick:
        X_train, Y_train, X_test, Y_test = X_train[:488], Y_train[:488], X_test[:250], Y_test[:250]
    return X_train, X_test, Y_train, Y_test


def snm_classifier(quick=False):
    """The SNMClassifier of the Bibtex row (unfitted): its defaults (top-16 SNM, a linear
    encoder started at the TF-IDF nearest-centroid rule, early stopping, the neighbours' votes).
    With quick: 64 dimensions and 2 epochs (``tol=None``: no early stopping, so no convergence
    warning)."""
    from .multilabel import SNMClassifier

    quick_settings = dict(n_components=64, max_epochs=2, tol=None) if quick else {}
    return SNMClassifier(device="cpu", random_state=0, **quick_settings)


def one_vs_rest_label_scores(X_train, Y_train, X_test):
    """Label scores of one-vs-rest logistic regression (``C=1``, liblinear) on the raw features."""
    import warnings

    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    model = OneVsRestClassifier(LogisticRegression(solver="liblinear"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # labels without a training example
        model.fit(X_train, Y_train.toarray().astype(np.int64))  # liblinear rejects int8 targets
    return model.decision_function(X_test)


@_row("SNMClassifier")
def _snm_row(quick=False):
    """Bibtex (159 labels): P@1 and P@5 of the defaults against one-vs-rest logistic regression.

    P@k, the share of true labels among an example's ``k`` best, is what
    :meth:`SNMClassifier.score <skrank.SNMClassifier.score>` and the extreme-classification
    literature report.
    """
    from .metrics import get_scorer, top_k_precision_score

    X_train, X_test, Y_train, Y_test = bibtex_split(quick)
    with one_torch_thread():
        model = snm_classifier(quick).fit(X_train, Y_train)
        precisions = {k: get_scorer(f"precision@{k}")(model, X_test, Y_test) for k in (1, 5)}
    scores = one_vs_rest_label_scores(X_train, Y_train, X_test)
    data = "Bibtex test (quick)" if quick else "Bibtex test"
    baseline = "one-vs-rest logistic regression"
    return [
        (data, f"P@{k}", baseline, top_k_precision_score(Y_test, scores, k), precisions[k])
        for k in (1, 5)
    ]


if __name__ == "__main__":
    sys.exit(main())
