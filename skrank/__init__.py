"""skrank: scikit-learn compatible ranking and similarity learners with a PyTorch core."""

__version__ = "0.1.0.dev0"

from .embedding import SOPRCEmbedder
from .mmc import MMC
from .similarity import PointwiseROCSimilarity
from .snm import SNMClassifier

__all__ = ["MMC", "PointwiseROCSimilarity", "SNMClassifier", "SOPRCEmbedder", "__version__"]
