"""SOPRC on classes never seen in training, against pytorch-metric-learning's losses.

Data: ``_data.composite_digits`` (two MNIST digits side by side, 100 classes): the training half
(50 classes, 5,141 items) trains, the test half (50 other classes, 4,859 items, other MNIST
images) is retrieved, every test item a query against the others by cosine similarity; every
tuned setting is chosen on ``_data.composite_validation`` (20 of the 50 training classes held
out, seed 0). Every method trains the same MLP (1568 -> 512 -> 128) for 10 epochs of SGD (lr
0.05, momentum 0.9, weight decay 4e-4) on batches of 50 classes x 4 items, one torch thread, a
child process a fit (``_harness.run_benchmark``): ``SOPRCEmbedder``, and a plain torch loop
(:func:`plain_loop`) with ``SOPRCLoss`` or a pytorch-metric-learning loss (SmoothAP with
``--smoothap``) at its defaults and at the best point of its grid (:data:`LOSSES`). Reported:
test mean AUPRC and R@1, mean ± sd over the seeds, seconds per fit. See benchmarks/README.md,
section "Classes unseen in training".

``--part budget`` (``bench_soprc_budget[_large]_<tag>.json``): the same methods after each of
``--budgets`` epochs on ``--classes`` classes (``_data.COMPOSITE_SCALES``; ``--large-classes``:
tens to hundreds of items a class), in this process: ``SOPRCEmbedder`` a fit per budget
(``--estimator NAME=VALUE`` changes its defaults); the plain loops (``SOPRCLoss (plain loop)``
with the estimator's loss) scored after each budget's epoch of one run, and tuned at the last
budget on the validation split (``--image-disjoint``: the class- and image-disjoint one);
SmoothAP only if an epoch takes at most 3x the other losses'. Results: after every method.

Usage::

    python benchmarks/bench_soprc_disjoint.py                 # seeds 0 1 2 (~15 min)
    python benchmarks/bench_soprc_disjoint.py --quick         # one seed, defaults only
    python benchmarks/bench_soprc_disjoint.py --device cuda   # every method on the GPU
    python benchmarks/bench_soprc_disjoint.py --part budget --classes 1000 --image-disjoint \\
        --rows SOPRCEmbedder "SOPRCLoss (plain loop)" --tag 1000_classes
    python benchmarks/bench_soprc_disjoint.py --part budget --classes 1000 --image-disjoint \\
        --smoothap --rows FastAP MultiSimilarity Contrastive Triplet SmoothAP \\
        --tag 1000_classes_peers
"""

import ast
import inspect
import time

import numpy as np
import torch
from _data import composite_digits, composite_scale, composite_validation
from _harness import Benchmark, Method, parser, results_name, run_benchmark, synchronize, timed
from _results import Results, summary, summary_rows
from pytorch_metric_learning import losses as pml

from skrank import SOPRCEmbedder
from skrank.losses import SOPRCLoss
from skrank.metrics import mean_auprc_score, recall_at_k_score
from skrank.nn import MLP

EPOCHS, LR, HIDDEN, DIMS, CLASSES_PER_BATCH, PER_CLASS = 10, 0.05, (512,), 128, 50, 4
ESTIMATOR_BUDGET = dict(
    hidden_layer_sizes=HIDDEN,
    n_components=DIMS,
    max_epochs=EPOCHS,
    learning_rate=LR,
    batch_size=CLASSES_PER_BATCH * PER_CLASS,
    samples_per_class=PER_CLASS,
)

# The loss the estimator trains: its settings of SOPRCLoss's parameters.
SOPRC_DEFAULTS = {
    name: value
    for name, value in SOPRCEmbedder().get_params().items()
    if name in inspect.signature(SOPRCLoss).parameters
}

# Loss -> (factory of the loss from the class counts and its settings, [defaults, grid...]).
LOSSES = {
    "SOPRCLoss (plain loop)": (
        lambda counts, **kw: SOPRCLoss(counts, **kw),
        [dict(tpr_source="auxiliary"), dict(tpr_source="batch")],
    ),
    "FastAP": (
        lambda counts, **kw: pml.FastAPLoss(**kw),
        [dict(num_bins=10), dict(num_bins=30), dict(num_bins=50)],
    ),
    "MultiSimilarity": (
        lambda counts, **kw: pml.MultiSimilarityLoss(**kw),
        [
            dict(alpha=2, beta=50, base=0.5),
            dict(alpha=2, beta=40, base=0.7),
            dict(alpha=1, beta=50, base=0.3),
        ],
    ),
    "Contrastive": (
        lambda counts, **kw: pml.ContrastiveLoss(**kw),
        [
            dict(pos_margin=0, neg_margin=1),
            dict(pos_margin=0, neg_margin=0.7),
            dict(pos_margin=0.2, neg_margin=0.9),
        ],
    ),
    "Triplet": (
        lambda counts, **kw: pml.TripletMarginLoss(**kw),
        [dict(margin=0.05), dict(margin=0.1), dict(margin=0.2)],
    ),
    "SmoothAP": (lambda counts, **kw: pml.SmoothAPLoss(**kw), [dict(temperature=0.01)]),
}
SLOW = ("SmoothAP",)  # run with --smoothap only
COLUMNS = ["method", "setting", "test mAUPRC", "test R@1", "s / fit"]


def evaluate(embedding, y):
    """Mean AUPRC and R@1 of cosine retrieval among ``embedding``'s rows."""
    embedding = np.asarray(embedding)
    embedding = embedding / np.linalg.norm(embedding, axis=1, keepdims=True).clip(1e-12)
    return {
        "mAUPRC": mean_auprc_score(embedding, y, metric="cosine"),
        "R@1": float(recall_at_k_score(embedding, y, k=1, metric="cosine")),
    }


def plain_loop(loss, setting, X, y, seed, epochs=EPOCHS, report=None, device="cpu"):
    """Train the MLP with the loss ``LOSSES[loss]`` in a plain torch loop, ``len(y) // batch``
    steps an epoch, each drawing its classes uniformly without replacement and 4 items of each
    (with replacement when a class is smaller, as pytorch-metric-learning's ``MPerClassSampler``);
    returns the embedding function.

    ``report(epoch, embed, seconds)`` is called after every epoch with the embedding function
    of the weights then and the seconds of training so far: the loop has no schedule, so these
    are the fits of ``epoch`` epochs.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    classes, codes = np.unique(y, return_inverse=True)
    members = [np.flatnonzero(codes == c) for c in range(classes.shape[0])]
    per_batch = min(CLASSES_PER_BATCH, classes.shape[0])
    batch = per_batch * PER_CLASS
    module = MLP(X.shape[1], HIDDEN, DIMS, normalize=False).to(device)
    loss_fn = LOSSES[loss][0](np.bincount(codes), **setting).to(device)
    optimizer = torch.optim.SGD(module.parameters(), lr=LR, momentum=0.9, weight_decay=4e-4)
    X_t, codes_t = torch.from_numpy(X).to(device), torch.from_numpy(codes).to(device)
    trained = 0.0
    for epoch in range(1, epochs + 1):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(X.shape[0] // batch):
            chosen = rng.choice(classes.shape[0], per_batch, replace=False)
            rows = np.concatenate(
                [
                    rng.choice(members[c], PER_CLASS, replace=members[c].shape[0] < PER_CLASS)
                    for c in chosen
                ]
            )
            rows = torch.from_numpy(rows).to(device)
            value = loss_fn(module(X_t[rows]), codes_t[rows])
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
        synchronize(device)
        trained += time.perf_counter() - start
        if report is not None:
            module.eval()
            report(epoch, _embedding(module, device), trained)
            module.train()
    module.eval()
    return _embedding(module, device)


def _embedding(module, device):
    def embed(X_new):
        with torch.no_grad():
            return module(torch.from_numpy(X_new).to(device)).cpu().numpy()

    return embed


# ------------------------------------------------------------------------------ the benchmark
# Each runs in the child of a fit: data, then fit (measured), then predict (the scores).
def fit_estimator(data, seed, device="cpu", **setting):
    torch.set_num_threads(1)
    model = SOPRCEmbedder(**ESTIMATOR_BUDGET, device=device, **setting, random_state=seed)
    return model.fit(data[0], data[1]).transform


def fit_loop(data, seed, loss, setting, device="cpu"):
    torch.set_num_threads(1)
    return plain_loop(loss, setting, data[0], data[1], seed, device=device)


def scores(embed, data):
    return evaluate(embed(data[2]), data[3])


def label(setting):
    return ", ".join(f"{key}={value}" for key, value in setting.items()) or "defaults"


def benchmark(methods, classes=100, validation=False):
    """The methods on the test split, or on the validation split (``validation``)."""
    data = composite_validation if validation else composite_digits
    return Benchmark(
        "bench_soprc_disjoint", data, tuple(methods), scores, None, {"classes": classes}
    )


def loss_method(name, loss, setting, device):
    return Method(name, fit_loop, {"loss": loss, "setting": setting, "device": device})


def table_rows(records, settings):
    """The comparison's rows: method, setting, mean ± sd of the scores, seconds per fit."""
    rows = summary_rows(records, ["mAUPRC", "R@1"], means=("fit_seconds",))
    return [
        [name, settings[name], *cells, "" if seconds is None else f"{seconds:.1f}"]
        for name, *cells, seconds, _ in rows
    ]


def compare(args, results):
    """Defaults and validation-tuned settings of every loss, on the test classes."""
    device, seeds = args.device, args.seeds[:1] if args.quick else args.seeds
    names = [name for name in LOSSES if args.smoothap or name not in SLOW]
    methods = [Method("SOPRCEmbedder", fit_estimator, {"device": device})]
    settings = {"SOPRCEmbedder": "defaults"}
    for name in names:
        methods.append(loss_method(name, name, LOSSES[name][1][0], device))
        settings[name] = label(LOSSES[name][1][0])
    report = print if args.verbose else None
    records = run_benchmark(benchmark(methods), seeds, report=report)
    validation_rows, tuned = [], []
    for name in [] if args.quick else names:
        grid = LOSSES[name][1]
        if len(grid) == 1:
            continue
        points = [loss_method(f"{name} [{label(s)}]", name, s, device) for s in grid]
        found = run_benchmark(benchmark(points, validation=True), [0], report=report)
        names_of = {point.name: label(s) for point, s in zip(points, grid, strict=True)}
        validation_rows += table_rows(found, names_of)
        best = int(np.argmax([record.get("mAUPRC", -1.0) for record in found]))
        settings[f"{name}, tuned"] = label(grid[best])
        if best == 0:  # the defaults' runs
            tuned += [{**r, "method": f"{name}, tuned"} for r in records if r["method"] == name]
        else:
            method = loss_method(f"{name}, tuned", name, grid[best], device)
            tuned += run_benchmark(benchmark([method]), seeds, report=report)
    order = ["SOPRCEmbedder", *(f"{n}{t}" for n in names for t in ("", ", tuned"))]
    everything = sorted(records + tuned, key=lambda record: order.index(record["method"]))
    raw = evaluate(*composite_digits()[2:])
    rows = [["raw pixels (cosine)", "", f"{raw['mAUPRC']:.4f}", f"{raw['R@1']:.4f}", ""]]
    results.add_table(
        "Class-disjoint retrieval (test classes)",
        COLUMNS,
        rows + table_rows(everything, settings),
        notes=f"Composite digits (2 MNIST digits, 100 long-tailed classes), 50 classes to train, "
        f"50 unseen to test; MLP 1568-512-128, SGD lr {LR} momentum 0.9 weight decay 4e-4, "
        f"{EPOCHS} epochs, batches of 50 classes x 4, one torch thread, device {device}, a child "
        f"process a fit; mean ± sd over seeds {seeds}. 'tuned': best of the grid on 20 held-out "
        "training classes (seed 0).",
    )
    if validation_rows:
        results.add_table(
            "Validation scores of the grids (20 held-out training classes, seed 0)",
            ["method", "setting", "validation mAUPRC", "validation R@1", "s / fit"],
            validation_rows,
        )
    results.add_figure("raw_pixels", raw).add_figure("runs", everything)


# ------------------------------------------------------------------------------ budget
BUDGETS = (2, 5, 10, 20)


class BudgetCurve:
    """The rows of the budget curve, saved after every method."""

    def __init__(self, results, budgets, notes, split):
        self.results, self.budgets, self.notes, self.split = results, budgets, notes, split
        self.rows, self.validation_rows = [], []

    def add(self, name, setting, scores, seconds):
        """``scores[budget]``: (seeds, 2) test mAUPRC and R@1; ``seconds[budget]``: per fit."""
        cells = [summary(scores[b][:, 0]) if b in scores else "" for b in self.budgets]
        times = "/".join(f"{seconds[b]:.0f}" if b in seconds else "-" for b in self.budgets)
        self.rows.append([name, label(setting), *cells, summary(scores[max(scores)][:, 1]), times])
        figures = self.results.data["figures"].setdefault("per_seed", {})
        figures[f"{name} | {label(setting)}"] = {
            str(b): {"mauprc": scores[b][:, 0], "recall@1": scores[b][:, 1], "seconds": seconds[b]}
            for b in scores
        }
        print(f"  {name:<34} {label(setting):<40} {'  '.join(cells)}  ({times} s)", flush=True)
        self.save()

    def save(self):
        self.results.data["tables"] = []
        last = max(self.budgets)
        self.results.add_table(
            f"Test mean AUPRC by training budget, {self.notes['classes']} (test classes)",
            ["method", "setting", *(f"{b} epochs" for b in self.budgets), f"R@1 ({last} epochs)",
             "s / fit"],
            self.rows,
            notes=" ".join(self.notes["text"]),
        )  # fmt: skip
        if self.validation_rows:
            self.results.add_table(
                f"Validation scores of the grids ({self.split} split, {last} epochs, seed 0)",
                ["method", "setting", "validation mAUPRC", "validation R@1", "s / fit"],
                self.validation_rows,
            )
        self.results.save()


def scored(embed, data):
    found = evaluate(embed(data[2]), data[3])
    return [found["mAUPRC"], found["R@1"]]


def estimator_at_budgets(setting, data, seeds, budgets, device):
    """Test scores and fit seconds of the estimator, a fit per budget and seed."""
    scores, seconds = {}, {}
    for budget in budgets:
        parameters = {**ESTIMATOR_BUDGET, "device": device, **setting, "max_epochs": budget}
        runs = []
        for seed in seeds:
            model = SOPRCEmbedder(**parameters, random_state=seed)
            fit_seconds = timed(model.fit, data[0], data[1], device=device)[1]
            runs.append([*scored(model.transform, data), fit_seconds])
        scores[budget], seconds[budget] = np.array(runs)[:, :2], float(np.mean(runs, 0)[2])
    return scores, seconds


def loop_at_budgets(loss, setting, data, seeds, budgets, device):
    """Test scores and training seconds of the plain loop after each budget's epoch."""
    scores, seconds = {b: [] for b in budgets}, {b: [] for b in budgets}

    def report(epoch, embed, trained):
        if epoch in scores:
            scores[epoch].append(scored(embed, data))
            seconds[epoch].append(trained)

    for seed in seeds:
        plain_loop(loss, setting, data[0], data[1], seed, max(budgets), report, device)
    return {b: np.array(v) for b, v in scores.items()}, {b: np.mean(v) for b, v in seconds.items()}


def _parameter(item):
    """``("name", value)`` of a ``--estimator NAME=VALUE`` (a Python literal, else a string)."""
    name, separator, text = item.partition("=")
    if not separator:
        raise ValueError(f"--estimator takes NAME=VALUE, not {item!r}.")
    try:
        return name, ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return name, text


def budget_curve(args, results):
    budgets, device = sorted(args.budgets), args.device
    seeds, end = args.seeds[:1] if args.quick else args.seeds, max(args.budgets)
    split = "disjoint validation" if args.image_disjoint else "validation"
    test = composite_digits(args.classes, args.large_classes)
    sizes = " of 10 or more items (--large-classes)" if args.large_classes else ""
    notes = {
        "classes": f"{args.classes:,} classes{sizes}",
        "text": [
            f"{args.classes:,} classes ({composite_scale(args.classes, args.large_classes)}), "
            f"half to train, half unseen to test; MLP {HIDDEN[0]} hidden, {DIMS} dims, SGD lr "
            f"{LR} momentum 0.9 weight decay 4e-4, batches of {CLASSES_PER_BATCH} classes x "
            f"{PER_CLASS}, one torch thread; mean ± sd over seeds {seeds}; device {device}. "
            "SOPRCEmbedder: a separate fit per budget (max_epochs); plain loops: scored after "
            "each budget's epoch of one run (no schedule: the same as separate fits). s / fit: "
            "training seconds at each budget."
        ],
    }
    curve = BudgetCurve(results, budgets, notes, split)
    wanted = args.rows or ["SOPRCEmbedder", *(n for n in LOSSES if args.smoothap or n not in SLOW)]
    if "SOPRCEmbedder" in wanted:
        setting = dict(_parameter(item) for item in args.estimator)
        found = estimator_at_budgets(setting, test, seeds, budgets, device)
        curve.add("SOPRCEmbedder", setting, *found)
    if "SOPRCLoss (plain loop)" in wanted:
        # The loss the estimator trains, in the plain loop: the fit-time ratio of the targets.
        name = "SOPRCLoss (plain loop)"
        found = loop_at_budgets(name, SOPRC_DEFAULTS, test, seeds, budgets, device)
        curve.add(name, {"the estimator's loss": "defaults"}, *found)
    epoch_seconds = []
    for name in [n for n in LOSSES if n in wanted and n != "SOPRCLoss (plain loop)"]:
        grid = LOSSES[name][1]
        if name in SLOW and epoch_seconds:  # run only at most 3x the others' epoch time
            probe = loop_at_budgets(name, grid[0], test, seeds[:1], [1], device)[1][1]
            ratio = probe / np.mean(epoch_seconds)
            results.add_figure(f"{name.lower()}_epoch_time_ratio", ratio)
            if ratio > 3:
                notes["text"].append(
                    f"{name} left out: one epoch took {ratio:.1f}x the mean epoch of the other "
                    "PML losses (at most 3x)."
                )
                curve.save()
                continue
        if not args.tuned_only:
            scores, seconds = loop_at_budgets(name, grid[0], test, seeds, budgets, device)
            epoch_seconds.append(seconds[end] / end)
            curve.add(name, grid[0], scores, seconds)
        if args.quick or args.no_tuning or len(grid) == 1:
            continue
        validation = composite_validation(args.classes, args.large_classes, args.image_disjoint)
        values = []
        for setting in grid:
            embed, fit_seconds = timed(
                plain_loop, name, setting, *validation[:2], 0, end, None, device, device=device
            )
            score = scored(embed, validation)
            values.append(score[0])
            curve.validation_rows.append(
                [name, label(setting), f"{score[0]:.4f}", f"{score[1]:.4f}", f"{fit_seconds:.1f}"]
            )
        best = int(np.argmax(values))
        if best != 0 or args.tuned_only:
            scores, seconds = loop_at_budgets(name, grid[best], test, seeds, [end], device)
        else:
            scores, seconds = {end: scores[end]}, {end: seconds[end]}
        curve.add(f"{name}, tuned", grid[best], scores, seconds)


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag", "device", seeds=[0, 1, 2], device="cpu")
    add = arguments.add_argument
    add("--part", choices=["compare", "budget"], default="compare", help="(default: compare)")
    add("--smoothap", action="store_true", help="add SmoothAP (slow)")
    add("--verbose", action="store_true", help="compare: print every run")
    add("--classes", type=int, choices=[100, 1000, 10000], default=100, help="budget: classes")
    add("--large-classes", action="store_true", help="budget: tens to hundreds of items a class")
    add("--budgets", type=int, nargs="+", default=list(BUDGETS), help="budget: epochs")
    add("--rows", nargs="+", help="budget: only these methods")
    add("--estimator", nargs="+", default=[], metavar="NAME=VALUE",
        help="budget: SOPRCEmbedder's parameters other than its defaults")  # fmt: skip
    add("--no-tuning", action="store_true", help="budget: the peers at their defaults only")
    add("--tuned-only", action="store_true", help="budget: the peers' grids and tuned rows only")
    add("--image-disjoint", action="store_true", help="budget: tune on the image-disjoint split")
    args = arguments.parse_args(argv)
    if args.part == "budget":
        torch.set_num_threads(1)
        name = results_name("bench_soprc_budget", args, args.large_classes and "large")
        budget_curve(args, Results(name, packages=["pytorch-metric-learning"]))
        return
    results = Results(
        results_name("bench_soprc_disjoint", args), packages=["pytorch-metric-learning"]
    )
    compare(args, results)
    results.save()


if __name__ == "__main__":
    main()
