"""Fixtures of the plotting tests: the Agg backend, figures closed after each test, iris."""

import matplotlib
import pytest
from sklearn.datasets import load_iris

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return X[::2], y[::2]
