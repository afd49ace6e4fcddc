"""The engine's parameters in a subclass's signature (``**engine_parameters``)."""

import inspect
import re

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from skrank import MMC, SNMClassifier, SOPRCEmbedder
from skrank.losses import SOPRCLoss
from skrank.multilabel import LabelEmbeddingNetwork
from skrank.nn import ENGINE_DEFAULTS, TORCH_PARAMETER_DOCS, BaseTorchEstimator, store_parameters
from skrank.similarity._mmc_solver import fit_mmc
from skrank.utils._docstrings import fill_shared_docs
from skrank.utils._params import (
    ComponentParameters,
    add_keyword_parameters,
    parameter_entries,
    parameters_for,
)


class _Packed(BaseTorchEstimator):
    engine_defaults = {"batch_size": 8, "device": "cpu"}

    def __init__(self, width=3, *, scale=1.0, **engine_parameters):
        store_parameters(self, locals())


class _Child(_Packed):
    """No ``__init__`` of its own: gets one with its own defaults."""

    engine_defaults = {"max_epochs": 2}


class _Shadowing(BaseTorchEstimator):
    def __init__(self, batch_size=5, **engine_parameters):
        store_parameters(self, locals())


_PARAMETER_CHECKS = [
    check_parameters_default_constructible,
    check_no_attributes_set_in_init,
    check_get_params_invariance,
    check_set_params,
]


def _defaults(cls):
    return {
        name: parameter.default
        for name, parameter in inspect.signature(cls).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def test_signature_lists_own_then_engine_parameters_with_class_defaults():
    parameters = inspect.signature(_Packed).parameters
    assert list(parameters) == ["width", "scale", *ENGINE_DEFAULTS]
    assert parameters["width"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in ENGINE_DEFAULTS)
    assert _defaults(_Packed) == {
        "width": 3,
        "scale": 1.0,
        **ENGINE_DEFAULTS,
        "batch_size": 8,
        "device": "cpu",
    }


def test_parameters_are_stored_as_given_or_at_their_defaults():
    estimator = _Packed(4, learning_rate=0.5, callbacks=[])
    expected = {**_defaults(_Packed), "width": 4, "learning_rate": 0.5, "callbacks": []}
    assert estimator.get_params() == expected
    assert vars(estimator) == expected


def test_unknown_keyword_raises_python_type_error():
    with pytest.raises(
        TypeError, match=r"_Packed.__init__\(\) got an unexpected keyword argument 'lr'"
    ):
        _Packed(lr=0.1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'lr'"):
        SOPRCEmbedder(lr=0.1)


def test_clone_set_params_and_repr():
    estimator = _Packed(width=2, max_epochs=7)
    copy = clone(estimator)
    assert copy.get_params() == estimator.get_params()
    copy.set_params(batch_size=32, scale=2.0)
    assert (copy.batch_size, copy.scale, estimator.batch_size) == (32, 2.0, 8)
    assert repr(copy) == "_Packed(batch_size=32, max_epochs=7, scale=2.0, width=2)"
    with pytest.raises(ValueError, match="Invalid parameter 'lr'"):
        copy.set_params(lr=1.0)


@pytest.mark.parametrize("check", _PARAMETER_CHECKS)
def test_scikit_learn_parameter_checks(check):
    check("_Packed", _Packed())


def test_subclass_without_init_gets_its_own_defaults_and_parent_keeps_its():
    assert _defaults(_Child)["max_epochs"] == 2
    assert _defaults(_Child)["batch_size"] == 8  # inherited from _Packed's engine_defaults
    assert _defaults(_Packed)["max_epochs"] == ENGINE_DEFAULTS["max_epochs"]
    assert _Child().max_epochs == 2 and _Packed().max_epochs == ENGINE_DEFAULTS["max_epochs"]
    assert _Child(width=9).width == 9


def test_explicit_parameter_shadows_the_engine_one():
    parameters = inspect.signature(_Shadowing).parameters
    assert list(parameters).count("batch_size") == 1 and parameters["batch_size"].default == 5
    assert _Shadowing().batch_size == 5 and _Shadowing(batch_size=2).batch_size == 2


def test_unknown_engine_default_is_refused_at_class_creation():
    with pytest.raises(
        TypeError, match=r"engine_defaults names \['lr'\], which are not parameters"
    ):

        class _Wrong(BaseTorchEstimator):
            engine_defaults = {"lr": 0.1}

            def __init__(self, **engine_parameters):
                store_parameters(self, locals())


def test_explicit_init_is_left_alone():
    class Explicit(BaseEstimator):
        def __init__(self, alpha=1.0):
            store_parameters(self, locals())

    before = inspect.signature(Explicit)
    add_keyword_parameters(Explicit, {"beta": 2})
    assert inspect.signature(Explicit) == before
    assert Explicit(alpha=3).get_params() == {"alpha": 3}


def test_every_engine_parameter_is_documented_once():
    assert list(TORCH_PARAMETER_DOCS) == list(ENGINE_DEFAULTS)


@pytest.mark.parametrize(
    "estimator, own",
    [
        (
            SOPRCEmbedder,
            {"optimizer": "sgd", "learning_rate": 0.05, "weight_decay": 4e-4, "batch_size": 224},
        ),
        (
            SNMClassifier,
            {"max_epochs": 50, "tol": 0.0, "early_stopping": True, "validation_fraction": 0.1},
        ),
    ],
)
def test_torch_estimators_take_the_engine_defaults_and_document_the_actual_ones(estimator, own):
    defaults = _defaults(estimator)
    assert {name: defaults[name] for name in ENGINE_DEFAULTS} == {**ENGINE_DEFAULTS, **own}
    for name, value in {**ENGINE_DEFAULTS, **own}.items():
        documented = re.search(rf"^    {name} : .*, default=(.*)$", estimator.__doc__, re.MULTILINE)
        assert documented is not None, name
        assert documented.group(1) == (f'"{value}"' if isinstance(value, str) else repr(value))
    assert np.isclose(estimator().learning_rate, defaults["learning_rate"])


def test_parameters_for_forwards_shared_names_and_overrides():
    def loss(class_counts, *, tau1=0.1, beta=0.5, exact=False):
        return class_counts, tau1, beta, exact

    estimator = SOPRCEmbedder(tau1=0.3, beta=0.2)
    assert parameters_for(estimator, loss) == {"tau1": 0.3, "beta": 0.2}
    assert parameters_for(estimator, loss, beta=0.9, exact=True) == {
        "tau1": 0.3,
        "beta": 0.9,
        "exact": True,
    }


@pytest.mark.parametrize(
    "estimator, receiver, expected",
    [
        (
            SOPRCEmbedder(),
            SOPRCLoss,
            {"tau1", "tau2", "beta", "lambda_pos", "lambda_neg", "max_auxiliary_length", "prior"}
            | {"tpr_source"},
        ),
        (
            SNMClassifier(),
            LabelEmbeddingNetwork,
            {"n_components", "hidden_layer_sizes", "activation", "dropout", "input_dropout"}
            | {"scores", "score_scale", "learn_score_scale"},
        ),
        (
            MMC(),
            fit_mmc,
            {"diagonal", "negatives", "n_samples", "positives", "n_neighbors", "init", "max_iter"}
            | {"tol", "scatter_ridge", "min_rank", "random_state", "verbose", "n_threads"},
        ),
    ],
)
def test_estimators_forward_these_parameters_by_name(estimator, receiver, expected):
    # A parameter renamed on one side only would silently stop being forwarded.
    assert set(parameters_for(estimator, receiver)) == expected


# ---------------------------------------------------------------------- component parameters
class _Component:
    """A component.

    Parameters
    ----------
    n_inputs : int
        Not taken.
    width : int, default=4
        The width, over
        two lines.
    mode : {"a", "b"}, default="a"
        The mode.

    Returns
    -------
    nothing : None
        Not a parameter.
    """

    def __init__(self, n_inputs, width=4, mode="a"):
        pass


class _WithComponent(BaseTorchEstimator):
    component_parameters = ComponentParameters(
        _Component,
        ("width", "mode"),
        defaults={"mode": "b"},
        types={"width": "int or 'auto'"},
        notes={"mode": "Chosen on validation data."},
    )
    engine_defaults = {"batch_size": 8}

    def __init__(self, scale=1.0, **parameters):
        store_parameters(self, locals())


def test_parameter_entries_reads_a_numpydoc_parameters_section():
    assert parameter_entries(_Component.__doc__) == {
        "n_inputs": ("int", "Not taken."),
        "width": ("int", "The width, over two lines."),
        "mode": ('{"a", "b"}', "The mode."),
    }
    assert parameter_entries("No sections.") == {}


def test_component_parameters_come_between_own_and_engine_ones_with_the_estimator_defaults():
    parameters = inspect.signature(_WithComponent).parameters
    assert list(parameters) == ["scale", "width", "mode", *ENGINE_DEFAULTS]
    assert parameters["width"].kind is inspect.Parameter.KEYWORD_ONLY
    assert _defaults(_WithComponent) == {
        "scale": 1.0,
        "width": 4,
        "mode": "b",
        **ENGINE_DEFAULTS,
        "batch_size": 8,
    }
    estimator = _WithComponent(width=7)
    assert (estimator.width, estimator.mode, estimator.batch_size) == (7, "b", 8)
    assert repr(clone(estimator).set_params(mode="a")) == "_WithComponent(mode='a', width=7)"
    assert parameters_for(estimator, _Component) == {"width": 7, "mode": "b"}
    assert _WithComponent.component_parameters.docs == {
        "width": ("int or 'auto'", "The width, over two lines."),
        "mode": ('{"a", "b"}', "The mode. Chosen on validation data."),
    }


@pytest.mark.parametrize("check", _PARAMETER_CHECKS)
def test_scikit_learn_parameter_checks_with_component_parameters(check):
    check("_WithComponent", _WithComponent())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"names": ("width", "depth")},
            r"_Component has no documented keyword parameters \['depth'\]",
        ),
        ({"names": ("n_inputs", "width")}, r"keyword parameters \['n_inputs'\]"),
        ({"names": ("width",), "defaults": {"mode": "b"}}, r"defaults names \['mode'\]"),
        ({"names": ("width",), "notes": {"mode": "x"}}, r"notes names \['mode'\]"),
    ],
)
def test_component_parameters_refuse_what_the_component_lacks(kwargs, message):
    with pytest.raises(TypeError, match=message):
        ComponentParameters(_Component, **kwargs)


def test_component_parameters_may_not_name_engine_parameters():
    class _Tuned:
        """Tuned.

        Parameters
        ----------
        batch_size : int, default=3
            Clashes.
        """

        def __init__(self, batch_size=3):
            pass

    with pytest.raises(TypeError, match=r"names engine parameters \['batch_size'\]"):

        class _Clash(BaseTorchEstimator):
            component_parameters = ComponentParameters(_Tuned, ("batch_size",))

            def __init__(self, **parameters):
                store_parameters(self, locals())


_SOPRC_TAKEN = {
    "tau1": 0.1,
    "tau2": 0.001,
    "beta": 0.1,
    "lambda_pos": 10.0,
    "lambda_neg": 2.0,
    "max_auxiliary_length": None,
    "prior": "dataset",
    "tpr_source": "batch",
}
_SNM_TAKEN = {
    "n_components": "auto",
    "hidden_layer_sizes": (),
    "activation": "relu",
    "dropout": 0.0,
    "input_dropout": "auto",
    "scores": "cosine",
    "score_scale": 10.0,
    "learn_score_scale": True,
}


@pytest.mark.parametrize(
    "estimator, component, own, taken",
    [
        (
            SOPRCEmbedder,
            SOPRCLoss,
            ["module", "hidden_layer_sizes", "n_components"]
            + ["samples_per_class", "class_weights", "weight_averaging", "prior_warmup"]
            + ["augmentation", "freeze_batchnorm", "item_transform"],
            _SOPRC_TAKEN,
        ),
        (
            SNMClassifier,
            LabelEmbeddingNetwork,
            ["loss", "surrogate", "margin", "n_negatives", "top_k_negatives", "negative_weights"]
            + ["power_exponent", "weight_scale", "input_normalization", "label_init"]
            + ["label_optimizer", "label_learning_rate", "score_k", "threshold", "search"]
            + ["n_neighbors"]
            + ["neighbor_weight", "centroid_weight"]
            # deprecated, "deprecated" by default (removed in 0.3)
            + ["embedding_dim", "encoder_init", "input_optimizer", "input_learning_rate"],
            _SNM_TAKEN,
        ),
    ],
)
def test_estimators_take_their_component_parameters_and_document_them(
    estimator, component, own, taken
):
    parameters = inspect.signature(estimator).parameters
    assert list(parameters) == [*own, *taken, *ENGINE_DEFAULTS]
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in taken)
    assert {name: parameters[name].default for name in taken} == taken
    assert {name: getattr(estimator(), name) for name in taken} == taken
    documented = parameter_entries(estimator.__doc__)
    from_component = parameter_entries(component.__doc__)
    for name, value in taken.items():
        entry = re.search(rf"^    {name} : .*, default=(.*)$", estimator.__doc__, re.MULTILINE)
        assert entry.group(1) == (f'"{value}"' if isinstance(value, str) else repr(value))
        # The component's description, then the estimator's notes.
        assert documented[name][1].startswith(from_component[name][1])
    # Set, cloned and forwarded by name.
    name, value = next(iter(taken)), 0.25
    changed = clone(estimator(**{name: value}))
    assert (
        getattr(changed, name) == value and repr(changed) == f"{estimator.__name__}({name}={value})"
    )


def test_snm_classifier_refuses_a_ninth_positional_argument():
    # The network's parameters moved behind the classifier's own: a ninth positional argument
    # (the network's size, long ago) must fail loudly instead of landing in
    # input_normalization.
    assert SNMClassifier("bowl", "hinge", 1.0, "auto", "auto", "topk", 1.0, "normalized")
    with pytest.raises(TypeError, match="positional"):
        SNMClassifier("bowl", "hinge", 1.0, "auto", "auto", "topk", 1.0, "normalized", 64)


def test_soprc_embedder_builds_its_loss_from_the_taken_parameters():
    embedder = SOPRCEmbedder(lambda_pos=3.0, beta=0.5, tpr_source="auxiliary", prior="batch")
    embedder.classes_ = np.array(["a", "b"])
    loss = embedder.initialize_criterion(np.array([0, 0, 0, 1, 1]))
    assert (loss.lambda_pos, loss.lambda_neg, loss.beta) == (3.0, 2.0, 0.5)
    assert (loss.tpr_source, loss.prior) == ("auxiliary", "batch")
    assert loss.auxiliary.shape[0] == 2 + 1 + 1  # L_c = n_c - 1, plus the scratch entry


def test_component_parameters_without_docstrings_as_under_python_OO():
    # python -OO strips docstrings: the parameters still come from the component's signature.
    class _Stripped:
        def __init__(self, width=4):
            pass

    class _Estimator(BaseTorchEstimator):
        component_parameters = ComponentParameters(_Stripped, ("width",), defaults={"width": 5})

        def __init__(self, **parameters):
            store_parameters(self, locals())

    assert fill_shared_docs(TORCH_PARAMETER_DOCS)(_Estimator).__doc__ is None
    assert _Estimator().width == 5 and _Estimator(width=2).width == 2
    with pytest.raises(TypeError, match=r"no documented keyword parameters \['depth'\]"):
        ComponentParameters(_Stripped, ("depth",))
