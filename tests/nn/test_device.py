"""Device names: resolving ``device`` and the indexed device of tensors."""

import pytest
import torch

from skrank.nn import resolve_device


def test_indexed_device_names_the_index_tensors_report(monkeypatch):
    from skrank.nn._device import indexed_device

    assert indexed_device("cpu") == torch.device("cpu")
    assert indexed_device("cuda:1") == torch.device("cuda", 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    # A tensor on a bare "cuda" reports cuda:0, which torch.device("cuda") does not equal.
    assert torch.device("cuda") != torch.device("cuda", 0)
    assert indexed_device("cuda") == torch.device("cuda", 0)


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ValueError, match="not a valid torch device"):
        resolve_device("tpu-9000")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
