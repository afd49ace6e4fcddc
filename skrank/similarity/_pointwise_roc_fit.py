"""The fit of :class:`~skrank.PointwiseROCSimilarity`: one function from the pair statistics to
the fitted similarity, whichever data it was learned from.

Every fit (``fit`` on class-labelled items in memory or on a dask array, ``partial_fit`` on a
stream, ``fit`` on given pairs) ends in :func:`fit_pointwise_roc`: it resolves ``solver`` and
``alpha`` (``"auto"``: the level with the best true-positive rate at ``threshold_fpr`` on
held-out data, :class:`HeldOut`), solves the problem and calibrates the decision threshold, and
returns a :class:`PointwiseROCFit`, which the estimator stores as its fitted attributes. What
differs between the fits is where ``P``, ``N``, the held-out data and the negative pairs of the
threshold come from: :func:`fit_on_items` computes them from class-labelled items (in memory, or
read on demand from a dask array, :mod:`skrank.similarity._dask`), :func:`fit_on_stream` from a
stream of chunks, :func:`held_out_items` and :func:`held_out_pairs` hold out items or given
pairs for ``alpha="auto"``.
"""

import functools
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from sklearn.model_selection import train_test_split

from ..metrics import pairwise_roc_score, pointwise_roc_score
from ..sampling import sample_negative_pairs, sample_negative_tuples
from ..utils._labels import check_class_counts
from ._pair_scores import (
    RESERVOIR_ITEMS,
    ItemReservoir,
    bilinear_similarity,
    negative_pair_similarities,
    threshold_at_fpr,
)
from ._pair_statistics import PairStatistics, negative_pair_outer_mean
from ._pointwise_roc_solvers import (
    alpha_levels,
    feasible_alpha_range,
    regularized_positive_matrix,
    score_alpha_levels,
    solve_cvxpy,
    solve_kkt,
)

__all__ = [
    "HeldOut",
    "ItemsFit",
    "PointwiseROCFit",
    "fit_on_items",
    "fit_on_stream",
    "fit_pointwise_roc",
    "held_out_items",
    "held_out_pairs",
    "item_statistics",
    "new_stream",
    "reservoir_scores",
    "split_items",
]

# Number of levels alpha="auto" tries.
N_ALPHA_LEVELS = 20
# Largest number of held-out items whose pairs score the levels of alpha="auto".
MAX_VALIDATION_ITEMS = 2_000
# Largest number of held-out pairs that score the levels of alpha="auto" in a fit on pairs.
MAX_VALIDATION_PAIRS = 50_000
# The solver that solver="auto" resolves to.
_SOLVERS = {"auto": "kkt", "kkt": "kkt", "cvxpy": "cvxpy"}


class PointwiseROCFit(NamedTuple):
    """Outcome of :func:`fit_pointwise_roc`: the fitted attributes of the similarity.

    Each field is the estimator's attribute of the same name with a trailing underscore
    (``A`` is ``A_``, ``threshold`` is ``threshold_``; ``lambda_`` and ``gamma_`` keep theirs).
    """

    alpha: float
    solver: str
    A: np.ndarray
    P: np.ndarray
    N: np.ndarray
    beta: float
    lambda_: float
    gamma_: float
    active_constraints: tuple
    positive_risk: float
    negative_risk: float
    alpha_levels: np.ndarray | None
    alpha_scores: np.ndarray | None
    threshold: float | None


class HeldOut(NamedTuple):
    """What ``alpha="auto"`` scores its levels on.

    Attributes
    ----------
    positive_matrix, negative_matrix : ndarray of shape (n_features, n_features)
        ``P`` (not regularised) and ``N`` of the pairs of the fitting part.
    score : callable
        ``score(A)``: the true-positive rate at ``threshold_fpr`` of the similarity of matrix
        ``A`` over the held-out pairs.
    """

    positive_matrix: np.ndarray
    negative_matrix: np.ndarray
    score: Callable


def fit_pointwise_roc(
    P,
    N,
    *,
    alpha="auto",
    held_out=None,
    negative_scores,
    threshold_fpr=0.05,
    identity_weight=3.0,
    tolerance=0.0,
    solver="auto",
    negative_risk_matrix=None,
):
    """Solve the pointwise ROC problem on ``P`` and ``N``, at ``alpha`` or the level it chooses.

    Parameters
    ----------
    P : ndarray of shape (n_features, n_features)
        Mean symmetrised outer product over the positive training pairs.
    N : ndarray of shape (n_features, n_features)
        The estimate of the same over negative pairs used in the constraint.
    alpha : float or "auto", default="auto"
        Level of the negative-risk constraint, or ``"auto"``: the level, among
        :func:`~skrank.similarity._pointwise_roc_solvers.alpha_levels` of the held-out part's
        problem, with the largest held-out score, taken at the same place of the range of
        ``P, N``.
    held_out : callable or None, default=None
        ``held_out()`` returns the :class:`HeldOut` data of ``alpha="auto"`` (called only then,
        so that a fixed level draws and reads nothing for it).
    negative_scores : callable
        ``negative_scores(A)``: the similarities of the negative pairs the threshold is
        calibrated on (None: no threshold).
    threshold_fpr : float, default=0.05
        False-positive rate of the threshold and of the held-out score.
    identity_weight : float, default=3.0
        Weight of the pull toward the cosine similarity
        (:func:`~skrank.similarity.regularized_positive_matrix`).
    tolerance : float, default=0.0
        Tolerance added to ``alpha``.
    solver : {"auto", "kkt", "cvxpy"}, default="auto"
        ``"auto"`` is ``"kkt"``.
    negative_risk_matrix : ndarray of shape (n_features, n_features) or None, default=None
        The exact negative matrix for ``negative_risk`` when ``N`` is a sampled estimate;
        None: ``N``.

    Returns
    -------
    fit : PointwiseROCFit
    """
    solver = _SOLVERS[solver]
    P_reg = regularized_positive_matrix(P, identity_weight)
    levels = scores = None
    if alpha == "auto":
        part = held_out()
        levels, scores = score_alpha_levels(
            regularized_positive_matrix(part.positive_matrix, identity_weight),
            part.negative_matrix,
            part.score,
            tolerance=tolerance,
            n_levels=N_ALPHA_LEVELS,
        )
        # the chosen level's place in the range of all the data
        alpha = alpha_levels(P_reg, N, tolerance, N_ALPHA_LEVELS)[int(np.argmax(scores))]
    alpha = float(alpha)
    beta = 2.0 * (alpha + tolerance) - 1.0
    if beta < -np.linalg.norm(N):
        low, high = feasible_alpha_range(N, tolerance)
        raise ValueError(
            f"alpha={alpha} is infeasible for this training data: no similarity of the "
            f"model has a mean negative-pair similarity below alpha + tolerance. With "
            f"tolerance={tolerance}, the feasible alpha are [{low:.6g}, {high:g}]."
        )
    solve = solve_cvxpy if solver == "cvxpy" else solve_kkt
    solution = solve(P_reg, N, beta)
    A = (solution.A + solution.A.T) / 2
    active = (("negative_risk",) if solution.risk_active else ()) + (
        ("norm",) if solution.norm_active else ()
    )
    exact_N = N if negative_risk_matrix is None else negative_risk_matrix
    negatives = negative_scores(A)
    return PointwiseROCFit(
        alpha=alpha,
        solver=solver,
        A=A,
        P=P,
        N=N,
        beta=beta,
        lambda_=solution.lambda_,
        gamma_=solution.gamma_,
        active_constraints=active,
        positive_risk=(1.0 + float(np.vdot(P, A))) / 2.0,
        negative_risk=(1.0 + float(np.vdot(exact_N, A))) / 2.0,
        alpha_levels=levels,
        alpha_scores=scores,
        threshold=None if negatives is None else threshold_at_fpr(negatives, threshold_fpr),
    )


def item_statistics(rows, codes, parts=()):
    """:class:`PairStatistics` of all items, then of each part (an array of row indices)."""
    n_features = rows.shape[1]
    whole = PairStatistics(n_features).update(rows, codes)
    return (whole, *(PairStatistics(n_features).update(rows[part], codes[part]) for part in parts))


class ItemsFit(NamedTuple):
    """Outcome of :func:`fit_on_items`: the fit, and the state a stream continues from.

    Attributes
    ----------
    fit : PointwiseROCFit
    statistics : PairStatistics
        Statistics of all items.
    reservoir : ItemReservoir
        A uniform sample of the items (the threshold's negative pairs after ``partial_fit``).
    held_out : tuple of (PairStatistics, ItemReservoir)
        Statistics of the items ``alpha="auto"`` fitted on and a sample of those it held out
        (both empty for a fixed ``alpha``).
    """

    fit: PointwiseROCFit
    statistics: PairStatistics
    reservoir: ItemReservoir
    held_out: tuple


def fit_on_items(
    rows,
    codes,
    *,
    statistics=item_statistics,
    negative_similarities=negative_pair_similarities,
    random_state,
    alpha="auto",
    validation_fraction=0.2,
    negatives="all",
    n_samples=None,
    threshold_fpr=0.05,
    identity_weight=3.0,
    tolerance=0.0,
    solver="auto",
):
    """:func:`fit_pointwise_roc` on the pairs implied by the class labels of items.

    The random draws come in this order, from the labels alone: the item reservoir, the sample
    of negative pairs or tuples, the split of ``alpha="auto"``, the pairs of the threshold; so
    rows read on demand give the fit of rows in memory.

    Parameters
    ----------
    rows : ndarray of shape (n_samples, n_features), or rows read on demand
        The items as the similarity sees them (preprocessed, normalised).
    codes : ndarray of shape (n_samples,)
        Their class codes.
    statistics : callable, default=item_statistics
        ``statistics(rows, codes, parts)``: the :class:`PairStatistics` of all items and of each
        part (:func:`item_statistics`;
        :func:`~skrank.similarity._dask.item_statistics_dask` computes them in one pass over
        the blocks of a dask array).
    negative_similarities : callable, default=negative_pair_similarities
        ``negative_similarities(rows, codes, A, random_state=...)``: the
        similarities of the negative pairs of the threshold
        (:func:`~skrank.similarity._pair_scores.negative_pair_similarities`).
    random_state : numpy.random.RandomState
        The generator of every draw.
    alpha, validation_fraction, negatives, n_samples, threshold_fpr, identity_weight, \
tolerance, solver
        The estimator's parameters.

    Returns
    -------
    fit : ItemsFit
    """
    check_class_counts(np.bincount(codes), needed_by="PointwiseROCSimilarity")
    n_features = rows.shape[1]
    _, reservoir, held_out = new_stream(n_features)
    reservoir.update(rows, codes, random_state)
    sample = None
    if negatives != "all":
        sampler = sample_negative_pairs if negatives == "pairs" else sample_negative_tuples
        sample = sampler(codes, n_samples, random_state=random_state)
    parts = validation = ()
    if alpha == "auto":  # drawn before the statistics, which a dask array computes in one pass
        fit_part, validation = split_items(codes, validation_fraction, random_state)
        parts = (fit_part,)
    whole, *fit_part_statistics = statistics(rows, codes, parts)
    N = whole.negative_matrix() if sample is None else negative_pair_outer_mean(rows, sample)

    def choose_on():
        nonlocal held_out
        X_val, codes_val = rows[validation], codes[validation]
        part = held_out_items(
            fit_part_statistics[0],
            X_val,
            codes_val,
            fallback=(whole, rows, codes),
            validation_fraction=validation_fraction,
            threshold_fpr=threshold_fpr,
        )
        held_out = (fit_part_statistics[0], held_out[1].update(X_val, codes_val, random_state))
        return part

    fit = fit_pointwise_roc(
        whole.positive_matrix(),
        N,
        alpha=alpha,
        held_out=choose_on,
        negative_scores=functools.partial(
            negative_similarities, rows, codes, random_state=random_state
        ),
        threshold_fpr=threshold_fpr,
        identity_weight=identity_weight,
        tolerance=tolerance,
        solver=solver,
        negative_risk_matrix=whole.negative_matrix(),
    )
    return ItemsFit(fit, whole, reservoir, held_out)


def new_stream(n_features):
    """The state of a stream before its first chunk: statistics, reservoir, held-out part."""
    held_out = (PairStatistics(n_features), ItemReservoir(RESERVOIR_ITEMS, n_features))
    return PairStatistics(n_features), ItemReservoir(RESERVOIR_ITEMS, n_features), held_out


def fit_on_stream(
    X,
    codes,
    statistics,
    reservoir,
    held_out,
    *,
    random_state,
    alpha="auto",
    validation_fraction=0.2,
    threshold_fpr=0.05,
    identity_weight=3.0,
    tolerance=0.0,
    solver="auto",
):
    """Add a chunk of items to a stream and :func:`fit_pointwise_roc` on all items seen.

    The state (``statistics``, ``reservoir``, ``held_out``: see :func:`new_stream` and
    :class:`ItemsFit`) is updated in place. With ``alpha="auto"`` each item is held out with
    probability ``validation_fraction`` (the held-out part keeps a uniform sample of them, the
    other items' statistics choose the level); the threshold is calibrated on the negative
    pairs of the reservoir (:func:`reservoir_scores`).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The chunk, as the similarity sees it (normalised).
    codes : ndarray of shape (n_samples,)
        Its class codes.
    statistics, reservoir, held_out
        The stream's state.
    random_state : numpy.random.RandomState
        The stream's generator.
    alpha, validation_fraction, threshold_fpr, identity_weight, tolerance, solver
        The estimator's parameters.

    Returns
    -------
    fit : PointwiseROCFit or None
        None until the items seen hold a positive and a negative pair.
    """
    statistics.update(X, codes)
    reservoir.update(X, codes, random_state)
    if alpha == "auto":  # drawn for every chunk, chosen on or not
        is_held_out = random_state.random_sample(X.shape[0]) < validation_fraction
        held_out[0].update(X[~is_held_out], codes[~is_held_out])
        held_out[1].update(X[is_held_out], codes[is_held_out], random_state)
    if not (statistics.n_positive_pairs and statistics.n_negative_pairs):
        return None
    choose_on = functools.partial(
        held_out_items,
        held_out[0],
        held_out[1].items,
        held_out[1].class_codes,
        fallback=(statistics, reservoir.items, reservoir.class_codes),
        validation_fraction=validation_fraction,
        threshold_fpr=threshold_fpr,
    )
    return fit_pointwise_roc(
        statistics.positive_matrix(),
        statistics.negative_matrix(),
        alpha=alpha,
        held_out=choose_on,
        negative_scores=functools.partial(reservoir_scores, reservoir, random_state=random_state),
        threshold_fpr=threshold_fpr,
        identity_weight=identity_weight,
        tolerance=tolerance,
        solver=solver,
    )


def split_items(codes, validation_fraction, random_state):
    """Indices of the fitting part and of the (at most 2,000) held-out items, stratified."""
    try:
        fit_part, validation = train_test_split(
            np.arange(codes.shape[0]),
            test_size=validation_fraction,
            stratify=codes,
            random_state=random_state,
        )
    except ValueError:  # a class too small to be split
        fit_part, validation = train_test_split(
            np.arange(codes.shape[0]), test_size=validation_fraction, random_state=random_state
        )
    return fit_part, validation[:MAX_VALIDATION_ITEMS]


def held_out_items(
    fit_statistics, X_val, codes_val, *, fallback, validation_fraction, threshold_fpr
):
    """:class:`HeldOut` items: the problem of the fitting part, the TPR over held-out pairs.

    Falls back to the training pairs (``fallback``: their statistics, their rows and class
    codes, of which the first 2,000 score the levels), with a warning, when the fitting part or
    the held-out one lacks a positive or a negative pair.

    Parameters
    ----------
    fit_statistics : PairStatistics
        Statistics of the fitting part.
    X_val : ndarray of shape (n_val, n_features)
        Held-out items, prepared as the training ones.
    codes_val : ndarray of shape (n_val,)
        Their class codes.
    fallback : tuple of (PairStatistics, rows, ndarray)
        Statistics, rows and class codes of all training items.
    validation_fraction, threshold_fpr : float
        The estimator's parameters (the first for the warning).

    Returns
    -------
    held_out : HeldOut
    """
    _, counts = np.unique(codes_val, return_counts=True)
    if not (
        fit_statistics.n_positive_pairs
        and fit_statistics.n_negative_pairs
        and counts.shape[0] > 1
        and counts.max() > 1
    ):
        _warn_alpha_on_training_pairs(validation_fraction, "items", "Give more items per class")
        fit_statistics, rows, codes = fallback
        X_val, codes_val = rows[:MAX_VALIDATION_ITEMS], codes[:MAX_VALIDATION_ITEMS]

    def validation_tpr(A):
        return pairwise_roc_score(X_val @ A @ X_val.T, codes_val, threshold_fpr)

    return HeldOut(
        fit_statistics.positive_matrix(), fit_statistics.negative_matrix(), validation_tpr
    )


def held_out_pairs(pairs, rows, is_similar, *, random_state, validation_fraction, threshold_fpr):
    """:class:`HeldOut` given pairs: levels fitted on most pairs, scored on the others.

    The pairs are split as the items are (stratified by kind, ``validation_fraction`` held out,
    at most 50,000 of them scoring the levels); the training pairs stand in, with a warning,
    when a part lacks a kind of pair.

    Parameters
    ----------
    pairs : GivenPairs
        The training pairs.
    rows : rows read on demand
        Their items as the similarity sees them.
    is_similar : ndarray of shape (n_pairs,), dtype=bool
        Which pairs are similar.
    random_state : numpy.random.RandomState
        The generator of the split.
    validation_fraction, threshold_fpr : float
        The estimator's parameters.

    Returns
    -------
    held_out : HeldOut
    """
    indices = np.arange(pairs.n_pairs)
    try:
        fit_part, validation = train_test_split(
            indices, test_size=validation_fraction, stratify=is_similar, random_state=random_state
        )
    except ValueError:  # a kind of pair too rare to be split
        fit_part, validation = train_test_split(
            indices, test_size=validation_fraction, random_state=random_state
        )
    validation = validation[:MAX_VALIDATION_PAIRS]
    if len({*is_similar[fit_part]}) < 2 or len({*is_similar[validation]}) < 2:
        _warn_alpha_on_training_pairs(validation_fraction, "pairs", "Give more pairs of each kind")
        fit_part, validation = indices, indices[:MAX_VALIDATION_PAIRS]
    fit_pairs, fit_similar = pairs.subset(fit_part), is_similar[fit_part]
    first, second = pairs.items(validation, rows)
    validation_similar = is_similar[validation]

    def validation_tpr(A):
        scores = bilinear_similarity(first, second, A)
        return pointwise_roc_score(validation_similar, scores, threshold_fpr)

    return HeldOut(
        negative_pair_outer_mean(rows, fit_pairs.sample(fit_similar)),
        negative_pair_outer_mean(rows, fit_pairs.sample(~fit_similar)),
        validation_tpr,
    )


def reservoir_scores(reservoir, A, *, random_state):
    """Similarities of the negative pairs of a stream's :class:`ItemReservoir`.

    None, with a warning, when the reservoir holds a single class (``partial_fit`` then leaves
    the threshold unset).
    """
    if np.unique(reservoir.class_codes).shape[0] > 1:
        return negative_pair_similarities(
            reservoir.items, reservoir.class_codes, A, random_state=random_state
        )
    warnings.warn(
        "The reservoir of items kept for calibrating the threshold holds a single class, so "
        "threshold_ is unset (None) until calibrate_threshold(X, y) is called with data of "
        "several classes.",
        UserWarning,
        stacklevel=5,  # partial_fit's caller
    )
    return None


def _warn_alpha_on_training_pairs(validation_fraction, held_out, fix):
    warnings.warn(
        f'alpha="auto" holds out validation_fraction={validation_fraction} of the '
        f"{held_out} to choose alpha, and the held-out part or the rest lacks a similar or a "
        "dissimilar pair: alpha is chosen on the training pairs instead (an optimistic "
        f"choice). {fix}, or set alpha to a number.",
        UserWarning,
        stacklevel=2,
    )
