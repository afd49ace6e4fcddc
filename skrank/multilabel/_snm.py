"""SNMClassifier: top-k prediction over very large label sets by Stochastic Negative Mining.

The estimator keeps the parameters, the order of the fit, the engine's hooks and the public
methods. Its collaborators, each built from arrays: ``_targets`` (target encoding),
``_settings`` (every "auto" resolved from the data's shape), ``_blend`` (the prediction blend
and the choice of its weights), ``_label_search`` (the top-k search of the label table),
``_predictor`` (the fitted predictor every prediction method reads).
"""

import functools
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import Interval, StrOptions, _fit_context
from ..losses import OrderedWeightedLoss
from ..metrics._labels import check_label_targets, top_k_hits
from ..nn import (
    TORCH_ATTRIBUTE_DOCS,
    TORCH_INPUT_DOCS,
    TORCH_PARAMETER_CONSTRAINTS,
    TORCH_PARAMETER_DOCS,
    BaseTorchEstimator,
    EarlyStopping,
    RowSparseOptimizer,
    check_onnx_installed,
    current_context,
    dense_float32,
    export_module,
    layer_sizes,
    resolve_device,
)
from ..sampling import NegativeLabelSampler, ShuffledBatchSampler
from ..sampling._labels import draw_from_positive_table, every_negative_label, positive_table
from ..utils._deprecation import (
    resolve_deprecated_parameters,
    with_deprecated_constraints,
)
from ..utils._docstrings import fill_shared_docs
from ..utils._memory import check_dense_fits, chunk_rows
from ..utils._params import ComponentParameters, parameters_for, store_parameters
from ..utils._validation import check_float32_range, naming_inputs
from . import _calibration, _label_search, _settings, _targets
from ._blend import Blend, NeighborVotes, choose_blend_weights, held_out_blend, top_k_score
from ._centroids import centroids_from_state, centroids_state, input_centroids
from ._label_embedding import (
    LabelEmbeddingNetwork,
    LabelScores,
    check_graph_outputs,
    graph_rows,
    start_at_centroids,
)
from ._predictor import PredictionSettings, build_predictor, label_scores_predictor

__all__ = ["SNMClassifier"]

# The score early stopping reads after each epoch: Precision@score_k on at most this many of
# the validation rows (all of them choose the votes' and centroids' weights after training),
# so that an epoch's monitor costs the same at 10^4 validation rows as at 10^6.
VALIDATION_SCORE_MAX_ROWS = 2048

_SURROGATE_NAMES = {"hinge", "logistic", "squared_hinge", "exponential", "ramp"}
# Surrogates applied to the unscaled scores (see the ``score_scale`` entry of the docstring).
_UNSCALED_SURROGATES = {"squared_hinge", "exponential", "ramp"}


def _with_attributes_of_earlier_fits(state):
    """A fitted state saved before a fitted attribute existed, with the value its fit used:
    every label in the table, no votes, no centroids, the dropout and the label table's
    optimiser as given (neither was chosen from the data then), the exact search's settings."""
    if "classes_" not in state:
        return state
    dropout = state.get("input_dropout")
    if dropout == "auto" or dropout is None:
        dropout = 0.0 if state.get("sparse_input_") else _settings.DENSE_INPUT_DROPOUT
    earlier = {
        "trained_labels_": np.arange(len(state["classes_"])),
        "neighbor_weight_": 0.0,
        "centroid_weight_": 0.0,
        "neighbor_embeddings_": None,
        "_neighbor_labels": None,
        "centroids_": None,
        "input_dropout_": float(dropout),
        "label_optimizer_": state.get("label_optimizer"),
        "search_probes_": None,
        "_search_seed": 0,
        # Saved before probabilities: predict keeps the score_k rule.
        "probability_knots_": None,
        "probability_logits_": None,
        "threshold_": None,
        "n_set_candidates_": None,
    }
    state = {**earlier, **state}
    # Saved with the sigmoid of a linear map: the same map, as knots and logits.
    temperature, bias = (
        state.pop("probability_temperature_", None),
        state.pop("probability_bias_", None),
    )
    if temperature is not None:
        state["probability_knots_"], state["probability_logits_"] = _calibration.linear_calibration(
            temperature, bias
        )
    return state


@fill_shared_docs(TORCH_PARAMETER_DOCS, TORCH_ATTRIBUTE_DOCS, methods=TORCH_INPUT_DOCS)
class SNMClassifier(ClassifierMixin, BaseTorchEstimator):
    """Top-k classifier for very large label sets, trained by Stochastic Negative Mining.

    Scores ``v_y(x) = <g(x), u_y>`` with ``g`` a small network and ``u_y`` a learned label
    embedding, both L2-normalised (Reddi, Kale, Yu, Holtmann-Rice, Chen & Kumar, "Stochastic
    Negative Mining for Learning with Large Output Spaces", AISTATS 2019). Each training step
    samples ``n_negatives`` labels, sorts their scores and applies an ordered weighted loss (BOWL
    or POWL) that weighs the sampled negatives by rank: by default the 16 hardest count,
    equally (top-16 SNM; the paper's top-1 SNM is ``top_k_negatives=1``);
    ``negative_weights="uniform"`` is plain negative sampling. A step reads and
    updates only the sampled rows of the label table, so its cost does not grow with the number
    of labels ``K`` (when ``n_negatives`` covers every other label, it scores the whole table
    with no draw); predictions are computed in chunks and never hold an ``n x K`` matrix.

    The negatives of a mini-batch are one shared sample, each example's own positive labels
    masked; every example still gets ``n_negatives`` negatives drawn uniformly from its
    non-positive labels (see :class:`~skrank.losses.NegativeLabelSampler`). With multilabel
    targets, each epoch pairs every example with one of its positive labels drawn uniformly (the
    paper's protocol), and all its positive labels are excluded from its negatives.

    Every ``"auto"`` is resolved from the shape of the training data by one function (the
    User Guide lists the rules) and stored in a fitted ``*_`` attribute. Read more in the
    :ref:`User Guide <snm>`.

    Parameters
    ----------
    loss : {"bowl", "powl"}, default="bowl"
        Binary (``phi(v_y) + sum_j w_j phi(-v_[j])``) or pairwise
        (``sum_j w_j phi(v_y - v_[j])``) ordered weighted loss.
    surrogate : {"hinge", "logistic", "squared_hinge", "exponential", "ramp"} or callable, \
default="hinge"
        Surrogate ``phi`` of the 0-1 loss (see :func:`skrank.losses.get_surrogate`; the ramp
        has margin 1). The ramp has no gradient on errors, so it trains only with
        ``loss="powl"`` and ``negative_weights`` ``"uniform"``, ``"power"`` or an array (a
        ``ValueError`` otherwise).
    margin : "deprecated"
        .. deprecated:: 0.2
           The ramp's margin is 1 (for another, pass a callable ``surrogate``); ``margin`` is
           applied as given, with a ``FutureWarning``, until its removal in 0.3.
    n_negatives : int or "auto", default="auto"
        Number ``B`` of negative labels sampled per step, among the ``K`` labels with a
        training example (``trained_labels_``). ``"auto"``: ``min(1024, K - 1)``. Values
        above ``K - 1`` are clamped to ``K - 1`` with a ``UserWarning`` (``n_negatives_``
        holds the value used).
    top_k_negatives : int or "auto", default="auto"
        Number ``k'`` of hardest sampled negatives weighed by ``"topk"``; at most
        ``n_negatives``. ``"auto"``: 16, at most an eighth of ``n_negatives_`` (at least 1).
    negative_weights : {"topk", "uniform", "power"} or array-like, default="topk"
        Weights by rank of the sorted sampled negatives (:func:`skrank.losses.owl_weights`,
        normalised to sum to 1): top-k' SNM, negative sampling, a power law ``1 / j``, or an
        array of ``n_negatives`` non-negative, non-increasing weights (the paper's scaling
        and other exponents: pass ``owl_weights(...)``).
    power_exponent, weight_scale : "deprecated"
        .. deprecated:: 0.2
           Pass ``negative_weights=skrank.losses.owl_weights("power", n, exponent=a)`` or
           ``owl_weights("topk", n, top_k=k, scale="paper", n_labels=K)`` instead; both are
           applied as given, with a ``FutureWarning``, until their removal in 0.3.
    input_normalization : {"auto", "tfidf", "l2"} or None, default="auto"
        What the network reads: ``"tfidf"``, the features reweighted by their inverse document
        frequency in the training rows, ``1 + log`` of positive values, rows scaled to unit
        norm (scikit-learn's ``TfidfTransformer(sublinear_tf=True)``; needs non-negative
        features); ``"l2"``, rows scaled to unit norm; None, the features as given.
        ``"auto"``: ``"tfidf"`` for counts (a sparse ``X`` whose values are all non-negative
        integers: word counts or indicators) read by a linear encoder
        (``hidden_layer_sizes=()``), else None: rows that are already weighted (TF-IDF rows,
        embeddings) are read as given. ``input_normalization_`` holds the choice.
    label_init : {"centroid", "random"}, default="centroid"
        Initial model: ``"centroid"`` starts each label embedding at the mean of the input
        embeddings of its training examples; a linear encoder (``hidden_layer_sizes=()``)
        then starts as the identity (``n_components`` at least the number of features), the
        principal directions of the inputs and their label centroids (where they cost less
        than an epoch), or a random projection (``encoder_init_`` holds which), so that the
        model starts as (close to) the nearest-centroid rule of the input space; early stopping
        scores this start too and keeps it if no epoch beats it. ``"random"``: Gaussian label
        rows and encoder.
    label_optimizer : {"auto", "adagrad", "rowwise_adagrad", "sparse_adam", "sgd"}, \
default="auto"
        Optimiser of the label table (:class:`~skrank.nn.RowSparseOptimizer`); all update only
        the rows a step read. ``"auto"``: row-wise Adagrad when an epoch reads a label row
        fewer than 16 times on average (``r = (n / b) (B + b) / K`` for ``n`` training rows,
        batches of ``b``, ``B`` negatives, ``K`` labels), else Adagrad
        (``label_optimizer_`` holds the choice).
    label_learning_rate : float or None, default=None
        Learning rate of the label table. None: ``0.005 * sqrt(max(1, 16 / r))`` for Adagrad
        and row-wise Adagrad (rarely read rows move as far an epoch as rows read 16 times);
        ``learning_rate`` for SparseAdam; ``0.1 * batch_size`` for SGD.
        ``label_learning_rate_`` holds the rate used.
    score_k : int, default=1
        The ``k`` of :meth:`score` and of the validation score early stopping monitors (both
        Precision@k), and of multilabel :meth:`predict` where ``threshold_`` is None.
    threshold : float in (0, 1) or "auto", default="auto"
        Multilabel :meth:`predict`: each row's labels of :meth:`predict_proba` at least
        ``threshold``, and its best label in any case, among its best
        ``n_set_candidates_`` labels. ``"auto"``: the threshold (0.02 to 0.98, by 0.01) with
        the best example-based F1 on the validation rows; without validation rows
        (``validation_fraction=None``), the ``score_k`` best labels. ``threshold_`` holds the
        threshold used. A float needs validation rows (the probabilities are calibrated on
        them).
    search : {"auto", "exact", "ivf", "faiss"}, default="auto"
        Top-k search over the label table at prediction: ``"exact"``, a chunked scan;
        ``"ivf"``, faiss inverted lists (:class:`~skrank.metrics.FaissIVFIndex`, the ``ann``
        extra), probing the fewest cells whose recall of the exact top ``max(5, score_k)``
        reaches 0.99 on up to 1,000 rows; ``"faiss"``, an HNSW graph
        (:class:`~skrank.metrics.FaissInnerProductIndex`). ``"auto"``: ``"ivf"`` from
        100,000 labels on when faiss is installed, that recall reaches 0.99 and the
        nearest-centroid rule is off, else ``"exact"`` (``search_`` holds the choice and
        ``search_recall_`` the recall measured). It may also be set after the fit.
    n_neighbors : int, default=10
        Number of nearest training rows whose labels vote at prediction (``neighbor_weight``).
    neighbor_weight : float in [0, 1] or "auto", default="auto"
        Weight ``a`` of the neighbours' label votes in the prediction scores
        ``(1 - a) (v_y(x) + b s cos(x, c_y)) + a s vote_y(x)`` (SLEEC's and AnnexML's rule):
        ``vote_y(x)`` is the share of the cosine similarities of the ``n_neighbors`` training
        rows nearest to ``x`` in the learned input embedding held by those with label ``y``,
        and ``s`` the score scale. ``"auto"``: the weight among 0, 0.1 and 0.2 with the best
        Precision@``score_k`` on the validation rows (the smaller among ties; 0 without
        validation rows and beyond 50,000 training rows, where the exact search of every
        prediction over the training rows would cost as much as scoring 50,000 labels).
        ``neighbor_weight_`` holds the weight used. With votes on, the fit keeps the unit
        embeddings of every training row (``4 n d`` bytes).
    centroid_weight : float >= 0 or "auto", default="auto"
        Weight ``b`` of the input space's nearest-centroid rule in the prediction scores (see
        ``neighbor_weight``): ``x`` is the input row as given, ``c_y`` the unit centroid of the
        unit-norm training rows of label ``y`` (the Rocchio classifier, PECOS's PIFA label
        representation). ``"auto"``: the weight among 0, 1, 2, 4, 8, 16, 32 and 64 with the
        best Precision@``score_k`` on the validation rows (the smaller among ties; 0 without
        validation rows and with ``search`` ``"ivf"`` or ``"faiss"``, whose index does not
        hold the rule). ``centroid_weight_`` holds the weight used; with it on, the fit keeps
        the sparse centroids (``centroids_``) and each prediction scans every label.
    {component_parameters}
    {shared_parameters}
    embedding_dim : "deprecated"
        .. deprecated:: 0.2
           Renamed ``n_components``; ``embedding_dim`` is read as ``n_components``, with a
           ``FutureWarning``, until its removal in 0.3.
    encoder_init, input_optimizer, input_learning_rate : "deprecated"
        .. deprecated:: 0.2
           The encoder's start is chosen from the data (``encoder_init_``), and the sparse
           input layer trains by plain SGD, 0.03 an example (``input_learning_rate_`` is
           ``0.03 * batch_size``); the three are applied as given, with a
           ``FutureWarning``, until their removal in 0.3.

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        Labels (multilabel: ``arange(n_labels)``, the columns of the indicator matrix).
    trained_labels_ : ndarray of int of shape (n_trained_labels,)
        Indices into ``classes_`` of the labels with a positive training example: the rows
        of the label table. The others take no memory, are never sampled as negatives, and
        score ``-3.4e38`` (the lowest float32) in every prediction.
    n_negatives_ : int
        Number of sampled negatives used.
    negative_weights_ : ndarray of length ``n_negatives_``
        Weights by rank used by the loss.
    module_ : LabelEmbeddingNetwork
        The trained network and label table.
    criterion_ : OrderedWeightedLoss
        The loss.
    {shared_attributes}
    n_features_in_ : int
        Number of input features.
    n_components_ : int
        The embedding dimension used (``"auto"`` resolved).
    sparse_input_ : bool
        Whether the network reads sparse inputs through a sparse first layer (a sparse ``X``
        of more than 4,096 features): a step reads and updates only the weights of the
        features present in its batch (:class:`~skrank.nn.SparseLinear`).
    input_dropout_ : float
        The ``input_dropout`` used (``"auto"`` resolved).
    input_optimizer_ : {"sgd", "rowwise_adagrad", "adagrad", "sparse_adam"} or None
        The rule of the sparse input layer's updates (None without a sparse input layer).
    input_learning_rate_ : float or None
        Its learning rate (None without a sparse input layer).
    encoder_init_ : {"identity", "svd", "random"} or None
        The start of a linear encoder (None without one started at the centroids).
    input_normalization_ : {"tfidf", "l2"} or None
        The ``input_normalization`` used (``"auto"`` resolved).
    input_transformer_ : sklearn.feature_extraction.text.TfidfTransformer or None
        The fitted TF-IDF weighting, if used.
    label_optimizer_ : {"adagrad", "rowwise_adagrad", "sparse_adam", "sgd"}
        The ``label_optimizer`` used (``"auto"`` resolved).
    label_learning_rate_ : float
        The learning rate of the label table used (None resolved).
    search_ : {"exact", "ivf", "faiss"}
        The search of predictions (``search="auto"`` resolved).
    search_recall_ : float
        Recall of the exact top ``max(5, score_k)`` labels by ``search_`` on the fit's sample
        rows (1.0 for the exact search).
    search_probes_ : int or None
        Cells probed by the ``"ivf"`` search (None for the others).
    probability_knots_, probability_logits_ : ndarray of shape (n_knots,) or None
        The calibration of :meth:`predict_proba`, ``sigmoid(z(s))`` of the prediction score
        ``s``, ``z`` strictly increasing and piecewise linear: ``probability_logits_`` at the
        scores ``probability_knots_`` (the lowest and highest validation scores and 6
        quantiles between), linear between them, rising by 1e-6 a unit of score beyond;
        multiclass targets: one linear segment, knots at -1e6 and 1e6. Fitted by logistic
        loss on the validation rows' best ``max(5, n_set_candidates_)`` labels (None without
        validation rows).
    threshold_ : float or None
        The probability threshold of multilabel :meth:`predict` (``threshold`` resolved;
        None for multiclass targets, and for the ``score_k`` rule without validation rows).
    n_set_candidates_ : int
        The labels a row's label set is chosen among: the largest label count of a training
        row, at most 100.
    neighbor_weight_ : float
        The weight of the neighbours' votes used (``"auto"`` resolved).
    neighbor_embeddings_ : ndarray of shape (n_training_rows, `n_components_`), float32 or None
        Unit input embeddings of the training rows whose labels vote at prediction (None when
        ``neighbor_weight_`` is 0).
    centroid_weight_ : float
        The weight of the nearest-centroid rule used (``"auto"`` resolved).
    centroids_ : scipy.sparse.csc_matrix of shape (n_trained_labels, `n_features_in_`), \
float32 or None
        The unit centroids of the labels of the label table, from every training row as given
        (None when ``centroid_weight_`` is 0).

    Examples
    --------
    >>> import numpy as np
    >>> from skrank import SNMClassifier
    >>> rng = np.random.RandomState(0)
    >>> centers = rng.normal(size=(50, 10))
    >>> y = np.arange(500) % 50
    >>> X = centers[y] + 0.1 * rng.normal(size=(500, 10))
    >>> clf = SNMClassifier(n_negatives=16, n_components=16, hidden_layer_sizes=(32,),
    ...                     max_epochs=20, learning_rate=1e-2, random_state=0).fit(X, y)
    >>> clf.predict_top_k(X[:2], k=3).shape
    (2, 3)
    >>> clf.score(X, y) > 0.9
    True
    """

    _deprecated_parameters = _settings.DEPRECATED_PARAMETERS

    _saved_state_updates = (_with_attributes_of_earlier_fits,)

    _parameter_constraints = with_deprecated_constraints(
        {
            **TORCH_PARAMETER_CONSTRAINTS,
            "loss": [StrOptions({"bowl", "powl"})],
            "surrogate": [StrOptions(_SURROGATE_NAMES), callable],
            "n_negatives": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
            "top_k_negatives": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
            "negative_weights": [StrOptions({"topk", "uniform", "power"}), "array-like"],
            "n_components": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
            "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
            "activation": [StrOptions({"relu", "gelu", "tanh", "leaky_relu"})],
            "dropout": [Interval(Real, 0, 1, closed="left")],
            "input_dropout": [Interval(Real, 0, 1, closed="left"), StrOptions({"auto"})],
            "scores": [StrOptions({"cosine", "dot"})],
            "score_scale": [Interval(Real, 0, None, closed="neither")],
            "learn_score_scale": ["boolean"],
            "input_normalization": [StrOptions({"auto", "tfidf", "l2"}), None],
            "label_init": [StrOptions({"centroid", "random"})],
            "label_optimizer": [
                StrOptions({"auto", "adagrad", "rowwise_adagrad", "sparse_adam", "sgd"})
            ],
            "label_learning_rate": [Interval(Real, 0, None, closed="neither"), None],
            "score_k": [Interval(Integral, 1, None, closed="left")],
            "threshold": [Interval(Real, 0, 1, closed="neither"), StrOptions({"auto"})],
            "search": [StrOptions({"auto", "exact", "faiss", "ivf"})],
            "n_neighbors": [Interval(Integral, 1, None, closed="left")],
            "neighbor_weight": [Interval(Real, 0, 1, closed="both"), StrOptions({"auto"})],
            "centroid_weight": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        },
        _deprecated_parameters,
    )

    component_parameters = ComponentParameters(
        LabelEmbeddingNetwork,
        ("n_components", "hidden_layer_sizes", "activation", "dropout", "input_dropout")
        + ("scores", "score_scale", "learn_score_scale"),
        defaults={
            "n_components": "auto",
            "hidden_layer_sizes": (),
            "input_dropout": "auto",
            "score_scale": 10.0,
            "learn_score_scale": True,
        },
        types={"n_components": 'int or "auto"'},
        notes={
            "n_components": '``"auto"``: the number of features, at most 1024 (512 for a '
            "sparse input layer, ``sparse_input_``) and at most what keeps the parameters, "
            "their optimiser states and the copy of the best weights within 1 GiB, but at "
            "least 16 (``n_components_`` holds the value used).",
            "hidden_layer_sizes": "``()``, a linear map, generalises on sparse data with few "
            "examples per label, where the paper's network memorises.",
            "input_dropout": '``"auto"``: 0.2 for a dense input layer (weight decay does not '
            "regularise cosine scores), 0 for a sparse one (``sparse_input_``), whose rows "
            "dropout slows more than it regularises (``input_dropout_`` holds the value used).",
            "score_scale": "Cosines alone lie in [-1, 1], too narrow for the surrogates' margins; "
            "the squared hinge, exponential and ramp surrogates see the unscaled scores.",
        },
    )

    engine_defaults = {
        "max_epochs": 50,
        "tol": 0.0,
        "early_stopping": True,
        "validation_fraction": 0.1,
    }

    def __init__(
        self,
        loss="bowl",
        surrogate="hinge",
        margin="deprecated",
        n_negatives="auto",
        top_k_negatives="auto",
        negative_weights="topk",
        power_exponent="deprecated",
        weight_scale="deprecated",
        *,
        input_normalization="auto",
        label_init="centroid",
        label_optimizer="auto",
        label_learning_rate=None,
        score_k=1,
        threshold="auto",
        search="auto",
        n_neighbors=10,
        neighbor_weight="auto",
        centroid_weight="auto",
        embedding_dim="deprecated",
        encoder_init="deprecated",
        input_optimizer="deprecated",
        input_learning_rate="deprecated",
        **parameters,
    ):
        store_parameters(self, locals())

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the network and the label embeddings.

        Multilabel rows without a positive label are dropped (with a warning), and labels
        without a positive example are left out of the label table (``trained_labels_``). The
        label embeddings start from the centroids of the training inputs of each label
        (``label_init="centroid"``). ``validation_fraction`` of the rows is held out, and with
        ``early_stopping`` training stops on their Precision@``score_k`` (on at most 2,048
        of them, a random sample). With ``warm_start=True``, training continues from the
        previous fit, whose labels must repeat and whose label table must hold every label
        with a positive example.

        Parameters
        ----------
        {training_X}
        y : array-like of shape (n_samples,), or indicator matrix (n_samples, n_labels)
            Multiclass labels (integers, strings, booleans, or floats with integer values, as
            scikit-learn's classifiers take), or a multilabel 0/1 indicator matrix, dense
            or sparse. Multilabel rows without a positive label are skipped with a warning.

        Returns
        -------
        self : SNMClassifier
            Fitted estimator.
        """
        parameters = {**self.get_params(deep=False), **resolve_deprecated_parameters(self)}
        self._fitted_predictor = None
        _label_search.check_search_with_centroids(
            self.search, "centroid_weight", self.centroid_weight
        )
        if self.threshold != "auto" and self.validation_fraction is None:
            raise ValueError(
                f"threshold={self.threshold!r} is a probability, calibrated on the validation "
                "rows: set validation_fraction (e.g. 0.1), or threshold='auto' for the "
                "score_k best labels."
            )
        continuing = self.warm_starting()
        with naming_inputs("X", "y"):
            X, y = validate_data(
                self,
                X,
                y,
                accept_sparse="csr",
                dtype=(np.float64, np.float32),
                multi_output=True,
                reset=not continuing,
            )
        check_float32_range(X, estimator="SNMClassifier")
        classes, positives, self._multilabel_output = _targets.encode_targets(y)
        self.set_classes(classes)
        if self.score_k > len(classes):
            raise ValueError(f"score_k={self.score_k} exceeds the number of labels {len(classes)}.")
        keep = _targets.drop_rows_without_positives(positives)
        if keep is not None:
            X, positives = X[keep], positives[keep]
        positives = self._table_positives(positives, continuing)
        world_size = current_context(resolve_device(self.device)).world_size
        data = _settings.describe_training_data(
            X,
            _settings.training_rows(X.shape[0], self.validation_fraction),
            positives.shape[1],
            self.validation_fraction is not None,
            self.batch_size * world_size,
        )
        self._apply_settings(_settings.resolve_settings(parameters, data), continuing)
        rows = X  # as given: the space of the nearest-centroid rule
        X = self._normalize_inputs(X, fitting=not continuing)
        X_train, y_train, validation, rows_train, rows_validation = self._split_with_rows(
            X, positives, rows
        )
        self.neighbor_embeddings_ = self._neighbor_labels = self.centroids_ = None
        self.neighbor_weight_ = self.centroid_weight_ = 0.0
        self.fit_loop(X_train, y_train, validation)
        # The blend's weights are chosen on the model the validation rows did not shape.
        train = (X_train, y_train, rows_train)
        held_out = self._held_out_scoring(train, validation, rows_validation)
        self.neighbor_weight_, self.centroid_weight_ = self._choose_blend_weights(held_out)
        # No epoch beat the start: early stopping kept the untrained model.
        if validation is not None and any(getattr(c, "kept_start", False) for c in self.callbacks_):
            self._rebuild_start(X, positives)
            held_out = self._held_out_scoring(train, validation, rows_validation)
        if self.neighbor_weight_ > 0:
            votes = NeighborVotes.from_rows(self.forward(X), positives)
            self.neighbor_embeddings_, self._neighbor_labels = votes.embeddings, votes[1:]
        if self.centroid_weight_ > 0:
            self.centroids_ = input_centroids(rows, positives)
        self._prepare_search(X if validation is None else validation[0])
        self._fit_probabilities(held_out, positives)
        return self

    def _held_out_scoring(self, train, validation, rows_validation):
        """The validation rows as the blend scores them, ``(embeddings, positives, rows,
        blend)`` (None without validation rows): their input embeddings, and the blend of the
        training rows ``train`` (X, positives, rows) alone, with the votes and the centroids
        where a candidate weight is positive: a validation row never votes for its own labels
        nor shapes a centroid."""
        if validation is None:
            return None
        X_val, y_val = validation
        forward = functools.partial(self.forward, as_numpy=True)
        embeddings = forward(X_val)
        blend = held_out_blend(
            Blend(self.network_.score_scale, n_neighbors=self.n_neighbors),
            train,
            forward,
            embeddings,
            votes=any(self._settings.neighbor_weights),
            centroids=any(self._settings.centroid_weights),
        )
        return embeddings, y_val, rows_validation, blend

    def _fit_probabilities(self, held_out, positives):
        """Calibrate :meth:`predict_proba` and choose ``threshold_`` on the validation rows'
        best labels (see ``_calibration``), scored as predictions score them by the blend of
        the training rows (``held_out``, :meth:`_held_out_scoring`)."""
        n_trained = len(self.trained_labels_)
        self.n_set_candidates_ = _calibration.set_candidates(positives, n_trained)
        self.probability_knots_ = self.probability_logits_ = self.threshold_ = None
        if held_out is None:
            return
        embeddings, y_val, rows_validation, blend = held_out
        k = min(max(5, self.n_set_candidates_), n_trained)
        blend = blend._replace(
            neighbor_weight=self.neighbor_weight_,
            centroid_weight=self.centroid_weight_,
            neighbors=blend.neighbors if self.neighbor_weight_ > 0 else None,
            centroids=blend.centroids if self.centroid_weight_ > 0 else None,
        )
        predictor = self._predictor()._replace(blend=blend)
        scores, top = predictor.table_top_k(embeddings, rows_validation, k)
        hits, n_true = top_k_hits(y_val, top)
        fit = _calibration.fit_calibration
        if not self._multilabel_output:
            fit = _calibration.fit_linear_calibration
        calibration = fit(scores, hits)
        self.probability_knots_, self.probability_logits_ = calibration
        if not self._multilabel_output:
            return
        if self.threshold != "auto":
            self.threshold_ = float(self.threshold)
            return
        candidates = slice(0, self.n_set_candidates_)
        self.threshold_ = _calibration.choose_threshold(
            calibration.probabilities(scores[:, candidates]), hits[:, candidates], n_true
        )

    def _apply_settings(self, settings, continuing):
        """Store the resolved settings as fitted attributes (a warm start keeps the previous
        fit's model, optimisers and input weighting)."""
        if not continuing:
            self.n_components_ = settings.n_components
            self.sparse_input_ = settings.sparse_input
            self.input_dropout_ = settings.input_dropout
            self.input_normalization_ = settings.input_normalization
            self.label_optimizer_ = settings.label_optimizer
        for name in ("label_learning_rate", "input_optimizer", "input_learning_rate"):
            setattr(self, f"{name}_", getattr(settings, name))
        self.n_negatives_, self.negative_weights_ = settings.n_negatives, settings.negative_weights
        self._settings = settings

    def _split_with_rows(self, X, positives, rows):
        """:meth:`split_validation` of ``(X, positives)``, and the same split of ``rows``
        (the inputs as given; ``X`` itself without ``input_normalization``, never copied
        twice): ``(X_train, y_train, validation, rows_train, rows_validation)``."""
        if rows is X:
            X_train, y_train, validation = self.split_validation(X, positives)
            return X_train, y_train, validation, X_train, validation and validation[0]
        X_train, parts, validation = self.split_validation(X, _targets.RowsAlike(positives, rows))
        y_train, rows_train = parts.arrays
        if validation is None:
            return X_train, y_train, None, rows_train, None
        y_val, rows_validation = validation[1].arrays
        return X_train, y_train, (validation[0], y_val), rows_train, rows_validation

    def _table_positives(self, positives, continuing):
        """The columns of ``positives`` that the label table holds, ``trained_labels_``: the
        labels with a positive example (a warm start keeps the previous fit's)."""
        previous = self.trained_labels_ if continuing else None
        self.trained_labels_ = _targets.table_labels(positives, previous)
        if len(self.trained_labels_) == positives.shape[1]:
            return positives
        return positives[:, self.trained_labels_]

    def _choose_blend_weights(self, held_out):
        """``(neighbor_weight_, centroid_weight_)``: each parameter as given, or for ``"auto"``
        its weight with the best Precision@``score_k`` on the validation rows ``held_out``
        (:meth:`_held_out_scoring`; see :func:`~skrank.multilabel._blend.choose_blend_weights`)."""
        return choose_blend_weights(
            neighbor_weights=self._settings.neighbor_weights,
            centroid_weights=self._settings.centroid_weights,
            held_out=held_out and held_out[:3],
            blend=held_out and held_out[3],
            table=self.network_.label_table(),
            device=self.inference_device(),
            k=min(self.score_k, len(self.trained_labels_)),
        )

    def _rebuild_start(self, X, positives):
        """No epoch beat the start: rebuild it from every training row (the validation rows
        included), with the seed the first one had."""
        device = next(self.module_.parameters()).device
        with torch.random.fork_rng():
            torch.manual_seed(int(self.shared_random_state().randint(np.iinfo(np.int32).max)))
            self.module_ = self.initialize_module(X.shape[1])
            self.initialize_weights(X, positives)
        self.module_ = self.module_.to(device).eval()
        self.optimizers_ = self.initialize_optimizers()  # on the new parameters

    # ------------------------------------------------------------------ engine steps
    def get_default_callbacks(self):
        callbacks = super().get_default_callbacks()
        if self.label_init == "centroid" and not layer_sizes(self.hidden_layer_sizes):
            # Early stopping also scores the start (the input-space centroid rule of a linear
            # encoder): training that never beats it on the validation rows keeps it.
            for callback in callbacks:
                if isinstance(callback, EarlyStopping) and callback.monitor == "validation_score":
                    callback.score_start = True
        return callbacks

    def _network(self, n_features):
        network = LabelEmbeddingNetwork(
            n_features,
            len(self.trained_labels_),
            **parameters_for(
                self,
                LabelEmbeddingNetwork,
                n_components=self.n_components_,
                input_dropout=self.input_dropout_,
                hidden_layer_sizes=layer_sizes(self.hidden_layer_sizes),
                sparse_input=self.sparse_input_,
            ),
        )
        # The label table is read through the row-sparse optimiser, never through autograd.
        network.label_embeddings.weight.requires_grad_(False)
        return network

    def initialize_module(self, n_features):
        return self._network(n_features)

    def initialize_weights(self, X, y):
        """With ``label_init="centroid"``, start each label embedding at the centroid of the
        input embeddings of its training rows ``y`` (the positives' indicator), and a linear
        encoder as a projection of the inputs ``X`` (``encoder_init_``)."""
        self.encoder_init_ = None
        if self.label_init == "centroid":
            self.encoder_init_ = self._settings.encoder_init
            seed = None
            if self.encoder_init_ is not None:
                seed = int(torch.randint(2**31 - 1, ()))  # fit seeds torch alike on every rank
            start_at_centroids(self.module_, X, y, self.encoder_init_, seed)

    def initialize_criterion(self, y):
        surrogate, margin = self.surrogate, self.margin
        return OrderedWeightedLoss(
            self.negative_weights_,
            loss=self.loss,
            surrogate=surrogate,
            margin=1.0 if margin == "deprecated" else margin,
        )

    def rebuild_module(self, name):
        """The network and the loss, for loading a saved classifier (see
        :meth:`skrank.nn.BaseTorchEstimator.rebuild_module`)."""
        if name == "module_":
            return self._network(self.n_features_in_)
        if name == "criterion_":
            return self.initialize_criterion(None)
        return None

    def initialize_optimizers(self):
        table = self.module_.label_embeddings.weight
        network = [p for p in self.module_.parameters() if p.requires_grad]
        self._label_optimizer = RowSparseOptimizer(
            table,
            method=self.label_optimizer_,
            lr=self.label_learning_rate_,
            synchronize=self.training_context.active,
        )
        return self.optimizers_for(network, self.input_optimizer_, self.input_learning_rate_) + [
            self._label_optimizer
        ]

    def prepare_targets(self, y, device):
        """Each example's positive labels as a padded table on the device, and their counts."""
        return positive_table(y, y.shape[1], device)

    def get_batch_sampler(self, y, device, random_state):
        # The negatives and the positive draws of a step come from the training device.
        self._label_sampler = NegativeLabelSampler(
            len(self.trained_labels_),
            self.n_negatives_,
            random_state=random_state,
            device=self.training_device,
        )
        return ShuffledBatchSampler(
            y.shape[0], self.batch_size * self.world_size_, random_state=random_state, device=device
        )

    def get_loss(self, batch, targets):
        table, counts = targets
        # Every rank draws the positives of the whole batch (and the same shared negatives),
        # so that its generator stays in step with the others; it keeps its part.
        whole = batch.indices if batch.global_indices is None else batch.global_indices
        generator = self._label_sampler.generator
        positives = draw_from_positive_table(table[whole], counts[whole], generator)[batch.part]
        embeddings = self.module_(batch.inputs)
        if isinstance(self.surrogate, str) and self.surrogate in _UNSCALED_SURROGATES:
            embeddings = embeddings / self.network_.log_scale.exp()
        sampler = self._label_sampler
        table_is_sampled = self._label_optimizer.table.shape[0] == sampler.n_labels
        if table_is_sampled and sampler.n_negatives >= sampler.n_labels - 1:
            # Every row has a positive label: its negatives are all its other labels. The
            # step scores the whole table, read in place, and takes the positives' scores
            # from it.
            vectors = self.network_.normalize_labels(self._label_optimizer.gather())
            scores = embeddings @ vectors.T
            positive_scores = scores.gather(1, positives[:, None])[:, 0]
            mask = every_negative_label(table[batch.indices], sampler.n_labels)
            return self.criterion_(positive_scores, scores, mask, valid=batch.valid)
        sampled, mask = sampler.draw(table[batch.indices])
        vectors = self.network_.normalize_labels(
            self._label_optimizer.gather(torch.cat([positives, sampled]))
        )
        size = positives.shape[0]
        positive_scores = (embeddings * vectors[:size]).sum(dim=1)
        negative_scores = embeddings @ vectors[size:].T
        return self.criterion_(positive_scores, negative_scores, mask, valid=batch.valid)

    def training_state(self):
        state = super().training_state()
        state["label_sampler"] = self._label_sampler.generator.get_state()
        return state

    def load_training_state(self, state):
        super().load_training_state(state)
        self._label_sampler.generator.set_state(state["label_sampler"])

    def validation_score(self, X_val, y_val):
        # The split shuffles the rows: its first rows are a random sample of them.
        X_val, y_val = X_val[:VALIDATION_SCORE_MAX_ROWS], y_val[:VALIDATION_SCORE_MAX_ROWS]
        # Exact search: an approximate index built from mid-training weights would go stale.
        k = min(self.score_k, len(self.trained_labels_))
        predictor = label_scores_predictor(
            self.network_, self.trained_labels_, len(self.classes_), self.inference_device()
        )
        _, top = predictor.table_top_k(self.forward(X_val, as_numpy=True), None, k)
        return top_k_score(y_val, top, "precision")

    # ------------------------------------------------------------------ prediction
    def _predicted_top_k(self, X, rows, k):
        """Scores and indices into ``classes_`` (n, k) of the ``k`` best labels, best first;
        beyond the label table's rows, the labels without a training example."""
        n_labels = len(self.classes_)
        if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k <= n_labels:
            raise ValueError(f"k must be an integer in [1, {n_labels}] (the labels), got {k!r}.")
        return self._predictor().top_k(self.forward(X, as_numpy=True), rows, k)

    def _predictor(self):
        """The fitted model's :class:`~skrank.multilabel._predictor.Predictor`, built on first
        use and again when a prediction-time setting (``search``, ``n_neighbors``, the
        device) has changed since."""
        settings = PredictionSettings(
            _settings.search_method(self.search, fitted=self.search_),
            self.n_neighbors,
            self.inference_device(),
        )
        predictor = self._fitted_predictor
        if predictor is None or predictor.settings != settings:
            predictor = self._fitted_predictor = self._build_predictor(settings)
        return predictor

    def _build_predictor(self, settings, search=None):
        """The :class:`~skrank.multilabel._predictor.Predictor` of the fitted arrays for
        ``settings`` (``search``: a label search of that method already built)."""
        neighbors = None
        if self.neighbor_embeddings_ is not None:
            neighbors = NeighborVotes(self.neighbor_embeddings_, *self._neighbor_labels)
        return build_predictor(
            settings,
            network=self.network_,
            trained=self.trained_labels_,
            n_classes=len(self.classes_),
            neighbor_weight=self.neighbor_weight_,
            centroid_weight=self.centroid_weight_,
            neighbors=neighbors,
            centroids=self.centroids_,
            n_probe=self.search_probes_,
            search_seed=self._search_seed,
            search=search,
        )

    def _prepare_search(self, X_sample):
        """Resolve ``search`` into ``search_`` and build the fitted predictor; for an
        approximate search, build the index and measure its recall of the exact top
        ``max(5, score_k)`` on up to 1,000 rows of ``X_sample`` (``"auto"`` falls back to the
        exact search below a recall of 0.99)."""
        self._search_seed = int(self.shared_random_state().randint(np.iinfo(np.int32).max))
        n_trained = len(self.trained_labels_)
        device = self.inference_device()
        search = _label_search.LabelSearch(
            self.network_.to(device).label_table,
            n_trained,
            _settings.search_method(
                self.search, n_labels=n_trained, centroid_weight=self.centroid_weight_
            ),
            None,
            self._search_seed,
            device,
        )
        sample = X_sample[_label_search.sample_rows(X_sample.shape[0], self._search_seed)]
        self.search_recall_ = search.calibrate(
            lambda: self.forward(sample, as_numpy=True),
            min(max(5, self.score_k), n_trained),
            fall_back=self.search == "auto",
        )
        self.search_, self.search_probes_ = search.method, search.probes()
        settings = PredictionSettings(search.method, self.n_neighbors, device)
        self._fitted_predictor = self._build_predictor(settings, search)

    def _validate_for_prediction(self, X, rows=False):
        """``X`` checked and normalised as the network reads it; with ``rows``, the pair of it
        and ``X`` checked, as given (for the nearest-centroid rule; None without it)."""
        check_is_fitted(self)
        with naming_inputs("X"):
            X = validate_data(
                self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False
            )
        X = check_float32_range(X, estimator="SNMClassifier", fitting=False)
        normalized = self._normalize_inputs(X, fitting=False)
        if not rows:
            return normalized
        return normalized, (X if self.centroids_ is not None else None)

    def _normalize_inputs(self, X, fitting):
        """``X`` as the network reads it (``input_normalization_``); at fit, learn the idf."""
        if fitting:
            self.input_transformer_ = _settings.fit_input_weighting(X, self.input_normalization_)
        return _settings.weigh_inputs(X, self.input_normalization_, self.input_transformer_)

    def predict_top_k(self, X, k, return_scores=False, return_proba=False):
        """The ``k`` highest-scored labels of each example, best first.

        Computed in chunks of examples and of labels: memory stays ``O(n k)`` beyond the
        model, whatever the number of labels. Ties are broken by label index, the smaller first.

        Parameters
        ----------
        {X}
        k : int
            Number of labels per example, ``1 <= k <= n_labels``.
        return_scores : bool, default=False
            Also return the scores of those labels.
        return_proba : bool, default=False
            Also return their probabilities (:meth:`predict_proba`'s, without building the
            ``n x K`` matrix: multiclass rows are normalised in chunks of rows).

        Returns
        -------
        labels : ndarray of shape (n_samples, k)
            Labels from ``classes_``.
        scores : ndarray of shape (n_samples, k), float32
            Their scores (decreasing along each row; the scaled cosine similarities, plus the
            nearest-centroid rule when ``centroid_weight_ > 0`` and blended with the
            neighbours' votes when ``neighbor_weight_ > 0``; ``-3.4e38`` for labels without a
            training example, see ``trained_labels_``); only if ``return_scores``.
        probabilities : ndarray of shape (n_samples, k), float32
            Their probabilities; only if ``return_proba``.
        """
        X, rows = self._validate_for_prediction(X, rows=True)
        calibration = self._calibration() if return_proba else None
        scores, indices = self._predicted_top_k(X, rows, k)
        outputs = [self.classes_[indices]]
        if return_scores:
            outputs.append(scores)
        if return_proba:
            if self._multilabel_output:
                probabilities = self._probabilities(calibration, scores)
            else:
                maxima, sums = self._exponential_sums(calibration, X, rows)
                untrained = scores == _targets.UNTRAINED_LABEL_SCORE
                probabilities = calibration.exponentials(scores, maxima, untrained) / sums[:, None]
            outputs.append(probabilities.astype(np.float32))
        return tuple(outputs) if len(outputs) > 1 else outputs[0]

    def _calibration(self):
        """The fitted :class:`~skrank.multilabel._calibration.Calibration`; a ``ValueError``
        for a model fitted without validation rows."""
        check_is_fitted(self)
        if self.probability_knots_ is None:
            raise ValueError(
                "Probabilities are calibrated on the validation rows, and this model was "
                "fitted without them (validation_fraction=None) or saved before they "
                "existed: fit it with validation_fraction set (e.g. 0.1)."
            )
        return _calibration.Calibration(self.probability_knots_, self.probability_logits_)

    @staticmethod
    def _probabilities(calibration, scores):
        """The calibrated probabilities of prediction ``scores``, 0 for the labels without a
        training example."""
        return calibration.probabilities(scores, scores == _targets.UNTRAINED_LABEL_SCORE)

    def _exponential_sums(self, calibration, X, rows):
        """Each multiclass row's largest score and sum of the exponentials of every label
        relative to it (:meth:`~skrank.multilabel._calibration.Calibration.exponentials`), in
        chunks of rows."""
        maxima, sums = [], []
        step = chunk_rows(X.shape[0], 12 * len(self.classes_))
        for start in range(0, X.shape[0], step):
            part = slice(start, start + step)
            embeddings = torch.from_numpy(self.forward(X[part], as_numpy=True))
            scores = self._predictor().scores(embeddings, None if rows is None else rows[part])
            untrained = scores == _targets.UNTRAINED_LABEL_SCORE
            maxima.append(scores.max(axis=1))
            sums.append(calibration.exponentials(scores, maxima[-1], untrained).sum(axis=1))
        return np.concatenate(maxima), np.concatenate(sums)

    def predict_proba(self, X):
        """Calibrated probabilities of every label, shape (n_samples, n_labels).

        One strictly increasing map of the prediction scores (:meth:`decision_function`),
        ``sigmoid(z(s))`` with ``z`` piecewise linear, fitted on the validation rows
        (``probability_knots_``, ``probability_logits_``): rankings, and so the top-k
        labels and P@k, are those of the scores. Multilabel: each label's probability;
        multiclass: the softmax of ``z(s)``, ``z`` linear there, rows that sum to 1 (two
        classes: two columns, ``p_1 = sigmoid(z(s_1) - z(s_0))`` following the decision
        function).
        The labels without a training example get 0. Needs validation rows
        (``validation_fraction``); refuses (``MemoryError``) when the matrix would take more
        than half of the available memory: use ``predict_top_k(X, k, return_proba=True)``.

        Parameters
        ----------
        {X}

        Returns
        -------
        probabilities : ndarray of shape (n_samples, n_labels), float32
        """
        X, rows = self._validate_for_prediction(X, rows=True)
        calibration = self._calibration()
        check_dense_fits(
            X.shape[0],
            len(self.classes_),
            "predict_proba",
            "Use predict_top_k(X, k, return_proba=True), which never builds it, or pass "
            "fewer rows at a time.",
        )
        embeddings = torch.from_numpy(self.forward(X, as_numpy=True))
        scores = self._predictor().scores(embeddings, rows)
        if self._multilabel_output:
            return self._probabilities(calibration, scores)
        untrained = scores == _targets.UNTRAINED_LABEL_SCORE
        exponentials = calibration.exponentials(scores, scores.max(axis=1), untrained)
        return (exponentials / exponentials.sum(axis=1, keepdims=True)).astype(np.float32)

    def predict(self, X):
        """Best label of each example; multilabel: indicator of each example's labels of
        probability at least ``threshold_`` (at least one), or of its ``score_k`` best labels
        where ``threshold_`` is None (see ``threshold``).

        Parameters
        ----------
        {X}

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), or indicator of shape (n_samples, n_labels)
            Multilabel: sparse CSR if the training targets were sparse, else a dense array of
            their dtype.
        """
        X, rows = self._validate_for_prediction(X, rows=True)
        if not self._multilabel_output:
            return self.classes_[self._predicted_top_k(X, rows, 1)[1][:, 0]]
        if self.threshold_ is None:
            _, top = self._predicted_top_k(X, rows, self.score_k)
            return _targets.indicator_of_top(top, len(self.classes_), self._multilabel_output)
        scores, top = self._predicted_top_k(X, rows, self.n_set_candidates_)
        probabilities = self._probabilities(self._calibration(), scores)
        chosen = _calibration.label_sets(probabilities, self.threshold_)
        return _targets.indicator_of_top(
            top, len(self.classes_), self._multilabel_output, chosen=chosen
        )

    def decision_function(self, X):
        """Scores of every label, shape (n_samples, n_labels).

        Two-class multiclass targets follow scikit-learn's binary convention: one column, the
        score of ``classes_[1]`` minus that of ``classes_[0]``. Refuses (``MemoryError``) when
        the ``n_samples x n_labels`` float32 matrix would take more than half of the available
        memory: use :meth:`predict_top_k` or pass fewer rows at a time.

        Parameters
        ----------
        {X}

        Returns
        -------
        scores : ndarray of shape (n_samples, n_labels) or (n_samples,), float32
            Scaled cosine similarities of the input and label embeddings, plus the
            nearest-centroid rule when ``centroid_weight_ > 0`` and blended with the
            neighbours' votes when ``neighbor_weight_ > 0`` (see those parameters); ``-3.4e38``
            (the lowest float32) for the labels without a training example (see
            ``trained_labels_``).
        """
        X, rows = self._validate_for_prediction(X, rows=True)
        check_dense_fits(
            X.shape[0],
            len(self.classes_),
            "decision_function",
            "Use predict_top_k(X, k), which never builds it, or pass fewer rows at a time.",
        )
        return self._decision_scores(torch.from_numpy(self.forward(X, as_numpy=True)), rows)

    def _decision_scores(self, embeddings, rows=None, label_scores=None):
        """:meth:`decision_function`'s scores from the input ``embeddings`` (a CPU tensor),
        the inputs as given ``rows`` (for the nearest-centroid rule; None: without it) and the
        scores of the label table's rows ``label_scores`` (computed here when None); the labels
        without a training example score ``UNTRAINED_LABEL_SCORE``."""
        scores = self._predictor().scores(embeddings, rows, label_scores)
        if len(self.classes_) == 2 and not self._multilabel_output:
            return scores[:, 1] - scores[:, 0]
        return scores

    # ------------------------------------------------------------------ serving
    def export_onnx(self, path, *, opset_version=None):
        """Write the label scores as an ONNX graph, to serve them without Python or torch.

        The graph maps its input ``X``, the normalised inputs as a dense float32 array of shape
        ``(n_samples, n_features_in_)`` (:meth:`onnx_inputs`), to two outputs: ``scores``, of
        shape ``(n_samples, n_labels)``, the label scores ``v_y(x) = <g(x), u_y>`` of every
        label (columns in the order of ``classes_``; ``-3.4e38`` for the labels without a
        training example), and ``embeddings``, the input embeddings
        ``g(x)`` (times the score scale) of shape ``(n_samples, n_components_)``. The label
        table is a constant of the graph (``4 K d`` bytes). Outside the graph stay the input
        checks and ``input_normalization`` (applied, with the densification of sparse rows, by
        :meth:`onnx_inputs`), the nearest-centroid rule (``centroid_weight_ > 0``: sparse
        centroids) and the neighbours' votes (``neighbor_weight_ > 0``), which
        :meth:`decision_function_from_onnx` adds to the outputs; without them, ``scores`` is
        what :meth:`decision_function` returns, to float32 rounding (two-class targets: one
        column per class). Probabilities are not in the graph: :meth:`predict_proba` is
        ``sigmoid(z(s))`` of these scores, ``z`` the interpolation of ``probability_logits_``
        at ``probability_knots_`` (``numpy.interp`` within the knots; multiclass rows: the
        softmax of ``z(s)``), 0 for the labels without a training example. Needs ``onnx`` and
        ``onnxscript`` (the ``onnx`` extra, which also
        installs ``onnxruntime`` to run graphs). Read more in the :ref:`User Guide
        <persistence>`.

        Parameters
        ----------
        {onnx_path}
        {opset_version}

        Returns
        -------
        {onnx_written}

        Examples
        --------
        >>> import onnxruntime  # doctest: +SKIP
        >>> clf.export_onnx("snm.onnx")  # doctest: +SKIP
        >>> session = onnxruntime.InferenceSession("snm.onnx")  # doctest: +SKIP
        >>> scores, embeddings = session.run(None, {"X": clf.onnx_inputs(X)})  # doctest: +SKIP
        >>> scores = clf.decision_function_from_onnx(scores, embeddings)  # doctest: +SKIP
        """
        check_is_fitted(self)
        check_onnx_installed("SNMClassifier.export_onnx")
        trained = self.trained_labels_
        return export_module(
            LabelScores(
                self.network_,
                None if len(trained) == len(self.classes_) else trained,
                len(self.classes_),
                _targets.UNTRAINED_LABEL_SCORE,
            ),
            self.n_features_in_,
            path,
            ["scores", "embeddings"],
            opset_version,
        )

    def onnx_inputs(self, X):
        """``X`` as the graph of :meth:`export_onnx` reads it: checked, normalised
        (``input_normalization_``) and densified, as a float32 array.

        Parameters
        ----------
        {X}

        Returns
        -------
        inputs : ndarray of float32 of shape (n_samples, `n_features_in_`)
        """
        return dense_float32(self._validate_for_prediction(X))

    def decision_function_from_onnx(self, scores, embeddings, X=None):
        """:meth:`decision_function`'s scores from the outputs of the graph of
        :meth:`export_onnx`: the nearest-centroid rule added (when ``centroid_weight_ > 0``),
        the neighbours' votes blended in (when ``neighbor_weight_ > 0``) and, for two-class
        targets, one column.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_labels)
            The graph's output ``scores``.
        embeddings : array-like of shape (n_samples, `n_components_`)
            The graph's output ``embeddings``.
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or None, default=None
            The inputs the graph scored, as given to :meth:`onnx_inputs`: needed (and read)
            only when ``centroid_weight_ > 0``.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_labels) or (n_samples,), float32
            As :meth:`decision_function` returns them for the same rows, to float32 rounding.
        """
        check_is_fitted(self)
        width = self.network_.label_embeddings.embedding_dim
        scores, embeddings = check_graph_outputs(scores, embeddings, len(self.classes_), width)
        rows = None
        if self.centroids_ is not None:
            validate = functools.partial(self._validate_for_prediction, rows=True)
            rows = graph_rows(X, len(scores), self.centroid_weight_, lambda X: validate(X)[1])
        trained = self.trained_labels_
        if len(trained) < len(self.classes_):
            scores = scores[:, trained]  # the table's columns; the others are the constant floor
        return self._decision_scores(
            torch.from_numpy(embeddings), rows, label_scores=torch.from_numpy(scores)
        )

    def score(self, X, y):
        """Precision@``score_k`` over labels, the metric of extreme classification.

        The :func:`skrank.metrics.top_k_precision_score` of the ``score_k`` best labels (the
        share of them that are true labels, averaged over examples), computed from
        :meth:`predict_top_k` (no ``n x K`` matrix): what early stopping monitors on the
        validation rows, and what ``GridSearchCV`` compares by default. Examples without a
        true label are excluded with a warning. Recall@k, the share of each example's true
        labels among its ``k`` best, is the scorer ``get_scorer("label_recall@k")`` of
        :func:`skrank.metrics.get_scorer`.

        Parameters
        ----------
        {X}
        y : array-like of shape (n_samples,), or indicator matrix (n_samples, n_labels)
            True labels, in the format used at fit.

        Returns
        -------
        precision : float
            Mean over examples of (true labels among the ``score_k`` best) / ``score_k``.
        """
        _, top = self._predicted_top_k(*self._validate_for_prediction(X, rows=True), self.score_k)
        labels = None if self._multilabel_output else self.classes_
        return top_k_score(check_label_targets(y, len(self.classes_), labels), top, "precision")

    # ------------------------------------------------------------------ misc
    def __getstate__(self):
        state = super().__getstate__()
        # Built again on use: the predictor (faiss indexes do not pickle), the label table's
        # optimiser and the negatives' sampler (a fit builds them), the fit's settings.
        for name in ("_fitted_predictor", "_label_optimizer", "_label_sampler", "_settings"):
            state.pop(name, None)
        if state.get("centroids_") is not None:
            state["centroids_"] = centroids_state(state["centroids_"])
        return state

    def __setstate__(self, state):
        state = {**state, "_fitted_predictor": None}
        if isinstance(state.get("centroids_"), dict):
            state["centroids_"] = centroids_from_state(state["centroids_"])
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.classifier_tags.multi_label = True
        return tags
