"""PairROCDisplay (``skrank.plotting._roc``): the drawn curve is scikit-learn's ROC curve of the
pairs, with the operating points marked."""

import numpy as np
import pytest
from sklearn.metrics import roc_curve
from sklearn.metrics.pairwise import euclidean_distances

from skrank import MMC, PointwiseROCSimilarity
from skrank.metrics import pair_scores_and_labels, pairwise_roc_score
from skrank.plotting import PairROCDisplay


def legend_labels(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_pair_roc_of_pointwise_roc_similarity_marks_target_and_threshold(iris):
    X, y = iris
    model = PointwiseROCSimilarity(alpha=0.45, threshold_fpr=0.1).fit(X[::2], y[::2])
    display = PairROCDisplay.from_estimator(model, X, y)
    scores, same_class = pair_scores_and_labels(model.pairwise_similarity(X), y)
    fpr, tpr, _ = roc_curve(same_class, scores)
    np.testing.assert_allclose(display.line_.get_xdata(), fpr)
    np.testing.assert_allclose(display.line_.get_ydata(), tpr)
    # The target point: the estimator's threshold_fpr and the TPR there, on the drawn curve.
    target_tpr = pairwise_roc_score(model.pairwise_similarity(X), y, 0.1)
    assert display.target_point_.get_xydata().tolist() == [[0.1, target_tpr]]
    assert target_tpr == pytest.approx(np.interp(0.1, fpr, tpr))
    # The threshold point: what predict achieves on these (held-out) pairs.
    upper_i, upper_j = np.triu_indices(len(y), k=1)
    predicted = model.predict(np.stack([X[upper_i], X[upper_j]], axis=1)).astype(bool)
    expected_point = [predicted[~same_class].mean(), predicted[same_class].mean()]
    np.testing.assert_allclose(display.threshold_point_.get_xydata(), [expected_point])
    assert legend_labels(display.ax_) == [
        f"PointwiseROCSimilarity (AUC = {display.roc_auc:.3f})",
        f"TPR = {target_tpr:.3f} at FPR = 0.1",
        f"threshold: FPR = {expected_point[0]:.3f}, TPR = {expected_point[1]:.3f}",
    ]
    assert display.target_point_.get_color() == display.line_.get_color()


def test_pair_roc_of_mmc_scores_pairs_by_negative_distance(iris):
    X, y = iris
    X = X + 0.01 * np.random.RandomState(0).normal(size=X.shape)  # no tied distances
    mmc = MMC().fit(X, y)
    display = PairROCDisplay.from_estimator(mmc, X, y, target_fpr=0.05)
    negative_distance = -euclidean_distances(mmc.transform(X))
    scores, same_class = pair_scores_and_labels(negative_distance, y)
    fpr, tpr, _ = roc_curve(same_class, scores)
    np.testing.assert_allclose(display.fpr, fpr)
    np.testing.assert_allclose(display.line_.get_ydata(), tpr)
    assert display.target_point_.get_xydata().tolist() == [
        [0.05, pairwise_roc_score(negative_distance, y, 0.05)]
    ]
    assert display.threshold_point_ is None
    untargeted = PairROCDisplay.from_estimator(mmc, X, y, name="mmc", ax=display.ax_)
    assert untargeted.target_point_ is None and len(display.ax_.lines) == 3
    assert legend_labels(display.ax_)[-1] == f"mmc (AUC = {untargeted.roc_auc:.3f})"


def test_pair_roc_from_predictions_validates_input():
    display = PairROCDisplay.from_predictions([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1], target_fpr=0.25)
    assert display.target_tpr == 0.5 and display.roc_auc == 0.75
    with pytest.raises(ValueError, match="positive and negative pairs"):
        PairROCDisplay.from_predictions([1, 1], [0.2, 0.3])
    with pytest.raises(ValueError, match=r"open interval \(0, 1\)"):
        PairROCDisplay.from_predictions([1, 0], [0.2, 0.3], target_fpr=1.0)
    with pytest.raises(ValueError, match="NaN"):
        PairROCDisplay.from_predictions([1, 0], [0.2, np.nan])
