"""Deprecations: names that moved to other modules, methods renamed, and constructor parameters
renamed or removed, each served for one release with a ``FutureWarning``."""

import importlib
import inspect
import warnings
from dataclasses import dataclass

from .._compat import Hidden, StrOptions

MOVED_IN = "0.2"
REMOVED_IN = "0.3"

#: The default of a deprecated constructor parameter: "not given".
DEPRECATED = "deprecated"


def moved_attributes(module_name, new_homes):
    """A module-level ``__getattr__`` serving names that moved to other modules.

    Parameters
    ----------
    module_name : str
        The old module (``__name__`` of the caller).
    new_homes : dict of str to str
        Each moved name and the public module that now holds it.

    Returns
    -------
    __getattr__ : callable
        To assign to the old module's ``__getattr__`` (PEP 562): ``old.name`` warns with a
        ``FutureWarning`` naming the new import and returns the object from its new home.
    """

    def __getattr__(name):
        if name not in new_homes:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        new_home = new_homes[name]
        warnings.warn(
            f"{module_name}.{name} moved to {new_home}.{name} in skrank {MOVED_IN}; import it "
            f"from there ('from {new_home} import {name}'). The old name will be removed in "
            f"skrank {REMOVED_IN}.",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_home), name)

    return __getattr__


def renamed_method(old_name, new_name, **keywords):
    """A method served under its former name for one release.

    Parameters
    ----------
    old_name : str
        The former name (the class attribute this is assigned to).
    new_name : str
        The method's name now.
    **keywords
        Keyword arguments that the new method needs to do what the old one did.

    Returns
    -------
    method : function
        To assign to the class as ``old_name``: calling it warns with a ``FutureWarning``
        naming the new method, and calls it with the same arguments and ``keywords``.
    """
    call = new_name
    if keywords:
        call += f"(..., {', '.join(f'{key}={value!r}' for key, value in keywords.items())})"

    def method(self, *args, **kwargs):
        warnings.warn(
            f"{type(self).__name__}.{old_name} was renamed {new_name} in skrank {MOVED_IN}; "
            f"call {call} instead. The old name will be removed in skrank {REMOVED_IN}.",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(self, new_name)(*args, **kwargs, **keywords)

    method.__name__ = method.__qualname__ = old_name
    method.__doc__ = f"Deprecated since skrank {MOVED_IN}: use :meth:`{new_name}`."
    return method


@dataclass(frozen=True)
class DeprecatedParameter:
    """A constructor parameter on its way out, listed in the estimator class's
    ``_deprecated_parameters``; its default in ``__init__`` is ``"deprecated"``.

    Parameters
    ----------
    name : str
        The parameter.
    renamed_to : str or None, default=None
        Its new name (same meaning), or None for a removed parameter.
    default : object, default=None
        A removed parameter's former default: the value its fits use when it is not given.
    instead : str, default=""
        What to do instead, for the warning (a removed parameter).
    fitted : tuple of (str, str), default=()
        Fitted attributes renamed with it, ``(old, new)``: a saved estimator's are renamed
        when it loads.
    """

    name: str
    renamed_to: str | None = None
    default: object = None
    instead: str = ""
    fitted: tuple = ()

    def message(self, value):
        if self.renamed_to is not None:
            what = f"was renamed {self.renamed_to!r} in skrank {MOVED_IN}; use {self.renamed_to}="
            what += f"{value!r}"
        else:
            what = f"is deprecated in skrank {MOVED_IN}; {self.instead}"
        return (
            f"{self.name}={value!r}: the parameter {self.name!r} {what}. {self.name!r} will be "
            f"removed in skrank {REMOVED_IN}."
        )


def deprecated_constraint():
    """The parameter-constraint entry that admits a deprecated parameter's default."""
    return Hidden(StrOptions({DEPRECATED}))


def resolve_deprecated_parameters(estimator):
    """The values a fit uses for the estimator's deprecated parameters and their successors.

    For each :class:`DeprecatedParameter` of ``type(estimator)._deprecated_parameters`` given
    a value (not ``"deprecated"``), warns with a ``FutureWarning``. A renamed parameter's value
    is used for its new name; giving both raises a ``ValueError``. A removed parameter's value
    is used as given, else its former default.

    Parameters
    ----------
    estimator : BaseEstimator

    Returns
    -------
    values : dict of str to object
        The value of each removed parameter (by its name) and of each renamed one's
        successor (by the new name).
    """
    values = {}
    defaults = type(estimator)().get_params(deep=False)
    for parameter in getattr(type(estimator), "_deprecated_parameters", ()):
        value = getattr(estimator, parameter.name)
        given = not (isinstance(value, str) and value == DEPRECATED)
        if given:
            warnings.warn(parameter.message(value), FutureWarning, stacklevel=3)
        if parameter.renamed_to is None:
            values[parameter.name] = value if given else parameter.default
            continue
        new_value = getattr(estimator, parameter.renamed_to)
        if given and not _same(new_value, defaults[parameter.renamed_to]):
            raise ValueError(
                f"{parameter.name}={value!r} and {parameter.renamed_to}={new_value!r} are the "
                f"same parameter ({parameter.name!r} was renamed {parameter.renamed_to!r}); "
                f"give {parameter.renamed_to} only."
            )
        values[parameter.renamed_to] = value if given else new_value
    return values


def migrate_saved_state(cls, state):
    """The saved state of a ``cls`` estimator with its deprecated parameters updated.

    A state saved before a parameter was renamed holds the old name: its value moves to the
    new name (and the fitted attributes renamed with it move alike), the old name is set to
    ``"deprecated"``. A removed parameter saved at its former default becomes
    ``"deprecated"``; any other saved value stays, and the next fit warns. A parameter added
    since the state was saved takes its default (whose behaviour is the former one).

    Parameters
    ----------
    cls : type
        The estimator class.
    state : dict
        The saved ``__dict__``.

    Returns
    -------
    state : dict
        A new dict (``state`` is left as it is).
    """
    state = dict(state)
    for parameter in getattr(cls, "_deprecated_parameters", ()):
        if parameter.name not in state:
            continue
        value = state[parameter.name]
        if isinstance(value, str) and value == DEPRECATED:
            continue
        if parameter.renamed_to is not None and parameter.renamed_to not in state:
            state[parameter.renamed_to] = value
            state[parameter.name] = DEPRECATED
            for old, new in parameter.fitted:
                if old in state and new not in state:
                    state[new] = state.pop(old)
        elif parameter.renamed_to is None and _same(value, parameter.default):
            state[parameter.name] = DEPRECATED
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if parameter.default is not parameter.empty and name not in state:
            state[name] = parameter.default
    return state


def _same(a, b):
    try:
        return bool(a == b) and type(a) is type(b)
    except (TypeError, ValueError):  # arrays compare element-wise
        return a is b
