"""scikit-learn's common estimator checks on every public skrank estimator.

Estimators are discovered from ``skrank.__all__``, so a new estimator is checked as soon as it is
exported. ``CHECK_PARAMS`` gives small settings that keep the checks fast;
``EXPECTED_FAILED_CHECKS`` lists, per estimator, each check that is expected to fail and why.
"""

import inspect

import pytest
from helpers import EXPECTED_FAILED_CHECKS
from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import skrank

# Fast settings used only by the common checks.
CHECK_PARAMS = {
    "SNMClassifier": dict(
        n_negatives=1,
        n_components=8,
        hidden_layer_sizes=(16,),
        learning_rate=0.05,
        max_epochs=8,
        batch_size=100,
        device="cpu",
    ),
    "SOPRCEmbedder": dict(
        hidden_layer_sizes=(8,), n_components=4, batch_size=16, max_epochs=1, device="cpu"
    ),
}


def public_estimator_classes():
    """Public estimator classes exported by ``skrank``, sorted by name."""
    return [
        obj
        for name in sorted(skrank.__all__)
        if inspect.isclass(obj := getattr(skrank, name)) and issubclass(obj, BaseEstimator)
    ]


def _checked_instances():
    return [cls(**CHECK_PARAMS.get(cls.__name__, {})) for cls in public_estimator_classes()]


def _expected_failed_checks(estimator):
    return EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {})


@parametrize_with_checks(_checked_instances(), expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_settings_name_only_public_estimators():
    names = {cls.__name__ for cls in public_estimator_classes()}
    assert set(CHECK_PARAMS) <= names
    assert set(EXPECTED_FAILED_CHECKS) <= names


@pytest.mark.parametrize("cls", public_estimator_classes(), ids=lambda cls: cls.__name__)
def test_expected_failures_have_reasons(cls):
    for check, reason in EXPECTED_FAILED_CHECKS.get(cls.__name__, {}).items():
        assert check.startswith("check_") and len(reason) > 20, (check, reason)
