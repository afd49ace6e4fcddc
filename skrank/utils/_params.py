"""Storing the constructor arguments of an estimator, as scikit-learn requires, once."""

import functools
import inspect
import re


def store_parameters(estimator, arguments):
    """Set each parameter of ``type(estimator).__init__`` from ``arguments``, unchanged.

    Call it as ``store_parameters(self, locals())`` as the only statement of ``__init__``: like
    the usual ``self.name = name`` lines, it stores every argument as given (no validation, no
    conversion), so ``get_params``, ``set_params`` and ``clone`` work as scikit-learn expects.
    An ``__init__`` that ends with ``**name`` in a class given keyword parameters by
    :func:`add_keyword_parameters` stores those from ``name``, at their defaults when not
    given; any other keyword raises the ``TypeError`` Python raises for an unknown argument.
    """
    init = type(estimator).__init__
    packed = getattr(init, "_packed_keywords", None)
    extra = dict(arguments[packed]) if packed is not None else {}
    for name, parameter in inspect.signature(init).parameters.items():
        if name == "self":
            continue
        if name in arguments and name != packed:
            value = arguments[name]
        else:
            value = extra.pop(name, parameter.default)
        setattr(estimator, name, value)
    if extra:
        raise TypeError(
            f"{type(estimator).__name__}.__init__() got an unexpected keyword argument "
            f"{next(iter(extra))!r}"
        )


def add_keyword_parameters(cls, defaults):
    """Give ``cls.__init__``'s ``**name`` the keyword-only parameters ``defaults``.

    ``inspect.signature(cls.__init__)`` (which scikit-learn's ``get_params``, ``clone`` and
    ``repr``, ``help`` and the docs read) then lists the ``__init__``'s own parameters followed
    by ``defaults``' names with their values; :func:`store_parameters` stores them. A class
    without its own ``__init__`` gets one that calls its parent's, so that each class has its
    own defaults. Does nothing when the ``__init__`` lists every parameter itself (no ``**``).

    Parameters
    ----------
    cls : type
        The estimator class, as ``__init_subclass__`` sees it.
    defaults : dict
        Parameter names and their defaults for ``cls``, in signature order.
    """
    init = cls.__init__
    explicit = getattr(init, "_explicit_signature", None) or inspect.signature(init)
    packed = [p.name for p in explicit.parameters.values() if p.kind is p.VAR_KEYWORD]
    if not packed:
        return
    if "__init__" not in vars(cls):
        parent_init = init

        @functools.wraps(parent_init)
        def __init__(self, *args, **kwargs):
            parent_init(self, *args, **kwargs)

        cls.__init__ = init = __init__
    own = [p for p in explicit.parameters.values() if p.kind is not p.VAR_KEYWORD]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
        for name, default in defaults.items()
        if name not in explicit.parameters
    ]
    init._explicit_signature = explicit
    init._packed_keywords = packed[0]
    init.__signature__ = explicit.replace(parameters=own + added)


def parameters_for(estimator, function, **overrides):
    """The estimator's parameters that ``function`` takes, by name, as keyword arguments.

    Forwards ``estimator``'s parameters (``get_params(deep=False)``) to a loss, network or
    solver whose keyword parameters share their names and meanings, so that neither side
    lists them again; ``overrides`` replace or add values (e.g. a resolved ``"auto"``).

    Parameters
    ----------
    estimator : BaseEstimator
        The estimator whose parameters are forwarded.
    function : callable
        The function or class receiving them; its signature is read.
    **overrides
        Keyword arguments passed as given instead.

    Returns
    -------
    kwargs : dict
    """
    accepted = inspect.signature(function).parameters
    parameters = estimator.get_params(deep=False)
    kwargs = {name: parameters[name] for name in accepted if name in parameters}
    kwargs.update(overrides)
    return kwargs


class ComponentParameters:
    """Keyword parameters an estimator takes from a component it builds (a loss, a network).

    Set as the class attribute ``component_parameters`` of a
    :class:`~skrank.nn.BaseTorchEstimator` subclass whose ``__init__`` ends with ``**name``:
    the engine adds ``names`` to the estimator's signature (keyword-only, after its own
    parameters and before the engine's), with the component's defaults updated by
    ``defaults``, so that scikit-learn's ``get_params``, ``set_params``, ``clone`` and
    ``repr``, ``help``, the docs and scikit-learn's checks see ordinary keyword parameters.
    A marker line ``{component_parameters}`` in the estimator's docstring (filled by the
    decorator that fills ``{shared_parameters}``) becomes their entries, read from the
    component's docstring, with the estimator's defaults and types and its ``notes`` appended.
    The estimator passes them on by name when it builds the component.

    Parameters
    ----------
    component : callable
        The loss or network class whose keyword parameters the estimator takes; each one
        taken needs a default in its signature and an entry in its numpydoc docstring.
    names : tuple of str
        The parameters taken, in signature order.
    defaults : dict or None, default=None
        The estimator's defaults where they differ from the component's.
    types : dict or None, default=None
        The estimator's type entries where they differ (e.g. an ``"auto"`` it resolves).
    notes : dict or None, default=None
        Text appended to a parameter's description in the estimator's docstring.

    Attributes
    ----------
    defaults : dict
        Every parameter taken, with the estimator's default, in signature order.
    docs : dict of str to (str, str)
        Every parameter's type and description as the estimator's docstring renders them.

    Examples
    --------
    >>> from skrank.losses import SOPRCLoss
    >>> from skrank.nn import BaseTorchEstimator, ComponentParameters, store_parameters
    >>> class Embedder(BaseTorchEstimator):
    ...     component_parameters = ComponentParameters(
    ...         SOPRCLoss, ("tau1", "lambda_pos"), defaults={"lambda_pos": 10.0}
    ...     )
    ...
    ...     def __init__(self, n_components=8, **parameters):
    ...         store_parameters(self, locals())
    >>> Embedder(tau1=0.2)
    Embedder(tau1=0.2)
    >>> Embedder().lambda_pos
    10.0
    >>> Embedder.component_parameters.docs["tau1"][0]
    'float'
    """

    def __init__(self, component, names, defaults=None, types=None, notes=None):
        signature = inspect.signature(component).parameters
        documented = parameter_entries(component.__doc__)
        for given, what in ((defaults, "defaults"), (types, "types"), (notes, "notes")):
            unknown = sorted(set(given or ()) - set(names))
            if unknown:
                raise TypeError(f"ComponentParameters {what} names {unknown}, not in {names}.")
        missing = [
            name
            for name in names
            if (name not in documented and component.__doc__ is not None)  # None under -OO
            or getattr(signature.get(name), "default", inspect.Parameter.empty)
            is inspect.Parameter.empty
        ]
        if missing:
            raise TypeError(f"{component.__name__} has no documented keyword parameters {missing}.")
        self.component = component
        self.defaults = {name: signature[name].default for name in names} | dict(defaults or {})
        self.docs = {}
        for name in names:
            kind, description = documented.get(name, ("", ""))
            note = (notes or {}).get(name)
            self.docs[name] = (
                (types or {}).get(name, kind),
                f"{description} {note}" if note else description,
            )


_ENTRY = re.compile(r"^(\w+) : (.*?)(?:, default=.*)?$")


def parameter_entries(docstring):
    """The entries of a numpydoc ``Parameters`` section: ``{name: (type, description)}``.

    Descriptions are joined into one line (they are re-wrapped when rendered).
    """
    lines = inspect.cleandoc(docstring or "").splitlines()
    if "Parameters" not in lines:
        return {}
    entries, name = {}, None
    section = lines[lines.index("Parameters") + 2 :]
    for line, following in zip(section, section[1:] + [""], strict=True):
        if following.startswith("---"):
            break
        entry = _ENTRY.match(line)
        if entry is not None:
            name = entry.group(1)
            entries[name] = (entry.group(2), [])
        elif line.strip() and name is not None:
            entries[name][1].append(line.strip())
    return {name: (kind, " ".join(words)) for name, (kind, words) in entries.items()}
