"""The saved state (``skrank.utils._persistence``): the version recorded, the warning when
another version loads it, and the fitted attributes added since a state was saved."""

import pickle
import warnings

import pytest
from sklearn.base import BaseEstimator

import skrank
from skrank.exceptions import InconsistentVersionWarning
from skrank.utils._persistence import VERSION_KEY, VersionedStateMixin


def _with_added(state):
    if "coef_" not in state or "added_" in state:
        return state
    return {**state, "added_": 2 * state["coef_"]}


class _Estimator(VersionedStateMixin, BaseEstimator):
    _saved_state_updates = (_with_added,)

    def __init__(self, scale=1):
        self.scale = scale


def _saved_by(version, **fitted):
    estimator = _Estimator()
    vars(estimator).update(fitted)
    state = estimator.__getstate__()
    assert state[VERSION_KEY] == skrank.__version__
    state[VERSION_KEY] = version
    return state


def _load(state):
    estimator = _Estimator.__new__(_Estimator)
    estimator.__setstate__(state)
    return estimator


def test_a_state_of_this_version_loads_silently_and_keeps_its_attributes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = _load(_saved_by(skrank.__version__, coef_=3, added_=5))
    assert (loaded.coef_, loaded.added_) == (3, 5)
    assert VERSION_KEY not in vars(loaded)
    assert pickle.loads(pickle.dumps(loaded)).added_ == 5


def test_an_older_fitted_state_gets_the_attributes_added_since_and_warns():
    with pytest.warns(InconsistentVersionWarning, match="0.1.0"):
        loaded = _load(_saved_by("0.1.0", coef_=3))
    assert loaded.added_ == 6


def test_an_unfitted_state_is_left_as_saved():
    with pytest.warns(InconsistentVersionWarning):
        loaded = _load(_saved_by("0.1.0"))
    assert not hasattr(loaded, "added_") and loaded.scale == 1
