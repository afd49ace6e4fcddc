"""SNMClassifier's "auto" settings, resolved in one place from the shape of the training data.

:func:`resolve_settings` is a pure function of the estimator's parameters and a
:class:`TrainingData` summary: every ``"auto"`` (and None) default of
:class:`~skrank.multilabel.SNMClassifier` becomes a value here, and the estimator stores each as
a fitted ``*_`` attribute. The two prediction weights chosen on the validation rows
(``neighbor_weight`` and ``centroid_weight``) are resolved here into the candidates to compare,
then by :func:`~skrank.multilabel._blend.choose_blend_weights` after training.
"""

import math
import warnings
from numbers import Real
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize

from .._compat import Interval, StrOptions
from ..losses import owl_weights
from ..losses._owl import check_weight_vector
from ..nn import layer_sizes
from ..utils._deprecation import DeprecatedParameter
from . import _label_search

# Sparse X with more features than this trains a sparse input layer (the rows a batch reads);
# below, the dense layer and its optimiser cost little.
SPARSE_INPUT_MIN_FEATURES = 4096
# The sparse input layer's SGD rate for one example: a batch's (mean) gradient steps
# SPARSE_INPUT_SGD_RATE times batch_size. The Adagrad rates of the same layer, in units of the
# network's learning_rate, when input_optimizer asks for them.
SPARSE_INPUT_SGD_RATE = 0.03
SPARSE_INPUT_ADAGRAD_FACTOR = 30.0
# input_dropout="auto": the dropout of a dense input layer (a sparse input layer takes none).
DENSE_INPUT_DROPOUT = 0.2
# The Adagrad rate of label rows read at least LABEL_REFERENCE_READS times an epoch.
LABEL_ADAGRAD_RATE = 0.005
LABEL_REFERENCE_READS = 16
# Bytes an entry of a table updated by RowSparseOptimizer takes: the weight and the copy of
# the best weights (4 bytes each), and the optimiser's state (Adagrad one number an entry, lazy
# Adam two; row-wise Adagrad one a row, SGD none).
ROW_SPARSE_ENTRY_BYTES = {"rowwise_adagrad": 8, "sgd": 8, "adagrad": 12, "sparse_adam": 16}
# Bytes a weight of a dense first layer takes: the weight, its copy and Adam's two moments.
DENSE_ENTRY_BYTES = 16
# Bytes that n_components="auto" allows the parameters and their optimiser states per fit.
AUTO_COMPONENTS_BYTES = 2**30
AUTO_MAX_COMPONENTS = 1024
# A sparse input layer's cap: on debtags' validation split 512 dimensions scored as 1,024 did
# (P@1 0.886 and 0.886) in half the time and memory.
AUTO_MAX_SPARSE_COMPONENTS = 512
AUTO_MIN_COMPONENTS = 16
# The weights of the neighbours' votes that neighbor_weight="auto" chooses from, and the number
# of training rows beyond which it leaves them off (their exact search would cost each
# prediction more than scoring as many labels).
NEIGHBOR_WEIGHTS = (0.0, 0.1, 0.2)
AUTO_NEIGHBOR_MAX_ROWS = 50_000
# The weights of the nearest-centroid rule that centroid_weight="auto" chooses from.
CENTROID_WEIGHTS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
# search="auto" tries the inverted-file index from this many labels on.
AUTO_IVF_LABELS = 100_000
# Up to this many features a linear encoder starts from the exact principal directions of the
# inputs (an eigendecomposition of a dense Gram matrix); beyond, from a random projection.
EXACT_PRINCIPAL_FEATURES = 4096
# Operations a second of a 2-core CPU: LAPACK's dense eigendecomposition runs near the peak of
# the cores, a training step far below it (sparse gathers, sorts and row updates).
DENSE_OPERATIONS_PER_SECOND = 2e10
STEP_OPERATIONS_PER_SECOND = 2e9

PAPER_RECIPE = "see the User Guide's recipe that reproduces the paper's setting"
CHOSEN_FROM_DATA = "it is chosen from the data"

# SNMClassifier's removed parameters, applied as given for one release: their former default
# ("auto": chosen from the data), their former constraints, and what to do instead.
_REMOVED = {
    "margin": (1.0, [Interval(Real, 0, None, closed="neither")], "pass a callable surrogate"),
    "power_exponent": (1.0, [Interval(Real, 0, None, closed="left")], PAPER_RECIPE),
    "weight_scale": ("normalized", [StrOptions({"normalized", "paper"})], PAPER_RECIPE),
    "encoder_init": ("auto", [StrOptions({"auto", "svd", "random"})], CHOSEN_FROM_DATA),
    "input_optimizer": (
        "auto",
        [StrOptions({"rowwise_adagrad", "sparse_adam", "adagrad", "sgd"})],
        CHOSEN_FROM_DATA,
    ),
    "input_learning_rate": (
        None,
        [Interval(Real, 0, None, closed="neither"), None],
        CHOSEN_FROM_DATA,
    ),
}
DEPRECATED_PARAMETERS = (
    DeprecatedParameter(
        "embedding_dim",
        renamed_to="n_components",
        fitted=(("embedding_dim_", "n_components_"),),
    ),
    *(
        DeprecatedParameter(name, default=default, instead=instead, constraints=constraints)
        for name, (default, constraints, instead) in _REMOVED.items()
    ),
)


class TrainingData(NamedTuple):
    """What the "auto" settings read of the training data.

    Attributes
    ----------
    n_rows : int
        Training rows (after the validation rows are held out).
    n_features : int
        Features of ``X``.
    n_labels : int
        Labels with a positive training example (the rows of the label table).
    nnz : int
        Non-zero entries of the training rows (``n_rows * n_features`` for a dense ``X``).
    sparse : bool
        Whether ``X`` is a scipy sparse matrix.
    counts : bool
        Whether every value of ``X`` is a non-negative integer (counts or indicators).
    nonnegative : bool
        Whether ``X`` has no negative value.
    validated : bool
        Whether validation rows are held out (``validation_fraction`` is not None).
    batch_size : int
        Rows a training step reads (over all processes of a data-parallel fit).
    """

    n_rows: int
    n_features: int
    n_labels: int
    nnz: int
    sparse: bool
    counts: bool
    nonnegative: bool
    validated: bool
    batch_size: int


def describe_training_data(X, n_rows, n_labels, validated, batch_size):
    """The :class:`TrainingData` of ``X`` (every row, before the validation split) when
    ``n_rows`` of its rows train and ``n_labels`` labels have a positive example."""
    values = X.data if sp.issparse(X) else X
    nonnegative = bool(values.min(initial=0) >= 0)
    counts = nonnegative and sp.issparse(X) and _integers(values)
    nnz = X.nnz if sp.issparse(X) else X.shape[0] * X.shape[1]
    return TrainingData(
        n_rows=int(n_rows),
        n_features=int(X.shape[1]),
        n_labels=int(n_labels),
        nnz=int(round(nnz * n_rows / max(X.shape[0], 1))),
        sparse=sp.issparse(X),
        counts=counts,
        nonnegative=nonnegative,
        validated=bool(validated),
        batch_size=int(batch_size),
    )


def _integers(values, block=2**20):
    """Whether every entry of the 1-D array ``values`` is an integer (read in blocks)."""
    return all(
        np.array_equal(part, np.floor(part))
        for part in (values[start : start + block] for start in range(0, values.size, block))
    )


class Settings(NamedTuple):
    """The resolved settings of a fit (see :func:`resolve_settings`)."""

    input_normalization: str | None
    sparse_input: bool
    input_dropout: float
    n_components: int
    encoder_init: str | None
    n_negatives: int
    negative_weights: np.ndarray
    label_optimizer: str
    label_learning_rate: float
    input_optimizer: str
    input_learning_rate: float
    neighbor_weights: tuple
    centroid_weights: tuple


def resolve_settings(parameters, data):
    """Every "auto" and None default of an SNMClassifier fit, from the data's shape.

    Parameters
    ----------
    parameters : dict
        The estimator's parameters (``get_params(deep=False)``, with the values of its
        deprecated parameters in effect), as given: each ``"auto"`` is resolved here.
    data : TrainingData
        The training data's summary (:func:`describe_training_data`).

    Returns
    -------
    settings : Settings
        ``input_normalization``: ``"auto"`` is ``"tfidf"`` for counts (``data.counts``, sparse)
        and a linear encoder, else None. ``sparse_input``: a sparse ``X`` of more than
        ``SPARSE_INPUT_MIN_FEATURES`` features. ``n_components``: ``"auto"`` is
        :func:`auto_n_components`. ``encoder_init``: the start of a linear encoder with
        ``label_init="centroid"`` (None otherwise): ``"identity"`` when the embedding holds
        every feature, ``"svd"`` when the principal directions cost less than an epoch,
        else ``"random"``. ``n_negatives`` and ``negative_weights``: at most ``n_labels - 1``
        negatives (``"auto"``: 1024), their weights by rank (top-``k'`` with ``k'`` 16, at
        most an eighth of them, for ``"auto"``). ``label_optimizer``: ``"auto"`` is row-wise
        Adagrad when an epoch reads a label row fewer than ``LABEL_REFERENCE_READS`` times
        on average, else Adagrad; ``label_learning_rate``: None is
        :func:`adagrad_label_rate` of those reads. ``input_dropout``: ``"auto"`` is 0 for a
        sparse input layer, ``DENSE_INPUT_DROPOUT`` for a dense one. ``input_optimizer`` and
        ``input_learning_rate``: the sparse input layer's (None without one), plain SGD at
        ``SPARSE_INPUT_SGD_RATE`` an example unless given. ``neighbor_weights`` and
        ``centroid_weights``: the candidates of
        the weights chosen on the validation rows (one weight when fixed, or without
        validation rows, or, for the votes, beyond ``AUTO_NEIGHBOR_MAX_ROWS`` training rows).
        ``search`` is resolved after training, by :func:`search_method`.
    """
    linear = not layer_sizes(parameters["hidden_layer_sizes"])
    normalization = parameters["input_normalization"]
    if normalization == "auto":
        normalization = "tfidf" if linear and data.sparse and data.counts else None
    if normalization == "tfidf" and not data.nonnegative:
        raise ValueError(
            "input_normalization='tfidf' needs non-negative features (counts or indicators); "
            "X has negative values. Use input_normalization='l2' or None."
        )
    sparse_input = data.sparse and data.n_features > SPARSE_INPUT_MIN_FEATURES
    input_dropout = parameters["input_dropout"]
    if input_dropout == "auto":
        input_dropout = 0.0 if sparse_input else DENSE_INPUT_DROPOUT
    label_optimizer, label_rate, n_negatives, weights = _label_settings(parameters, data)
    input_optimizer = parameters.get("input_optimizer", "auto")
    if input_optimizer == "auto":
        input_optimizer = "sgd"
    input_bytes = ROW_SPARSE_ENTRY_BYTES[input_optimizer] if sparse_input else DENSE_ENTRY_BYTES
    n_components = parameters["n_components"]
    if n_components == "auto":
        n_components = auto_n_components(
            data.n_features,
            data.n_labels,
            input_bytes,
            ROW_SPARSE_ENTRY_BYTES[label_optimizer],
            AUTO_MAX_SPARSE_COMPONENTS if sparse_input else AUTO_MAX_COMPONENTS,
        )
    encoder_init = None
    if linear and parameters["label_init"] == "centroid":
        encoder_init = parameters.get("encoder_init", "auto")
        if encoder_init == "auto":
            encoder_init = _auto_encoder_init(data, n_components, n_negatives)
        elif encoder_init == "svd" and data.n_features <= min(n_components, 2048):
            encoder_init = "identity"
    return Settings(
        input_normalization=normalization,
        sparse_input=sparse_input,
        input_dropout=float(input_dropout),
        n_components=int(n_components),
        encoder_init=encoder_init,
        n_negatives=n_negatives,
        negative_weights=weights,
        label_optimizer=label_optimizer,
        label_learning_rate=label_rate,
        input_optimizer=input_optimizer if sparse_input else None,
        input_learning_rate=(
            parameters.get("input_learning_rate") or _input_rate(input_optimizer, parameters, data)
        )
        if sparse_input
        else None,
        neighbor_weights=_neighbor_weights(parameters, data),
        centroid_weights=_centroid_weights(parameters, data),
    )


def _label_settings(parameters, data):
    """``(label_optimizer, label_learning_rate, n_negatives, negative_weights)``."""
    n_labels = data.n_labels
    requested = parameters["n_negatives"]
    if requested == "auto":
        requested = min(1024, n_labels - 1)
    top_k = parameters["top_k_negatives"]
    if top_k == "auto":
        top_k = min(16, max(1, requested // 8))
    if top_k > requested:
        raise ValueError(
            f"top_k_negatives={parameters['top_k_negatives']} exceeds n_negatives={requested}: "
            "SNM cannot mine more negatives than it samples."
        )
    _check_ramp(parameters)
    given = parameters["negative_weights"]
    user_weights = None if isinstance(given, str) else check_weight_vector(given, requested)
    n_negatives = min(requested, n_labels - 1)
    if n_negatives < requested:
        top_k = min(top_k, n_negatives)
        warnings.warn(
            f"n_negatives={parameters['n_negatives']} exceeds the {n_labels - 1} negative labels "
            "of each example (the labels with a positive example, minus one); using "
            f"n_negatives={n_negatives} and top_k_negatives={top_k}.",
            UserWarning,
            stacklevel=4,
        )
    weights = owl_weights(
        given if user_weights is None else user_weights[:n_negatives],
        n_negatives,
        top_k=top_k,
        exponent=parameters.get("power_exponent", 1.0),
        scale=parameters.get("weight_scale", "normalized"),
        n_labels=n_labels,
    )
    reads = label_reads_per_epoch(data.n_rows, n_labels, n_negatives, data.batch_size)
    optimizer = parameters["label_optimizer"]
    if optimizer == "auto":
        optimizer = "rowwise_adagrad" if reads < LABEL_REFERENCE_READS else "adagrad"
    rate = (
        parameters["label_learning_rate"]
        or {
            "adagrad": adagrad_label_rate(reads),
            "rowwise_adagrad": adagrad_label_rate(reads),
            "sparse_adam": parameters["learning_rate"],
            "sgd": 0.1 * parameters["batch_size"],
        }[optimizer]
    )
    return optimizer, rate, n_negatives, weights


def _input_rate(optimizer, parameters, data):
    """The sparse input layer's rate: SGD's ``SPARSE_INPUT_SGD_RATE`` an example (times the
    batch), Adagrad's ``SPARSE_INPUT_ADAGRAD_FACTOR`` times the network's ``learning_rate``,
    SparseAdam's that rate."""
    if optimizer == "sgd":
        return SPARSE_INPUT_SGD_RATE * data.batch_size
    if optimizer in ("rowwise_adagrad", "adagrad"):
        return SPARSE_INPUT_ADAGRAD_FACTOR * parameters["learning_rate"]
    return parameters["learning_rate"]


def _check_ramp(parameters):
    """The ramp is flat on errors (margins u <= 0): nothing there can be corrected."""
    loss, weights = parameters["loss"], parameters["negative_weights"]
    topk = isinstance(weights, str) and weights == "topk"
    if parameters["surrogate"] != "ramp" or not (loss == "bowl" or topk):
        return
    why = (
        "BOWL's errors are the negatives scored above 0, the only ones that matter, so it "
        "would learn from the positives alone"
        if loss == "bowl"
        else "the hardest sampled negatives outrank the positive for most examples until the "
        "model is trained"
    )
    raise ValueError(
        f"surrogate='ramp' cannot train with loss={loss!r} and negative_weights={weights!r}: "
        f"the ramp has no gradient on errors, and {why}. Use surrogate='ramp' with "
        "loss='powl' and negative_weights='uniform' or 'power', or another surrogate."
    )


def _neighbor_weights(parameters, data):
    weight = parameters["neighbor_weight"]
    if weight != "auto":
        return (float(weight),)
    if not data.validated or data.n_rows > AUTO_NEIGHBOR_MAX_ROWS:
        return (0.0,)
    return NEIGHBOR_WEIGHTS


def _centroid_weights(parameters, data):
    weight = parameters["centroid_weight"]
    if weight != "auto":
        return (float(weight),)
    if not data.validated or parameters["search"] in ("ivf", "faiss"):
        return (0.0,)
    return CENTROID_WEIGHTS


def search_method(search, *, fitted=None, n_labels=0, centroid_weight=0.0):
    """The top-k search of predictions, the parameter ``search`` resolved: the one place that
    resolves it, at the fit and at each prediction.

    Parameters
    ----------
    search : {"auto", "exact", "ivf", "faiss"}
        The parameter (which may be set after the fit).
    fitted : {"exact", "ivf", "faiss"} or None, default=None
        After the fit, ``search_``, what the fit resolved ``"auto"`` into; None at the fit.
    n_labels : int, default=0
        At the fit, the rows of the label table.
    centroid_weight : float, default=0.0
        At the fit, the weight of the nearest-centroid rule chosen (the rule is in no index).

    Returns
    -------
    method : {"exact", "ivf", "faiss"}
        ``search`` unless ``"auto"``. ``"auto"``: ``fitted`` after the fit; at the fit,
        ``"ivf"`` from ``AUTO_IVF_LABELS`` labels on, where faiss is installed and the
        nearest-centroid rule is off, else ``"exact"`` (the fit then keeps ``"ivf"`` only
        where the index's recall reaches 0.99: :meth:`~skrank.multilabel._label_search.
        LabelSearch.calibrate`).
    """
    if search != "auto":
        return search
    if fitted is not None:
        return fitted
    if n_labels < AUTO_IVF_LABELS or centroid_weight > 0:
        return "exact"
    return "ivf" if _label_search.faiss_available() else "exact"


def _auto_encoder_init(data, n_components, n_negatives):
    if data.n_features <= min(n_components, 2048):
        return "identity"  # every direction of the input space, found for free
    if data.n_features > EXACT_PRINCIPAL_FEATURES:
        return "random"
    principal = principal_seconds(data.n_features)
    epoch = epoch_seconds(data.n_rows, data.nnz, n_negatives, n_components)
    return "svd" if principal <= epoch else "random"


def auto_n_components(
    n_features, n_labels, input_bytes=16, label_bytes=12, most=AUTO_MAX_COMPONENTS
):
    """``n_components="auto"``: the number of features, at most ``most``
    (``AUTO_MAX_COMPONENTS``; ``AUTO_MAX_SPARSE_COMPONENTS`` for a sparse input layer) and at
    most what keeps the label table (``label_bytes`` an entry, with its optimiser's state and
    the copy of the best weights) and a linear encoder (``input_bytes`` an entry) within
    ``AUTO_COMPONENTS_BYTES``; at least ``AUTO_MIN_COMPONENTS``."""
    within_budget = AUTO_COMPONENTS_BYTES // (label_bytes * n_labels + input_bytes * n_features)
    return int(min(n_features, most, max(AUTO_MIN_COMPONENTS, within_budget)))


def principal_seconds(n_features):
    """Estimated time of the exact principal directions: the eigendecomposition of a
    ``p x p`` Gram matrix, about ``9 p^3`` operations (tridiagonal reduction and vectors)."""
    return 9 * n_features**3 / DENSE_OPERATIONS_PER_SECOND


def epoch_seconds(n_rows, nnz, n_negatives, n_components):
    """Estimated time of one training epoch: forward and backward passes (3 times 2
    operations a multiply-add) over each row's positive and sampled negatives and its
    non-zeros."""
    return 6 * n_components * (n_rows * (n_negatives + 1) + nnz) / STEP_OPERATIONS_PER_SECOND


def label_reads_per_epoch(n_rows, n_labels, n_negatives, batch_size):
    """Average number of times an epoch over ``n_rows`` reads a row of the label table: each
    step of ``batch_size`` rows samples ``n_negatives`` of the ``n_labels`` and reads
    ``batch_size`` positives."""
    return n_rows / batch_size * (n_negatives + batch_size) / n_labels


def adagrad_label_rate(reads):
    """Default Adagrad rate of label rows read ``reads`` times an epoch: ``LABEL_ADAGRAD_RATE``
    times ``sqrt(max(1, LABEL_REFERENCE_READS / reads))``. Adagrad moves a row by about
    ``rate * sqrt(reads)`` over its reads whatever the scale of its gradients, so rows read
    rarely (many labels, few sampled) get the larger rate that moves them as far an epoch."""
    return LABEL_ADAGRAD_RATE * math.sqrt(max(1.0, LABEL_REFERENCE_READS / reads))


def fit_input_weighting(X, normalization):
    """The weighting ``input_normalization_`` fits on the training rows ``X``: a
    ``TfidfTransformer(sublinear_tf=True)`` for ``"tfidf"``, else None."""
    if normalization == "tfidf":
        return TfidfTransformer(sublinear_tf=True).fit(X)
    return None


def weigh_inputs(X, normalization, transformer):
    """``X`` as the network reads it: TF-IDF weighted by ``transformer`` (of
    :func:`fit_input_weighting`), scaled to unit rows (``"l2"``), or as given."""
    if transformer is not None:
        transformed = transformer.transform(X)
        return transformed if sp.issparse(X) else transformed.toarray()
    return normalize(X) if normalization == "l2" else X


def training_rows(n_rows, validation_fraction):
    """Rows left to train on when ``validation_fraction`` of ``n_rows`` is held out (the test
    part of scikit-learn's ``train_test_split`` takes the ceiling)."""
    if validation_fraction is None:
        return n_rows
    return n_rows - int(np.ceil(validation_fraction * n_rows))
