"""The pair learners where users measure them: k-NN accuracy, TPR at low FPR, fit time.

MNIST-10k, stratified 3,000 / 2,000 train / test splits (``python -m skrank``'s MMC row's split
at seed 0), one seed a split:

* **k-NN task** (PCA fitted on the training part, 90% of the variance): the Euclidean metric;
  :class:`~skrank.MMC` with its defaults, with the paper's criterion (``scatter_ridge=1e-8,
  min_rank=None``) and chosen on validation folds of the training part (:func:`mmc_selection`:
  a Pipeline before ``KNeighborsClassifier(5)``, 5 stratified folds repeated 3 times, over no
  metric learning, ``scatter_ridge`` x ``min_rank`` with all pairs and with local pairs, and the
  one-standard-error rule toward the Euclidean metric); scikit-learn's NCA; metric-learn's
  ``ITML_Supervised`` and ``LMNN`` (in their own environment, ``_metric_learn_fit.py``, each
  fit stopped after ``--timeout`` seconds; skipped without it).
* **pair task** (the first 32 principal axes, not centred, as ``python -m skrank``'s
  PointwiseROCSimilarity row): the cosine similarity; :class:`~skrank.PointwiseROCSimilarity`
  with its defaults, with the paper's criterion and with ``preprocessing`` x ``identity_weight``
  chosen by ``GridSearchCV`` with the ``"tpr@fpr=0.01"`` scorer; the Euclidean metric and MMC.

Scores on the test part: the 5-NN accuracy (training items as neighbours) and the TPR at FPR 1%
and 5% over all test pairs ``i < j`` (minus the learned distance, or the similarity). Fit times
include the grid searches of the selected rows.

Usage::

    python benchmarks/bench_pair_learners.py                 # seeds 0-4 (~30 minutes)
    python benchmarks/bench_pair_learners.py --quick         # one seed, no metric-learn
"""

import sys

import numpy as np
from _data import mnist_split, pca
from _harness import ChildFailed, parser, results_name, timed
from _metric_learn_fit import fit_metric_learn
from _results import Results, summary
from sklearn.model_selection import GridSearchCV, RepeatedStratifiedKFold, StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier, NeighborhoodComponentsAnalysis
from sklearn.pipeline import Pipeline
from threadpoolctl import threadpool_limits

from skrank import MMC, PointwiseROCSimilarity
from skrank.metrics import get_scorer, pairwise_roc_score
from skrank.similarity import one_standard_error_rule

# MMC on sampled tuples (fast; see the user guide), as in python -m skrank's k-NN rows.
SAMPLED = {"negatives": "tuples", "n_samples": 1500, "random_state": 0}
ROC_GRID = {"preprocessing": ["none", "standardize"], "identity_weight": [0.0, 1.0, 3.0, 10.0]}
COLUMNS = ["method", "5-NN accuracy", "TPR@FPR=0.01", "TPR@FPR=0.05", "fit seconds"]


def linear_scores(Z_train, y_train, Z_test, y_test):
    """5-NN accuracy and pair TPRs of the Euclidean distance between rows of the embeddings."""
    accuracy = KNeighborsClassifier(5).fit(Z_train, y_train).score(Z_test, y_test)
    squared = np.einsum("ij,ij->i", Z_test, Z_test)
    similarity = 2 * Z_test @ Z_test.T - squared[:, None] - squared[None, :]
    return [accuracy, *pairwise_roc_score(similarity, y_test, [0.01, 0.05])]


def similarity_scores(similarity_to_train, similarity_test, y_train, y_test):
    """The same from similarities in [0, 1] (neighbours: the most similar training items)."""
    knn = KNeighborsClassifier(5, metric="precomputed").fit(
        np.zeros((len(y_train), len(y_train))), y_train
    )
    accuracy = knn.score(np.clip(1.0 - similarity_to_train, 0.0, None), y_test)
    return [accuracy, *pairwise_roc_score(similarity_test, y_test, [0.01, 0.05])]


def validation_summary(search):
    """What the MMC selection saw on validation folds: Euclidean, best, its SE, the choice."""
    results = search.cv_results_
    n_splits = search.n_splits_
    best = int(np.argmax(results["mean_test_score"]))
    splits = np.array([results[f"split{i}_test_score"][best] for i in range(n_splits)])
    return [
        results["mean_test_score"][0],  # the first candidate: passthrough
        str({k.removeprefix("mmc__"): v for k, v in results["params"][best].items()}),
        results["mean_test_score"][best],
        splits.std(ddof=1) / np.sqrt(n_splits),
        str({k.removeprefix("mmc__"): v for k, v in search.best_params_.items()}),
    ]


def mmc_selection():
    """The user guide's selection of MMC's options by 5-NN accuracy (an unfitted search)."""
    all_pairs = {"scatter_ridge": [1.0, 10.0, 100.0], "min_rank": [0.25, 0.5, 0.75, "full"]}
    local = {"positives": ["nearest"], "negatives": ["nearest"], "n_neighbors": [10, 20],
             "scatter_ridge": [1.0, 10.0], "min_rank": [0.25, 0.5]}  # fmt: skip
    grid = [{"mmc": ["passthrough"]}] + [
        {f"mmc__{name}": values for name, values in candidates.items()}
        for candidates in (all_pairs, local)
    ]
    return GridSearchCV(
        Pipeline([("mmc", MMC(**SAMPLED)), ("knn", KNeighborsClassifier(n_neighbors=5))]),
        grid,
        scoring="accuracy",
        cv=RepeatedStratifiedKFold(n_splits=5, n_repeats=3, random_state=0),
        refit=one_standard_error_rule({"mmc": "passthrough"}),
    )


def knn_task(X_train, y_train, X_test, y_test, metric_learn, timeout, selection):
    Z_train, Z_test = pca(X_train, X_test)

    def row(name, embed, seconds):
        return [name, *linear_scores(embed(Z_train), y_train, embed(Z_test), y_test), seconds]

    rows = [row("Euclidean", lambda Z: Z, 0.0)]
    for name, params in (
        ("MMC, defaults", {}),
        ("MMC, paper's criterion", {"scatter_ridge": 1e-8, "min_rank": None}),
    ):
        model, seconds = timed(lambda params=params: MMC(**SAMPLED, **params).fit(Z_train, y_train))
        rows.append(row(name, model.transform, seconds))
    search, seconds = timed(lambda: mmc_selection().fit(Z_train, y_train))
    selection.append(validation_summary(search))
    chosen = search.best_estimator_[0]
    embed = (lambda Z: Z) if chosen == "passthrough" else chosen.transform
    selected = {k.removeprefix("mmc__"): v for k, v in search.best_params_.items()}
    rows.append(row(f"MMC, CV-selected {selected}", embed, seconds))
    nca, seconds = timed(
        lambda: NeighborhoodComponentsAnalysis(random_state=0, max_iter=100).fit(Z_train, y_train)
    )
    rows.append(row("sklearn NCA (max_iter=100)", nca.transform, seconds))
    for learner, params in (
        ("ITML_Supervised", {}),
        ("LMNN", {"n_neighbors": 5, "max_iter": 100}),
    ):
        name = f"metric-learn {learner} {params or '(defaults)'}"
        try:
            if not metric_learn:
                raise ChildFailed("not run (--quick)")
            fitted = fit_metric_learn(learner, Z_train, y_train, params, timeout)
        except ChildFailed as failure:
            print(f"{name}: skipped, {failure.reason}", file=sys.stderr)
            rows.append([name, None, None, None, failure.reason])
            continue
        rows.append(row(name, lambda Z, L=fitted["components"]: Z @ L.T, fitted["seconds"]))
    return rows


def pair_task(X_train, y_train, X_test, y_test):
    Z_train, Z_test = pca(X_train, X_test, n_components=32, centred=False, svd_solver="auto")

    def unit(Z):
        return Z / np.linalg.norm(Z, axis=1, keepdims=True)

    rows = [
        [
            "cosine",
            *similarity_scores(
                unit(Z_test) @ unit(Z_train).T, unit(Z_test) @ unit(Z_test).T, y_train, y_test
            ),
            0.0,
        ],
        ["Euclidean", *linear_scores(Z_train, y_train, Z_test, y_test), 0.0],
    ]
    base = {"threshold_fpr": 0.01, "random_state": 0}
    for name, params in (
        ("PointwiseROCSimilarity, defaults", {}),
        ("PointwiseROCSimilarity, paper's criterion", {"identity_weight": 0.0}),
    ):
        model, seconds = timed(
            lambda params=params: PointwiseROCSimilarity(**base, **params).fit(Z_train, y_train)
        )
        rows.append([name, *roc_model_scores(model, Z_train, y_train, Z_test, y_test), seconds])
    search = GridSearchCV(
        PointwiseROCSimilarity(**base),
        ROC_GRID,
        scoring=get_scorer("tpr@fpr=0.01"),
        cv=StratifiedKFold(5, shuffle=True, random_state=0),
    )
    search, seconds = timed(lambda: search.fit(Z_train, y_train))
    best = roc_model_scores(search.best_estimator_, Z_train, y_train, Z_test, y_test)
    rows.append([f"PointwiseROCSimilarity, CV-selected {search.best_params_}", *best, seconds])
    mmc, seconds = timed(lambda: MMC(**SAMPLED).fit(Z_train, y_train))
    embedded = linear_scores(mmc.transform(Z_train), y_train, mmc.transform(Z_test), y_test)
    rows.append(["MMC, defaults", *embedded, seconds])
    return rows


def roc_model_scores(model, Z_train, y_train, Z_test, y_test):
    return similarity_scores(
        model.pairwise_similarity(Z_test, Z_train),
        model.pairwise_similarity(Z_test),
        y_train,
        y_test,
    )


def summarise(per_seed):
    """Rows ``method, mean ± std of each metric`` over seeds (methods in the first seed's order)."""
    names = [row[0].split(" {")[0] for row in per_seed[0]]
    rows = []
    for index, name in enumerate(names):
        values = [rows[index][1:-1] for rows in per_seed]
        seconds = [rows[index][-1] for rows in per_seed]
        cells = [summary(column) for column in zip(*values, strict=True)]
        numeric = [s for s in seconds if isinstance(s, float)]
        rows.append([name, *cells, f"{np.mean(numeric):.1f}" if numeric else seconds[0]])
    return rows


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag", "timeout", seeds=[0, 1, 2, 3, 4],
                       timeout=300.0)  # fmt: skip
    args = arguments.parse_args(argv)
    seeds = [0] if args.quick else args.seeds
    results = Results(results_name("bench_pair_learners", args), packages=("cvxpy",))
    tasks = {
        "k-NN task, MNIST 3k/2k, PCA 90%": [],
        "pair task, MNIST 3k/2k, PCA-32 (not centred)": [],
    }
    selection = []
    with threadpool_limits(limits=1):
        for seed in seeds:
            X_train, X_test, y_train, y_test = mnist_split(3000, 2000, seed, np.float32)
            for title, task in zip(tasks, (knn_task, pair_task), strict=True):
                extra = (not args.quick, args.timeout, selection) if task is knn_task else ()
                rows = task(X_train, y_train, X_test, y_test, *extra)
                tasks[title].append(rows)
                print(f"\nseed {seed}, {title}")
                for row in rows:
                    print("  ", row)
                results.add_table(f"{title}, seed {seed}", COLUMNS, rows)
            results.save()  # after every seed: a long run leaves what it measured
    results.add_table(
        "MMC selection on validation folds (5 x 3 repeated stratified folds of the training part)",
        ["seed", "Euclidean CV", "best candidate", "best CV", "best SE", "chosen"],
        [[seed, *row] for seed, row in zip(seeds, selection, strict=True)],
        notes="Validation 5-NN accuracy only (no test data); the chosen candidate is the best "
        "unless the Euclidean metric is within one standard error of it.",
    )
    for title, per_seed in tasks.items():
        results.add_table(
            f"{title}: mean ± std over seeds {seeds}",
            COLUMNS,
            summarise(per_seed),
            notes="Test metrics; fit seconds: mean over seeds (one core, shared machine: noisy).",
        )
    results.save()


if __name__ == "__main__":
    main()
