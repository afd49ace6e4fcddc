"""GPU speed of the torch estimators: GPU against CPU, and the estimator against plain loops.

Run on a machine with a CUDA GPU; ``--device cpu --quick`` runs a small smoke version
anywhere.

Part ``mnist``: ``SOPRCEmbedder`` with its defaults on 5,000 MNIST images for 20 epochs, fitted
on the GPU and on the CPU (all its cores), wall time of ``fit``. Target: the GPU at least 3x
faster than the CPU.

Part ``large``: 200,000 synthetic inputs of 256 features in 2,000 classes (Gaussian clusters),
MLP 256-1024-1024-128, batches of 1,024 items (256 classes x 4). Training steps per second of

- ``SOPRCEmbedder.fit`` (the estimator: its engine, sampler and loss);
- a plain torch loop with the data on the device, the same network, optimiser and
  class-balanced batches, and ``skrank.losses.SOPRCLoss`` (its grouped, sync-free form);
- the same plain loop with pytorch-metric-learning's ``FastAPLoss``.

Steps per second are marginal: (steps of a 3-epoch run - steps of a 1-epoch run) / (time
difference), so set-up costs (moving the data, building the model) do not count. Targets: the
estimator at least 0.9x the plain loop with the same loss, and faster than the FastAP loop.

Usage::

    python benchmarks/bench_gpu.py                    # both parts on cuda
    python benchmarks/bench_gpu.py --device cpu --quick
"""

import warnings

import numpy as np
import torch
from _data import mnist_rows
from _harness import marginal_rate, parser, results_name, timed
from _results import Results

from skrank import SOPRCEmbedder
from skrank.losses import SOPRCLoss
from skrank.nn import MLP
from skrank.sampling import ClassBalancedBatchSampler


def mnist_part(device, epochs):
    X, y = mnist_rows()
    rows = []
    for where in [device, "cpu"]:
        model = SOPRCEmbedder(max_epochs=epochs, device=where, random_state=0)
        _, seconds = timed(model.fit, X[:5000], y[:5000], device=where)
        rows.append([where, epochs, seconds, model.score(X[5000:], y[5000:])])
    ratio = rows[1][2] / rows[0][2]
    return rows, ratio


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
    torch.manual_seed(0)
    data = torch.as_tensor(X, device=device)
    labels = torch.as_tensor(y, device=device)
    model = MLP(X.shape[1], hidden, 128).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, fused=True)
    if loss_name == "FastAPLoss":
        from pytorch_metric_learning.losses import FastAPLoss

        criterion = FastAPLoss()
    else:
        criterion = SOPRCLoss(np.bincount(y)).to(device)
    sampler = ClassBalancedBatchSampler(y, batch_size, 4, random_state=0, device=device)

    def run(epochs):
        for _ in range(epochs):
            epoch = sampler.epoch()
            n_groups = epoch.groups.shape[1]
            for number in range(epoch.indices.shape[0]):
                indices = epoch.indices[number]
                embeddings = model(data[indices])
                if loss_name == "FastAPLoss":
                    loss = criterion(embeddings, labels[indices])
                else:
                    loss = criterion.forward_grouped(
                        embeddings.view(n_groups, 4, -1),
                        epoch.groups[number],
                        epoch.valid[number].view(n_groups, 4),
                    )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
        return epochs * len(sampler)

    measured = [timed(run, epochs, device=device) for epochs in (1, 3)]
    return marginal_rate(*((seconds, steps) for steps, seconds in measured))


def large_part(device, n_samples, n_classes, hidden, batch_size):
    X, y = clustered(n_samples, 256, n_classes)
    rows = [
        ["SOPRCEmbedder.fit", estimator_steps_per_second(X, y, device, batch_size, hidden)],
        [
            "plain loop, SOPRCLoss (grouped)",
            plain_loop_steps_per_second(X, y, device, batch_size, hidden, "SOPRCLoss"),
        ],
        [
            "plain loop, FastAPLoss",
            plain_loop_steps_per_second(X, y, device, batch_size, hidden, "FastAPLoss"),
        ],
    ]
    for row in rows:
        row.append(row[1] / rows[1][1])
    return rows


def main(argv=None):
    arguments = parser(__doc__, "quick", "tag", "device", device="cuda")
    arguments.add_argument("--part", choices=["mnist", "large", "all"], default="all")
    args = arguments.parse_args(argv)
    warnings.simplefilter("ignore")
    results = Results(results_name("bench_gpu", args), ["pytorch-metric-learning"])
    if args.part in ("mnist", "all"):
        rows, ratio = mnist_part(args.device, 2 if args.quick else 20)
        results.add_table(
            "SOPRCEmbedder on 5,000 MNIST images: fit time on the device and on the CPU",
            ["device", "epochs", "fit (s)", "held-out mean AUPRC"],
            rows,
            notes=f"CPU time / {args.device} time: {ratio:.2f}x (target >= 3x on a GPU).",
        )
        print(rows, ratio)
    if args.part in ("large", "all"):
        sizes = (
            (20_000, 200, (256, 256), 256) if args.quick else (200_000, 2000, (1024, 1024), 1024)
        )
        rows = large_part(args.device, *sizes)
        results.add_table(
            f"Training steps per second, {sizes[0]:,} x 256 inputs, {sizes[1]:,} classes, MLP "
            f"{'-'.join(map(str, (256, *sizes[2], 128)))}, batches of {sizes[3]} ({args.device})",
            ["run", "steps / s", "ratio to the plain SOPRCLoss loop"],
            rows,
            notes="Targets: the estimator >= 0.9x the plain loop with the same loss, and above "
            "the FastAP loop.",
        )
        print(rows)
    results.save()


if __name__ == "__main__":
    main()
