"""Extreme classification at scale: ``SNMClassifier`` against the libraries of the field.

Methods, each with its documented defaults, each run in a child process of its own (one per
data set, method and seed) that writes its own JSON, so that a long row can be run and resumed
method by method (``--resume``):

- ``snm``: ``SNMClassifier(random_state=seed)``;
- ``snm-2-epochs``: ``SNMClassifier(max_epochs=2, random_state=seed)``, what a user with a
  budget of two passes over the data gets;
- ``pecos``: PECOS XR-Linear (libpecos), the README's quick start (PIFA label embedding,
  hierarchical clustering, ``XLinearModel.train``), in its own environment
  (``benchmarks/_pecos_env.py``);
- ``omikuji-parabel``: omikuji with its default (Parabel) settings;
- ``omikuji-bonsai``: omikuji with Bonsai's settings (unbalanced k-means, ``cluster_k=100``,
  ``max_depth=3``, as its README gives them);
- ``napkinxc-plt``: napkinXC's ``PLT`` (probabilistic label tree), ``seed=seed``;
- ``centroid``: the simplest baseline, the nearest-centroid rule of the input space: each
  label's centroid is the sum of its training rows (TF-IDF, unit norm), scaled to unit norm,
  and a row's labels are those of the centroids of highest cosine (an exact sparse product, in
  chunks of rows).

Data (``--data``): Bibtex and Corel5k (their own train/test splits; their word counts reach the
peers as sublinear TF-IDF rows of unit norm, the features their documentation assumes, while
``SNMClassifier`` applies the same weighting itself); three problems of
:func:`skrank.datasets.make_extreme_classification` shaped like the SNM paper's data sets,
scaled to a 2-core machine: ``amazoncat-13k`` (13,330 labels and 5.04 labels a row as the data
set; 50,000 features), ``wikilshtc-325k`` (10^5 labels, 3.19 labels a row; 200,000 features)
and ``amazon-670k`` (670,091 labels, 135,909 features and 5.45 labels a row as the data set),
each with 40,000 rows, a fifth held out for test, alike for every method (the data sets have
0.5-1.8 million rows: the defaults of the slowest method would take hours a fit here).
Measured per run: P@1/3/5, PSP@1/3/5 (propensities of the training labels, ``A=0.55,
B=1.5``), nDCG@5, fit wall time, prediction
wall time for the whole test set (top 5), and the peak resident memory of the child from the
end of data loading (VmHWM, reset through ``/proc/self/clear_refs``) to the end of prediction.
SNM's runs also record its search's recall of the exact top 5 where it uses an approximate one.

Usage::

    python benchmarks/bench_xmc.py --data bibtex corel5k --seeds 0 1 2
    python benchmarks/bench_xmc.py --data amazoncat-13k wikilshtc-325k amazon-670k --resume
    python benchmarks/bench_xmc.py --quick          # small rows, a smoke run
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _peak_memory import peak_resident_bytes, reset_peak
from _pecos_env import PECOS_PYTHON
from _results import RESULTS_DIR, Results
from sklearn.feature_extraction.text import TfidfTransformer

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "xmc"
RUNS = RESULTS_DIR / "bench_xmc_runs"
K = 5
METHODS = ("snm", "snm-2-epochs", "pecos", "omikuji-parabel", "omikuji-bonsai", "napkinxc-plt")
METHODS += ("centroid",)
# Generated rows: the preset, and the sizes scaled to a 2-core machine.
GENERATED = {
    "amazoncat-13k": dict(preset="amazoncat-13k", n_features=50_000, n_samples=40_000),
    "wikilshtc-325k": dict(
        preset="wikilshtc-325k", n_labels=100_000, n_features=200_000, n_samples=40_000
    ),
    "amazon-670k": dict(preset="amazon-670k", n_samples=40_000),
}
QUICK = {
    "amazoncat-13k": dict(preset="amazoncat-13k", n_features=5_000, n_samples=4_000),
    "wikilshtc-325k": dict(
        preset="wikilshtc-325k", n_labels=5_000, n_features=8_000, n_samples=4_000
    ),  # fmt: skip
    "amazon-670k": dict(preset="amazon-670k", n_labels=20_000, n_samples=3_000),
}


# ------------------------------------------------------------------------------ data
def data_directory(name, quick):
    return CACHE / (name + ("-quick" if quick else ""))


def prepare(name, quick):
    """Write the row's train/test matrices once (scipy ``.npz``); return their directory."""
    directory = data_directory(name, quick)
    if (directory / "Y_test.npz").exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    if name in ("bibtex", "corel5k"):
        from skrank.datasets import load_bibtex, load_corel5k

        loader = {"bibtex": load_bibtex, "corel5k": load_corel5k}[name]
        train, test = loader(subset="train"), loader(subset="test")
        parts = train.data, train.target, test.data, test.target
    else:
        from skrank.datasets import make_extreme_classification

        X, Y = make_extreme_classification(**(QUICK if quick else GENERATED)[name], random_state=0)
        n_train = X.shape[0] - X.shape[0] // 5
        parts = X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]
    for part, matrix in zip(("X_train", "Y_train", "X_test", "Y_test"), parts, strict=True):
        sp.save_npz(directory / f"{part}.npz", sp.csr_matrix(matrix))
    if name in ("bibtex", "corel5k"):
        # Counts: the peers read them as the TF-IDF rows their documentation assumes (SNM's
        # default input_normalization applies the same weighting itself).
        tfidf = TfidfTransformer(sublinear_tf=True).fit(parts[0])
        peers = directory / "tfidf"
        peers.mkdir(exist_ok=True)
        sp.save_npz(peers / "X_train.npz", tfidf.transform(parts[0]).tocsr())
        sp.save_npz(peers / "X_test.npz", tfidf.transform(parts[2]).tocsr())
        sp.save_npz(peers / "Y_train.npz", sp.csr_matrix(parts[1]))
    return directory


def peer_directory(directory):
    """Where the peers read their inputs: the TF-IDF rows of count data, else the data."""
    return directory / "tfidf" if (directory / "tfidf").exists() else directory


def load(directory, *parts):
    return [sp.load_npz(directory / f"{part}.npz").tocsr() for part in parts]


# ------------------------------------------------------------------------------ child process
def run_snm(directory, seed, out, max_epochs=None):
    from skrank import SNMClassifier
    from skrank.metrics._search import overlap_recall

    X_train, Y_train, X_test = load(directory, "X_train", "Y_train", "X_test")
    reset_peak()
    start = time.perf_counter()
    model = SNMClassifier(random_state=seed)
    if max_epochs is not None:
        model.set_params(max_epochs=max_epochs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X_train, Y_train)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    top = model.predict_top_k(X_test, K)
    predict_seconds = time.perf_counter() - start
    peak = peak_resident_bytes()
    extra = {
        "epochs": model.n_iter_,
        "validation_p1": [round(record["validation_score"], 4) for record in model.history_],
        "embedding_dim": model.embedding_dim_,
        "encoder_init": model.encoder_init_,
        "neighbor_weight": model.neighbor_weight_,
        "centroid_weight": model.centroid_weight_,
        "search": model.search_,
        "search_probes": model.search_probes_,
        "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:120]}" for w in caught}),
    }
    if model.search_ != "exact":
        exact = model.set_params(search="exact").predict_top_k(X_test, K)
        extra["recall_of_exact_top5"] = overlap_recall(top, exact)
    return top, fit_seconds, predict_seconds, peak, extra


def run_pecos(directory, seed, out):
    with tempfile.TemporaryDirectory() as scratch:
        inputs = peer_directory(directory)
        subprocess.run(
            [str(PECOS_PYTHON), str(HERE / "_pecos_xmc.py"), str(inputs), scratch, str(K)],
            check=True,
        )
        top = np.load(Path(scratch) / "top.npy")
        timing = json.loads((Path(scratch) / "timing.json").read_text())
    return top, timing["fit_seconds"], timing["predict_seconds"], timing["peak_bytes"], {}


def training_file(directory):
    """The peers' training rows in the repository's text format, which omikuji reads."""
    inputs = peer_directory(directory)
    path = inputs / "train.txt"
    if not path.exists():
        from skrank.datasets import dump_extreme_file

        X_train, Y_train = load(inputs, "X_train", "Y_train")
        dump_extreme_file(X_train, Y_train, path)
    return path


def run_omikuji(directory, seed, out, bonsai):
    import omikuji

    path = training_file(directory)
    (X_test,) = load(peer_directory(directory), "X_test")
    reset_peak()
    start = time.perf_counter()
    hyper = omikuji.Model.default_hyper_param()
    if bonsai:
        hyper.cluster_balanced, hyper.cluster_k, hyper.max_depth = False, 100, 3
    model = omikuji.Model.train_on_data(str(path), hyper)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    top = np.full((X_test.shape[0], K), -1, dtype=np.int64)
    for i in range(X_test.shape[0]):  # omikuji's Python API predicts one row at a time
        row = slice(X_test.indptr[i], X_test.indptr[i + 1])
        pairs = list(zip(X_test.indices[row].tolist(), X_test.data[row].tolist(), strict=True))
        labels = [label for label, _ in model.predict(pairs, top_k=K)]
        top[i, : len(labels)] = labels
    predict_seconds = time.perf_counter() - start
    return top, fit_seconds, predict_seconds, peak_resident_bytes(), {}


def run_napkinxc(directory, seed, out):
    from napkinxc.models import PLT

    X_train, Y_train, X_test = load(peer_directory(directory), "X_train", "Y_train", "X_test")
    # napkinXC reads float CSR matrices only (an int8 indicator is refused).
    X_train, Y_train, X_test = (
        sp.csr_matrix(m, dtype=np.float32) for m in (X_train, Y_train, X_test)
    )
    reset_peak()
    with tempfile.TemporaryDirectory() as model_dir:
        start = time.perf_counter()
        model = PLT(model_dir, seed=seed)
        model.fit(X_train, Y_train)
        fit_seconds = time.perf_counter() - start
        start = time.perf_counter()
        predictions = model.predict(X_test, top_k=K)
        predict_seconds = time.perf_counter() - start
    top = np.full((X_test.shape[0], K), -1, dtype=np.int64)
    for i, labels in enumerate(predictions):
        top[i, : len(labels)] = labels
    return top, fit_seconds, predict_seconds, peak_resident_bytes(), {}


def run_centroid(directory, seed, out):
    from sklearn.preprocessing import normalize

    X_train, Y_train, X_test = load(peer_directory(directory), "X_train", "Y_train", "X_test")
    X_train, X_test = X_train.astype(np.float32), X_test.astype(np.float32)
    reset_peak()
    start = time.perf_counter()
    centroids = normalize(sp.csr_matrix(Y_train.T, dtype=np.float32) @ X_train).T.tocsr()
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    rows_per_chunk = max(1, 2**26 // Y_train.shape[1])  # a dense chunk of 256 MiB at most
    top = np.empty((X_test.shape[0], K), dtype=np.int64)
    for begin in range(0, X_test.shape[0], rows_per_chunk):
        chunk = (X_test[begin : begin + rows_per_chunk] @ centroids).toarray()
        best = np.argpartition(-chunk, K, axis=1)[:, :K]
        order = np.argsort(-np.take_along_axis(chunk, best, axis=1), axis=1, kind="stable")
        top[begin : begin + chunk.shape[0]] = np.take_along_axis(best, order, axis=1)
    predict_seconds = time.perf_counter() - start
    return top, fit_seconds, predict_seconds, peak_resident_bytes(), {}


RUNNERS = {
    "snm": run_snm,
    "snm-2-epochs": functools.partial(run_snm, max_epochs=2),
    "pecos": run_pecos,
    "omikuji-parabel": lambda d, s, o: run_omikuji(d, s, o, bonsai=False),
    "omikuji-bonsai": lambda d, s, o: run_omikuji(d, s, o, bonsai=True),
    "napkinxc-plt": run_napkinxc,
    "centroid": run_centroid,
}


def scores(directory, top):
    """P@1/3/5, PSP@1/3/5 and nDCG@5 of the top-5 label indices (-1: no prediction)."""
    from skrank.metrics import label_propensities
    from skrank.metrics._extreme import ndcg_from_hits, psp_from_top
    from skrank.metrics._labels import mean_top_k_scores, top_k_hits

    Y_train, Y_test = load(directory, "Y_train", "Y_test")
    n_labels = Y_test.shape[1]
    # A missing prediction points at an extra column that no row holds.
    targets = sp.hstack([Y_test, sp.csr_matrix((Y_test.shape[0], 1))]).tocsr()
    targets.eliminate_zeros()
    top = np.where(top < 0, n_labels, top)
    propensities = np.append(label_propensities(Y_train), 1.0)
    ks = np.array([1, 3, 5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # test rows without labels are excluded
        hits, n_true = top_k_hits(targets, top)
        precision = mean_top_k_scores(hits, n_true, ks, "precision")
        psp = psp_from_top(targets, top, ks, propensities)
        ndcg = ndcg_from_hits(hits, n_true, np.array([5]))
    return {
        **{f"P@{k}": float(v) for k, v in zip(ks, precision, strict=True)},
        **{f"PSP@{k}": float(v) for k, v in zip(ks, psp, strict=True)},
        "nDCG@5": float(ndcg[0]),
    }


def child(args):
    directory = data_directory(args.data[0], args.quick)
    top, fit_seconds, predict_seconds, peak, extra = RUNNERS[args.method](
        directory, args.seeds[0], args.out
    )
    result = {
        "data": args.data[0],
        "method": args.method,
        "seed": args.seeds[0],
        **scores(directory, top),
        "fit_seconds": fit_seconds,
        "predict_seconds": predict_seconds,
        "peak_gib": None if peak is None else peak / 2**30,
        "load_average": list(os.getloadavg()),
        **extra,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


# ------------------------------------------------------------------------------ parent
def run_path(name, method, seed, quick):
    return RUNS / (name + ("-quick" if quick else "")) / f"{method}-seed{seed}.json"


def run_all(args):
    for name in args.data:
        directory = prepare(name, args.quick)
        if any(m.startswith("omikuji") for m in args.methods):
            training_file(directory)
        for method in args.methods:
            for seed in args.seeds:
                path = run_path(name, method, seed, args.quick)
                if args.resume and path.exists():
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                command = [sys.executable, __file__, "--child", "--data", name, "--method"]
                command += [method, "--seeds", str(seed), "--out", str(path)]
                if args.quick:
                    command.append("--quick")
                print(f"{name} / {method} / seed {seed} ...", flush=True)
                # The child's own output (omikuji's progress bars) goes to a log beside its JSON.
                with open(path.with_suffix(".log"), "w") as log:
                    try:
                        done = subprocess.run(command, timeout=args.timeout, stdout=log, stderr=log)
                    except subprocess.TimeoutExpired:
                        print(f"  did not finish in {args.timeout:.0f} s", flush=True)
                        record = {"data": name, "method": method, "seed": seed,
                                  "timed_out_after_seconds": args.timeout,
                                  "load_average": list(os.getloadavg())}  # fmt: skip
                        path.write_text(json.dumps(record, indent=1) + "\n")
                        continue
                if done.returncode != 0:
                    log_name = path.with_suffix(".log")
                    print(f"  failed with exit code {done.returncode}: see {log_name}", flush=True)
    report(args)


COLUMNS = ["data", "method", "runs", "P@1", "P@3", "P@5", "PSP@5", "nDCG@5", "fit s",
           "predict s", "peak GiB"]  # fmt: skip
LABELS = {
    "snm": "SNMClassifier (skrank)",
    "snm-2-epochs": "SNMClassifier(max_epochs=2)",
    "pecos": "PECOS XR-Linear",
    "omikuji-parabel": "omikuji, Parabel settings",
    "omikuji-bonsai": "omikuji, Bonsai settings",
    "napkinxc-plt": "napkinXC PLT",
    "centroid": "nearest centroid (baseline)",
}
DIGITS = {"P@1": 4, "fit s": 1, "predict s": 1, "peak GiB": 2}
RUN_KEYS = {"fit s": "fit_seconds", "predict s": "predict_seconds", "peak GiB": "peak_gib"}


def report(args):
    """One table of every row and method run (mean and std over seeds), with the shapes of the
    rows and SNM's resolved settings in its notes."""
    results = Results(
        "bench_xmc" + ("_quick" if args.quick else "") + (f"_{args.tag}" if args.tag else ""),
        packages=("omikuji", "napkinxc"),
    )
    results.data["versions"]["libpecos"] = _pecos_version()
    rows, notes = [], []
    for name in args.data:
        runs = {
            method: [
                json.loads(path.read_text())
                for seed in args.seeds
                if (path := run_path(name, method, seed, args.quick)).exists()
            ]
            for method in args.methods
        }
        for method, done in runs.items():
            finished = [run for run in done if "timed_out_after_seconds" not in run]
            if finished:
                row = [name, LABELS[method], len(finished)]
                for column in COLUMNS[3:]:
                    key = RUN_KEYS.get(column, column)
                    values = [run[key] for run in finished if run.get(key) is not None]
                    row.append(_mean_std(values, DIGITS.get(column, 3)))
                rows.append(row)
            elif done:
                limit = max(run["timed_out_after_seconds"] for run in done)
                row = [name, LABELS[method], 0] + [None] * (len(COLUMNS) - 3)
                row[COLUMNS.index("fit s")] = f"> {limit:.0f} (stopped)"
                rows.append(row)
        directory = data_directory(name, args.quick)
        X_train, Y_train, X_test = load(directory, "X_train", "Y_train", "X_test")
        note = (
            f"{name}: {X_train.shape[0]:,} training rows, {X_test.shape[0]:,} test rows, "
            f"{X_train.shape[1]:,} features ({X_train.nnz / X_train.shape[0]:.1f} non-zeros a "
            f"row), {Y_train.shape[1]:,} labels ({Y_train.nnz / Y_train.shape[0]:.2f} a row, "
            f"{np.count_nonzero(Y_train.getnnz(axis=0)):,} with a training row)"
        )
        for run in [run for run in runs.get("snm", []) if "epochs" in run][:1]:
            note += (
                f"; SNM: {run['epochs']} epochs, embedding_dim {run['embedding_dim']}, "
                f"encoder_init {run['encoder_init']}, neighbor_weight {run['neighbor_weight']}, "
                + (
                    f"centroid_weight {run['centroid_weight']}, "
                    if "centroid_weight" in run
                    else ""
                )
                + f"search {run['search']}"
                + (
                    f" (recall of the exact top 5: {run['recall_of_exact_top5']:.4f})"
                    if "recall_of_exact_top5" in run
                    else ""
                )
            )
        loads = [run["load_average"][0] for done in runs.values() for run in done]
        if loads:
            note += f"; load average {min(loads):.1f}-{max(loads):.1f} during the runs"
        notes.append(note + ".")
    title = "Test top-k labels, fit and prediction time, peak memory"
    results.add_table(title, COLUMNS, rows, notes=" ".join(notes) + " Mean ± std over seeds.")
    results.save()


def _mean_std(values, digits):
    if not values:
        return None
    if len(values) == 1:
        return round(float(values[0]), digits)
    return f"{np.mean(values):.{digits}f} ± {np.std(values):.{digits}f}"


def _pecos_version():
    try:
        return subprocess.run(
            [str(PECOS_PYTHON), "-c", "import pecos; print(pecos.__version__)"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+",
                        default=["bibtex", "corel5k", *GENERATED])  # fmt: skip
    parser.add_argument(
        "--methods",
        nargs="+",
        default=[method for method in METHODS if method != "snm-2-epochs"],
        choices=METHODS,
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--resume", action="store_true", help="skip runs whose JSON exists")
    parser.add_argument("--report-only", action="store_true", help="only gather the runs")
    parser.add_argument("--quick", action="store_true", help="small rows, a smoke run")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per child")
    parser.add_argument("--tag", help="suffix of the results file name")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
    elif args.report_only:
        report(args)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
