"""Tests of skrank.plotting with the Agg backend: the drawn data equal the computed curves."""

import sys

import matplotlib
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.metrics import roc_curve
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank import MMC, PointwiseROCSimilarity
from skrank.metrics import (
    mean_auprc_score,
    mean_precision_recall_curve,
    pair_scores_and_labels,
    pairwise_roc_score,
)
from skrank.plotting import MeanPrecisionRecallDisplay, PairROCDisplay, TrainingHistoryDisplay

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return X[::2], y[::2]


def legend_labels(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


# ---------------------------------------------------------------- mean precision-recall


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


# ---------------------------------------------------------------- pair ROC


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


# ---------------------------------------------------------------- training history


def history(validation=True):
    records = []
    for epoch, (loss, score) in enumerate([(0.9, 0.4), (0.5, 0.6), (0.4, 0.65)], start=1):
        record = {"epoch": epoch, "loss": loss, "learning_rate": 0.1, "duration": 0.01}
        if validation:
            record["validation_score"] = score
        records.append(record)
    return records


def test_history_draws_loss_and_validation_panels_and_overlays_runs():
    display = TrainingHistoryDisplay.from_history(history(), name="run A")
    assert len(display.axes_) == 2 and display.ax_ is display.axes_[0]
    np.testing.assert_array_equal(display.loss_line_.get_xdata(), [1, 2, 3])
    np.testing.assert_array_equal(display.loss_line_.get_ydata(), [0.9, 0.5, 0.4])
    np.testing.assert_array_equal(display.validation_line_.get_ydata(), [0.4, 0.6, 0.65])
    np.testing.assert_array_equal(display.learning_rate, [0.1, 0.1, 0.1])
    second = TrainingHistoryDisplay.from_history(
        history()[:2], name="run B", ax=display.axes_, validation_label="validation mAP"
    )
    assert [len(ax.lines) for ax in display.axes_] == [2, 2]
    assert legend_labels(display.axes_[0]) == legend_labels(display.axes_[1]) == ["run A", "run B"]
    assert second.axes_[1].get_ylabel() == "validation mAP"


def test_history_without_validation_has_one_panel_and_twin_axis_on_one_axes():
    display = TrainingHistoryDisplay.from_history(history(validation=False))
    assert len(display.axes_) == 1 and display.validation_line_ is None
    assert display.validation_score is None
    _, ax = plt.subplots()
    twin = TrainingHistoryDisplay.from_history(history(), ax=ax, name="run")
    assert twin.axes_[0] is ax and twin.axes_[1] is not ax
    assert twin.validation_line_.get_linestyle() == "--"
    assert twin.validation_line_.get_color() == twin.loss_line_.get_color()


@pytest.mark.parametrize(
    "records, message",
    [
        ([], "empty"),
        ([{"epoch": 1}], "needs \\['loss'\\]"),
        (
            [{"epoch": 1, "loss": 1.0, "validation_score": 0.5}, {"epoch": 2, "loss": 0.5}],
            "not in all",
        ),
    ],
)
def test_history_rejects_malformed_records(records, message):
    with pytest.raises(ValueError, match=message):
        TrainingHistoryDisplay.from_history(records)


def test_history_of_a_torch_estimator_in_a_pipeline(iris):
    from skrank import SOPRCEmbedder

    X, y = iris
    embedder = SOPRCEmbedder(
        hidden_layer_sizes=(8,),
        n_components=4,
        batch_size=24,
        max_epochs=3,
        validation_fraction=0.3,
        device="cpu",
        random_state=0,
    )
    model = make_pipeline(StandardScaler(), embedder).fit(X, y)
    display = TrainingHistoryDisplay.from_estimator(model)
    history = embedder.history_
    np.testing.assert_array_equal(display.loss_line_.get_xdata(), [1, 2, 3])
    np.testing.assert_allclose(display.loss_line_.get_ydata(), [r["loss"] for r in history])
    np.testing.assert_allclose(
        display.validation_line_.get_ydata(), [r["validation_score"] for r in history]
    )
    assert legend_labels(display.axes_[1]) == ["SOPRCEmbedder"]


def test_history_of_an_unfitted_estimator_raises():
    with pytest.raises(NotFittedError):
        TrainingHistoryDisplay.from_estimator(MMC())


# ---------------------------------------------------------------- matplotlib is optional


def test_missing_matplotlib_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r'pip install matplotlib .*pip install "\.\[plot\]"'):
        PairROCDisplay.from_predictions([1, 0], [0.2, 0.3])
    with pytest.raises(ImportError, match=r'pip install matplotlib .*pip install "\.\[plot\]"'):
        TrainingHistoryDisplay.from_history(history())
