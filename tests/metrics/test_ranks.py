"""The ranks of positives in whole rows (``skrank.metrics._ranks``), against ``searchsorted``."""

import numpy as np
import torch


def test_positives_scored_at_least_equals_searchsorted():

    from skrank.metrics._ranks import positives_scored_at_least

    rng = np.random.default_rng(4)
    thresholds = np.sort(np.round(rng.normal(size=(30, 12)), 0), axis=1)
    thresholds[:, -3:] = np.inf  # padding
    thresholds[0] = -0.0
    thresholds[0, ::2] = 0.0  # equal scores
    thresholds = torch.from_numpy(thresholds)
    n_positives = torch.full((30,), 9)
    expected = n_positives[:, None] - torch.searchsorted(thresholds, thresholds)
    result = positives_scored_at_least(thresholds, n_positives)
    np.testing.assert_array_equal(result.numpy(), expected.numpy())
