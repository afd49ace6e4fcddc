"""Every public estimator fits, with its defaults, every shipped data set it applies to, without a
single warning (warnings are errors here).

Only ``max_epochs`` of the torch estimators is lowered (and rows are subsampled where the data set
is large): every other parameter keeps its default, which is the point of the test. With
early stopping on, the lowered ``max_epochs`` stops training before early stopping can, so the
``ConvergenceWarning`` that says so (and only it) is ignored for those estimators. Data sets:

* ``load_mnist`` (dense, 10 classes): every estimator. MMC is preceded by a PCA to 50
  components, as its singular-scatter warning advises for raw pixels (784 features, most of them
  constant within classes: MMC is unbounded there), and as the README and the gallery do;
* ``load_bibtex`` and ``load_corel5k`` (sparse inputs, sparse multilabel indicators): the
  estimators that take multilabel targets (SNMClassifier);
* ``make_sphere_classes`` (the toy data of the pointwise-ROC paper): every estimator;
* ``make_large_output_classification`` (SNM's data, about one example per label), multiclass and
  multilabel: SNMClassifier; the class-pair learners need several items per class;
* ``make_extreme_classification`` (sparse TF-IDF rows, 2,000 power-law labels, a few rows a
  label): SNMClassifier;
* ``make_score_simulation`` generates scores, not inputs: it applies to the metrics only.
"""

import functools
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

import skrank
from skrank import MMC, PointwiseROCSimilarity, SNMClassifier, SOPRCEmbedder
from skrank.datasets import (
    load_bibtex,
    load_corel5k,
    load_mnist,
    make_extreme_classification,
    make_large_output_classification,
    make_sphere_classes,
)

N_ROWS = 600  # rows kept of MNIST; the other data sets are fitted whole


@functools.cache
def _mnist():
    X, y = load_mnist(return_X_y=True)
    rows = np.random.RandomState(0).permutation(len(y))[:N_ROWS]
    return X[rows], y[rows]


DATA = {
    "mnist": _mnist,
    "bibtex": lambda: load_bibtex(subset="train", return_X_y=True),
    "corel5k": lambda: load_corel5k(subset="train", return_X_y=True),
    "sphere_classes": lambda: make_sphere_classes(random_state=0),
    "large_output": lambda: make_large_output_classification(random_state=0),
    "large_output_multilabel": lambda: make_large_output_classification(
        multilabel=True, n_labels_per_sample=3, random_state=0
    ),
    "extreme": lambda: make_extreme_classification(
        n_samples=3000, n_features=5000, n_labels=2000, random_state=0
    ),
}

# Defaults everywhere, except fewer epochs for the torch estimators.
ESTIMATORS = {
    "SOPRCEmbedder": SOPRCEmbedder(max_epochs=1, random_state=0),
    "SNMClassifier": SNMClassifier(max_epochs=1, random_state=0),
    "PointwiseROCSimilarity": PointwiseROCSimilarity(random_state=0),
    "MMC": MMC(random_state=0),
}

APPLIES_TO = {
    "SOPRCEmbedder": ["mnist", "sphere_classes"],
    "SNMClassifier": list(DATA),
    "PointwiseROCSimilarity": ["mnist", "sphere_classes"],
    "MMC": ["mnist", "sphere_classes"],
}

CASES = [(estimator, data) for estimator, names in APPLIES_TO.items() for data in names]


def test_every_public_estimator_is_covered():
    public = {name for name in skrank.__all__ if isinstance(getattr(skrank, name), type)}
    assert public == set(ESTIMATORS) == set(APPLIES_TO)


@pytest.mark.parametrize("estimator_name, data_name", CASES, ids=[f"{e}-{d}" for e, d in CASES])
def test_defaults_fit_shipped_data_without_warnings(estimator_name, data_name, one_torch_thread):
    X, y = DATA[data_name]()
    estimator = clone(ESTIMATORS[estimator_name])
    model = (
        make_pipeline(PCA(50), estimator)
        if (estimator_name, data_name)
        == (
            "MMC",
            "mnist",
        )
        else estimator
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if getattr(estimator, "early_stopping", False):
            # max_epochs was lowered below what early stopping needs: only that may warn.
            warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    # The fit did something: a finite score on the training data.
    assert np.isfinite(model.score(X, y))
