"""Names that moved: served from their new home for one release, with a FutureWarning."""

import importlib
import warnings

MOVED_IN = "0.2"
REMOVED_IN = "0.3"


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
