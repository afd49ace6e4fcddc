"""Fixtures shared by the tests that run documentation code (examples, README)."""

import matplotlib
import pytest
import torch
from threadpoolctl import threadpool_limits

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture
def documentation_run(monkeypatch, tmp_path):
    """Run documentation code as a user would, quickly: Agg backend, small example settings,
    a scratch working directory, and one BLAS and torch thread (the code's matrices and
    networks are small, and on a shared 2-core machine more threads made it several times
    slower). Figures are closed and torch's thread count restored afterwards."""
    monkeypatch.setenv("SKRANK_EXAMPLE_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        plt.close("all")
        torch.set_num_threads(torch_threads)
