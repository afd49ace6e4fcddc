"""Every gallery example runs (small settings: ``SKRANK_EXAMPLE_QUICK=1``, Agg backend)."""

import runpy
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_runs(path, documentation_run):
    runpy.run_path(str(path), run_name="__main__")
    assert plt.get_fignums(), f"{path.name} draws no figure"
