"""Torch operations and host synchronisations per optimiser step, counted with torch.profiler.

On a GPU every top-level torch operation is at least one kernel launch, and every operation that
reads a value back to the host (``aten::_local_scalar_dense`` from ``.item()``, ``nonzero``,
``unique``, boolean-mask indexing) stalls the launch queue. Both are counted on the CPU, where
they are the same operations, for ``SOPRCEmbedder.fit`` and ``SNMClassifier.fit`` and for plain
torch loops over class-balanced batches of the same shape with ``SOPRCLoss`` (grouped and
any-order) and pytorch-metric-learning's ``MultiSimilarityLoss`` and ``FastAPLoss``.

Counts per optimiser step; for the estimators over a one-epoch ``fit`` (set-up included) and
the marginal epoch (three epochs minus one, over two epochs' steps). Data: 2,048 MNIST images
(``--quick``: 512), MLP 784-256-64, batches of 10 classes x 4 items (224 items for SNM); means
over ``--seeds`` (the estimators' ``random_state``, the loops' batches and weights).

Targets, on the marginal epoch: at most 0.05 syncing ops per step for SOPRCEmbedder and 0.1 for
SNMClassifier, and SOPRCEmbedder's ops per step at most 1.5x the MultiSimilarityLoss loop's.

Usage::

    python benchmarks/bench_step_ops.py [--seeds 0 1 2] [--quick] [--tag TAG]
"""

import warnings

import numpy as np
import torch
from _data import mnist_rows
from _harness import parser, results_name
from _results import Results
from torch.profiler import ProfilerActivity, profile

from skrank import SNMClassifier, SOPRCEmbedder
from skrank.losses import SOPRCLoss
from skrank.nn import MLP
from skrank.sampling import ClassBalancedBatchSampler

SYNCING = {"aten::_local_scalar_dense", "aten::nonzero", "aten::_unique2", "aten::unique_dim",
           "aten::unique_consecutive", "aten::masked_select"}  # fmt: skip
SAMPLES_PER_CLASS = 4


def _has_aten_ancestor(event):
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


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
    top_level = sum(1 for e in events if e.name.startswith("aten::") and not _has_aten_ancestor(e))
    syncing = [e for e in events if e.name in SYNCING]
    cpu_only = sum(1 for e in syncing if CPU_ONLY & set(_ancestors(e)))
    return top_level, len(syncing) - cpu_only, cpu_only


def estimator_counts(make, X, y, steps_per_epoch):
    """(ops, syncs) per step over a one-epoch fit, and the marginal per step of an epoch."""
    one = count_ops(lambda: make(1).fit(X, y))
    three = count_ops(lambda: make(3).fit(X, y))
    whole = tuple(value / steps_per_epoch for value in one)
    marginal = tuple((b - a) / (2 * steps_per_epoch) for a, b in zip(one, three, strict=True))
    return whole, marginal


def plain_loop(loss_name, X, y, n_epochs=1, seed=0):
    """A plain torch loop over class-balanced batches with the data already in a tensor."""
    torch.manual_seed(seed)
    data, labels = torch.from_numpy(X), torch.from_numpy(y.astype(np.int64))
    model = MLP(X.shape[1], (256,), 64)
    counts = np.bincount(y)
    if loss_name == "MultiSimilarityLoss":
        from pytorch_metric_learning.losses import MultiSimilarityLoss

        criterion = MultiSimilarityLoss()
    elif loss_name == "FastAPLoss":
        from pytorch_metric_learning.losses import FastAPLoss

        criterion = FastAPLoss()
    else:
        criterion = SOPRCLoss(counts)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sampler = ClassBalancedBatchSampler(
        y, 10 * SAMPLES_PER_CLASS, SAMPLES_PER_CLASS, random_state=seed
    )
    epochs = [sampler.epoch() for _ in range(n_epochs)]

    def run():
        for epoch in epochs:
            for number in range(epoch.indices.shape[0]):
                indices = epoch.indices[number]
                embeddings = model(data[indices])
                if loss_name == "SOPRCLoss grouped":
                    groups = epoch.groups[number]
                    valid = epoch.valid[number].view(groups.shape[0], SAMPLES_PER_CLASS)
                    loss = criterion.forward_grouped(
                        embeddings.view(groups.shape[0], SAMPLES_PER_CLASS, -1), groups, valid
                    )
                else:
                    loss = criterion(embeddings, labels[indices])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

    ops, syncs, cpu_only = count_ops(run)
    steps = sum(epoch.indices.shape[0] for epoch in epochs)
    return ops / steps, syncs / steps, cpu_only / steps, steps


def counts_for_seed(X, y, seed):
    """Rows ``[run, steps, ops / step, syncs / step, fused-Adam CPU reads / step]`` of one seed,
    and the plain loops' ops per step by loss."""
    rows = []
    sampler = ClassBalancedBatchSampler(y, 10 * SAMPLES_PER_CLASS, SAMPLES_PER_CLASS)
    soprc_steps = len(sampler)

    def soprc(epochs):
        return SOPRCEmbedder(batch_size=10 * SAMPLES_PER_CLASS, max_epochs=epochs, device="cpu",
                             random_state=seed)  # fmt: skip

    whole, marginal = estimator_counts(soprc, X, y, soprc_steps)
    rows.append(["SOPRCEmbedder.fit (1 epoch, set-up included)", soprc_steps, *whole])
    rows.append(["SOPRCEmbedder.fit (marginal epoch)", soprc_steps, *marginal])
    snm_steps = -(-X.shape[0] // 224)

    def snm(epochs):
        return SNMClassifier(n_negatives=8, embedding_dim=64, hidden_layer_sizes=(256,),
                             batch_size=224, max_epochs=epochs, device="cpu",
                             random_state=seed)  # fmt: skip

    whole, marginal = estimator_counts(snm, X, y, snm_steps)
    rows.append(["SNMClassifier.fit (1 epoch, set-up included)", snm_steps, *whole])
    rows.append(["SNMClassifier.fit (marginal epoch)", snm_steps, *marginal])
    loops = {}
    for name in ["SOPRCLoss grouped", "SOPRCLoss", "MultiSimilarityLoss", "FastAPLoss"]:
        ops, syncs, cpu_only, steps = plain_loop(name, X, y, seed=seed)
        loops[name] = ops
        rows.append([f"plain loop, {name}", steps, ops, syncs, cpu_only])
    return rows, loops


COLUMNS = ["run", "steps", "top-level aten ops / step", "syncing ops / step",
           "fused Adam's CPU-kernel step reads / step"]  # fmt: skip


def main(argv=None):
    made = parser(__doc__, "quick", "seeds", "tag", seeds=[0, 1, 2])
    made.add_argument("--n-samples", type=int, help="MNIST rows (default 2048, 512 with --quick)")
    args = made.parse_args(argv)
    n_samples = args.n_samples or (512 if args.quick else 2048)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
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
    soprc_steps = rows[1][1]
    for row in rows:
        print(
            f"{row[0]:<48} steps {row[1]:>4}  ops/step {row[2]:8.1f}  syncs/step {row[3]:6.2f}"
            f"  (fused-Adam CPU reads {row[4]:.2f})"
        )
    marginal_soprc = rows[1][2]
    ratio = marginal_soprc / loops["MultiSimilarityLoss"]
    results.add_table(
        f"Torch ops and host syncs per optimiser step ({n_samples} MNIST rows, one thread, "
        f"mean over seeds {args.seeds})",
        COLUMNS,
        rows,
        notes=(
            f"SOPRCEmbedder marginal ops per step / plain MultiSimilarityLoss loop: {ratio:.2f}x "
            f"(target <= 1.5x); marginal syncing ops per step: SOPRCEmbedder {rows[1][3]:.3g} "
            f"(target <= 0.05, 2 an epoch of {soprc_steps} steps), SNMClassifier "
            f"{rows[3][3]:.3g} (target <= 0.1). The last "
            "column counts the .item() calls inside the CPU kernel of fused Adam (SNM's default "
            "optimiser): its CUDA kernel reads the step counts on the device, so a GPU run has "
            "none."
        ),
    )
    results.add_figure("soprc_ops_ratio_to_multisimilarity", ratio)
    results.add_figure("soprc_marginal_syncs_per_step", rows[1][3])
    results.save()


if __name__ == "__main__":
    main()
