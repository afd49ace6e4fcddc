"""The bad-input matrix: every estimator and public function at the extremes.

Each case is one call and its exact expected outcome, one of

* ``Same(reference)``: the call returns what ``reference()`` returns, computed on the same data
  at a safe scale or in a safe form (integer labels, a dense array, float64 numpy input), to
  ``rtol=1e-9``; NaN only where the reference has NaN;
* ``Fails(error, argument, pattern)``: the call raises ``error`` whose message names the user's
  ``argument`` (as a word) and matches ``pattern`` (what is wrong, or the fix).

Inputs: NaN and infinity, magnitudes from 1e-300 to 1e300 and float32's limits, empty and
one-row inputs, one class, singleton classes, all-equal rows, wrong dimensions, sparse input
where unsupported, object and string arrays, pandas with nullable, categorical and boolean
dtypes, and extreme parameter values. Torch fits are tiny (18 rows, one epoch).
"""

import re
import warnings
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import pairwise_distances

from skrank import MMC, PointwiseROCSimilarity, SNMClassifier, SOPRCEmbedder, datasets, metrics

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F32_MAX = float(np.finfo(np.float32).max)  # 3.4e38
F32_TINY = float(np.finfo(np.float32).tiny)  # 1.2e-38, the smallest normal float32

RNG = np.random.RandomState(0)
Y = np.repeat([0, 1, 2], 6)
X = np.eye(3)[Y] * 2.0 + 0.5 * RNG.normal(size=(18, 3))
LABEL_TRUE = (RNG.uniform(size=(12, 6)) < 0.3).astype(int)
LABEL_TRUE[np.arange(12), np.arange(12) % 6] = 1  # every row has a positive
LABEL_SCORE = RNG.normal(size=(12, 6))
BINARY_TRUE = np.array([0, 1] * 10)
BINARY_SCORE = RNG.normal(size=20) + BINARY_TRUE


class Same(NamedTuple):
    reference: Any


class Fails(NamedTuple):
    error: type
    argument: str
    pattern: str = ""


class Case(NamedTuple):
    id: str
    call: Any
    expect: Any


def _assert_same(result, expected):
    if isinstance(expected, dict):
        assert set(result) == set(expected)
        for key in expected:
            _assert_same(result[key], expected[key])
    elif isinstance(expected, tuple | list):
        assert len(result) == len(expected)
        for part, expected_part in zip(result, expected, strict=True):
            _assert_same(part, expected_part)
    else:
        result, expected = np.asarray(result), np.asarray(expected)
        assert result.shape == expected.shape
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(result, expected, rtol=1e-9, atol=1e-12)
        else:
            np.testing.assert_array_equal(result, expected)


def _run(case):
    with warnings.catch_warnings():
        # Warnings do not excuse a wrong value: the value is compared in every Same case.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        if isinstance(case.expect, Same):
            _assert_same(case.call(), case.expect.reference())
        else:
            with pytest.raises(case.expect.error) as info:
                case.call()
            message = str(info.value)
            assert re.search(rf"\b(?:{case.expect.argument})\b", message), message
            assert re.search(case.expect.pattern, message), message


# ------------------------------------------------------------------ inputs
def _with(value, row=3, column=1, X=X):
    bad = X.copy()
    bad[row, column] = value
    return bad


def _strings(X=X):
    """Object array of words: not numbers (numeric strings are converted, as in scikit-learn)."""
    words = X.astype(str).astype(object)
    words[3, 1] = "three"
    return words


BAD_X = {
    # name: (bad X, pattern of the message)
    "nan": (_with(np.nan), "NaN"),
    "inf": (_with(np.inf), "infinity"),
    "-inf": (_with(-np.inf), "infinity"),
    "empty": (np.zeros((0, 3)), "0 sample"),
    "1d": (X[:, 0], "2D"),
    "3d": (X[:, :, None], "dim 3"),
    "strings": (_strings(), "string|float|three"),
    "complex": (X + 1j, "[Cc]omplex"),
    "pd.NA": (pd.DataFrame(X).astype("Float64").mask(np.eye(18, 3, dtype=bool)), "NaN"),
}
SCALES = [1e-300, 1e-200, 1e-100, 1e100, 1e200, 1e300, F32_MAX, F32_TINY]


def _pandas_forms(X_int):
    """Odd pandas inputs holding the values of ``X_int`` (an int array), and their float form."""
    return {
        "Int64": pd.DataFrame(X_int).astype("Int64"),
        "Float64": pd.DataFrame(X_int.astype(float)).astype("Float64"),
        "bool": pd.DataFrame(X_int > 0),
        "int8": pd.DataFrame(X_int.astype(np.int8)),
    }


X_INT = np.round(X * 3).astype(int)
Y_FORMS = {
    # name: labels equivalent to Y (same partition), for a Same case against Y
    "float": Y + 0.5,
    "tiny-float": Y * 1e-300,
    "string": np.array(["a", "b", "c"])[Y],
    "object-mixed": np.array([1, "b", 2.5], dtype=object)[Y],
    "bool-and-int": np.array([False, True, 2], dtype=object)[Y],
    "tuple": np.array([(0, 1), (1, 0), (2, 2)] + [None], dtype=object)[:-1][Y],
    "pd.category": pd.Series(pd.Categorical(np.array(["x", "y", "z"])[Y])),
    "pd.Int64": pd.Series(Y, dtype="Int64"),
    "pd.string": pd.Series(np.array(["a", "b", "c"])[Y], dtype="string"),
}
BAD_Y = {
    "nan": (np.where(np.arange(18) == 2, np.nan, Y.astype(float)), "NaN"),
    "none": (np.array([None, *Y[1:]], dtype=object), "None|NaN|Unknown label type"),
    "short": (Y[:-1], "inconsistent"),
    "2d": (np.c_[Y, Y], "1d|1-D|shape"),
    "one-class": (np.zeros(18, dtype=int), "one class"),
    "singletons": (np.arange(18), "two"),
}


# ------------------------------------------------------------------ retrieval metrics
def _retrieval_functions(devices=("auto",)):
    functions = {
        "mean_auprc": lambda X, y, **kw: metrics.mean_auprc_score(X, y, **kw),
        "recall@2": lambda X, y, **kw: metrics.recall_at_k_score(X, y, 2, **kw),
        "precision@3": lambda X, y, **kw: metrics.precision_at_k_score(X, y, 3, **kw),
        "retrieval_scores": lambda X, y, **kw: metrics.retrieval_scores(
            X, y, k=(1, 4), at_r=True, **kw
        ),
        "map@r": lambda X, y, **kw: metrics.map_at_r_score(X, y, **kw),
        "r_precision": lambda X, y, **kw: metrics.r_precision_score(X, y, **kw),
        "query_auprc": lambda X, y, **kw: metrics.query_auprc_scores(X, y, **kw),
        "pr_curve": lambda X, y, **kw: metrics.mean_precision_recall_curve(X, y, **kw),
    }
    for name, function in functions.items():
        for metric in ("cosine", "euclidean"):
            for device in devices if name != "pr_curve" else ("auto",):
                suffix = "" if device == "auto" else f"-{device}"
                options = {"metric": metric} | ({} if device == "auto" else {"device": device})
                yield (
                    f"{name}-{metric}{suffix}",
                    lambda X, y, f=function, o=options, **kw: f(X, y, **o, **kw),
                )


def _retrieval_cases():
    for name, f in _retrieval_functions():
        reference = (lambda f=f: f(X, Y),)[0]
        for scale in SCALES:
            yield Case(
                f"{name}-scale{scale:.0e}", lambda f=f, s=scale: f(X * s, Y), Same(reference)
            )
        yield Case(f"{name}-chunk1", lambda f=f: f(X, Y, chunk_size=1), Same(reference))
        yield Case(f"{name}-list", lambda f=f: f(X.tolist(), Y.tolist()), Same(reference))
        for form, labels in Y_FORMS.items():
            yield Case(f"{name}-y-{form}", lambda f=f, y=labels: f(X, y), Same(reference))
        for form, frame in _pandas_forms(X_INT).items():
            yield Case(
                f"{name}-X-{form}",
                lambda f=f, frame=frame: f(frame, Y),
                Same(lambda f=f, frame=frame: f(frame.to_numpy(dtype=float), Y)),
            )
        for bad, (bad_X, pattern) in BAD_X.items():
            yield Case(
                f"{name}-X-{bad}", lambda f=f, b=bad_X: f(b, Y), Fails(ValueError, "X", pattern)
            )
        yield Case(f"{name}-one-row", lambda f=f: f(X[:1], Y[:1]), Fails(ValueError, "X", "1"))
        yield Case(
            f"{name}-sparse",
            lambda f=f: f(sparse.csr_matrix(X), Y),
            Fails(TypeError, "X", "[Ss]parse"),
        )
        for bad in ("nan", "none", "short", "2d"):
            bad_y, pattern = BAD_Y[bad]
            yield Case(
                f"{name}-y-{bad}", lambda f=f, b=bad_y: f(X, b), Fails(ValueError, "y", pattern)
            )
        yield Case(
            f"{name}-chunk0", lambda f=f: f(X, Y, chunk_size=0), Fails(ValueError, "chunk_size")
        )
        yield Case(
            f"{name}-all-equal-rows",
            lambda f=f: f(np.ones((18, 3)), Y),
            Same(lambda f=f: f(np.ones((18, 3)) * 7.0, Y)),
        )
    for name, f in _retrieval_functions(devices=("numpy", "cpu")):
        if name.endswith(("-numpy", "-cpu")):  # the backends of device="auto" side by side
            for scale in (1e-300, 1e300, F32_MAX, F32_TINY):
                yield Case(
                    f"{name}-scale{scale:.0e}",
                    lambda f=f, s=scale: f(X * s, Y),
                    Same(lambda f=f: f(X, Y)),
                )
    for metric in ("cosine", "euclidean"):
        for name, function in [
            ("recall", metrics.recall_at_k_score),
            ("precision", metrics.precision_at_k_score),
        ]:
            for k, error in [
                (0, ValueError),
                (-1, ValueError),
                (18, ValueError),
                (True, TypeError),
                (1.5, TypeError),
                ([], ValueError),
            ]:
                yield Case(
                    f"{name}-k={k!r}-{metric}",
                    lambda fn=function, k=k, m=metric: fn(X, Y, k, metric=m),
                    Fails(error, "k"),
                )
            yield Case(
                f"{name}-k=17-{metric}",
                lambda fn=function, m=metric: fn(X, Y, 17, metric=m),
                Same(lambda fn=function, m=metric: fn(X * 1e300, Y, 17, metric=m)),
            )
        for levels in ([-0.1], [1.5], [np.nan], []):
            yield Case(
                f"pr_curve-recall_levels={levels}-{metric}",
                lambda lv=levels, m=metric: metrics.mean_precision_recall_curve(
                    X, Y, metric=m, recall_levels=lv
                ),
                Fails(ValueError, "recall_levels"),
            )
    yield Case(
        "mean_auprc-metric=manhattan",
        lambda: metrics.mean_auprc_score(X, Y, metric="manhattan"),
        Fails(ValueError, "metric"),
    )
    yield Case(
        "mean_auprc-metric-callable-nan",
        lambda: metrics.mean_auprc_score(
            X, Y, metric=lambda A, B: np.full((len(A), len(B)), np.nan)
        ),
        Fails(ValueError, "metric", "NaN"),
    )
    yield Case(
        "mean_auprc-cosine-rows-at-1e-300-and-1e300",
        lambda: metrics.mean_auprc_score(
            X * np.where(np.arange(18) % 2, 1e-300, 1e300)[:, None], Y
        ),
        Same(lambda: metrics.mean_auprc_score(X, Y)),
    )
    yield Case(
        "mean_auprc-cosine-zero-row",
        lambda: metrics.mean_auprc_score(_with(0.0, row=4, column=slice(None)), Y),
        Fails(ValueError, "X", r"all-zero row.*\[4\]"),
    )


# ------------------------------------------------------------------ binary and label metrics
def _binary_cases():
    functions = {
        "auprc": lambda y, s, **kw: metrics.auprc_score(y, s, **kw),
        "pointwise_roc": lambda y, s, **kw: metrics.pointwise_roc_score(y, s, 0.1, **kw),
    }
    for name, f in functions.items():
        reference = (lambda f=f: f(BINARY_TRUE, BINARY_SCORE),)[0]
        for scale in [*SCALES, -1e300]:
            yield Case(
                f"{name}-scale{scale:.0e}",
                lambda f=f, s=scale: f(
                    BINARY_TRUE, BINARY_SCORE * s if s > 0 else -BINARY_SCORE * s
                ),
                Same(reference),
            )
        forms = {
            "bool": BINARY_TRUE.astype(bool),
            "pd.Int64": pd.Series(BINARY_TRUE, dtype="Int64"),
            "pd.boolean": pd.Series(BINARY_TRUE.astype(bool), dtype="boolean"),
            "-1/1": 2 * BINARY_TRUE - 1,
            "float": BINARY_TRUE.astype(float),
        }
        for form, y_true in forms.items():
            yield Case(
                f"{name}-y_true-{form}", lambda f=f, y=y_true: f(y, BINARY_SCORE), Same(reference)
            )
        yield Case(
            f"{name}-y_true-strings-pos_label",
            lambda f=f: f(np.array(["n", "p"])[BINARY_TRUE], BINARY_SCORE, pos_label="p"),
            Same(reference),
        )
        yield Case(
            f"{name}-y_true-strings",
            lambda f=f: f(np.array(["n", "p"])[BINARY_TRUE], BINARY_SCORE),
            Fails(ValueError, "pos_label"),
        )
        yield Case(
            f"{name}-y_true-3-classes",
            lambda f=f: f(BINARY_TRUE * np.arange(20) % 3, BINARY_SCORE),
            Fails(ValueError, "y_true", "binary"),
        )
        for value, pattern in [(np.nan, "NaN"), (np.inf, "infinity")]:
            score = BINARY_SCORE.copy()
            score[3] = value
            yield Case(
                f"{name}-y_score-{value}",
                lambda f=f, s=score: f(BINARY_TRUE, s),
                Fails(ValueError, "y_score", pattern),
            )
        yield Case(
            f"{name}-y_score-2d",
            lambda f=f: f(BINARY_TRUE, BINARY_SCORE[:, None]),
            Fails(ValueError, "y_score"),
        )
        yield Case(
            f"{name}-y_score-strings",
            lambda f=f: f(
                BINARY_TRUE,
                np.r_[BINARY_SCORE[:-1], 0].astype(str).astype(object)
                + np.r_[[""] * 19, ["x"]].astype(object),
            ),
            Fails(ValueError, "y_score"),
        )
        yield Case(
            f"{name}-y_score-numeric-strings",
            lambda f=f: f(BINARY_TRUE, BINARY_SCORE.astype(str).astype(object)),
            Same(lambda f=f: f(BINARY_TRUE, BINARY_SCORE.astype(str).astype(float))),
        )
        yield Case(
            f"{name}-short",
            lambda f=f: f(BINARY_TRUE, BINARY_SCORE[:-1]),
            Fails(ValueError, "y_true"),
        )
        yield Case(f"{name}-empty", lambda f=f: f([], []), Fails(ValueError, "y_true|y_score"))
        yield Case(
            f"{name}-no-positive",
            lambda f=f: f(np.zeros(20), BINARY_SCORE),
            Fails(ValueError, "y_true", "positive"),
        )
        yield Case(
            f"{name}-all-equal-scores",
            lambda f=f: f(BINARY_TRUE, np.full(20, 1e300)),
            Same(lambda f=f: f(BINARY_TRUE, np.zeros(20))),
        )
    for fpr in (0, 1, -0.5, np.nan, [], [[0.1]]):
        yield Case(
            f"pointwise_roc-fpr={fpr!r}",
            lambda fpr=fpr: metrics.pointwise_roc_score(BINARY_TRUE, BINARY_SCORE, fpr),
            Fails(ValueError, "fpr"),
        )


def _label_cases():
    functions = {
        "top_k_precision": lambda t, s, k=2, **kw: metrics.top_k_precision_score(t, s, k, **kw),
        "top_k_recall": lambda t, s, k=2, **kw: metrics.top_k_recall_score(t, s, k, **kw),
        "top_k_ndcg": lambda t, s, k=2, **kw: metrics.top_k_ndcg_score(t, s, k, **kw),
        "top_k_psp": lambda t, s, k=2, **kw: metrics.top_k_psp_score(
            t, s, k, propensities=np.linspace(0.2, 0.9, 6), **kw
        ),
    }
    for name, f in functions.items():
        reference = (lambda f=f: f(LABEL_TRUE, LABEL_SCORE),)[0]
        for scale in SCALES:
            yield Case(
                f"{name}-scale{scale:.0e}",
                lambda f=f, s=scale: f(LABEL_TRUE, LABEL_SCORE * s),
                Same(reference),
            )
        yield Case(
            f"{name}-sparse-y_true",
            lambda f=f: f(sparse.csr_matrix(LABEL_TRUE), LABEL_SCORE),
            Same(reference),
        )
        yield Case(
            f"{name}-bool-y_true",
            lambda f=f: f(LABEL_TRUE.astype(bool), LABEL_SCORE),
            Same(reference),
        )
        yield Case(
            f"{name}-pandas",
            lambda f=f: f(pd.DataFrame(LABEL_TRUE).astype("Int64"), pd.DataFrame(LABEL_SCORE)),
            Same(reference),
        )
        for value, pattern in [(np.nan, "NaN"), (np.inf, "infinity")]:
            yield Case(
                f"{name}-y_score-{value}",
                lambda f=f, v=value: f(LABEL_TRUE, _with(v, X=LABEL_SCORE)),
                Fails(ValueError, "y_score", pattern),
            )
        yield Case(
            f"{name}-shape-mismatch",
            lambda f=f: f(LABEL_TRUE, LABEL_SCORE[:, :5]),
            Fails(ValueError, "y_score|y_true"),
        )
        yield Case(
            f"{name}-k=0", lambda f=f: f(LABEL_TRUE, LABEL_SCORE, k=0), Fails(ValueError, "k")
        )
        yield Case(
            f"{name}-k=7", lambda f=f: f(LABEL_TRUE, LABEL_SCORE, k=7), Fails(ValueError, "k")
        )
        yield Case(
            f"{name}-y_true-not-binary",
            lambda f=f: f(LABEL_TRUE * 2, LABEL_SCORE),
            Fails(ValueError, "y_true"),
        )
        yield Case(
            f"{name}-1d",
            lambda f=f: f(LABEL_TRUE[0], LABEL_SCORE[0]),
            Fails(ValueError, "y_true|y_score"),
        )
        yield Case(
            f"{name}-empty",
            lambda f=f: f(np.zeros((0, 6)), np.zeros((0, 6))),
            Fails(ValueError, "y_true|y_score"),
        )
    for A, B in [(-1.0, 1.5), (0.55, np.nan), (np.inf, 1.5)]:
        yield Case(
            f"label_propensities-A={A}-B={B}",
            lambda A=A, B=B: metrics.label_propensities(LABEL_TRUE, A=A, B=B),
            Fails(ValueError, "A" if not np.isnan(B) else "B"),
        )
    yield Case(
        "label_propensities-sparse",
        lambda: metrics.label_propensities(sparse.csr_matrix(LABEL_TRUE)),
        Same(lambda: metrics.label_propensities(LABEL_TRUE)),
    )
    yield Case(
        "top_k_psp-propensities-zero",
        lambda: metrics.top_k_psp_score(LABEL_TRUE, LABEL_SCORE, 2, propensities=np.zeros(6)),
        Fails(ValueError, "propensities"),
    )
    yield Case(
        "top_k_psp-propensities-nan",
        lambda: metrics.top_k_psp_score(
            LABEL_TRUE, LABEL_SCORE, 2, propensities=np.full(6, np.nan)
        ),
        Fails(ValueError, "propensities"),
    )


def _search_cases():
    scores = LABEL_SCORE
    reference = (lambda: metrics.top_k_indices(scores, 3),)[0]
    for scale in SCALES:
        yield Case(
            f"top_k_indices-scale{scale:.0e}",
            lambda s=scale: metrics.top_k_indices(scores * s, 3),
            Same(reference),
        )
    yield Case(
        "top_k_indices-ties",
        lambda: metrics.top_k_indices(np.full((2, 4), 1e300), 2),
        Same(lambda: np.array([[0, 1], [0, 1]])),
    )
    yield Case(
        "top_k_indices-minus-inf",
        lambda: metrics.top_k_indices(np.where(np.eye(12, 6, dtype=bool), -np.inf, scores), 6),
        Same(
            lambda: np.argsort(-np.where(np.eye(12, 6, dtype=bool), -np.inf, scores), 1, "stable")
        ),
    )
    yield Case(
        "top_k_indices-nan",
        lambda: metrics.top_k_indices(_with(np.nan, X=scores), 2),
        Fails(ValueError, "scores", "NaN"),
    )
    yield Case(
        "top_k_indices-1d", lambda: metrics.top_k_indices(scores[0], 2), Fails(ValueError, "scores")
    )
    for k, error in [(0, ValueError), (7, ValueError), (-1, ValueError), (2.0, TypeError)]:
        yield Case(
            f"top_k_indices-k={k!r}",
            lambda k=k: metrics.top_k_indices(scores, k),
            Fails(error, "k"),
        )


def _pair_cases():
    S = X @ X.T
    for name, f in {
        "pair_scores_and_labels": lambda s, y: metrics.pair_scores_and_labels(s, y),
        "pairwise_roc": lambda s, y: metrics.pairwise_roc_score(s, y, 0.1),
    }.items():
        for scale in SCALES:
            yield Case(
                f"{name}-scale{scale:.0e}",
                lambda f=f, s=scale: f(S * s, Y),
                Same(lambda f=f, s=scale: _scaled_pair_reference(f, S, s)),
            )
        yield Case(
            f"{name}-nan",
            lambda f=f: f(_with(np.nan, X=S), Y),
            Fails(ValueError, "similarity", "NaN"),
        )
        yield Case(
            f"{name}-not-square", lambda f=f: f(S[:, :5], Y), Fails(ValueError, "similarity")
        )
        yield Case(f"{name}-y-short", lambda f=f: f(S, Y[:-1]), Fails(ValueError, "y|similarity"))
        yield Case(
            f"{name}-y-string", lambda f=f: f(S, Y_FORMS["string"]), Same(lambda f=f: f(S, Y))
        )


def _scaled_pair_reference(f, S, scale):
    result = f(S, Y)
    if isinstance(result, tuple):  # (scores, labels): scores scale, labels do not
        return (result[0] * scale, result[1])
    return result


# ------------------------------------------------------------------ scorers
def _scorer_cases():
    mmc = MMC(random_state=0).fit(X, Y)
    for name in ("mean_auprc", "hit_rate@2", "precision@1", "tpr@fpr=0.1"):
        scorer = metrics.get_scorer(name)
        reference = (lambda s=scorer: s(mmc, X, Y),)[0]
        for scale in (1e-300, 1e300):
            yield Case(
                f"scorer-{name}-scale{scale:.0e}",
                lambda s=scorer, c=scale: s(mmc, X * c, Y),
                Same(reference),
            )
        yield Case(f"scorer-{name}-y-float", lambda s=scorer: s(mmc, X, Y + 0.5), Same(reference))
        yield Case(
            f"scorer-{name}-nan",
            lambda s=scorer: s(mmc, _with(np.nan), Y),
            Fails(ValueError, "X", "NaN"),
        )
    for bad in ("recall@0", "recall@x", "bogus", "tpr@fpr=2", "tpr@fpr=nan", "ndcg@-1"):
        yield Case(
            f"get_scorer-{bad}",
            lambda b=bad: metrics.get_scorer(b),
            Fails(ValueError, "scoring|scorer name|fpr"),
        )


# ------------------------------------------------------------------ data sets
def _dataset_cases():
    calls = [
        ("load_bibtex-subset", lambda: datasets.load_bibtex(subset="validation"), "subset"),
        ("load_corel5k-subset", lambda: datasets.load_corel5k(subset=None), "subset"),
        ("load_mnist-return_X_y", lambda: datasets.load_mnist(return_X_y="yes"), "return_X_y"),
        (
            "load_sparse_arff-n_labels",
            lambda: datasets.load_sparse_arff("x.arff", n_labels=-1),
            "n_labels",
        ),
        ("make_sphere_classes-0", lambda: datasets.make_sphere_classes(0), "n_samples"),
        (
            "make_composite_digits-n_digits",
            lambda: datasets.make_composite_digits(n_digits=0),
            "n_digits",
        ),
        (
            "make_composite_digits-tail",
            lambda: datasets.make_composite_digits(tail_exponent=-1.0),
            "tail_exponent",
        ),
        (
            "make_composite_digits-n_classes",
            lambda: datasets.make_composite_digits(n_classes=1),
            "n_classes",
        ),
        ("make_sphere_classes-float", lambda: datasets.make_sphere_classes(1.5), "n_samples"),
        (
            "make_score_simulation-dist",
            lambda: datasets.make_score_simulation("normal"),
            "distribution",
        ),
        (
            "make_score_simulation-rate0",
            lambda: datasets.make_score_simulation(positive_rate=0.0),
            "positive_rate",
        ),
        (
            "make_score_simulation-rate-nan",
            lambda: datasets.make_score_simulation(positive_rate=np.nan),
            "positive_rate",
        ),
        (
            "make_score_simulation-tiny-rate",
            lambda: datasets.make_score_simulation(n_samples=10, positive_rate=1e-300),
            "positive_rate",
        ),
        (
            "make_score_simulation-n1",
            lambda: datasets.make_score_simulation(n_samples=1),
            "n_samples",
        ),
        (
            "make_large_output-n_labels",
            lambda: datasets.make_large_output_classification(n_labels=1),
            "n_labels",
        ),
        (
            "make_large_output-noise",
            lambda: datasets.make_large_output_classification(noise=-1.0),
            "noise",
        ),
        (
            "make_large_output-noise-inf",
            lambda: datasets.make_large_output_classification(noise=np.inf),
            "noise",
        ),
        (
            "make_large_output-zipf",
            lambda: datasets.make_large_output_classification(zipf_exponent=0),
            "zipf_exponent",
        ),
        (
            "make_large_output-huge-labels",
            lambda: datasets.make_large_output_classification(n_labels=2**60),
            "n_labels",
        ),
        (
            "make_large_output-labels-per-sample",
            lambda: datasets.make_large_output_classification(
                n_labels=3, multilabel=True, n_labels_per_sample=5
            ),
            "n_labels_per_sample",
        ),
        (
            "make_sparse_multilabel-signal",
            lambda: datasets.make_sparse_multilabel_classification(signal=1.5),
            "signal",
        ),
        (
            "make_sparse_multilabel-n_features",
            lambda: datasets.make_sparse_multilabel_classification(n_features=1),
            "n_features",
        ),
        (
            "make_sparse_multilabel-samples",
            lambda: datasets.make_sparse_multilabel_classification(samples_per_label=0),
            "samples_per_label",
        ),
    ]
    for name, call, argument in calls:
        yield Case(name, call, Fails(ValueError, argument))
    yield Case(
        "load_sparse_arff-missing-file",
        lambda: datasets.load_sparse_arff("/nonexistent/x.arff", n_labels=1),
        Fails(FileNotFoundError, "x.arff"),
    )
    yield Case(
        "make_score_simulation-2-items",
        lambda: datasets.make_score_simulation(n_samples=2, positive_rate=0.5, random_state=0)[1],
        Same(
            lambda: (
                np.array([0, 1])
                if datasets.make_score_simulation(n_samples=2, positive_rate=0.5, random_state=0)[
                    1
                ][0]
                == 0
                else np.array([1, 0])
            )
        ),
    )
    yield Case(
        "make_sphere_classes-1",
        lambda: datasets.make_sphere_classes(1, random_state=0)[0].shape,
        Same(lambda: (1, 3)),
    )


# ------------------------------------------------------------------ estimators
def _soprc(**params):
    return SOPRCEmbedder(
        **{
            "max_epochs": 1,
            "batch_size": 8,
            "hidden_layer_sizes": (4,),
            "n_components": 2,
            "random_state": 0,
            "device": "cpu",
            **params,
        }
    )


def _snm(**params):
    return SNMClassifier(
        **{
            "max_epochs": 1,
            "batch_size": 8,
            "hidden_layer_sizes": (4,),
            "n_components": 2,
            "n_negatives": 1,
            "random_state": 0,
            "device": "cpu",
            **params,
        }
    )


ESTIMATORS = {
    # name: (factory, the answer of a fitted model on X, compared between fits)
    "MMC": (lambda **p: MMC(random_state=0, **p), lambda m, X: _distances(m.transform(X))),
    "PointwiseROC": (
        lambda **p: PointwiseROCSimilarity(random_state=0, **p),
        lambda m, X: (m.pairwise_similarity(X), m.threshold_),
    ),
    "SOPRC": (_soprc, lambda m, X: m.transform(X)),
    "SNM": (_snm, lambda m, X: m.decision_function(X)),
}
BAD_PARAMS = {
    "MMC": [
        ("max_iter", 0),
        ("tol", -1.0),
        ("scatter_ridge", -1.0),
        ("min_rank", 0),
        ("min_rank", 4),
        ("min_rank", np.nan),
        ("init", np.full((3, 3), np.nan)),
        ("n_samples", 0),
    ],
    "PointwiseROC": [
        ("alpha", 2.0),
        ("alpha", np.nan),
        ("tolerance", -1.0),
        ("threshold_fpr", 0.0),
        ("threshold_fpr", 1.0),
        ("validation_fraction", 1.0),
        ("identity_weight", -1.0),
        ("identity_weight", np.inf),
    ],
    "SOPRC": [
        ("batch_size", 0),
        ("max_epochs", -1),
        ("learning_rate", -1.0),
        ("learning_rate", np.nan),
        ("n_components", 0),
        ("validation_fraction", 1.5),
        ("hidden_layer_sizes", (0,)),
    ],
    "SNM": [
        ("batch_size", 0),
        ("n_components", 0),
        ("n_negatives", -1),
        ("learning_rate", np.inf),
        ("max_epochs", -1),
        ("validation_fraction", -0.1),
    ],
}


def _fit_answer(name, X_fit, y_fit, X_eval=None, **params):
    factory, answer = ESTIMATORS[name]
    model = factory(**params).fit(X_fit, y_fit)
    return answer(model, X_fit if X_eval is None else X_eval)


def _estimator_cases():
    for name in ESTIMATORS:
        reference = (lambda n=name: _fit_answer(n, X, Y),)[0]
        fit = (lambda X_fit, y_fit, n=name, **p: _fit_answer(n, X_fit, y_fit, **p),)[0]
        for form, labels in Y_FORMS.items():
            if name == "SNM" and form in ("float", "tiny-float"):
                continue  # a classifier: non-integral floats are a regression target (below)
            if name == "SNM" and form in ("object-mixed", "bool-and-int", "tuple"):
                # a classifier takes the labels scikit-learn's classifiers take
                yield Case(
                    f"{name}-y-{form}",
                    lambda f=fit, y=labels: f(X, y),
                    Fails(ValueError, "y", "Unknown label type|multi-label"),
                )
                continue
            yield Case(f"{name}-y-{form}", lambda f=fit, y=labels: f(X, y), Same(reference))
        for form, frame in _pandas_forms(X_INT).items():
            yield Case(
                f"{name}-X-{form}",
                lambda f=fit, frame=frame: f(frame, Y),
                Same(lambda f=fit, frame=frame: f(frame.to_numpy(dtype=float), Y)),
            )
        yield Case(f"{name}-X-list", lambda f=fit: f(X.tolist(), Y.tolist()), Same(reference))
        yield Case(
            f"{name}-X-float32",
            lambda f=fit: f(X.astype(np.float32), Y),
            Same(lambda f=fit: f(X.astype(np.float32).astype(float), Y)),
        )
        for bad, (bad_X, pattern) in BAD_X.items():
            fit_pattern = pattern
            if bad == "3d" and name in ("MMC", "PointwiseROC"):
                fit_pattern = "n_pairs, 2, n_features"  # fit reads a 3-D X as pairs
            if name == "SOPRC" and bad in ("1d", "3d"):
                # SOPRCEmbedder reads 3-D and 4-D X as images: a 5-D X is of no rank it takes,
                # and 3-D items differ from the feature rows it was fitted on.
                if bad == "3d":
                    bad_X = X[:, :, None, None, None]
                fit_pattern = "2-D .* or images"
                if bad == "3d":
                    pattern = "fitted on feature rows"
                if bad == "3d":
                    yield Case(
                        f"{name}-predict-X-images",
                        lambda f=fit: f(X, Y, X_eval=X[:, :, None]),
                        Fails(ValueError, "X", "fitted on feature rows"),
                    )
            yield Case(
                f"{name}-fit-X-{bad}",
                lambda f=fit, b=bad_X: f(b, Y),
                Fails(ValueError, "X", fit_pattern),
            )
            if bad != "empty":
                yield Case(
                    f"{name}-predict-X-{bad}",
                    lambda f=fit, b=bad_X: f(X, Y, X_eval=b),
                    Fails(ValueError, "X", pattern),
                )
        yield Case(
            f"{name}-predict-X-features",
            lambda f=fit: f(X, Y, X_eval=X[:, :2]),
            Fails(ValueError, "X", "features"),
        )
        for bad, (bad_y, pattern) in BAD_Y.items():
            if name == "SNM" and bad in ("2d", "singletons"):
                continue  # a 2-D y is a label indicator, singletons are fine for a classifier
            yield Case(
                f"{name}-y-{bad}", lambda f=fit, b=bad_y: f(X, b), Fails(ValueError, "y", pattern)
            )
        yield Case(f"{name}-one-row", lambda f=fit: f(X[:1], Y[:1]), Fails(ValueError, "X|y"))
        if name in ("MMC", "PointwiseROC"):
            yield Case(
                f"{name}-sparse",
                lambda f=fit: f(sparse.csr_matrix(X), Y),
                Fails(TypeError, "X", "[Ss]parse"),
            )
            for scale in SCALES:
                yield Case(
                    f"{name}-scale{scale:.0e}", lambda f=fit, s=scale: f(X * s, Y), Same(reference)
                )
            yield Case(
                f"{name}-fit1-predict1e300",
                lambda f=fit: f(X, Y, X_eval=X * 1e300),
                Same(
                    (lambda f=fit: _scaled_answer(f(X, Y), 1e300)) if name == "MMC" else reference
                ),
            )
        else:
            yield Case(f"{name}-sparse", lambda f=fit: f(sparse.csr_matrix(X), Y), Same(reference))
            for scale in (1e20, F32_MAX, 1e300, -1e300):
                yield Case(
                    f"{name}-scale{scale:.0e}",
                    lambda f=fit, s=scale: f(X * s, Y),
                    Fails(ValueError, "X", "Scale X"),
                )
                yield Case(
                    f"{name}-predict-scale{scale:.0e}",
                    lambda f=fit, s=scale: f(X, Y, X_eval=X * s),
                    Fails(ValueError, "X", "Scale X"),
                )
            for scale in (1e-25, F32_TINY, 1e-300):
                yield Case(
                    f"{name}-scale{scale:.0e}",
                    lambda f=fit, s=scale: f(X * s, Y),
                    Fails(ValueError, "X", "Scale X"),
                )
            yield Case(
                f"{name}-predict-tiny",  # inputs near zero: the network's output at zero
                lambda f=fit: f(X, Y, X_eval=X * 1e-300),
                Same(lambda f=fit: f(X, Y, X_eval=np.zeros_like(X))),
            )
            yield Case(
                f"{name}-scale1e15",
                lambda f=fit: f(X * 1e15, Y),
                Same(lambda f=fit: f(X * 1e15, Y)),
            )  # representable: deterministic and finite
        yield Case(
            f"{name}-all-equal-rows",
            lambda f=fit: _constant_rows(f(np.ones((18, 3)), Y)),
            Same(lambda: True),
        )
        for parameter, value in BAD_PARAMS[name]:
            yield Case(
                f"{name}-{parameter}={value!r}",
                lambda f=fit, p=parameter, v=value: f(X, Y, **{p: v}),
                Fails(ValueError, parameter),
            )
    yield Case(
        "SNM-y-float", lambda: _fit_answer("SNM", X, Y + 0.5), Fails(ValueError, "y", "continuous")
    )
    yield Case(
        "SNM-y-integral-float",
        lambda: _fit_answer("SNM", X, Y.astype(float)),
        Same(lambda: _fit_answer("SNM", X, Y)),
    )


def _distances(Z):
    """Distances between the rows of ``Z`` (invariant to rotations of MMC's components) as
    (distances / largest, largest), so that distances of rows of 1e300 do not overflow."""
    scale = 2.0 ** -np.frexp(np.abs(Z).max())[1]  # exact
    distances = pairwise_distances(Z * scale)
    largest = distances.max()
    return (distances / largest if largest else distances), largest / scale


def _scaled_answer(answer, scale):
    return answer[0], answer[1] * scale


def _constant_rows(answer):
    rows = np.asarray(answer[0] if isinstance(answer, tuple) else answer)
    return bool(np.all(np.isfinite(rows)) and np.allclose(rows, rows[:1]))


def _method_cases():
    """Methods beyond fit and the main answer: pair distances, metrics, streams, thresholds."""
    mmc = MMC(random_state=0).fit(X, Y)
    for scale in (1e-200, 1e200, 1e-100, 1e100):
        yield Case(
            f"MMC-pair_distance-scale{scale:.0e}",
            lambda s=scale: mmc.pair_distance(X[:9] * s, X[9:] * s) / s,
            Same(lambda: mmc.pair_distance(X[:9], X[9:])),
        )
        yield Case(
            f"MMC-get_metric-scale{scale:.0e}",
            lambda s=scale: mmc.get_metric()(X[0] * s, X[9] * s) / s,
            Same(lambda: mmc.get_metric()(X[0], X[9])),
        )
        if abs(np.log10(scale)) < 150:  # the constraint (squares) stays representable
            yield Case(
                f"MMC-objective-scale{scale:.0e}",
                lambda s=scale: np.array(mmc.objective_and_constraint(X * s, Y)) / [s, s * s],
                Same(lambda: np.array(mmc.objective_and_constraint(X, Y))),
            )
    yield Case(
        "MMC-pair_distance-rows",
        lambda: mmc.pair_distance(X[:9], X[10:]),
        Fails(ValueError, "X1", "same number of rows"),
    )
    for scale in (1e-300, 1e300):
        yield Case(
            f"PointwiseROC-partial_fit-scale{scale:.0e}",
            lambda s=scale: (
                PointwiseROCSimilarity(alpha=0.5, random_state=0)
                .partial_fit(X * s, Y, classes=[0, 1, 2])
                .A_
            ),
            Same(
                lambda: (
                    PointwiseROCSimilarity(alpha=0.5, random_state=0)
                    .partial_fit(X, Y, classes=[0, 1, 2])
                    .A_
                )
            ),
        )
        yield Case(
            f"PointwiseROC-calibrate-scale{scale:.0e}",
            lambda s=scale: (
                PointwiseROCSimilarity(random_state=0)
                .fit(X, Y)
                .calibrate_threshold(X * s, Y + 0.5)
                .threshold_
            ),
            Same(lambda: PointwiseROCSimilarity(random_state=0).fit(X, Y).threshold_),
        )
        yield Case(
            f"PointwiseROC-similarity-scale{scale:.0e}",
            lambda s=scale: (
                PointwiseROCSimilarity(random_state=0).fit(X, Y).pair_score(X[:9] * s, X[9:])
            ),
            Same(lambda: PointwiseROCSimilarity(random_state=0).fit(X, Y).pair_score(X[:9], X[9:])),
        )
    yield Case(
        "PointwiseROC-normalize=False-scale1e200",
        lambda: PointwiseROCSimilarity(normalize=False).fit(X * 1e200, Y),
        Fails(ValueError, "X", "overflow"),
    )
    yield Case(
        "PointwiseROC-normalize=False-scale1e-300",
        lambda: PointwiseROCSimilarity(normalize=False).fit(X * 1e-300, Y),
        Fails(ValueError, "X", "underflow"),
    )
    unnormalized = (lambda: PointwiseROCSimilarity(normalize=False, random_state=0).fit(X, Y),)[0]
    yield Case(
        "PointwiseROC-normalize=False-predict-scale1e100",
        lambda: unnormalized().pairwise_similarity(X * 1e100) / 1e200,
        Same(lambda: unnormalized().pairwise_similarity(X) - 0.5),
    )
    yield Case(
        "PointwiseROC-normalize=False-predict-scale1e200",
        lambda: unnormalized().pairwise_similarity(X * 1e200),
        Fails(ValueError, "X", "Scale X"),
    )
    yield Case(
        "PointwiseROC-pairs-2d",
        lambda: PointwiseROCSimilarity(random_state=0).fit(X, Y).predict(X),
        Fails(ValueError, "pairs", "shape"),
    )
    yield Case(
        "SNM-predict_top_k-scale1e300",
        lambda: _snm().fit(X, Y).predict_top_k(X * 1e300, 2),
        Fails(ValueError, "X", "Scale X"),
    )
    yield Case(
        "SOPRC-score-scale1e300",
        lambda: _soprc().fit(X, Y).score(X * 1e300, Y),
        Fails(ValueError, "X", "Scale X"),
    )


def _dask_cases():
    """Larger-than-memory fits (dask arrays), when dask is installed."""
    try:
        import dask.array as da  # noqa: PLC0415 (optional dependency)
    except ImportError:
        return
    for scale in (1e-300, 1e300):
        yield Case(
            f"PointwiseROC-dask-scale{scale:.0e}",
            lambda s=scale: (
                PointwiseROCSimilarity(random_state=0).fit(da.from_array(X * s, chunks=6), Y).A_
            ),
            Same(
                lambda: PointwiseROCSimilarity(random_state=0).fit(da.from_array(X, chunks=6), Y).A_
            ),
        )
        yield Case(  # rescaled by a power of two on dask as in memory: the same distances
            f"MMC-dask-scale{scale:.0e}",
            lambda s=scale: _distances(
                MMC(negatives="pairs", n_samples=50, random_state=0)
                .fit(da.from_array(X * s, chunks=6), Y)
                .transform(X * s)
            ),
            Same(
                lambda: _distances(
                    MMC(negatives="pairs", n_samples=50, random_state=0)
                    .fit(da.from_array(X, chunks=6), Y)
                    .transform(X)
                )
            ),
        )


CASES = [
    *_dask_cases(),
    *_method_cases(),
    *_retrieval_cases(),
    *_binary_cases(),
    *_label_cases(),
    *_search_cases(),
    *_pair_cases(),
    *_scorer_cases(),
    *_dataset_cases(),
    *_estimator_cases(),
]


def test_matrix_has_enough_cases():
    assert len(CASES) >= 400
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_extreme_input(case):
    _run(case)
