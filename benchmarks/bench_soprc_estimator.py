"""Bias of the SOPRC estimator against the in-batch AP estimator (SOPRC paper, Appendix B.2).

For each score distribution of :func:`skrank.datasets.make_score_simulation` (100,000 scores,
positive rate pi = 0.1) and each batch positive rate pi0, 500 batches (positives and negatives
drawn without replacement in the proportions pi0 : 1 - pi0), each scored by the SOPRC estimator
(``soprc_query_loss(..., exact=True)``, the dataset prior, all 10,000 positive scores as the
auxiliary vector) and by the in-batch AP estimator (1 - the batch's average precision): their
mean, sd and bias against 1 - AUPRC of all the scores. See benchmarks/README.md, section "SOPRC".

Usage: ``python benchmarks/bench_soprc_estimator.py [--quick]`` (writes
``benchmarks/results/bench_soprc_estimator[_quick].json``).
"""

import numpy as np
import torch
from _harness import parser, results_name, timed
from _results import Results
from sklearn.metrics import average_precision_score

from skrank.datasets import make_score_simulation
from skrank.losses import soprc_query_loss

DISTRIBUTIONS = ("binormal", "bibeta", "offset_uniform")
BATCH_RATES = (0.01, 0.02, 0.03, 0.1, 0.2)
PRIOR = 0.1


def batch_estimates(positives, negatives, batch_size, batch_rate, n_batches, rng):
    """SOPRC and in-batch AP estimates of ``1 - AUPRC`` over ``n_batches`` random batches."""
    n_positives = max(1, round(batch_rate * batch_size))
    n_negatives = batch_size - n_positives
    auxiliary = torch.as_tensor(positives)
    labels = np.r_[np.ones(n_positives), np.zeros(n_negatives)]
    soprc, ap = np.empty(n_batches), np.empty(n_batches)
    for b in range(n_batches):
        pos = rng.choice(positives, n_positives, replace=False)
        neg = rng.choice(negatives, n_negatives, replace=False)
        soprc[b] = float(
            soprc_query_loss(
                torch.as_tensor(pos), torch.as_tensor(neg), auxiliary, prior=PRIOR, exact=True
            )
        )
        ap[b] = 1 - average_precision_score(labels, np.r_[pos, neg])
    return soprc, ap


def simulate(batch_sizes, n_batches, n_samples=100_000, seed=0):
    """Rows of (distribution, batch size, pi0, target, SOPRC estimates, AP estimates)."""
    rows = []
    for distribution in DISTRIBUTIONS:
        y_score, y_true = make_score_simulation(
            distribution, n_samples=n_samples, positive_rate=PRIOR, random_state=seed
        )
        target = 1 - average_precision_score(y_true, y_score)
        positives, negatives = y_score[y_true == 1], y_score[y_true == 0]
        rng = np.random.default_rng(seed)
        for batch_size in batch_sizes:
            for rate in BATCH_RATES:
                soprc, ap = batch_estimates(positives, negatives, batch_size, rate, n_batches, rng)
                rows.append((distribution, batch_size, rate, target, soprc, ap))
    return rows


BIAS_COLUMNS = ["distribution", "batch", "pi0", "1-AUPRC", "SOPRC mean ± sd", "AP mean ± sd",
                "SOPRC bias", "AP bias"]  # fmt: skip


def main(argv=None):
    args = parser(__doc__, "quick", "tag").parse_args(argv)
    torch.set_num_threads(1)  # tiny tensors: a thread pool only adds overhead
    batch_sizes, n_batches = ((256,), 50) if args.quick else ((256, 1024), 500)  # quick: 50 batches
    results = Results(results_name("bench_soprc_estimator", args))
    rows, seconds = timed(simulate, batch_sizes, n_batches)
    table, biases = [], {}
    for distribution, batch_size, rate, target, soprc, ap in rows:
        name, bias = distribution.replace("_", " "), (soprc.mean() - target, ap.mean() - target)
        table.append(
            [name, batch_size, f"{rate:.2f}", f"{target:.4f}",
             f"{soprc.mean():.4f} ± {soprc.std():.3f}", f"{ap.mean():.4f} ± {ap.std():.3f}",
             f"{bias[0]:+.4f}", f"{bias[1]:+.4f}"]
        )  # fmt: skip
        biases.setdefault((name, batch_size), []).append(np.abs(bias))
    print(f"{seconds:.1f} s")
    results.add_table(
        f"Bias of the SOPRC and in-batch AP estimators of 1 - AUPRC ({n_batches} batches per "
        f"row, pi = {PRIOR}, 100,000 scores)",
        BIAS_COLUMNS,
        table,
        notes="SOPRC: soprc_query_loss(..., exact=True) with the dataset prior and the ideal "
        "auxiliary vector (all positive scores); AP: 1 - average precision of the batch; "
        "bias: mean over the batches - 1-AUPRC of the full set.",
        show=True,
    )
    results.add_table(
        "Largest bias over the positive rates pi0 of the batches",
        ["distribution", "batch", "largest |SOPRC bias|", "largest |AP bias|"],
        [[*key, *(f"{value:.4f}" for value in np.max(found, 0))] for key, found in biases.items()],
        notes=f"Over pi0 in {', '.join(f'{rate:.2f}' for rate in BATCH_RATES)}.",
        show=True,
    )
    results.add_figure("seconds", seconds)
    results.save()


if __name__ == "__main__":
    main()
