"""SOPRC on images of classes never seen in training: the CNN path against plain torch loops.

Data: ``make_composite_digits`` as images, uint8 grey levels of shape ``(n, 1, 28, 28 d)``:
``--digits 2`` (28 x 56; 12,000 items, 100 classes: the training half 50 classes of 67 to 628
items, 6,171 in all; the test half 50 other classes, 5,829 items, from other MNIST images) or
``--digits 3`` (28 x 84; 12,000 items, 300 classes: 150 classes of 23 to 329 items to train,
6,094 items; 150 others to test, 5,906 items). Every test item is a query against the other
test items, by cosine similarity. Validation (every choice: the augmentation, each
loss's learning rate and own parameters, the recipe's learning rate): 40% of the training
classes held out (``GroupShuffleSplit(test_size=0.4, random_state=0)``, the classes as groups),
fitted on the others with seed 0 for 5 epochs, the two parts redrawn from disjoint halves of
the training half's MNIST images as the test half is (class- and image-disjoint: a network that
memorises the training pixels gains nothing); the test classes play no part.

Rows, each trained for ``--epochs`` epochs on one torch thread:

- ``SOPRCEmbedder``, image items: its default convolutional network and the augmentation
  chosen on the validation split (``augmentation``: kornia's random shifts by whole pixels, or
  random affine maps, each item's parameters drawn independently);
- ``SOPRCEmbedder`` on the flattened pixels: its default MLP, no augmentation;
- plain torch loops (``plain_loop``): a fresh ``skrank.nn.ConvNet`` of the same shape, the same
  augmentation, the same class-balanced batches (``skrank.sampling.ClassBalancedBatchSampler``,
  4 items a class, 224 items a batch or every class when fewer), SGD (momentum 0.9, weight
  decay 4e-4, as the estimator), with skrank's ``SOPRCLoss`` or pytorch-metric-learning's
  ``MultiSimilarityLoss`` or ``FastAPLoss``, each at the learning rate and parameters chosen on
  the validation split (``--part validation``; their defaults when it has not run).

Scores: test mean AUPRC (mAP) and Recall@1 (``skrank.metrics``), mean +- sd over the seeds.

``--part throughput``: steps per second of ``SOPRCEmbedder`` and of the plain ``SOPRCLoss``
loop on the same network, augmentation and batches, the marginal rate between fits of 1 and
``1 + --steps-epochs`` epochs (set-up and the final transform cancel), after an untimed fit
of each (the first fit of a process imports torch's compiler modules, about 15 s).

Usage::

    python benchmarks/bench_soprc_images.py --part validation [--digits 2]
    python benchmarks/bench_soprc_images.py [--digits 2|3] [--epochs 5] [--seeds 0 1 2]
    python benchmarks/bench_soprc_images.py --part throughput
    python benchmarks/bench_soprc_images.py --quick [--part ...]   # a smoke run, small data
"""

import inspect
import json
import time

import numpy as np
import torch
from _harness import marginal_rate, results_name
from _harness import parser as harness_parser
from _results import RESULTS_DIR, Results
from pytorch_metric_learning import losses as pml
from sklearn.model_selection import GroupShuffleSplit

from skrank import SOPRCEmbedder
from skrank.datasets import load_mnist, make_composite_digits
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
# The losses of the plain loop: (factory from the class counts and settings, default settings,
# grid of their own parameters). SOPRCLoss's defaults are the estimator's.
SOPRC_DEFAULTS = {
    name: value
    for name, value in SOPRCEmbedder().get_params().items()
    if name in inspect.signature(SOPRCLoss).parameters
}
LOSSES = {
    "SOPRCLoss": (
        lambda counts, **kw: SOPRCLoss(counts, **{**SOPRC_DEFAULTS, **kw}),
        [dict(tpr_source="batch"), dict(tpr_source="auxiliary")],
    ),
    "MultiSimilarity": (
        lambda counts, **kw: pml.MultiSimilarityLoss(**kw),
        [
            dict(alpha=2, beta=50, base=0.5),
            dict(alpha=2, beta=40, base=0.7),
            dict(alpha=1, beta=50, base=0.3),
        ],
    ),
    "FastAP": (
        lambda counts, **kw: pml.FastAPLoss(**kw),
        [dict(num_bins=10), dict(num_bins=30), dict(num_bins=50)],
    ),
}
LEARNING_RATES = [0.02, 0.05, 0.1]  # extended past an edge that wins (0.01, 0.2, ...)
AUGMENTATIONS = ["none", "shift 2", "shift 4", "affine 0.5", "affine 1"]
DEFAULT_LR, DEFAULT_AUGMENTATION = 0.05, "shift 2"


def augmentation(recipe, width):
    """The augmentation of ``recipe``, each item's parameters drawn independently (kornia):

    - ``"shift p"``: a random shift of up to ``p`` whole pixels each way (``RandomCrop`` of the
      image padded by ``p`` zeros: no resampling, the pixels stay sharp);
    - ``"affine s"``: a random affine map (bilinear), rotation up to ``10 s`` degrees, shift up
      to ``2.8 s`` pixels each way, scale within ``1 +- 0.1 s``;
    - ``"none"``: None.
    """
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


def composite_images(digits, quick=False):
    """``{"test": (X, y, X_test, y_test), "validation": (...)}``: uint8 images (n, 1, 28, W).

    The validation split is built as the test split is, class- *and* image-disjoint: the MNIST
    images of the training half are cut into halves stratified by digit, and every item of the
    fitted classes is redrawn from the first half (same class, same digits), every item of the
    held-out classes from the second, so that no held-out pixel is seen in fitting.
    """
    settings = {**DATASETS[digits], **(QUICK if quick else {})}
    train = make_composite_digits(**settings, subset="train", random_state=0)
    test = make_composite_digits(**settings, subset="test", random_state=0)
    fit_rows, val_rows = next(
        GroupShuffleSplit(n_splits=1, test_size=0.4, random_state=0).split(
            train.images, train.target, groups=train.target
        )
    )
    rng = np.random.default_rng(0)
    mnist, mnist_digits = load_mnist(return_X_y=True)
    pool = np.unique(train.source_indices)
    halves = {}
    for digit in range(10):
        rows = rng.permutation(pool[mnist_digits[pool] == digit])
        halves[0, digit], halves[1, digit] = np.array_split(rows, 2)
    validation = []
    for half, rows in enumerate((fit_rows, val_rows)):
        item_digits = train.digits[rows]
        sources = np.empty_like(item_digits)
        for digit in range(10):
            where = item_digits == digit
            sources[where] = rng.choice(halves[half, digit], size=int(where.sum()))
        side = mnist.reshape(-1, 28, 28)[sources]  # (n, digits, 28, 28)
        validation += [side.transpose(0, 2, 1, 3).reshape(len(rows), 28, -1), train.target[rows]]

    def pixels(images):
        return np.rint(images * 255).astype(np.uint8)[:, None]

    X_fit, y_fit, X_val, y_val = validation
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


def plain_loop(loss, setting, lr, recipe, X, y, seed, epochs, steps=None):
    """Train a fresh ConvNet with ``loss`` in a plain torch loop; returns the embedding function.

    ``steps``: stop after that many steps (the throughput part), else ``epochs`` epochs.
    """
    torch.manual_seed(seed)  # the network's weights and kornia's draws
    codes = np.unique(y, return_inverse=True)[1]
    module = ConvNet(X.shape[1:])
    factory = LOSSES[loss][0]
    loss_fn = factory(np.bincount(codes), **setting)
    optimizer = torch.optim.SGD(
        module.parameters(), lr=lr, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )
    augment = augmentation(recipe, X.shape[-1])
    sampler = sampler_for(codes, seed)
    images, codes_t = torch.from_numpy(X), torch.from_numpy(codes)
    done = 0
    module.train()
    for _ in range(epochs):
        batches = sampler.epoch()
        for indices, valid, groups in zip(*batches, strict=True):
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
            done += 1
            if steps is not None and done == steps:
                break
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


def estimator_params(recipe, width, epochs, lr=None):
    """The estimator on image items: its defaults, the augmentation, ``epochs`` epochs."""
    params = dict(max_epochs=epochs, augmentation=augmentation(recipe, width), device="cpu")
    if lr is not None:
        params["learning_rate"] = lr
    return params


def fit_estimator(params, X, y, seed):
    model = SOPRCEmbedder(**params, random_state=seed).fit(X, y)
    return model.transform


def fit_mlp(epochs, X, y, seed):
    flat = X.reshape(X.shape[0], -1).astype(np.float32) / 255
    model = SOPRCEmbedder(max_epochs=epochs, device="cpu", random_state=seed).fit(flat, y)
    return lambda X_new: model.transform(X_new.reshape(X_new.shape[0], -1).astype(np.float32) / 255)


def scored(fit, data, seed):
    """[mean AUPRC, Recall@1, seconds of the fit] of ``fit(X, y, seed)`` on one split."""
    X, y, X_eval, y_eval = data
    start = time.perf_counter()
    embed = fit(X, y, seed)
    seconds = time.perf_counter() - start
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
    data, epochs, width = splits["validation"], args.validation_epochs, splits["test"][0].shape[-1]
    rows, chosen = {}, {}

    def best(method, candidates, run):
        """The candidate of the best validation mAUPRC; ``candidates``: {candidate: label}."""
        scores = {}
        for candidate, label in candidates.items():
            found = store.get(f"{method} | {label}", lambda c=candidate: run(c))
            rows[method, label] = [method, label, *[round(value, 4) for value in found]]
            scores[candidate] = found[0]
        return max(scores, key=scores.get)

    def lr_search(method, label, run):
        """The best learning rate, the grid extended past a winning edge (6 rates at most)."""
        rates = list(LEARNING_RATES)
        while True:
            lr = best(method, {r: f"{label}, lr={r}" for r in rates}, run)
            if lr == rates[0] and len(rates) < 6:
                rates.insert(0, round(rates[0] / 2, 4))
            elif lr == rates[-1] and len(rates) < 6:
                rates.append(round(rates[-1] * 2, 4))
            else:
                return lr

    def describe(setting):
        return ", ".join(f"{k}={v}" for k, v in setting.items())

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
        return scored(
            lambda X, y, seed: plain_loop(loss, setting, lr, recipe, X, y, seed, epochs),
            data,
            0,
        )

    defaults = LOSSES["SOPRCLoss"][1][0]
    recipe = args.augmentation or best(
        "SOPRCLoss loop",
        {a: f"augmentation {a}, {describe(defaults)}, lr={DEFAULT_LR}" for a in AUGMENTATIONS},
        lambda a: run_loss("SOPRCLoss", defaults, DEFAULT_LR, a),
    )
    chosen["augmentation"] = recipe
    for loss, (_, grid) in LOSSES.items():
        if loss not in args.rows:
            continue
        method = f"{loss} loop"
        lr = lr_search(
            method,
            f"augmentation {recipe}, {describe(grid[0])}",
            lambda r, loss=loss, grid=grid: run_loss(loss, grid[0], r, recipe),
        )
        index = best(
            method,
            {i: f"augmentation {recipe}, {describe(s)}, lr={lr}" for i, s in enumerate(grid)},
            lambda i, loss=loss, grid=grid, lr=lr: run_loss(loss, grid[i], lr, recipe),
        )
        chosen[loss] = {"setting": grid[index], "lr": lr}
        store.save()
    if "estimator" in args.rows:
        lr = lr_search(
            "SOPRCEmbedder (images)",
            f"augmentation {recipe}, defaults",
            lambda r: scored(
                lambda X, y, seed: fit_estimator(
                    estimator_params(recipe, width, epochs, lr=r), X, y, seed
                ),
                data,
                0,
            ),
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
    width, epochs = splits["test"][0].shape[-1], args.epochs
    methods = {  # name: (row key of --rows, setting, fit)
        "SOPRCEmbedder, CNN + augmentation": (
            "estimator",
            "defaults",
            lambda X, y, seed: fit_estimator(estimator_params(recipe, width, epochs), X, y, seed),
        ),
    }
    tuned_lr = chosen.get("SOPRCEmbedder", {}).get("lr", DEFAULT_LR)
    if tuned_lr != DEFAULT_LR:
        methods["SOPRCEmbedder, CNN + augmentation, tuned"] = (
            "estimator",
            f"learning_rate={tuned_lr}",
            lambda X, y, seed: fit_estimator(
                estimator_params(recipe, width, epochs, lr=tuned_lr), X, y, seed
            ),
        )
    methods["SOPRCEmbedder, flattened pixels (MLP)"] = (
        "mlp",
        "defaults",
        lambda X, y, seed: fit_mlp(epochs, X, y, seed),
    )
    for loss, (_, grid) in LOSSES.items():
        picked = chosen.get(loss, {"setting": grid[0], "lr": DEFAULT_LR})
        label = ", ".join(f"{k}={v}" for k, v in {**picked["setting"], "lr": picked["lr"]}.items())
        methods[f"{loss} loop" + (", tuned" if loss in chosen else "")] = (
            loss,
            label,
            lambda X, y, seed, loss=loss, picked=picked: plain_loop(
                loss, picked["setting"], picked["lr"], recipe, X, y, seed, epochs
            ),
        )
    X, y, X_test, y_test = splits["test"]
    raw = store.get(
        "raw pixels", lambda: [*evaluate(X_test.reshape(len(X_test), -1) / 255.0, y_test), 0.0]
    )

    def table():
        rows = [["raw pixels (cosine)", "", f"{raw[0]:.4f}", f"{raw[1]:.4f}", "", ""]]
        for name, (_, label, _) in methods.items():
            done = sorted(
                int(key.rpartition(" | ")[2]) for key in store.runs if key.startswith(f"{name} | ")
            )
            if not done:
                continue
            found = np.array([store.runs[f"{name} | {seed}"] for seed in done])
            mean, sd = found.mean(0), found.std(0)
            rows.append(
                [name, label, f"{mean[0]:.4f} ± {sd[0]:.4f}", f"{mean[1]:.4f} ± {sd[1]:.4f}",
                 f"{mean[2]:.0f}", ", ".join(map(str, done))]
            )  # fmt: skip
        store.results.add_table(
            f"Class-disjoint image retrieval, {args.digits} digits (test classes), {epochs} epochs",
            ["method", "setting", "test mAUPRC", "test R@1", "s / fit", "seeds"],
            rows,
            notes=f"Composite digits as 28 x {width} uint8 images, {len(np.unique(y))} classes "
            f"({len(y):,} items) to train, {len(np.unique(y_test))} unseen ({len(y_test):,}) to "
            f"test; one torch thread; mean ± sd over the seeds of each row (sd 0 for one seed). "
            f"Augmentation {recipe!r} for every CNN row; loops: ConvNet defaults, SGD momentum "
            f"0.9, weight decay 4e-4, batches of 4 a class; settings chosen on held-out training "
            f"classes ({source or 'not run: defaults'}).",
        )

    store.tables = table
    for seed in seeds:
        for name, (row, _, fit) in methods.items():
            if row in args.rows:
                store.get(
                    f"{name} | {seed}",
                    lambda fit=fit, seed=seed: scored(fit, splits["test"], seed),
                )
    store.save()


def throughput(args, splits, store):
    """Marginal steps per second of the estimator and of the SOPRCLoss loop, same batches."""
    X, y = splits["test"][:2]
    width, recipe = X.shape[-1], DEFAULT_AUGMENTATION
    codes = np.unique(y, return_inverse=True)[1]
    per_epoch = len(sampler_for(codes, 0))
    epochs = (1, 1 + args.steps_epochs)
    candidates = {
        "SOPRCEmbedder": lambda e: fit_estimator(estimator_params(recipe, width, e), X, y, 0),
        "SOPRCLoss plain loop": lambda e: plain_loop(
            "SOPRCLoss", {}, DEFAULT_LR, recipe, X, y, 0, e
        ),
    }
    for fit in candidates.values():  # untimed: a process's first fit imports torch's compiler
        fit(epochs[0])
    timings = {}
    for e in epochs:  # the short runs of every candidate, then the long ones
        for name, fit in candidates.items():
            start = time.perf_counter()
            fit(e)
            timings[name, e] = time.perf_counter() - start
            print(f"  {name}, {e} epoch(s): {timings[name, e]:.1f} s", flush=True)
    rates = {
        name: marginal_rate(
            (timings[name, epochs[0]], epochs[0] * per_epoch),
            (timings[name, epochs[1]], epochs[1] * per_epoch),
        )
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
        notes=f"{args.digits}-digit training half ({len(y):,} items, 28 x {width}), "
        f"{per_epoch} batches an epoch; the default ConvNet, augmentation {recipe!r}; "
        f"marginal rate between {epochs[0]} and {epochs[1]} epochs "
        f"({(epochs[1] - epochs[0]) * per_epoch} steps), one run each; the estimator at its "
        "defaults (for images no prior warm-up, no weight averaging).",
    )
    store.save()


def main(argv=None):
    parser = harness_parser(__doc__, "quick", "seeds", "tag", "resume", seeds=[0])
    parser.add_argument(
        "--part", choices=["compare", "validation", "throughput"], default="compare"
    )
    parser.add_argument("--digits", type=int, choices=sorted(DATASETS), default=2)
    parser.add_argument("--epochs", type=int, default=5, help="epochs of every row")
    parser.add_argument("--validation-epochs", type=int, default=5, help="validation epochs")
    parser.add_argument(
        "--validation-from",
        help="--part compare: the validation results to take the choices from (a name in "
        "results/; default: the validation run of the same digits)",
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        default=["estimator", "mlp", *LOSSES],
        help="rows to run: estimator, mlp, and loss names (default: all)",
    )
    parser.add_argument(
        "--augmentation", choices=AUGMENTATIONS, help="--part validation: take it, no search"
    )
    parser.add_argument(
        "--steps-epochs", type=int, default=2, help="--part throughput: epochs measured"
    )
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
    parts = {
        "validation": ("validation",),
        "throughput": ("throughput",),
        "compare": (f"{args.epochs}_epochs",),
    }[args.part]
    name = results_name(f"bench_soprc_images_{args.digits}_digits", args, *parts)
    store = Store(name, args.resume)
    if args.part == "validation":
        validation(args, splits, store)
    elif args.part == "throughput":
        throughput(args, splits, store)
    else:
        compare(args, splits, store, args.seeds)


if __name__ == "__main__":
    main()
