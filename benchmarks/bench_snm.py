"""Stochastic Negative Mining: accuracy on shipped multilabel data, and cost per step as K grows.

Part ``real`` (the paper's Table 2 on data shipped with skrank): Bibtex (159 labels) and Corel5k
(374 labels), their own train/test splits. Top-1, top-16 and top-64 SNM against negative sampling
(uniform weights over the same ``B = 128`` sampled negatives), same network, same number of
epochs, mean of three seeds; Recall@{1,3,5} and Precision@{1,3,5} on the test split, and their
ratios to negative sampling (the paper reports ratios above 1, best at top-1). Each method gets
the learning rate of the label table that gives it the best validation Recall@5 (a table of all
of them is printed: negative sampling is far more sensitive to it). Then top-1 SNM against
negative sampling with ``B = 16``, closer to the paper's regime of ``B`` much smaller than ``K``.
A one-vs-rest logistic regression from scikit-learn gives the scale.

Part ``scaling``: synthetic data with K in {10^3, ..., 10^6} labels
(:func:`skrank.datasets.make_large_output_classification`): time of one training step and peak
memory of SNM (the estimator's own step: shared negative sample, BOWL, sparse label updates)
against a step over all K labels with the same network (full softmax cross-entropy, and full
BOWL with top-1 weights), each (method, K) in its own process so that peak memories do not mix.
Targets: SNM's step at K = 10^6 within 2x of its step at K = 10^3, and at least 20x faster than
the full step at K = 10^6.

Part ``search``: top-10 search over 10^5 label embeddings at prediction, the exact chunked scan
against a faiss HNSW index (build time, search time, recall of the approximate result).

Usage::

    python benchmarks/bench_snm.py            # everything (under an hour on 2 CPU cores)
    python benchmarks/bench_snm.py --quick    # smoke run, a minute or two
    python benchmarks/bench_snm.py --part scaling
"""

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from torch.nn import functional as F

from skrank import SNMClassifier
from skrank.datasets import load_bibtex, load_corel5k, make_large_output_classification
from skrank.losses import ordered_weighted_loss, owl_weights
from skrank.metrics import top_k_precision_score, top_k_recall_score
from skrank.sampling import draw_positive_labels

KS = [1, 3, 5]
METHODS = {  # name: SNMClassifier parameters on top of the shared ones
    "SNM top-1": dict(negative_weights="topk", top_k_negatives=1),
    "SNM top-16": dict(negative_weights="topk", top_k_negatives=16),
    "SNM top-64": dict(negative_weights="topk", top_k_negatives=64),
    "negative sampling": dict(negative_weights="uniform"),
}


# ------------------------------------------------------------------------------ real data
def label_metrics(Y_true, scores):
    """Recall@k and Precision@k (k = 1, 3, 5) from a dense score matrix."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # test rows without labels are excluded
        recall = top_k_recall_score(Y_true, scores, k=KS)
        precision = top_k_precision_score(Y_true, scores, k=KS)
    return np.concatenate([recall, precision])


def fit_quietly(model, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # training rows without labels are skipped
        return model.fit(data.data, data.target)


def select_label_learning_rate(train, params, args):
    """Each method gets the label learning rate with the best validation Recall@5 (seed 0, 10%
    of the training set held out), so that no method is judged at a rate tuned for another.

    Returns the chosen rate and the validation Recall@5 of every rate tried."""
    scores = {}
    for rate in args.label_rates:
        model = SNMClassifier(
            label_learning_rate=rate, validation_fraction=0.1, score_k=5, random_state=0, **params
        )
        scores[rate] = fit_quietly(model, train).history_[-1]["validation_score"]
    return max(scores, key=scores.get), scores


def evaluate_method(train, test, params, args):
    """Test metrics of one method at its selected rate, over the seeds."""
    rate, validation = select_label_learning_rate(train, params, args)
    runs, seconds = [], []
    for seed in args.seeds:
        start = time.perf_counter()
        model = SNMClassifier(random_state=seed, label_learning_rate=rate, **params)
        fit_quietly(model, train)
        seconds.append(time.perf_counter() - start)
        runs.append(label_metrics(test.target, model.decision_function(test.data)))
    entry = dict(
        mean=np.mean(runs, axis=0),
        std=np.std(runs, axis=0),
        seconds=np.mean(seconds),
        setting=f"label rate {rate}",
    )
    return entry, validation


def one_vs_rest(train, test, args):
    start = time.perf_counter()
    ovr = OneVsRestClassifier(LogisticRegression(C=args.ovr_c, max_iter=1000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # labels absent from training
        ovr.fit(train.data, train.target.toarray())
    return dict(
        mean=label_metrics(test.target, ovr.decision_function(test.data)),
        std=None,
        seconds=time.perf_counter() - start,
        setting=f"C={args.ovr_c}",
    )


def run_real(args):
    loaders = {"Bibtex": load_bibtex, "Corel5k": load_corel5k}
    experiments = {  # (B, methods): Table 2's comparison, then top-1 with B << K
        f"B = {args.n_negatives}": (args.n_negatives, METHODS),
        f"B = {args.small_n_negatives}": (
            args.small_n_negatives,
            {name: METHODS[name] for name in ("SNM top-1", "negative sampling")},
        ),
    }
    results, sensitivity = {}, {}
    for name, loader in loaders.items():
        train, test = loader(subset="train"), loader(subset="test")
        for experiment, (n_negatives, methods) in experiments.items():
            print(
                f"\n{name}, {experiment}: {train.data.shape[0]} train / {test.data.shape[0]} "
                f"test examples, {train.data.shape[1]} features, {train.target.shape[1]} labels, "
                f"{args.epochs} epochs, {len(args.seeds)} seeds, label learning rate chosen per "
                f"method from {args.label_rates}",
                flush=True,
            )
            params = dict(
                n_negatives=n_negatives,
                max_epochs=args.epochs,
                embedding_dim=args.embedding_dim,
                hidden_layer_sizes=(args.embedding_dim,),
                device="cpu",
            )
            table = {}
            for method, method_params in methods.items():
                table[method], validation = evaluate_method(
                    train, test, dict(params, **method_params), args
                )
                sensitivity[name, experiment, method] = validation
                print(f"  {method:<20} {format_cells(table[method], ' ')}", flush=True)
            results[f"{name}, {experiment}"] = table
        ovr = one_vs_rest(train, test, args)
        results[f"{name}, B = {args.n_negatives}"]["one-vs-rest logistic"] = ovr
        print(f"  {'one-vs-rest logistic':<20} {format_cells(ovr, ' ')}")
    print_real_tables(results)
    print_sensitivity(sensitivity, args)
    return results


def print_sensitivity(sensitivity, args):
    print(
        "\n### Validation Recall@5 (seed 0, 10% of the training set) at each learning rate of "
        "the label table\n"
    )
    print("| data | B | method | " + " | ".join(f"rate {r}" for r in args.label_rates) + " |")
    print("|---" * (3 + len(args.label_rates)) + "|")
    for (name, experiment, method), scores in sensitivity.items():
        cells = " | ".join(f"{scores[r]:.3f}" for r in args.label_rates)
        print(f"| {name} | {experiment.removeprefix('B = ')} | {method} | {cells} |")


def format_cells(entry, separator):
    """Metric cells ("mean ± std"), fit seconds and the setting, joined by ``separator``."""
    std = entry["std"] if entry["std"] is not None else [None] * len(entry["mean"])
    cells = [
        f"{m:.3f}" if s is None else f"{m:.3f} ± {s:.3f}"
        for m, s in zip(entry["mean"], std, strict=True)
    ]
    return separator.join([*cells, f"{entry['seconds']:.1f}", entry["setting"]])


def print_real_tables(results):
    header = " | ".join(f"R@{k}" for k in KS) + " | " + " | ".join(f"P@{k}" for k in KS)
    for name, table in results.items():
        print(f"\n### {name}: test metrics (mean ± std over seeds), fit seconds per seed\n")
        print(f"| method | {header} | fit s | setting |")
        print("|---" * (3 + 2 * len(KS)) + "|")
        for method, entry in table.items():
            print(f"| {method} | {format_cells(entry, ' | ')} |")
        baseline = table["negative sampling"]["mean"]
        print(f"\n### {name}: ratio to negative sampling (the paper's Table 2 form)\n")
        print(f"| method | {header} |")
        print("|---" * (1 + 2 * len(KS)) + "|")
        for method in (m for m in table if m.startswith("SNM")):
            ratios = table[method]["mean"] / baseline
            print(f"| {method} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")


# ------------------------------------------------------------------------------ scaling
class FullLabelClassifier(SNMClassifier):
    """The same network trained by a step over all K labels (the comparison of the scaling part).

    ``full_loss="softmax"``: cross-entropy of the softmax over all K cosine scores (scaled by
    ``temperature``); ``"bowl"``: BOWL with the top-1 weights over all K - 1 negatives. The label
    table gets a dense gradient, updated by plain SGD (the cheapest dense update).
    """

    full_loss = "softmax"
    temperature = 10.0

    def _build_optimizers(self, parameters):
        table = self.module_.label_embeddings.weight
        dense = [p for p in parameters if p is not table]
        return [
            *super(SNMClassifier, self)._build_optimizers(dense),
            torch.optim.SGD([table], lr=self.learning_rate),
        ]

    def _batch_loss(self, inputs, targets, indices):
        labels = torch.as_tensor(draw_positive_labels(targets[indices], self._label_rng))
        embeddings = self.module_(inputs)
        scores = embeddings @ F.normalize(self.module_.label_embeddings.weight, dim=1).T
        if self.full_loss == "softmax":
            return F.cross_entropy(self.temperature * scores, labels)
        positive = scores.gather(1, labels[:, None]).squeeze(1)
        mask = torch.ones_like(scores, dtype=torch.bool)
        mask[torch.arange(len(labels)), labels] = False
        weights = owl_weights("topk", 1)
        return ordered_weighted_loss(positive, scores, weights, mask=mask).mean()


class StepTimer:
    """Records when each training step of ``fit`` starts (the step is the core's own loop)."""

    def _batch_loss(self, inputs, targets, indices):
        self._step_starts.append(time.perf_counter())
        return super()._batch_loss(inputs, targets, indices)


class TimedSNM(StepTimer, SNMClassifier):
    pass


class TimedFullLabel(StepTimer, FullLabelClassifier):
    pass


def measure_step(method, n_labels, n_steps, batch_size, embedding_dim):
    """Median time of a training step and peak RSS, in this process (run as a child).

    One epoch of ``fit`` on ``n_steps + 4`` batches; a step's time is the interval between the
    starts of consecutive steps (loss, backward, optimiser steps, next batch), the first three
    steps (which allocate optimiser state) excluded.
    """
    # Indicator targets (one label per sample) so that the label table has all K rows.
    X, y = make_large_output_classification(
        n_samples=batch_size * (n_steps + 4),
        n_features=64,
        n_labels=n_labels,
        multilabel=True,
        random_state=0,
    )
    params = dict(
        embedding_dim=embedding_dim,
        hidden_layer_sizes=(embedding_dim,),
        batch_size=batch_size,
        max_epochs=1,
        device="cpu",
        random_state=0,
    )
    if method == "snm":
        model = TimedSNM(n_negatives=1024, **params)
    else:
        model = TimedFullLabel(**params)
        model.full_loss = method.removeprefix("full_")
    model._step_starts = []
    model.fit(X, y)
    steady = np.diff(model._step_starts)[3:] * 1000
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "step_ms": float(np.median(steady)),
        "q25": float(np.percentile(steady, 25)),
        "q75": float(np.percentile(steady, 75)),
        "peak_mib": peak_mib,
    }


def measure_in_child(method, n_labels, args):
    """``measure_step`` in a fresh process, so that peak memories do not mix."""
    command = [
        sys.executable,
        __file__,
        "--child",
        json.dumps([method, n_labels, args.steps, args.batch_size, args.scaling_dim]),
    ]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    result = json.loads(output.strip().splitlines()[-1])
    print(
        f"  K={n_labels:>8}  {method:<13} step {result['step_ms']:9.1f} ms "
        f"[{result['q25']:.1f}, {result['q75']:.1f}]  peak {result['peak_mib']:8.0f} MiB",
        flush=True,
    )
    return result


def run_scaling(args):
    """SNM steps are cheap: they are measured ``snm_repeats`` times, interleaved over K, and
    summarised by the median of the per-run medians (with their range) to tame a shared
    machine's noise. The full steps, up to ~1000x slower, are measured once."""
    snm_runs = {k: [] for k in args.n_labels}
    for _ in range(args.snm_repeats):
        for n_labels in args.n_labels:
            snm_runs[n_labels].append(measure_in_child("snm", n_labels, args))
    rows = {}
    for n_labels in args.n_labels:
        medians = [run["step_ms"] for run in snm_runs[n_labels]]
        rows[n_labels, "snm"] = {
            "step_ms": float(np.median(medians)),
            "low": min(medians),
            "high": max(medians),
            "peak_mib": max(run["peak_mib"] for run in snm_runs[n_labels]),
        }
        for method in ("full_softmax", "full_bowl"):
            result = measure_in_child(method, n_labels, args)
            rows[n_labels, method] = dict(result, low=result["q25"], high=result["q75"])
    print_scaling_table(rows, args)
    return rows


def print_scaling_table(rows, args):
    ks = args.n_labels
    print(
        f"\n### Time per training step (ms) and peak RSS (MiB); SNM: median of {args.snm_repeats} "
        "runs [range of their medians]; full steps: one run, median [quartiles]\n"
    )
    print(
        "| K | SNM step | full softmax step | full BOWL step | SNM peak | softmax peak | "
        "BOWL peak | full softmax / SNM | full BOWL / SNM | SNM / SNM at smallest K |"
    )
    print("|---" * 10 + "|")
    base = rows[ks[0], "snm"]["step_ms"]
    for k in ks:
        snm, soft, bowl = (rows[k, m] for m in ("snm", "full_softmax", "full_bowl"))
        print(
            f"| {k:.0e} | {cell(snm)} | {cell(soft)} | {cell(bowl)} | {snm['peak_mib']:.0f} | "
            f"{soft['peak_mib']:.0f} | {bowl['peak_mib']:.0f} | "
            f"{soft['step_ms'] / snm['step_ms']:.1f}x | {bowl['step_ms'] / snm['step_ms']:.1f}x | "
            f"{snm['step_ms'] / base:.2f}x |"
        )


def cell(result):
    return f"{result['step_ms']:.1f} [{result['low']:.1f}, {result['high']:.1f}]"


# ------------------------------------------------------------------------------ search
def run_search(args):
    """Prediction-time top-10 search: exact chunked scan against a faiss HNSW graph."""
    from skrank.metrics import FaissInnerProductIndex, top_k_inner_products

    rng = np.random.RandomState(0)
    n_queries, k, dim = 1000, 10, args.scaling_dim
    print(f"\n### Top-{k} label search for {n_queries} queries, embedding {dim}\n")
    print("| K | table | exact scan s | HNSW build s | HNSW search s | HNSW recall@10 |")
    print("|---|---|---|---|---|---|")
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
            start = time.perf_counter()
            _, exact = top_k_inner_products(
                torch.from_numpy(queries), lambda a, b, rows=rows: rows[a:b], n_labels, k
            )
            exact_seconds = time.perf_counter() - start
            start = time.perf_counter()
            index = FaissInnerProductIndex(table)
            build_seconds = time.perf_counter() - start
            start = time.perf_counter()
            _, approximate = index.search(queries, k)
            search_seconds = time.perf_counter() - start
            recall = np.mean(
                [len(set(a) & set(b)) / k for a, b in zip(approximate, exact.numpy(), strict=True)]
            )
            print(
                f"| {n_labels:.0e} | {structure} | {exact_seconds:.2f} | {build_seconds:.1f} | "
                f"{search_seconds:.2f} | {recall:.3f} |",
                flush=True,
            )


# ------------------------------------------------------------------------------ main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--part", choices=["real", "scaling", "search", "all"], default="all")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure_step(*json.loads(args.child))))
        return
    args.seeds = [0] if args.quick else [0, 1, 2]
    args.epochs = 2 if args.quick else 20
    args.n_negatives = 128
    args.small_n_negatives = 16
    args.embedding_dim = 64 if args.quick else 256
    args.ovr_c = 1.0
    args.label_rates = [0.05] if args.quick else [0.0002, 0.001, 0.005, 0.02, 0.05]
    args.n_labels = [10**3, 10**4] if args.quick else [10**3, 10**4, 10**5, 10**6]
    args.steps = 5 if args.quick else 20
    args.snm_repeats = 2 if args.quick else 5
    args.batch_size = 256
    args.scaling_dim = 128
    args.search_labels = [10**4] if args.quick else [10**5]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.part in ("real", "all"):
        run_real(args)
    if args.part in ("scaling", "all"):
        print(
            f"\nScaling: batch {args.batch_size}, B = 1024 sampled negatives, embedding "
            f"{args.scaling_dim}, {args.steps} timed steps after 3 warm-up steps"
        )
        run_scaling(args)
    if args.part in ("search", "all"):
        run_search(args)


if __name__ == "__main__":
    main()
