"""Render the JSON results of the benchmarks: the tables of ``benchmarks/README.md`` and the
results section of the repository's ``README.md``.

``benchmarks/README.md``: each block between ``<!-- results: NAME [tables=2,3] -->`` and
``<!-- end results -->`` is replaced by a line giving the date, machine, versions and command of
``results/NAME.json`` and its tables (only those numbered, from 1, where given). ``README.md``:
the block between ``<!-- results section -->`` and ``<!-- end results section -->`` holds a table
per entry of :data:`README_TABLES`, the rows and columns it names picked from results files, with
their commands and machines. The rest of both pages is prose written by hand.

Usage::

    python benchmarks/report.py           # rewrite both pages
    python benchmarks/report.py --check   # exit 1 if either page is not up to date
"""

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARK_PAGE = HERE / "README.md"
PROJECT_README = HERE.parent / "README.md"
RESULTS_DIR = HERE / "results"
BLOCK = re.compile(
    r"(<!-- results: (?P<name>[\w.-]+)(?: tables=(?P<tables>\d+(?:,\d+)*))? -->\n)"
    r"(?P<body>.*?)(<!-- end results -->)",
    re.DOTALL,
)
README_BLOCK = re.compile(
    r"(<!-- results section -->\n)(?P<body>.*?)(<!-- end results section -->)", re.DOTALL
)


@dataclass(frozen=True)
class Rows:
    """Rows of the table of ``results/<benchmark>.json`` whose title starts with ``table``: the
    ``columns`` shown, the ``rows`` by their leading cells (e.g. ``("SOPRCEmbedder",)``), with
    ``names`` in place of each row's first shown cell and ``label`` first where given."""

    benchmark: str
    table: str
    columns: tuple
    rows: tuple
    names: tuple | None = None
    label: str | None = None


@dataclass(frozen=True)
class ReadmeTable:
    """One table of the project's README: a title, its columns, and the rows it shows."""

    title: str
    columns: tuple
    parts: tuple


def named(benchmark, table, columns, named_rows, label=None):
    """:class:`Rows` from ``{leading cells: name shown}``."""
    return Rows(benchmark, table, columns, tuple(named_rows), tuple(named_rows.values()), label)


XMC_NAMES = {
    "SNMClassifier (skrank)": "SNMClassifier",
    "omikuji, Bonsai settings": "omikuji (Bonsai settings)",
    "PECOS XR-Linear": "PECOS XR-Linear",
}
XMC_GENERATED = {
    **XMC_NAMES,
    "nearest centroid (baseline)": "nearest centroid of the inputs (baseline)",
}
XMC_ROWS = (
    ("bench_xmc_debtags", "debtags", "debtags (3 seeds)", XMC_NAMES),
    (
        "bench_xmc_debian_suggests_3_seeds_side_by_side",
        "debian-suggests",
        "debian-suggests (3 seeds)",
        XMC_NAMES,
    ),
    ("bench_xmc_bibtex_corel5k", "bibtex", "Bibtex (3 seeds)", XMC_NAMES),
    ("bench_xmc_bibtex_corel5k", "corel5k", "Corel5k (3 seeds)", XMC_NAMES),
    ("bench_xmc_generated", "amazoncat-13k", "AmazonCat-13K shape", XMC_GENERATED),
)
XMC_COLUMNS = ("method", "P@1", "P@5", "PSP@5", "fit s", "predict s")
PAIRS = "pair task, MNIST 3k/2k, PCA-32 (not centred): mean"
README_TABLES = (
    ReadmeTable(
        "SOPRCEmbedder against pytorch-metric-learning's losses: retrieval (mean AUPRC)",
        ("data", "method", "mean AUPRC", "Recall@1", "s / fit"),
        (
            named("bench_soprc_disjoint", "Class-disjoint retrieval",
                  ("method", "test mAUPRC", "test R@1", "s / fit"),
                  {("SOPRCEmbedder",): "SOPRCEmbedder",
                   ("MultiSimilarity, tuned",): "pytorch-metric-learning MultiSimilarity, tuned"},
                  "unseen classes (3 seeds)"),
            named("bench_soprc_mnist_seeds10", "Same-class MNIST retrieval",
                  ("loss", "mean AUPRC", "R@1", "s / fit"),
                  {("SOPRC (skrank)",): "SOPRCEmbedder",
                   ("FastAP (PML)",): "pytorch-metric-learning FastAP"},
                  "MNIST, seen classes (10 seeds)"),
        ),
    ),
    ReadmeTable(
        "SNMClassifier against the extreme-classification libraries: test top-k labels",
        ("data", *XMC_COLUMNS),
        tuple(named(benchmark, "Test top-k labels", XMC_COLUMNS,
                    {(data, method): name for method, name in names.items()}, label)
              for benchmark, data, label, names in XMC_ROWS),
    ),
    ReadmeTable(
        "SNMClassifier's label sets and probabilities: test example-based F1 and top-5 ECE",
        ("data", "method", "F1 of predict", "F1 of the best fixed top-k", "top-5 ECE"),
        tuple(named("bench_xmc_debtags_debian_suggests", "Test label sets and calibration",
                    ("method", "F1 predict", "F1 top-k", "ECE@5"),
                    {(data, method): name for method, name in names.items()}, label)
              for data, label, names in (
                  ("debtags", "debtags (3 seeds)",
                   {"SNMClassifier (skrank)": "SNMClassifier",
                    "OneVsRestClassifier(LinearSVC(C=0.3))":
                        "one-vs-rest LinearSVC (predict: C chosen by F1)"}),
                  ("debian-suggests", "debian-suggests (3 seeds)",
                   {"SNMClassifier (skrank)": "SNMClassifier"}),
              )),
    ),
    ReadmeTable(
        "Exact retrieval metrics (mean AUPRC, Recall@k, MAP@R at once), one thread",
        ("method", "items", "time (s)", "x matrix-product floor", "peak memory (MiB)"),
        (
            named("bench_metrics", "Exact retrieval metrics",
                  ("method", "N", "time (s)", "time / floor", "peak RSS (MiB)"),
                  {(10_000, "torch"): "skrank", (10_000, "pml"): "pytorch-metric-learning",
                   (100_000, "torch"): "skrank"}),
        ),
    ),
    ReadmeTable(
        "PointwiseROCSimilarity against the cosine similarity: MNIST test pairs at a fixed FPR",
        ("method", "TPR at 1% FPR", "TPR at 5% FPR", "5-NN accuracy", "fit s"),
        (
            named("bench_pair_learners", PAIRS,
                  ("method", "TPR@FPR=0.01", "TPR@FPR=0.05", "5-NN accuracy", "fit seconds"),
                  {("cosine",): "cosine similarity (baseline)",
                   ("PointwiseROCSimilarity, defaults",): "PointwiseROCSimilarity, defaults",
                   ("PointwiseROCSimilarity, CV-selected",):
                       "PointwiseROCSimilarity, chosen by CV (time: the whole search)"}),
        ),
    ),
    ReadmeTable(
        "PointwiseROCSimilarity's closed-form solve against cvxpy (Clarabel), MNIST",
        ("dimension", "skrank KKT solve (s)", "cvxpy (s)", "speed-up", "relative difference"),
        (Rows("bench_pointwise_roc", "2. KKT closed form",
              ("d", "KKT (s)", "cvxpy (s)", "ratio", "rel. diff. A"), ((784,),)),),
    ),
    ReadmeTable(
        "MMC against scikit-learn's NCA, metric-learn and the Euclidean metric",
        ("task (score)", "method", "score", "fit s"),
        (
            named("bench_mmc", "Digits n=1797", ("method", "figure of merit", "fit s"),
                  {("skrank MMC, all pairs",): "MMC, exact over all pairs",
                   ("metric-learn, 20000 constraints",): "metric-learn MMC, 20,000 constraints"},
                  "digits (MMC's figure of merit)"),
            named("bench_pair_learners", "k-NN task, MNIST 3k/2k, PCA 90%: mean",
                  ("method", "5-NN accuracy", "fit seconds"),
                  {("Euclidean",): "Euclidean metric", ("MMC, defaults",): "MMC, defaults",
                   ("MMC, paper's criterion",): "MMC, paper's criterion",
                   ("MMC, CV-selected",):
                       "MMC, chosen by repeated 5-fold CV (time: the whole search)",
                   ("sklearn NCA (max_iter=100)",): "scikit-learn NCA (max_iter=100)",
                   ("metric-learn LMNN",): "metric-learn LMNN"},
                  "MNIST (5-NN accuracy, 5 seeds)"),
        ),
    ),
)  # fmt: skip
"""The tables of the README's results section, in order."""


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


def _markdown_table(columns, rows):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return lines


def command(results):
    """The run's command as typed from the repository root (scripts run from ``benchmarks/``
    recorded ``python bench_x.py``)."""
    return re.sub(r"^(\S*python\S*) (bench_\w+\.py)", r"\1 benchmarks/\2", results["command"])


def machine(results):
    """The run's machine in a few words: CPUs and GPU."""
    described = results["machine"]
    gpu = described.get("gpu")
    return f"{described.get('cpu_count')} CPUs, " + (f"GPU {gpu}" if gpu else "no GPU")


def render(results, tables=None):
    """Markdown for one results file: a provenance line, then each table with its notes
    (``tables``: the numbers, from 1, of the tables to render; all when None)."""
    described, versions = results["machine"], results["versions"]
    peers = ", ".join(
        f"{name} {version}"
        for name, version in versions.items()
        if name not in ("python", "skrank", "skrank_commit") and version
    )
    gpu = described.get("gpu")
    cpu = f"{described.get('cpu_count')} CPUs" + (f", GPU {gpu}" if gpu else "")
    load = described.get("load_average_at_start")
    all_tables = results["tables"]
    numbers = tables or range(1, len(all_tables) + 1)
    if wrong := [number for number in numbers if not 1 <= number <= len(all_tables)]:
        name, count = results["benchmark"], len(all_tables)
        raise ValueError(f"{name}.json has {count} tables, not a table {wrong[0]}.")
    shown = f" (tables {', '.join(map(str, tables))} of {len(all_tables)} shown)" if tables else ""
    lines = [
        f"Run {results['date'][:10]} on {described.get('host')} ({cpu}, "
        f"load {load[0] if load else 'n/a'} at start); skrank {versions.get('skrank')} "
        f"({versions.get('skrank_commit')}), Python {versions.get('python')}, {peers}. "
        f"Command: `{command(results)}`; raw results: "
        f"[`results/{results['benchmark']}.json`](results/{results['benchmark']}.json){shown}.",
        "",
    ]
    for number in numbers:
        table = all_tables[number - 1]
        lines.append(f"**{table['title']}**")  # a table may follow a paragraph's line
        lines += _markdown_table(table["columns"], table["rows"])
        if table.get("notes"):
            lines += ["", table["notes"]]
        lines.append("")
    return "\n".join(lines)


def _load(name, results_dir):
    path = results_dir / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"A results block names {path.name}, which does not exist.")
    return json.loads(path.read_text())


def updated_benchmark_page(text, results_dir=RESULTS_DIR):
    """The benchmark page with every results block re-rendered; raises if a file is missing."""

    def replace(match):
        tables = [int(number) for number in match["tables"].split(",")] if match["tables"] else None
        return match.group(1) + render(_load(match["name"], results_dir), tables) + match.group(5)

    return BLOCK.sub(replace, text)


def _pick_rows(results, part):
    """The rows ``part`` names, in its order, each cut to its columns (and labelled)."""
    titles = [table["title"] for table in results["tables"]]
    matching = [table for table in results["tables"] if table["title"].startswith(part.table)]
    if len(matching) != 1:
        raise ValueError(
            f"{part.benchmark}.json has {len(matching)} tables titled {part.table!r}...: {titles}"
        )
    table = matching[0]
    missing = [column for column in part.columns if column not in table["columns"]]
    if missing:
        raise ValueError(f"{part.benchmark}.json, {table['title']!r}: no columns {missing}.")
    indices = [table["columns"].index(column) for column in part.columns]
    if part.names is not None and len(part.names) != len(part.rows):
        raise ValueError(f"{part.benchmark}: {len(part.names)} names for {len(part.rows)} rows.")
    picked = []
    for position, key in enumerate(part.rows):
        found = [row for row in table["rows"] if tuple(row[: len(key)]) == tuple(key)]
        if len(found) != 1:
            raise ValueError(
                f"{part.benchmark}.json, {table['title']!r}: {len(found)} rows start with {key}."
            )
        cells = [found[0][index] for index in indices]
        if part.names is not None:
            cells[0] = part.names[position]
        picked.append(([part.label] if part.label is not None else []) + cells)
    return picked


def render_readme_table(spec, results_dir=RESULTS_DIR):
    """Markdown for one table of the README: a title line with the commands and machines."""
    rows, runs = [], {}
    for part in spec.parts:
        results = _load(part.benchmark, results_dir)
        rows += _pick_rows(results, part)
        runs.setdefault(part.benchmark, results)
    for row in rows:
        if len(row) != len(spec.columns):
            raise ValueError(f"{spec.title!r}: a row of {len(row)} cells for {spec.columns}.")
    where = {(results["date"][:10], machine(results)) for results in runs.values()}
    if len(where) == 1:  # one date and machine for every command: said once
        commands = "; ".join(f"`{command(results)}`" for results in runs.values())
        provenance = f"{commands} ({', '.join(where.pop())})"
    else:
        provenance = "; ".join(
            f"`{command(results)}` ({results['date'][:10]}, {machine(results)})"
            for results in runs.values()
        )
    return "\n".join([f"**{spec.title}**: {provenance}.", *_markdown_table(spec.columns, rows)])


def updated_readme(text, tables=README_TABLES, results_dir=RESULTS_DIR):
    """The project's README with its results section re-rendered."""
    if not README_BLOCK.search(text):
        raise ValueError("README.md has no '<!-- results section -->' block.")
    body = "\n\n".join(render_readme_table(spec, results_dir) for spec in tables)
    return README_BLOCK.sub(lambda match: match.group(1) + body + "\n" + match.group(3), text)


PAGES = {BENCHMARK_PAGE: updated_benchmark_page, PROJECT_README: updated_readme}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a page is stale")
    args = parser.parse_args(argv)
    stale = []
    for page, update in PAGES.items():
        text = page.read_text()
        if (new_text := update(text)) == text:
            continue
        if args.check:
            stale.append(page.relative_to(HERE.parent).as_posix())
        else:
            page.write_text(new_text)
            print(f"{page.relative_to(HERE.parent)} updated")
    if stale:
        print(f"not up to date: {', '.join(stale)}: run python benchmarks/report.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
