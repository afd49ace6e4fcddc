"""Data-parallel training: items per second of the torch estimators on 1 and 2 processes.

Each setting is launched with ``torchrun`` exactly as a user would (``python -m
torch.distributed.run --nproc_per_node N``), the gloo backend on the CPU (NCCL on GPUs, with
``--device cuda``): every process trains on its own part of each batch (``batch_size`` items),
so N processes train on N times more items per step. Throughput is marginal: the items of a
6-epoch fit minus those of a 2-epoch fit, over the time difference (after a warm-up fit), so
that start-up does not count. Scaling efficiency = throughput with N processes / (N x throughput
with 1); each process runs one torch thread.

Data: 20,000 synthetic items of 64 features in 200 classes, MLP 64-512-64 (SOPRCEmbedder,
batches of 256 items per process: 64 classes x 4) and the same items with their class as the
label (SNMClassifier, ``n_negatives=64``, batches of 1,024 per process).

Usage::

    python benchmarks/bench_distributed.py [--processes 1 2] [--device cpu]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import REPOSITORY, Results

WORKER = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np, torch, torch.distributed as dist
torch.set_num_threads(1)
from skrank import SNMClassifier, SOPRCEmbedder
name, device, output = sys.argv[1], sys.argv[2], sys.argv[3]
rng = np.random.default_rng(0)
y = rng.integers(200, size=20_000)
X = (rng.normal(size=(200, 64))[y] + rng.normal(size=(20_000, 64))).astype(np.float32)
def fit(epochs):
    if name == "SOPRCEmbedder":
        model = SOPRCEmbedder(hidden_layer_sizes=(512,), n_components=64, batch_size=256,
                              max_epochs=epochs, device=device, random_state=0)
    else:
        model = SNMClassifier(n_negatives=64, embedding_dim=64, hidden_layer_sizes=(512,),
                              batch_size=1024, max_epochs=epochs, device=device, random_state=0)
    if dist.is_initialized():
        dist.barrier()
    start = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - start
    batches = len(model.sampler_)
    items = epochs * batches * model.batch_size * model.world_size_
    return seconds, items, model.world_size_
fit(1)  # warm-up: imports, allocator, first collectives
one, three = fit(2), fit(6)
if not dist.is_initialized() or dist.get_rank() == 0:
    rate = (three[1] - one[1]) / (three[0] - one[0])
    json.dump({"items_per_second": rate, "world_size": three[2]}, open(output, "w"))
"""


def throughput(name, processes, device):
    with tempfile.TemporaryDirectory() as directory:
        worker = Path(directory) / "worker.py"
        worker.write_text(WORKER)
        output = Path(directory) / "result.json"
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={processes}", str(worker), name, device, str(output),
        ]  # fmt: skip
        environment = {**os.environ, "PYTHONPATH": str(REPOSITORY), "OMP_NUM_THREADS": "1"}
        subprocess.run(command, check=True, capture_output=True, env=environment)
        return json.loads(output.read_text())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    results = Results("bench_distributed")
    rows = []
    for name in ["SOPRCEmbedder", "SNMClassifier"]:
        single = None
        for processes in args.processes:
            measured = throughput(name, processes, args.device)
            assert measured["world_size"] == processes
            rate = measured["items_per_second"]
            single = rate if processes == 1 else single
            efficiency = rate / (processes * single) if single else None
            rows.append([name, processes, args.device, rate, efficiency])
            print(f"{name}: {processes} process(es): {rate:.0f} items/s, efficiency {efficiency}")
    results.add_table(
        "Training throughput under torchrun (marginal items per second)",
        ["estimator", "processes", "device", "items / s", "scaling efficiency"],
        rows,
        notes="Efficiency = throughput with N processes / (N x throughput with 1 process). "
        "The 2-core machine runs 2 processes of one thread each.",
    )
    results.save()


if __name__ == "__main__":
    main()
