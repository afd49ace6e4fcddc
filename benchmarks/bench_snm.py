"""Stochastic Negative Mining: accuracy against the baselines users already have, the paper's
Table 2 with the estimator's defaults, and the cost per step as the number of labels grows.

Part ``accuracy`` (one table per data set, the same splits for every method; methods: see
benchmarks/README.md, section "Stochastic Negative Mining"): Bibtex and Corel5k with their own
splits, :func:`skrank.datasets.make_sparse_multilabel_classification` with 2,000 labels and 20
rows per label (single-label, a quarter held out). The full softmax trains SNM's network through
the public engine API (``get_loss(batch, targets)``); kNN's ``k`` is chosen on a validation split
of the training set. Neural methods: mean ± std over 3 seeds. Metrics
(:func:`skrank.metrics.top_k_label_scores`): P@1, P@3, P@5, nDCG@3, nDCG@5, PSP@5, R@5.

Part ``scaling``: time of one SNM training step (timed through the public ``get_loss`` hook) for
K in {10^3, ..., 10^6} labels: one model per K in one process, trained in interleaved short
rounds (random order each round), per-step times after warm-up, medians and interquartile
ranges; target: within 1.2x from 10^3 to 10^6.

Usage::

    python benchmarks/bench_snm.py --part accuracy --data bibtex corel5k
    python benchmarks/bench_snm.py --part accuracy --data generator \
        --neural "SNM defaults (top-16)"         # the other neural methods take long here
    python benchmarks/bench_snm.py --part scaling
    python benchmarks/bench_snm.py --quick          # smoke run
"""

import copy
import time
import warnings

import numpy as np
import scipy.sparse as sp
import torch
from _data import xmc_split
from _harness import parser, results_name, timed
from _results import Results, summary
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import normalize
from torch.nn import functional as F

from skrank import SNMClassifier
from skrank.datasets import make_large_output_classification, make_sparse_multilabel_classification
from skrank.metrics import label_propensities, top_k_indices, top_k_label_scores
from skrank.sampling import NegativeLabelSampler

COLUMNS = ["P@1", "P@3", "P@5", "nDCG@3", "nDCG@5", "PSP@5", "R@5"]
KEYS = ["precision@1", "precision@3", "precision@5", "ndcg@3", "ndcg@5", "psp@5"]


# ------------------------------------------------------------------------------ data
def load(name, quick):
    """(X_train, Y_train, X_test, Y_test) as CSR matrices, indicator targets."""
    if name != "generator":
        return xmc_split(name, quick)
    n_labels = 200 if quick else 2000
    X, y = make_sparse_multilabel_classification(
        n_labels=n_labels, samples_per_label=20, random_state=0
    )
    Y = sp.identity(n_labels, dtype=np.int8, format="csr")[y]  # single-label indicator rows
    train, test = train_test_split(np.arange(len(y)), test_size=0.25, random_state=0)
    return X[train], Y[train], X[test], Y[test]


def metrics(Y_test, scores, propensities):
    """The values of :data:`COLUMNS` of the label scores ``scores``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # test rows without labels are excluded
        found = top_k_label_scores(
            Y_test, top_k_indices(scores, 5), [1, 3, 5], propensities=propensities
        )
    return [found[key] for key in KEYS] + [found["label_recall@5"]]


# ------------------------------------------------------------------------------ methods
class FullSoftmaxClassifier(SNMClassifier):
    """SNMClassifier's network and defaults, trained by a softmax cross-entropy over all K labels
    through the public engine hooks: the label table read through its ``RowSparseOptimizer``
    (the last of ``optimizers_``), the positives drawn as SNMClassifier's sampler draws them."""

    def get_batch_sampler(self, y, device, random_state):
        seeds = copy.deepcopy(random_state)  # what SNMClassifier's negative sampler draws
        sampler = super().get_batch_sampler(y, device, random_state)
        self.positive_draws = NegativeLabelSampler(
            len(self.trained_labels_), self.n_negatives_, seeds, device=self.training_device
        ).generator
        return sampler

    def get_loss(self, batch, targets):
        table, counts = targets
        table, counts = table[batch.indices], counts[batch.indices]
        uniform = torch.rand(counts.shape[0], generator=self.positive_draws, device=table.device)
        offsets = (uniform * counts).long().clamp(max=table.shape[1] - 1)
        positives = table.gather(1, offsets[:, None])[:, 0]  # one positive, uniform, a row
        vectors = self.network_.normalize_labels(self.optimizers_[-1].gather())
        logits = self.module_(batch.inputs) @ vectors.T
        losses = F.cross_entropy(logits, positives, reduction="none")
        if batch.valid is None:
            return losses.mean()
        return (losses * batch.valid).sum() / batch.valid.sum().clamp(min=1)


NEURAL = {
    "SNM defaults (top-16)": lambda seed: SNMClassifier(random_state=seed),
    "SNM defaults, no neighbour votes": lambda seed: SNMClassifier(
        neighbor_weight=0.0, random_state=seed
    ),
    "SNM top-1": lambda seed: SNMClassifier(top_k_negatives=1, random_state=seed),
    "negative sampling": lambda seed: SNMClassifier(negative_weights="uniform", random_state=seed),
    "full softmax": lambda seed: FullSoftmaxClassifier(random_state=seed),
}


def fit_predict_neural(make, seed, X_train, Y_train, X_test):
    model = make(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # training rows without labels skipped
        warnings.simplefilter("ignore", FutureWarning)  # settings of deprecated parameters
        model.fit(X_train, Y_train)
    return model.decision_function(X_test), len(model.history_)


def one_vs_rest(X_train, Y_train, X_test):
    """Label scores of one-vs-rest logistic regression (``C=1``, liblinear: no int8 targets)."""
    model = OneVsRestClassifier(LogisticRegression(solver="liblinear"))
    return model.fit(X_train, Y_train.toarray().astype(np.int64)).decision_function(X_test)


def nearest_centroid(X_train, Y_train, X_test):
    centroids = normalize(Y_train.T.astype(np.float64) @ normalize(X_train))
    return (normalize(X_test) @ centroids.T).toarray()


def nearest_centroid_tfidf(X_train, Y_train, X_test):
    """Nearest centroid (cosine) on the TF-IDF features kNN uses."""
    tfidf = TfidfTransformer(sublinear_tf=True).fit(X_train)
    return nearest_centroid(tfidf.transform(X_train), Y_train, tfidf.transform(X_test))


def knn_scores(X_train, Y_train, X_test, k):
    """Each label's summed cosine similarity over the k nearest training rows (TF-IDF)."""
    tfidf = TfidfTransformer(sublinear_tf=True).fit(X_train)
    A, B = normalize(tfidf.transform(X_train)), normalize(tfidf.transform(X_test))
    similarities = (B @ A.T).toarray()
    neighbours = np.argpartition(-similarities, k - 1, axis=1)[:, :k]
    weights = np.take_along_axis(similarities, neighbours, axis=1)
    scores = np.zeros((X_test.shape[0], Y_train.shape[1]))
    Y = Y_train.toarray().astype(np.float64)
    for j in range(k):
        scores += weights[:, j, None] * Y[neighbours[:, j]]
    return scores + 1e-6 * nearest_centroid(X_train, Y_train, X_test)  # breaks ties


def choose_knn_k(X_train, Y_train):
    """The k with the best P@1 on a validation split (20%) of the training set."""
    fit, val = train_test_split(np.arange(X_train.shape[0]), test_size=0.2, random_state=0)
    propensities = label_propensities(Y_train[fit])
    scores = {
        k: metrics(Y_train[val], knn_scores(X_train[fit], Y_train[fit], X_train[val], k),
                   propensities)[0]
        for k in (5, 10, 20, 50)
    }  # fmt: skip
    return max(scores, key=scores.get)


def run_accuracy(args, results):
    for name in args.data:
        data = load(name, args.quick)
        X_train, Y_train, X_test, Y_test = data
        propensities = label_propensities(Y_train)
        print(f"\n{name}: {X_train.shape[0]} train / {X_test.shape[0]} test rows, "
              f"{X_train.shape[1]} features, {Y_train.shape[1]} labels", flush=True)  # fmt: skip
        rows, means = [], {}
        for method, make in NEURAL.items():
            if args.neural is not None and method not in args.neural:
                continue
            if method == "full softmax" and Y_train.shape[1] > args.max_softmax_labels:
                continue
            fits = [timed(fit_predict_neural, make, seed, *data[:3]) for seed in args.seeds]
            runs = [metrics(Y_test, scores, propensities) for (scores, _), _ in fits]
            means[method] = np.mean(runs, axis=0)
            cells = [summary(column, 3) for column in zip(*runs, strict=True)]
            seconds = np.mean([taken for _, taken in fits])
            epochs = np.mean([n_epochs for (_, n_epochs), _ in fits])
            rows.append([method, *cells, f"{seconds:.1f}", f"{epochs:.0f}"])
            print("  ", rows[-1], flush=True)
        knn_k = choose_knn_k(X_train, Y_train)
        baselines = {
            "one-vs-rest logistic (C=1)": (one_vs_rest, ()),
            "nearest centroid (cosine)": (nearest_centroid, ()),
            "nearest centroid (cosine, TF-IDF)": (nearest_centroid_tfidf, ()),
            f"kNN on TF-IDF (k={knn_k})": (knn_scores, (knn_k,)),
        }
        for method, (function, extra) in baselines.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # labels without a training row
                scores, seconds = timed(function, X_train, Y_train, X_test, *extra)
            means[method] = mean = metrics(Y_test, scores, propensities)
            rows.append([method, *(f"{m:.3f}" for m in mean), f"{seconds:.1f}", "-"])
            print("  ", rows[-1], flush=True)
        results.add_table(
            f"{name}: test metrics, {X_train.shape[0]} train rows, {Y_train.shape[1]} labels",
            ["method", *COLUMNS, "fit + predict s", "epochs"],
            rows,
            notes=f"Neural methods: mean ± std over seeds {args.seeds}, SNMClassifier defaults "
            "(TF-IDF inputs, top-16 SNM, linear embedding of min(n_features, 1024) dimensions "
            "started at the principal directions of the inputs and centroids, labels at the "
            "centroids, learnable score scale, input dropout 0.2, early stopping on validation "
            "P@1 with 10% held out, the untrained start included; the input space's "
            "nearest-centroid rule added with a weight among 0-64 and votes of the 10 nearest "
            "training rows mixed in with a weight among 0, 0.1, 0.2, both chosen on those 10%); "
            "PSP@5 normalised, propensities of the training labels (A=0.55, B=1.5).",
        )
        if {"SNM defaults (top-16)", "SNM top-1", "negative sampling"} <= set(means):
            baseline = means["negative sampling"]
            ratio_rows = [
                [method, *(f"{r:.2f}" for r in means[method] / baseline)]
                for method in ("SNM defaults (top-16)", "SNM top-1")
            ]
            results.add_table(
                f"{name}: ratio to negative sampling (the paper's Table 2 form)",
                ["method", *COLUMNS],
                ratio_rows,
            )
        results.add_figure(f"{name} means", {m: list(v) for m, v in means.items()})


# ------------------------------------------------------------------------------ scaling
class TimedSNM(SNMClassifier):
    """SNMClassifier recording when each step's loss is computed (public ``get_loss`` hook)
    in ``step_starts``."""

    def get_loss(self, batch, targets):
        self.step_starts.append(time.perf_counter())
        return super().get_loss(batch, targets)


def run_scaling(args, results):
    """Per-step times of one model per K, all in this process, interleaved: each round trains
    every model (in a random order) for one short epoch (``warm_start``) and keeps the
    intervals between the starts of consecutive steps after the first ``WARM_UP`` of the
    epoch (which allocate optimiser state)."""
    warm_up = 3
    models, data = {}, {}
    for n_labels in args.n_labels:
        data[n_labels] = make_large_output_classification(
            n_samples=args.batch_size * (warm_up + args.steps + 1),
            n_features=64,
            n_labels=n_labels,
            multilabel=True,  # indicator targets: the label table has all K rows
            random_state=0,
        )
        models[n_labels] = TimedSNM(
            n_negatives=1024, embedding_dim=args.scaling_dim, batch_size=args.batch_size,
            max_epochs=1, tol=None, early_stopping=False, validation_fraction=None,
            warm_start=True, device="cpu", random_state=0,
        )  # fmt: skip
    steps = {k: [] for k in args.n_labels}
    rng = np.random.RandomState(0)
    for round_ in range(args.repeats + 1):  # round 0: first fits (initialisation), not timed
        for n_labels in rng.permutation(args.n_labels):
            model = models[n_labels]
            model.step_starts = []
            model.fit(*data[n_labels])
            if round_ > 0:
                steps[n_labels].extend(np.diff(model.step_starts)[warm_up:] * 1000)
        if round_ > 0:
            medians = [f"K={k:.0e} {np.median(steps[k][-args.steps :]):.1f} ms" for k in steps]
            print(f"  round {round_}: " + ", ".join(medians), flush=True)
    base = np.median(steps[args.n_labels[0]])
    rows = []
    for k in args.n_labels:
        q1, median, q3 = np.percentile(steps[k], [25, 50, 75])
        rows.append(
            [f"{k:.0e}", len(steps[k]), f"{median:.2f}", f"[{q1:.2f}, {q3:.2f}]",
             f"{median / base:.2f}"]
        )  # fmt: skip
        print("  ", rows[-1], flush=True)
    results.add_table(
        f"SNM time per training step, one process, {args.repeats} interleaved rounds of "
        f"{args.steps} timed steps per K (after {warm_up} warm-up steps), batch "
        f"{args.batch_size}, B = 1024, embedding {args.scaling_dim}, 1 torch thread",
        ["K", "steps timed", "median ms", "IQR ms", "median / median at smallest K"],
        rows,
    )
    results.add_figure("step ms", {f"{k:.0e}": list(map(float, steps[k])) for k in args.n_labels})


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag")
    arguments.add_argument("--part", choices=["accuracy", "scaling"], default="accuracy")
    arguments.add_argument(
        "--data", nargs="+", default=["bibtex", "corel5k", "generator"],
        choices=["bibtex", "corel5k", "generator", "debtags", "debian-suggests"],
    )  # fmt: skip
    arguments.add_argument(
        "--neural", nargs="+", choices=list(NEURAL), help="neural methods to run (default: all)"
    )
    args = arguments.parse_args(argv)
    torch.set_num_threads(1)
    seeds_given = args.seeds is not None
    if not seeds_given:  # the neural methods' seeds
        args.seeds = [0] if args.quick else [0, 1, 2]
    args.max_softmax_labels = 5000
    args.n_labels = [10**3, 10**4] if args.quick else [10**3, 10**4, 10**5, 10**6]
    args.steps = 5 if args.quick else 20
    args.repeats = 2 if args.quick else 10
    args.batch_size = 256
    args.scaling_dim = 128
    seeds = "seeds_" + "_".join(map(str, args.seeds)) if seeds_given else None
    data = args.data if args.part == "accuracy" else ()
    results = Results(results_name("bench_snm", args, args.part, *data, seeds))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    {"accuracy": run_accuracy, "scaling": run_scaling}[args.part](args, results)
    results.save()


if __name__ == "__main__":
    main()
