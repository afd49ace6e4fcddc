"""Extreme classification at scale: ``SNMClassifier`` against the libraries of the field.

Methods (:data:`METHODS`, ``--methods``, each with its documented defaults), data (``--data``,
:func:`_data.xmc_split`), what is measured and the targets: see benchmarks/README.md, section
"Extreme classification"; the tables' notes say how each score is computed. ``linear`` runs on
debtags, Bibtex and Corel5k only (the others' binary SVMs exceed a 2-core machine's budget). One
child process a run (data set, method, seed), its own JSON under ``results/bench_xmc_runs``
(``--resume``); each test run has a run on the validation split (20 % of the training rows),
where the fixed top-k of best F1 is chosen (``--splits``).

Usage::

    python benchmarks/bench_xmc.py --data debtags --tag debtags
    python benchmarks/bench_xmc.py --data bibtex corel5k --resume --tag bibtex_corel5k
    python benchmarks/bench_xmc.py --data amazoncat-13k wikilshtc-325k amazon-670k --seeds 0 \
        --resume --tag generated
    python benchmarks/bench_xmc.py --quick          # small rows, a smoke run
"""

import atexit
import dataclasses
import functools
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _data import TEXT_LABELS, XMC_DATA, tfidf, xmc_split
from _harness import (
    PECOS_PYTHON,
    ChildFailed,
    Method,
    PeakMemory,
    gib,
    parser,
    results_name,
    run_in_child,
    timed,
    timed_cpu,
    versions_in,
)
from _results import RESULTS_DIR, Results, summary

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "xmc"
RUNS = RESULTS_DIR / "bench_xmc_runs"
K = 5  # the top K labels for P@k and PSP@k, up to TOP_SETS for the F1 of a fixed top-k
TOP_SETS = 10
VALIDATION_FRACTION = 0.2  # of the training rows (random_state=0): a fixed top-k's, C's choice
# The buckets of a label's training rows in which the recall of the top 5 is reported.
FREQUENCY_BUCKETS = ((0, 0), (1, 1), (2, 5), (6, 20), (21, None))
REAL = (*TEXT_LABELS, "bibtex", "corel5k")
LINEAR_DATA = ("debtags", "bibtex", "corel5k")  # where the one-vs-rest SVMs fit the budget
LINEAR_C = (0.1, 0.3, 1.0, 3.0, 10.0)
PARTS = ("X_train", "Y_train", "X_test")
ALL_PARTS = (*PARTS, "Y_test")
# Threads of every method: OMP_NUM_THREADS (torch and BLAS read it; PECOS, omikuji and napkinXC
# are given it), else each library's default.
THREADS = int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS") else None


# ------------------------------------------------------------------------------ data
def folder(name, quick, split="test"):
    """The folder of a data set's matrices and of its runs."""
    return name + ("-validation" if split == "validation" else "") + ("-quick" if quick else "")


def save(directory, parts):
    directory.mkdir(parents=True, exist_ok=True)
    for part, matrix in parts.items():
        sp.save_npz(directory / f"{part}.npz", matrix)


def prepare(name, quick):
    """Write the data set's train/test matrices once (scipy ``.npz``); return their directory."""
    directory = CACHE / folder(name, quick)
    if not (directory / "Y_test.npz").exists():
        parts = dict(zip(ALL_PARTS, xmc_split(name, quick), strict=True))
        save(directory, parts)
        if name in ("bibtex", "corel5k"):  # counts: the peers read TF-IDF rows
            X_train, X_test = tfidf(parts["X_train"], parts["X_test"])
            peers = {"X_train": X_train, "X_test": X_test, "Y_train": parts["Y_train"]}
            save(directory / "tfidf", peers)
    return directory


def validation_split(n_rows):
    """The rows that fit and the rows held out of ``n_rows`` training rows."""
    from sklearn.model_selection import train_test_split

    return train_test_split(np.arange(n_rows), test_size=VALIDATION_FRACTION, random_state=0)


def prepare_validation(name, quick):
    """Write the validation split of ``prepare(name, quick)``'s training rows as a data set of
    its own (its held-out rows as ``X_test``, ``Y_test``); return its directory."""
    directory = CACHE / folder(name, quick, "validation")
    if (directory / "Y_test.npz").exists():
        return directory
    source = prepare(name, quick)
    fit, held_out = validation_split(load(source, "Y_train")[0].shape[0])
    for inputs, outputs in ((source, directory), (source / "tfidf", directory / "tfidf")):
        if inputs.exists():
            X_train, Y_train = load(inputs, "X_train", "Y_train")
            parts = {"X_train": X_train[fit], "Y_train": Y_train[fit], "X_test": X_train[held_out]}
            if inputs == source:
                parts["Y_test"] = Y_train[held_out]
            save(outputs, {part: matrix.sorted_indices() for part, matrix in parts.items()})
    return directory


def peer_directory(directory):
    """Where the peers read their inputs: the TF-IDF rows of count data, else the data."""
    return directory / "tfidf" if (directory / "tfidf").exists() else directory


def load(directory, *parts):
    return [sp.load_npz(directory / f"{part}.npz").tocsr() for part in parts]


def training_file(directory):
    """The training rows of ``directory`` in the repository's text format, which omikuji reads."""
    path = directory / "train.txt"
    if not path.exists():
        from skrank.datasets import dump_extreme_file

        dump_extreme_file(*load(directory, "X_train", "Y_train"), path)
    return path


# ------------------------------------------------------------------------------ methods
@dataclasses.dataclass(frozen=True)
class XMCMethod(Method):
    """A row of the tables: ``fit(*training, seed, **params)`` measured, then ``predict(model,
    X_test)`` timed: the top-TOP_SETS labels (``"top"``, best first, -1 where fewer) and any
    probabilities (``"top_proba"``). ``inputs(directory)``: ``(training, X_test)``, read before
    (default: :func:`load_rows`); ``select(*training, seed)``: ``(fit parameters, what to
    record)``, timed apart before the fit; ``describe(model, training, X_test, found)``: what
    else a run records (e.g. ``predict``'s label sets, ``"sets"``), outside the measured region;
    ``own_rows``: the counts of Bibtex and Corel5k, not their TF-IDF rows."""

    inputs: object = None
    select: object = None
    describe: object = None
    own_rows: bool = False


def fit_snm(X_train, Y_train, seed, **params):
    import torch._dynamo  # noqa: F401  (imported by torch.optim's first optimiser: an import)

    from skrank import SNMClassifier

    return SNMClassifier(random_state=seed, **params).fit(X_train, Y_train)


def predict_snm(model, X_test):
    return {"top": model.predict_top_k(X_test, TOP_SETS)}


def describe_snm(model, training, X_test, found):
    top = found["top"][:, :K]
    found = {"sets": sp.csr_matrix(model.predict(X_test)), "threshold": model.threshold_}
    found["top_proba"] = model.predict_top_k(X_test, TOP_SETS, return_proba=True)[1]
    found["epochs"] = model.n_iter_
    found["validation_scores"] = [round(entry["validation_score"], 4) for entry in model.history_]
    found["settings"] = {  # the resolved values of the parameters (fitted scalars)
        name: value
        for name, value in vars(model).items()
        if name.endswith("_")
        and not name.startswith("_")
        and isinstance(value, str | int | float | bool | type(None))
    }
    if model.search_ != "exact":
        exact = model.set_params(search="exact").predict_top_k(X_test, K)
        found["recall_of_exact_top5"] = float((top[:, :, None] == exact[:, None, :]).any(1).mean())
    return found


def omikuji_inputs(directory):
    """omikuji reads its training rows from a file in the repository's text format."""
    return (str(training_file(directory)),), load(directory, "X_test")[0]


def load_rows(directory, dtype=None):
    """The training rows and labels, and the test rows (of ``dtype`` where given)."""
    found = [m if dtype is None else m.astype(dtype) for m in load(directory, *PARTS)]
    return found[:2], found[2]


def fit_omikuji(path, seed, **settings):
    import omikuji

    hyper = omikuji.Model.default_hyper_param()
    for name, value in settings.items():
        setattr(hyper, name, value)
    return omikuji.Model.train_on_data(path, hyper, THREADS)


def predict_omikuji(model, X_test):
    top = np.full((X_test.shape[0], TOP_SETS), -1, dtype=np.int64)
    for i in range(X_test.shape[0]):  # omikuji's Python API predicts one row at a time
        row = slice(X_test.indptr[i], X_test.indptr[i + 1])
        pairs = list(zip(X_test.indices[row].tolist(), X_test.data[row].tolist(), strict=True))
        labels = [label for label, _ in model.predict(pairs, top_k=TOP_SETS)]
        top[i, : len(labels)] = labels
    return {"top": top}


def fit_napkinxc(X_train, Y_train, seed):
    from napkinxc.models import PLT

    folder = tempfile.mkdtemp()  # the model's files, removed when the run's process ends
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    model = PLT(folder, seed=seed, threads=THREADS or 0)
    model.fit(X_train, Y_train)
    return model


def predict_napkinxc(model, X_test):
    # The labels with PLT's estimates of their probabilities (predict's labels, as fast).
    predictions = model.predict_proba(X_test, top_k=TOP_SETS)
    top = np.full((X_test.shape[0], TOP_SETS), -1, dtype=np.int64)
    top_proba = np.zeros(top.shape)
    for i, pairs in enumerate(predictions):
        top[i, : len(pairs)] = [label for label, _ in pairs]
        top_proba[i, : len(pairs)] = [probability for _, probability in pairs]
    return {"top": top, "top_proba": top_proba}


def top_k_in_chunks(X, n_labels, score, k=TOP_SETS):
    """The top-``k`` columns of ``score(rows)`` (dense scores of a chunk of rows of ``X``), best
    first, computed in chunks of rows whose scores take 256 MiB at most."""
    rows_per_chunk = max(1, 2**26 // n_labels)
    top = np.empty((X.shape[0], k), dtype=np.int64)
    for begin in range(0, X.shape[0], rows_per_chunk):
        chunk = score(X[begin : begin + rows_per_chunk])
        best = np.argpartition(-chunk, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(chunk, best, axis=1), axis=1, kind="stable")
        top[begin : begin + chunk.shape[0]] = np.take_along_axis(best, order, axis=1)
    return top


def fit_centroid(X_train, Y_train, seed):
    """Each label's centroid of its unit-norm rows, as the columns of a matrix."""
    from sklearn.preprocessing import normalize

    return normalize(sp.csr_matrix(Y_train.T, dtype=np.float32) @ X_train).T.tocsr()


def predict_centroid(centroids, X_test):
    return {"top": top_k_in_chunks(X_test, centroids.shape[1], lambda X: (X @ centroids).toarray())}


@dataclasses.dataclass
class OneVsRest:
    """One-vs-rest ``LinearSVC`` fitted on the labels ``trained`` (those with a training row) of
    ``n_labels``: the top-k labels (those without a training row scoring lowest) and the label
    sets of its ``predict`` (each SVM's decision above 0) as an indicator of every label."""

    model: object
    trained: np.ndarray
    n_labels: int

    @classmethod
    def fit(cls, X, Y, seed, C):
        from sklearn.multiclass import OneVsRestClassifier
        from sklearn.svm import LinearSVC

        trained = np.flatnonzero(Y.getnnz(axis=0))
        model = OneVsRestClassifier(LinearSVC(C=C, random_state=seed))
        return cls(model.fit(X, Y[:, trained]), trained, Y.shape[1])

    def predict(self, X):
        return {"top": self.top_k(X)}

    def top_k(self, X):
        def score(rows):
            scores = np.full((rows.shape[0], self.n_labels), -np.inf)
            scores[:, self.trained] = self.model.decision_function(rows)
            return scores

        return top_k_in_chunks(X, self.n_labels, score)

    def sets(self, X):
        found = sp.csr_matrix(self.model.predict(X))
        columns = self.trained[found.indices]
        return sp.csr_matrix((found.data, columns, found.indptr), shape=(X.shape[0], self.n_labels))


def select_linear_c(X_train, Y_train, seed):
    """Each C's validation scores; the C of the best P@1 (the model's) and of the best F1 of
    ``predict`` (its label sets')."""
    fit, held_out = validation_split(X_train.shape[0])
    Y_fit, Y_held_out = Y_train[fit], Y_train[held_out]
    validation = {}
    for C in LINEAR_C:
        model = OneVsRest.fit(X_train[fit], Y_fit, seed, C)
        top = model.top_k(X_train[held_out])
        found = evaluate(Y_fit, Y_held_out, top[:, :K])
        validation[f"{C:g}"] = {key: round(found[key], 4) for key in ("P@1", "P@3", "P@5")}
        validation[f"{C:g}"]["F1 predict"] = round(
            f1_of_sets(Y_held_out, model.sets(X_train[held_out])), 4
        )
        validation[f"{C:g}"]["F1@k"] = [round(v, 4) for v in f1_of_top(Y_held_out, top)]
    C = max(LINEAR_C, key=lambda value: validation[f"{value:g}"]["P@1"])
    C_sets = max(LINEAR_C, key=lambda value: validation[f"{value:g}"]["F1 predict"])
    chosen = {"label": f"OneVsRestClassifier(LinearSVC(C={C:g}))", "C": C, "C_of_sets": C_sets}
    return {"C": C}, {**chosen, "validation": validation,
                      "validation_f1_at_k": validation[f"{C:g}"]["F1@k"]}  # fmt: skip


def describe_linear(model, training, X_test, found):
    """The label sets of ``predict``: the model of the C of the best validation F1 (refitted
    if another)."""
    if found["C_of_sets"] != found["C"]:
        model = OneVsRest.fit(*training, found["seed"], found["C_of_sets"])
    return {"sets": model.sets(X_test)}


FLOAT_ROWS = functools.partial(load_rows, dtype=np.float32)  # napkinXC refuses int8 labels
SNM = dict(fit=fit_snm, predict=predict_snm, describe=describe_snm, own_rows=True)
OMIKUJI = dict(fit=fit_omikuji, predict=predict_omikuji, inputs=omikuji_inputs)
BONSAI = {"cluster_balanced": False, "cluster_k": 100, "max_depth": 3}
METHODS = {
    "snm": XMCMethod("SNMClassifier (skrank)", **SNM),
    "pecos": XMCMethod("PECOS XR-Linear", None, python=PECOS_PYTHON),  # _pecos_xmc.py
    "omikuji-parabel": XMCMethod("omikuji, Parabel settings", **OMIKUJI),
    "omikuji-bonsai": XMCMethod("omikuji, Bonsai settings", **OMIKUJI, params=BONSAI),
    "napkinxc-plt": XMCMethod("napkinXC PLT", fit_napkinxc, {}, predict_napkinxc,
                              inputs=FLOAT_ROWS),
    "centroid": XMCMethod("nearest centroid (baseline)", fit_centroid, {}, predict_centroid,
                          inputs=FLOAT_ROWS),
    "linear": XMCMethod("one-vs-rest LinearSVC (baseline)", OneVsRest.fit, {}, OneVsRest.predict,
                        select=select_linear_c, describe=describe_linear),
}  # fmt: skip


def run_method(method, directory, seed):
    """One method's run on the rows of ``directory``: the top labels, the fit's wall and CPU
    seconds, the prediction's seconds, the peak resident memory of the measured region (fit
    and prediction) and its increase over the region's start, and what the method adds."""
    method = METHODS[method]
    inputs = directory if method.own_rows else peer_directory(directory)
    if method.python is not None:  # PECOS, in its own environment
        found = run_in_child(
            HERE / "_pecos_xmc.py", "train_and_predict",
            {"directory": str(inputs), "k": TOP_SETS, "threads": THREADS or -1},
            python=method.python, source=None,
        )  # fmt: skip
        return {**found, "top": np.array(found["top"], dtype=np.int64)}
    training, X_test = (method.inputs or load_rows)(inputs)
    chosen = {"seed": seed}
    with PeakMemory() as memory:
        if method.select is not None:  # the choice of C: in the region, timed apart
            (params, recorded), chosen["selection_seconds"] = timed(method.select, *training, seed)
            chosen |= recorded
        else:
            params = {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model, *fit = timed_cpu(method.fit, *training, seed, **method.params, **params)
        predicted, predict_seconds = timed(method.predict, model, X_test)
    found = {**predicted, "fit_seconds": fit[0], "fit_cpu_seconds": fit[1],
             "predict_seconds": predict_seconds, "peak_gib": gib(memory.peak),
             "peak_increase_gib": gib(memory.increase), **chosen}  # fmt: skip
    found["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:120]}" for w in caught})
    if method.describe is not None:
        found |= method.describe(model, training, X_test, found)
    return found


def evaluate(Y_train, Y_test, top):
    """P@1/3/5, PSP@1/3/5 and nDCG@5 of the top-5 labels ``top`` (-1: none); the columns of
    ``Y_test`` past ``Y_train``'s (test rows' labels only) have the propensity of unseen labels."""
    from skrank.metrics import label_propensities, top_k_label_scores

    unseen = sp.csr_matrix((Y_train.shape[0], Y_test.shape[1] - Y_train.shape[1]))
    propensities = label_propensities(sp.hstack([Y_train, unseen]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # test rows without labels are excluded
        found = top_k_label_scores(Y_test, top, [1, 3, 5], propensities=propensities)
    return {
        **{f"P@{k}": found[f"precision@{k}"] for k in (1, 3, 5)},
        **{f"PSP@{k}": found[f"psp@{k}"] for k in (1, 3, 5)},
        "nDCG@5": found["ndcg@5"],
    }


def hits_of(Y, top):
    """Whether each of the label columns ``top`` (-1: no label) is a label of its row of the
    indicator ``Y``, and ``Y`` as a float CSR matrix without explicit zeros."""
    Y = sp.csr_matrix(Y, dtype=np.float64)
    Y.eliminate_zeros()
    padded = sp.hstack([Y, sp.csr_matrix((Y.shape[0], 1))], format="csr")  # -1: no row's
    rows = np.repeat(np.arange(top.shape[0]), top.shape[1])
    hits = np.asarray(padded[rows, np.where(top < 0, Y.shape[1], top).ravel()]) != 0
    return hits.reshape(top.shape), Y


def f1_of_top(Y, top):
    """Example-based F1 (scikit-learn's ``f1_score(..., average="samples")``) of each fixed
    top-k label set, k = 1 ... ``top.shape[1]``, of the label columns ``top`` (best first, -1:
    no label), against the indicator ``Y``: a list, k = 1 first."""
    hits, Y = hits_of(Y, top)
    found = np.cumsum(hits, axis=1)
    predicted = np.cumsum(top >= 0, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(found > 0, 2 * found / (predicted + Y.getnnz(axis=1)[:, None]), 0.0)
    return [float(value) for value in f1.mean(axis=0)]


def f1_of_sets(Y, sets):
    """Example-based F1 of the label sets ``sets`` (an indicator of the first columns of
    ``Y``; the others are labels of test rows only, never predicted)."""
    from sklearn.metrics import f1_score

    sets = sp.csr_matrix(sets, dtype=np.int8)
    padded = sp.hstack([sets, sp.csr_matrix((sets.shape[0], Y.shape[1] - sets.shape[1]))])
    return float(f1_score(Y, padded.tocsr(), average="samples", zero_division=0))


def recall_by_frequency(Y_train, Y, top):
    """The recall of the top labels ``top`` among the true (row, label) pairs of ``Y`` whose
    label has as many training rows as each of :data:`FREQUENCY_BUCKETS`, and the share of
    the pairs in each: ``{"1": (recall, share), "2-5": ...}`` (None where a bucket is empty)."""
    frequency = np.zeros(Y.shape[1], dtype=np.int64)
    frequency[: Y_train.shape[1]] = Y_train.getnnz(axis=0)
    hits, Y = hits_of(Y, top)
    hits, true = np.bincount(top[hits], minlength=Y.shape[1]), Y.getnnz(axis=0)
    found = {}
    for low, high in FREQUENCY_BUCKETS:
        inside = (frequency >= low) & (frequency <= (high if high is not None else np.inf))
        name = f"{low}" if low == high else f">{low - 1}" if high is None else f"{low}-{high}"
        n_pairs = true[inside].sum()
        found[name] = [float(hits[inside].sum() / n_pairs) if n_pairs else None,
                       float(n_pairs / true.sum())]  # fmt: skip
    return found


def top_calibration_error(Y, top, top_proba):
    """The expected calibration error (15 equal-width bins) of the probabilities ``top_proba``
    of the labels ``top`` (the top 5 of each row), over their (row, label) pairs pooled."""
    from skrank.metrics import expected_calibration_error

    ranked = top >= 0
    hits = hits_of(Y, top)[0][ranked].astype(np.float64)
    return float(expected_calibration_error(hits, top_proba[ranked], n_bins=15))


def measure(data, method, seed, quick, split="test"):
    """One run, in a child process of its own (``run_in_child``): its record, on the test split
    or (``split="validation"``) on the validation split of the training rows."""
    directory = CACHE / folder(data, quick, split)
    found = run_method(method, directory, seed)
    Y_train, Y_test = load(directory, "Y_train", "Y_test")
    top = found.pop("top")
    scores = evaluate(Y_train, Y_test, top[:, :K])
    scores["F1@k"] = f1_of_top(Y_test, top)
    scores["recall@5 by training rows"] = recall_by_frequency(Y_train, Y_test, top[:, :K])
    if "sets" in found:
        sets = found.pop("sets")
        scores["F1 predict"] = f1_of_sets(Y_test, sets)
        scores["labels a row"] = sets.nnz / sets.shape[0]
    if "top_proba" in found:
        scores["ECE@5"] = top_calibration_error(
            Y_test, top[:, :K], np.asarray(found.pop("top_proba"))[:, :K]
        )
    return {"data": data, "split": split, "method": method, "seed": seed, "threads": THREADS,
            **scores, **found, "load_average": list(os.getloadavg())}  # fmt: skip


# ------------------------------------------------------------------------------ parent
def run_path(name, method, seed, quick, split="test"):
    return RUNS / folder(name, quick, split) / f"{method}-seed{seed}.json"


def run_all(args):
    for split in args.splits:  # the test runs first: the validation runs only choose k
        for name in args.data:
            directory = (prepare_validation if split == "validation" else prepare)(name, args.quick)
            if any(m.startswith("omikuji") for m in args.methods):
                training_file(peer_directory(directory))
            for method in args.methods:
                if method == "linear" and name not in LINEAR_DATA:
                    print(f"{name} / linear: not run on {name} (see --help)", flush=True)
                    continue
                if method == "linear" and split == "validation":
                    continue  # its test run chooses C and k on the same validation split
                for seed in args.seeds:
                    run_one(args, name, method, seed, split)
    report(args)


def run_one(args, name, method, seed, split):
    """One run in a child process, its JSON written beside the others (a log beside it)."""
    path = run_path(name, method, seed, args.quick, split)
    if args.resume and path.exists():
        return
    print(f"{name} / {method} / seed {seed} / {split} ...", flush=True)
    try:  # the child's output (omikuji's progress bars) goes to a log beside its JSON
        run_in_child(
            __file__,
            "measure",
            {"data": name, "method": method, "seed": seed, "quick": args.quick, "split": split},
            output=path,
            log=path.with_suffix(".log"),
            timeout=args.timeout,
        )
    except ChildFailed as failure:
        print(f"  {failure.reason}: see {path.with_suffix('.log')}", flush=True)
        if failure.reason.startswith("no result"):
            record = {"data": name, "split": split, "method": method, "seed": seed,
                      "timed_out_after_seconds": args.timeout,
                      "load_average": list(os.getloadavg())}  # fmt: skip
            path.write_text(json.dumps(record, indent=1) + "\n")


COLUMNS = ["data", "method", "runs", "P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5", "nDCG@5",
           "fit s", "fit CPU s", "predict s", "peak above start GiB"]  # fmt: skip
SET_COLUMNS = ["data", "method", "runs", "F1 predict", "labels a row", "top-k: k",
               "F1 top-k", "ECE@5"]  # fmt: skip
BUCKET_COLUMNS = ["data", "method", "runs"] + [
    f"R@5, {n} rows" for n in ("1", "2-5", "6-20", ">20")
]
VALIDATION_COLUMNS = ["data", "method", "runs", "P@1", "P@3", "P@5", "PSP@5", "nDCG@5"]
DIGITS = {"P@1": 4, "fit s": 1, "fit CPU s": 1, "predict s": 1, "peak above start GiB": 2}
RUN_KEYS = {"fit s": "fit_seconds", "fit CPU s": "fit_cpu_seconds", "predict s": "predict_seconds",
            "peak above start GiB": "peak_increase_gib"}  # fmt: skip
# SNM's resolved settings named in the notes, where its runs recorded them.
SNM_SETTINGS = ("n_components_", "embedding_dim_", "input_normalization_", "encoder_init_",
                "neighbor_weight_", "centroid_weight_", "search_")  # fmt: skip


def finished_runs(name, method, seeds, quick, split="test"):
    """The runs of ``method`` on ``name`` (``split``) for ``seeds``: those that finished, and
    those stopped at the time limit."""
    done = [json.loads(path.read_text()) for seed in seeds
            if (path := run_path(name, method, seed, quick, split)).exists()]  # fmt: skip
    stopped = [run for run in done if "timed_out_after_seconds" in run]
    return [run for run in done if run not in stopped], stopped


def cell(run, column, choice=None):
    """A run's value in a column of the tables (``choice``: its fixed top-k, ``(k, F1)``)."""
    if column.startswith("R@5, "):
        bucket = column.split(", ")[1].split(" ")[0]
        return (run.get("recall@5 by training rows") or {}).get(bucket, [None])[0]
    if column in ("top-k: k", "F1 top-k"):
        return None if choice is None else choice[column == "F1 top-k"]
    return run.get(RUN_KEYS.get(column, column))


def _score_row(name, method, finished, columns, choices=None):
    """A row of ``columns[3:]``'s mean ± std over the ``finished`` runs (``choices``: each
    seed's fixed top-k)."""
    label = " / ".join(sorted({run.get("label", METHODS[method].name) for run in finished}))
    row = [name, label, len(finished)]
    for column in columns[3:]:
        found = (cell(run, column, (choices or {}).get(run["seed"])) for run in finished)
        values = [value for value in found if value is not None]
        digits = DIGITS.get(column, 3)
        row.append(summary(values, digits) if len(values) > 1 else
                   round(float(values[0]), digits) if values else None)  # fmt: skip
    return row


def chosen_top_k(run, validation_run):
    """``(k, test F1 of the top k)`` of the fixed top-k of best validation F1 (the smaller k
    among ties), from the run's validation run (or its own choice, the linear baseline's)."""
    at_k = run.get("validation_f1_at_k") or (validation_run or {}).get("F1@k")
    if not at_k or "F1@k" not in run:
        return None
    k = int(np.argmax(at_k)) + 1
    return k, run["F1@k"][k - 1]


def report(args):
    """The tables of every data set and method run (mean and std over seeds): the test top-k
    labels, the label sets and calibration, the recall by label frequency, and the validation
    split's top-k labels; the data's shapes, SNM's settings and the linear C in the notes."""
    results = Results(results_name("bench_xmc", args), packages=("omikuji", "napkinxc"))
    pecos = versions_in(PECOS_PYTHON, ["libpecos"]) or {}
    results.data["versions"]["libpecos"] = pecos.get("libpecos")
    rows, set_rows, bucket_rows, validation_rows = [], [], [], []
    notes, bucket_notes, threads = [], [], set()
    for name in args.data:
        runs = {}
        for method in args.methods:
            finished, stopped = finished_runs(name, method, args.seeds, args.quick)
            runs[method] = finished + stopped
            threads.update(run.get("threads") for run in runs[method])
            if stopped and not finished:
                limit = max(run["timed_out_after_seconds"] for run in stopped)
                rows.append([name, METHODS[method].name, 0] + [None] * (len(COLUMNS) - 3))
                rows[-1][COLUMNS.index("fit s")] = f"> {limit:.0f} (stopped)"
            if not finished:
                continue
            rows.append(_score_row(name, method, finished, COLUMNS))
            validation, _ = finished_runs(name, method, args.seeds, args.quick, "validation")
            by_seed = {run["seed"]: run for run in validation}
            choices = {run["seed"]: chosen_top_k(run, by_seed.get(run["seed"])) for run in finished}
            if any(run.get("F1@k") for run in finished):
                row = _score_row(name, method, finished, SET_COLUMNS, choices)
                ks = sorted({choice[0] for choice in choices.values() if choice is not None})
                row[SET_COLUMNS.index("top-k: k")] = ", ".join(map(str, ks)) or None
                set_rows.append(row)
            if any(run.get("recall@5 by training rows") for run in finished):
                bucket_rows.append(_score_row(name, method, finished, BUCKET_COLUMNS))
                if len(bucket_notes) < len(notes) + 1:  # one note a data set
                    buckets = finished[0]["recall@5 by training rows"].items()
                    shares = ", ".join(f"{bucket} {share:.1%}" for bucket, (_, share) in buckets)
                    bucket_notes.append(
                        f"{name}'s test pairs by the label's training rows: {shares}."
                    )
            if validation:
                validation_rows.append(_score_row(name, method, validation, VALIDATION_COLUMNS))
        notes.append(_data_note(name, args.quick, runs))
    threads = ", ".join(f"{count} thread(s) a method" if count else "each library's default threads"
                        for count in sorted(threads, key=str))  # fmt: skip
    seeds = ", ".join(map(str, args.seeds))
    seeds = f"Mean ± std over the runs of seeds {seeds} (runs: how many finished)"
    validated = f"{VALIDATION_FRACTION:.0%} of the training rows held out, random_state=0"
    tables = (
        ("Test top-k labels, fit and prediction time, peak memory", COLUMNS, rows,
         " ".join(notes) + f" {seeds}, {threads}; fit CPU s: the CPU time of the fit's process (a "
         "shared machine's load lengthens wall times); predict s: the top "
         f"{TOP_SETS} labels of every test row; peak memory: the peak resident size above the "
         "size at the start of the fit (imports and data loaded)."),
        ("Test label sets and calibration: example-based F1, top-5 ECE", SET_COLUMNS, set_rows,
         f"{seeds}. F1: scikit-learn's f1_score(average='samples') on the test rows (labels of "
         "test rows only count as misses). F1 predict: the label sets of the method's own "
         "predict where it has one (SNMClassifier.predict; the linear baseline's one-vs-rest "
         "predict, each SVM's decision above 0, with C chosen by that F1 on the validation "
         "split); labels a row: their mean size. Top-k: the fixed top-k label set, k in "
         f"1-{TOP_SETS} chosen by F1 on the validation split ({validated}; the model fitted on "
         "the other rows), its test F1. ECE@5: expected calibration error of the probabilities "
         "of the top 5 labels, (row, label) pairs of the test split pooled, 15 equal-width "
         "bins (methods that estimate probabilities: SNMClassifier.predict_top_k("
         "return_proba=True), napkinXC's PLT.predict_proba)."),
        ("Test recall of the top 5 by the label's training rows", BUCKET_COLUMNS, bucket_rows,
         f"{seeds}. R@5, n rows: the share of the test (row, label) pairs whose label has n "
         "training rows that are among the row's top 5 labels. " + " ".join(bucket_notes)),
        ("Validation top-k labels", VALIDATION_COLUMNS, validation_rows,
         f"{seeds}; each method fitted on the other training rows and scored on the validation "
         f"split ({validated}), the test rows unread."),
    )  # fmt: skip
    for number, (title, columns, table_rows, note) in enumerate(tables):
        if table_rows or number == 0:
            results.add_table(title, columns, table_rows, notes=note)
    results.save()


def _data_note(name, quick, runs):
    """The note of one data set: its shape, SNM's settings, the linear baseline's choice."""
    X_train, Y_train, X_test, Y_test = load(prepare(name, quick), *ALL_PARTS)
    note = (
        f"{name}: {X_train.shape[0]:,} training rows, {X_test.shape[0]:,} test rows, "
        f"{X_train.shape[1]:,} features ({X_train.nnz / X_train.shape[0]:.1f} non-zeros a "
        f"row), {Y_train.shape[1]:,} labels ({Y_train.nnz / Y_train.shape[0]:.2f} a row, "
        f"{np.count_nonzero(Y_train.getnnz(axis=0)):,} with a training row)"
    )
    if unseen := Y_test[:, Y_train.shape[1] :].nnz:
        note += f", {unseen} test labels without a training row (misses)"
    for run in [run for run in runs.get("snm", []) if "settings" in run][:1]:
        settings = run["settings"]
        shown = [f"{key[:-1]} {settings[key]}" for key in SNM_SETTINGS if key in settings]
        note += f"; SNM (seed {run['seed']}): {run['epochs']} epochs, " + ", ".join(shown)
        if "recall_of_exact_top5" in run:
            note += f" (recall of the exact top 5: {run['recall_of_exact_top5']:.4f})"
    for run in [run for run in runs.get("linear", []) if "C" in run][:1]:
        chosen = run["validation"][f"{run['C']:g}"]
        note += (
            f"; linear baseline: C = {run['C']:g} of {', '.join(map(str, run['validation']))} "
            f"(validation P@1 {chosen['P@1']:.4f}, P@5 {chosen['P@5']:.4f}; choice "
            f"{run['selection_seconds']:.0f} s)"
        )
    if loads := [run["load_average"][0] for done in runs.values() for run in done]:
        note += f"; load average {min(loads):.1f}-{max(loads):.1f} during the runs"
    return note + "."


def main(argv=None):
    arguments = parser(
        __doc__, "quick", "seeds", "tag", "resume", "report_only", "timeout", seeds=[0, 1, 2]
    )
    arguments.add_argument("--data", nargs="+", choices=XMC_DATA, default=list(REAL))
    arguments.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    arguments.add_argument(
        "--splits",
        nargs="+",
        default=["test", "validation"],
        choices=["test", "validation"],
        help="the runs to make: on the test split, and on the validation split of the training "
        "rows, where a fixed top-k is chosen (default: %(default)s)",
    )
    args = arguments.parse_args(argv)
    if args.report_only:
        report(args)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
