"""benchmarks/_data.py: the splits the benchmarks read, their shapes and their errors."""

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_data():
    spec = importlib.util.spec_from_file_location("_data", ROOT / "benchmarks" / "_data.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_data", module)
    spec.loader.exec_module(module)
    return module


data = _load_data()


def test_an_mnist_split_is_stratified_and_its_pca_fitted_on_the_first_part():
    X_train, X_test, y_train, y_test = data.mnist_split(1000, 500, seed=1)
    assert X_train.shape == (1000, 784) and X_test.shape == (500, 784)
    assert X_train.dtype == np.float64
    assert np.abs(np.bincount(y_train) / 1000 - np.bincount(y_test) / 500).max() < 0.003
    Z_train, Z_test = data.pca(X_train, X_test, n_components=16)
    assert Z_train.shape == (1000, 16) and np.allclose(Z_train.mean(0), 0, atol=1e-8)
    products = data.pca(X_train, n_components=16, centred=False)[0]
    assert not np.allclose(products.mean(0), 0)
    assert np.array_equal(data.mnist_split(1000, 500, seed=1)[0], X_train)


def test_composite_digits_keep_classes_apart():
    X_train, y_train, X_test, y_test = data.composite_digits(100)
    assert X_train.shape[1] == 2 * 784 and not set(y_train) & set(y_test)
    X_fit, y_fit, X_val, y_val = data.composite_validation(100, image_disjoint=True)
    assert len(set(y_fit)) == 30 and len(set(y_val)) == 20 and not set(y_fit) & set(y_val)
    assert set(y_fit) | set(y_val) == set(y_train)
    with pytest.raises(ValueError, match="defined at \\[100, 1000\\] classes, not 10000"):
        data.composite_scale(10000, large=True)


def test_an_extreme_classification_split_is_sparse_with_indicator_targets():
    X_train, Y_train, X_test, Y_test = data.xmc_split("corel5k")
    assert X_train.format == "csr" and Y_train.shape == (4500, 374) and X_test.shape[0] == 500
    assert X_train.has_sorted_indices
    with pytest.raises(ValueError, match="No extreme-classification data 'corel6k'"):
        data.xmc_split("corel6k")


@pytest.mark.skipif(
    not all(
        Path(os.environ.get(variable) or data.SHARED_DATA / name).exists()
        for name, (variable, *_) in data.TEXT_LABELS.items()
    ),
    reason="the Debian package indexes are absent",
)
def test_the_debian_indexes_count_test_only_labels_as_misses():
    for name in ("debtags", "debian-suggests"):
        X_train, Y_train, X_test, Y_test = data.xmc_split(name, quick=True)
        assert X_train.shape[0] == 4000 and X_test.shape[0] == 1000
        assert X_train.shape[1] == X_test.shape[1] and Y_test.shape[1] >= Y_train.shape[1]
        assert all(part.has_sorted_indices for part in (X_train, Y_train, X_test, Y_test))
