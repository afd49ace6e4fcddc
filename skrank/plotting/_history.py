"""Training history of the torch estimators: loss and validation score per epoch."""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..metrics._scorer import final_estimator
from ..utils._docstrings import fill_docs
from ._base import DISPLAY_PARAMETER_DOCS, estimator_name, import_pyplot


class TrainingHistoryDisplay:
    """Training loss and validation score per epoch of a torch estimator.

    Reads the ``history_`` of :class:`~skrank.SOPRCEmbedder` and :class:`~skrank.SNMClassifier`
    (any :class:`~skrank.nn.BaseTorchEstimator`): one record per epoch with ``"epoch"``,
    ``"loss"``, ``"learning_rate"``, ``"duration"`` and, when the estimator holds out a
    validation set (``validation_fraction``), ``"validation_score"``. The loss is drawn on the
    left panel, the validation score (if any) on the right one. Use :meth:`from_estimator` or
    :meth:`from_history` to create it; pass ``ax=display.axes_`` to draw several runs on the
    same panels.

    Read more in the :ref:`User Guide <plotting>`.

    Parameters
    ----------
    epoch : ndarray of shape (n_epochs,)
        Epoch numbers (1-based; they continue across warm starts).
    loss : ndarray of shape (n_epochs,)
        Mean training loss of each epoch.
    validation_score : ndarray of shape (n_epochs,), default=None
        Validation score of each epoch (higher is better), or None.
    learning_rate : ndarray of shape (n_epochs,), default=None
        Learning rate of each epoch.
    estimator_name : str, default=None
        Name of the run in the legends.

    Attributes
    ----------
    loss_line_ : matplotlib.lines.Line2D
        The loss curve.
    validation_line_ : matplotlib.lines.Line2D or None
        The validation curve, if there is a validation score.
    ax_ : matplotlib.axes.Axes
        Axes of the loss (the first of ``axes_``).
    axes_ : ndarray of matplotlib Axes
        The loss axes, then the validation axes if there is a validation score.
    figure_ : matplotlib.figure.Figure
        Figure with the curves.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skrank.plotting import TrainingHistoryDisplay
    >>> history = [
    ...     {"epoch": 1, "loss": 0.9, "learning_rate": 0.1, "duration": 0.2,
    ...      "validation_score": 0.5},
    ...     {"epoch": 2, "loss": 0.6, "learning_rate": 0.1, "duration": 0.2,
    ...      "validation_score": 0.7},
    ... ]
    >>> display = TrainingHistoryDisplay.from_history(history, name="run 1")
    >>> display.validation_line_.get_ydata().tolist()
    [0.5, 0.7]
    """

    def __init__(
        self, epoch, loss, *, validation_score=None, learning_rate=None, estimator_name=None
    ):
        self.epoch = epoch
        self.loss = loss
        self.validation_score = validation_score
        self.learning_rate = learning_rate
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None, validation_label="validation score", **kwargs):
        """Draw the loss and, if recorded, the validation score against the epoch.

        Parameters
        ----------
        ax : matplotlib Axes or sequence of Axes, default=None
            The loss axes, or the loss and validation axes (e.g. ``display.axes_`` of an
            earlier display). None creates a figure with one panel, or two with a validation
            score. A single Axes with a validation score puts it on a twin y-axis.
        name : str, default=None
            Name of the run in the legends; None uses ``estimator_name``.
        validation_label : str, default="validation score"
            Label of the validation axis, e.g. "validation mean AUPRC".
        **kwargs : dict
            Keyword arguments of :meth:`matplotlib.axes.Axes.plot` for both curves.

        Returns
        -------
        display : TrainingHistoryDisplay
            Holds ``loss_line_``, ``validation_line_``, ``ax_``, ``axes_`` and ``figure_``.
        """
        axes, twin = self._axes(ax)
        self.axes_, self.ax_, self.figure_ = axes, axes[0], axes[0].figure
        name = self.estimator_name if name is None else name
        (self.loss_line_,) = self.ax_.plot(self.epoch, self.loss, label=name, **kwargs)
        self.ax_.set(xlabel="epoch", ylabel="training loss")
        if name:
            self.ax_.legend()
        self.validation_line_ = None
        if self.validation_score is None:
            return self
        validation_ax = axes[1]
        if twin:  # same axes: the validation curve dashed, in the loss curve's colour
            kwargs = {"color": self.loss_line_.get_color(), "linestyle": "--", **kwargs}
        (self.validation_line_,) = validation_ax.plot(
            self.epoch, self.validation_score, label=name, **kwargs
        )
        validation_ax.set(xlabel="epoch", ylabel=validation_label)
        if name and not twin:
            validation_ax.legend()
        return self

    def _axes(self, ax):
        """The loss axes and, with a validation score, the validation axes; whether twinned."""
        if ax is None:
            plt = import_pyplot()
            n_panels = 1 if self.validation_score is None else 2
            _, axes = plt.subplots(1, n_panels, figsize=(5 * n_panels, 3.8), squeeze=False)
            return axes[0], False
        axes = np.ravel(np.asarray(ax, dtype=object))
        if self.validation_score is not None and len(axes) == 1:
            return np.array([axes[0], axes[0].twinx()], dtype=object), True
        return axes, False

    @classmethod
    @fill_docs(DISPLAY_PARAMETER_DOCS)
    def from_estimator(cls, estimator, *, name=None, ax=None, **kwargs):
        """Plot the ``history_`` of a fitted torch estimator (or a pipeline ending with one).

        Parameters
        ----------
        estimator : fitted estimator with ``history_``
            E.g. :class:`~skrank.SOPRCEmbedder` or :class:`~skrank.SNMClassifier`.
        name : str, default=None
            Name of the run in the legends; None uses the estimator's class name.
        {history_ax}
        {history_kwargs}

        Returns
        -------
        display : TrainingHistoryDisplay
        """
        final = final_estimator(estimator)
        check_is_fitted(final, "history_")
        name = estimator_name(estimator) if name is None else name
        return cls.from_history(final.history_, name=name, ax=ax, **kwargs)

    @classmethod
    @fill_docs(DISPLAY_PARAMETER_DOCS)
    def from_history(cls, history, *, name=None, ax=None, **kwargs):
        """Plot a training history: a list of per-epoch dicts as in ``history_``.

        Parameters
        ----------
        history : list of dict
            One record per epoch with ``"epoch"`` and ``"loss"``, optionally
            ``"learning_rate"`` and ``"validation_score"`` (in every record or in none).
        {run_name}
        {history_ax}
        {history_kwargs}

        Returns
        -------
        display : TrainingHistoryDisplay
        """
        if len(history) == 0:
            raise ValueError("The history is empty: the estimator has trained no epoch.")
        missing = [key for key in ("epoch", "loss") if any(key not in r for r in history)]
        if missing:
            raise ValueError(f"Every record of the history needs {missing}; some lack it.")
        columns = {}
        for key in ("validation_score", "learning_rate"):
            present = [key in record for record in history]
            if any(present) and not all(present):
                raise ValueError(f"{key!r} is in some records of the history but not in all.")
            if all(present):
                columns[key] = np.array([record[key] for record in history], dtype=float)
        display = cls(
            np.array([record["epoch"] for record in history]),
            np.array([record["loss"] for record in history], dtype=float),
            estimator_name=name,
            **columns,
        )
        return display.plot(ax=ax, **kwargs)
