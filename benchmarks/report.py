"""Render the JSON results of the benchmarks into the tables of ``benchmarks/README.md``.

Each block of the README between ``<!-- results: NAME -->`` and ``<!-- end results -->`` is
replaced by the tables of ``benchmarks/results/NAME.json``, with a line giving the date, machine,
versions and command of that run. The rest of the README is prose written by hand.

Usage::

    python benchmarks/report.py           # rewrite benchmarks/README.md
    python benchmarks/report.py --check   # exit 1 if the README is not up to date
"""

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RESULTS_DIR = HERE / "results"
BLOCK = re.compile(
    r"(<!-- results: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end results -->)", re.DOTALL
)


def _cell(value):
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN
            return "n/a"
        magnitude = abs(value)
        if magnitude != 0 and (magnitude >= 1e5 or magnitude < 1e-3):
            return f"{value:.3g}"
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    return str(value).replace("|", "\\|")


def render(results):
    """Markdown for one results file: a provenance line, then each table with its notes."""
    machine, versions = results["machine"], results["versions"]
    peers = ", ".join(
        f"{name} {version}"
        for name, version in versions.items()
        if name not in ("python", "skrank", "skrank_commit") and version
    )
    cpu = f"{machine.get('cpu_count')} CPUs"
    if machine.get("gpu"):
        cpu += f", GPU {machine['gpu']}"
    load = machine.get("load_average_at_start")
    lines = [
        f"Run {results['date'][:10]} on {machine.get('host')} ({cpu}, "
        f"load {load[0] if load else 'n/a'} at start); skrank {versions.get('skrank')} "
        f"({versions.get('skrank_commit')}), Python {versions.get('python')}, {peers}.",
        f"Command: `{results['command']}`; raw results: "
        f"[`results/{results['benchmark']}.json`](results/{results['benchmark']}.json).",
        "",
    ]
    for table in results["tables"]:
        lines.append(f"**{table['title']}**")
        lines.append("")
        lines.append("| " + " | ".join(table["columns"]) + " |")
        lines.append("|" + "---|" * len(table["columns"]))
        for row in table["rows"]:
            lines.append("| " + " | ".join(_cell(value) for value in row) + " |")
        if table.get("notes"):
            lines.append("")
            lines.append(table["notes"])
        lines.append("")
    return "\n".join(lines)


def updated_readme(text, results_dir=RESULTS_DIR):
    """The README text with every results block re-rendered; raises if a file is missing."""

    def replace(match):
        path = results_dir / f"{match['name']}.json"
        if not path.exists():
            raise FileNotFoundError(f"README block names {path.name}, which does not exist.")
        return match.group(1) + render(json.loads(path.read_text())) + match.group(4)

    return BLOCK.sub(replace, text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the README is stale")
    args = parser.parse_args(argv)
    text = README.read_text()
    new_text = updated_readme(text)
    if args.check:
        if new_text != text:
            print("benchmarks/README.md is not up to date: run python benchmarks/report.py")
            return 1
        return 0
    README.write_text(new_text)
    print(f"{README} updated ({len(BLOCK.findall(new_text))} result blocks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
