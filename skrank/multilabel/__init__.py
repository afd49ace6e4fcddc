"""Learning with very large label sets: :class:`SNMClassifier` (Stochastic Negative Mining), its
scoring network :class:`LabelEmbeddingNetwork` (input and label embeddings) and
:class:`~skrank.nn.RowSparseOptimizer` (also importable from here), which updates only the rows
of the label table a step read."""

from ..nn import RowSparseOptimizer
from ._label_embedding import LabelEmbeddingNetwork
from ._snm import SNMClassifier

__all__ = ["LabelEmbeddingNetwork", "RowSparseOptimizer", "SNMClassifier"]
