"""SOPRCEmbedder against pytorch-metric-learning losses on MNIST-10k; ablations; step times.

Data: the 10,000 MNIST digits shipped with skrank, split once into halves stratified by digit
(``train_test_split(test_size=0.5, stratify=y, random_state=0)``): the embedding is trained on
one half and evaluated on the other, every test item a query against the other test items
(retrieval of unseen items of seen classes).

Every row trains the same MLP (784 -> 256 -> 64, L2-normalised) through the same training
engine, with the same batches (``samples_per_class`` items of each of the batch's distinct
classes, at most 224 items, as the estimator draws them), the same optimiser,
learning-rate schedule and number of epochs; only the loss differs. MNIST has 10 classes, so
the default ``--samples-per-class 22`` gives batches of 220 items (10 x 22), the nearest to the
paper's batch of 224; ``--samples-per-class 4`` (the estimator's default, the
paper's 4 per class) gives batches of only 40 items. Rows: SOPRC (skrank), SmoothAP, FastAP,
triplet margin and contrastive losses of pytorch-metric-learning with their default settings, and
the ablation rows of Table 2 of the SOPRC paper. Reported: test mean AUPRC and Recall@{1,4,16},
mean and standard deviation over 3 seeds.

Second part: time of one loss step (forward + backward of the loss alone, on random embeddings)
at batch 224 (56 classes x 4) x 512 dims, SOPRC (with the auxiliary vectors of ``SOPRCLoss``'s
defaults, and with the batch TPR and lambda (10, 2) of ``SOPRCEmbedder``'s) against SmoothAP and
FastAP, interleaved repetitions in one thread.

Everything runs in one torch thread: on a shared, busy machine torch's thread pool made these
small steps up to ten times slower, and one thread keeps the rows comparable.

``--tune`` replaces both parts by a validation-tuned comparison: the training half is split once
more (stratified, 20 % validation, ``random_state=0``); SOPRC, FastAP and the triplet loss are
each fitted with every seed on the other 80 % for every point of a small grid of their main
hyperparameters (``TUNING_GRIDS``), scored by validation mean AUPRC, and refitted with their best
point on the whole training half for every seed; the test split plays no part in the choice.
SmoothAP and contrastive, far behind at their defaults, are not tuned.

``--validation`` scores the ``--rows`` (and any ``--soprc SETTING`` rows, SOPRC with some
parameters changed, e.g. ``--soprc tau1=0.05 "lambda_pos=1 lambda_neg=0.2"``) on the same
validation split (20 % of the training half) after fitting on the other 80 %, and prints the
mean AUPRC of every seed and each row's per-seed difference from the first row: the way to screen
a setting without looking at the test half.

Every row, SOPRC and peers alike, uses the estimator's weight averaging (``PeerEmbedder`` is a
``SOPRCEmbedder``); ``--weight-averaging none`` (or a float) sets it for every row.

Usage: ``python benchmarks/bench_soprc.py [--quick] [--samples-per-class M]
[--learning-rate LR] [--weight-averaging W] [--step-times-only | --tune | --validation]
[--rows ROW ...] [--soprc SETTING ...] [--seeds SEED ...]``.

Writes, under ``benchmarks/results`` (rendered into ``benchmarks/README.md`` by
``benchmarks/report.py``): the default run ``bench_soprc_mnist_full_<B>.json`` (comparison,
Table 2 ablation and step-time tables; ``B`` the batch size, 220 at the default 22 per class, 40
with ``--samples-per-class 4``); ``--step-times-only`` ``bench_soprc_step_times.json``;
``--tune`` ``bench_soprc_tune_<B>.json``; ``--rows`` ``bench_soprc_mnist.json``; ``--validation``
``bench_soprc_mnist_validation.json``. A non-default ``--learning-rate``, ``--weight-averaging``,
``--seeds`` (other than 0 1 2) or extra ``--soprc`` rows add ``_lr<LR>``, ``_no_averaging`` /
``_averaging<W>``, ``_seeds<N>`` (seeds 0 to N-1; ``_seeds_<s>_<t>...`` for others),
``_extra_rows`` to the full and ``--tune`` names; ``--quick`` adds ``_quick`` to the first
three.
"""

import time
from functools import partial

import numpy as np
import torch
from _harness import alternate, parser, results_name, timed
from _results import Results
from pytorch_metric_learning import losses
from sklearn.model_selection import train_test_split

from skrank import SOPRCEmbedder
from skrank.datasets import load_mnist
from skrank.losses import SOPRCLoss
from skrank.metrics import mean_auprc_score, recall_at_k_score

RECALL_KS = (1, 4, 16)
MNIST_DIGITS = 10
MAX_BATCH = 224
DEFAULT_SAMPLES_PER_CLASS = 22  # 10 digits x 22 = 220 items, the nearest to 224
BUDGET = dict(max_epochs=20, learning_rate=0.05, optimizer="sgd", lr_milestones=[15])


def mnist_batch_items(samples_per_class):
    """Items of an MNIST batch: ``samples_per_class`` of each digit, at most ``MAX_BATCH``."""
    return min(MNIST_DIGITS, MAX_BATCH // samples_per_class) * samples_per_class


class BenchEmbedder(SOPRCEmbedder):
    """SOPRCEmbedder as the benchmark fits it (the estimator itself)."""


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


PEERS = {
    "SmoothAP (PML)": peer("SmoothAPEmbedder", losses.SmoothAPLoss),
    "FastAP (PML)": peer("FastAPEmbedder", losses.FastAPLoss),
    "triplet (PML)": peer("TripletEmbedder", losses.TripletMarginLoss),
    "contrastive (PML)": peer("ContrastiveEmbedder", losses.ContrastiveLoss),
}

# Table 2 of the paper: (prior, TPR source, regulariser, optimiser), every parameter set
# explicitly (the estimator's defaults changed since: batch TPR, lambda (10, 2)); the regulariser
# at the paper's weights (5, 1). Weight averaging as in every other row (--weight-averaging).
_NO_REGULARISER = dict(lambda_pos=0.0, lambda_neg=0.0)
_PAPER_SOPRC = dict(prior="dataset", tpr_source="auxiliary", lambda_pos=5.0, lambda_neg=1.0)
ABLATIONS = {
    "1: batch prior, batch TPR, no reg.": dict(
        prior="batch", tpr_source="batch", **_NO_REGULARISER
    ),
    "2: dataset prior, batch TPR, no reg.": dict(
        prior="dataset", tpr_source="batch", **_NO_REGULARISER
    ),
    "3: dataset prior, aux. vectors, no reg.": dict(
        prior="dataset", tpr_source="auxiliary", **_NO_REGULARISER
    ),
    "4: full SOPRC of the paper (SGD)": _PAPER_SOPRC,
    "5: full SOPRC of the paper (Adam, lr 1e-3)": dict(
        _PAPER_SOPRC, optimizer="adam", learning_rate=1e-3
    ),
}


def soprc_row(setting):
    """SOPRC row of the tuning: the setting holds SOPRCEmbedder parameters."""
    return BenchEmbedder, setting


def pml_row(loss_class):
    """Row builder of a PML loss whose constructor takes the setting."""

    def build(setting):
        embedder = peer(f"Tuned{loss_class.__name__}", partial(loss_class, **setting))
        return embedder, {}

    return build


# Loss -> (row builder, grid of its main hyperparameters); PML defaults: num_bins=10, margin=0.05;
# SOPRC's lambda: off, the paper's (5, 1) and the estimator's default (10, 2); its tau1 on both
# sides of the default 0.1 (the paper tunes tau per data set). Grids were widened on validation
# scores alone when the chosen point lay on an edge (tau1 up to 1.6, num_bins 3).
TUNING_GRIDS = {
    "SOPRC (skrank)": (
        soprc_row,
        [
            dict(lambda_pos=lambda_pos, lambda_neg=lambda_neg, tau1=tau1)
            for lambda_pos, lambda_neg in ((0.0, 0.0), (5.0, 1.0), (10.0, 2.0))
            for tau1 in (1.6, 0.8, 0.4, 0.2, 0.1, 0.05)
        ],
    ),
    "FastAP (PML)": (pml_row(losses.FastAPLoss), [dict(num_bins=n) for n in (3, 5, 10, 30, 50)]),
    "triplet (PML)": (
        pml_row(losses.TripletMarginLoss),
        [dict(margin=m) for m in (0.05, 0.1, 0.2, 0.4)],
    ),
}


def evaluate(model, X, y):
    embedding = model.transform(X)
    recalls = np.atleast_1d(recall_at_k_score(embedding, y, k=list(RECALL_KS)))
    return [mean_auprc_score(embedding, y, metric="cosine"), *recalls]


def run_rows(rows, data, seeds, budget, samples_per_class, batch_size):
    X_train, X_test, y_train, y_test = data
    results = {}
    for name, (cls, params) in rows.items():
        scores, seconds = [], []
        for seed in seeds:
            model = cls(
                **{**budget, **params},
                samples_per_class=samples_per_class,
                batch_size=batch_size,
                device="cpu",
                random_state=seed,
            )
            seconds.append(timed(model.fit, X_train, y_train)[1])
            scores.append(evaluate(model, X_test, y_test))
        results[name] = (np.array(scores), np.mean(seconds))
        mean = np.mean(scores, axis=0)
        print(f"  {name:<42} mean AUPRC {mean[0]:.4f}  ({np.mean(seconds):.0f} s/fit)", flush=True)
    return results


def print_table(title, results, raw):
    header = f"{'':<42}{'mAUPRC':>16}" + "".join(f"{f'R@{k}':>16}" for k in RECALL_KS)
    print(f"\n{title}\n{header}\n{'-' * len(header)}")
    for name, (scores, _) in results.items():
        cells = "".join(
            f"{m:>10.4f}±{s:<5.4f}" for m, s in zip(scores.mean(0), scores.std(0), strict=True)
        )
        print(f"{name:<42}{cells}")
    print(f"{'raw pixels (cosine)':<42}" + "".join(f"{v:>10.4f}{'':6}" for v in raw))


def step_times(repeats, batch_size=224, n_dims=512, samples_per_class=4):
    """Forward + backward times (ms) of each loss, interleaved repetitions."""
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
    return {name: np.array(values) for name, values in times.items()}


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", seeds=[0, 1, 2])
    mode = arguments.add_mutually_exclusive_group()
    mode.add_argument("--step-times-only", action="store_true", help="only the loss step times")
    mode.add_argument(
        "--tune",
        action="store_true",
        help="only the comparison with hyperparameters chosen on a validation split",
    )
    mode.add_argument(
        "--validation",
        action="store_true",
        help="score --rows and --soprc rows on the validation split of the training half",
    )
    arguments.add_argument(
        "--samples-per-class",
        type=int,
        default=DEFAULT_SAMPLES_PER_CLASS,
        help="items of each digit in a batch (default 22: 10 x 22 = 220 items)",
    )
    arguments.add_argument(
        "--rows",
        nargs="+",
        help="only these rows of the comparison (e.g. 'SOPRC (skrank)' 'FastAP (PML)'), no "
        "ablations; the table is saved to results/bench_soprc_mnist.json",
    )
    arguments.add_argument(
        "--learning-rate",
        type=float,
        default=BUDGET["learning_rate"],
        help=f"learning rate shared by every row (default {BUDGET['learning_rate']})",
    )
    arguments.add_argument(
        "--soprc",
        nargs="+",
        default=[],
        metavar="SETTING",
        help="extra SOPRC rows, each 'name=value ...' of SOPRCEmbedder parameters",
    )
    arguments.add_argument(
        "--weight-averaging",
        metavar="W",
        help="weight_averaging of every row, SOPRC and peers (a float, or 'none'); default: "
        "the estimator's",
    )
    args = arguments.parse_args(argv)
    torch.set_num_threads(1)
    if args.quick:  # 1 seed, 2 epochs, 5 step repeats
        args.seeds = [0]
    seeds = args.seeds
    budget = {**BUDGET, "learning_rate": args.learning_rate}
    if args.weight_averaging is not None:  # 'none' or a float
        args.weight_averaging = parse_setting(f"weight_averaging={args.weight_averaging}")
        budget.update(args.weight_averaging)
    if args.quick:
        budget.update(max_epochs=2, lr_milestones=None)
    start = time.perf_counter()
    if args.tune:
        results = Results(soprc_results_name("tune", args), packages=["pytorch-metric-learning"])
        tune_on_mnist(seeds, budget, args.samples_per_class, results)
    elif args.validation:
        validate_on_mnist(seeds, budget, args.samples_per_class, args.rows or [], args.soprc)
    elif args.rows:
        compare_on_mnist(seeds, budget, args.samples_per_class, args.rows, args.soprc)
    else:
        stem = "step_times" if args.step_times_only else "mnist_full"
        results = Results(soprc_results_name(stem, args), packages=["pytorch-metric-learning"])
        if not args.step_times_only:
            compare_on_mnist(seeds, budget, args.samples_per_class, None, args.soprc, results)
        times = step_times(5 if args.quick else 40)
        print_step_times(times)
        add_step_times(results, times)
    if args.tune or not (args.validation or args.rows):
        results.add_figure("total seconds", round(time.perf_counter() - start))
        results.save()
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


def soprc_results_name(stem, args):
    """``bench_soprc_<stem>``, with the batch size of the MNIST modes and any non-default run."""
    if stem == "step_times":  # random embeddings: no batch size, budget or rows
        return results_name(f"bench_soprc_{stem}", args)
    parts = [stem, mnist_batch_items(args.samples_per_class)]
    if args.learning_rate != BUDGET["learning_rate"]:
        parts.append(f"lr{args.learning_rate:g}")
    if args.weight_averaging is not None:
        value = args.weight_averaging["weight_averaging"]
        parts.append("no_averaging" if value is None else f"averaging{value:g}")
    parts.append(seeds_suffix(args.seeds))
    if args.soprc:
        parts.append("extra_rows")
    return results_name("bench_soprc", args, *parts)


def seeds_suffix(seeds):
    """Nothing for seeds 0, 1, 2 (and a quick run's 0); ``seeds<N>`` for 0..N-1; else each."""
    if list(seeds) in ([0, 1, 2], [0]):
        return ""
    if list(seeds) == list(range(len(seeds))):
        return f"seeds{len(seeds)}"
    return "seeds_" + "_".join(map(str, seeds))


def mnist_halves(seeds, budget, samples_per_class, batch_size):
    """The stratified halves and the raw-pixel scores of the test half; prints the setup."""
    X, y = load_mnist(return_X_y=True)
    data = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
    raw = [mean_auprc_score(data[1], data[3], metric="cosine")]
    raw += list(np.atleast_1d(recall_at_k_score(data[1], data[3], k=list(RECALL_KS))))
    digits_per_batch = min(np.unique(y).shape[0], batch_size // samples_per_class)
    print(
        f"MNIST-10k, stratified halves; MLP 784-256-64; {budget['max_epochs']} epochs, SGD "
        f"(momentum 0.9, weight decay 4e-4) lr {budget['learning_rate']} decayed x0.1 after "
        f"epochs {budget['lr_milestones']}; batches of {samples_per_class} items per class "
        f"(at most {batch_size}: {digits_per_batch} digits x {samples_per_class}); seeds {seeds}"
    )
    return data, raw


def comparison_rows(only=None, soprc_settings=()):
    """Rows of the comparison: all (or the names ``only``) and SOPRC with other settings."""
    rows = {"SOPRC (skrank)": (BenchEmbedder, {})}
    rows.update({name: (cls, {}) for name, cls in PEERS.items()})
    if only:
        rows = {name: rows[name] for name in only}
    for text in soprc_settings:
        setting = parse_setting(text)
        rows[f"SOPRC {setting_label(setting)}"] = soprc_row(setting)
    return rows


def parse_setting(text):
    """``'tau1=0.05 weight_averaging=none'`` -> ``{'tau1': 0.05, 'weight_averaging': None}``."""
    setting = {}
    for item in text.split():
        key, value = item.split("=")
        value = {"none": None}.get(value.lower(), value)
        if value is not None:
            try:
                value = float(value)
            except ValueError:
                pass
        setting[key] = value
    return setting


def print_paired(results):
    """Mean AUPRC per seed and each row's per-seed difference from the first row."""
    names = list(results)
    first = results[names[0]][0][:, 0]
    print(f"\nMean AUPRC per seed; difference from '{names[0]}' per seed (mean)")
    for name in names:
        values = results[name][0][:, 0]
        difference = values - first
        print(
            f"  {name:<42} "
            + " ".join(f"{v:.4f}" for v in values)
            + "   diff "
            + " ".join(f"{d:+.4f}" for d in difference)
            + f"  ({difference.mean():+.4f})"
        )


def validate_on_mnist(seeds, budget, samples_per_class, only, soprc_settings):
    """Rows fitted on 80 % of the training half, scored on its other 20 %."""
    batch_size = MAX_BATCH
    data, _ = mnist_halves(seeds, budget, samples_per_class, batch_size)
    X_train, _, y_train, _ = data
    validation_data = train_test_split(
        X_train, y_train, test_size=0.2, stratify=y_train, random_state=0
    )
    print(f"Validation: {validation_data[1].shape[0]} of {X_train.shape[0]} training items")
    rows = comparison_rows(only or ["SOPRC (skrank)"], soprc_settings)
    results = run_rows(rows, validation_data, seeds, budget, samples_per_class, batch_size)
    raw = [mean_auprc_score(validation_data[1], validation_data[3], metric="cosine")]
    raw += list(
        np.atleast_1d(recall_at_k_score(validation_data[1], validation_data[3], k=list(RECALL_KS)))
    )
    print_table("Validation retrieval, mean ± sd over seeds", results, raw)
    print_paired(results)
    save_validation(results, seeds, budget, samples_per_class)


def save_validation(results, seeds, budget, samples_per_class):
    batch_size = mnist_batch_items(samples_per_class)
    suffix = "" if samples_per_class == DEFAULT_SAMPLES_PER_CLASS else f"_{batch_size}"
    saved = Results(f"bench_soprc_mnist_validation{suffix}", packages=["pytorch-metric-learning"])
    names = list(results)
    first = results[names[0]][0][:, 0]
    rows = []
    for name, (scores, seconds) in results.items():
        difference = scores[:, 0] - first
        rows.append(
            [
                name,
                f"{scores[:, 0].mean():.4f} ± {scores[:, 0].std():.4f}",
                f"{scores[:, 1].mean():.4f} ± {scores[:, 1].std():.4f}",
                " ".join(f"{value:.4f}" for value in scores[:, 0]),
                " ".join(f"{value:+.4f}" for value in difference),
                f"{difference.mean():+.4f}",
                f"{seconds:.0f}",
            ]
        )
    saved.add_table(
        "Same-class MNIST, validation split of the training half (the test half unused)",
        ["row", "mean AUPRC", "R@1", "per seed", f"minus '{names[0]}'", "mean diff", "s / fit"],
        rows,
        notes=f"Fitted on 4,000 training items, scored on the 1,000 others (stratified, "
        f"random_state=0); MLP 784-256-64, {budget['max_epochs']} epochs, SGD lr "
        f"{budget['learning_rate']} x0.1 after epochs {budget['lr_milestones']}, "
        f"{samples_per_class} items per digit per batch, seeds {seeds}; 'SOPRC x=v' rows change "
        "only the named parameters of the estimator's defaults.",
    )
    saved.save()


def compare_on_mnist(seeds, budget, samples_per_class, only=None, soprc_settings=(), results=None):
    """The retrieval table and the ablation table (only the comparison rows ``only``).

    With ``only``, the table is saved to ``results/bench_soprc_mnist.json`` (``_seeds<N>``
    after it for other than 3 seeds); otherwise both
    tables are added to ``results``.
    """
    batch_size = MAX_BATCH
    data, raw = mnist_halves(seeds, budget, samples_per_class, batch_size)
    rows = comparison_rows(only, soprc_settings)
    comparison = run_rows(rows, data, seeds, budget, samples_per_class, batch_size)
    print_table("Test retrieval, mean ± sd over seeds", comparison, raw)
    print_paired(comparison)
    setup = setup_note(budget, samples_per_class, seeds)
    if only:
        name = "_".join(filter(None, ["bench_soprc_mnist", seeds_suffix(seeds)]))
        results = Results(name, packages=["pytorch-metric-learning"])
    add_score_table(
        results,
        "Same-class MNIST retrieval (test half), mean ± sd over seeds",
        "loss",
        comparison,
        raw,
        notes=f"{setup}; SOPRC at the estimator's defaults, PML losses at theirs.",
    )
    if only:
        results.save()
        return

    ablation_rows = {name: (BenchEmbedder, params) for name, params in ABLATIONS.items()}
    ablations = run_rows(ablation_rows, data, seeds, budget, samples_per_class, batch_size)
    print_table("Ablations (Table 2 of the paper)", ablations, raw)
    add_score_table(
        results,
        "Table 2 ablation of the SOPRC paper (SOPRCEmbedder, test half), mean ± sd over seeds",
        "row",
        ablations,
        raw,
        notes=f"{setup}; every row sets prior, tpr_source and lambda explicitly (regulariser "
        "at the paper's (5, 1)).",
    )


def setup_note(budget, samples_per_class, seeds):
    return (
        f"MLP 784-256-64, {budget['max_epochs']} epochs, SGD lr {budget['learning_rate']} "
        f"x0.1 after epochs {budget['lr_milestones']}, {samples_per_class} items per digit per "
        f"batch ({mnist_batch_items(samples_per_class)} items), "
        f"weight_averaging={budget.get('weight_averaging', SOPRCEmbedder().weight_averaging)} "
        f"for every row (peers included), seeds {seeds}"
    )


def score_rows(scores_by_name, raw=None):
    """Table rows ``name, mean ± sd of each score, s / fit`` (and the raw-pixel row)."""
    rows = [
        [name]
        + [f"{m:.4f} ± {s:.4f}" for m, s in zip(scores.mean(0), scores.std(0), strict=True)]
        + [f"{seconds:.0f}"]
        for name, (scores, seconds) in scores_by_name.items()
    ]
    if raw is not None:
        rows.append(["raw pixels (cosine)", *(f"{value:.4f}" for value in raw), ""])
    return rows


SCORE_COLUMNS = ["mean AUPRC", *(f"R@{k}" for k in RECALL_KS), "s / fit"]


def add_score_table(results, title, first_column, scores_by_name, raw, notes):
    results.add_table(title, [first_column, *SCORE_COLUMNS], score_rows(scores_by_name, raw), notes)


def tune_on_mnist(seeds, budget, samples_per_class, results):
    """Grid points scored on a validation split of the training half; the best refitted."""
    batch_size = MAX_BATCH
    data, raw = mnist_halves(seeds, budget, samples_per_class, batch_size)
    X_train, X_test, y_train, y_test = data
    validation_data = train_test_split(
        X_train, y_train, test_size=0.2, stratify=y_train, random_state=0
    )
    print(
        f"Validation: {validation_data[1].shape[0]} of the {X_train.shape[0]} training items "
        f"(stratified, random_state=0); grid points fitted with seeds {list(seeds)} on the "
        f"other {validation_data[0].shape[0]}"
    )
    fit = partial(run_rows, budget=budget, samples_per_class=samples_per_class)
    validation, chosen = {}, {}
    for name, (build_row, grid) in TUNING_GRIDS.items():
        rows = {f"{name}: {setting_label(setting)}": build_row(setting) for setting in grid}
        fitted = fit(rows, validation_data, seeds, batch_size=batch_size)
        scores = [fitted[label][0].mean(axis=0) for label in rows]
        best = int(np.argmax([score[0] for score in scores]))
        validation[name] = list(zip(grid, scores, strict=True))
        chosen[name] = grid[best]
    print_validation(validation, chosen)

    rows = {f"{name}, tuned": TUNING_GRIDS[name][0](setting) for name, setting in chosen.items()}
    tuned = fit(rows, data, seeds, batch_size=batch_size)
    print_table("Test retrieval, tuned settings, mean ± sd over seeds", tuned, raw)
    results.add_table(
        "Validation scores of the grid points, mean over seeds",
        ["loss", "setting", "chosen", *SCORE_COLUMNS[:-1]],
        [
            [name, setting_label(setting), "yes" if setting == chosen[name] else ""]
            + [f"{value:.4f}" for value in scores]
            for name, points in validation.items()
            for setting, scores in points
        ],
        notes=f"Fitted on {validation_data[0].shape[0]} items of the training half, scored on "
        f"the other {validation_data[1].shape[0]} (stratified, random_state=0; every validation "
        "item a query against the others), scores averaged over the seeds; chosen: the best "
        "validation mean AUPRC of each loss. "
        f"{setup_note(budget, samples_per_class, seeds)}.",
    )
    add_score_table(
        results,
        "Test retrieval, chosen settings refitted on the training half, mean ± sd over seeds",
        "loss (chosen setting)",
        {
            f"{name}: {setting_label(chosen[name])}": value
            for name, value in zip(chosen, tuned.values(), strict=True)
        },
        raw,
        notes=f"{setup_note(budget, samples_per_class, seeds)}; the test half played no part "
        "in the choice.",
    )


def setting_label(setting):
    return ", ".join(
        f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
        for key, value in setting.items()
    )


def print_validation(validation, chosen):
    print("\nValidation scores (mean over seeds; * = chosen)")
    header = f"{'loss':<18}{'setting':<42}{'mAUPRC':>8}" + "".join(
        f"{f'R@{k}':>8}" for k in RECALL_KS
    )
    print(f"{header}\n{'-' * len(header)}")
    for name, points in validation.items():
        for setting, scores in points:
            mark = "*" if setting == chosen[name] else " "
            cells = "".join(f"{value:>8.4f}" for value in scores)
            print(f"{name:<18}{mark}{setting_label(setting):<41}{cells}")


STEP_TITLE = "Loss step (forward + backward) at batch 224 (56 classes x 4) x 512 dims, 1 thread"


def print_step_times(times):
    print(f"\n{STEP_TITLE}")
    reference = np.median(times["FastAP (PML)"])
    for name, values in times.items():
        print(
            f"  {name:<42} median {np.median(values):7.1f} ms  "
            f"(quartiles {np.percentile(values, 25):.1f}-{np.percentile(values, 75):.1f})  "
            f"{np.median(values) / reference:5.2f} x FastAP"
        )


def add_step_times(results, times):
    """The step-time table (medians, quartiles, ratio to FastAP) and every repetition."""
    reference = np.median(times["FastAP (PML)"])
    rows = [
        [
            name,
            float(np.median(values)),
            f"{np.percentile(values, 25):.1f}-{np.percentile(values, 75):.1f}",
            float(np.median(values) / reference),
        ]
        for name, values in times.items()
    ]
    repeats = len(next(iter(times.values())))
    results.add_table(
        STEP_TITLE,
        ["loss", "median ms", "quartiles ms", "median / FastAP"],
        rows,
        notes=f"Random embeddings, classes of 1,000 items (auxiliary vectors of length 999), "
        f"{repeats} interleaved repetitions in one process and one torch thread; SOPRC twice: "
        "the loss's own defaults (auxiliary vectors, lambda (5, 1)) and the estimator's "
        "(TPR from the batch positives, lambda (10, 2)).",
    )
    results.add_figure("step ms", {name: values.tolist() for name, values in times.items()})


if __name__ == "__main__":
    main()
