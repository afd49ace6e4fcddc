"""skrank: scikit-learn compatible ranking and similarity learners with a PyTorch core."""

__version__ = "0.2.0.dev0"

from .embedding import SOPRCEmbedder
from .multilabel import SNMClassifier
from .similarity import MMC, PointwiseROCSimilarity

__all__ = ["MMC", "PointwiseROCSimilarity", "SNMClassifier", "SOPRCEmbedder", "__version__"]
