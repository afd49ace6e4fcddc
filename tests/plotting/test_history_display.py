"""TrainingHistoryDisplay (``skrank.plotting._history``): the drawn loss and validation score
are the history's."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank import MMC
from skrank.plotting import TrainingHistoryDisplay


def legend_labels(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


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
