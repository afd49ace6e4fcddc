"""Deprecated module: ``MMC`` moved to :mod:`skrank.similarity` (and stays in :mod:`skrank`) in
skrank 0.2. The old name warns and will be removed in skrank 0.3."""

from .utils._deprecation import moved_attributes

__getattr__ = moved_attributes(__name__, {"MMC": "skrank.similarity"})
