"""The gallery part of .ci/check_docs_browser.py (the browser itself runs in CI only): an
example's output block holding a warning or a file path of the building machine fails."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load_check():
    path = ROOT / ".ci" / "check_docs_browser.py"
    spec = importlib.util.spec_from_file_location("check_docs_browser", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load_check()


def test_a_warning_or_a_path_in_an_output_block_fails_the_page():
    warned = (
        "train (4880, 1836), 159 labels\n"
        "/home/me/skrank/nn/_engine.py:719: ConvergenceWarning: max_epochs=6 reached\n"
        "  getattr(callback, hook)(self, **kwargs)\n"
    )
    problems = check.output_problems(["fine", warned])
    assert len(problems) == 1 and problems[0].startswith("output block 2 holds a warning")
    assert check.output_problems(["FutureWarning: x is deprecated"])
    assert check.output_problems(["saved to /tmp/run/model.pt"])
    assert check.output_problems([r"loaded C:\Users\me\data.npz"])
    probe = {"images": [{"cls": "sphx-glr-single-img", "loaded": True, "src": "a.png"}]}
    probe.update(mathErrors=0, outputs=[warned])
    assert check.check_page("auto_examples/plot_x.html", probe, requests=[])


def test_ordinary_outputs_pass():
    outputs = [
        "weights   n_negatives  Recall@5  Precision@1\ntopk  16  0.578  0.563",
        "3/4 of the pairs, a/b testing, 1 / 2 s per fit, see https://example.org/a/b",
        "best: {'mmc__min_rank': 0.5}",
    ]
    assert check.output_problems(outputs) == []
