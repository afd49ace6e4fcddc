"""The shape of the pages users read first: estimator pages that open with what the estimator is
for, the evidence on pages of its own, a README that says which estimator to use before its
results, and install instructions that agree with ``pyproject.toml``."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ESTIMATOR_PAGES = ["soprc", "snm", "pointwise_roc", "mmc"]
MAX_ESTIMATOR_PAGE_LINES = 250
MAX_BENCHMARK_PAGE_LINES = 815  # the image tables (2 and 3 digits) and the XMC label-set tables


@pytest.mark.parametrize("name", ESTIMATOR_PAGES)
def test_an_estimator_page_opens_with_its_use_and_a_first_fit(name):
    text = (ROOT / "docs" / "user_guide" / f"{name}.rst").read_text()
    lines = text.splitlines()
    assert len(lines) <= MAX_ESTIMATOR_PAGE_LINES, f"{name}.rst has {len(lines)} lines"
    # A section's title is the line above its underline of dashes.
    sections = [lines[i - 1] for i, line in enumerate(lines) if line and set(line) == {"-"}]
    assert sections[:4] == [
        "When to use it",
        "When a peer is better",
        "A first fit",
        "The parameters that matter",
    ], sections
    first_fit = text[text.index("A first fit") : text.index("The parameters that matter")]
    assert ".. code-block:: python" in first_fit
    assert f":ref:`{name}_defaults`" in text, "the page links its evidence"


def test_the_defaults_pages_exist_for_every_estimator():
    for name in ESTIMATOR_PAGES:
        page = (ROOT / "docs" / "defaults" / f"{name}.rst").read_text()
        assert page.startswith(f".. _{name}_defaults:")


def test_the_benchmark_page_stays_a_results_page():
    lines = (ROOT / "benchmarks" / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_BENCHMARK_PAGE_LINES


def test_the_readme_says_what_each_estimator_is_for_before_its_results():
    readme = (ROOT / "README.md").read_text()
    results = readme.index("## Results")
    for section in ("## What each estimator is for", "## Documentation"):
        assert readme.index(section) < results
    guide = readme[: readme.index("## Quick start")]
    for peer in ("PECOS", "omikuji", "napkinXC", "pytorch-metric-learning", "metric-learn"):
        assert peer in guide
    for page in ESTIMATOR_PAGES:
        assert f"(docs/user_guide/{page}.rst)" in guide


def _tracked_text():
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60
        ).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    for path in filter(None, listed.split("\0")):
        if Path(path).suffix in {".md", ".rst", ".py", ".toml"} and (ROOT / path).is_file():
            yield path, (ROOT / path).read_text(encoding="utf-8", errors="replace")


def test_install_instructions_install_from_the_checkout():
    # skrank is not on a package index: "pip install skrank[...]" fails for every user.
    from_an_index = re.compile(r"pip install\s+['\"]?skrank\b")
    this_file = Path(__file__).name
    hits = [
        f"{path}:{number}"
        for path, text in _tracked_text()
        if not path.endswith(this_file)
        for number, line in enumerate(text.splitlines(), start=1)
        if from_an_index.search(line)
    ]
    assert not hits, hits


def test_the_extras_the_docs_name_are_those_of_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    install = (ROOT / "docs" / "install.rst").read_text()
    table = install[install.index("   * - extra") : install.index("Nothing is downloaded")]
    documented = set(re.findall(r"^   \* - ``(\w+)``", table, flags=re.M))
    assert documented == extras
    readme_extras = re.search(r"Optional extras.*?\n\n", (ROOT / "README.md").read_text(), re.S)
    assert set(re.findall(r"`(\w+)`", readme_extras.group(0))) >= extras
