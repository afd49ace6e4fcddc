"""The skrank version recorded in a saved estimator, and the warning when another loads it."""

import warnings

from ..exceptions import InconsistentVersionWarning
from ._deprecation import migrate_saved_state

#: The key of the skrank version in an estimator's saved state.
VERSION_KEY = "_skrank_version"


class VersionedStateMixin:
    """Record the skrank version in the saved state (pickle, joblib, skops) and warn with an
    :class:`~skrank.exceptions.InconsistentVersionWarning` when another version loads it, as
    scikit-learn does for its own estimators. A state saved before a parameter was renamed or
    removed loads with today's parameters (see ``_deprecation.migrate_saved_state``), and one
    saved before a fitted attribute was added gets it from ``_saved_state_updates``."""

    #: Functions ``update(state) -> state`` applied in order to every loaded state: each gives a
    #: fitted state saved by an earlier version the fitted attributes added since, as its fit
    #: would have set them (and leaves other states as they are).
    _saved_state_updates = ()

    def __getstate__(self):
        from .. import __version__  # noqa: PLC0415 (skrank imports this module)

        return {**super().__getstate__(), VERSION_KEY: __version__}

    def __setstate__(self, state):
        from .. import __version__  # noqa: PLC0415 (skrank imports this module)

        state = migrate_saved_state(type(self), state)
        for update in self._saved_state_updates:
            state = update(state)
        saved_version = state.pop(VERSION_KEY, "pre-0.2")
        if saved_version != __version__:
            warnings.warn(
                InconsistentVersionWarning(
                    estimator_name=type(self).__name__,
                    current_version=__version__,
                    original_version=saved_version,
                ),
                stacklevel=2,
            )
        super().__setstate__(state)
