"""CPU fit time of the torch estimators: this checkout against an earlier commit, in one run.

The training engine was rewritten for the GPU (data and batch indices on the device, no host
synchronisation inside an epoch, a fused SOPRC loss). This benchmark checks that the CPU did not
pay for it: the same fits, timed alternately with this checkout and with a baseline commit
(by default ``a39c174``, the last commit with the first torch core), each fit in a fresh
process, and the median of the repetitions compared as a ratio (``new / baseline``, below 1 is
faster). The baseline is checked out into a temporary git worktree; nothing is installed.

Fits (same data, parameters and seeds for both):

- ``SOPRCEmbedder`` on 5,000 MNIST images, its defaults (MLP 784-256-64, batches of 224 items:
  56 groups of 4 would need 56 classes, MNIST has 10, so batches hold 10 x 4 = 40 items),
  ``max_epochs`` epochs;
- ``SNMClassifier`` on Bibtex (4,880 sparse rows, 159 labels), ``n_negatives=64``,
  ``embedding_dim=64``, ``hidden_layer_sizes=(128,)``, ``max_epochs`` epochs.

The held-out score of each fit is reported too (mean AUPRC on the other 5,000 MNIST images;
Recall@5 on the Bibtex test split): the new engine draws its batches differently (fixed-shape
class-balanced batches, negatives drawn on the device), so the scores differ by sampling noise,
not by design.

Usage::

    python benchmarks/bench_engine_cpu.py [--baseline REV] [--repeats 3] [--max-epochs 5]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import REPOSITORY, Results

WORKLOAD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np, torch
torch.set_num_threads({threads})
from skrank import SNMClassifier, SOPRCEmbedder
from skrank.datasets import load_bibtex, load_mnist
name, epochs = sys.argv[1], int(sys.argv[2])
if name == "SOPRCEmbedder":
    data = load_mnist()
    X, y = data.data.astype(np.float32), data.target  # load_mnist: pixels in [0, 1]
    model = SOPRCEmbedder(max_epochs=epochs, device="cpu", random_state=0)
    start = time.perf_counter(); model.fit(X[:5000], y[:5000])
    seconds = time.perf_counter() - start
    score = model.score(X[5000:], y[5000:])
else:
    train, test = load_bibtex(subset="train"), load_bibtex(subset="test")
    model = SNMClassifier(n_negatives=64, embedding_dim=64, hidden_layer_sizes=(128,),
                          max_epochs=epochs, score_k=5, device="cpu", random_state=0)
    start = time.perf_counter(); model.fit(train.data, train.target)
    seconds = time.perf_counter() - start
    from skrank.metrics import top_k_recall_score  # Recall@5, whatever the version's score
    score = top_k_recall_score(test.target, model.decision_function(test.data), k=5)
print(json.dumps({{"seconds": seconds, "score": float(score)}}))
"""


def run(source, name, epochs, threads):
    completed = subprocess.run(
        [sys.executable, "-c", WORKLOAD.format(threads=threads), name, str(epochs)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"},
        cwd=source,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="a39c174", help="git revision to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of each fit")
    args = parser.parse_args(argv)
    results = Results("bench_engine_cpu")
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        baseline = Path(directory) / "baseline"
        subprocess.run(
            ["git", "-C", str(REPOSITORY), "worktree", "add", "--detach", str(baseline),
             args.baseline],
            check=True,
            capture_output=True,
        )  # fmt: skip
        try:
            for name in ["SOPRCEmbedder", "SNMClassifier"]:
                measured = {"this checkout": [], args.baseline: []}
                for _ in range(args.repeats):  # alternate, so that load drifts hit both
                    for label, source in (("this checkout", REPOSITORY), (args.baseline, baseline)):
                        measured[label].append(run(source, name, args.max_epochs, args.threads))
                new = statistics.median(r["seconds"] for r in measured["this checkout"])
                old = statistics.median(r["seconds"] for r in measured[args.baseline])
                new_score = statistics.median(r["score"] for r in measured["this checkout"])
                old_score = statistics.median(r["score"] for r in measured[args.baseline])
                rows.append([name, args.max_epochs, old, new, new / old, old_score, new_score])
                print(f"{name}: baseline {old:.2f} s, this checkout {new:.2f} s "
                      f"({new / old:.2f}x); scores {old_score:.4f} -> {new_score:.4f}")  # fmt: skip
        finally:
            subprocess.run(
                ["git", "-C", str(REPOSITORY), "worktree", "remove", "--force", str(baseline)],
                check=False,
                capture_output=True,
            )
    results.add_table(
        f"CPU fit time, median of {args.repeats} alternating runs ({args.threads} torch threads)",
        [
            "estimator",
            "epochs",
            f"baseline {args.baseline} (s)",
            "this checkout (s)",
            "ratio (new / baseline)",
            "baseline held-out score",
            "held-out score",
        ],
        rows,
        notes="Held-out score: SOPRCEmbedder mean AUPRC on MNIST rows 5000-9999; SNMClassifier "
        "Recall@5 on the Bibtex test split.",
    )
    results.save()


if __name__ == "__main__":
    main()
