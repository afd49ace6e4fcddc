"""skrank: scikit-learn compatible ranking and similarity learners with a PyTorch core."""

__version__ = "0.1.0.dev0"

from .snm import SNMClassifier

__all__ = ["SNMClassifier", "__version__"]
