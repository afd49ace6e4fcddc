"""Models saved by an earlier skrank version load, with a version warning, and predict as they
did when saved (pickle and skops files in ``tests/data/saved_models``)."""

import importlib.util
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

import skrank
from skrank.exceptions import InconsistentVersionWarning

sio = pytest.importorskip("skops.io")

FOLDER = Path(__file__).resolve().parent / "data" / "saved_models"
# write_saved_models.py is the one writer of the files: the test reads its inputs and outputs.
spec = importlib.util.spec_from_file_location(
    "write_saved_models", FOLDER / "write_saved_models.py"
)
writer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(writer)

SAVED = np.load(FOLDER / "outputs.npz")
NAMES = sorted({key.split("/")[0] for key in SAVED.files if "/" in key})


def _load(name, kind):
    data = (FOLDER / f"{name}.{kind}").read_bytes()
    if kind == "pkl":
        return pickle.loads(data)
    return sio.loads(data, trusted=sio.get_untrusted_types(data=data))


def _inputs(name):
    X, y, counts, labels, wide, wide_labels = writer.inputs()
    if name == "SNMClassifier-multilabel-tfidf-centroids":
        return counts
    if name == "SNMClassifier-sparse-input":
        return wide
    return X


def test_every_saved_model_is_checked():
    files = {path.stem for path in FOLDER.glob("*.pkl")} | {p.stem for p in FOLDER.glob("*.skops")}
    assert files == set(NAMES)
    assert len(NAMES) == 7


@pytest.mark.parametrize("kind", ["pkl", "skops"])
@pytest.mark.parametrize("name", NAMES)
def test_saved_model_loads_and_predicts_as_when_saved(name, kind):
    saved_version = str(SAVED["version"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = _load(name, kind)
    version_warnings = [w for w in caught if issubclass(w.category, InconsistentVersionWarning)]
    assert bool(version_warnings) == (saved_version != skrank.__version__)
    X = _inputs(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InconsistentVersionWarning)
        outputs = writer.outputs(model, X)
    for output, values in outputs.items():
        expected = SAVED[f"{name}/{output}"]
        if output == "predict_top_k":
            np.testing.assert_array_equal(values, expected)
        else:
            np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-5)
    # The loaded model is an estimator of today's parameters: it clones and refits.
    params = model.get_params()
    assert type(clone(model)).__name__ == type(model).__name__
    assert set(params) == set(type(model)().get_params())


@pytest.mark.parametrize("kind", ["pkl", "skops"])
def test_a_state_saved_before_solver_was_stored_gets_the_solver_its_fit_used(kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InconsistentVersionWarning)
        model = _load("PointwiseROCSimilarity", kind)
    assert b"solver_" not in (FOLDER / f"PointwiseROCSimilarity.{kind}").read_bytes()
    assert model.solver == "auto" and model.solver_ == "kkt"
