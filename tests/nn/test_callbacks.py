"""Arguments and representations of the engine's callbacks."""

import pytest
import torch

from skrank.nn import Checkpoint, EarlyStopping, LRScheduler, WeightAveraging


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: EarlyStopping(monitor="accuracy"), "monitor must be 'validation_score' or 'loss'"),
        (lambda: EarlyStopping(tol=-1.0), "tol must be a non-negative number, got -1.0"),
        (lambda: EarlyStopping(patience=0), "patience must be a positive integer, got 0"),
        (
            lambda: EarlyStopping(monitor="loss", score_start=True),
            "score_start=True needs monitor='validation_score'",
        ),
        (
            lambda: LRScheduler(torch.optim.lr_scheduler.StepLR, step_every="step"),
            "'epoch' or 'batch'",
        ),
        (lambda: Checkpoint("x.ckpt", every=True), "every must be a positive integer, got True"),
        (
            lambda: WeightAveraging(decay=1.0),
            r"in \[0, 1\) or None, got 1.0",
        ),
        (lambda: WeightAveraging(decay="ema"), "decay must be a number"),
        (lambda: WeightAveraging(start_epoch=0), "start_epoch must be a positive integer, got 0"),
    ],
)
def test_invalid_callback_arguments_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_lr_scheduler_repr_names_the_scheduler_and_its_arguments():
    schedule = LRScheduler(torch.optim.lr_scheduler.StepLR, step_size=3, gamma=0.5)
    assert repr(schedule) == "LRScheduler(StepLR, step_every='epoch', step_size=3, gamma=0.5)"
    assert repr(LRScheduler(print, step_every="batch")) == "LRScheduler(print, step_every='batch')"


def test_callback_repr_shows_parameters_not_fitted_attributes():
    averaging = WeightAveraging(decay=0.9, start_epoch=2)
    averaging.averaged_model_ = torch.nn.Linear(2, 2)
    assert repr(averaging) == "WeightAveraging(decay=0.9, start_epoch=2)"
