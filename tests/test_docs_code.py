"""Every code block of the documentation pages that hold complete programs runs."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"\.\. code-block:: python\n\n((?:(?:   .*)?\n)+)")
# Pages whose every code block is a complete program (the other pages show fragments of a
# user's own code, with names such as ``pipeline`` or ``model`` left to the reader).
RUNNABLE_PAGES = [
    "index.rst",
    "user_guide/soprc.rst",
    "user_guide/image_files.rst",
    "user_guide/snm.rst",
    "user_guide/pointwise_roc.rst",
    "user_guide/mmc.rst",
    "user_guide/losses.rst",
    "user_guide/engine.rst",
    "user_guide/persistence.rst",
    "user_guide/threads.rst",
]


def complete_blocks():
    """Every Python code block of the RUNNABLE_PAGES, as ``pytest.param(code, id="page-index")``."""
    blocks = []
    for page in RUNNABLE_PAGES:
        text = (DOCS / page).read_text()
        for index, match in enumerate(BLOCK.finditer(text)):
            code = "\n".join(line[3:] for line in match.group(1).splitlines())
            blocks.append(pytest.param(code, id=f"{page}-{index}"))
    return blocks


def test_runnable_pages_have_code():
    assert len(complete_blocks()) >= 3


@pytest.mark.parametrize("code", complete_blocks())
def test_documentation_block_runs(code, documentation_run):
    exec(compile(code, "docs", "exec"), {"__name__": "__main__"})
