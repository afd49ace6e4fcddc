"""SOPRC on images of classes never seen in training: the CNN path against plain torch loops.

Data: ``make_composite_digits`` as uint8 images ``(n, 1, 28, 28 d)`` (``--digits 2``: 100
classes; ``3``: 300), half the classes to train, the other half (from other MNIST images)
retrieved by cosine similarity. ``--part validation`` makes every choice (the augmentation, each
loss's learning rate and own parameters, the estimator's learning rate) on held-out training
classes (``_data.validation_images``: class- and image-disjoint, seed 0, 5 epochs); the test
classes play no part. Rows, ``--epochs`` epochs on one torch thread: ``SOPRCEmbedder`` on the
images (its default ConvNet, the augmentation chosen) and on the flattened pixels (its MLP), and
plain torch loops (:func:`plain_loop`: a fresh ConvNet, the same augmentation, the estimator's
class-balanced batches and SGD) with ``SOPRCLoss``, ``MultiSimilarityLoss`` or ``FastAPLoss``.
Scores: test mean AUPRC and Recall@1, mean ± sd over the seeds. See benchmarks/README.md,
section "Images of classes unseen in training".

``--part throughput``: steps per second of the estimator and of the plain ``SOPRCLoss`` loop on
the same network, augmentation and batches, the marginal rate between fits of 1 and ``1 +
--steps-epochs`` epochs, after an untimed fit of each (a process's first fit imports torch's
compiler modules, about 15 s).

Usage::

    python benchmarks/bench_soprc_images.py --part validation [--digits 2]
    python benchmarks/bench_soprc_images.py [--digits 2|3] [--epochs 5] [--seeds 0 1 2]
    python benchmarks/bench_soprc_images.py --part throughput
    python benchmarks/bench_soprc_images.py --quick [--part ...]   # a smoke run, small data
"""

import json
from functools import partial

import numpy as np
import torch
from _data import validation_images
from _harness import marginal_rate, results_name, timed
from _harness import parser as harness_parser
from _results import RESULTS_DIR, Results, summary
from bench_soprc_disjoint import LOSSES as MLP_LOSSES
from bench_soprc_disjoint import SOPRC_DEFAULTS, label

from skrank import SOPRCEmbedder
from skrank.datasets import make_composite_digits
from skrank.losses import SOPRCLoss
from skrank.metrics import mean_auprc_score, recall_at_k_score
from skrank.nn import ConvNet
from skrank.sampling import ClassBalancedBatchSampler

BATCH, PER_CLASS, MOMENTUM, WEIGHT_DECAY = 224, 4, 0.9, 4e-4
DATASETS = {
    2: dict(n_samples=12_000, n_digits=2, n_classes=100),
    3: dict(n_samples=12_000, n_digits=3, n_classes=300),
}
QUICK = dict(n_samples=1_500, n_classes=40)
# The losses of the plain loop: (factory from the class counts and settings, grid of their own
# parameters, the defaults first); SOPRCLoss's defaults are the estimator's, the others' grids
# those of bench_soprc_disjoint.py.
LOSSES = {
    "SOPRCLoss": (
        lambda counts, **kw: SOPRCLoss(counts, **{**SOPRC_DEFAULTS, **kw}),
        [dict(tpr_source="batch"), dict(tpr_source="auxiliary")],
    ),
    "MultiSimilarity": MLP_LOSSES["MultiSimilarity"],
    "FastAP": MLP_LOSSES["FastAP"],
}
LEARNING_RATES = [0.02, 0.05, 0.1]  # extended past an edge that wins (0.01, 0.2, ...)
AUGMENTATIONS = ["none", "shift 2", "shift 4", "affine 0.5", "affine 1"]
DEFAULT_LR, DEFAULT_AUGMENTATION = 0.05, "shift 2"


def augmentation(recipe, width):
    """The augmentation of ``recipe`` (kornia, each item's parameters drawn independently):
    ``"shift p"``, a random shift of up to ``p`` whole pixels each way (no resampling);
    ``"affine s"``, a random affine map, rotation up to ``10 s`` degrees, shift up to ``2.8 s``
    pixels each way, scale within ``1 +- 0.1 s``; ``"none"``, None."""
    if recipe == "none":
        return None
    import kornia.augmentation as K

    kind, amount = recipe.split()
    amount = float(amount)
    if kind == "shift":
        return K.AugmentationSequential(K.RandomCrop((28, width), padding=int(amount)))
    return K.AugmentationSequential(
        K.RandomAffine(
            degrees=10 * amount,
            translate=(0.1 * amount * 28 / width, 0.1 * amount),
            scale=(1 - 0.1 * amount, 1 + 0.1 * amount),
            p=1.0,
        )
    )


def pixels(images):
    """Grey levels in [0, 1] as uint8 images with their channel: ``(n, 1, 28, W)``."""
    return np.rint(images * 255).astype(np.uint8)[:, None]


def composite_images(digits, quick=False):
    """``{"test": (X, y, X_test, y_test), "validation": (...)}``: uint8 images (n, 1, 28, W),
    the validation split class- and image-disjoint (``_data.validation_images``)."""
    settings = {**DATASETS[digits], **(QUICK if quick else {})}
    train = make_composite_digits(**settings, subset="train", random_state=0)
    test = make_composite_digits(**settings, subset="test", random_state=0)
    X_fit, y_fit, X_val, y_val = validation_images(train)
    return {
        "test": (pixels(train.images), train.target, pixels(test.images), test.target),
        "validation": (pixels(X_fit), y_fit, pixels(X_val), y_val),
    }


def evaluate(embedding, y):
    """(mean AUPRC, Recall@1) of cosine retrieval among ``embedding``'s rows."""
    return (
        float(mean_auprc_score(embedding, y, metric="cosine", device="cpu")),
        float(recall_at_k_score(embedding, y, k=1, metric="cosine", device="cpu")),
    )


def sampler_for(codes, seed):
    """The class-balanced batches of the estimator: 4 a class, 224 items or every class."""
    classes_per_batch = min(BATCH // PER_CLASS, int(codes.max()) + 1)
    return ClassBalancedBatchSampler(
        codes, classes_per_batch * PER_CLASS, PER_CLASS, random_state=seed
    )


def plain_loop(loss, setting, lr, recipe, X, y, seed, epochs):
    """Train a fresh ConvNet with ``loss`` in a plain torch loop; returns the embedding function."""
    torch.manual_seed(seed)  # the network's weights and kornia's draws
    codes = np.unique(y, return_inverse=True)[1]
    module = ConvNet(X.shape[1:])
    loss_fn = LOSSES[loss][0](np.bincount(codes), **setting)
    optimizer = torch.optim.SGD(
        module.parameters(), lr=lr, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )
    augment = augmentation(recipe, X.shape[-1])
    sampler = sampler_for(codes, seed)
    images, codes_t = torch.from_numpy(X), torch.from_numpy(codes)
    module.train()
    for _ in range(epochs):
        for indices, valid, groups in zip(*sampler.epoch(), strict=True):
            inputs = images[indices].float().div_(255)
            if augment is not None:
                inputs = augment(inputs)
            embeddings = module(inputs)
            if loss == "SOPRCLoss":
                shape = (groups.shape[0], PER_CLASS)
                value = loss_fn.forward_grouped(
                    embeddings.view(*shape, -1), groups, valid.view(shape)
                )
            else:
                value = loss_fn(embeddings[valid], codes_t[indices[valid]])
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
    module.eval()

    def embed(X_new):
        with torch.no_grad():
            return torch.cat(
                [
                    module(torch.from_numpy(X_new[start : start + 512]).float().div_(255))
                    for start in range(0, X_new.shape[0], 512)
                ]
            ).numpy()

    return embed


def fit_estimator(recipe, epochs, X, y, seed, lr=None):
    """The estimator on image items: its defaults, the augmentation, ``epochs`` epochs."""
    params = dict(max_epochs=epochs, augmentation=augmentation(recipe, X.shape[-1]), device="cpu")
    if lr is not None:
        params["learning_rate"] = lr
    return SOPRCEmbedder(**params, random_state=seed).fit(X, y).transform


def fit_mlp(epochs, X, y, seed):
    flat = X.reshape(X.shape[0], -1).astype(np.float32) / 255
    model = SOPRCEmbedder(max_epochs=epochs, device="cpu", random_state=seed).fit(flat, y)
    return lambda X_new: model.transform(X_new.reshape(X_new.shape[0], -1).astype(np.float32) / 255)


def scored(fit, data, seed):
    """[mean AUPRC, Recall@1, seconds of the fit] of ``fit(X, y, seed)`` on one split."""
    X, y, X_eval, y_eval = data
    embed, seconds = timed(fit, X, y, seed)
    return [*evaluate(embed(X_eval), y_eval), seconds]


class Store:
    """Results of the runs by key, saved to the JSON after each run; ``resume`` skips those in
    an earlier file of the same name."""

    def __init__(self, name, resume):
        self.results = Results(name, packages=["pytorch-metric-learning", "kornia"])
        path = RESULTS_DIR / f"{name}.json"
        earlier = json.loads(path.read_text())["figures"] if resume and path.exists() else {}
        self.runs = earlier.get("runs", {})
        self.results.add_figure("runs", self.runs)
        self.tables = None

    def get(self, key, run):
        if key not in self.runs:
            self.runs[key] = run()
            print(f"  {key}: {self.runs[key]}", flush=True)
            self.save()
        return self.runs[key]

    def save(self):
        self.results.data["tables"] = []
        if self.tables is not None:
            self.tables()
        self.results.save()


def validation(args, splits, store):
    """Seed 0, the held-out training classes: the augmentation (``--augmentation``, or the
    best with the SOPRCLoss loop at its defaults), then each loss's learning rate at its default
    parameters and its parameters at that rate, then the estimator's learning rate with that
    augmentation."""
    data, epochs = splits["validation"], args.validation_epochs
    rows, chosen = {}, {}

    def best(method, candidates, run):
        """The candidate of the best validation mAUPRC; ``candidates``: {candidate: setting}."""
        scores = {}
        for candidate, setting in candidates.items():
            found = store.get(f"{method} | {setting}", lambda c=candidate: run(c))
            rows[method, setting] = [method, setting, *[round(value, 4) for value in found]]
            scores[candidate] = found[0]
        return max(scores, key=scores.get)

    def lr_search(method, setting, run):
        """The best learning rate, the grid extended past a winning edge (6 rates at most)."""
        rates = list(LEARNING_RATES)
        while True:
            lr = best(method, {r: f"{setting}, lr={r}" for r in rates}, run)
            if lr == rates[0] and len(rates) < 6:
                rates.insert(0, round(rates[0] / 2, 4))
            elif lr == rates[-1] and len(rates) < 6:
                rates.append(round(rates[-1] * 2, 4))
            else:
                return lr

    def table():
        store.results.add_table(
            f"Validation ({len(np.unique(data[1]))} training classes fitted, "
            f"{len(np.unique(data[3]))} held out; seed 0, {epochs} epochs)",
            ["method", "setting", "validation mAUPRC", "validation R@1", "s / fit"],
            list(rows.values()),
            notes="Each search in turn: the augmentation with the SOPRCLoss loop at "
            f"lr {DEFAULT_LR}; then for each loss its learning rate at its default parameters "
            "(a winning edge of the grid extends it), then its parameters at that rate; then the "
            "estimator's learning rate with that augmentation.",
        )
        store.results.add_figure("chosen", chosen)

    store.tables = table

    def run_loss(loss, setting, lr, recipe):
        return scored(partial(plain_loop, loss, setting, lr, recipe, epochs=epochs), data, 0)

    defaults = LOSSES["SOPRCLoss"][1][0]
    recipe = args.augmentation or best(
        "SOPRCLoss loop",
        {a: f"augmentation {a}, {label(defaults)}, lr={DEFAULT_LR}" for a in AUGMENTATIONS},
        lambda a: run_loss("SOPRCLoss", defaults, DEFAULT_LR, a),
    )
    chosen["augmentation"] = recipe
    for loss, (_, grid) in LOSSES.items():
        if loss not in args.rows:
            continue
        method = f"{loss} loop"
        lr = lr_search(
            method,
            f"augmentation {recipe}, {label(grid[0])}",
            lambda r, loss=loss, grid=grid: run_loss(loss, grid[0], r, recipe),
        )
        index = best(
            method,
            {i: f"augmentation {recipe}, {label(s)}, lr={lr}" for i, s in enumerate(grid)},
            lambda i, loss=loss, grid=grid, lr=lr: run_loss(loss, grid[i], lr, recipe),
        )
        chosen[loss] = {"setting": grid[index], "lr": lr}
        store.save()
    if "estimator" in args.rows:
        lr = lr_search(
            "SOPRCEmbedder (images)",
            f"augmentation {recipe}, defaults",
            lambda r: scored(partial(fit_estimator, recipe, epochs, lr=r), data, 0),
        )
        chosen["SOPRCEmbedder"] = {"lr": lr}
    store.save()


def chosen_settings(args):
    """The choices of ``--part validation`` (its JSON), or the defaults where it has not run."""
    name = args.validation_from or (
        f"bench_soprc_images_{args.digits}_digits_validation" + ("_quick" if args.quick else "")
    )
    path = RESULTS_DIR / f"{name}.json"
    chosen = json.loads(path.read_text())["figures"]["chosen"] if path.exists() else {}
    return chosen, path.stem if path.exists() else None


def compare(args, splits, store, seeds):
    """Every row on the test classes, seed after seed (a cut-off run keeps its whole seeds);
    with ``--resume``, the runs of an earlier file are kept and the table shows them all."""
    chosen, source = chosen_settings(args)
    recipe = chosen.get("augmentation", DEFAULT_AUGMENTATION)
    epochs = args.epochs
    # name: (row key of --rows, setting, fit(X, y, seed))
    methods = {
        "SOPRCEmbedder, CNN + augmentation": (
            "estimator",
            "defaults",
            partial(fit_estimator, recipe, epochs),
        ),
    }
    tuned_lr = chosen.get("SOPRCEmbedder", {}).get("lr", DEFAULT_LR)
    if tuned_lr != DEFAULT_LR:
        methods["SOPRCEmbedder, CNN + augmentation, tuned"] = (
            "estimator",
            f"learning_rate={tuned_lr}",
            partial(fit_estimator, recipe, epochs, lr=tuned_lr),
        )
    methods["SOPRCEmbedder, flattened pixels (MLP)"] = ("mlp", "defaults", partial(fit_mlp, epochs))
    for loss, (_, grid) in LOSSES.items():
        picked = chosen.get(loss, {"setting": grid[0], "lr": DEFAULT_LR})
        methods[f"{loss} loop" + (", tuned" if loss in chosen else "")] = (
            loss,
            label({**picked["setting"], "lr": picked["lr"]}),
            partial(plain_loop, loss, picked["setting"], picked["lr"], recipe, epochs=epochs),
        )
    X, y, X_test, y_test = splits["test"]
    raw = store.get(
        "raw pixels", lambda: [*evaluate(X_test.reshape(len(X_test), -1) / 255.0, y_test), 0.0]
    )

    def table():
        rows = [["raw pixels (cosine)", "", f"{raw[0]:.4f}", f"{raw[1]:.4f}", "", ""]]
        for name, (_, setting, _) in methods.items():
            done = sorted(
                int(key.rpartition(" | ")[2]) for key in store.runs if key.startswith(f"{name} | ")
            )
            if not done:
                continue
            found = np.array([store.runs[f"{name} | {seed}"] for seed in done])
            rows.append(
                [name, setting, summary(found[:, 0]), summary(found[:, 1]),
                 f"{found[:, 2].mean():.0f}", ", ".join(map(str, done))]
            )  # fmt: skip
        store.results.add_table(
            f"Class-disjoint image retrieval, {args.digits} digits (test classes), {epochs} epochs",
            ["method", "setting", "test mAUPRC", "test R@1", "s / fit", "seeds"],
            rows,
            notes=f"Composite digits as 28 x {X.shape[-1]} uint8 images, {len(np.unique(y))} "
            f"classes ({len(y):,} items) to train, {len(np.unique(y_test))} unseen "
            f"({len(y_test):,}) to test; one torch thread; mean ± sd over the seeds of each row "
            f"(sd 0 for one seed). Augmentation {recipe!r} for every CNN row; loops: ConvNet "
            "defaults, SGD momentum 0.9, weight decay 4e-4, batches of 4 a class; settings chosen "
            f"on held-out training classes ({source or 'not run: defaults'}).",
        )

    store.tables = table
    for seed in seeds:
        for name, (row, _, fit) in methods.items():
            if row in args.rows:
                store.get(f"{name} | {seed}", partial(scored, fit, splits["test"], seed))
    store.save()


def throughput(args, splits, store):
    """Marginal steps per second of the estimator and of the SOPRCLoss loop, same batches."""
    X, y = splits["test"][:2]
    recipe = DEFAULT_AUGMENTATION
    per_epoch = len(sampler_for(np.unique(y, return_inverse=True)[1], 0))
    epochs = (1, 1 + args.steps_epochs)
    candidates = {
        "SOPRCEmbedder": lambda e: fit_estimator(recipe, e, X, y, 0),
        "SOPRCLoss plain loop": lambda e: plain_loop(
            "SOPRCLoss", {}, DEFAULT_LR, recipe, X, y, 0, e
        ),
    }
    for fit in candidates.values():  # untimed: a process's first fit imports torch's compiler
        fit(epochs[0])
    timings = {}
    for e in epochs:  # the short runs of every candidate, then the long ones
        for name, fit in candidates.items():
            timings[name, e] = timed(fit, e)[1]
            print(f"  {name}, {e} epoch(s): {timings[name, e]:.1f} s", flush=True)
    rates = {
        name: marginal_rate(*((timings[name, e], e * per_epoch) for e in epochs))
        for name in candidates
    }
    reference = rates["SOPRCLoss plain loop"]
    store.tables = lambda: store.results.add_table(  # save() renders it
        "Training steps per second on one thread: the estimator against the plain loop",
        ["method", f"s, {epochs[0]} epoch", f"s, {epochs[1]} epochs", "steps / s", "x loop"],
        [
            [
                name,
                round(timings[name, epochs[0]], 1),
                round(timings[name, epochs[1]], 1),
                round(rates[name], 3),
                round(rates[name] / reference, 3),
            ]
            for name in candidates
        ],  # fmt: skip
        notes=f"{args.digits}-digit training half ({len(y):,} items, 28 x {X.shape[-1]}), "
        f"{per_epoch} batches an epoch; the default ConvNet, augmentation {recipe!r}; "
        f"marginal rate between {epochs[0]} and {epochs[1]} epochs "
        f"({(epochs[1] - epochs[0]) * per_epoch} steps), one run each; the estimator at its "
        "defaults (for images no prior warm-up, no weight averaging).",
    )
    store.save()


def main(argv=None):
    parser = harness_parser(__doc__, "quick", "seeds", "tag", "resume", seeds=[0])
    add = parser.add_argument
    add("--part", choices=["compare", "validation", "throughput"], default="compare")
    add("--digits", type=int, choices=sorted(DATASETS), default=2)
    add("--epochs", type=int, default=5, help="epochs of every row")
    add("--validation-epochs", type=int, default=5, help="validation epochs")
    add("--validation-from", help="--part compare: the validation results to take the choices "
        "from (a name in results/; default: the validation run of the same digits)")  # fmt: skip
    add("--rows", nargs="+", default=["estimator", "mlp", *LOSSES],
        help="rows to run: estimator, mlp, and loss names (default: all)")  # fmt: skip
    add("--augmentation", choices=AUGMENTATIONS, help="--part validation: take it, no search")
    add("--steps-epochs", type=int, default=2, help="--part throughput: epochs measured")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.quick:
        args.epochs = args.validation_epochs = 1
    splits = composite_images(args.digits, quick=args.quick)
    X, y, X_test, y_test = splits["test"]
    print(
        f"composite digits as images {X.shape[1:]}: {len(np.unique(y))} train classes "
        f"({len(y)} items), {len(np.unique(y_test))} test classes ({len(y_test)} items)",
        flush=True,
    )
    part = args.part if args.part != "compare" else f"{args.epochs}_epochs"
    store = Store(results_name(f"bench_soprc_images_{args.digits}_digits", args, part), args.resume)
    if args.part == "validation":
        validation(args, splits, store)
    elif args.part == "throughput":
        throughput(args, splits, store)
    else:
        compare(args, splits, store, args.seeds)


if __name__ == "__main__":
    main()
