"""MeanPrecisionRecallDisplay (``skrank.plotting._precision_recall``): the drawn lines are
the computed curves."""

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank import MMC
from skrank.metrics import (
    mean_auprc_score,
    mean_precision_recall_curve,
)
from skrank.plotting import MeanPrecisionRecallDisplay


def legend_labels(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_precision_recall_lines_are_the_computed_curves_of_each_estimator(iris):
    X, y = iris
    pca = PCA(n_components=2).fit(X)
    mmc = make_pipeline(StandardScaler(), MMC()).fit(X, y)
    levels = np.linspace(0, 1, 11)
    first = MeanPrecisionRecallDisplay.from_estimator(pca, X, y, recall_levels=levels)
    second = MeanPrecisionRecallDisplay.from_estimator(
        mmc, X, y, recall_levels=levels, ax=first.ax_
    )
    assert second.ax_ is first.ax_ and len(first.ax_.lines) == 2
    # Both use the euclidean metric: PCA has no retrieval_metric, MMC's is "euclidean".
    for display, embedding in ((first, pca.transform(X)), (second, mmc.transform(X))):
        expected, _ = mean_precision_recall_curve(
            embedding, y, metric="euclidean", recall_levels=levels
        )
        np.testing.assert_array_equal(display.line_.get_xdata(), levels)
        np.testing.assert_allclose(display.line_.get_ydata(), expected, rtol=1e-12)
        np.testing.assert_allclose(display.precision, expected, rtol=1e-12)
        assert display.mean_auprc == pytest.approx(
            mean_auprc_score(embedding, y, metric="euclidean"), rel=1e-12
        )
    assert legend_labels(first.ax_) == [
        f"PCA (mAP = {first.mean_auprc:.3f})",
        f"MMC (mAP = {second.mean_auprc:.3f})",
    ]
    assert first.ax_.get_xlabel() == "recall"


def test_precision_recall_from_predictions_uses_the_given_metric(iris):
    X, y = iris
    cosine = MeanPrecisionRecallDisplay.from_predictions(y, X, name="raw")
    euclidean = MeanPrecisionRecallDisplay.from_predictions(y, X, metric="euclidean")
    expected, recall = mean_precision_recall_curve(X, y, metric="cosine")
    np.testing.assert_allclose(cosine.line_.get_ydata(), expected, rtol=1e-12)
    np.testing.assert_array_equal(recall, np.linspace(0, 1, 101))
    assert not np.allclose(euclidean.precision, cosine.precision)
    assert euclidean.line_.get_label().startswith("mAP = ")


def test_precision_recall_rejects_a_classifier(iris):
    from sklearn.linear_model import LogisticRegression

    X, y = iris
    with pytest.raises(ValueError, match="classifier"):
        MeanPrecisionRecallDisplay.from_estimator(LogisticRegression().fit(X, y), X, y)
