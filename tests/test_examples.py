"""Every gallery example runs (small settings: ``SKRANK_EXAMPLE_QUICK=1``, Agg backend)."""

import runpy
from pathlib import Path

import matplotlib
import pytest
import torch
from threadpoolctl import threadpool_limits

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_runs(path, monkeypatch, tmp_path):
    monkeypatch.setenv("SKRANK_EXAMPLE_QUICK", "1")
    monkeypatch.chdir(tmp_path)  # anything an example writes lands here
    torch_threads = torch.get_num_threads()
    try:
        # One BLAS thread: the examples' matrices are small, and on a shared 2-core machine
        # multi-threaded BLAS made them several times slower.
        with threadpool_limits(limits=1, user_api="blas"):
            runpy.run_path(str(path), run_name="__main__")
        assert plt.get_fignums(), f"{path.name} draws no figure"
    finally:
        plt.close("all")
        torch.set_num_threads(torch_threads)  # an example may change it
