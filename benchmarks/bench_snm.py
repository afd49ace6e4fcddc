"""Stochastic Negative Mining: accuracy against the baselines users already have, the paper's
Table 2 with the estimator's defaults, and the cost per step as the number of labels grows.

Part ``accuracy`` (one table per data set, same splits for every method): Bibtex (159 labels)
and Corel5k (374 labels) with their own train/test splits, and
:func:`skrank.datasets.make_sparse_multilabel_classification` with 2,000 labels and 20 rows per
label, single-label, a quarter held out for test (about 15 training rows per label). Methods:
``SNMClassifier()`` with its defaults (top-16 SNM), the same with top-1 mining (the paper's)
and with negative sampling (``negative_weights="uniform"``) -- the paper's Table 2, with ratios
to negative sampling --, the same network trained by a full softmax over all labels (public
engine API: ``get_loss(batch, targets)``), one-vs-rest logistic regression, nearest centroid
(cosine) and k-nearest neighbours (cosine, TF-IDF weighted features; ``k`` chosen on a
validation split of the training set). Neural methods: mean ± std over 3 seeds; the others
are deterministic. Metrics: P@1, P@3, P@5, nDCG@3, nDCG@5, PSP@5 (propensities of the
training labels), R@5.

Part ``scaling``: time of one SNM training step (the estimator's own ``train_step``, timed
through the public ``get_loss`` hook) for K in {10^3, ..., 10^6} labels: one model per K in
one process, trained in interleaved short rounds (random order each round), per-step times
after warm-up, medians and interquartile ranges; target: within 1.2x from 10^3 to 10^6.

Part ``validation``: the settings screened for the defaults, on validation splits only (20 % of
the Bibtex and Corel5k training rows, ``random_state=0``; the test splits are never read):
the defaults against weight averaging of the parameters (:class:`skrank.nn.WeightAveraging`,
EMA or SWA), fewer or more mined negatives, label smoothing of the top-16 weights, and the
full softmax, the neighbours' votes off or at a fixed weight, a residual non-linear branch
beside the linear encoder (``ResidualBranchSNM``), a refit on every training row for the best
epoch count (``RefitSNM``; ``RefitAveragedSNM`` averages its scores with the first fit's,
``TwoSeedSNM`` two default fits' as a control) or the best model continued one epoch on them
(``ContinuedSNM``), and every positive label of a row per step (``AllPositivesSNM``) or per
epoch (``PairEpochSNM``), each over the same seeds; P@1 and P@5 on the
held-out rows, and the paired P@1 difference to the defaults seed by seed (``--settings`` runs a
subset, ``--tag`` names its results file).

Part ``blend``: the prediction blend's weights on the same validation splits: one fit a seed
with the neighbours' votes and the nearest-centroid rule both kept (``neighbor_weight=0.1``,
``centroid_weight=1.0``; training does not depend on them), then every pair of
:data:`BLEND_NEIGHBOR_WEIGHTS` and :data:`BLEND_CENTROID_WEIGHTS` scored on the held-out rows
(P@1, P@5, PSP@5 and the recall of the top 5 by the label's training rows): which weights the
tail wants, against the ones ``"auto"`` chose on the fit's own 10 %.

Part ``curves``: training and validation P@1 after each epoch of the defaults and of the full
softmax, early stopping off (seed 0, the same validation splits): under- or over-fitting.

Part ``search``: top-10 search over 10^5 label embeddings at prediction, the exact chunked scan
against a faiss HNSW index (build time, search time, recall of the approximate result).

Usage::

    python benchmarks/bench_snm.py --part accuracy --data bibtex corel5k
    python benchmarks/bench_snm.py --part accuracy --data generator \
        --neural "SNM defaults (top-16)"         # the other neural methods take long here
    python benchmarks/bench_snm.py --part scaling
    python benchmarks/bench_snm.py --part validation --data bibtex corel5k
    python benchmarks/bench_snm.py --part curves --data bibtex corel5k
    python benchmarks/bench_snm.py --part blend --data debian-suggests debtags --seeds 0
    python benchmarks/bench_snm.py --quick          # smoke run
"""

import functools
import time
import warnings

import numpy as np
import scipy.sparse as sp
import torch
from _harness import parser, results_name, timed
from _results import Results
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import normalize
from torch.nn import functional as F

from skrank import SNMClassifier
from skrank.__main__ import one_vs_rest_label_scores
from skrank.datasets import (
    load_bibtex,
    load_corel5k,
    make_large_output_classification,
    make_sparse_multilabel_classification,
)
from skrank.metrics import (
    label_propensities,
    top_k_ndcg_score,
    top_k_precision_score,
    top_k_psp_score,
    top_k_recall_score,
)
from skrank.nn import Callback, WeightAveraging
from skrank.sampling import EpochBatches, ShuffledBatchSampler
from skrank.sampling._labels import draw_from_positive_table

COLUMNS = ["P@1", "P@3", "P@5", "nDCG@3", "nDCG@5", "PSP@5", "R@5"]


# ------------------------------------------------------------------------------ data
def load(name, quick):
    """(X_train, Y_train, X_test, Y_test) as CSR matrices, indicator targets."""
    if name == "generator":
        n_labels = 200 if quick else 2000
        X, y = make_sparse_multilabel_classification(
            n_labels=n_labels, samples_per_label=20, random_state=0
        )
        Y = sp.csr_matrix(
            (np.ones(len(y), dtype=np.int8), (np.arange(len(y)), y)), shape=(len(y), n_labels)
        )
        train, test = train_test_split(np.arange(len(y)), test_size=0.25, random_state=0)
        return X[train], Y[train], X[test], Y[test]
    if name in ("debtags", "debian-suggests"):  # TF-IDF rows of package texts, as bench_xmc's
        from bench_xmc import text_parts

        X_train, Y_train, X_test, Y_test = text_parts(name, quick)
        return X_train, Y_train, X_test, Y_test[:, : Y_train.shape[1]]
    loader = {"bibtex": load_bibtex, "corel5k": load_corel5k}[name]
    train, test = loader(subset="train"), loader(subset="test")
    return train.data.tocsr(), train.target.tocsr(), test.data.tocsr(), test.target.tocsr()


def metrics(Y_test, scores, propensities):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # test rows without labels are excluded
        return [
            *top_k_precision_score(Y_test, scores, k=[1, 3, 5]),
            *top_k_ndcg_score(Y_test, scores, k=[3, 5]),
            top_k_psp_score(Y_test, scores, k=5, propensities=propensities),
            top_k_recall_score(Y_test, scores, k=5),
        ]


# ------------------------------------------------------------------------------ methods
class FullSoftmaxClassifier(SNMClassifier):
    """SNMClassifier's network and defaults, trained by a softmax cross-entropy over all K
    labels (every row of the label table read at every step); through the public engine hooks."""

    def get_loss(self, batch, targets):
        table, counts = targets
        positives = draw_from_positive_table(
            table[batch.indices], counts[batch.indices], self._label_sampler.generator
        )
        n_labels = len(self.trained_labels_)  # the rows of the label table
        everything = torch.arange(n_labels, device=positives.device)
        vectors = self.network_.normalize_labels(self._label_optimizer.gather(everything))
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


def fit_predict_neural(make, seed, X_train, Y_train, X_test, timings=None):
    model = make(seed)
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # training rows without labels skipped
        warnings.simplefilter("ignore", FutureWarning)  # settings of deprecated parameters
        model.fit(X_train, Y_train)
    if timings is not None:
        timings.append(time.process_time() - start)
    return model.decision_function(X_test), len(model.history_)


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
    scores = {}
    for k in (5, 10, 20, 50):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            scores[k] = top_k_precision_score(
                Y_train[val], knn_scores(X_train[fit], Y_train[fit], X_train[val], k), k=1
            )
    return max(scores, key=scores.get)


def run_accuracy(args, results):
    for name in args.data:
        X_train, Y_train, X_test, Y_test = load(name, args.quick)
        propensities = label_propensities(Y_train)
        print(
            f"\n{name}: {X_train.shape[0]} train / {X_test.shape[0]} test rows, "
            f"{X_train.shape[1]} features, {Y_train.shape[1]} labels",
            flush=True,
        )
        rows, means = [], {}
        for method, make in NEURAL.items():
            if args.neural is not None and method not in args.neural:
                continue
            if method == "full softmax" and Y_train.shape[1] > args.max_softmax_labels:
                continue
            runs, seconds, epochs = [], [], []
            for seed in args.seeds:
                (scores, n_epochs), taken = timed(
                    fit_predict_neural, make, seed, X_train, Y_train, X_test
                )
                seconds.append(taken)
                epochs.append(n_epochs)
                runs.append(metrics(Y_test, scores, propensities))
            mean, std = np.mean(runs, axis=0), np.std(runs, axis=0)
            means[method] = mean
            cells = [f"{m:.3f} ± {s:.3f}" for m, s in zip(mean, std, strict=True)]
            rows.append([method, *cells, f"{np.mean(seconds):.1f}", f"{np.mean(epochs):.0f}"])
            print("  ", rows[-1], flush=True)
        knn_k = choose_knn_k(X_train, Y_train)
        baselines = {
            "one-vs-rest logistic (C=1)": (one_vs_rest_label_scores, ()),
            "nearest centroid (cosine)": (nearest_centroid, ()),
            "nearest centroid (cosine, TF-IDF)": (nearest_centroid_tfidf, ()),
            f"kNN on TF-IDF (k={knn_k})": (knn_scores, (knn_k,)),
        }
        for method, (function, extra) in baselines.items():
            scores, seconds = timed(function, X_train, Y_train, X_test, *extra)
            mean = metrics(Y_test, scores, propensities)
            means[method] = mean
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


# ------------------------------------------------------------------------------ validation
class _ResidualEncoder(torch.nn.Module):
    """``linear(x) + branch(x)``: the linear encoder and a ReLU branch whose output layer
    starts at zero (so the untrained model is the linear one)."""

    def __init__(self, linear, hidden, dropout):
        super().__init__()
        self.linear = linear
        self.branch = torch.nn.Sequential(
            torch.nn.Linear(linear.in_features, hidden),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(hidden, linear.out_features),
        )
        torch.nn.init.zeros_(self.branch[-1].weight)
        torch.nn.init.zeros_(self.branch[-1].bias)

    def forward(self, x):
        return self.linear(x) + self.branch(x)


class ResidualBranchSNM(SNMClassifier):
    """SNMClassifier's defaults with a residual non-linear branch beside the linear encoder
    (started at the centroid rule as usual; the branch's output starts at zero)."""

    branch_hidden, branch_dropout = 1024, 0.5

    def initialize_module(self, n_features):
        network = super().initialize_module(n_features)
        linear = network.encoder.layers[-1]
        network.encoder.layers = torch.nn.Sequential(
            _ResidualEncoder(linear, self.branch_hidden, self.branch_dropout)
        )
        return network


def _residual(hidden, dropout):
    def make(seed, n_labels):
        model = ResidualBranchSNM(neighbor_weight=0.0, random_state=seed)
        model.branch_hidden, model.branch_dropout = hidden, dropout
        return model

    return make


class RefitSNM:
    """SNMClassifier's defaults, then a fresh fit on every training row (the 10 % early stopping
    monitored included) for the best epoch count ``E`` of the first fit, with its seed and the
    neighbours' weight it chose (``E = 0``, the kept start, is already rebuilt from every row)."""

    def __init__(self, random_state, **parameters):
        self.random_state, self.parameters = random_state, parameters

    def fit(self, X, Y):
        first = SNMClassifier(random_state=self.random_state, **self.parameters).fit(X, Y)
        self.first_epochs = best_epoch_count(first)
        self.history_ = list(first.history_)
        self.model_ = self.first_ = first
        if self.first_epochs > 0:
            self.model_ = SNMClassifier(
                random_state=self.random_state,
                validation_fraction=None,
                early_stopping=False,
                tol=None,
                max_epochs=self.first_epochs,
                neighbor_weight=first.neighbor_weight_,
                **self.parameters,
            ).fit(X, Y)
            self.history_ += self.model_.history_
        return self

    def decision_function(self, X):
        return self.model_.decision_function(X)


class RefitAveragedSNM(RefitSNM):
    """:class:`RefitSNM`, predicting the mean of the scores of the first fit and the refit."""

    def decision_function(self, X):
        scores = self.model_.decision_function(X)
        if self.model_ is self.first_:
            return scores
        return (scores + self.first_.decision_function(X)) / 2


class TwoSeedSNM:
    """The mean scores of two default fits, seeds ``s`` and ``s + 1000`` (the control of
    :class:`RefitAveragedSNM`: averaging without the refit's extra rows)."""

    def __init__(self, random_state):
        self.random_state = random_state

    def fit(self, X, Y):
        self.models_ = [
            SNMClassifier(random_state=seed).fit(X, Y)
            for seed in (self.random_state, self.random_state + 1000)
        ]
        self.history_ = [r for model in self.models_ for r in model.history_]
        return self

    def decision_function(self, X):
        return sum(model.decision_function(X) for model in self.models_) / len(self.models_)


def best_epoch_count(model):
    """The epoch whose weights early stopping kept (0: the untrained start)."""
    if model._kept_start():
        return 0
    scores = [record["validation_score"] for record in model.history_]
    return int(np.argmax(scores)) + 1  # the first of the best (tol=0: strict improvements)


class AllPositivesSNM(SNMClassifier):
    """SNMClassifier's defaults, each step using every positive label of each example of the
    batch, not one drawn at random: ``"mean"`` averages an example's losses over its positives
    (each example weighs 1), ``"pairs"`` averages over the (example, positive) pairs of the
    batch (an example weighs its number of positives, as an epoch over all pairs would)."""

    positives_weighting = "mean"

    def get_loss(self, batch, targets):
        table, counts = targets
        n_labels = len(self.trained_labels_)  # the rows of the label table
        positive_sets = table[batch.indices]
        sampled, mask = self._label_sampler.draw(positive_sets)
        rows, slots = (positive_sets < n_labels).nonzero(as_tuple=True)
        positives = positive_sets[rows, slots]
        vectors = self.network_.normalize_labels(
            self._label_optimizer.gather(torch.cat([positives, sampled]))
        )
        embeddings = self.module_(batch.inputs)
        size = positives.shape[0]
        positive_scores = (embeddings[rows] * vectors[:size]).sum(dim=1)
        negative_scores = (embeddings @ vectors[size:].T)[rows]
        losses = self.criterion_.example_losses(positive_scores, negative_scores, mask[rows])
        valid = (
            torch.ones(batch.indices.shape[0], device=losses.device)
            if batch.valid is None
            else batch.valid.float()
        )
        if self.positives_weighting == "mean":
            weights = valid[rows] / counts[batch.indices][rows]
            return (weights * losses).sum() / valid.sum().clamp(min=1)
        return (valid[rows] * losses).sum() / valid[rows].sum().clamp(min=1)


class _PairBatchSampler:
    """Shuffled batches of (example, positive label) pairs: every pair once per epoch; the
    batches' ``indices`` are the examples, their ``groups`` the pairs' positive labels."""

    def __init__(self, positives, batch_size, random_state, device):
        pairs = positives.tocoo()
        self.rows = torch.as_tensor(pairs.row, dtype=torch.long, device=device)
        self.labels = torch.as_tensor(pairs.col, dtype=torch.long, device=device)
        self.pairs = ShuffledBatchSampler(
            len(pairs.row), batch_size, random_state=random_state, device=device
        )
        self.generator = self.pairs.generator

    def __len__(self):
        return len(self.pairs)

    def epoch(self):
        batches = self.pairs.epoch()
        return EpochBatches(self.rows[batches.indices], batches.valid, self.labels[batches.indices])


class PairEpochSNM(SNMClassifier):
    """SNMClassifier's defaults, each epoch visiting every (example, positive label) pair once,
    shuffled (one positive per entry of a batch, the example's other positives masked from its
    negatives), instead of every example once with one positive drawn at random."""

    def get_batch_sampler(self, y, device, random_state):
        super().get_batch_sampler(y, device, random_state)  # the negative-label sampler
        return _PairBatchSampler(y, self.batch_size, random_state, device)

    def get_loss(self, batch, targets):
        table, _ = targets
        positives = batch.groups
        sampled, mask = self._label_sampler.draw(table[batch.indices])
        vectors = self.network_.normalize_labels(
            self._label_optimizer.gather(torch.cat([positives, sampled]))
        )
        embeddings = self.module_(batch.inputs)
        size = positives.shape[0]
        positive_scores = (embeddings * vectors[:size]).sum(dim=1)
        negative_scores = embeddings @ vectors[size:].T
        return self.criterion_(positive_scores, negative_scores, mask, valid=batch.valid)


class ContinuedSNM(RefitSNM):
    """SNMClassifier's defaults, then the best model trained one more epoch on every training
    row (the 10 % early stopping monitored included; optimiser states restart), unless early
    stopping kept the untrained start (then rebuilt from every row already)."""

    def fit(self, X, Y):
        first = SNMClassifier(random_state=self.random_state, **self.parameters).fit(X, Y)
        self.history_ = list(first.history_)
        if best_epoch_count(first) > 0:
            first.set_params(
                warm_start=True,
                validation_fraction=None,
                early_stopping=False,
                tol=None,
                max_epochs=1,
                neighbor_weight=first.neighbor_weight_,
            ).fit(X, Y)
            self.history_ = list(first.history_)
        self.model_ = first
        return self


def _all_positives(weighting):
    def make(seed, n_labels):
        model = AllPositivesSNM(random_state=seed)
        model.positives_weighting = weighting
        return model

    return make


def smoothed_top_k_weights(n_negatives, top_k, smoothing):
    """Top-k weights (1/k on the k hardest) mixed with uniform weights: ``(1 - e) w + e / B``."""
    weights = np.zeros(n_negatives)
    weights[:top_k] = 1.0 / top_k
    return (1 - smoothing) * weights + smoothing / n_negatives


def _snm(**parameters):
    return lambda seed, n_labels: SNMClassifier(random_state=seed, **parameters)


VALIDATION_SETTINGS = {
    "defaults": _snm(),
    "weight averaging, EMA 0.9": _snm(callbacks=[WeightAveraging(decay=0.9)]),
    "weight averaging, EMA 0.97": _snm(callbacks=[WeightAveraging(decay=0.97)]),
    "weight averaging, SWA from epoch 3": _snm(
        callbacks=[WeightAveraging(decay=None, start_epoch=3)]
    ),
    "label table: row-wise Adagrad, rate 0.005": _snm(label_optimizer="rowwise_adagrad"),
    "label table: row-wise Adagrad, rate 0.02": _snm(
        label_optimizer="rowwise_adagrad", label_learning_rate=0.02
    ),
    "label table: row-wise Adagrad, rate 0.05": _snm(
        label_optimizer="rowwise_adagrad", label_learning_rate=0.05
    ),
    "label table: Adagrad, rate 0.02": _snm(label_learning_rate=0.02),
    "top-8": _snm(top_k_negatives=8),
    "top-32": _snm(top_k_negatives=32),
    "top-16 weights smoothed, e = 0.1": lambda seed, n_labels: SNMClassifier(
        negative_weights=smoothed_top_k_weights(n_labels - 1, 16, 0.1), random_state=seed
    ),
    "full softmax": lambda seed, n_labels: FullSoftmaxClassifier(random_state=seed),
    "no neighbour votes (neighbor_weight=0)": _snm(neighbor_weight=0.0),
    "neighbour votes, weight 0.1 fixed": _snm(neighbor_weight=0.1),
    "residual branch 256, dropout 0.2 (no votes)": _residual(256, 0.2),
    "residual branch 1024, dropout 0.5 (no votes)": _residual(1024, 0.5),
    "refit on every row for the best epoch count": lambda seed, n_labels: RefitSNM(seed),
    "all positives per step, mean per example": _all_positives("mean"),
    "all positives per step, mean per pair": _all_positives("pairs"),
    "every (example, positive) pair once per epoch": lambda seed, n_labels: PairEpochSNM(
        random_state=seed
    ),
    "best model continued 1 epoch on every row": lambda seed, n_labels: ContinuedSNM(seed),
    "refit, scores averaged with the first fit": lambda seed, n_labels: RefitAveragedSNM(seed),
    "two default fits averaged (seeds s, s + 1000)": lambda seed, n_labels: TwoSeedSNM(seed),
    # Real text (debtags' TF-IDF rows, a sparse input layer): what costs a linear model's lead.
    "input weighting: TF-IDF of the TF-IDF rows (input_normalization='tfidf')": _snm(
        input_normalization="tfidf"
    ),
    "sparse input layer: row-wise Adagrad, rate 0.03": _snm(
        input_optimizer="rowwise_adagrad", input_learning_rate=0.03
    ),
    "sparse input layer: row-wise Adagrad, rate 0.003": _snm(
        input_optimizer="rowwise_adagrad", input_learning_rate=0.003
    ),
    "sparse input layer: SGD, rate 0.003 an example": _snm(
        input_optimizer="sgd", input_learning_rate=0.003 * 256
    ),
    "sparse input layer: SGD, rate 0.01 an example": _snm(
        input_optimizer="sgd", input_learning_rate=0.01 * 256
    ),
    "input dropout 0.2": _snm(input_dropout=0.2),
    "n_components=256": _snm(n_components=256),
    "n_components=512": _snm(n_components=512),
    "n_components=1024": _snm(n_components=1024),
    "inner products, not cosines (scores='dot')": _snm(scores="dot"),
    "logistic surrogate": _snm(surrogate="logistic"),
    "POWL": _snm(loss="powl"),
    "top-4": _snm(top_k_negatives=4),
    "top-64": _snm(top_k_negatives=64),
    "256 negatives a step": _snm(n_negatives=256),
    "no nearest-centroid rule (centroid_weight=0)": _snm(centroid_weight=0.0),
    "patience 3 (n_iter_no_change=3)": _snm(n_iter_no_change=3),
}


def run_validation(args, results):
    """The settings of ``VALIDATION_SETTINGS`` on a validation split of each training set."""
    for name in args.data:
        X_train, Y_train, _, _ = load(name, args.quick)
        fit, val = train_test_split(np.arange(X_train.shape[0]), test_size=0.2, random_state=0)
        X_fit, Y_fit, X_val, Y_val = X_train[fit], Y_train[fit], X_train[val], Y_train[val]
        propensities = label_propensities(Y_fit)
        n_labels = Y_train.shape[1]
        print(f"\n{name}: {len(fit)} rows fit, {len(val)} validation rows", flush=True)
        p1, rows = {}, []
        for setting, make in VALIDATION_SETTINGS.items():
            if args.settings and setting != "defaults" and setting not in args.settings:
                continue
            runs, epochs, seconds = [], [], []
            for seed in args.seeds:
                scores, n_epochs = fit_predict_neural(
                    functools.partial(make, n_labels=n_labels), seed, X_fit, Y_fit, X_val, seconds
                )
                runs.append(metrics(Y_val, scores, propensities))
                epochs.append(n_epochs)
            runs = np.array(runs)
            p1[setting] = runs[:, 0]
            difference = p1[setting] - p1["defaults"]
            rows.append(
                [
                    setting,
                    f"{runs[:, 0].mean():.3f} ± {runs[:, 0].std():.3f}",
                    " / ".join(f"{v:.3f}" for v in runs[:, 0]),
                    f"{difference.mean():+.3f}",
                    " / ".join(f"{v:+.3f}" for v in difference),
                    f"{runs[:, 2].mean():.3f}",
                    f"{np.mean(epochs):.0f}",
                    f"{np.mean(seconds):.1f}",
                ]
            )
            print("  ", rows[-1], flush=True)
        results.add_table(
            f"{name}: validation P@1 and P@5 ({len(fit)} training rows fit, {len(val)} held out)",
            ["setting", "P@1", "P@1 by seed", "P@1 - defaults", "by seed", "P@5", "epochs"]
            + ["fit CPU s"],
            rows,
            notes=f"Seeds {args.seeds}; a 20 % validation split of the training set "
            "(random_state=0), the test split unread. Each fit holds out 10 % of its rows for "
            "early stopping, as the defaults do. 'P@1 - defaults': paired by seed. 'fit CPU s': "
            "the fit's processor time on one thread.",
        )
        results.add_figure(f"{name} validation P@1", {k: list(v) for k, v in p1.items()})


class EpochPrecision(Callback):
    """P@1 of the model after each epoch on some training rows and on the validation rows."""

    def __init__(self, X_train, Y_train, X_val, Y_val):
        self.data = (X_train, Y_train, X_val, Y_val)

    def on_train_begin(self, estimator, X, y, validation):
        self.rows = []

    def on_epoch_end(self, estimator, epoch, record):
        X_train, Y_train, X_val, Y_val = self.data
        training = estimator.module_.training
        estimator.module_.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # rows without labels are excluded
            self.rows.append(
                [
                    top_k_precision_score(Y, estimator.decision_function(X), k=1)
                    for X, Y in ((X_train, Y_train), (X_val, Y_val))
                ]
            )
        estimator.module_.train(training)


def run_curves(args, results):
    """Training and validation P@1 after each epoch, early stopping off (25 epochs, seed 0):
    where the defaults and the full softmax start to overfit."""
    epochs = 5 if args.quick else 25
    for name in args.data:
        X_train, Y_train, _, _ = load(name, args.quick)
        fit, val = train_test_split(np.arange(X_train.shape[0]), test_size=0.2, random_state=0)
        X_fit, Y_fit, X_val, Y_val = X_train[fit], Y_train[fit], X_train[val], Y_train[val]
        curves = {}
        methods = {"SNM defaults": SNMClassifier, "full softmax": FullSoftmaxClassifier}
        for method, cls in methods.items():
            recorder = EpochPrecision(X_fit[:1500], Y_fit[:1500], X_val, Y_val)
            model = cls(
                max_epochs=epochs, n_iter_no_change=epochs, callbacks=[recorder], random_state=0
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ConvergenceWarning: no early stop, by design
                model.fit(X_fit, Y_fit)
            (recorder,) = [c for c in model.callbacks_ if isinstance(c, EpochPrecision)]
            curves[method] = np.array(recorder.rows)
        rows = [
            [epoch + 1, *(f"{curves[m][epoch, j]:.3f}" for m in curves for j in (0, 1))]
            for epoch in range(epochs)
        ]
        results.add_table(
            f"{name}: P@1 after each epoch, training rows (first 1,500 of the fit rows) and "
            "validation rows",
            ["epoch", "SNM train", "SNM validation", "softmax train", "softmax validation"],
            rows,
            notes="Seed 0, early stopping off (patience = max_epochs; the 10 % the fit holds "
            "out is still held out); the 20 % validation split of the training set, "
            "random_state=0.",
        )
        results.add_figure(f"{name} curves", {m: c.tolist() for m, c in curves.items()})


# ------------------------------------------------------------------------------ scaling
class TimedSNM(SNMClassifier):
    """SNMClassifier recording when each step's loss is computed (public ``get_loss`` hook)."""

    def get_loss(self, batch, targets):
        self._step_starts.append(time.perf_counter())
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
            n_negatives=1024,
            embedding_dim=args.scaling_dim,
            batch_size=args.batch_size,
            max_epochs=1,
            tol=None,
            early_stopping=False,
            validation_fraction=None,
            warm_start=True,
            device="cpu",
            random_state=0,
        )
    steps = {k: [] for k in args.n_labels}
    rng = np.random.RandomState(0)
    for round_ in range(args.repeats + 1):  # round 0: first fits (initialisation), not timed
        for n_labels in rng.permutation(args.n_labels):
            model = models[n_labels]
            model._step_starts = []
            model.fit(*data[n_labels])
            if round_ > 0:
                steps[n_labels].extend(np.diff(model._step_starts)[warm_up:] * 1000)
        if round_ > 0:
            print(
                f"  round {round_}: "
                + ", ".join(
                    f"K={k:.0e} {np.median(steps[k][-args.steps :]):.1f} ms" for k in args.n_labels
                ),
                flush=True,
            )
    base = np.median(steps[args.n_labels[0]])
    rows = []
    for k in args.n_labels:
        q1, median, q3 = np.percentile(steps[k], [25, 50, 75])
        rows.append(
            [
                f"{k:.0e}",
                len(steps[k]),
                f"{median:.2f}",
                f"[{q1:.2f}, {q3:.2f}]",
                f"{median / base:.2f}",
            ]
        )
        print("  ", rows[-1], flush=True)
    results.add_table(
        f"SNM time per training step, one process, {args.repeats} interleaved rounds of "
        f"{args.steps} timed steps per K (after {warm_up} warm-up steps), batch "
        f"{args.batch_size}, B = 1024, embedding {args.scaling_dim}, 1 torch thread",
        ["K", "steps timed", "median ms", "IQR ms", "median / median at smallest K"],
        rows,
    )
    results.add_figure("step ms", {f"{k:.0e}": list(map(float, steps[k])) for k in args.n_labels})


# ------------------------------------------------------------------------------ search
def run_search(args, results):
    """Prediction-time top-10 search: exact chunked scan against a faiss HNSW graph."""
    from skrank.metrics import FaissInnerProductIndex, top_k_inner_products

    rng = np.random.RandomState(0)
    n_queries, k, dim = 1000, 10, args.scaling_dim
    print(f"\n### Top-{k} label search for {n_queries} queries, embedding {dim}\n")
    print("| K | table | exact scan s | HNSW build s | HNSW search s | HNSW recall@10 |")
    print("|---|---|---|---|---|---|")
    table_rows = []
    for n_labels in args.search_labels:
        for structure in ("uniform on the sphere", "clustered"):
            if structure == "clustered":  # 1000 directions, labels and queries near them
                centers = rng.normal(size=(1000, dim))
                table = centers[rng.randint(1000, size=n_labels)] + 0.5 * rng.normal(
                    size=(n_labels, dim)
                )
                queries = table[rng.randint(n_labels, size=n_queries)] + 0.5 * rng.normal(
                    size=(n_queries, dim)
                )
            else:
                table = rng.normal(size=(n_labels, dim))
                queries = rng.normal(size=(n_queries, dim))
            table = (table / np.linalg.norm(table, axis=1, keepdims=True)).astype(np.float32)
            queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
            rows = torch.from_numpy(table)
            (_, exact), exact_seconds = timed(
                top_k_inner_products,
                torch.from_numpy(queries),
                lambda a, b, rows=rows: rows[a:b],
                n_labels,
                k,
            )
            index, build_seconds = timed(FaissInnerProductIndex, table)
            (_, approximate), search_seconds = timed(index.search, queries, k)
            recall = np.mean(
                [len(set(a) & set(b)) / k for a, b in zip(approximate, exact.numpy(), strict=True)]
            )
            print(
                f"| {n_labels:.0e} | {structure} | {exact_seconds:.2f} | {build_seconds:.1f} | "
                f"{search_seconds:.2f} | {recall:.3f} |",
                flush=True,
            )
            table_rows.append(
                [n_labels, structure, exact_seconds, build_seconds, search_seconds, recall]
            )
    results.add_table(
        f"Top-{k} label search for {n_queries} queries, embedding {dim}",
        ["K", "table", "exact scan s", "HNSW build s", "HNSW search s", f"HNSW recall@{k}"],
        table_rows,
        notes="Exact: the chunked scan of predict_top_k (search='exact'); HNSW: "
        "FaissInnerProductIndex (search='faiss'), recall against the exact top k. 'clustered': "
        "labels and queries near 1,000 random directions (noise 0.5), L2-normalised. One "
        "process; faiss and torch threads as set by OMP_NUM_THREADS / torch.set_num_threads(1).",
    )


# ------------------------------------------------------------------------------ main
BLEND_NEIGHBOR_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7)
BLEND_CENTROID_WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0)


def run_blend(args, results):
    """Every pair of blend weights of one fit a seed, on the validation split (see --help)."""
    from bench_xmc import evaluate, recall_by_frequency

    for name in args.data:
        X_train, Y_train, _, _ = load(name, args.quick)
        fit, val = train_test_split(np.arange(X_train.shape[0]), test_size=0.2, random_state=0)
        X_fit, Y_fit, X_val, Y_val = X_train[fit], Y_train[fit], X_train[val], Y_train[val]
        rows = []
        for seed in args.seeds:
            model = SNMClassifier(neighbor_weight=0.1, centroid_weight=1.0, random_state=seed)
            model.fit(X_fit, Y_fit)
            for a in BLEND_NEIGHBOR_WEIGHTS:
                for b in BLEND_CENTROID_WEIGHTS:
                    model.neighbor_weight_, model.centroid_weight_ = a, b
                    top = model.predict_top_k(X_val, 5)
                    found = evaluate(Y_fit, Y_val, top)
                    recall = recall_by_frequency(Y_fit, Y_val, top)
                    rows.append(
                        [seed, a, b, round(found["P@1"], 4), round(found["P@5"], 4),
                         round(found["PSP@5"], 4)]
                        + [None if recall[k][0] is None else round(recall[k][0], 3)
                           for k in ("1", "2-5", "6-20", ">20")]
                    )  # fmt: skip
                    print("  ", rows[-1], flush=True)
        results.add_table(
            f"{name}: validation scores of the blend weights ({len(fit)} training rows fit, "
            f"{len(val)} held out)",
            ["seed", "neighbor_weight", "centroid_weight", "P@1", "P@5", "PSP@5"]
            + [f"R@5, {k} rows" for k in ("1", "2-5", "6-20", ">20")],
            rows,
            notes="One fit a seed (20 % validation split of the training set, random_state=0, "
            "the test split unread); its weights set after the fit, every pair scored on the "
            "held-out rows. R@5, n rows: the recall of the top 5 among the held-out (row, label) "
            "pairs whose label has n training rows.",
        )


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag")
    arguments.add_argument(
        "--part",
        choices=["accuracy", "scaling", "search", "validation", "curves", "blend"],
        default="accuracy",
    )
    arguments.add_argument("--data", nargs="+", default=["bibtex", "corel5k", "generator"])
    arguments.add_argument(
        "--neural", nargs="+", choices=list(NEURAL), help="neural methods to run (default: all)"
    )
    arguments.add_argument(
        "--settings",
        nargs="+",
        choices=list(VALIDATION_SETTINGS),
        help="settings of --part validation to run (default: all; 'defaults' always runs)",
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
    args.search_labels = [10**4] if args.quick else [10**5]
    if args.part in ("validation", "curves") and args.data == arguments.get_default("data"):
        args.data = ["bibtex", "corel5k"]
    per_data = args.part in ("accuracy", "validation", "curves", "blend")
    seeds = "seeds_" + "_".join(map(str, args.seeds)) if seeds_given else None
    results = Results(
        results_name("bench_snm", args, args.part, *(args.data if per_data else ()), seeds),
        packages=["faiss-cpu"] if args.part == "search" else (),
    )
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    parts = {
        "accuracy": run_accuracy,
        "scaling": run_scaling,
        "search": run_search,
        "validation": run_validation,
        "curves": run_curves,
        "blend": run_blend,
    }
    parts[args.part](args, results)
    results.save()


if __name__ == "__main__":
    main()
