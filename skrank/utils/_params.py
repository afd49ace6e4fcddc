"""Storing the constructor arguments of an estimator, as scikit-learn requires, once."""

import functools
import inspect


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
