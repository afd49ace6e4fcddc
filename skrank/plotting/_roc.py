"""ROC curve over the pairs of a labelled set, with the target operating point marked."""

import numpy as np
from sklearn.metrics import auc, roc_curve

from ..metrics import pair_scores_and_labels, pointwise_roc_score
from ..metrics._scorer import final_estimator, pair_similarity_matrix
from ..metrics._validation import check_fpr, check_scores, positive_mask
from ..utils._docstrings import fill_docs
from ._base import DISPLAY_PARAMETER_DOCS, CurveDisplay, estimator_name


class PairROCDisplay(CurveDisplay):
    """ROC curve of pair scores, with the (FPR, TPR) point at a target FPR marked.

    For similarity learners such as :class:`~skrank.PointwiseROCSimilarity` and
    :class:`~skrank.MMC`: every pair ``i < j`` of a labelled set is scored, positive when both
    items share a class. The ROC curve joins the points of consecutive thresholds by straight
    lines, and the marked *target point* is ``(target_fpr, TPR at target_fpr)`` read on that
    curve (:func:`skrank.metrics.pointwise_roc_score`), so it lies on the drawn line. When a
    decision threshold is known (``threshold_`` of PointwiseROCSimilarity), the
    *threshold point* is the (FPR, TPR) that predicting "similar" above it achieves on these
    pairs: on held-out data it differs from the target.

    Use :meth:`from_estimator` or :meth:`from_predictions` to create it; pass
    ``ax=display.ax_`` to draw several estimators on one axis.

    Read more in the :ref:`User Guide <plotting>`.

    Parameters
    ----------
    fpr, tpr : ndarray of shape (n_points,)
        The ROC curve, from (0, 0) to (1, 1).
    roc_auc : float, default=None
        Area under the curve, shown in the legend.
    target_fpr, target_tpr : float, default=None
        The target point, marked with a dot.
    threshold_fpr, threshold_tpr : float, default=None
        The point reached by a decision threshold, marked with a cross.
    {shared_parameters}

    Attributes
    ----------
    line_ : matplotlib.lines.Line2D
        The ROC curve.
    target_point_ : matplotlib.lines.Line2D or None
        Marker of the target point.
    threshold_point_ : matplotlib.lines.Line2D or None
        Marker of the threshold point.
    {shared_attributes}

    See Also
    --------
    skrank.metrics.pairwise_roc_score : TPR at a given FPR over all pairs.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skrank import PointwiseROCSimilarity
    >>> from skrank.plotting import PairROCDisplay
    >>> rng = np.random.RandomState(0)
    >>> y = np.repeat([0, 1, 2], 20)
    >>> X = np.eye(3)[y] + 0.5 * rng.normal(size=(60, 3))
    >>> model = PointwiseROCSimilarity(alpha=0.4, identity_weight=0.0, threshold_fpr=0.1).fit(X, y)
    >>> display = PairROCDisplay.from_estimator(model, X, y)
    >>> display.target_fpr, round(display.target_tpr, 3)
    (0.1, 0.547)
    """

    def __init__(
        self,
        fpr,
        tpr,
        *,
        roc_auc=None,
        target_fpr=None,
        target_tpr=None,
        threshold_fpr=None,
        threshold_tpr=None,
        estimator_name=None,
    ):
        self.fpr = fpr
        self.tpr = tpr
        self.roc_auc = roc_auc
        self.target_fpr = target_fpr
        self.target_tpr = target_tpr
        self.threshold_fpr = threshold_fpr
        self.threshold_tpr = threshold_tpr
        self.estimator_name = estimator_name

    _x, _y, _summary, _summary_name = "fpr", "tpr", "roc_auc", "AUC"
    _xlabel = "false-positive rate (pairs of different classes)"
    _ylabel = "true-positive rate (pairs of the same class)"

    def _draw_marks(self, color):
        """The target point (a dot) and the threshold point (a cross), where known."""
        self.target_point_ = self.threshold_point_ = None
        if self.target_fpr is not None:
            label = f"TPR = {self.target_tpr:.3f} at FPR = {self.target_fpr:g}"
            self.target_point_ = self._mark(self.target_fpr, self.target_tpr, "o", color, label)
        if self.threshold_fpr is not None:
            label = f"threshold: FPR = {self.threshold_fpr:.3f}, TPR = {self.threshold_tpr:.3f}"
            self.threshold_point_ = self._mark(
                self.threshold_fpr, self.threshold_tpr, "x", color, label, markersize=8
            )
        return self.target_point_ is not None or self.threshold_point_ is not None

    def _mark(self, fpr, tpr, marker, color, label, **kwargs):
        (point,) = self.ax_.plot(fpr, tpr, marker, color=color, label=label, **kwargs)
        return point

    @classmethod
    @fill_docs(DISPLAY_PARAMETER_DOCS)
    def from_estimator(
        cls, estimator, X, y, *, target_fpr=None, metric=None, name=None, ax=None, **kwargs
    ):
        """ROC curve of a fitted similarity learner over all pairs of ``(X, y)``.

        Pair scores are ``estimator.pairwise_similarity(X)`` when it has that method
        (PointwiseROCSimilarity), else the similarity of the embedding ``transform(X)``: for
        :class:`~skrank.MMC` the negative squared learned distance, whose ranking, hence ROC
        curve, is that of the negative distance. Memory is O(n_samples^2).

        Parameters
        ----------
        estimator : fitted estimator
            With ``pairwise_similarity`` or ``transform`` (or a ``Pipeline`` ending with one).
        X : array-like of shape (n_samples, n_features)
            Items.
        y : array-like of shape (n_samples,)
            Class labels; a pair is positive when both items share one.
        target_fpr : float, default=None
            FPR of the marked target point, in (0, 1); None uses the estimator's
            ``threshold_fpr`` if it has one, else marks no target point.
        metric : {"cosine", "euclidean"} or callable, default=None
            Similarity of an embedding; None uses the estimator's natural one (as the scorers
            of :func:`skrank.metrics.get_scorer` do). Ignored with ``pairwise_similarity``.
        {estimator_name}
        {ax}
        {kwargs}

        Returns
        -------
        display : PairROCDisplay
            With the threshold point when the estimator has a ``threshold_`` (not None).
        """
        similarity = pair_similarity_matrix(estimator, X, metric, name="PairROCDisplay")
        scores, same_class = pair_scores_and_labels(similarity, y)
        final = final_estimator(estimator)
        if target_fpr is None:
            target_fpr = getattr(final, "threshold_fpr", None)
        return cls.from_predictions(
            same_class,
            scores,
            target_fpr=target_fpr,
            threshold=getattr(final, "threshold_", None),
            name=estimator_name(estimator) if name is None else name,
            ax=ax,
            **kwargs,
        )

    @classmethod
    @fill_docs(DISPLAY_PARAMETER_DOCS)
    def from_predictions(
        cls, y_true, y_score, *, target_fpr=None, threshold=None, name=None, ax=None, **kwargs
    ):
        """ROC curve of given pair scores.

        Parameters
        ----------
        y_true : array-like of shape (n_pairs,)
            Pair labels in {0, 1} (or booleans): 1 when both items share a class (e.g. from
            :func:`skrank.metrics.pair_scores_and_labels`).
        y_score : array-like of shape (n_pairs,)
            Pair scores, higher = more similar.
        target_fpr : float, default=None
            FPR of the marked target point, in (0, 1); None marks none.
        threshold : float, default=None
            Decision threshold (a pair is predicted similar when its score exceeds it); its
            (FPR, TPR) is marked. None marks none.
        {legend_name}
        {ax}
        {kwargs}

        Returns
        -------
        display : PairROCDisplay
        """
        is_positive = positive_mask(y_true)
        y_score = check_scores(y_score)
        if is_positive.all() or not is_positive.any():
            raise ValueError(
                "y_true needs positive and negative pairs (same and different classes) for a "
                "ROC curve."
            )
        fpr, tpr, _ = roc_curve(is_positive, y_score)
        target_tpr = threshold_fpr = threshold_tpr = None
        if target_fpr is not None:
            target_fpr = float(check_fpr(target_fpr))
            target_tpr = pointwise_roc_score(is_positive, y_score, target_fpr)
        if threshold is not None:
            predicted = y_score > threshold
            threshold_fpr = float(np.mean(predicted[~is_positive]))
            threshold_tpr = float(np.mean(predicted[is_positive]))
        display = cls(
            fpr,
            tpr,
            roc_auc=float(auc(fpr, tpr)),
            target_fpr=target_fpr,
            target_tpr=target_tpr,
            threshold_fpr=threshold_fpr,
            threshold_tpr=threshold_tpr,
            estimator_name=name,
        )
        return display.plot(ax=ax, **kwargs)
