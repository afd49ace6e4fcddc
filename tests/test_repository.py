"""Consistency of the repository's entry points: the README's commands and CI."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_setup_commands():
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", readme, flags=re.S)
    assert first_block, "README.md must open with a bash block of set-up commands"
    return [line.strip() for line in first_block.group(1).splitlines() if line.strip()]


def test_readme_leads_with_two_setup_commands():
    commands = _readme_setup_commands()
    assert len(commands) == 2
    install_and_run, install_and_test = commands
    assert "torch==2.13.0" in install_and_run and install_and_run.endswith("python -m skrank")
    assert "[test]" in install_and_test and "pytest" in install_and_test


def test_ci_runs_the_readme_test_command():
    ci_script = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci_script.splitlines()]
    assert _readme_setup_commands()[1] in ci_lines
    assert "set -euo pipefail" in ci_script
