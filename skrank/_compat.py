"""The only place where skrank imports private scikit-learn helpers.

scikit-learn's parameter-validation tools (``Interval``, ``StrOptions``, ...) and the
``_fit_context`` decorator are what its own estimators and imbalanced-learn use; they have no public
home yet. Importing them here isolates the dependency on their location.
"""

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Hidden,
    Interval,
    RealNotInt,
    StrOptions,
    validate_params,
)

__all__ = [
    "HasMethods",
    "Hidden",
    "Interval",
    "RealNotInt",
    "StrOptions",
    "_fit_context",
    "validate_params",
]
