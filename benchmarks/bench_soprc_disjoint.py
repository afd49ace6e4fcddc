"""SOPRC on classes never seen in training: composite MNIST digits, long-tailed classes.

Data: ``make_composite_digits(10_000, n_digits=2, n_classes=100, random_state=0)`` (two MNIST
digits side by side, 1,568 pixels; 100 classes of 520 down to 56 items, tail exponent 0.5). The
``"train"`` half (50 classes, 5,141 items) trains, the ``"test"`` half (50 other classes, 4,859
items, built from other MNIST images) is retrieved: every test item is a query against the other
test items, by cosine similarity. Validation (choice of every tuned setting and of SOPRC's
defaults): 20 of the 50 training classes (``GroupShuffleSplit(test_size=0.4, random_state=0)``
with the classes as groups), fitted on the other 30 with seed 0; the test classes play no part.

Every method trains the same MLP (1568 -> 512 -> 128, ReLU, L2-normalised at retrieval) for
10 epochs of SGD (lr 0.05, momentum 0.9, weight decay 4e-4, no decay) on batches of 50 classes
x 4 items (as many classes as there are when fewer), one torch thread:

- ``SOPRCEmbedder``: the estimator, only the architecture, epochs, batch and lr set;
- plain loops (``plain_loop``): a 15-line torch loop, ``len(y) // batch`` steps per epoch, each
  drawing its classes uniformly without replacement and 4 items of each (with replacement when
  a class is smaller; pytorch-metric-learning's ``MPerClassSampler`` does the same), with
  ``skrank.losses.SOPRCLoss`` or a pytorch-metric-learning loss (FastAP, MultiSimilarity,
  Contrastive, TripletMargin with all triplets; SmoothAP with ``--smoothap``).

Each loss runs with its documented defaults and with the best point of a small grid
(``GRIDS``) on the validation split. Reported: test mean AUPRC and R@1, mean +- sd over the
seeds, seconds per fit. ``--part causes`` fits the estimator with each cause of its gap to the
plain loop restored one at a time; ``--part table2`` the paper's Table 2 ablation.

``--device cuda`` trains every method on the GPU (the same network, batches and optimiser) and
scores there.

Usage: ``python benchmarks/bench_soprc_disjoint.py [--part compare|causes|table2|...] [--quick]
[--seeds 0 1 2] [--device cpu|cuda] [--tag TAG]``.
"""

import ast
import importlib.util
import tempfile
import time
from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from _harness import parser as harness_parser
from _harness import results_name, run_in_child, source_at, synchronize, timed
from _results import Results
from pytorch_metric_learning import losses as pml
from sklearn.model_selection import GroupShuffleSplit
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from skrank import SOPRCEmbedder
from skrank.datasets import load_mnist, make_composite_digits
from skrank.embedding import _soprc_embedder as soprc_module
from skrank.losses import SOPRCLoss
from skrank.metrics import mean_auprc_score, recall_at_k_score
from skrank.nn import MLP, Callback, WeightAveraging
from skrank.utils._params import parameters_for

EPOCHS, LR, HIDDEN, DIMS, CLASSES_PER_BATCH, PER_CLASS = 10, 0.05, (512,), 128, 50, 4
ESTIMATOR_BUDGET = dict(
    hidden_layer_sizes=HIDDEN,
    n_components=DIMS,
    max_epochs=EPOCHS,
    learning_rate=LR,
    batch_size=CLASSES_PER_BATCH * PER_CLASS,
    samples_per_class=PER_CLASS,
    device="cpu",  # --device sets it (use_device)
)
DEVICE = "cpu"


def use_device(device):
    """Train every method (the estimator and the plain loops) on ``device``."""
    global DEVICE
    DEVICE = ESTIMATOR_BUDGET["device"] = device


# Loss -> (factory of the loss from its settings and the class counts, defaults, grid).
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
}
SMOOTHAP = ("SmoothAP", (lambda counts, **kw: pml.SmoothAPLoss(**kw), [dict(temperature=0.01)]))


# The class-disjoint data at each number of classes (both halves): two digits and 100 classes
# as in the paper's protocol sized for the CPU; three and four digits with a Zipf tail (class of
# size rank r: 2 + a share proportional to 1 / r items) down to 3-4 items a class, most classes
# holding fewer than 8, as in Stanford Online Products.
SCALES = {
    100: dict(n_samples=10_000, n_digits=2, n_classes=100),
    1000: dict(n_samples=15_000, n_digits=3, tail_exponent=1.0, min_class_size=2),
    10000: dict(n_samples=150_000, n_digits=4, tail_exponent=1.0, min_class_size=2),
}
# Larger classes (--large-classes), as in iNaturalist, In-Shop or faces: tens to hundreds of
# items a class (1,000 classes: 10 to 300, 35 on average; 100 classes: 112 to 1,032).
LARGE_CLASS_SCALES = {
    100: dict(n_samples=20_000, n_digits=2, n_classes=100, tail_exponent=0.5, min_class_size=10),
    1000: dict(
        n_samples=35_000, n_digits=3, tail_exponent=0.5, min_class_size=10, max_class_size=300
    ),
}


def scale(classes, large=False):
    """The ``make_composite_digits`` parameters of the benchmark at ``classes`` classes."""
    scales = LARGE_CLASS_SCALES if large else SCALES
    if classes not in scales:
        raise ValueError(f"--large-classes is defined at {sorted(scales)} classes, not {classes}.")
    return scales[classes]


def composite_data(classes=100, validation=True, large=False):
    """The splits of the benchmark at ``classes`` classes (``large``: of LARGE_CLASS_SCALES):
    ``"test"`` (train on the training half, retrieve in the test half) and, with
    ``validation``, the two validation splits of the training half (the test classes play no
    part in them)."""
    train = make_composite_digits(**scale(classes, large), subset="train", random_state=0)
    test = make_composite_digits(**scale(classes, large), subset="test", random_state=0)
    splits = {"test": (train.data, train.target, test.data, test.target)}
    if not validation:
        return splits
    fit_rows, val_rows = next(
        GroupShuffleSplit(n_splits=1, test_size=0.4, random_state=0).split(
            train.data, train.target, groups=train.target
        )
    )
    splits["validation"] = (
        train.data[fit_rows],
        train.target[fit_rows],
        train.data[val_rows],
        train.target[val_rows],
    )
    splits["disjoint validation"] = disjoint_validation(train, fit_rows, val_rows)
    return splits


def disjoint_validation(train, fit_rows, val_rows, seed=0):
    """The validation split rebuilt as the test split is: class- *and* image-disjoint.

    The MNIST images of the training half are cut into halves stratified by digit; every item
    of the 30 fitting classes is redrawn from the first half (same class, same digits), every
    item of the 20 held-out classes from the second, so no held-out pixel is seen in fitting.
    Only training classes and training images take part.
    """
    rng = np.random.default_rng(seed)
    images, digits = load_mnist(return_X_y=True)
    pool = np.unique(train.source_indices)
    halves = {}
    for digit in range(10):
        rows = rng.permutation(pool[digits[pool] == digit])
        halves[0, digit], halves[1, digit] = np.array_split(rows, 2)
    parts = []
    for half, rows in enumerate((fit_rows, val_rows)):
        item_digits = train.digits[rows]
        sources = np.empty_like(item_digits)
        for digit in range(10):
            where = item_digits == digit
            sources[where] = rng.choice(halves[half, digit], size=int(where.sum()))
        side = images.reshape(-1, 28, 28)[sources]  # (n, n_digits, 28, 28)
        data = side.transpose(0, 2, 1, 3).reshape(rows.shape[0], -1)
        parts += [np.ascontiguousarray(data, dtype=np.float32), train.target[rows]]
    return tuple(parts)


def evaluate(embedding, y):
    embedding = embedding / np.linalg.norm(embedding, axis=1, keepdims=True).clip(1e-12)
    return (
        mean_auprc_score(embedding, y, metric="cosine"),
        float(recall_at_k_score(embedding, y, k=1, metric="cosine")),
    )


def plain_loop(loss_factory, setting, X, y, seed, epochs=EPOCHS, averaging=None, report=None):
    """Train the MLP with a loss in a plain torch loop; returns the embedding function.

    ``averaging=(decay, start_epoch)`` embeds with torch's ``AveragedModel`` of the weights
    after every step from ``start_epoch`` on (EMA, or SWA with decay None), as
    ``skrank.nn.WeightAveraging`` does for the estimator. ``report(epoch, embed, seconds)`` is
    called after every epoch with the embedding function of the weights then and the seconds
    of training so far: the loop has no schedule, so these are the fits of ``epoch`` epochs.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    classes, codes = np.unique(y, return_inverse=True)
    members = [np.flatnonzero(codes == c) for c in range(classes.shape[0])]
    per_batch = min(CLASSES_PER_BATCH, classes.shape[0])
    batch = per_batch * PER_CLASS
    module = MLP(X.shape[1], HIDDEN, DIMS, normalize=False).to(DEVICE)
    loss_fn = loss_factory(np.bincount(codes), **setting).to(DEVICE)
    optimizer = torch.optim.SGD(module.parameters(), lr=LR, momentum=0.9, weight_decay=4e-4)
    X_t, codes_t = torch.from_numpy(X).to(DEVICE), torch.from_numpy(codes).to(DEVICE)
    averaged = None
    if averaging is not None:
        decay, start_epoch = averaging
        multi_avg_fn = None if decay is None else get_ema_multi_avg_fn(decay)
        averaged = AveragedModel(module, multi_avg_fn=multi_avg_fn, use_buffers=True)
    trained = 0.0
    for epoch in range(1, epochs + 1):
        synchronize(DEVICE)
        start = time.perf_counter()
        for _ in range(X.shape[0] // batch):
            chosen = rng.choice(classes.shape[0], per_batch, replace=False)
            rows = np.concatenate(
                [
                    rng.choice(members[c], PER_CLASS, replace=members[c].shape[0] < PER_CLASS)
                    for c in chosen
                ]
            )
            rows = torch.from_numpy(rows).to(DEVICE)
            loss = loss_fn(module(X_t[rows]), codes_t[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if averaged is not None and epoch >= averaging[1]:
                averaged.update_parameters(module)
        synchronize(DEVICE)
        trained += time.perf_counter() - start
        if report is not None:
            module.eval()
            report(epoch, _embedding(module), trained)
            module.train()
    if averaged is not None:
        module = averaged.module
    module.eval()
    return _embedding(module)


def _embedding(module):
    def embed(X_new):
        with torch.no_grad():
            return module(torch.from_numpy(X_new).to(DEVICE)).cpu().numpy()

    return embed


def loop_fit(factory, setting, X, y, seed):
    return plain_loop(factory, setting, X, y, seed)


def estimator_fit(setting, X, y, seed):
    commit = setting.get("sampler")
    if commit is None:
        return estimator(setting, X, y, seed)
    # The batch sampler of an earlier commit, in the estimator of this one.
    old = _module_at(commit, "skrank/sampling/_batches.py", f"batches_{commit}")
    setting = {key: value for key, value in setting.items() if key != "sampler"}
    with mock.patch.object(
        soprc_module, "ClassBalancedBatchSampler", old.ClassBalancedBatchSampler
    ):
        return estimator(setting, X, y, seed)


def estimator(setting, X, y, seed, cls=SOPRCEmbedder):
    model = cls(**{**ESTIMATOR_BUDGET, **setting}, random_state=seed).fit(X, y)
    return model.transform


def run(fit, data, seeds):
    """(scores (seeds, 2), seconds per fit) of ``fit(X, y, seed)`` on one split."""
    X_fit, y_fit, X_eval, y_eval = data
    scores, seconds = [], []
    for seed in seeds:
        embed, fit_seconds = timed(fit, X_fit, y_fit, seed, device=DEVICE)
        seconds.append(fit_seconds)
        scores.append(evaluate(embed(X_eval), y_eval))
    return np.array(scores), float(np.mean(seconds))


def row(name, setting, scores, seconds):
    mean, sd = scores.mean(0), scores.std(0)
    label = ", ".join(f"{k}={v}" for k, v in setting.items()) or "defaults"
    print(
        f"  {name:<34} {label:<44} mAUPRC {mean[0]:.4f} +- {sd[0]:.4f}  R@1 {mean[1]:.4f}"
        f"  {seconds:5.1f} s/fit  (per seed: {' '.join(f'{v:.4f}' for v in scores[:, 0])})",
        flush=True,
    )
    return [
        name,
        label,
        f"{mean[0]:.4f} ± {sd[0]:.4f}",
        f"{mean[1]:.4f} ± {sd[1]:.4f}",
        f"{seconds:.1f}",
    ]


# The estimator at the commits that removed each cause of its gap to the plain loop.
CAUSES = [
    (
        "2ed869b",
        "the first estimator: sampler dealing every item once into batches of distinct "
        "classes; TPR sums by autograd (_auxiliary_true_positive_sums)",
    ),
    ("7541d5a", "+ fixed-shape sampler: every batch P classes x M items (engine v2)"),
    ("3715b28", "+ fused surrogate loss with a hand-written backward (no autograd TPR sums)"),
    ("HEAD", "+ tpr_source='batch' by default (chosen on the validation classes)"),
]


def causes(seeds, splits, results):
    """The estimator at successive commits (each removing one cause), and the plain loop."""
    rows = []
    X, y, X_test, y_test = splits["test"]
    for commit, what in CAUSES:
        with source_at(commit) as source, tempfile.TemporaryDirectory() as folder:
            np.savez(Path(folder) / "data.npz", X=X, y=y, X_test=X_test)
            found = run_in_child(
                Path(__file__).with_name("_soprc_fit_at.py"),
                "fit_and_embed",
                {"folder": folder, "seeds": seeds, "budget": ESTIMATOR_BUDGET},
                source=source,
            )
            embeddings = np.load(Path(folder) / "embeddings.npz")
            scores = np.array([evaluate(embeddings[str(seed)], y_test) for seed in seeds])
        seconds = float(np.mean(found["seconds"]))
        cells = row(f"SOPRCEmbedder @ {commit}", {}, scores, seconds)[2:]
        steps = f"{found['steps']} x {found['mean_batch']:.0f}"
        rows.append([f"SOPRCEmbedder @ {commit}", what, steps, *cells])
    factory, grid = LOSSES["SOPRCLoss (plain loop)"]
    for setting in grid:
        scores, seconds = run(partial(loop_fit, factory, setting), splits["test"], seeds)
        cells = row("SOPRCLoss (plain loop)", setting, scores, seconds)[1:]
        steps = f"{y.shape[0] // 200} x 200"
        rows.append(["SOPRCLoss in the plain loop", cells[0], steps, *cells[1:]])
    results.add_table(
        "Why the estimator trailed the plain loop: one row per cause (test classes)",
        ["fit", "change", "steps x items / epoch", "test mAUPRC", "test R@1", "s / fit"],
        rows,
        notes=f"Same data, network, budget and seeds {seeds} as the comparison; each commit's "
        "skrank extracted with git archive and run in a child process (one torch thread).",
    )


# Table 2 of the paper: (prior, TPR source, semi-variance) as SOPRCEmbedder parameters, every
# one set explicitly (the estimator's defaults changed).
_NO_SEMIVARIANCE = dict(lambda_pos=0.0, lambda_neg=0.0)
_SEMIVARIANCE = dict(lambda_pos=5.0, lambda_neg=1.0)
TABLE2 = {
    "1: batch prior, batch TPR, no semi-variance": dict(
        prior="batch", tpr_source="batch", **_NO_SEMIVARIANCE
    ),
    "2: dataset prior, batch TPR, no semi-variance": dict(
        prior="dataset", tpr_source="batch", **_NO_SEMIVARIANCE
    ),
    "3: dataset prior, auxiliary TPR, no semi-variance": dict(
        prior="dataset", tpr_source="auxiliary", **_NO_SEMIVARIANCE
    ),
    "4: dataset prior, auxiliary TPR, semi-variance (paper)": dict(
        prior="dataset", tpr_source="auxiliary", **_SEMIVARIANCE
    ),
    "5: dataset prior, batch TPR, semi-variance (new default)": dict(
        prior="dataset", tpr_source="batch", **_SEMIVARIANCE
    ),
    "6: batch prior, batch TPR, semi-variance": dict(
        prior="batch", tpr_source="batch", **_SEMIVARIANCE
    ),
}


def table2(seeds, splits, results):
    """The paper's Table 2 ablation with the estimator, on the test classes."""
    rows = []
    for name, setting in TABLE2.items():
        scores, seconds = run(partial(estimator_fit, setting), splits["test"], seeds)
        rows.append(row(name, setting, scores, seconds))
    results.add_table(
        "Table 2 ablation of the paper (SOPRCEmbedder, test classes)",
        COLUMNS,
        rows,
        notes=f"Each row changes only the named parameters of the defaults; seeds {seeds}.",
    )


# The defaults of 0.2 before the prior's warm-up (prior_warmup, chosen at 1,000 classes).
_CURRENT_DEFAULTS = dict(weight_averaging=0.4, lambda_pos=10.0, lambda_neg=2.0, prior_warmup=None)

# The validation sweep of SOPRCEmbedder's settings: one change, or a combination of the best
# single changes, to a reference ("defaults before the sweep": no weight averaging, lambda
# (5, 1)); each fitted on the 30 fitting classes and scored on the 20 held-out training classes.
SWEEP = {
    "defaults before the sweep": {},
    "class_weights=uniform": dict(class_weights="uniform"),
    "tau1=0.05": dict(tau1=0.05),
    "tau1=0.07": dict(tau1=0.07),
    "tau1=0.2": dict(tau1=0.2),
    "tau2=1e-4": dict(tau2=1e-4),
    "tau2=0.003": dict(tau2=0.003),
    "tau2=0.01": dict(tau2=0.01),
    "lambda=(0, 0)": dict(lambda_pos=0.0, lambda_neg=0.0),
    "lambda=(5, 2)": dict(lambda_pos=5.0, lambda_neg=2.0),
    "lambda=(10, 1)": dict(lambda_pos=10.0, lambda_neg=1.0),
    "lambda=(10, 2)": dict(lambda_pos=10.0, lambda_neg=2.0),
    "lambda=(20, 4)": dict(lambda_pos=20.0, lambda_neg=4.0),
    "weight_decay=0": dict(weight_decay=0.0),
    "weight_decay=1e-3": dict(weight_decay=1e-3),
    "cosine learning-rate schedule": dict(schedule="cosine"),
    "samples_per_class=2": dict(samples_per_class=2),
    "samples_per_class=8": dict(samples_per_class=8),
    "prior=batch": dict(prior="batch"),
    # Weight averaging (skrank.nn.WeightAveraging); about 25 steps per epoch.
    "EMA decay=0.98": dict(averaging=(0.98, 1)),
    "EMA decay=0.99": dict(averaging=(0.99, 1)),
    "EMA decay=0.995": dict(averaging=(0.995, 1)),
    "SWA from epoch 6": dict(averaging=(None, 6)),
    "weight_averaging=0.4 (the new default)": dict(weight_averaging=0.4),
    # Candidates from the same-class MNIST validation split (bench_soprc.py --validation),
    # on top of the weight averaging default.
    "weight_averaging=0.4, tau1=0.2": dict(weight_averaging=0.4, tau1=0.2),
    "weight_averaging=0.4, tau2=0.01": dict(weight_averaging=0.4, tau2=0.01),
    "weight_averaging=0.4, lambda=(10, 2)": dict(
        weight_averaging=0.4, lambda_pos=10.0, lambda_neg=2.0
    ),
    "weight_averaging=0.4, lambda=(20, 4)": dict(
        weight_averaging=0.4, lambda_pos=20.0, lambda_neg=4.0
    ),
    "weight_averaging=0.4, tau2=0.01, lambda=(10, 2)": dict(
        weight_averaging=0.4, tau2=0.01, lambda_pos=10.0, lambda_neg=2.0
    ),
    # The margin tau1 against the items per class of a batch: on the same-class MNIST
    # validation split the best tau1 grows from 0.1 at 4 items per class to 0.4 at 8 or more;
    # on top of the 0.2 defaults (weight averaging 0.4, lambda (10, 2)).
    **{
        f"0.2 defaults, samples_per_class={m}, tau1={tau1}": dict(
            _CURRENT_DEFAULTS, samples_per_class=m, tau1=tau1
        )
        for m in (4, 8, 12)
        for tau1 in (0.1, 0.2, 0.4)
    },
    # The slow start with many classes: one change each to the 0.2 defaults, screened on the
    # validation classes of --classes 1000 at short budgets (--max-epochs).
    **{
        f"0.2 defaults{label}": dict(_CURRENT_DEFAULTS, **change)
        for label, change in {
            "": {},
            ", prior=batch": dict(prior="batch"),
            ", weight_averaging=0.1": dict(weight_averaging=0.1),
            ", weight_averaging=None": dict(weight_averaging=None),
            ", class_weights=uniform": dict(class_weights="uniform"),
            ", tau1=0.2": dict(tau1=0.2),
            ", tau2=0.01": dict(tau2=0.01),
            ", lambda=(0, 0)": dict(lambda_pos=0.0, lambda_neg=0.0),
            ", tpr_source=auxiliary": dict(tpr_source="auxiliary"),
            ", cosine learning-rate schedule": dict(schedule="cosine"),
            ", sampler at 656748b (classes drawn batch by batch)": dict(sampler="656748b"),
            ", prior_warmup=0.25": dict(prior_warmup=0.25),
            ", prior_warmup=0.5": dict(prior_warmup=0.5),
            ", prior_warmup=1": dict(prior_warmup=1.0),
            ", prior warm-up over 2 epochs": dict(prior_schedule=("epochs", 2)),
            ", prior floored at the batch rate": dict(prior_schedule=("floor", None)),
        }.items()
    },
}


class _PriorSchedule(Callback):
    """Two other forms of the prior's warm-up: ``("epochs", e)`` raises the loss's
    ``dataset_prior_weight`` from 0 to 1 over the first ``e`` epochs (``prior_warmup`` does
    it over a fraction of the steps); ``("floor", None)`` floors the dataset priors at the
    batch rate of a full batch, ``(M - 1) / (P M - 1)``."""

    def __init__(self, kind, length):
        self.kind, self.length = kind, length

    def on_train_begin(self, estimator, X, y, validation):
        loss, self.step = estimator.criterion_, 0
        self.steps = self.length * len(estimator.sampler_) if self.kind == "epochs" else None
        if self.kind == "floor":
            size = estimator.samples_per_class
            rate = (size - 1) / (estimator.sampler_.classes_per_batch * size - 1)
            self.dataset = loss.priors.clone()
            prior = loss.priors.clamp(min=rate)
            loss.priors.copy_(prior)
            loss.class_factors[:, :2] = torch.stack([prior, 1 - prior], dim=1)

    def on_batch_begin(self, estimator, batch):
        if self.kind == "epochs":
            estimator.criterion_.dataset_prior_weight = min(1.0, self.step / self.steps)
            self.step += 1

    def on_train_end(self, estimator, interrupted):
        loss = estimator.criterion_
        loss.dataset_prior_weight = 1.0
        if self.kind == "floor":
            loss.priors.copy_(self.dataset)
            loss.class_factors[:, :2] = torch.stack([self.dataset, 1 - self.dataset], dim=1)


def _sweep_setting(setting, epochs=EPOCHS):
    """Estimator parameters of a sweep setting (a cosine schedule becomes a callback), as
    changes to the defaults before the sweeps (no weight averaging and no warm-up of the prior
    unless named, the regulariser's weights (5, 1) of those defaults unless named)."""
    setting = {
        **dict(weight_averaging=None, lambda_pos=5.0, lambda_neg=1.0, prior_warmup=None),
        **setting,
    }
    if setting.pop("schedule", None) == "cosine":
        from torch.optim.lr_scheduler import CosineAnnealingLR

        from skrank.nn import LRScheduler

        setting["callbacks"] = [LRScheduler(CosineAnnealingLR, T_max=epochs)]
    if "averaging" in setting:
        decay, start_epoch = setting.pop("averaging")
        setting["callbacks"] = [WeightAveraging(decay=decay, start_epoch=start_epoch)]
    if "prior_schedule" in setting:
        setting["callbacks"] = [_PriorSchedule(*setting.pop("prior_schedule"))]
    return setting


def sweep(seeds, splits, results, names=None, split="validation", epochs=None):
    """Validation mean AUPRC of each sweep setting (the test classes play no part)."""
    rows = []
    for name, setting in SWEEP.items():
        if names and name not in names:
            continue
        parameters = _sweep_setting(setting, epochs or EPOCHS)
        if epochs is not None:
            parameters["max_epochs"] = epochs
        scores, seconds = run(partial(estimator_fit, parameters), splits[split], seeds)
        rows.append(row(name, setting, scores, seconds))
    _, y_fit, _, y_held_out = splits[split]
    n_fit, n_held_out = np.unique(y_fit).shape[0], np.unique(y_held_out).shape[0]
    images = "images rebuilt from disjoint halves of the training images (disjoint_validation)"
    budget = "budget as in the comparison" if epochs is None else f"{epochs} epochs"
    results.add_table(
        f"Sweep of SOPRCEmbedder's settings on the {split} split ({n_held_out} held-out "
        "training classes)",
        ["change to the defaults", "setting", "validation mAUPRC", "validation R@1", "s / fit"],
        rows,
        notes=f"Fitted on {n_fit} training classes, scored on the {n_held_out} others"
        f"{'; ' + images if split != 'validation' else ''}; seeds {seeds}; {budget} "
        "(samples_per_class rows change the batch to that many per class).",
    )


# Weight averaging of the plain loops: the EMA the estimator's default weight_averaging=0.4
# gives over their 250 steps (decay 1 - 1 / (0.4 * 250)).
AVERAGING = (0.99, 1)


def averaging_table(seeds, splits, results, averaging=AVERAGING):
    """The estimator, SOPRCLoss in the plain loop and tuned MultiSimilarity, each with and
    without the same weight averaging, on the test classes: the trick's gain beside the loss's."""
    decay, start_epoch = averaging
    label = f"EMA decay={decay}" if decay is not None else f"SWA from epoch {start_epoch}"
    rows = []
    for setting in ({"weight_averaging": None}, {}):  # {}: the defaults, weight_averaging=0.4
        scores, seconds = run(partial(estimator_fit, setting), splits["test"], seeds)
        rows.append(row("SOPRCEmbedder", setting, scores, seconds))
    peers = [
        ("SOPRCLoss (plain loop)", dict(tpr_source="batch")),
        ("MultiSimilarity", dict(alpha=2, beta=40, base=0.7)),
    ]
    for name, setting in peers:
        factory = LOSSES[name][0]
        for averaged in (False, True):
            fit = partial(plain_loop, factory, setting, averaging=averaging if averaged else None)
            scores, seconds = run(fit, splits["test"], seeds)
            shown = {**setting, "averaging": label} if averaged else setting
            rows.append(row(name, shown, scores, seconds))
    results.add_table(
        "Weight averaging on the test classes: the estimator and the peers, with and without",
        COLUMNS,
        rows,
        notes=f"The comparison's protocol; the estimator's default weight_averaging=0.4 is an "
        "EMA of the weights after every step with decay 1 - 1 / (0.4 x 260 steps) = 0.990 "
        f"(skrank.nn.WeightAveraging), the plain loops' {label} (torch's AveragedModel, "
        f"250 steps), chosen on the validation classes; seeds {seeds}.",
    )


def step_times(results, commit="33f545c", repeats=200):
    """Loss step (forward + backward) of SOPRCLoss(tpr_source="batch") at ``commit`` and here."""
    old = _module_at(commit, "skrank/losses/_soprc.py", "old_soprc")
    y = make_composite_digits(10_000, n_digits=2, n_classes=100, subset="train", random_state=0)
    counts = np.bincount(np.unique(y.target, return_inverse=True)[1])
    losses = {
        f"SOPRCLoss(tpr_source='batch') @ {commit}": old.SOPRCLoss(counts, tpr_source="batch"),
        "SOPRCLoss(tpr_source='batch'), this checkout": SOPRCLoss(counts, tpr_source="batch"),
    }
    generator = torch.Generator().manual_seed(0)
    times = {name: [] for name in losses}
    for _ in range(repeats):
        classes = torch.randperm(counts.shape[0], generator=generator)[:CLASSES_PER_BATCH]
        embeddings = torch.randn(CLASSES_PER_BATCH, PER_CLASS, DIMS, generator=generator)
        values = []
        for name, loss_fn in losses.items():
            leaf = embeddings.clone().requires_grad_(True)
            start = time.perf_counter()
            loss = loss_fn.forward_grouped(leaf, classes)
            loss.backward()
            times[name].append(1000 * (time.perf_counter() - start))
            values.append((loss.detach(), leaf.grad))
        if not all(torch.equal(a, b) for a, b in zip(*values, strict=True)):
            raise RuntimeError("the two losses disagree")
    reference = np.array(next(iter(times.values())))
    rows = []
    for name, values in times.items():
        values = np.array(values)
        median, (low, high) = np.median(values), np.percentile(values, [25, 75])
        ratio = np.median(values / reference)
        print(f"  {name:<48} median {median:.1f} ms ({low:.1f}-{high:.1f}), x{ratio:.2f}")
        rows.append([name, f"{median:.1f}", f"{low:.1f}-{high:.1f}", f"{ratio:.2f}"])
    results.add_table(
        "Loss step of the batch-TPR form, with and without the auxiliary state",
        ["loss", "median (ms)", "quartiles (ms)", "median ratio to the first row"],
        rows,
        notes=f"Forward + backward of forward_grouped on random embeddings, {CLASSES_PER_BATCH} "
        f"classes x {PER_CLASS} items x {DIMS} dims drawn from the 50 training classes (sizes "
        f"{counts.min()}-{counts.max()}), {repeats} interleaved repetitions, one thread; "
        "losses and gradients checked equal at every repetition.",
    )


# The budget curve (--part budget): separate fits of max_epochs = 2, 5, 10, 20, each method with
# its defaults, scored on the test classes; the PML losses also tuned at the last budget.
BUDGETS = (2, 5, 10, 20)


def _mean_sd(values):
    return f"{np.mean(values):.4f} ± {np.std(values):.4f}"


class BudgetCurve:
    """Rows of the budget curve, written to the results file after every method (a run cut
    short keeps what it measured)."""

    def __init__(self, results, budgets, seeds, classes, split):
        self.results, self.budgets, self.seeds = results, budgets, seeds
        self.classes, self.split = classes, split
        self.rows, self.validation_rows, self.notes = [], [], []

    def add(self, name, setting, scores, seconds):
        """``scores[budget]``: (seeds, 2) test mAUPRC and R@1; ``seconds[budget]``: per fit."""
        label = ", ".join(f"{k}={v}" for k, v in setting.items()) or "defaults"
        cells = [_mean_sd(scores[b][:, 0]) if b in scores else "" for b in self.budgets]
        times = "/".join(f"{seconds[b]:.0f}" if b in seconds else "-" for b in self.budgets)
        end = max(scores)
        self.rows.append([name, label, *cells, _mean_sd(scores[end][:, 1]), times])
        figures = self.results.data["figures"].setdefault("per_seed", {})
        figures[f"{name} | {label}"] = {
            str(b): {"mauprc": scores[b][:, 0], "recall@1": scores[b][:, 1], "seconds": seconds[b]}
            for b in scores
        }
        print(f"  {name:<34} {label:<40} " + "  ".join(cells) + f"  ({times} s)", flush=True)
        self.save()

    def save(self):
        self.results.data["tables"] = []
        budgets = [f"{b} epochs" for b in self.budgets]
        self.results.add_table(
            f"Test mean AUPRC by training budget, {self.classes} (test classes)",
            ["method", "setting", *budgets, f"R@1 ({max(self.budgets)} epochs)", "s / fit"],
            self.rows,
            notes=" ".join(self.notes),
        )
        if self.validation_rows:
            self.results.add_table(
                f"Validation scores of the grids ({self.split} split, "
                f"{max(self.budgets)} epochs, seed 0)",
                ["method", "setting", "validation mAUPRC", "validation R@1", "s / fit"],
                self.validation_rows,
            )
        self.results.save()


def _loop_at_budgets(factory, setting, data, seeds, budgets):
    """Test scores and training seconds of the plain loop after each budget's epoch (one run
    per seed: the loop has no schedule, so these are the fits of that many epochs)."""
    X_fit, y_fit, X_eval, y_eval = data
    scores = {b: [] for b in budgets}
    seconds = {b: [] for b in budgets}

    def report(epoch, embed, trained):
        if epoch in scores:
            scores[epoch].append(evaluate(embed(X_eval), y_eval))
            seconds[epoch].append(trained)

    for seed in seeds:
        plain_loop(factory, setting, X_fit, y_fit, seed, epochs=max(budgets), report=report)
    return (
        {b: np.array(v) for b, v in scores.items()},
        {b: float(np.mean(v)) for b, v in seconds.items()},
    )


def _parameter(item):
    """``("name", value)`` of a ``--estimator NAME=VALUE`` (a Python literal, else a string)."""
    name, separator, text = item.partition("=")
    if not separator:
        raise ValueError(f"--estimator takes NAME=VALUE, not {item!r}.")
    try:
        return name, ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return name, text


def budget_curve(args, seeds, splits, results):
    """SOPRCEmbedder and the peers at every training budget, on the test classes."""
    budgets = sorted(args.budgets)
    end = budgets[-1]
    split = "disjoint validation" if args.image_disjoint else "validation"
    sizes = " of 10 or more items (--large-classes)" if args.large_classes else ""
    curve = BudgetCurve(results, budgets, seeds, f"{args.classes:,} classes{sizes}", split)
    curve.notes.append(
        f"{args.classes:,} classes ({scale(args.classes, args.large_classes)}), half to train, "
        "half unseen to test; "
        f"MLP {HIDDEN[0]} hidden, {DIMS} dims, SGD lr {LR} momentum 0.9 weight decay 4e-4, "
        f"batches of {CLASSES_PER_BATCH} classes x {PER_CLASS}, one torch thread; mean ± sd over "
        f"seeds {seeds}; device {DEVICE}. SOPRCEmbedder: a separate fit per budget "
        "(max_epochs); plain loops: "
        "scored after each budget's epoch of one run (no schedule: the same as separate fits). "
        "s / fit: training seconds at each budget."
    )
    wanted = set(args.rows or ["SOPRCEmbedder", *LOSSES, *([SMOOTHAP[0]] if args.smoothap else [])])
    if "SOPRCEmbedder" in wanted:
        setting = dict(_parameter(item) for item in args.estimator)
        scores, seconds = {}, {}
        for budget in budgets:
            fit = partial(estimator_fit, {**setting, "max_epochs": budget})
            scores[budget], seconds[budget] = run(fit, splits["test"], seeds)
        curve.add("SOPRCEmbedder", setting, scores, seconds)
    if "SOPRCLoss (plain loop)" in wanted:
        # The loss the estimator trains, in the plain loop: the fit-time ratio of the targets.
        loss_setting = parameters_for(SOPRCEmbedder(), SOPRCLoss)
        factory = LOSSES["SOPRCLoss (plain loop)"][0]
        scores, seconds = _loop_at_budgets(factory, loss_setting, splits["test"], seeds, budgets)
        curve.add("SOPRCLoss (plain loop)", {"the estimator's loss": "defaults"}, scores, seconds)
    losses = {
        name: value
        for name, value in [*LOSSES.items(), SMOOTHAP]
        if name in wanted and name != "SOPRCLoss (plain loop)"
    }
    epoch_seconds = []
    for name, (factory, grid) in losses.items():
        if name == SMOOTHAP[0]:  # run only if it takes at most 3x the others' time
            probe = _loop_at_budgets(factory, grid[0], splits["test"], seeds[:1], [1])[1][1]
            ratio = probe / np.mean(epoch_seconds or [args.epoch_seconds])
            results.add_figure("smoothap_epoch_time_ratio", ratio)
            if ratio > 3:
                curve.notes.append(
                    f"SmoothAP left out: one epoch took {ratio:.1f}x the mean epoch of the "
                    "other PML losses (at most 3x)."
                )
                curve.save()
                continue
        if not args.tuned_only:
            scores, seconds = _loop_at_budgets(factory, grid[0], splits["test"], seeds, budgets)
            epoch_seconds.append(seconds[end] / end)
            curve.add(name, grid[0], scores, seconds)
        if args.quick or args.no_tuning or len(grid) == 1:
            continue
        validation = []
        for setting in grid:
            score, fit_seconds = run(
                partial(plain_loop, factory, setting, epochs=end), splits[split], [0]
            )
            validation.append(score[0, 0])
            curve.validation_rows.append(
                row(name, setting, score, fit_seconds)[:2]
                + [f"{score[0, 0]:.4f}", f"{score[0, 1]:.4f}", f"{fit_seconds:.1f}"]
            )
        best = int(np.argmax(validation))
        if best != 0 or args.tuned_only:
            scores, seconds = _loop_at_budgets(factory, grid[best], splits["test"], seeds, [end])
        else:
            scores, seconds = {end: scores[end]}, {end: seconds[end]}
        curve.add(f"{name}, tuned", grid[best], scores, seconds)


def _module_at(commit, path, name):
    """The module ``path`` of the repository at ``commit``, imported under ``name`` (its relative
    imports resolved in this checkout's skrank)."""
    with source_at(commit) as source, tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / f"{name}.py"
        file.write_text((source / path).read_text().replace("from ..", "from skrank."))
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def coverage(results, commit="656748b", epochs=5):
    """What an epoch of SOPRCEmbedder's sampler draws at 100, 1,000 and 10,000 classes: the
    sampler at ``commit`` (classes drawn at random in proportion to their size, batch by
    batch) and the current one (each class's groups of the epoch dealt into the batches)."""
    from skrank.sampling import ClassBalancedBatchSampler

    samplers = {
        f"drawn batch by batch (@ {commit})": _module_at(
            commit, "skrank/sampling/_batches.py", "batches_then"
        ).ClassBalancedBatchSampler,
        "groups per class dealt (this commit)": ClassBalancedBatchSampler,
    }
    rows = []
    for classes in SCALES:
        y = make_composite_digits(**SCALES[classes], subset="train", random_state=0).target
        counts = np.unique(y, return_counts=True)[1]
        for name, sampler_class in samplers.items():
            sampler = sampler_class(y, CLASSES_PER_BATCH * PER_CLASS, PER_CLASS, random_state=0)
            items, seen_classes = [], []
            for _ in range(epochs):
                epoch = sampler.epoch()
                items.append(np.unique(epoch.indices[epoch.valid].numpy()).shape[0] / y.shape[0])
                seen_classes.append(np.unique(epoch.groups.numpy()).shape[0] / counts.shape[0])
            fits = counts <= len(sampler) * PER_CLASS
            rows.append(
                [
                    f"{classes:,} ({counts.shape[0]:,} to train, {y.shape[0]:,} items)",
                    name,
                    str(len(sampler)),
                    f"{np.mean(items):.3f}",
                    f"{np.mean(seen_classes):.3f}",
                    f"{counts[fits].sum() / y.shape[0]:.3f}",
                ]
            )
            print("  " + " | ".join(rows[-1]), flush=True)
    results.add_table(
        "Items and classes an epoch of SOPRCEmbedder's batches draws (training halves)",
        [
            "classes",
            "sampler",
            "batches / epoch",
            "share of items drawn",
            "share of classes drawn",
            "share of items in classes of at most n_batches x M",
        ],
        rows,
        notes=f"Batches of {CLASSES_PER_BATCH} classes x {PER_CLASS} (class_weights="
        f"'proportional'), means over {epochs} epochs. A class larger than n_batches x M items "
        "cannot show every item in an epoch with one group per batch.",
    )


def saturation(results, n_batches=20):
    """Where the gradient of the precision term goes at initialisation: the share of it that the
    queries of the smaller half of the classes receive, with the dataset prior and with the
    batch prior, at 100, 1,000 and 10,000 classes (the estimator's first batches, its network
    at initialisation, semi-variance off)."""
    from skrank.sampling import ClassBalancedBatchSampler

    rows = []
    for classes in SCALES:
        train = make_composite_digits(**SCALES[classes], subset="train", random_state=0)
        codes = np.unique(train.target, return_inverse=True)[1]
        counts = np.bincount(codes)
        small = counts < np.median(counts)
        torch.manual_seed(0)
        network = MLP(train.data.shape[1], HIDDEN, DIMS, normalize=False)
        sampler = ClassBalancedBatchSampler(
            codes, CLASSES_PER_BATCH * PER_CLASS, PER_CLASS, random_state=0
        )
        epoch = sampler.epoch()
        for prior in ("dataset", "batch"):
            loss_fn = SOPRCLoss(counts, tpr_source="batch", lambda_pos=0, lambda_neg=0)
            loss_fn.prior = prior
            totals, values, items = np.zeros(2), [], []
            for number in range(n_batches):
                groups, valid = epoch.groups[number], epoch.valid[number].view(-1, PER_CLASS)
                with torch.no_grad():
                    rows_in = torch.from_numpy(train.data[epoch.indices[number].numpy()])
                    embeddings = network(rows_in).view(*valid.shape, DIMS)
                leaf = embeddings.requires_grad_(True)
                for group in range(groups.shape[0]):
                    queries = slice(group * PER_CLASS, (group + 1) * PER_CLASS)
                    loss = loss_fn.forward_grouped(leaf, groups, valid, queries=queries)
                    (gradient,) = torch.autograd.grad(loss, leaf)
                    totals[int(small[groups[group]])] += float(gradient.norm())
                    share = int(valid.sum()) / max(int(valid[group].sum()), 1)
                    values.append(float(loss.detach()) * share)
                items.append(
                    float((small[groups.numpy()] * valid.sum(1).numpy()).sum() / valid.sum())
                )
            rows.append(
                [
                    f"{classes:,}",
                    prior,
                    f"{np.median(loss_fn.priors.numpy()):.2g}",
                    f"{np.mean(items):.3f}",
                    f"{totals[1] / totals.sum():.3f}",
                    f"{np.mean(values):.3f}",
                ]
            )
            print("  " + " | ".join(rows[-1]), flush=True)
    results.add_table(
        "The precision term's gradient at initialisation: the share of the smaller classes",
        [
            "classes",
            "prior",
            "median class prior",
            "share of the batches' items in the smaller half of the classes",
            "share of the gradient of their queries",
            "mean precision loss of a query",
        ],
        rows,
        notes=f"The estimator's MLP at initialisation (seed 0), its first {n_batches} batches of "
        f"{CLASSES_PER_BATCH} classes x {PER_CLASS} on the training half; SOPRCLoss("
        "tpr_source='batch', semi-variance off); gradient with respect to the embeddings of each "
        "group's queries (forward_grouped with queries), summed by class half (below the "
        "median class size or not). The batch prior is |P_q| / (|P_q| + |N_q|), about 3 / 199.",
    )


def main(argv=None):
    parser = harness_parser(
        __doc__, "quick", "seeds", "tag", "device", seeds=[0, 1, 2], device="cpu"
    )
    parser.add_argument(
        "--part",
        choices=[
            *("compare", "causes", "table2", "sweep", "step", "averaging"),
            *("budget", "coverage", "saturation"),
        ],
        default="compare",
    )
    parser.add_argument(
        "--classes", type=int, choices=sorted(SCALES), default=100, help="number of classes"
    )
    parser.add_argument(
        "--budgets", type=int, nargs="+", default=list(BUDGETS), help="--part budget: epochs"
    )
    parser.add_argument(
        "--large-classes",
        action="store_true",
        help="the data of LARGE_CLASS_SCALES (tens to hundreds of items a class)",
    )
    parser.add_argument("--max-epochs", type=int, help="--part sweep: epochs (default 10)")
    parser.add_argument("--rows", nargs="+", help="--part budget: only these methods")
    parser.add_argument(
        "--estimator",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="--part budget: SOPRCEmbedder's parameters changed from its defaults (Python "
        "literals, e.g. weight_averaging=0.2)",
    )
    parser.add_argument(
        "--no-tuning", action="store_true", help="--part budget: the peers at their defaults only"
    )
    parser.add_argument(
        "--tuned-only",
        action="store_true",
        help="--part budget: the peers' grids and tuned rows only (their defaults' rows come "
        "from an earlier run)",
    )
    parser.add_argument(
        "--epoch-seconds",
        type=float,
        help="--part budget: seconds per epoch of the other PML losses, for SmoothAP's time "
        "test when it runs alone",
    )
    parser.add_argument("--only", nargs="+", help="--part sweep: only these settings")
    parser.add_argument(
        "--image-disjoint",
        action="store_true",
        help="--part sweep: score on the class- and image-disjoint validation split",
    )
    parser.add_argument("--smoothap", action="store_true", help="add SmoothAP (slow)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    use_device(args.device)
    seeds = args.seeds[:1] if args.quick else args.seeds
    splits = composite_data(
        args.classes,
        validation=not (args.part == "budget" and (args.quick or args.no_tuning)),
        large=args.large_classes,
    )
    X, y, X_test, y_test = splits["test"]
    print(
        f"composite digits: {np.unique(y).shape[0]} train classes ({y.shape[0]} items), "
        f"{np.unique(y_test).shape[0]} test classes ({y_test.shape[0]} items); seeds {seeds}"
    )
    # The raw pixels of 10,000 classes' test half: 70,000 x 3,136, hours on one thread.
    raw = evaluate(X_test, y_test) if args.classes < 10_000 else (float("nan"), float("nan"))
    print(f"  raw pixels: mAUPRC {raw[0]:.4f}  R@1 {raw[1]:.4f}")
    first = min(seeds)
    results = Results(
        results_name(
            "bench_soprc_disjoint",
            args,
            "" if args.part == "compare" else args.part,
            (args.classes != 100 or args.large_classes)
            and f"{args.classes}{'_large' if args.large_classes else ''}_classes",
            args.max_epochs and f"{args.max_epochs}_epochs",
            first and f"from_seed_{first}",
            args.image_disjoint and "image_disjoint",
        ),
        packages=["pytorch-metric-learning"],
    )
    results.add_figure("raw_pixels", {"mauprc": raw[0], "recall@1": raw[1]})
    if args.part == "compare":
        compare(args, seeds, splits, raw, results)
    elif args.part == "causes":
        causes(seeds, splits, results)
    elif args.part == "sweep":
        split = "disjoint validation" if args.image_disjoint else "validation"
        sweep(seeds, splits, results, args.only, split, args.max_epochs)
    elif args.part == "step":
        step_times(results)
    elif args.part == "averaging":
        averaging_table(seeds, splits, results)
    elif args.part == "budget":
        budget_curve(args, seeds, splits, results)
    elif args.part == "coverage":
        coverage(results)
    elif args.part == "saturation":
        saturation(results)
    else:
        table2(seeds, splits, results)
    results.save()


COLUMNS = ["method", "setting", "test mAUPRC", "test R@1", "s / fit"]


def compare(args, seeds, splits, raw, results):
    """Defaults and validation-tuned settings of every loss, on the test classes."""
    losses = dict(LOSSES)
    if args.smoothap:
        losses[SMOOTHAP[0]] = SMOOTHAP[1]
    rows = [["raw pixels (cosine)", "", f"{raw[0]:.4f}", f"{raw[1]:.4f}", ""]]
    validation_rows = []
    scores, seconds = run(partial(estimator_fit, {}), splits["test"], seeds)
    rows.append(row("SOPRCEmbedder", {}, scores, seconds))
    for name, (factory, grid) in losses.items():
        fit = {i: partial(loop_fit, factory, setting) for i, setting in enumerate(grid)}
        scores, seconds = run(fit[0], splits["test"], seeds)
        rows.append(row(name, grid[0], scores, seconds))
        if args.quick or len(grid) == 1:
            continue
        validation = []
        for i, setting in enumerate(grid):
            score, _ = run(fit[i], splits["validation"], [0])
            validation.append(score[0, 0])
            validation_rows.append(row(f"{name} [validation]", setting, score, _))
        best = int(np.argmax(validation))
        if best != 0:
            scores, seconds = run(fit[best], splits["test"], seeds)
        rows.append(row(f"{name}, tuned", grid[best], scores, seconds))
    notes = (
        f"Composite digits (2 MNIST digits, 100 long-tailed classes), 50 classes to train, "
        f"50 unseen to test; MLP 1568-512-128, SGD lr {LR} momentum 0.9 weight decay 4e-4, "
        f"{EPOCHS} epochs, batches of 50 classes x 4, one torch thread; mean ± sd over seeds "
        f"{seeds}. 'tuned': best of the grid on 20 held-out training classes (seed 0)."
    )
    results.add_table("Class-disjoint retrieval (test classes)", COLUMNS, rows, notes=notes)
    if validation_rows:
        results.add_table(
            "Validation scores of the grids (20 held-out training classes, seed 0)",
            ["method", "setting", "validation mAUPRC", "validation R@1", "s / fit"],
            validation_rows,
        )


if __name__ == "__main__":
    main()
