"""Every Python block of README.md runs (the quick-starts must not rot)."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_a_quick_start_per_estimator():
    code = "\n".join(BLOCKS)
    for estimator in ("SOPRCEmbedder", "SNMClassifier", "PointwiseROCSimilarity", "MMC"):
        assert f"from skrank import {estimator}" in code


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code, documentation_run):
    exec(compile(code, "README.md", "exec"), {"__name__": "__main__"})
