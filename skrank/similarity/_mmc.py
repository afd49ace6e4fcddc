"""MMC: Mahalanobis metric learning (Xing, Ng, Jordan & Russell, 2002), solved exactly."""

import functools
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import Interval, StrOptions, _fit_context
from ..metrics import mean_auprc_score
from ..utils._deprecation import MOVED_IN, REMOVED_IN
from ..utils._docstrings import fill_shared_docs
from ..utils._labels import CLASS_LABELS_DOCS, check_class_counts, encode_labels
from ..utils._params import parameters_for, store_parameters
from ..utils._persistence import VersionedStateMixin
from ..utils._validation import (
    check_finite_product,
    naming_inputs,
    power_of_two_scale,
    row_norms,
)
from ._dask import check_dask_data, fit_mmc_dask, is_dask_array
from ._given_pairs import PAIR_INPUT_DOCS, check_pair_labels, check_pairs, is_pair_input
from ._mmc_solver import _merit, figure_of_merit, fit_mmc, given_pair_statistics_for

__all__ = ["MMC"]

# Largest number of negative pairs that negatives="auto" draws on a dask array.
_DASK_AUTO_PAIRS = 100_000


@fill_shared_docs(methods={**PAIR_INPUT_DOCS, **CLASS_LABELS_DOCS})
class MMC(VersionedStateMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Mahalanobis Metric for Clustering (MMC), solved to a certified optimum.

    Learns a Mahalanobis distance ``d_A(x, x') = sqrt((x - x')^T A (x - x'))`` that maximises the
    mean distance between items of different classes while the mean squared distance between
    items of the same class, plus a trace penalty, is at most one, and no direction takes more
    than a share ``1 / k`` of that budget::

        max_A  mean_{y_i != y_j} d_A(x_i, x_j)
        s.t.   mean_{y_i = y_j} d_A(x_i, x_j)^2 + rho (tr S / d) tr(A) <= 1,
               0 <= S_r^{1/2} A S_r^{1/2} <= I / k  (eigenvalues),

    with ``S`` the mean similar-pair scatter (``<S, A>`` is the mean squared similar distance),
    ``S_r = S + rho (tr S / d) I``, ``rho = scatter_ridge`` and ``k = min_rank``. With
    ``scatter_ridge`` near zero and ``min_rank=None`` this is MMC as Xing et al. state it (the
    paper's criterion); its optimum often has a very low rank and loses to the Euclidean metric
    at nearest-neighbour classification (see Notes). The defaults pull the metric toward the
    Euclidean one in both ways: the trace penalty (``rho -> inf`` makes the constraint
    Euclidean) and the rank control (``k = d`` gives ``A = S_r^{-1}``, hence the Euclidean
    metric when ``rho`` is large too).

    ``positives="nearest"`` and ``negatives="nearest"`` replace the similar and dissimilar pairs
    by local ones (each item with its ``n_neighbors`` nearest same-class items, and with its
    nearest items of other classes, as LMNN's target neighbours and impostors): the same
    problem over other pair sets, for nearest-neighbour rules.

    **Learning from pairs.** ``fit(pairs, y)`` learns from given pairs instead of class labels
    (Xing et al.'s side information: pairs known to be similar, ``y`` = 1 or True, and pairs
    known to be dissimilar, ``y`` = -1, 0 or False): the same problem with the constraint over
    the similar pairs and the objective over the dissimilar ones. ``pairs`` is an array of shape
    (n_pairs, 2, n_features) (a dask array chunked along the pairs for pairs larger than memory),
    or an (n_pairs, 2) array of row indices into ``items``. ``score(pairs, y)`` is then the ROC
    AUC of the pairs' negated distances, and ``decision_function(pairs)`` and
    ``pair_score(pairs)`` the negated distances.

    **Scoring.** ``score(X, y)`` is the mean AUPRC of retrieval in the learned metric (every
    held-out item a query, ranking the others by distance), as ``SOPRCEmbedder.score``: what
    ``GridSearchCV`` compares by default, and a proxy of nearest-neighbour accuracy. The
    paper's figure of merit, which prefers low-rank metrics that spread the classes apart, is
    :meth:`figure_of_merit`.

    The similar-pair constraint is computed exactly from the within-class scatter in
    ``O(n d^2)``; the dissimilar-pair objective is averaged over all negative pairs (in blocks of
    bounded memory, ``O(n^2 d)`` per iteration) or estimated from a sample of pairs or K-tuples
    (incomplete U-statistics, Vogel, Bellet & Clémençon, 2018), ``O(B d + n d^2)`` per iteration.

    The convex problem is solved by spectral projected gradient ascent on the whitened problem,
    whose feasible set is the set of trace-one PSD matrices, and stopped when the Frank-Wolfe
    duality gap certifies that the objective is within ``tol`` (relative) of the optimum; see
    :mod:`skrank.similarity._mmc_solver` for the mathematics.

    Read more in the :ref:`User Guide <mmc>`.

    Parameters
    ----------
    diagonal : bool, default=False
        Learn a diagonal ``A`` (a weight per feature) instead of a full matrix.
    negatives : {"auto", "all", "pairs", "tuples", "nearest"}, default="auto"
        Dissimilar pairs of the objective, for a fit on class labels: ``"all"`` of them (exact,
        quadratic in the number of items), ``n_samples`` pairs drawn uniformly with
        replacement, ``n_samples`` K-tuples (one random item per class, all their pairs,
        weighted to be unbiased; best when classes are few), or each item with its
        ``n_neighbors`` nearest items of other classes in the input metric (local "impostors",
        as in LMNN), equally weighted. ``"auto"`` is ``"all"`` for items in memory and
        ``"pairs"`` for a dask array (every negative pair at every iteration would read the
        array again and again), with at most 100,000 pairs when ``n_samples`` is None. A fit on
        given pairs uses the given dissimilar pairs: ``"auto"`` or ``"all"``.
    n_samples : int or None, default=None
        Number ``B`` of pairs or tuples drawn when ``negatives`` is ``"pairs"`` or ``"tuples"``;
        ``None`` means as many as training items (at most 100,000 with ``"auto"`` on a dask
        array). Ignored otherwise.
    positives : {"all", "nearest"}, default="all"
        Similar pairs of the constraint: ``"all"`` same-class pairs (Xing et al.), or each item
        with its ``n_neighbors`` nearest items of the same class in the input (Euclidean)
        metric, its *target neighbours* as in LMNN, equally weighted. With ``"nearest"`` the
        metric keeps each item close to its own neighbourhood instead of pulling whole classes
        together, which is what a nearest-neighbour rule needs.
    n_neighbors : int, default=10
        Neighbours per item of the ``"nearest"`` pair sets (a class with fewer items gives all
        of them). Ignored unless ``positives`` or ``negatives`` is ``"nearest"``.
    max_iter : int, default=1000
        Maximum number of solver iterations (each a projected gradient or a minorize-maximize
        step, alternately).
    tol : float, default=1e-5
        Stopping tolerance: stop when the duality gap (an upper bound on the distance to the
        optimal objective) is at most ``tol`` times the objective (``converged_``).
    init : {"identity", "covariance"} or array-like, default="identity"
        Starting metric: the Euclidean one, the inverse covariance of the training data
        (pseudo-inverse if singular), or a symmetric positive semi-definite matrix of shape
        (n_features, n_features) (or a non-negative vector of shape (n_features,), a diagonal).
        It is rescaled onto the constraint. The problem is convex: the optimum does not depend on
        it, only the number of iterations does.
    scatter_ridge : float, default=1.0
        Weight ``rho`` of the trace penalty: the ridge added to the within-class scatter,
        relative to its mean eigenvalue. Larger values shrink the metric toward the Euclidean
        one; ``1e-8`` is the paper's criterion. Along a direction with no within-class spread
        (constant features within classes, more features than items) in which classes differ,
        MMC without the ridge is unbounded; the ridge bounds it (a warning is raised).
    min_rank : int, float, "full" or None, default=0.5
        Rank control ``k``: the eigenvalues of the whitened metric are capped at ``1 / k``, so
        the learned metric has rank at least ``k``. An int is a number of directions, a float
        in (0, 1) a fraction of the number of features (rounded up), as ``PCA``'s
        ``n_components``; ``"full"`` is every feature, ``A = S_r^{-1}``, with no optimisation
        left. None (or 1: rank at least one) removes the cap (the paper's criterion). The float
        ``1.0``, the former spelling of ``"full"``, is deprecated (from 0.3 a float must lie in
        (0, 1)).
    verbose : bool or int, default=False
        Print the objective and duality gap during fitting.
    random_state : int, RandomState instance or None, default=None
        Seed of the pair or tuple sampler.
    n_threads : int or None, default=1
        BLAS threads of ``fit`` (set through ``threadpoolctl.threadpool_limits`` for the fit
        only). None leaves BLAS as the caller set it: the library's default (all cores), or
        the limit of an enclosing ``with threadpool_limits(n):``. One thread is the default:
        the solver's products are small or memory-bound, and on the digits and MNIST (PCA)
        fits of ``benchmarks/studies/mmc_threads.py``, on a shared 2-CPU machine, one thread was
        1.5 to 7 times faster than all cores (see :ref:`threads`). The other methods
        (``transform``, ``score``, ...) run as the caller set BLAS.
    items : array-like of shape (n_items, n_features) or None, default=None
        Item table for pairs given as row indices: with it, ``fit``, ``score``,
        ``decision_function``, ``pair_distance`` and ``objective_and_constraint`` take an
        (n_pairs, 2) integer array of row indices into ``items`` (as metric-learn's
        ``preprocessor``), so that many pairs over few items need no (n_pairs, 2, n_features)
        copy. None: those methods take class-labelled items (2-D) or the items of each pair
        (3-D). ``transform`` always takes items. ``clone`` (hence each fit of a grid search)
        copies the table.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
        ``L`` with ``A = L^T L``: the eigenvectors of ``A`` scaled by the square roots of their
        eigenvalues, rows by decreasing eigenvalue, each with its largest entry positive
        (trailing rows are zero when ``A`` has low rank, as MMC's optimum often has). Canonical:
        the same data give the same rows whatever their memory layout. With ``diagonal=True``,
        ``Diag(sqrt(a))`` for the weights ``a`` of the features.
    objective_ : ndarray of shape (`n_iter_` + 1,)
        Training objective (mean dissimilar-pair distance, or its sampled estimate) at the start and
        after each iteration.
    duality_gap_ : float
        Final duality gap: the training objective is within this of the optimum.
    A_ : ndarray of shape (`n_features_in_`, `n_features_in_`)
        The learned positive semi-definite matrix ``A = L^T L`` of ``d_A`` (computed from
        ``components_``; ``get_mahalanobis_matrix()``, metric-learn's name, returns it too).
    n_iter_ : int
        Number of solver iterations.
    converged_ : bool
        Whether the stopping test of ``tol`` (the relative duality gap) stopped the solver
        before ``max_iter``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string feature names.

    Notes
    -----
    The paper's MMC (``scatter_ridge=1e-8, min_rank=None``) often has a low-rank optimum: a few
    directions that spread the classes apart (rank 3 on digits and MNIST). That maximises the
    mean distance between classes, not the purity of neighbourhoods: on MNIST (PCA 90%) its 5-NN
    accuracy is far below the Euclidean one (``python -m skrank`` shows both). The defaults
    (``scatter_ridge=1.0, min_rank=0.5``) were chosen on validation splits of MNIST and digits,
    where they matched or beat the Euclidean 5-NN accuracy; choose them for your data and
    measure with :class:`~sklearn.model_selection.GridSearchCV` (see the user guide).

    With a rank cap the solver takes projected gradient steps only (the minorize-maximize step
    could leave the capped set); the duality gap still certifies the optimum.

    Cost per iteration: ``O(n_- r + n^2 d)`` with ``n_-`` negative pairs for ``negatives="all"``
    (dense BLAS blocks), ``O(B K^2 d + n d^2)`` for ``B`` tuples; plus an eigendecomposition of a
    ``d x d`` matrix. Typically 10 to 30 iterations.

    Threads: ``fit`` runs BLAS on ``n_threads`` threads (one by default); the other methods,
    and ``fit`` with ``n_threads=None``, on as many as the caller allows: set them with
    ``threadpoolctl.threadpool_limits(limits=n)`` around the call (or the environment variable
    ``OMP_NUM_THREADS`` or ``OPENBLAS_NUM_THREADS`` before Python starts). ``score`` ranks with
    torch: ``torch.set_num_threads`` sets its threads.

    See Also
    --------
    sklearn.neighbors.NeighborhoodComponentsAnalysis : A linear metric learned for kNN.

    References
    ----------
    E. P. Xing, A. Y. Ng, M. I. Jordan and S. Russell. Distance Metric Learning with Application
    to Clustering with Side-Information. NIPS 2002.

    R. Vogel, A. Bellet and S. Clémençon. A Probabilistic Theory of Supervised Similarity Learning
    for Pointwise ROC Curve Optimization. ICML 2018.

    E. G. Birgin, J. M. Martínez and M. Raydan. Nonmonotone Spectral Projected Gradient Methods on
    Convex Sets. SIAM J. Optim. 10(4), 2000.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skrank import MMC
    >>> X, y = load_iris(return_X_y=True)
    >>> mmc = MMC().fit(X, y)
    >>> mmc.converged_
    True
    >>> round(mmc.score(X, y), 3)  # mean AUPRC of retrieval in the learned metric
    0.917
    >>> paper = MMC(scatter_ridge=1e-8, min_rank=None).fit(X, y)  # the paper's criterion
    >>> round(paper.figure_of_merit(X, y), 2), round(mmc.figure_of_merit(X, y), 2)
    (6.31, 3.86)
    >>> mmc.transform(X[:2]).shape
    (2, 4)
    """

    retrieval_metric = "euclidean"

    _parameter_constraints = {
        "diagonal": ["boolean"],
        "negatives": [StrOptions({"auto", "all", "pairs", "tuples", "nearest"})],
        "n_samples": [Interval(Integral, 1, None, closed="left"), None],
        "positives": [StrOptions({"all", "nearest"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "init": [StrOptions({"identity", "covariance"}), "array-like"],
        "scatter_ridge": [Interval(Real, 0, None, closed="neither")],
        "min_rank": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="right"),
            StrOptions({"full"}),
            None,
        ],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "items": ["array-like", None],
        "n_threads": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self,
        diagonal=False,
        negatives="auto",
        n_samples=None,
        positives="all",
        n_neighbors=10,
        max_iter=1000,
        tol=1e-5,
        init="identity",
        scatter_ridge=1.0,
        min_rank=0.5,
        verbose=False,
        random_state=None,
        items=None,
        n_threads=1,
    ):
        store_parameters(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn the metric from class-labelled items, or from similar and dissimilar pairs.

        The solver works on statistics of the pairs computed once from ``X`` (on a dask array,
        block by block, with the same result). It warns when the similar-pair scatter is
        singular along directions in which the dissimilar pairs differ (the metric's scale
        there is then set by ``scatter_ridge``) and when it stops before ``tol``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), (n_pairs, 2, n_features) or (n_pairs, 2)
            Training items of any magnitude (MMC is scale-invariant; the fit is exact from 1e-300
            to 1e300), with class labels ``y``. Or pairs: the two items of each pair (3-D), or
            with ``items`` set, the row indices of the two items in ``items``.
        y : array-like of shape (n_samples,) or (n_pairs,)
            Class labels of the items (at least two classes, one of them with two items), or
            for pairs: 1 or True for a similar pair, -1, 0 or False for a dissimilar one (both
            kinds present).

        Returns
        -------
        self : MMC
            The fitted estimator.
        """
        if is_pair_input(X, self.items):
            fit = self._fit_pairs(X, y)
        else:
            fit = self._fit_labels(X, y)
        if fit.unbounded:
            warnings.warn(
                "The similar-pair scatter is singular along directions in which dissimilar "
                "pairs differ (e.g. features constant within classes, or more features than "
                "items): MMC is unbounded there, and the metric's scale along them is set by "
                f"scatter_ridge={self.scatter_ridge}. Reduce the dimension (e.g. PCA) or raise "
                "scatter_ridge.",
                UserWarning,
                stacklevel=2,
            )
        if not fit.converged:
            warnings.warn(
                f"MMC did not converge in {fit.n_iter} iterations: the relative duality gap is "
                f"{fit.duality_gap / max(fit.objective[-1], np.finfo(float).tiny):.3g} > "
                f"tol={self.tol}. Increase max_iter.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.components_ = fit.components
        self.objective_ = fit.objective
        self.duality_gap_ = fit.duality_gap
        self.n_iter_ = fit.n_iter
        self.converged_ = fit.converged
        return self

    def _fit_labels(self, X, y):
        fit_function, negatives, n_samples = fit_mmc, self.negatives, self.n_samples
        if is_dask_array(X):  # larger than memory: statistics by row blocks on dask
            X, y = check_dask_data(self, X, y, ensure_min_samples=2)
            fit_function = fit_mmc_dask
            if negatives == "auto":
                negatives = "pairs"
                if n_samples is None:
                    n_samples = min(X.shape[0], _DASK_AUTO_PAIRS)
        else:
            _warn_if_index_pairs(X, y)
            with naming_inputs("X", "y"):
                X, y = validate_data(self, X, y, ensure_min_samples=2, dtype=np.float64)
        check_class_counts(np.bincount(encode_labels(y)[1]), needed_by="MMC")
        return fit_function(
            X,
            y,
            **parameters_for(
                self,
                fit_mmc,
                negatives="all" if negatives == "auto" else negatives,
                n_samples=n_samples,
                min_rank=self._min_rank(X.shape[1]),
                random_state=check_random_state(self.random_state),
                verbose=bool(self.verbose),
            ),
        )

    def _fit_pairs(self, X, y):
        for name, allowed in (("negatives", ("auto", "all")), ("positives", ("all",))):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f'{name}="{getattr(self, name)}" chooses pairs from class labels; a fit on '
                    f'given pairs uses the given similar and dissimilar pairs: set {name}="all".'
                )
        pairs = check_pairs(self, X, items=self.items, reset=True, input_name="X")
        is_similar, _ = check_pair_labels(y, pairs.n_pairs)
        return fit_mmc(
            pairs,
            is_similar,
            **parameters_for(
                self,
                fit_mmc,
                negatives="given",
                positives="all",
                statistics=given_pair_statistics_for(self.init),
                min_rank=self._min_rank(pairs.n_features),
                verbose=bool(self.verbose),
            ),
        )

    def _min_rank(self, n_features):
        """``min_rank`` as a number of directions (None when uncapped)."""
        if self.min_rank is None:
            return None
        if isinstance(self.min_rank, str):  # "full"
            return n_features
        if not isinstance(self.min_rank, Integral) and self.min_rank == 1:
            warnings.warn(
                f"min_rank={self.min_rank!r} (every feature) is deprecated in skrank {MOVED_IN}: "
                "pass min_rank='full' (an int is a number of directions, so min_rank=1 is no "
                f"cap). From skrank {REMOVED_IN} a float min_rank is a fraction in (0, 1).",
                FutureWarning,
                stacklevel=4,
            )
        if isinstance(self.min_rank, Integral):
            if self.min_rank > n_features:
                raise ValueError(
                    f"min_rank={self.min_rank} exceeds the number of features ({n_features}): "
                    "give at most n_features, or a fraction in (0, 1]."
                )
            return self.min_rank
        return max(1, int(np.ceil(self.min_rank * n_features - 1e-9)))

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    def transform(self, X):
        """Map items so that Euclidean distances are the learned distances: ``X L^T``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Items.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features)
            Transformed items.
        """
        return self._transform(X, "X")

    def _transform(self, X, input_name):
        check_is_fitted(self)
        with naming_inputs(input_name):
            X = validate_data(self, X, reset=False)
        return check_finite_product(X, self.components_.T, input_name=input_name)

    @property
    def A_(self):
        """The learned positive semi-definite matrix ``A = L^T L`` (from ``components_``)."""
        check_is_fitted(self, "components_")
        return self.components_.T @ self.components_

    def get_mahalanobis_matrix(self):
        """The learned positive semi-definite matrix ``A = L^T L``: ``A_``, by metric-learn's name.

        Returns
        -------
        A : ndarray of shape (n_features, n_features)
        """
        return self.A_

    def pair_score(self, X1, X2=None):
        """Score of each pair, larger for more alike: the negated learned distance.

        The pair score of every skrank pair learner (:meth:`PointwiseROCSimilarity.pair_score
        <skrank.PointwiseROCSimilarity.pair_score>` is the learned similarity), and
        ``-pair_distance``: it takes pairs as :meth:`pair_distance` does.

        {pair_rows_parameters}

        Returns
        -------
        scores : ndarray of shape (n_pairs,)
        """
        return -self.pair_distance(X1, X2)

    def pair_distance(self, X1, X2=None):
        """Learned distance between the two items of each pair.

        ``pair_distance(X1, X2)`` pairs each row of ``X1`` with the same row of ``X2``;
        ``pair_distance(pairs)`` takes pairs as ``fit`` does (3-D, or row indices into
        ``items``). For all distances between two sets use
        ``sklearn.metrics.pairwise_distances(mmc.transform(X1), mmc.transform(X2))``.

        {pair_rows_parameters}

        Returns
        -------
        distances : ndarray of shape (n_pairs,)
        """
        if X2 is None:
            return self._pair_distances(X1, "X1")
        first, second = self._transform(X1, "X1"), self._transform(X2, "X2")
        if first.shape != second.shape:
            raise ValueError(
                f"X1 and X2 must have the same number of rows, got {first.shape[0]} and "
                f"{second.shape[0]}."
            )
        return row_norms(first - second)  # scaled: no overflow of the squares at 1e200

    def _pair_distances(self, pairs, input_name="pairs"):
        """Distances of the pairs, computed in chunks of pairs (bounded memory)."""
        check_is_fitted(self)
        pairs = check_pairs(self, pairs, items=self.items, reset=False, input_name=input_name)
        distances = np.empty(pairs.n_pairs)
        for part in pairs.chunks():
            first, second = (
                check_finite_product(items, self.components_.T, input_name=input_name)
                for items in pairs.items(part)
            )
            distances[part] = row_norms(first - second)
        return distances

    def decision_function(self, pairs):
        """Negated learned distance of each pair: larger means more alike.

        {pairs_parameters}

        Returns
        -------
        scores : ndarray of shape (n_pairs,)
            ``-d_A`` of each pair (MMC has no decision threshold: rank pairs by it, or
            threshold it at a false-positive rate chosen on held-out pairs).
        """
        return -self._pair_distances(pairs)

    def get_metric(self):
        """The learned distance as a function of two vectors.

        Usable as a metric by scipy (``scipy.spatial.distance.pdist(X, metric=...)``) and
        scikit-learn (``KNeighborsClassifier(metric=...)``); it can be pickled.

        Returns
        -------
        metric : callable
            ``metric(u, v)`` returns ``d_A(u, v)`` as a float.
        """
        check_is_fitted(self)
        return functools.partial(_mahalanobis_distance, components=self.components_.copy())

    def objective_and_constraint(self, X, y):
        """MMC's objective and constraint in the learned metric, over pairs.

        Over all pairs of class-labelled items ``(X, y)``, or over given pairs. On held-out
        data these measure generalisation (Figure 4 of Vogel, Bellet & Clémençon, 2018); on the
        training data the constraint is at most one and the objective is the optimum when the
        pairs are those of the fit (``negatives="all"`` and ``positives="all"`` for labels).

        {evaluation_parameters}

        Returns
        -------
        objective : float
            Mean ``d_A`` over dissimilar pairs.
        constraint : float
            Mean ``d_A^2`` over similar pairs.
        """
        _, objective, constraint = self._figure_of_merit(X, y)
        return float(objective), float(constraint)

    def score(self, X, y):
        """Mean AUPRC of retrieval in the learned metric, or ROC AUC over given pairs.

        For class-labelled items ``(X, y)``: every item is a query against the others, ranked
        by learned distance (Euclidean in :meth:`transform`'s space); its positives are the
        items of its class. The score is the mean over queries of their AUPRC
        (:func:`skrank.metrics.mean_auprc_score`, as ``SOPRCEmbedder.score``): on held-out
        items, how well nearest neighbours in the metric share a class. For given pairs (a 3-D
        array, or index pairs with ``items`` set): the ROC AUC of :meth:`decision_function`
        (the negated distances) against ``y``, the probability that a similar pair is closer
        than a dissimilar one (MMC has no decision threshold). The paper's figure of merit is
        :meth:`figure_of_merit`.

        {evaluation_parameters}

        Returns
        -------
        score : float
        """
        if is_pair_input(X, self.items):
            distances = self._pair_distances(X, "X")
            is_similar, _ = check_pair_labels(y, distances.shape[0])
            return float(roc_auc_score(is_similar, -distances))
        return mean_auprc_score(self.transform(X), y, metric=self.retrieval_metric)

    def figure_of_merit(self, X, y):
        """The paper's figure of merit over all pairs of labelled items, or of given pairs.

        ``mean d_A over dissimilar pairs / sqrt(mean d_A^2 over similar pairs)``: the training
        objective divided by the square root of the constraint, scale-invariant; ``0`` if all
        dissimilar pairs are at distance zero, ``inf`` if only the similar ones are. It favours
        metrics that spread the classes apart (often of low rank), not pure neighbourhoods: to
        select on it in a grid search, pass
        ``scoring=lambda model, X, y: model.figure_of_merit(X, y)``.

        {evaluation_parameters}

        Returns
        -------
        figure_of_merit : float
        """
        return float(self._figure_of_merit(X, y)[0])

    def _figure_of_merit(self, X, y):
        check_is_fitted(self)
        if is_pair_input(X, self.items):
            distances = self._pair_distances(X, "X")
            is_similar, _ = check_pair_labels(y, distances.shape[0])
            scale = power_of_two_scale(distances)  # squares at 1e200 neither overflow nor vanish
            dissimilar = float(np.mean(distances[~is_similar] * scale))
            similar = float(np.mean((distances[is_similar] * scale) ** 2))
            with np.errstate(over="ignore", under="ignore"):
                return _merit(dissimilar, similar), dissimilar / scale, similar / scale / scale
        with naming_inputs("X", "y"):
            X, y = validate_data(self, X, y, reset=False, ensure_min_samples=2)
        # Exact power-of-two rescalings of X and of X L^T (the merit is scale-invariant; X L^T
        # and the means may overflow or underflow); the means are scaled back at the end.
        scale = power_of_two_scale(X)
        Z = X * scale @ self.components_.T
        scale_z = power_of_two_scale(Z)
        merit, dissimilar, similar = figure_of_merit(Z * scale_z, y)
        with np.errstate(over="ignore", under="ignore"):  # beyond float64: inf or 0
            scale = scale * scale_z
            return merit, dissimilar / scale, similar / scale / scale

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def _warn_if_index_pairs(X, y):
    """Warn when class-labelled items look like index pairs given without ``items``."""
    dtype, shape = getattr(X, "dtype", None), getattr(X, "shape", ())
    if (
        dtype is not None
        and dtype.kind in "iu"
        and len(shape) == 2
        and shape[1] == 2
        and np.isin(np.unique(np.asarray(y)), [-1, 1]).all()
    ):
        warnings.warn(
            "X has two integer-valued features and y takes the values -1 and 1: if X holds "
            "pairs of row indices, set items to the table they index (MMC(items=table)); as "
            "given, X is read as items with class labels -1 and 1.",
            UserWarning,
            stacklevel=3,
        )


def _mahalanobis_distance(u, v, components):
    """``d_A(u, v)`` for ``A = components^T components``."""
    return float(row_norms(components @ (np.asarray(u, dtype=float) - np.asarray(v, dtype=float))))
