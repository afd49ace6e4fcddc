"""The torch engine's training steps: torch operations and host syncs a step, and steps a second.

``--part ops`` (``bench_step_ops.json``; what is counted and the targets: benchmarks/README.md,
section "Torch engine"): ops per optimiser step, counted with torch.profiler on the CPU, of
``SOPRCEmbedder.fit`` and ``SNMClassifier.fit`` (a one-epoch ``fit``, set-up included, and the
marginal epoch: three epochs minus one, over two epochs' steps) and of plain torch loops over
class-balanced batches of the same shape with ``SOPRCLoss`` (grouped and any-order) and
pytorch-metric-learning's ``MultiSimilarityLoss`` and ``FastAPLoss``. Data: 2,048 MNIST images
(``--quick``: 512), MLP 784-256-64, batches of 10 classes x 4 items (224 items for SNM); means
over ``--seeds`` (the estimators' ``random_state``, the loops' batches and weights).

``--part speed`` (``bench_gpu.json``; run on a machine with a CUDA GPU, ``--device cpu
--quick`` anywhere): ``SOPRCEmbedder`` with its defaults on 5,000 MNIST images for 20 epochs,
fitted on the device and on the CPU (all its cores), wall time of ``fit`` (target: the GPU at
least 3x faster); and on 200,000 synthetic inputs of 256 features in 2,000 classes (Gaussian
clusters), MLP 256-1024-1024-128, batches of 1,024 items (256 classes x 4), marginal training
steps per second (steps of a 3-epoch run minus a 1-epoch run's, over the time difference) of
``SOPRCEmbedder.fit``, of a plain torch loop with the data on the device, the same network,
optimiser and batches and ``SOPRCLoss`` (grouped, sync-free), and of that loop with
``FastAPLoss``. Targets: the estimator at least 0.9x the plain loop with the same loss, and
faster than the FastAP loop.

Usage::

    python benchmarks/bench_engine.py --part ops [--seeds 0 1 2] [--quick] [--tag TAG]
    python benchmarks/bench_engine.py --part speed               # on cuda
    python benchmarks/bench_engine.py --part speed --device cpu --quick
"""

import warnings

import numpy as np
import torch
from _data import mnist_rows
from _harness import marginal_rate, parser, results_name, timed
from _results import Results
from torch.profiler import ProfilerActivity, profile

from skrank import SNMClassifier, SOPRCEmbedder
from skrank.losses import SOPRCLoss
from skrank.nn import MLP
from skrank.sampling import ClassBalancedBatchSampler

SAMPLES_PER_CLASS = 4
BATCH = 10 * SAMPLES_PER_CLASS  # the ops part's batches: 10 classes x 4 items


def train_steps(model, criterion, optimizer, data, labels, epochs, grouped):
    """The plain torch loop: a step a class-balanced batch of each of ``epochs`` (epochs of a
    ``ClassBalancedBatchSampler``), ``criterion`` on the batch's groups where ``grouped``
    (``SOPRCLoss.forward_grouped``), else on its embeddings and labels."""
    for epoch in epochs:
        n_groups = epoch.groups.shape[1]
        for number in range(epoch.indices.shape[0]):
            indices = epoch.indices[number]
            embeddings = model(data[indices])
            if grouped:
                loss = criterion.forward_grouped(
                    embeddings.view(n_groups, SAMPLES_PER_CLASS, -1),
                    epoch.groups[number],
                    epoch.valid[number].view(n_groups, SAMPLES_PER_CLASS),
                )
            else:
                loss = criterion(embeddings, labels[indices])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def plain_loop_parts(X, y, loss_name, hidden, n_components, batch_size, seed=0, device="cpu",
                     fused=None):  # fmt: skip
    """The first arguments of :func:`train_steps` (network, loss: ``SOPRCLoss...`` or
    pytorch-metric-learning's ``loss_name``, optimiser, data and labels as tensors on
    ``device``) and the class-balanced sampler."""
    from pytorch_metric_learning import losses

    torch.manual_seed(seed)
    data = torch.as_tensor(X, device=device)
    labels = torch.as_tensor(y.astype(np.int64), device=device)
    model = MLP(X.shape[1], hidden, n_components).to(device)
    if loss_name.startswith("SOPRCLoss"):
        criterion = SOPRCLoss(np.bincount(y)).to(device)
    else:
        criterion = getattr(losses, loss_name)()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, fused=fused)
    sampler = ClassBalancedBatchSampler(
        y, batch_size, SAMPLES_PER_CLASS, random_state=seed, device=device
    )
    return model, criterion, optimizer, data, labels, sampler


# ------------------------------------------------------------------------------ ops
SYNCING = {"aten::_local_scalar_dense", "aten::nonzero", "aten::_unique2", "aten::unique_dim",
           "aten::unique_consecutive", "aten::masked_select"}  # fmt: skip


# The CPU kernels of torch's fused Adam/AdamW read each parameter's step count with .item(); the
# CUDA kernels read it on the device. Those reads are counted apart: on a GPU they do not exist.
CPU_ONLY = {"aten::_fused_adam_", "aten::_fused_adamw_"}


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent.name
        parent = parent.cpu_parent


def count_ops(function):
    """Top-level aten ops (no aten op above them: forward, backward and optimiser alike), and
    host-syncing ops (at any depth) outside and inside the CPU kernels of fused Adam."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        function()
    events = prof.events()
    top_level = sum(
        1
        for e in events
        if e.name.startswith("aten::") and not any(a.startswith("aten::") for a in _ancestors(e))
    )
    syncing = [e for e in events if e.name in SYNCING]
    cpu_only = sum(1 for e in syncing if CPU_ONLY & set(_ancestors(e)))
    return top_level, len(syncing) - cpu_only, cpu_only


# The estimators counted: their parameters but the epochs, device and seed.
ESTIMATORS = {
    SOPRCEmbedder: dict(batch_size=BATCH),
    SNMClassifier: dict(n_negatives=8, embedding_dim=64, hidden_layer_sizes=(256,), batch_size=224),
}


def estimator_counts(estimator, params, X, y, steps_per_epoch):
    """(ops, syncs) per step over a one-epoch fit, and the marginal per step of an epoch."""
    one = count_ops(lambda: estimator(**params, max_epochs=1).fit(X, y))
    three = count_ops(lambda: estimator(**params, max_epochs=3).fit(X, y))
    whole = tuple(value / steps_per_epoch for value in one)
    marginal = tuple((b - a) / (2 * steps_per_epoch) for a, b in zip(one, three, strict=True))
    return whole, marginal


def plain_loop(loss_name, X, y, n_epochs=1, seed=0):
    """A plain torch loop over class-balanced batches with the data already in a tensor: its
    ops, syncs and fused-Adam CPU reads per step, and its steps."""
    *loop, sampler = plain_loop_parts(X, y, loss_name, (256,), 64, BATCH, seed)
    epochs = [sampler.epoch() for _ in range(n_epochs)]
    grouped = loss_name == "SOPRCLoss grouped"
    ops, syncs, cpu_only = count_ops(lambda: train_steps(*loop, epochs, grouped))
    steps = sum(epoch.indices.shape[0] for epoch in epochs)
    return ops / steps, syncs / steps, cpu_only / steps, steps


def counts_for_seed(X, y, seed):
    """Rows ``[run, steps, ops / step, syncs / step, fused-Adam CPU reads / step]`` of one seed,
    and the plain loops' ops per step by loss."""
    rows = []
    for estimator, params in ESTIMATORS.items():
        params = dict(params, device="cpu", random_state=seed)
        if estimator is SOPRCEmbedder:
            steps = len(ClassBalancedBatchSampler(y, BATCH, SAMPLES_PER_CLASS))
        else:
            steps = -(-X.shape[0] // params["batch_size"])
        whole, marginal = estimator_counts(estimator, params, X, y, steps)
        rows.append([f"{estimator.__name__}.fit (1 epoch, set-up included)", steps, *whole])
        rows.append([f"{estimator.__name__}.fit (marginal epoch)", steps, *marginal])
    loops = {}
    for name in ["SOPRCLoss grouped", "SOPRCLoss", "MultiSimilarityLoss", "FastAPLoss"]:
        ops, syncs, cpu_only, steps = plain_loop(name, X, y, seed=seed)
        loops[name] = ops
        rows.append([f"plain loop, {name}", steps, ops, syncs, cpu_only])
    return rows, loops


COLUMNS = ["run", "steps", "top-level aten ops / step", "syncing ops / step",
           "fused Adam's CPU-kernel step reads / step"]  # fmt: skip


def ops_part(args):
    n_samples = args.n_samples or (512 if args.quick else 2048)
    torch.set_num_threads(1)
    X, y = mnist_rows(n_samples)
    results = Results(results_name("bench_step_ops", args), packages=["pytorch-metric-learning"])
    per_seed = [counts_for_seed(X, y, seed) for seed in args.seeds]
    rows = [
        [cells[0][0], cells[0][1], *np.mean([row[2:] for row in cells], axis=0).tolist()]
        for cells in zip(*(seed_rows for seed_rows, _ in per_seed), strict=True)
    ]
    loops = {
        name: np.mean([seed_loops[name] for _, seed_loops in per_seed]) for name in per_seed[0][1]
    }
    ratio = rows[1][2] / loops["MultiSimilarityLoss"]  # SOPRCEmbedder's marginal epoch
    results.add_table(
        f"Torch ops and host syncs per optimiser step ({n_samples} MNIST rows, one thread, "
        f"mean over seeds {args.seeds})",
        COLUMNS,
        rows,
        notes=f"SOPRCEmbedder marginal ops per step / plain MultiSimilarityLoss loop: {ratio:.2f}x "
        f"(target <= 1.5x); marginal syncing ops per step: SOPRCEmbedder {rows[1][3]:.3g} "
        f"(target <= 0.05, 2 an epoch of {rows[1][1]} steps), SNMClassifier {rows[3][3]:.3g} "
        "(target <= 0.1). The last column counts the .item() calls inside the CPU kernel of "
        "fused Adam (SNM's default optimiser): its CUDA kernel reads the step counts on the "
        "device, so a GPU run has none.",
        show=True,
    )
    results.add_figure("soprc_ops_ratio_to_multisimilarity", ratio)
    results.add_figure("soprc_marginal_syncs_per_step", rows[1][3])
    results.save()


# ------------------------------------------------------------------------------ speed
def clustered(n_samples, n_features, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_classes, n_features)).astype(np.float32)
    y = rng.integers(n_classes, size=n_samples)
    X = centers[y] + rng.normal(scale=2.0, size=(n_samples, n_features)).astype(np.float32)
    return X, y


def estimator_steps_per_second(X, y, device, batch_size, hidden):
    def fit(epochs):
        model = SOPRCEmbedder(hidden_layer_sizes=hidden, n_components=128, batch_size=batch_size,
                              max_epochs=epochs, device=device, random_state=0)  # fmt: skip
        _, seconds = timed(model.fit, X, y, device=device)
        return seconds, epochs * len(model.sampler_)

    return marginal_rate(fit(1), fit(3))


def plain_loop_steps_per_second(X, y, device, batch_size, hidden, loss_name):
    *loop, sampler = plain_loop_parts(
        X, y, loss_name, hidden, 128, batch_size, device=device, fused=True
    )

    def run(epochs):
        epochs_drawn = (sampler.epoch() for _ in range(epochs))  # drawn in the timed loop
        train_steps(*loop, epochs_drawn, loss_name != "FastAPLoss")
        return epochs * len(sampler)

    measured = [timed(run, epochs, device=device) for epochs in (1, 3)]
    return marginal_rate(*((seconds, steps) for steps, seconds in measured))


def speed_part(args):
    device, epochs = args.device or "cuda", 2 if args.quick else 20
    results = Results(results_name("bench_gpu", args), ["pytorch-metric-learning"])
    X, y = mnist_rows()
    rows = []
    for where in [device, "cpu"]:
        model = SOPRCEmbedder(max_epochs=epochs, device=where, random_state=0)
        _, seconds = timed(model.fit, X[:5000], y[:5000], device=where)
        rows.append([where, epochs, seconds, model.score(X[5000:], y[5000:])])
    results.add_table(
        "SOPRCEmbedder on 5,000 MNIST images: fit time on the device and on the CPU",
        ["device", "epochs", "fit (s)", "held-out mean AUPRC"],
        rows,
        notes=f"CPU time / {device} time: {rows[1][2] / rows[0][2]:.2f}x (target >= 3x on a GPU).",
        show=True,
    )
    sizes = (20_000, 200, (256, 256), 256) if args.quick else (200_000, 2000, (1024, 1024), 1024)
    n_samples, n_classes, hidden, batch_size = sizes  # inputs, classes, hidden layers, batch
    X, y = clustered(n_samples, 256, n_classes)
    rows = [["SOPRCEmbedder.fit", estimator_steps_per_second(X, y, device, batch_size, hidden)]]
    for name, loss in [("SOPRCLoss (grouped)", "SOPRCLoss"), ("FastAPLoss", "FastAPLoss")]:
        rate = plain_loop_steps_per_second(X, y, device, batch_size, hidden, loss)
        rows.append([f"plain loop, {name}", rate])
    for row in rows:
        row.append(row[1] / rows[1][1])
    results.add_table(
        f"Training steps per second, {n_samples:,} x 256 inputs, {n_classes:,} classes, MLP "
        f"{'-'.join(map(str, (256, *hidden, 128)))}, batches of {batch_size} ({device})",
        ["run", "steps / s", "ratio to the plain SOPRCLoss loop"],
        rows,
        notes="Targets: the estimator >= 0.9x the plain loop with the same loss, and above "
        "the FastAP loop.",
        show=True,
    )
    results.save()


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag", "device", seeds=[0, 1, 2])
    arguments.add_argument("--part", choices=["ops", "speed"], required=True)
    # --device: the speed part's (default cuda); the ops part counts on the CPU.
    arguments.add_argument(
        "--n-samples", type=int, help="ops: MNIST rows (default 2048, 512 with --quick)"
    )
    args = arguments.parse_args(argv)
    warnings.simplefilter("ignore")
    {"ops": ops_part, "speed": speed_part}[args.part](args)


if __name__ == "__main__":
    main()
