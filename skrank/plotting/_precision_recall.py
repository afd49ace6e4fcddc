"""Mean precision-recall curve of a retrieval over embeddings."""

import numpy as np

from ..metrics._retrieval import mean_precision_curve_and_auprc
from ..metrics._scorer import _embed, retrieval_metric_of
from ..utils._docstrings import fill_docs
from ._base import DISPLAY_PARAMETER_DOCS, CurveDisplay, estimator_name


class MeanPrecisionRecallDisplay(CurveDisplay):
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
    {shared_parameters}

    Attributes
    ----------
    line_ : matplotlib.lines.Line2D
        The curve.
    {shared_attributes}

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

    _x, _y, _summary, _summary_name = "recall", "precision", "mean_auprc", "mAP"
    _xlabel, _ylabel, _legend_loc = "recall", "mean interpolated precision", "lower left"

    @classmethod
    @fill_docs(DISPLAY_PARAMETER_DOCS)
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
            ``retrieval_metric``: cosine for SOPRCEmbedder, euclidean for MMC), else
            "euclidean", as the scorers of :func:`skrank.metrics.get_scorer` do.
        {curve_parameters}
        {estimator_name}
        {ax}
        {kwargs}

        Returns
        -------
        display : MeanPrecisionRecallDisplay
        """
        embedding = _embed(estimator, X, "MeanPrecisionRecallDisplay")
        return cls.from_predictions(
            y,
            embedding,
            metric=retrieval_metric_of(estimator, metric),
            recall_levels=recall_levels,
            chunk_size=chunk_size,
            name=estimator_name(estimator) if name is None else name,
            ax=ax,
            **kwargs,
        )

    @classmethod
    @fill_docs(DISPLAY_PARAMETER_DOCS)
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
        {curve_parameters}
        {legend_name}
        {ax}
        {kwargs}

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
