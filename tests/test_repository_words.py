"""The repository speaks of the product only: results, reasons, present tense.

No tracked text file recounts how the work was organised: no numbered or ordinal stops and
passes of work ("second stop", "sixth pass", "stop 26"), no issue numbers, no account of which
machine was lent. The scan covers every tracked text file that people read: Markdown,
reStructuredText, Python (docstrings, comments and strings alike), the benchmarks' JSON (its
titles, notes and row labels are rendered into the benchmark page), configuration and the CI
script. "Early stopping", "backward pass" and Python's ``pass`` do not match.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".md", ".rst", ".py", ".txt", ".toml", ".cfg", ".json", ".in", ".yml", ".yaml"}
TEXT_NAMES = {".ci/run", "LICENSE"}
ORDINALS = (
    r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)"
    r"|this|last|earlier|previous|next"
)
FORBIDDEN = {
    "an ordinal stop or pass of work": rf"\b(?:{ORDINALS})[\s-]+(?:stop|pass)(?:es|s)?\b",
    "a numbered stop": r"\bstops?[\s#]+\d+",
    "an issue number": r"\bissues?[\s#]+\d+",
    "a machine lent": r"\b(?:was|were|is|are|be|been|being)\s+lent\b",
    "a round of work": r"\b(?:this|previous|last|next|earlier)\s+round\b|\brounds of work\b",
}
PATTERN = re.compile("|".join(f"(?:{pattern})" for pattern in FORBIDDEN.values()), re.I)


def _tracked_text_files():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    paths = [name for name in listed.decode().split("\0") if name]
    if not paths:
        pytest.skip("not a git checkout")
    return [
        path
        for path in paths
        if (Path(path).suffix in TEXT_SUFFIXES or path in TEXT_NAMES) and (ROOT / path).is_file()
    ]


def _hits(text):
    """(line number, line) of every forbidden phrase of ``text``."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if PATTERN.search(line)
    ]


@pytest.mark.parametrize(
    "phrase",
    [
        "Second stop: a validation sweep",
        "the sixth pass adopted nothing",
        "fifth-pass section",
        "Rerun (stop 26, the current code)",
        "Issue 14, last pass",
        "see issue #31",
        "No GPU was lent to the sessions",
        "the previous round's harness",
    ],
)
def test_the_patterns_catch_accounts_of_work(phrase):
    assert _hits(phrase)


@pytest.mark.parametrize(
    "phrase",
    [
        "early stopping on 10% of the rows",
        "a stopping rule; training stops after 5 epochs without improvement",
        "the backward pass of the loss",
        "    pass",
        "one pass over the data",
        "rounds to the nearest integer; 10 interleaved rounds",
        "an issue with the input",
    ],
)
def test_the_patterns_spare_the_product_words(phrase):
    assert not _hits(phrase)


def test_tracked_text_speaks_of_the_product_only():
    this_file = Path(__file__).resolve().relative_to(ROOT).as_posix()
    problems = [
        f"{path}:{number}: {line[:120]}"
        for path in _tracked_text_files()
        if path != this_file
        for number, line in _hits((ROOT / path).read_text(encoding="utf-8", errors="replace"))
    ]
    assert not problems, (
        "Tracked text recounts how the work was organised (say what the product does and why, "
        "in the present tense; history belongs to CHANGELOG.md as changes and reasons):\n"
        + "\n".join(problems)
    )
