"""Learning with very large label sets: :class:`SNMClassifier` (Stochastic Negative Mining), its
scoring network :class:`LabelEmbeddingNetwork` (input and label embeddings) and
:class:`RowSparseOptimizer`, which updates only the rows of the label table a step read."""

from ._label_embedding import LabelEmbeddingNetwork, RowSparseOptimizer
from ._snm import SNMClassifier

__all__ = ["LabelEmbeddingNetwork", "RowSparseOptimizer", "SNMClassifier"]
