"""Learning with very large label sets: :class:`SNMClassifier` (Stochastic Negative Mining) and
its scoring network :class:`LabelEmbeddingNetwork` (input and label embeddings)."""

from ._label_embedding import LabelEmbeddingNetwork
from ._snm import SNMClassifier

__all__ = ["LabelEmbeddingNetwork", "SNMClassifier"]
