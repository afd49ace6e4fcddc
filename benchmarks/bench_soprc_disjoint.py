"""SOPRC on classes never seen in training, against pytorch-metric-learning's losses.

Data (``_data.composite_digits``): ``make_composite_digits(10_000, n_digits=2, n_classes=100,
random_state=0)``, two MNIST digits side by side (1,568 pixels), 100 classes of 520 down to 56
items. The training half (50 classes, 5,141 items) trains; the test half (50 other classes,
4,859 items, built from other MNIST images) is retrieved: every test item a query against the
other test items, by cosine similarity. Validation (the choice of every tuned setting):
``_data.composite_validation``, 20 of the 50 training classes held out, fitted on the other 30
with seed 0; the test classes play no part.

Every method trains the same MLP (1568 -> 512 -> 128, ReLU, L2-normalised at retrieval) for 10
epochs of SGD (lr 0.05, momentum 0.9, weight decay 4e-4) on batches of 50 classes x 4 items, one
torch thread, each fit in a child process of its own (``_harness.run_benchmark``):

- ``SOPRCEmbedder``: the estimator, only the architecture, epochs, batch and lr set;
- plain loops (:func:`plain_loop`): a 15-line torch loop, ``len(y) // batch`` steps per epoch,
  each drawing its classes uniformly without replacement and 4 items of each (with replacement
  when a class is smaller, as pytorch-metric-learning's ``MPerClassSampler``), with
  ``skrank.losses.SOPRCLoss`` or a pytorch-metric-learning loss (FastAP, MultiSimilarity,
  Contrastive, TripletMargin with all triplets; SmoothAP with ``--smoothap``).

Each loss runs with its documented defaults and with the best point of a small grid
(:data:`LOSSES`) on the validation split. Reported: test mean AUPRC and R@1, mean ± sd over the
seeds, seconds per fit. The budget curve of the same methods is ``bench_soprc_budget.py``; the
studies that chose SOPRCEmbedder's defaults on this data are in ``studies/``.

Usage::

    python benchmarks/bench_soprc_disjoint.py                 # seeds 0 1 2 (~15 min)
    python benchmarks/bench_soprc_disjoint.py --quick         # one seed, defaults only
    python benchmarks/bench_soprc_disjoint.py --device cuda   # every method on the GPU
"""

import time

import numpy as np
import torch
from _data import composite_digits, composite_validation
from _harness import Benchmark, Method, parser, results_name, run_benchmark, synchronize
from _results import Results, summary_rows
from pytorch_metric_learning import losses as pml
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

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


def plain_loop(loss, setting, X, y, seed, epochs=EPOCHS, averaging=None, report=None, device="cpu"):
    """Train the MLP with the loss ``LOSSES[loss]`` in a plain torch loop; returns the embedding
    function.

    ``averaging=(decay, start_epoch)`` embeds with torch's ``AveragedModel`` of the weights after
    every step from ``start_epoch`` on (EMA, or SWA with decay None), as
    ``skrank.nn.WeightAveraging`` does for the estimator. ``report(epoch, embed, seconds)`` is
    called after every epoch with the embedding function of the weights then and the seconds of
    training so far: the loop has no schedule, so these are the fits of ``epoch`` epochs.
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
    averaged = None
    if averaging is not None:
        decay, start_epoch = averaging
        multi_avg_fn = None if decay is None else get_ema_multi_avg_fn(decay)
        averaged = AveragedModel(module, multi_avg_fn=multi_avg_fn, use_buffers=True)
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
            if averaged is not None and epoch >= averaging[1]:
                averaged.update_parameters(module)
        synchronize(device)
        trained += time.perf_counter() - start
        if report is not None:
            module.eval()
            report(epoch, _embedding(module, device), trained)
            module.train()
    if averaged is not None:
        module = averaged.module
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


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag", "device", seeds=[0, 1, 2], device="cpu")
    arguments.add_argument("--smoothap", action="store_true", help="add SmoothAP (slow)")
    arguments.add_argument("--verbose", action="store_true", help="print every run")
    args = arguments.parse_args(argv)
    results = Results(
        results_name("bench_soprc_disjoint", args), packages=["pytorch-metric-learning"]
    )
    compare(args, results)
    results.save()


if __name__ == "__main__":
    main()
