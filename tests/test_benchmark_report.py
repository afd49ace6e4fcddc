"""benchmarks/report.py: the benchmark page and the README's results section are rendered from
the benchmarks' JSON, and ``--check`` catches a page that no longer matches it."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_report():
    spec = importlib.util.spec_from_file_location("report", ROOT / "benchmarks" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _load_report()


def _write_results(directory, name="bench_toy", command="python bench_toy.py --fast"):
    results = {
        "benchmark": name,
        "command": command,
        "date": "2026-01-02T03:04:05+00:00",
        "machine": {"host": "box", "cpu_count": 4, "gpu": None, "load_average_at_start": [0.5]},
        "versions": {"python": "3.11", "skrank": "0.2", "skrank_commit": "abc", "torch": "2"},
        "tables": [
            {
                "title": "Speed on toy data",
                "columns": ["method", "size", "seconds"],
                "rows": [["skrank", 10, 0.5], ["peer", 10, 2.0], ["skrank", 100, 5.0]],
                "notes": "Median of 3.",
            },
            {"title": "Accuracy", "columns": ["method", "score"], "rows": [["skrank", 0.9]]},
        ],
        "figures": {},
    }
    (directory / f"{name}.json").write_text(json.dumps(results))


def test_the_repository_pages_match_their_json():
    """What CI runs (.ci/run): both pages are up to date with benchmarks/results/*.json."""
    assert report.main(["--check"]) == 0


def test_a_block_renders_its_tables_and_a_selection(tmp_path):
    _write_results(tmp_path)
    page = "intro\n<!-- results: bench_toy -->\nstale\n<!-- end results -->\nend\n"
    rendered = report.updated_benchmark_page(page, tmp_path)
    assert "stale" not in rendered and rendered.startswith("intro\n") and rendered.endswith("end\n")
    assert "**Speed on toy data**" in rendered and "**Accuracy**" in rendered
    assert "| peer | 10 | 2 |" in rendered and "Median of 3." in rendered
    # The command as typed from the repository root, and the machine.
    assert "`python benchmarks/bench_toy.py --fast`" in rendered and "4 CPUs" in rendered
    second_only = page.replace("bench_toy", "bench_toy tables=2")
    selected = report.updated_benchmark_page(second_only, tmp_path)
    assert "**Accuracy**" in selected and "Speed on toy data" not in selected
    assert "tables 2 of 2 shown" in selected
    with pytest.raises(ValueError, match="has 2 tables, not a table 3"):
        report.updated_benchmark_page(page.replace("bench_toy", "bench_toy tables=3"), tmp_path)
    with pytest.raises(FileNotFoundError, match="bench_gone.json"):
        report.updated_benchmark_page(page.replace("bench_toy", "bench_gone"), tmp_path)


def test_a_readme_table_picks_rows_and_columns(tmp_path):
    _write_results(tmp_path)
    spec = report.ReadmeTable(
        "Toy speed",
        ("data", "library", "seconds"),
        (
            report.Rows(
                "bench_toy",
                "Speed",
                ("method", "seconds"),
                (("skrank", 100), ("peer",)),
                names=("skrank", "the peer"),
                label="toy",
            ),
        ),
    )
    readme = "# x\n<!-- results section -->\nold\n<!-- end results section -->\nrest\n"
    rendered = report.updated_readme(readme, (spec,), tmp_path)
    assert rendered.startswith("# x\n<!-- results section -->\n**Toy speed**: ")
    assert "`python benchmarks/bench_toy.py --fast` (2026-01-02, 4 CPUs, no GPU)" in rendered
    body = rendered.split("\n")
    assert body[3:7] == [
        "| data | library | seconds |",
        "|---|---|---|",
        "| toy | skrank | 5 |",
        "| toy | the peer | 2 |",
    ]
    assert rendered.endswith("<!-- end results section -->\nrest\n") and "old" not in rendered
    # A row, a column or a table the JSON no longer has is an error, not a silent gap.
    for change in (
        {"rows": (("skrank", 1000),)},
        {"rows": (("skrank",),)},  # two rows start with it
        {"columns": ("method", "minutes")},
        {"table": "Latency"},
    ):
        part = report.Rows(**{**spec.parts[0].__dict__, "names": None, **change})
        broken = report.ReadmeTable(spec.title, spec.columns, (part,))
        with pytest.raises(ValueError):
            report.updated_readme(readme, (broken,), tmp_path)
