"""Shared test fixtures."""

import matplotlib
import pytest
from hypothesis import settings
from threadpoolctl import threadpool_limits

from skrank.utils._threads import torch_threads

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Property tests: the same examples on every run and no time limit per example (the machines
# running the suite are shared); "fuzz" draws many new ones (pytest -m fuzz
# --hypothesis-profile=fuzz), keeping the failures it finds in .hypothesis/ to replay them.
settings.register_profile(
    "default-run", max_examples=150, deadline=None, derandomize=True, database=None
)
settings.register_profile("fuzz", max_examples=20_000, deadline=None)
settings.load_profile("default-run")


@pytest.fixture
def one_torch_thread():
    """Run a test on one torch thread: tiny models train faster than on a busy thread pool."""
    with torch_threads(1):
        yield


@pytest.fixture
def documentation_run(one_torch_thread, monkeypatch, tmp_path):
    """Run documentation code (examples, README) as a user would, quickly: Agg backend, small
    example settings (``SKRANK_EXAMPLE_QUICK=1``), a scratch working directory, one torch and
    one BLAS thread; figures are closed afterwards."""
    monkeypatch.setenv("SKRANK_EXAMPLE_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        plt.close("all")
