"""SOPRCEmbedder against pytorch-metric-learning losses on MNIST-10k; ablations; step times.

Data: MNIST-10k in halves stratified by digit (``_data.mnist_split(test_size=0.5, seed=0)``,
float32): trained on one half, every item of the other a query against the others. Every row
trains the same MLP (784 -> 256 -> 64) through the same engine, batches (``--samples-per-class``
items of each digit), optimiser, schedule and weight averaging (``PeerEmbedder`` is a
``SOPRCEmbedder``); only the loss differs: SOPRC, pytorch-metric-learning's SmoothAP, FastAP,
triplet margin and contrastive losses at their defaults, and the ablations of Table 2 of the
SOPRC paper. Reported: test mean AUPRC and Recall@{1,4,16}, mean ± sd over the seeds. See
benchmarks/README.md, section "Same-class MNIST against pytorch-metric-learning".

``--step-times-only``: one loss step (forward + backward on random embeddings) at batch 224 (56
classes x 4) x 512 dims, SOPRC (``SOPRCLoss``'s defaults, and ``SOPRCEmbedder``'s batch TPR and
lambda (10, 2)) against SmoothAP and FastAP, interleaved. Everything on one torch thread.

Usage::

    python benchmarks/bench_soprc.py          # bench_soprc_mnist_full_<B>.json, B = 220 or 40
    python benchmarks/bench_soprc.py --samples-per-class 4
    python benchmarks/bench_soprc.py --rows 'SOPRC (skrank)' 'FastAP (PML)' \
        --seeds 0 1 2 3 4 5 6 7 8 9           # bench_soprc_mnist[_seeds<N>].json, no ablations
    python benchmarks/bench_soprc.py --step-times-only   # bench_soprc_step_times.json
"""

import numpy as np
import torch
from _data import mnist_split
from _harness import alternate, parser, results_name, timed
from _results import Results, summary
from pytorch_metric_learning import losses

from skrank import SOPRCEmbedder
from skrank.losses import SOPRCLoss
from skrank.metrics import mean_auprc_score, recall_at_k_score

RECALL_KS = (1, 4, 16)
MNIST_DIGITS = 10
MAX_BATCH = 224
BUDGET = dict(max_epochs=20, learning_rate=0.05, optimizer="sgd", lr_milestones=[15])
SCORE_COLUMNS = ["mean AUPRC", *(f"R@{k}" for k in RECALL_KS), "s / fit"]
STEP_TITLE = "Loss step (forward + backward) at batch 224 (56 classes x 4) x 512 dims, 1 thread"


class PeerEmbedder(SOPRCEmbedder):
    """The estimator's engine, network and batches, trained with a pytorch-metric-learning loss.

    Batches are the estimator's: groups of exactly ``samples_per_class`` items of distinct
    classes (MNIST classes are never smaller, so no group is padded), which SmoothAP needs.
    """

    loss_factory = None

    def initialize_criterion(self, y):
        return type(self).loss_factory()

    def get_loss(self, batch, targets):
        labels = batch.groups.repeat_interleave(self.samples_per_class)
        return self.criterion_(self.module_(batch.inputs)[batch.valid], labels[batch.valid])


def peer(name, loss_factory):
    """A :class:`PeerEmbedder` trained with ``loss_factory()``."""
    return type(name, (PeerEmbedder,), {"loss_factory": staticmethod(loss_factory)})


ROWS = {
    "SOPRC (skrank)": SOPRCEmbedder,
    "SmoothAP (PML)": peer("SmoothAPEmbedder", losses.SmoothAPLoss),
    "FastAP (PML)": peer("FastAPEmbedder", losses.FastAPLoss),
    "triplet (PML)": peer("TripletEmbedder", losses.TripletMarginLoss),
    "contrastive (PML)": peer("ContrastiveEmbedder", losses.ContrastiveLoss),
}


def _table2(prior, tpr_source, lambda_pos=0.0, lambda_neg=0.0, **other):
    """A row of Table 2 of the paper, every parameter set explicitly (the estimator's defaults
    changed since: batch TPR, lambda (10, 2)); the regulariser at the paper's weights (5, 1)."""
    return dict(
        prior=prior, tpr_source=tpr_source, lambda_pos=lambda_pos, lambda_neg=lambda_neg, **other
    )


ABLATIONS = {
    "1: batch prior, batch TPR, no reg.": _table2("batch", "batch"),
    "2: dataset prior, batch TPR, no reg.": _table2("dataset", "batch"),
    "3: dataset prior, aux. vectors, no reg.": _table2("dataset", "auxiliary"),
    "4: full SOPRC of the paper (SGD)": _table2("dataset", "auxiliary", 5.0, 1.0),
    "5: full SOPRC of the paper (Adam, lr 1e-3)": _table2(
        "dataset", "auxiliary", 5.0, 1.0, optimizer="adam", learning_rate=1e-3
    ),
}


def scores(embedding, y):
    recalls = np.atleast_1d(recall_at_k_score(embedding, y, k=list(RECALL_KS)))
    return [mean_auprc_score(embedding, y, metric="cosine"), *recalls]


def run_rows(rows, data, seeds, budget, samples_per_class):
    """``{name: [mean ± sd of each score, s / fit]}`` of ``rows`` (``{name: (class, params)}``)."""
    X_train, X_test, y_train, y_test = data
    table = {}
    for name, (cls, params) in rows.items():
        found, seconds = [], []
        for seed in seeds:
            model = cls(**{**budget, **params}, samples_per_class=samples_per_class,
                        batch_size=MAX_BATCH, device="cpu", random_state=seed)  # fmt: skip
            seconds.append(timed(model.fit, X_train, y_train)[1])
            found.append(scores(model.transform(X_test), y_test))
        table[name] = [summary(column) for column in zip(*found, strict=True)]
        table[name].append(f"{np.mean(seconds):.0f}")
        print(f"  {name:<42} mean AUPRC {table[name][0]}  ({table[name][-1]} s/fit)", flush=True)
    return table


def compare(args, budget, results):
    """The comparison table (``--rows``, or every row and then the ablation table)."""
    data = mnist_split(test_size=0.5, seed=0, dtype=np.float32)
    raw = ["raw pixels (cosine)", *(f"{value:.4f}" for value in scores(data[1], data[3])), ""]
    items = min(MNIST_DIGITS, MAX_BATCH // args.samples_per_class) * args.samples_per_class
    setup = (
        f"MLP 784-256-64, {budget['max_epochs']} epochs, SGD lr {budget['learning_rate']} "
        f"x0.1 after epochs {budget['lr_milestones']}, {args.samples_per_class} items per digit "
        f"per batch ({items} items), weight_averaging={SOPRCEmbedder().weight_averaging} for "
        f"every row (peers included), seeds {args.seeds}"
    )
    print(setup, flush=True)
    rows = {name: (ROWS[name], {}) for name in args.rows or ROWS}
    found = run_rows(rows, data, args.seeds, budget, args.samples_per_class)
    results.add_table(
        "Same-class MNIST retrieval (test half), mean ± sd over seeds",
        ["loss", *SCORE_COLUMNS],
        [[name, *cells] for name, cells in found.items()] + [raw],
        notes=f"{setup}; SOPRC at the estimator's defaults, PML losses at theirs.",
    )
    if args.rows:
        return
    rows = {name: (SOPRCEmbedder, params) for name, params in ABLATIONS.items()}
    found = run_rows(rows, data, args.seeds, budget, args.samples_per_class)
    results.add_table(
        "Table 2 ablation of the SOPRC paper (SOPRCEmbedder, test half), mean ± sd over seeds",
        ["row", *SCORE_COLUMNS],
        [[name, *cells] for name, cells in found.items()] + [raw],
        notes=f"{setup}; every row sets prior, tpr_source and lambda explicitly (regulariser "
        "at the paper's (5, 1)).",
    )


def step_times(results, repeats, batch_size=224, n_dims=512, samples_per_class=4):
    """The step-time table: forward + backward times (ms) of each loss, interleaved
    repetitions (medians, quartiles, ratio to FastAP), and every repetition."""
    torch.manual_seed(0)
    labels = torch.arange(batch_size // samples_per_class).repeat_interleave(samples_per_class)
    class_counts = np.full(batch_size // samples_per_class, 1000)
    candidates = {
        "SOPRC, auxiliary TPR (SOPRCLoss defaults)": SOPRCLoss(class_counts),
        "SOPRC, batch TPR (SOPRCEmbedder defaults)": SOPRCLoss(
            class_counts, tpr_source="batch", lambda_pos=10.0, lambda_neg=2.0
        ),
        "FastAP (PML)": losses.FastAPLoss(),
        "SmoothAP (PML)": losses.SmoothAPLoss(),
    }

    def step_ms(name):
        embeddings = torch.randn(batch_size, n_dims, requires_grad=True)
        return 1000 * timed(lambda: candidates[name](embeddings, labels).backward())[1]

    times = alternate(step_ms, candidates, repeats)
    reference = np.median(times["FastAP (PML)"])
    rows = [
        [name, float(np.median(values)),
         f"{np.percentile(values, 25):.1f}-{np.percentile(values, 75):.1f}",
         float(np.median(values) / reference)]
        for name, values in times.items()
    ]  # fmt: skip
    results.add_table(
        STEP_TITLE,
        ["loss", "median ms", "quartiles ms", "median / FastAP"],
        rows,
        notes=f"Random embeddings, classes of 1,000 items (auxiliary vectors of length 999), "
        f"{repeats} interleaved repetitions in one process and one torch thread; SOPRC twice: "
        "the loss's own defaults (auxiliary vectors, lambda (5, 1)) and the estimator's "
        "(TPR from the batch positives, lambda (10, 2)).",
        show=True,
    )
    results.add_figure("step ms", times)


def seeds_suffix(seeds):
    """Nothing for seeds 0, 1, 2 (and a quick run's 0); ``seeds<N>`` for 0..N-1; else each."""
    if list(seeds) in ([0, 1, 2], [0]):
        return ""
    if list(seeds) == list(range(len(seeds))):
        return f"seeds{len(seeds)}"
    return "seeds_" + "_".join(map(str, seeds))


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag", seeds=[0, 1, 2])
    arguments.add_argument("--step-times-only", action="store_true", help="only the step times")
    arguments.add_argument(
        "--samples-per-class", type=int, default=22,
        help="items of each digit in a batch (default 22: 10 x 22 = 220 items)",
    )  # fmt: skip
    arguments.add_argument(
        "--rows", nargs="+", choices=list(ROWS),
        help="only these rows of the comparison, no ablations (results/bench_soprc_mnist.json)",
    )  # fmt: skip
    args = arguments.parse_args(argv)
    torch.set_num_threads(1)
    budget = dict(BUDGET)
    if args.quick:  # 1 seed, 2 epochs, 5 step repeats
        args.seeds = [0]
        budget.update(max_epochs=2, lr_milestones=None)
    if args.step_times_only:
        name = results_name("bench_soprc_step_times", args)
    elif args.rows:
        name = results_name("bench_soprc_mnist", args, seeds_suffix(args.seeds))
    else:
        items = min(MNIST_DIGITS, MAX_BATCH // args.samples_per_class) * args.samples_per_class
        name = results_name("bench_soprc_mnist_full", args, items, seeds_suffix(args.seeds))
    results = Results(name, packages=["pytorch-metric-learning"])
    if not args.step_times_only:
        compare(args, budget, results)
    if not args.rows:
        step_times(results, 5 if args.quick else 40)
    results.save()


if __name__ == "__main__":
    main()
