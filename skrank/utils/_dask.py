"""dask, an optional dependency: its import, and recognising its arrays without importing it."""

import sys

from ._optional import install_hint

_INSTALL = install_hint('"dask[array]" distributed', "dask")


def import_dask(purpose="This"):
    """Import dask, or raise an ImportError naming the extra that installs it."""
    try:
        import dask
        import dask.array  # noqa: F401
    except ImportError as error:
        raise ImportError(
            f"{purpose} needs dask, an optional dependency of skrank: install it with {_INSTALL}."
        ) from error
    return dask


def is_dask_array(X):
    """Whether ``X`` is a ``dask.array.Array`` (False without importing dask when it is absent)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(X, module.Array)
