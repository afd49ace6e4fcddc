"""The PointwiseROCSimilarity estimator: a thin shell over the pair statistics and the solvers."""

import copy
import functools
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import Interval, StrOptions, _fit_context
from ..metrics import pairwise_roc_score, pointwise_roc_score
from ..utils._deprecation import renamed_method
from ..utils._docstrings import fill_shared_docs
from ..utils._labels import CLASS_LABELS_DOCS, encode_labels
from ..utils._params import parameters_for, store_parameters
from ..utils._persistence import VersionedStateMixin
from ..utils._validation import check_bilinear_range, naming_inputs, normalize_rows
from ._dask import (
    DaskRows,
    check_dask_data,
    fit_input_transform_dask,
    is_dask_array,
    item_statistics_dask,
    negative_pair_similarities_dask,
)
from ._given_pairs import PAIR_INPUT_DOCS, check_pair_labels, check_pairs, is_pair_input
from ._pair_scores import (
    bilinear_similarity,
    bilinear_similarity_matrix,
    given_pair_similarities,
    negative_pair_similarities,
    threshold_at_fpr,
)
from ._pair_statistics import negative_pair_outer_mean
from ._pointwise_roc_fit import (
    fit_on_items,
    fit_on_stream,
    fit_pointwise_roc,
    held_out_pairs,
    new_stream,
)
from ._pointwise_roc_solvers import fit_input_transform


def _with_solver_used(state):
    """A fitted state saved before ``solver_`` existed, with the solver its fit used."""
    if "A_" not in state or "solver_" in state:
        return state
    return {**state, "solver_": "cvxpy" if state.get("solver") == "cvxpy" else "kkt"}


@fill_shared_docs(methods={**PAIR_INPUT_DOCS, **CLASS_LABELS_DOCS})
class PointwiseROCSimilarity(VersionedStateMixin, BaseEstimator):
    """Bilinear similarity with the largest true-positive rate at a bounded negative risk.

    Learns ``S_A(x, x') = (1 + x^T A x') / 2`` on L2-normalised (optionally standardised or
    whitened) inputs by solving problem (6) of Vogel, Bellet & Clémençon (2018), for the pairs
    ``i < j`` implied by class labels (a pair is *positive* when both items share a class), with
    an optional pull toward the cosine similarity::

        maximise  mean S_A over positive pairs  +  mu ||P||_F <I, A> / sqrt(d)
        subject to  mean S_A over negative pairs <= alpha + tolerance,   ||A||_F <= 1.

    With ``P`` and ``N`` the mean symmetrised outer products ``(x_i x_j^T + x_j x_i^T) / 2`` over
    positive and negative pairs, this is ``max <P + mu ||P||_F I / sqrt(d), A> s.t. <N, A> <=
    beta, ||A||_F <= 1`` with ``beta = 2 (alpha + tolerance) - 1``, solved in closed form from its
    KKT conditions (:func:`~skrank.similarity.solve_kkt`) or by cvxpy. ``mu = identity_weight``;
    ``mu = 0`` is the paper's problem. On the unit sphere ``||A||_F = 1`` the added term is the
    penalty ``-(mu ||P||_F / 2) ||A - I / sqrt(d)||_F^2`` toward the cosine similarity's matrix
    (:func:`~skrank.similarity.regularized_positive_matrix`). ``P`` and ``N`` are computed
    exactly from the class sums and the Gram matrix in ``O(n d^2)`` time, with no loop over the
    ``n^2`` pairs, and can be accumulated over chunks with :meth:`partial_fit`.

    **Learning from pairs.** ``fit(pairs, y)`` learns from given pairs instead of class labels:
    ``y`` is 1 or True for a similar pair and -1, 0 or False for a dissimilar one, ``pairs`` an
    array of shape (n_pairs, 2, n_features) (a dask array chunked along the pairs for pairs
    larger than memory) or an (n_pairs, 2) array of row indices into ``items``. ``P`` and ``N``
    are then the means over the given similar and dissimilar pairs (exact, summed over chunks of
    pairs), ``alpha="auto"`` holds out pairs instead of items, ``threshold_`` is calibrated on
    the dissimilar pairs, ``predict`` returns the labels of ``y`` and ``score(pairs, y)`` the
    TPR at ``threshold_fpr`` over the pairs. See the :ref:`User Guide <pairs>`.

    **Choosing alpha for a target FPR** (``alpha="auto"``, the default). The paper's level bounds
    the negative risk, not the false-positive rate users read. ``"auto"`` holds out
    ``validation_fraction`` of the items (stratified), solves the problem on the others at 20
    levels spanning the range where the constraint matters, and keeps the level whose solution
    has the largest true-positive rate at ``threshold_fpr`` over the held-out pairs
    (:func:`~skrank.similarity.select_alpha`); the final model is fitted on all items at the
    level in the same place of their range (``alpha_``).

    **What alpha means.** For this bilinear similarity, ``alpha`` bounds the *mean similarity of
    negative pairs* (the negative risk), not the false-positive rate at any threshold: the ROC
    point the solution reaches is only known a posteriori. Smaller ``alpha`` uses more of the
    information in the negative pairs and favours the low-false-positive end of the ROC curve;
    larger ``alpha`` favours the high end. To act on pairs, the estimator calibrates a decision
    threshold on the training negative pairs at the false-positive rate ``threshold_fpr``.

    **Feasible alpha.** The smallest mean negative similarity any ``A`` of the unit ball reaches
    is ``(1 - ||N||_F) / 2``, so the problem is feasible if and only if
    ``alpha >= (1 - ||N||_F) / 2 - tolerance`` (a clear error says so otherwise;
    :func:`~skrank.similarity.feasible_alpha_range` computes the range). ``alpha = 0.5`` is
    feasible for any data. From ``alpha = (1 + <N, P> / ||P||_F) / 2 - tolerance``
    on, the constraint is inactive and ``A = P / ||P||_F`` (see ``active_constraints_``). On
    centred, normalised data (e.g. after PCA) negative pairs average near zero, ``||N||_F`` is
    small and the interesting range of ``alpha`` is a narrow interval just below 0.5.

    Read more in the :ref:`User Guide <pointwise_roc>`.

    **Defaults.** ``alpha="auto"`` and ``identity_weight=3.0`` were chosen on validation splits
    of MNIST (PCA to 32), sklearn's digits and the paper's sphere data, where they beat the
    cosine similarity at 1% FPR; the paper's criterion (``identity_weight=0``, a level chosen
    on validation pairs) lost to it on MNIST and digits. Choose them, and ``preprocessing``,
    for your data with :class:`~sklearn.model_selection.GridSearchCV` (see the user guide).

    Parameters
    ----------
    alpha : float or "auto", default="auto"
        Level of the negative-risk constraint, in [0, 1], or "auto": the level with the best
        held-out TPR at ``threshold_fpr`` (see above).
    identity_weight : float, default=3.0
        Weight ``mu >= 0`` of the pull toward the cosine similarity (0: the paper's problem).
    preprocessing : {"none", "center", "standardize", "whiten"}, default="none"
        Affine map fitted on the training items and applied to every input before the L2
        normalisation: none, centring, centring and division by each feature's standard
        deviation, or centring and PCA whitening (covariance to the identity; eigenvalues
        floored at 1e-6 times the largest). The similarity is then the bilinear form of the
        mapped, normalised inputs. :meth:`partial_fit` needs "none".
    validation_fraction : float, default=0.2
        Fraction of the items held out to choose ``alpha`` when ``alpha="auto"`` (at most 2,000
        of them score the levels); ignored otherwise.
    tolerance : float, default=0.0
        Tolerance ``Phi >= 0`` added to ``alpha`` (the paper's allowance for the deviation of the
        empirical negative risk from the true one).
    negatives : {"all", "pairs", "tuples"}, default="all"
        Estimate of ``N`` in the constraint: exact over all negative pairs, or the incomplete
        U-statistic of ``n_samples`` negative pairs drawn uniformly with replacement ("pairs"), or
        of ``n_samples`` K-tuples holding one random item per class ("tuples"; see
        :mod:`skrank.sampling`). ``P`` is always exact. The sampled estimates follow Section 4 of
        the paper; for this bilinear similarity the exact ``N`` is as cheap as ``P``, so sampling
        only changes the solution, not the cost. :meth:`partial_fit` supports "all" only.
    n_samples : int, default=None
        Number of pairs or tuples drawn when ``negatives`` is "pairs" or "tuples" (required
        then; ignored for "all").
    solver : {"auto", "kkt", "cvxpy"}, default="auto"
        "kkt" is the exact closed form (:func:`~skrank.similarity.solve_kkt`); "cvxpy" solves the
        same problem with cvxpy (optional dependency, the ``solvers`` extra; hundreds of times
        slower). "auto" uses "kkt".
    normalize : bool, default=True
        L2-normalise every input row (fit and prediction alike), so that similarities lie in
        [0, 1]. Rows of zero norm are then an error. With False, inputs are used as they are;
        similarities stay in [0, 1] only for rows of norm at most 1.
    threshold_fpr : float, default=0.05
        Target false-positive rate, in (0, 1): the rate at which ``alpha="auto"`` compares the
        levels, of the decision threshold ``threshold_`` used by :meth:`predict` and
        :meth:`decision_function`, and at which :meth:`score` reads the true-positive rate.
    random_state : int, RandomState instance or None, default=None
        Seed of the validation split of ``alpha="auto"``, of the pair or tuple samples, of the
        sample of negative pairs used for the threshold when there are more than 250,000 of
        them, and of the item reservoirs of :meth:`partial_fit`.
    items : array-like of shape (n_items, n_features) or None, default=None
        Item table for pairs given as row indices: with it, ``fit``, ``score``,
        ``calibrate_threshold``, ``decision_function`` and ``predict`` take an (n_pairs, 2)
        integer array of row indices into ``items`` (as metric-learn's ``preprocessor``), so
        that many pairs over few items need no (n_pairs, 2, n_features) copy. None: ``fit``,
        ``score`` and ``calibrate_threshold`` take class-labelled items (2-D) or the items of
        each pair (3-D), the pair methods the items of each pair. ``clone`` (hence each fit of
        a grid search) copies the table.

    Attributes
    ----------
    alpha_ : float
        The level used: ``alpha``, or the one chosen by ``alpha="auto"``.
    solver_ : str
        The solver used: ``"kkt"`` or ``"cvxpy"`` (``solver="auto"`` is ``"kkt"``).
    alpha_levels_ : ndarray of shape (20,) or None
        With ``alpha="auto"``: the levels tried on the held-out items (of the range of the other
        items); else None.
    alpha_scores_ : ndarray of shape (20,) or None
        With ``alpha="auto"``: the held-out TPR at ``threshold_fpr`` of each level; else None.
    input_mean_ : ndarray of shape (`n_features_in_`,) or None
        Mean subtracted by ``preprocessing`` (None for "none").
    input_transform_ : ndarray of shape (`n_features_in_`, `n_features_in_`) or None
        Matrix applied after subtracting the mean (None for "none").
    A_ : ndarray of shape (`n_features_in_`, `n_features_in_`)
        The matrix of the learned similarity (symmetric, ``||A_||_F <= 1``).
    P_ : ndarray of shape (`n_features_in_`, `n_features_in_`)
        Mean symmetrised outer product over the positive training pairs (exact).
    N_ : ndarray of shape (`n_features_in_`, `n_features_in_`)
        The estimate of the same over negative pairs used in the constraint (exact, or sampled
        per ``negatives``).
    beta_ : float
        The bound ``2 (alpha_ + tolerance) - 1`` on ``<N_, A_>``.
    lambda_ : float
        Dual variable of the negative-risk constraint (0 when inactive).
    gamma_ : float
        Dual variable of the norm constraint ``<A, A> <= 1``.
    active_constraints_ : tuple of str
        The constraints that hold with equality at the solution, among ``"negative_risk"`` and
        ``"norm"``.
    positive_risk_ : float
        Mean similarity over all positive training pairs, ``(1 + <P_, A_>) / 2``.
    negative_risk_ : float
        Mean similarity over all negative training pairs (exact even when ``N_`` is sampled).
    threshold_ : float or None
        Decision threshold: a pair is predicted similar when its similarity exceeds it. At most a
        fraction ``threshold_fpr`` of the training negative pairs do: it is the exact quantile
        when there are at most 250,000 negative pairs, else the quantile over 250,000 negative
        pairs drawn uniformly with replacement (the achieved training rate then has a standard
        error of about ``sqrt(threshold_fpr (1 - threshold_fpr) / 250000)``, 4.4e-4 at 5%).
        After :meth:`partial_fit` the negative pairs are those among a uniform sample (reservoir)
        of at most 2,000 of the items seen (None, with a warning, in the rare case where the
        reservoir holds a single class). :meth:`calibrate_threshold` recalibrates it on other
        data.
    classes_ : ndarray of shape (2,)
        Labels predicted for pairs, dissimilar then similar: 0 (different classes) and 1 (same
        class) after a fit on class labels, the two labels of ``y`` after a fit on pairs.
    item_classes_ : ndarray of shape (n_item_classes,) or None
        Class labels of the training items, in the order of their class codes (None after a
        fit on pairs).
    pair_statistics_ : skrank.similarity.PairStatistics or None
        Class counts, class sums and Gram matrix of the (normalised) training items (None
        after a fit on pairs).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string feature names.

    See Also
    --------
    skrank.similarity.solve_kkt : The closed-form solver.
    skrank.similarity.PairStatistics : The streaming pair statistics.

    Notes
    -----
    Threads: the matrix products of ``fit`` and of the other methods run on as many BLAS
    threads as the caller allows (the library's default: all cores): set them with
    ``threadpoolctl.threadpool_limits(limits=n)`` around the call (or the environment variable
    ``OMP_NUM_THREADS`` or ``OPENBLAS_NUM_THREADS`` before Python starts).

    References
    ----------
    Vogel, R., Bellet, A. & Clémençon, S. (2018). A Probabilistic Theory of Supervised Similarity
    Learning for Pointwise ROC Curve Optimization. ICML.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank import PointwiseROCSimilarity
    >>> rng = np.random.RandomState(0)
    >>> y = np.repeat([0, 1, 2], 20)
    >>> X = np.eye(3)[y] + 0.3 * rng.normal(size=(60, 3))
    >>> model = PointwiseROCSimilarity(alpha=0.4).fit(X, y)
    >>> model.active_constraints_
    ('negative_risk', 'norm')
    >>> round(model.negative_risk_, 6), round(model.positive_risk_, 3)
    (0.4, 0.686)
    >>> model.predict(np.stack([X[:2], X[[1, 30]]]))
    array([1, 0])
    """

    _parameter_constraints = {
        "alpha": [Interval(Real, 0, 1, closed="both"), StrOptions({"auto"})],
        "identity_weight": [Interval(Real, 0, None, closed="left")],
        "preprocessing": [StrOptions({"none", "center", "standardize", "whiten"})],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "tolerance": [Interval(Real, 0, None, closed="left")],
        "negatives": [StrOptions({"all", "pairs", "tuples"})],
        "n_samples": [Interval(Integral, 1, None, closed="left"), None],
        "solver": [StrOptions({"auto", "kkt", "cvxpy"})],
        "normalize": ["boolean"],
        "threshold_fpr": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "items": ["array-like", None],
    }

    _saved_state_updates = (_with_solver_used,)

    def __init__(
        self,
        alpha="auto",
        *,
        identity_weight=3.0,
        preprocessing="none",
        validation_fraction=0.2,
        tolerance=0.0,
        negatives="all",
        n_samples=None,
        solver="auto",
        normalize=True,
        threshold_fpr=0.05,
        random_state=None,
        items=None,
    ):
        store_parameters(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn the similarity from items ``X`` with class labels ``y`` (pairs are implied).

        The problem is posed on the statistics of all pairs (``negatives="all"``) or of
        ``n_samples`` sampled pairs or tuples. With ``alpha="auto"``, ``alpha`` is first chosen
        on ``validation_fraction`` of the items held out, then the problem is solved on all of
        them; ``threshold_`` is calibrated on negative pairs at ``threshold_fpr``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training items. With ``normalize=True``, of any magnitude (rows are normalised
            through scaled norms: exact from 1e-300 to 1e300).
        {class_labels}

        Returns
        -------
        self : PointwiseROCSimilarity
            The fitted estimator.
        """
        if is_pair_input(X, self.items):
            return self._fit_pairs(X, y)
        if self.negatives != "all" and self.n_samples is None:
            raise ValueError(
                f'negatives="{self.negatives}" draws n_samples pairs or tuples: set n_samples to '
                "a positive integer."
            )
        rng = check_random_state(self.random_state)
        if is_dask_array(X):  # larger than memory: statistics by row blocks on dask
            X, y = check_dask_data(self, X, y)
            check_classification_targets(y)
            item_classes, codes = encode_labels(y)
            self._fit_input_transform(X, fit_input_transform_dask)
            rows = DaskRows(X, self._normalized)
            readers = {  # statistics in one pass over the blocks, other rows read on demand
                "statistics": item_statistics_dask,
                "negative_similarities": negative_pair_similarities_dask,
            }
        else:
            X, codes, item_classes = self._training_data(X, y, classes=None, reset=True)
            rows, readers = X, {}
        result = fit_on_items(
            rows, codes, **readers, **parameters_for(self, fit_on_items, random_state=rng)
        )
        self._store_fit(result.fit)
        self._store_stream(item_classes, result.statistics, result.reservoir, result.held_out, rng)
        return self

    def _fit_pairs(self, X, y):
        """``fit`` on given pairs: the same problem over the given similar and dissimilar pairs."""
        if self.negatives != "all":
            raise ValueError(
                f'negatives="{self.negatives}" samples the negative pairs implied by class labels; '
                'a fit on given pairs uses the given dissimilar pairs: set negatives="all".'
            )
        pairs = check_pairs(self, X, items=self.items, reset=True, input_name="X")
        is_similar, classes = check_pair_labels(y, pairs.n_pairs)
        self._fit_input_transform(pairs, self._pair_input_transform)
        rows = pairs.prepared_rows(self._prepared_pair_items)
        rng = check_random_state(self.random_state)
        held_out = functools.partial(
            held_out_pairs,
            pairs,
            rows,
            is_similar,
            **parameters_for(self, held_out_pairs, random_state=rng),
        )
        dissimilar = pairs.subset(~is_similar)
        fit = fit_pointwise_roc(
            negative_pair_outer_mean(rows, pairs.sample(is_similar)),
            negative_pair_outer_mean(rows, pairs.sample(~is_similar)),
            held_out=held_out,
            negative_scores=functools.partial(given_pair_similarities, dissimilar, rows),
            **parameters_for(self, fit_pointwise_roc),
        )
        self._store_fit(fit)
        self._store_stream(None, None, None, None, rng, classes)
        return self

    def _pair_input_transform(self, pairs, kind):
        """``preprocessing`` fitted on the pairs' items, each counted once per pair."""
        if is_dask_array(getattr(pairs.rows, "array", None)):
            return fit_input_transform_dask(pairs.rows.array, kind)
        weights = None
        if self.items is not None:
            weights = np.bincount(
                np.concatenate([pairs.first, pairs.second]), minlength=pairs.rows.shape[0]
            )
        return fit_input_transform(pairs.rows, kind, sample_weight=weights)

    def _prepared_pair_items(self, rows):
        return self._normalized(rows, "X", where="holds items of pairs")

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None):
        """Add a chunk of items to the exact pair statistics and re-solve.

        The statistics (class sums and Gram matrix) of all chunks seen so far give the exact
        ``P`` and ``N`` of all pairs of the whole stream, including pairs across chunks, so the
        result equals :meth:`fit` on the concatenated data (with ``alpha="auto"``, up to the choice
        of the level: each item is held out with probability ``validation_fraction``, and the
        statistics of the others and a uniform sample of at most 2,000 held-out items are kept
        to choose it). Until the stream holds two classes and a class with two items, chunks are
        only accumulated (the estimator is not fitted yet).
        The threshold is calibrated on the negative pairs among a uniform sample of at most 2,000
        of the items seen (kept in memory).

        Only ``negatives="all"`` is supported: a uniform sample of all negative pairs of the
        stream, or of K-tuples across it, needs every chunk at once, and for this similarity
        the exact statistics are as cheap as the sampled ones anyway.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A chunk of items.
        y : array-like of shape (n_samples,)
            Their class labels. Labels unseen so far start new classes.
        classes : array-like, default=None
            Optional list of all class labels; when given, every label of ``y`` must be in it.

        Returns
        -------
        self : PointwiseROCSimilarity
            The updated estimator.
        """
        if is_pair_input(X, self.items):
            raise ValueError(
                "partial_fit takes chunks of class-labelled items (n_samples, n_features); to "
                "learn from pairs call fit, whose statistics are summed over chunks of pairs "
                "(a dask array of pairs is read block by block)."
            )
        if self.preprocessing != "none":
            raise ValueError(
                f"partial_fit needs preprocessing='none' (got {self.preprocessing!r}): the input "
                "transform is fitted on the whole training set at once. Use fit, or apply a "
                "transform fitted beforehand to every chunk."
            )
        if self.negatives != "all":
            raise ValueError(
                f'partial_fit supports negatives="all" only (got "{self.negatives}"): sampling '
                "pairs uniformly from all pairs of a stream needs the whole sample at once, and "
                "the exact statistics cost no more here. Use fit for sampled negatives."
            )
        if is_dask_array(X):
            raise TypeError(
                "partial_fit takes chunks in memory, not a dask array: fit reads a dask array "
                "block by block (the same exact statistics), or pass its blocks one at a time, "
                "partial_fit(X.blocks[i].compute(), ...)."
            )
        first_call = not hasattr(self, "pair_statistics_")
        if not first_call and self.pair_statistics_ is None:
            raise ValueError(
                "partial_fit continues a stream of class-labelled items, and this model was "
                "fitted on given pairs: call fit(pairs, y) on all the pairs, or fit a new model "
                "on the items (clone(model).partial_fit(X, y))."
            )
        X, codes, item_classes = self._training_data(
            X,
            y,
            classes=classes,
            reset=first_call,
            known_classes=getattr(self, "item_classes_", None),
        )
        if first_call:
            rng = check_random_state(self.random_state)
            stream = new_stream(X.shape[1])
        else:
            rng = self._random_state
            stream = copy.deepcopy((self.pair_statistics_, self._reservoir, self._held_out))
        fit = fit_on_stream(
            X, codes, *stream, **parameters_for(self, fit_on_stream, random_state=rng)
        )
        if fit is not None:
            self._store_fit(fit)
        self._store_stream(item_classes, *stream, rng)
        return self

    def _training_data(self, X, y, *, classes, reset, known_classes=None):
        with naming_inputs("X", "y"):
            X, y = validate_data(self, X, y, reset=reset, dtype=np.float64)
        item_classes, codes = encode_labels(
            y, known_classes=known_classes, declared_classes=classes
        )
        if reset:
            self._fit_input_transform(X, fit_input_transform)
        return self._normalized(X), codes, item_classes

    def _fit_input_transform(self, X, fit_transform):
        """Fit ``preprocessing`` on ``X`` with ``fit_transform(X, kind)`` (items or pairs)."""
        self.input_mean_, self.input_transform_ = None, None
        if self.preprocessing != "none":
            self.input_mean_, self.input_transform_ = fit_transform(X, self.preprocessing)

    def _normalized(self, X, input_name="X", where=None):
        """Inputs as the similarity sees them: preprocessed, then L2-normalised.

        ``where`` describes rows read from pairs (their indices are those of a chunk, not the
        user's): the error for an all-zero row then names no index.
        """
        if getattr(self, "input_transform_", None) is not None:
            X = (X - self.input_mean_) @ self.input_transform_
        if not self.normalize:
            if getattr(self, "A_", None) is not None:
                check_bilinear_range(
                    X, self.A_, input_name=input_name, fix=", or use normalize=True"
                )
            return X
        unit, zero = normalize_rows(X)  # scaled norms: exact at 1e-300 and 1e300 alike
        if zero.any() and where is not None:
            raise ValueError(
                f"{input_name} {where} that are all zero (after preprocessing), which "
                "normalize=True cannot L2-normalise. Remove those pairs or set normalize=False."
            )
        if zero.any():
            zero_rows = np.unique(np.argwhere(zero)[:, 0])
            raise ValueError(
                f"{input_name} has all-zero rows, which normalize=True cannot L2-normalise "
                f"(first indices: {zero_rows[:5].tolist()}). Remove them or set normalize=False."
            )
        return unit

    def _store_fit(self, fit):
        """Set the fitted attributes of the similarity from a :class:`PointwiseROCFit`."""
        self.alpha_ = fit.alpha
        self.solver_ = fit.solver
        self.A_ = fit.A
        self.P_ = fit.P
        self.N_ = fit.N
        self.beta_ = fit.beta
        self.lambda_ = fit.lambda_
        self.gamma_ = fit.gamma_
        self.active_constraints_ = fit.active_constraints
        self.positive_risk_ = fit.positive_risk
        self.negative_risk_ = fit.negative_risk
        self.alpha_levels_ = fit.alpha_levels
        self.alpha_scores_ = fit.alpha_scores
        self.threshold_ = fit.threshold

    def _store_stream(self, item_classes, statistics, reservoir, held_out, rng, classes=(0, 1)):
        """Set what the data seen were and what a :meth:`partial_fit` continues from."""
        self.item_classes_ = item_classes
        self.pair_statistics_ = statistics
        self.classes_ = np.asarray(classes)
        self._reservoir = reservoir
        self._held_out = held_out
        self._random_state = rng

    def _check_fitted(self):
        check_is_fitted(
            self,
            "A_",
            msg=(
                "This %(name)s instance is not fitted yet: call fit, or partial_fit until the data "
                "seen hold two classes and a class with two items."
            ),
        )

    def calibrate_threshold(self, X, y):
        """Recalibrate ``threshold_`` at ``threshold_fpr`` on the negative pairs of ``(X, y)``.

        Use held-out data for an unbiased false-positive rate, or new data after
        :meth:`partial_fit`. ``A_`` is unchanged. For class-labelled items, all negative pairs
        are used up to 250,000 of them, beyond that 250,000 pairs drawn uniformly (seeded by
        ``random_state``); for given pairs, all the dissimilar ones.

        {evaluation_parameters}

        Returns
        -------
        self : PointwiseROCSimilarity
            The estimator with the new threshold.
        """
        self._check_fitted()
        if is_pair_input(X, self.items):
            similarity = self._pair_similarity(X, "X")
            is_similar, _ = check_pair_labels(y, similarity.shape[0])
            self.threshold_ = threshold_at_fpr(similarity[~is_similar], self.threshold_fpr)
            return self
        with naming_inputs("X", "y"):
            X, y = validate_data(self, X, y, reset=False, dtype=np.float64)
        _, codes = encode_labels(y)
        rng = check_random_state(self.random_state)
        scores = negative_pair_similarities(self._normalized(X), codes, self.A_, random_state=rng)
        self.threshold_ = threshold_at_fpr(scores, self.threshold_fpr)
        return self

    def pair_score(self, X1, X2=None):
        """Score of each pair, larger for more alike: the learned similarity.

        The pair score of every skrank pair learner (:meth:`MMC.pair_score
        <skrank.MMC.pair_score>` is the negated learned distance). ``pair_score(X1, X2)``
        pairs each row of ``X1`` with the same row of ``X2``; ``pair_score(pairs)`` takes
        pairs as :meth:`predict` does. Unlike :meth:`decision_function`, it is not shifted by
        ``threshold_``.

        {pair_rows_parameters}

        Returns
        -------
        similarity : ndarray of shape (n_pairs,)
            ``(1 + x1^T A_ x2) / 2``, in [0, 1] for normalised inputs.
        """
        if X2 is None:
            return self._pair_similarity(X1, "X1")
        self._check_fitted()
        with naming_inputs("X1"):
            X1 = self._normalized(validate_data(self, X1, reset=False, dtype=np.float64), "X1")
        with naming_inputs("X2"):
            X2 = self._normalized(validate_data(self, X2, reset=False, dtype=np.float64), "X2")
        if X1.shape[0] != X2.shape[0]:
            raise ValueError(
                f"X1 and X2 must have the same number of rows, got {X1.shape[0]} and {X2.shape[0]}."
            )
        return bilinear_similarity(X1, X2, self.A_)

    similarity = renamed_method("similarity", "pair_score")

    def pairwise_similarity(self, X, Y=None):
        """Similarities of all pairs of rows of ``X`` and ``Y`` (``Y = X`` when None).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        Y : array-like of shape (n_samples_Y, n_features), default=None

        Returns
        -------
        similarity : ndarray of shape (n_samples_X, n_samples_Y)
            ``(1 + x_i^T A_ y_j) / 2``.
        """
        self._check_fitted()
        with naming_inputs("X"):
            X = self._normalized(validate_data(self, X, reset=False, dtype=np.float64))
        if Y is None:
            return bilinear_similarity_matrix(X, X, self.A_)
        with naming_inputs("Y"):
            Y = self._normalized(validate_data(self, Y, reset=False, dtype=np.float64), "Y")
        return bilinear_similarity_matrix(X, Y, self.A_)

    def _pair_similarity(self, pairs, input_name="pairs"):
        self._check_fitted()
        pairs = check_pairs(self, pairs, items=self.items, reset=False, input_name=input_name)
        prepare = functools.partial(self._normalized, input_name=input_name, where="holds items")
        return given_pair_similarities(pairs, pairs.prepared_rows(prepare), self.A_)

    def decision_function(self, pairs):
        """Similarity of each pair minus ``threshold_`` (positive: predicted similar).

        {pairs_parameters}

        Returns
        -------
        scores : ndarray of shape (n_pairs,)
        """
        similarity = self._pair_similarity(pairs)
        if self.threshold_ is None:
            raise NotFittedError(
                "threshold_ is not calibrated (the item reservoir of partial_fit held a single "
                "class): call calibrate_threshold(X, y)."
            )
        return similarity - self.threshold_

    def predict(self, pairs):
        """Predict whether the items of each pair are similar (share a class).

        {pairs_parameters}

        Returns
        -------
        labels : ndarray of shape (n_pairs,)
            ``classes_[1]`` when the similarity exceeds ``threshold_``, else ``classes_[0]``:
            1 and 0 after a fit on class labels, the two labels ``fit`` saw after a fit on
            pairs (e.g. 1 and -1, or True and False).
        """
        is_similar = self.decision_function(pairs) > 0
        return self.classes_[is_similar.astype(np.int64)]

    def score(self, X, y):
        """True-positive rate at false-positive rate ``threshold_fpr``, over pairs.

        For class-labelled items, over all pairs ``i < j`` of ``(X, y)`` (positive when
        ``y[i] == y[j]``; :func:`skrank.metrics.pairwise_roc_score`, ``n_samples^2`` memory);
        for given pairs, over those pairs (:func:`skrank.metrics.pointwise_roc_score`). The
        ROC curve of the similarities is read at ``threshold_fpr``, independently of
        ``threshold_``.

        {evaluation_parameters}

        Returns
        -------
        score : float
            TPR at FPR = ``threshold_fpr``.
        """
        if is_pair_input(X, self.items):
            similarity = self._pair_similarity(X, "X")
            is_similar, _ = check_pair_labels(y, similarity.shape[0])
            return pointwise_roc_score(is_similar, similarity, self.threshold_fpr)
        return pairwise_roc_score(self.pairwise_similarity(X), y, self.threshold_fpr)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
