"""Model selection with a fallback: the one-standard-error rule toward a baseline candidate."""

from numbers import Real

import numpy as np

__all__ = ["one_standard_error_rule"]


def one_standard_error_rule(baseline, *, n_standard_errors=1.0, scoring="score"):
    """A ``refit`` rule for grid searches: the best candidate, unless the baseline is as good.

    Returns a callable for the ``refit`` parameter of
    :class:`~sklearn.model_selection.GridSearchCV` (or any search with ``cv_results_``). It
    picks the candidate with the best mean validation score, except when the ``baseline``
    candidate (the simplest one, e.g. ``{"mmc": "passthrough"}``: no metric learning) scores
    within ``n_standard_errors`` standard errors of it; then it picks the baseline. This is the
    one-standard-error rule of Breiman et al. (1984) with two levels of complexity: a learned
    model must beat the baseline by more than the noise of its own validation estimate.

    The standard error of the best candidate is ``std(split scores, ddof=1) / sqrt(n_splits)``.
    Split scores of repeated folds are correlated (their training sets overlap), so this
    underestimates the error; repeated folds still make the mean less dependent on one
    partition (:class:`~sklearn.model_selection.RepeatedStratifiedKFold`).

    Parameters
    ----------
    baseline : dict
        Parameters of the baseline candidate, as they appear in ``cv_results_["params"]``
        (all of its keys must match).
    n_standard_errors : float, default=1.0
        Margin, in standard errors of the best candidate's mean score, by which the best must
        beat the baseline to be chosen; 0 gives the usual best-score choice.
    scoring : str, default="score"
        Name of the score in ``cv_results_`` (``mean_test_<scoring>``): ``"score"`` for a
        single scorer, or the key of one scorer of a dict of scorers.

    Returns
    -------
    refit : callable
        ``refit(cv_results) -> int``, the index of the chosen candidate.

    References
    ----------
    L. Breiman, J. Friedman, R. Olshen and C. Stone. Classification and Regression Trees.
    Wadsworth, 1984, Section 3.4.3. T. Hastie, R. Tibshirani and J. Friedman. The Elements of
    Statistical Learning, 2nd ed., Section 7.10.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.model_selection import GridSearchCV
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> from sklearn.pipeline import Pipeline
    >>> from skrank import MMC
    >>> from skrank.similarity import one_standard_error_rule
    >>> X, y = load_iris(return_X_y=True)
    >>> search = GridSearchCV(
    ...     Pipeline([("mmc", MMC()), ("knn", KNeighborsClassifier())]),
    ...     [{"mmc": ["passthrough"]}, {"mmc__min_rank": [0.25, 0.5]}],
    ...     refit=one_standard_error_rule({"mmc": "passthrough"}),
    ... ).fit(X, y)
    >>> search.best_params_
    {'mmc': 'passthrough'}
    """
    if not isinstance(baseline, dict) or not baseline:
        raise ValueError(
            f"baseline must be a non-empty dict of parameters, got {baseline!r}: give the "
            "baseline candidate's parameters, e.g. {'mmc': 'passthrough'}."
        )
    if not isinstance(n_standard_errors, Real) or not n_standard_errors >= 0:
        raise ValueError(
            f"n_standard_errors must be a non-negative number, got {n_standard_errors!r}."
        )

    def refit(cv_results):
        return _one_standard_error_index(cv_results, baseline, n_standard_errors, scoring)

    return refit


def _one_standard_error_index(cv_results, baseline, n_standard_errors, scoring):
    """The index chosen by :func:`one_standard_error_rule` in ``cv_results``."""
    key = f"mean_test_{scoring}"
    if key not in cv_results:
        names = [k.removeprefix("mean_test_") for k in cv_results if k.startswith("mean_test_")]
        raise ValueError(
            f"cv_results has no {key!r}: give one_standard_error_rule the scoring name used "
            f"by the search (scoring={scoring!r}; names found: {names})."
        )
    matches = [
        i
        for i, params in enumerate(cv_results["params"])
        if all(k in params and _equal(params[k], v) for k, v in baseline.items())
    ]
    if len(matches) != 1:
        raise ValueError(
            f"baseline={baseline!r} matches {len(matches)} candidates of the search; it must "
            "match exactly one: add it to the grid (e.g. a separate grid {'mmc': "
            "['passthrough']}) or name more of its parameters."
        )
    means = np.asarray(cv_results[key], dtype=float)
    best = int(np.nanargmax(means))
    splits = np.array(
        [
            cv_results[f"split{i}_test_{scoring}"][best]
            for i in range(_n_splits(cv_results, scoring))
        ],
        dtype=float,
    )
    standard_error = splits.std(ddof=1) / np.sqrt(splits.size) if splits.size > 1 else 0.0
    if means[matches[0]] >= means[best] - n_standard_errors * standard_error:
        return matches[0]
    return best


def _n_splits(cv_results, scoring):
    n = 0
    while f"split{n}_test_{scoring}" in cv_results:
        n += 1
    return n


def _equal(a, b):
    """Parameter equality that tolerates estimators and arrays (identity, else ``==``)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False
