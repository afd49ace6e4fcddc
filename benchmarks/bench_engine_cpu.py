"""CPU fit time of the torch estimators: this checkout against an earlier commit, in one run.

The training engine was rewritten for the GPU (data and batch indices on the device, no host
synchronisation inside an epoch, a fused SOPRC loss). This benchmark checks that the CPU did not
pay for it: the same fits, timed alternately with this checkout and with a baseline commit
(by default ``a39c174``, the last commit with the first torch core), each fit in a fresh
process, and the median of the repetitions compared as a ratio (``new / baseline``, below 1 is
faster). The baseline's skrank is extracted from git into a temporary folder
(``_harness.source_at``); nothing is installed.

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
    python benchmarks/bench_engine_cpu.py --quick     # one repetition of one epoch
"""

import statistics

from _harness import alternate, parser, results_name, run_in_child, sources, timed
from _results import Results


def fit(name, epochs, threads):
    """One fit, in a child process running the skrank of the checkout measured."""
    import warnings

    import numpy as np
    import torch

    from skrank import SNMClassifier, SOPRCEmbedder
    from skrank.datasets import load_bibtex, load_mnist

    warnings.simplefilter("ignore")
    torch.set_num_threads(threads)
    if name == "SOPRCEmbedder":
        data = load_mnist()
        X, y = data.data.astype(np.float32), data.target  # load_mnist: pixels in [0, 1]
        model = SOPRCEmbedder(max_epochs=epochs, device="cpu", random_state=0)
        _, seconds = timed(model.fit, X[:5000], y[:5000])
        score = model.score(X[5000:], y[5000:])
    else:
        train, test = load_bibtex(subset="train"), load_bibtex(subset="test")
        model = SNMClassifier(
            n_negatives=64, embedding_dim=64, hidden_layer_sizes=(128,), max_epochs=epochs,
            score_k=5, device="cpu", random_state=0,
        )  # fmt: skip
        _, seconds = timed(model.fit, train.data, train.target)
        from skrank.metrics import top_k_recall_score  # Recall@5, whatever the version's score

        score = top_k_recall_score(test.target, model.decision_function(test.data), k=5)
    return {"seconds": seconds, "score": float(score)}


def main(argv=None):
    arguments = parser(
        __doc__, "quick", "tag", "repeats", "baseline", repeats=3, baseline="a39c174"
    )
    arguments.add_argument("--max-epochs", type=int, default=5)
    arguments.add_argument("--threads", type=int, default=2, help="torch threads of each fit")
    args = arguments.parse_args(argv)
    repeats, epochs = (1, 1) if args.quick else (args.repeats, args.max_epochs)
    rows = []
    with sources(args.baseline) as checkouts:
        for name in ["SOPRCEmbedder", "SNMClassifier"]:
            measured = alternate(  # alternated, so that load drifts hit both
                lambda commit, name=name: run_in_child(
                    __file__,
                    "fit",
                    {"name": name, "epochs": epochs, "threads": args.threads},
                    source=checkouts[commit],
                ),
                checkouts,
                repeats,
            )
            medians = {
                commit: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
                for commit, runs in measured.items()
            }
            this, baseline = medians.pop(None), medians.popitem()[1]
            new, old = this["seconds"], baseline["seconds"]
            new_score, old_score = this["score"], baseline["score"]
            rows.append([name, epochs, old, new, new / old, old_score, new_score])
            print(f"{name}: baseline {old:.2f} s, this checkout {new:.2f} s "
                  f"({new / old:.2f}x); scores {old_score:.4f} -> {new_score:.4f}")  # fmt: skip
    results = Results(results_name("bench_engine_cpu", args))
    results.add_table(
        f"CPU fit time, median of {repeats} alternating runs ({args.threads} torch threads)",
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
