"""Mean precision-recall curve of a retrieval over embeddings."""

import numpy as np

from ..metrics._retrieval import mean_precision_curve_and_auprc
from ..metrics._scorer import _embed, _retrieval_metric
from ._base import axes_to_draw_on, curve_label, estimator_name


class MeanPrecisionRecallDisplay:
    """Mean precision-recall curve over retrieval queries (the SOPRC paper's Figure 2).

    Every item is a query against all the others; the curve is the mean over queries (with at
    least one positive) of their interpolated precision at each recall level, computed exactly
    by :func:`skrank.metrics.mean_precision_recall_curve`. Use :meth:`from_estimator` or
    :meth:`from_predictions` to create it; pass ``ax=display.ax_`` to draw several estimators
    on one axis.

    Read more in the :ref:`User Guide <plotting>`.

    Parameters
    ----------
    precision : ndarray of shape (n_levels,)
        Mean interpolated precision at each recall level.
    recall : ndarray of shape (n_levels,)
        The recall levels.
    mean_auprc : float, default=None
        Mean AUPRC (mAP) of the same retrieval, shown in the legend.
    estimator_name : str, default=None
        Name of the curve in the legend.

    Attributes
    ----------
    line_ : matplotlib.lines.Line2D
        The curve.
    ax_ : matplotlib.axes.Axes
        Axes with the curve.
    figure_ : matplotlib.figure.Figure
        Figure with the curve.

    See Also
    --------
    skrank.metrics.mean_precision_recall_curve : The curve's values.
    skrank.metrics.mean_auprc_score : The mean AUPRC.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.decomposition import PCA
    >>> from skrank.plotting import MeanPrecisionRecallDisplay
    >>> X, y = load_iris(return_X_y=True)
    >>> display = MeanPrecisionRecallDisplay.from_estimator(PCA(2).fit(X), X, y, metric="cosine")
    >>> display.line_.get_label()
    'PCA (mAP = 0.735)'
    """

    def __init__(self, precision, recall, *, mean_auprc=None, estimator_name=None):
        self.precision = precision
        self.recall = recall
        self.mean_auprc = mean_auprc
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None, **kwargs):
        """Draw the curve.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None creates a figure and axes.
        name : str, default=None
            Name of the curve in the legend; None uses ``estimator_name``.
        **kwargs : dict
            Keyword arguments of :meth:`matplotlib.axes.Axes.plot`.

        Returns
        -------
        display : MeanPrecisionRecallDisplay
            Holds ``line_``, ``ax_`` and ``figure_``.
        """
        self.figure_, self.ax_ = axes_to_draw_on(ax)
        name = self.estimator_name if name is None else name
        label = curve_label(name, "mAP", self.mean_auprc)
        (self.line_,) = self.ax_.plot(self.recall, self.precision, label=label, **kwargs)
        self.ax_.set(
            xlabel="recall",
            ylabel="mean interpolated precision",
            xlim=(-0.01, 1.01),
            ylim=(-0.01, 1.01),
        )
        if label:
            self.ax_.legend(loc="lower left")
        return self

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        y,
        *,
        metric=None,
        recall_levels=None,
        chunk_size=None,
        name=None,
        ax=None,
        **kwargs,
    ):
        """Mean PR curve of the retrieval in a fitted embedder's space.

        Parameters
        ----------
        estimator : estimator with ``transform``
            A fitted embedder (e.g. :class:`~skrank.SOPRCEmbedder`, :class:`~skrank.MMC`, or a
            ``Pipeline`` ending with one).
        X : array-like of shape (n_samples, n_features)
            Items; every item is a query against the others.
        y : array-like of shape (n_samples,)
            Class labels.
        metric : {"cosine", "euclidean"} or callable, default=None
            Similarity of the embedding; None uses the estimator's natural one (its
            ``_retrieval_metric``: cosine for SOPRCEmbedder, euclidean for MMC), else
            "euclidean", as the scorers of :func:`skrank.metrics.get_scorer` do.
        recall_levels : array-like of shape (n_levels,), default=None
            Recall levels in [0, 1]; None means 101 levels ``0, 0.01, ..., 1``.
        chunk_size : int, default=None
            Queries per chunk; None picks it from scikit-learn's ``working_memory``.
        name : str, default=None
            Legend name; None uses the estimator's class name.
        ax : matplotlib Axes, default=None
            Axes to draw on; None creates a figure and axes.
        **kwargs : dict
            Keyword arguments of :meth:`matplotlib.axes.Axes.plot`.

        Returns
        -------
        display : MeanPrecisionRecallDisplay
        """
        embedding = _embed(estimator, X, "MeanPrecisionRecallDisplay")
        return cls.from_predictions(
            y,
            embedding,
            metric=_retrieval_metric(estimator, metric),
            recall_levels=recall_levels,
            chunk_size=chunk_size,
            name=estimator_name(estimator) if name is None else name,
            ax=ax,
            **kwargs,
        )

    @classmethod
    def from_predictions(
        cls,
        y_true,
        embedding,
        *,
        metric="cosine",
        recall_levels=None,
        chunk_size=None,
        name=None,
        ax=None,
        **kwargs,
    ):
        """Mean PR curve of the retrieval in a given embedding.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            Class labels.
        embedding : array-like of shape (n_samples, n_components)
            Embedded items (e.g. ``estimator.transform(X)``).
        metric : {"cosine", "euclidean"} or callable, default="cosine"
            Similarity used to rank the items.
        recall_levels : array-like of shape (n_levels,), default=None
            Recall levels in [0, 1]; None means 101 levels ``0, 0.01, ..., 1``.
        chunk_size : int, default=None
            Queries per chunk; None picks it from scikit-learn's ``working_memory``.
        name : str, default=None
            Legend name.
        ax : matplotlib Axes, default=None
            Axes to draw on; None creates a figure and axes.
        **kwargs : dict
            Keyword arguments of :meth:`matplotlib.axes.Axes.plot`.

        Returns
        -------
        display : MeanPrecisionRecallDisplay
        """
        precision, recall, mean_auprc = mean_precision_curve_and_auprc(
            embedding, y_true, metric=metric, recall_levels=recall_levels, chunk_size=chunk_size
        )
        display = cls(
            precision=np.asarray(precision),
            recall=recall,
            mean_auprc=mean_auprc,
            estimator_name=name,
        )
        return display.plot(ax=ax, **kwargs)
