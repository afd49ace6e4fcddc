"""Every gallery example runs (small settings: ``SKRANK_EXAMPLE_QUICK=1``, Agg backend).

The examples also run in CI's documentation build, at their full settings, which put their
figures in the gallery pages (.ci/check_docs_browser.py checks that each page shows them and
that no output block holds a warning or a file path). Both runs are kept: they run different
settings, and together they cost little (on a 2-core machine, one thread: about 40 s here in
quick mode, about 2 minutes in full in the docs build).
"""

import runpy
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_runs(path, documentation_run):
    """The example runs, draws, and warns of nothing (a warning would print in its gallery
    page: the example would be using an estimator wrongly, or showing a default to change)."""
    runpy.run_path(str(path), run_name="__main__")
    assert plt.get_fignums(), f"{path.name} draws no figure"


@pytest.mark.parametrize(
    "estimator", ["SOPRCEmbedder", "SNMClassifier", "PointwiseROCSimilarity", "MMC"]
)
def test_gallery_covers_estimator(estimator):
    """Each estimator has an example, and one inside a Pipeline tuned by GridSearchCV."""
    sources = [path.read_text() for path in EXAMPLES]
    using = [source for source in sources if f"{estimator}(" in source]
    assert using, f"no example uses {estimator}"
    assert any(
        "GridSearchCV(" in source
        and ("make_pipeline(" in source or "Pipeline(" in source)
        and "get_scorer(" in source
        for source in using
    ), f"no example tunes {estimator} in a Pipeline with GridSearchCV and skrank scorers"
