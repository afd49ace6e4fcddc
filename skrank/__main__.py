"""``python -m skrank``: each estimator against a simple baseline on shipped data, on the CPU.

Every row fits one skrank estimator on a data set shipped with the package and compares it with a
plain baseline on held-out data; the whole job runs in about two minutes on two CPU cores. Rows are
the functions registered with :func:`_row`; ``--only NAME`` runs the rows whose estimator name
contains ``NAME``.
"""

import argparse
import sys
import time

_ROWS = []


def _row(estimator_name):
    """Register a row function returning ``(dataset, metric, baseline, baseline_value, value)``."""

    def register(function):
        _ROWS.append((estimator_name, function))
        return function

    return register


def _format_table(records):
    header = ("estimator", "data", "metric", "baseline", "baseline value", "skrank", "seconds")
    lines = [header] + [
        (
            r["estimator"],
            r["dataset"],
            r["metric"],
            r["baseline"],
            f"{r['baseline_value']:.4f}",
            f"{r['value']:.4f}",
            f"{r['seconds']:.1f}",
        )
        for r in records
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    rule = "  ".join("-" * w for w in widths)
    rendered = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)) for line in lines]
    return "\n".join([rendered[0], rule, *rendered[1:]])


def main(argv=None):
    """Run the registered rows and print the comparison table; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m skrank", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only rows whose estimator contains this")
    args = parser.parse_args(argv)
    records = []
    for estimator_name, function in _ROWS:
        if args.only.lower() not in estimator_name.lower():
            continue
        print(f"running {estimator_name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        for dataset, metric, baseline, baseline_value, value in function():
            records.append(
                {
                    "estimator": estimator_name,
                    "dataset": dataset,
                    "metric": metric,
                    "baseline": baseline,
                    "baseline_value": baseline_value,
                    "value": value,
                    "seconds": time.perf_counter() - start,
                }
            )
    if not records:
        print("no rows to run", file=sys.stderr)
        return 1
    print(_format_table(records))
    return 0


@_row("SOPRCEmbedder")
def _soprc_embedder_row():
    """Mean AUPRC of cosine retrieval among held-out MNIST digits: raw pixels vs the embedding."""
    from sklearn.model_selection import train_test_split

    from .datasets import load_mnist
    from .embedding import SOPRCEmbedder
    from .metrics import mean_auprc_score

    X, y = load_mnist(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=4000, test_size=2000, stratify=y, random_state=0
    )
    model = SOPRCEmbedder(max_epochs=8, device="cpu", random_state=0).fit(X_train, y_train)
    raw = mean_auprc_score(X_test, y_test, metric="cosine")
    return [("MNIST 4000/2000", "mean AUPRC", "raw pixels", raw, model.score(X_test, y_test))]


if __name__ == "__main__":
    sys.exit(main())
