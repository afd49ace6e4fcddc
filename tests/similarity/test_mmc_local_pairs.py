"""MMC with local pair sets (nearest same-class and other-class neighbours): the estimator."""

import itertools

import numpy as np
import pytest
from helpers import EXPECTED_FAILED_CHECKS
from sklearn.datasets import load_iris
from sklearn.utils.estimator_checks import check_estimator

from skrank import MMC
from skrank.similarity._neighbor_pairs import nearest_pairs


def test_mmc_with_local_pairs_keeps_the_local_constraint():
    X, y = load_iris(return_X_y=True)
    mmc = MMC(positives="nearest", n_neighbors=2, scatter_ridge=1e-8, min_rank=None).fit(X, y)
    assert mmc.converged_
    pairs = nearest_pairs(X, y, 2)  # tested against a pair loop in test_mmc_solver.py
    Z = mmc.transform(X)
    local = np.mean(np.sum((Z[pairs.first] - Z[pairs.second]) ** 2, axis=1))
    assert local == pytest.approx(1.0, rel=1e-6)
    # The objective is still the mean distance over all dissimilar pairs.
    first, second = np.array(list(itertools.combinations(range(len(y)), 2))).T
    dissimilar = y[first] != y[second]
    distances = np.linalg.norm(Z[first[dissimilar]] - Z[second[dissimilar]], axis=1)
    assert mmc.objective_[-1] == pytest.approx(np.mean(distances), rel=1e-9)
    assert mmc.objective_and_constraint(X, y)[0] == pytest.approx(np.mean(distances), rel=1e-9)


def test_local_pairs_on_a_dask_array_are_refused():
    da = pytest.importorskip("dask.array")
    X, y = load_iris(return_X_y=True)
    for params in ({"positives": "nearest"}, {"negatives": "nearest"}):
        with pytest.raises(ValueError, match="nearest neighbours among all items"):
            MMC(**params).fit(da.from_array(X, chunks=10), y)


def test_local_pairs_pass_scikit_learn_estimator_checks():
    # Tiny data sets (one item of a class, fewer items than n_neighbors) go through the samplers.
    results = check_estimator(
        MMC(positives="nearest", negatives="nearest", n_neighbors=3), on_fail=None
    )
    # decision_function takes pairs: the checks calling it on 2D items are expected to fail
    # there (tests/test_common.py lists them with the reason).
    failed = [
        (r["check_name"], r["exception"])
        for r in results
        if r["status"] == "failed" and r["check_name"] not in EXPECTED_FAILED_CHECKS["MMC"]
    ]
    assert not failed
