"""Memory-mapped inputs: read batch by batch from the file, with the fit of the same X in memory."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import skrank
from skrank import SOPRCEmbedder
from skrank.nn import TrainingInputs
from skrank.nn._data import RowSubset, memory_mapped


def _saved(tmp_path, X, name="X.npy"):
    np.save(tmp_path / name, X)
    return np.load(tmp_path / name, mmap_mode="r")


def test_memory_mapped_inputs_are_recognised_and_read_in_the_order_asked(tmp_path):
    X = np.arange(40, dtype=np.float32).reshape(10, 4)
    mapped = _saved(tmp_path, X)
    assert memory_mapped(mapped) and memory_mapped(np.asarray(mapped)) and memory_mapped(mapped[2:])
    assert not memory_mapped(X) and not memory_mapped(np.array(mapped))
    subset = RowSubset(mapped, [5, 1, 8])
    assert memory_mapped(subset) and subset.shape == (3, 4) and len(subset) == 3
    assert np.array_equal(np.asarray(subset), X[[5, 1, 8]])
    assert np.array_equal(subset[[2, 0]], X[[8, 5]]) and np.array_equal(subset[1:, 0], X[[1, 8], 0])
    assert np.array_equal(np.asarray(RowSubset(subset, [2, 0])), X[[8, 5]])
    inputs = TrainingInputs(subset, torch.device("cpu"))
    assert not inputs.resident and inputs.index_device == torch.device("cpu")
    assert torch.equal(inputs.rows(torch.tensor([2, 0, 2])), torch.from_numpy(X[[8, 5, 8]]))
    assert torch.equal(torch.cat(list(inputs.chunks(2))), torch.from_numpy(X[[5, 1, 8]]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8])
def test_a_memory_mapped_fit_equals_the_fit_in_memory_bitwise(tmp_path, dtype, one_torch_thread):
    rng = np.random.RandomState(0)
    y = np.repeat(np.arange(12), 25)
    X = rng.randint(0, 200, size=(300, 12)) + 20 * y[:, None] * (np.arange(12) == y[:, None])
    X = X.astype(dtype)
    mapped = _saved(tmp_path, X)
    params = dict(hidden_layer_sizes=(16,), n_components=8, max_epochs=3, batch_size=32)
    params.update(validation_fraction=0.2, device="cpu", random_state=0)
    in_memory = SOPRCEmbedder(**params).fit(X, y)
    from_file = SOPRCEmbedder(**params).fit(mapped, y)
    expected = in_memory.module_.state_dict()
    for name, trained in from_file.module_.state_dict().items():
        assert torch.equal(trained, expected[name])
    assert [r["validation_score"] for r in from_file.history_] == [
        r["validation_score"] for r in in_memory.history_
    ]
    assert [r["loss"] for r in from_file.history_] == [r["loss"] for r in in_memory.history_]
    assert np.array_equal(from_file.transform(mapped), in_memory.transform(X))
    assert from_file.score(mapped, y) == in_memory.score(X, y)


# A child process fits on a memory-mapped X of 4 x CAP bytes and reports the peak of its
# anonymous resident memory (RssAnon: not the file's pages, which the page cache holds) above
# what it held before, sampled every millisecond through fit (validation split included) and
# transform.
_CAP = 32 * 2**20
_CHILD = r"""
import sys
import numpy as np, sklearn, torch
from skrank import SOPRCEmbedder
from skrank.utils._memory import PeakAnonymousMemory
torch.set_num_threads(1)
sklearn.set_config(working_memory=8)  # the chunks of the validation score: 8 MiB
X = np.load(sys.argv[1], mmap_mode="r")
y = np.arange(X.shape[0]) % 50
params = dict(hidden_layer_sizes=(8,), n_components=4, max_epochs=1, batch_size=200,
              validation_fraction=0.1, device="cpu", random_state=0)
warm_up = np.array(X[:1000])  # torch's own first allocations happen here, not in the measure
SOPRCEmbedder(**params).fit(warm_up, y[:1000]).transform(warm_up)
del warm_up
with PeakAnonymousMemory() as memory:
    model = SOPRCEmbedder(**params).fit(X, y)
    embedding = model.transform(X)
print(memory.growth, embedding.shape[0], len(model.history_[-1]))
"""


@pytest.mark.slow  # a child process: importing torch and its first fit take most of it
def test_fit_and_transform_of_a_memory_mapped_input_four_times_a_cap_stay_under_it(tmp_path):
    n_features = 2048
    n_rows = 4 * _CAP // (4 * n_features)
    X = np.lib.format.open_memmap(
        tmp_path / "X.npy", mode="w+", dtype=np.float32, shape=(n_rows, n_features)
    )
    rng = np.random.default_rng(0)
    for start in range(0, n_rows, 4096):
        X[start : start + 4096] = rng.random((min(4096, n_rows - start), n_features))
    X.flush()
    del X
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "X.npy")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(skrank.__file__).parents[1])},
    )
    growth, n_embedded, _ = (int(value) for value in child.stdout.split())
    assert n_embedded == n_rows
    assert growth < _CAP, f"anonymous memory grew by {growth / 2**20:.0f} MiB"
