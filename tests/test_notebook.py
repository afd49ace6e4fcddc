"""skrank in a Jupyter notebook as users run it: a real kernel (ipykernel) executes the cells
(nbclient), and the test reads what each cell displayed.

The kernel hides ipywidgets whether or not the environment has it, so that importing skrank is
checked where tqdm cannot draw widgets and used to warn on import."""

import json
import os
import sys
from pathlib import Path

import pytest

import skrank

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")
pytest.importorskip("pandas")
pytest.importorskip("skops")

CELLS = {
    "no widgets": 'import sys\nsys.modules["ipywidgets"] = None  # as if it were not installed',
    "import": "import skrank",
    "where": 'print(skrank.__file__, "tqdm.auto" in sys.modules)',
    "fit": """\
import numpy as np
from sklearn.datasets import load_digits
from skrank import SOPRCEmbedder

X, y = load_digits(return_X_y=True)
X = (X / 16).astype(np.float32)
embedder = SOPRCEmbedder(max_epochs=2, batch_size=64, device="cpu", random_state=0, verbose=1)
embedder.fit(X[:400], y[:400])""",
    "plot": """\
%matplotlib inline
from skrank.plotting import TrainingHistoryDisplay

history = TrainingHistoryDisplay.from_estimator(embedder)""",
    "pandas": """\
embedder.set_output(transform="pandas")
frame = embedder.transform(X[:5])
print(type(frame).__name__, frame.shape, list(frame.columns[:2]))""",
    "grid search": """\
from sklearn.model_selection import GridSearchCV
from skrank import PointwiseROCSimilarity

grid = {"alpha": ["auto", 0.5], "identity_weight": [0.0, 3.0]}
search = GridSearchCV(PointwiseROCSimilarity(random_state=0), grid, cv=3, n_jobs=2)
search.fit(X[:300], y[:300])
one_process = GridSearchCV(PointwiseROCSimilarity(random_state=0), grid, cv=3).fit(X[:300], y[:300])
print(len(search.cv_results_["params"]), search.best_params_ == one_process.best_params_,
      np.array_equal(search.cv_results_["mean_test_score"],
                     one_process.cv_results_["mean_test_score"]))""",
    "save": """\
import pickle
import skops.io as sio

sio.dump(embedder, "embedder.skops")
trusted = sio.get_untrusted_types(file="embedder.skops")
loaded = sio.load("embedder.skops", trusted=trusted)
restored = pickle.loads(pickle.dumps(search.best_estimator_))
print(all(name.startswith("skrank.") for name in trusted),
      type(loaded.transform(X[:50])).__name__,
      np.array_equal(loaded.transform(X[:50]), embedder.transform(X[:50])),
      np.array_equal(restored.pair_score(X[:10], X[10:20]),
                     search.best_estimator_.pair_score(X[:10], X[10:20])))""",
    "close the workers": """\
from joblib.externals.loky import get_reusable_executor

get_reusable_executor().shutdown(wait=True)""",
}


def _text(outputs, name):
    return "".join(o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == name)


def _data(outputs, mime):
    return [o["data"][mime] for o in outputs if mime in o.get("data", {})]


def _execute(folder):
    """The notebook of ``CELLS``, executed in a kernel of this Python and this skrank."""
    spec = folder / "kernels" / "skrank-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "skrank test", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    source_root = str(Path(skrank.__file__).resolve().parents[1])
    paths = [source_root, *filter(None, [os.environ.get("PYTHONPATH")])]
    environment = {"JUPYTER_PATH": str(folder), "PYTHONPATH": os.pathsep.join(paths)}
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS.values()]
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)  # read by the kernel spec manager and the kernel
    try:
        client = nbclient.NotebookClient(
            notebook,
            kernel_name="skrank-test",
            timeout=300,
            resources={"metadata": {"path": str(folder)}},
        )
        client.execute()  # a cell that raises fails the test with its traceback
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value
    return {name: cell.outputs for name, cell in zip(CELLS, notebook.cells, strict=True)}


@pytest.mark.slow  # a kernel and two worker processes each import torch and scikit-learn
def test_a_notebook_shows_what_a_user_expects(tmp_path):
    """One kernel runs every cell (one test, so that parallel test workers start one kernel)."""
    executed = _execute(tmp_path)
    # import skrank prints nothing, and imports no progress-bar display
    assert executed["no widgets"] == []
    assert executed["import"] == []
    where = _text(executed["where"], "stdout").split()
    assert where == [str(Path(skrank.__file__).resolve()), "False"]
    # a verbose fit draws its bar (text, without ipywidgets); the estimator shows its HTML
    outputs = executed["fit"]
    bar = _text(outputs, "stderr")
    assert "SOPRCEmbedder" in bar and "2/2" in bar and "loss=" in bar, bar
    (html,) = _data(outputs, "text/html")
    assert "SOPRCEmbedder" in html and "max_epochs" in html
    (text,) = _data(outputs, "text/plain")
    assert text.startswith("SOPRCEmbedder(")
    # a display draws its figure inline
    assert len(_data(executed["plot"], "image/png")) == 1
    assert _text(executed["plot"], "stderr") == ""
    # set_output: the transform is a data frame with the estimator's column names
    line = _text(executed["pandas"], "stdout").strip()
    assert line == "DataFrame (5, 64) ['soprcembedder0', 'soprcembedder1']"
    # a grid search on two processes equals one on one process
    assert _text(executed["grid search"], "stdout").split() == ["4", "True", "True"]
    # skops trusts skrank's classes only; saved models predict as before saving
    assert _text(executed["save"], "stdout").split() == ["True", "DataFrame", "True", "True"]
    assert executed["close the workers"] == []
