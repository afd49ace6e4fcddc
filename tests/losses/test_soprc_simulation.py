"""The SOPRC paper's simulation (Appendix B.2), small: the estimator's bias at batch size 1024.

With exact indicators, the dataset prior and the ideal auxiliary vector (all positive scores),
the batch mean of the SOPRC estimator stays within 0.01 of 1 - AUPRC of the full score set for
every batch positive rate, while the in-batch AP estimator is biased whenever the batch rate
differs from the prior: upwards when the batch holds fewer positives (the paper's Remark 2
states the opposite direction). The full table is ``benchmarks/bench_soprc_estimator.py``.
"""

import numpy as np
import pytest
import torch

from skrank.datasets import make_score_simulation
from skrank.losses import soprc_query_loss

PRIOR, BATCH_SIZE, N_BATCHES = 0.1, 1024, 300


def one_minus_ap(positive_mask_by_rank):
    """1 - AP of rankings given as boolean rows (True = positive), best score first."""
    hits = np.cumsum(positive_mask_by_rank, axis=1)
    precision = hits / np.arange(1, positive_mask_by_rank.shape[1] + 1)
    return 1 - (precision * positive_mask_by_rank).sum(axis=1) / positive_mask_by_rank.sum(axis=1)


@pytest.mark.parametrize("distribution", ["binormal", "bibeta", "offset_uniform"])
def test_soprc_estimator_is_unbiased_whatever_the_batch_rate(distribution, one_torch_thread):
    y_score, y_true = make_score_simulation(distribution, positive_rate=PRIOR, random_state=0)
    order = np.argsort(-y_score, kind="stable")
    target = one_minus_ap(y_true[order][None, :] == 1)[0]
    positives, negatives = y_score[y_true == 1], y_score[y_true == 0]
    auxiliary = torch.as_tensor(positives)
    rng = np.random.default_rng(0)
    for rate in (0.01, 0.02, 0.03, 0.1, 0.2):
        n_positives = round(rate * BATCH_SIZE)
        soprc, batches = [], []
        for _ in range(N_BATCHES):
            pos = positives[rng.choice(positives.shape[0], n_positives, replace=False)]
            neg = negatives[rng.choice(negatives.shape[0], BATCH_SIZE - n_positives, replace=False)]
            estimate = soprc_query_loss(
                torch.as_tensor(pos), torch.as_tensor(neg), auxiliary, prior=PRIOR, exact=True
            )
            soprc.append(float(estimate))
            scores = np.r_[pos, neg]
            batches.append(np.argsort(-scores, kind="stable") < n_positives)
        soprc_bias = np.mean(soprc) - target
        ap_bias = np.mean(one_minus_ap(np.array(batches))) - target
        assert abs(soprc_bias) < 0.01, (rate, soprc_bias)
        if rate < PRIOR:
            assert ap_bias > 3 * abs(soprc_bias) and ap_bias > 0.05, (rate, ap_bias)
        elif rate > PRIOR:
            assert ap_bias < -3 * abs(soprc_bias) and ap_bias < -0.05, (rate, ap_bias)
