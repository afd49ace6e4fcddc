"""What every display shares (``skrank.plotting._base``): matplotlib is optional."""

import sys

import pytest

from skrank.plotting import PairROCDisplay, TrainingHistoryDisplay


def test_missing_matplotlib_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r'pip install matplotlib .*pip install "\.\[plot\]"'):
        PairROCDisplay.from_predictions([1, 0], [0.2, 0.3])
    with pytest.raises(ImportError, match=r'pip install matplotlib .*pip install "\.\[plot\]"'):
        TrainingHistoryDisplay.from_history([{"epoch": 1, "loss": 0.9}])
