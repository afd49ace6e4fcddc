"""Storing the constructor arguments of an estimator, as scikit-learn requires, once."""

import inspect


def store_parameters(estimator, arguments):
    """Set each parameter of ``type(estimator).__init__`` from ``arguments``, unchanged.

    Call it as ``store_parameters(self, locals())`` as the only statement of ``__init__``: like
    the usual ``self.name = name`` lines, it stores every argument as given (no validation, no
    conversion), so ``get_params``, ``set_params`` and ``clone`` work as scikit-learn expects.
    """
    for name in inspect.signature(type(estimator).__init__).parameters:
        if name != "self":
            setattr(estimator, name, arguments[name])
