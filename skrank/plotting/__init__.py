"""Plots following scikit-learn's Display API (matplotlib: the ``plot`` extra).

- :class:`MeanPrecisionRecallDisplay`: mean precision-recall curve of a retrieval over
  embeddings, several estimators on one axis.
- :class:`PairROCDisplay`: ROC curve over the pairs of a labelled set, with the operating point
  at a target false-positive rate marked (PointwiseROCSimilarity, MMC).
- :class:`TrainingHistoryDisplay`: training loss and validation score per epoch of the torch
  estimators.

Each display has ``from_estimator``, a constructor from computed values
(``from_predictions``, or ``from_history`` for the training history) and ``plot(ax=...)``;
the curve data are attributes of the display, the drawn artists end in ``_``. Importing this
module does not need matplotlib; drawing does.
"""

from ._history import TrainingHistoryDisplay
from ._precision_recall import MeanPrecisionRecallDisplay
from ._roc import PairROCDisplay

__all__ = ["MeanPrecisionRecallDisplay", "PairROCDisplay", "TrainingHistoryDisplay"]
