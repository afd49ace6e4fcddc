"""Names that moved and parameters renamed or removed in skrank 0.2 still work for one release,
with a FutureWarning."""

import importlib
import warnings

import pytest
from sklearn.base import BaseEstimator

import skrank.metrics
import skrank.multilabel
import skrank.sampling
import skrank.similarity
from skrank.exceptions import InconsistentVersionWarning
from skrank.utils._deprecation import (
    DEPRECATED,
    DeprecatedParameter,
    renamed_method,
    resolve_deprecated_parameters,
)
from skrank.utils._persistence import VersionedStateMixin

MOVED = [
    ("skrank.pairs", "PairSample", skrank.sampling),
    ("skrank.pairs", "count_pairs", skrank.sampling),
    ("skrank.pairs", "iter_negative_pairs", skrank.sampling),
    ("skrank.pairs", "sample_negative_pairs", skrank.sampling),
    ("skrank.pairs", "sample_negative_tuples", skrank.sampling),
    ("skrank.pairs", "PairStatistics", skrank.similarity),
    ("skrank.pairs", "similar_pair_scatter", skrank.similarity),
    ("skrank.pairs", "dissimilar_pair_scatter", skrank.similarity),
    ("skrank.pairs", "negative_pair_outer_mean", skrank.similarity),
    ("skrank.losses", "NegativeLabelSampler", skrank.sampling),
    ("skrank.losses", "draw_positive_labels", skrank.sampling),
    ("skrank.losses", "sample_distinct_labels", skrank.sampling),
    ("skrank.nn", "ClassBalancedBatchSampler", skrank.sampling),
    ("skrank.nn", "ShuffledBatchSampler", skrank.sampling),
    ("skrank.nn", "LabelEmbeddingNetwork", skrank.multilabel),
    ("skrank.nn", "top_k_inner_products", skrank.metrics),
    ("skrank.snm", "SNMClassifier", skrank.multilabel),
    ("skrank.mmc", "MMC", skrank.similarity),
]


@pytest.mark.parametrize("old_module, name, new_module", MOVED, ids=lambda v: str(v))
def test_moved_name_warns_and_is_the_new_object(old_module, name, new_module):
    module = importlib.import_module(old_module)
    with pytest.warns(FutureWarning, match=rf"{old_module}\.{name} moved to {new_module.__name__}"):
        old = getattr(module, name)
    assert old is getattr(new_module, name)


def test_unknown_name_of_a_deprecated_module_is_an_attribute_error():
    module = importlib.import_module("skrank.pairs")
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        module.nothing  # noqa: B018


class _Toy(VersionedStateMixin, BaseEstimator):
    """An estimator with a renamed parameter (``width`` -> ``n_components``) and a removed one
    (``scale``, formerly 2.0)."""

    _deprecated_parameters = (
        DeprecatedParameter(
            "width", renamed_to="n_components", fitted=(("width_", "n_components_"),)
        ),
        DeprecatedParameter("scale", default=2.0, instead="multiply the inputs instead"),
    )

    def __init__(self, n_components=3, width=DEPRECATED, scale=DEPRECATED):
        self.n_components = n_components
        self.width = width
        self.scale = scale

    def fit(self, X=None, y=None):
        values = resolve_deprecated_parameters(self)
        self.n_components_ = values["n_components"]
        self.scale_ = values["scale"]
        return self


def test_deprecated_parameters_not_given_use_the_new_name_and_the_former_default():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = _Toy(n_components=5).fit()
    assert (model.n_components_, model.scale_) == (5, 2.0)


def test_renamed_parameter_warns_and_serves_its_new_name():
    with pytest.warns(
        FutureWarning,
        match=r"width=7: the parameter 'width' was renamed 'n_components' in skrank 0\.2; "
        r"use n_components=7",
    ):
        model = _Toy(width=7).fit()
    assert model.n_components_ == 7
    with pytest.raises(ValueError, match=r"width=7 and n_components=4 are the same parameter"):
        with pytest.warns(FutureWarning, match="renamed"):
            _Toy(width=7, n_components=4).fit()


def test_removed_parameter_warns_and_is_used_for_one_release():
    with pytest.warns(
        FutureWarning,
        match=r"scale=3.0: the parameter 'scale' is deprecated .* multiply the inputs instead\. "
        r"'scale' will be removed in skrank 0\.3",
    ):
        model = _Toy(scale=3.0).fit()
    assert model.scale_ == 3.0


def test_saved_state_of_the_old_names_loads_with_the_new_ones():
    old = {"width": 9, "scale": 2.0, "width_": 9, "_skrank_version": "0.1"}  # before the rename
    model = _Toy.__new__(_Toy)
    with pytest.warns(InconsistentVersionWarning):
        model.__setstate__(old)
    assert model.get_params() == {"n_components": 9, "width": DEPRECATED, "scale": DEPRECATED}
    assert model.n_components_ == 9 and not hasattr(model, "width_")
    assert old["width"] == 9  # the given state is left as it is
    kept = _Toy.__new__(_Toy)
    with pytest.warns(InconsistentVersionWarning):
        kept.__setstate__({**old, "scale": 5.0})
    assert kept.scale == 5.0  # a value the user gave stays, and the next fit warns


def test_saved_state_without_a_parameter_added_since_loads_with_its_default():
    model = _Toy.__new__(_Toy)
    with pytest.warns(InconsistentVersionWarning):
        model.__setstate__({"width": DEPRECATED, "scale": DEPRECATED, "_skrank_version": "0.1"})
    assert model.get_params() == {"n_components": 3, "width": DEPRECATED, "scale": DEPRECATED}


def test_renamed_method_warns_and_calls_the_new_one_with_its_keywords():
    class Renamed:
        def area(self, width, height=1.0, *, scale=1.0):
            return width * height * scale

        surface = renamed_method("surface", "area")
        scaled_surface = renamed_method("scaled_surface", "area", scale=2.0)

    with pytest.warns(FutureWarning, match=r"Renamed\.surface was renamed area in skrank 0\.2"):
        assert Renamed().surface(3, height=2) == 6
    with pytest.warns(FutureWarning, match=r"call area\(\.\.\., scale=2\.0\) instead"):
        assert Renamed().scaled_surface(3) == 6
    assert Renamed.surface.__name__ == "surface" and "area" in Renamed.surface.__doc__
