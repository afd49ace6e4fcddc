"""Embedding learners for retrieval: :class:`SOPRCEmbedder` (AUPRC-optimising, SOPRC)."""

from ._soprc_embedder import SOPRCEmbedder

__all__ = ["SOPRCEmbedder"]
