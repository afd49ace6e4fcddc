"""SNMClassifier: top-k prediction over very large label sets by Stochastic Negative Mining."""

import math
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import ClassifierMixin
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data
from torch.nn import functional as F

from .._compat import Interval, StrOptions, _fit_context
from ..losses import OrderedWeightedLoss, owl_weights
from ..losses._owl import check_weight_vector
from ..metrics import FaissInnerProductIndex, FaissIVFIndex, top_k_inner_products
from ..metrics._labels import check_label_targets, mean_top_k_scores, top_k_hits
from ..metrics._search import _ordered_block_top_k, _weighted_sum_top_k, overlap_recall
from ..nn import (
    TORCH_ATTRIBUTE_DOCS,
    TORCH_INPUT_DOCS,
    TORCH_PARAMETER_CONSTRAINTS,
    TORCH_PARAMETER_DOCS,
    BaseTorchEstimator,
    EarlyStopping,
    RowSparseOptimizer,
    RowSubset,
    check_onnx_installed,
    current_context,
    dense_float32,
    export_module,
    layer_sizes,
    memory_mapped,
    resolve_device,
)
from ..sampling import NegativeLabelSampler, ShuffledBatchSampler
from ..sampling._labels import draw_from_positive_table, positive_table
from ..utils._docstrings import fill_shared_docs
from ..utils._labels import check_class_counts, encode_labels, values_outside_zero_one
from ..utils._memory import available_host_bytes, chunk_rows
from ..utils._params import ComponentParameters, parameters_for, store_parameters
from ..utils._validation import canonical_csr, check_float32_range, naming_inputs
from ._centroids import centroid_similarities, input_centroids
from ._label_embedding import (
    EXACT_PRINCIPAL_FEATURES,
    LabelEmbeddingNetwork,
    LabelScores,
    label_centroids,
    principal_input_directions,
    random_input_directions,
)
from ._neighbors import blend_dense, blended_top_k, neighbor_votes

__all__ = ["SNMClassifier"]

# The weights of the neighbours' votes that neighbor_weight="auto" chooses from.
NEIGHBOR_WEIGHTS = (0.0, 0.1, 0.2)
# Beyond this many training rows neighbor_weight="auto" leaves the votes off: their exact search
# would cost each prediction more than scoring as many labels.
AUTO_NEIGHBOR_MAX_ROWS = 50_000
# The weights of the nearest-centroid rule that centroid_weight="auto" chooses from.
CENTROID_WEIGHTS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
# search="auto" uses the inverted-file index from this many labels on, where its recall of the
# exact top-k on up to SEARCH_SAMPLE_ROWS sample rows reaches SEARCH_RECALL_TARGET.
AUTO_IVF_LABELS = 100_000
SEARCH_SAMPLE_ROWS = 1000
SEARCH_RECALL_TARGET = 0.99
# The score of the labels without a training example (not in the label table): the lowest
# float32, below every label the model scores, and finite, as scikit-learn's metrics need.
UNTRAINED_LABEL_SCORE = float(np.finfo(np.float32).min)
# The score early stopping reads after each epoch: Precision@score_k on at most this many of
# the validation rows (all of them choose the votes' and centroids' weights after training),
# so that an epoch's monitor costs the same at 10^4 validation rows as at 10^6.
VALIDATION_SCORE_MAX_ROWS = 2048
# Sparse X with more features than this trains a sparse input layer (the rows a batch reads);
# below, the dense layer and its optimiser cost little and keep the published results.
SPARSE_INPUT_MIN_FEATURES = 4096

# Learning rate of the sparse input layer with input_optimizer="rowwise_adagrad" (validated on
# the generated AmazonCat-13K rows: see the User Guide).
INPUT_ROWWISE_ADAGRAD_RATE = 0.03
# The Adagrad rate of label rows read at least LABEL_REFERENCE_READS times an epoch, chosen on
# validation splits of Bibtex, Corel5k and the generated AmazonCat-13K rows (see
# _adagrad_label_rate for rarer rows).
LABEL_ADAGRAD_RATE = 0.005
LABEL_REFERENCE_READS = 16
# Bytes an entry of a table updated by RowSparseOptimizer takes: the weight and the copy of
# the best weights (4 bytes each), and the optimiser's state (Adagrad one number an entry, lazy
# Adam two; row-wise Adagrad one a row, SGD none).
_ROW_SPARSE_ENTRY_BYTES = {"rowwise_adagrad": 8, "sgd": 8, "adagrad": 12, "sparse_adam": 16}
# Bytes that embedding_dim="auto" allows the parameters and their optimiser states per fit.
AUTO_EMBEDDING_BYTES = 2**30

_SURROGATE_NAMES = {"hinge", "logistic", "squared_hinge", "exponential", "ramp"}
# Surrogates applied to the unscaled scores (see the ``score_scale`` entry of the docstring).
_UNSCALED_SURROGATES = {"squared_hinge", "exponential", "ramp"}


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
    of labels ``K``; predictions are computed in chunks and never hold an ``n x K`` matrix.

    The negatives of a mini-batch are one shared sample, each example's own positive labels
    masked; every example still gets ``n_negatives`` negatives drawn uniformly from its
    non-positive labels (see :class:`~skrank.losses.NegativeLabelSampler`). With multilabel
    targets, each epoch pairs every example with one of its positive labels drawn uniformly (the
    paper's protocol), and all its positive labels are excluded from its negatives.

    Read more in the :ref:`User Guide <snm>`.

    Parameters
    ----------
    loss : {"bowl", "powl"}, default="bowl"
        Binary (``phi(v_y) + sum_j w_j phi(-v_[j])``) or pairwise
        (``sum_j w_j phi(v_y - v_[j])``) ordered weighted loss.
    surrogate : {"hinge", "logistic", "squared_hinge", "exponential", "ramp"} or callable, \
default="hinge"
        Surrogate ``phi`` of the 0-1 loss (see :func:`skrank.losses.get_surrogate`).
    margin : float, default=1.0
        Margin of the ramp surrogate, in units of the unscaled scores (see ``score_scale``).
        The ramp has no gradient on errors (margins ``u <= 0``), so it trains only with
        ``loss="powl"`` and ``negative_weights`` ``"uniform"``, ``"power"`` or an array (a
        ``ValueError`` otherwise): with BOWL the negatives it cannot correct are those scored
        above 0, the only ones that matter; with top-k weights the hardest sampled negatives
        outrank the positive for most examples until the model is trained.
    n_negatives : int or "auto", default="auto"
        Number ``B`` of negative labels sampled per step, among the ``K`` labels with a
        training example (``trained_labels_``). ``"auto"``: ``min(1024, K - 1)``. Values
        above ``K - 1`` are clamped to ``K - 1`` with a ``UserWarning`` (``n_negatives_``
        holds the value used).
    top_k_negatives : int or "auto", default="auto"
        Number ``k'`` of hardest sampled negatives weighed by ``"topk"`` (and the ``k'`` of the
        paper's scaling); at most ``n_negatives``. ``"auto"``: 16, at most an eighth of
        ``n_negatives_`` (at least 1); chosen on validation splits of Bibtex and Corel5k, where
        the 16 hardest of all the other labels were level with or ahead of the 8, 32 and 64
        hardest (see the User Guide).
    negative_weights : {"topk", "uniform", "power"} or array-like, default="topk"
        Weights by rank of the sorted sampled negatives (:func:`skrank.losses.owl_weights`):
        top-k' SNM, negative sampling, a power law ``j ** -power_exponent``, or an array of
        ``n_negatives`` non-negative, non-increasing weights.
    power_exponent : float, default=1.0
        Exponent of ``negative_weights="power"``.
    weight_scale : {"normalized", "paper"}, default="normalized"
        ``"normalized"``: weights sum to 1. ``"paper"``: largest weight ``(K - 1)/(k' B)``, the
        scaling of the paper's theory.
    input_normalization : {"auto", "tfidf", "l2"} or None, default="auto"
        What the network reads: ``"tfidf"``, the features reweighted by their inverse document
        frequency in the training rows, ``1 + log`` of positive values, rows scaled to unit
        norm (scikit-learn's ``TfidfTransformer(sublinear_tf=True)``; needs non-negative
        features: counts or indicators); ``"l2"``, rows scaled to unit norm; None, the
        features as given. ``"auto"``: ``"tfidf"`` for a sparse ``X`` without negative values
        (bag-of-words-like data, as in extreme classification) and a linear encoder
        (``hidden_layer_sizes=()``), None otherwise (TF-IDF rows have unit norm, far below the
        scale of counts, and a ReLU network at the default learning rate did not learn from
        them within the few epochs of the Bibtex gallery example); ``input_normalization_``
        holds the choice. On validation splits of Bibtex and the generator's data TF-IDF
        raised P@1 (see the User Guide).
    label_init : {"centroid", "random"}, default="centroid"
        Initial model: ``"centroid"`` starts each label embedding at the mean of the input
        embeddings of its training examples (labels without a training example start at
        random); with a linear encoder (``hidden_layer_sizes=()``) the encoder also starts as
        a projection of the inputs (``encoder_init``), so that the model starts as (close to)
        the nearest-centroid rule of the input space; early stopping then scores this start
        too and, if no epoch beats it on the validation rows, keeps it, rebuilt from all the
        training rows. ``"random"``: Gaussian label rows and encoder.
    encoder_init : {"auto", "svd", "random"}, default="auto"
        The projection a linear encoder starts as, with ``label_init="centroid"``:
        ``"svd"``, onto the ``embedding_dim`` principal directions of the (normalised)
        training inputs and their label centroids (the Gram matrix's eigenvectors up to 4,096
        features, a randomised SVD beyond; the identity, exactly the input space, when
        ``embedding_dim`` reaches the number of features, at most 2048);
        ``"random"``, a Gaussian random projection, which preserves inner products up to a
        distortion of order ``1/sqrt(embedding_dim)`` and costs no pass over the data.
        ``"auto"``: the identity where it applies, else ``"svd"`` when its estimated cost is
        below that of one training epoch, else ``"random"`` (``encoder_init_`` holds the
        choice); chosen on validation splits (see the User Guide).
    label_optimizer : {"auto", "adagrad", "rowwise_adagrad", "sparse_adam", "sgd"}, \
default="auto"
        Optimiser of the label table (:class:`~skrank.nn.RowSparseOptimizer`); all update only
        the rows read by a step (plain SGD without momentum, as momentum would have to decay
        every row it ever touched). ``"auto"``: row-wise Adagrad (one accumulator a label
        row, ``8 K d`` bytes with the table and the copy of the best weights instead of
        Adagrad's ``12 K d``) when an epoch reads a label row fewer than 16 times on average
        (``r = (n / b) (B + b) / K`` for ``n`` training rows, batches of ``b``, ``B``
        sampled negatives and ``K`` labels with a training example: many labels, few
        sampled), else Adagrad, whose per-coordinate steps suit rows read often;
        ``label_optimizer_`` holds the choice.
        Chosen on validation splits: on the generated WikiLSHTC-325K and Amazon-670K rows
        (``r`` about 1.4 and 0.2 with a table of every label) row-wise Adagrad reached a
        higher Precision@1 than Adagrad at the same rate and dimension, on Corel5k (``r``
        about 27) a lower one (see the User Guide).
    label_learning_rate : float or None, default=None
        Learning rate of the label table. None: for Adagrad and row-wise Adagrad,
        ``0.005 * sqrt(max(1, 16 / r))`` (Adagrad moves a row by about
        ``rate * sqrt(reads)``, so rarely read rows get the rate that moves them as far an
        epoch as rows read 16 times; 0.005 on Bibtex and Corel5k, about 0.009 and 0.014 on the
        generated WikiLSHTC-325K and Amazon-670K rows); ``learning_rate`` for SparseAdam; and
        ``0.1 * batch_size`` for SGD (the loss is a batch mean, so a label row read by a
        single example gets ``1 / batch_size`` of its gradient: plain SGD needs the paper's
        "large learning rate"). ``label_learning_rate_`` holds the rate used.
    input_optimizer : {"rowwise_adagrad", "adagrad", "sparse_adam", "sgd"}, \
default="rowwise_adagrad"
        Optimiser of the sparse input layer (``sparse_input_``; the other layers follow
        ``optimizer``), through :class:`~skrank.nn.RowSparseOptimizer`: a step updates only the
        rows of the features present in its batch. Row-wise Adagrad keeps one number a feature
        (Adagrad one a weight, lazy Adam two), so the layer and its state take ``4 p d`` bytes
        instead of ``8 p d`` or ``12 p d`` (``p`` features, ``d`` dimensions), and its step
        reads and writes each row once; chosen on validation splits of the generated
        AmazonCat-13K rows, where it also reached a higher Precision@1 sooner than lazy Adam
        (see the User Guide).
    input_learning_rate : float or None, default=None
        Learning rate of the sparse input layer. None: 0.03 for row-wise Adagrad, 0.005 for
        Adagrad, and ``learning_rate`` for SparseAdam and SGD.
    score_k : int, default=1
        The ``k`` of :meth:`score` and of the validation score that early stopping monitors
        (both Precision@k), and of multilabel :meth:`predict`.
    search : {"auto", "exact", "ivf", "faiss"}, default="auto"
        Top-k search over the label table at prediction: ``"exact"``, a chunked scan;
        ``"ivf"``, faiss inverted lists (:class:`~skrank.metrics.FaissIVFIndex`, the ``ann``
        extra: k-means cells of the label vectors, the fewest cells probed whose recall of the
        exact top ``max(5, score_k)`` reaches 0.99 on up to 1,000 rows of the validation
        split, or of the training rows); ``"faiss"``, an HNSW graph
        (:class:`~skrank.metrics.FaissInnerProductIndex`). ``"auto"``: ``"ivf"`` from 100,000
        labels on when faiss is installed, that recall reaches 0.99 and the nearest-centroid
        rule is off (``centroid_weight_`` 0: no index holds it), else ``"exact"``
        (``search_`` holds the choice and ``search_recall_`` the recall measured). The search
        may also be set after the fit (a prediction-time choice; an index search with the
        centroid rule on raises a ``ValueError``).
    n_neighbors : int, default=10
        Number of nearest training rows whose labels vote at prediction (see
        ``neighbor_weight``).
    neighbor_weight : float in [0, 1] or "auto", default="auto"
        Weight ``a`` of the neighbours' label votes in the prediction scores
        ``(1 - a) v_y(x) + a s vote_y(x)`` (the prediction rule of SLEEC and AnnexML, mixed
        with the label scores, the nearest-centroid rule included: see ``centroid_weight``):
        ``vote_y(x)`` is the share of the cosine similarities of the
        ``n_neighbors`` training rows nearest to ``x`` in the learned input embedding held by
        those with label ``y`` (non-positive similarities count 0), and ``s`` the score scale.
        ``"auto"``: the weight among 0, 0.1 and 0.2 with the best Precision@``score_k`` on the
        validation rows (``validation_fraction``; the other training rows voting; the smaller
        weight among ties; 0 without validation rows, and 0 beyond
        ``50,000`` training rows, where the exact search of every prediction over the training
        rows would cost as much as scoring 50,000 labels); ``neighbor_weight_`` holds the weight
        used. Chosen on validation splits of Bibtex and Corel5k, where it chose 0 on Bibtex
        (fixed weights lost there) and mostly 0.1 or 0.2 on Corel5k, where votes gained (see
        the User Guide). 0 turns the votes off. Training is unchanged (so is early stopping,
        which scores the label scores alone). With votes on, the fit keeps the unit
        embeddings of every training row, ``4 n d`` bytes for ``n`` rows and ``d``
        dimensions (20 MB for Bibtex's 4,880 rows and 1,024 dimensions), and each prediction
        searches them exactly, in chunks. The top-k search stays exact with
        ``search="exact"``: the votes are non-negative, so the blended top-k lies among the
        label scores' own top-k and the neighbours' labels.
    centroid_weight : float >= 0 or "auto", default="auto"
        Weight ``b`` of the input space's nearest-centroid rule added to the label scores at
        prediction, ``v_y(x) + b s cos(x, c_y)``, before the neighbours' votes blend with them
        (``(1 - a) (v_y(x) + b s cos(x, c_y)) + a s vote_y(x)``): ``x`` is the input row as
        given (before ``input_normalization``), ``c_y`` the centroid of label ``y`` (the sum of
        its training rows scaled to unit norm, itself scaled to unit norm: the Rocchio
        classifier, PECOS's PIFA label representation) and ``s`` the score scale.
        ``"auto"``: the weight among 0, 1, 2, 4, 8, 16, 32 and 64 with the best
        Precision@``score_k`` on the validation rows (the centroids of the other training rows;
        the neighbours' votes blended in at ``neighbor_weight_``; the smaller weight among
        ties); 0 without validation rows and with ``search="ivf"`` or ``"faiss"`` (the
        input-space term is in no index of the label table: predictions with it scan every
        label exactly, and an index search is refused). Chosen on validation splits of
        Bibtex, Corel5k and the generated AmazonCat-13K and WikiLSHTC-325K rows: the blend
        gained on Bibtex (at weight 2) and on the generated rows (4-8), where the rows as given
        beat the TF-IDF rows the network reads, and lost at every weight on Corel5k, where
        ``"auto"`` keeps 0 (see the User Guide). 0 turns it off;
        training is unchanged (so is early stopping, which scores the label scores alone).
        With it on, the fit keeps the centroids (``centroids_``, sparse: at most as many
        entries as the training rows' non-zeros times their labels), and each prediction
        adds their cosines in chunks of rows.
    {component_parameters}
    {shared_parameters}

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        Labels (multilabel: ``arange(n_labels)``, the columns of the indicator matrix).
    trained_labels_ : ndarray of int of shape (n_trained_labels,)
        Indices into ``classes_`` of the labels with a positive training example: the rows
        of the label table. The others (all-zero columns of a multilabel ``y``, e.g. labels
        of a catalogue that the training rows never use) take no memory, are never sampled as
        negatives, and score ``-3.4e38`` (the lowest float32) in every prediction.
    n_negatives_ : int
        Number of sampled negatives used (``n_negatives`` clamped to one less than the
        labels with a training example).
    negative_weights_ : ndarray of length ``n_negatives_``
        Weights by rank used by the loss.
    module_ : LabelEmbeddingNetwork
        The trained network and label table.
    criterion_ : OrderedWeightedLoss
        The loss.
    {shared_attributes}
    n_features_in_ : int
        Number of input features.
    embedding_dim_ : int
        The embedding dimension used (``"auto"`` resolved).
    sparse_input_ : bool
        Whether the network reads sparse inputs through a sparse first layer (a sparse ``X``
        of more than 4,096 features at fit; below, the dense layer costs little): it reads
        and updates only the weights of the features present in a batch, so that a step costs
        ``O(nnz x embedding_dim)`` whatever the number of features
        (:class:`~skrank.nn.SparseLinear`, updated by ``input_optimizer`` through
        :class:`~skrank.nn.RowSparseOptimizer`).
    encoder_init_ : {"svd", "random"} or None
        The ``encoder_init`` used (``"auto"`` resolved; None without a linear encoder started
        at the centroids).
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
    neighbor_weight_ : float
        The weight of the neighbours' votes used (``"auto"`` resolved).
    neighbor_embeddings_ : ndarray of shape (n_training_rows, n_dimensions), float32 or None
        Unit input embeddings (``embedding_dim_`` dimensions) of the training rows whose labels
        vote at prediction (None when ``neighbor_weight_`` is 0).
    centroid_weight_ : float
        The weight of the nearest-centroid rule used (``"auto"`` resolved).
    centroids_ : scipy.sparse.csc_matrix of shape (n_trained_labels, `n_features_in_`), \
float32 or None
        The unit centroids of the labels of the label table (``trained_labels_``), from every
        training row as given (None when ``centroid_weight_`` is 0).

    Examples
    --------
    >>> import numpy as np
    >>> from skrank import SNMClassifier
    >>> rng = np.random.RandomState(0)
    >>> centers = rng.normal(size=(50, 10))
    >>> y = np.arange(500) % 50
    >>> X = centers[y] + 0.1 * rng.normal(size=(500, 10))
    >>> clf = SNMClassifier(n_negatives=16, embedding_dim=16, hidden_layer_sizes=(32,),
    ...                     max_epochs=20, learning_rate=1e-2, random_state=0).fit(X, y)
    >>> clf.predict_top_k(X[:2], k=3).shape
    (2, 3)
    >>> clf.score(X, y) > 0.9
    True
    """

    _parameter_constraints = {
        **TORCH_PARAMETER_CONSTRAINTS,
        "loss": [StrOptions({"bowl", "powl"})],
        "surrogate": [StrOptions(_SURROGATE_NAMES), callable],
        "margin": [Interval(Real, 0, None, closed="neither")],
        "n_negatives": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "top_k_negatives": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "negative_weights": [StrOptions({"topk", "uniform", "power"}), "array-like"],
        "power_exponent": [Interval(Real, 0, None, closed="left")],
        "weight_scale": [StrOptions({"normalized", "paper"})],
        "embedding_dim": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions({"relu", "gelu", "tanh", "leaky_relu"})],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "input_dropout": [Interval(Real, 0, 1, closed="left")],
        "scores": [StrOptions({"cosine", "dot"})],
        "score_scale": [Interval(Real, 0, None, closed="neither")],
        "learn_score_scale": ["boolean"],
        "input_normalization": [StrOptions({"auto", "tfidf", "l2"}), None],
        "label_init": [StrOptions({"centroid", "random"})],
        "encoder_init": [StrOptions({"auto", "svd", "random"})],
        "label_optimizer": [
            StrOptions({"auto", "adagrad", "rowwise_adagrad", "sparse_adam", "sgd"})
        ],
        "label_learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "input_optimizer": [StrOptions({"rowwise_adagrad", "sparse_adam", "adagrad", "sgd"})],
        "input_learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "score_k": [Interval(Integral, 1, None, closed="left")],
        "search": [StrOptions({"auto", "exact", "faiss", "ivf"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "neighbor_weight": [Interval(Real, 0, 1, closed="both"), StrOptions({"auto"})],
        "centroid_weight": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
    }

    component_parameters = ComponentParameters(
        LabelEmbeddingNetwork,
        ("embedding_dim", "hidden_layer_sizes", "activation", "dropout", "input_dropout")
        + ("scores", "score_scale", "learn_score_scale"),
        defaults={
            "embedding_dim": "auto",
            "hidden_layer_sizes": (),
            "input_dropout": 0.2,
            "score_scale": 10.0,
            "learn_score_scale": True,
        },
        types={"embedding_dim": 'int or "auto"'},
        notes={
            "embedding_dim": '``"auto"``: the number of features, at most 1024 '
            "(``embedding_dim_`` holds the value used), so that a linear encoder can start as "
            "the exact input-space centroid rule (see ``label_init``), and at most what keeps "
            "the parameters, their optimiser states and the copy of the best weights within "
            "1 GiB: the label table, its state and its copy take ``12 K d`` bytes with Adagrad "
            "and ``8 K d`` with row-wise Adagrad (see ``label_optimizer``), a linear encoder "
            "with its state and copy ``8 p d`` bytes (``p`` features; the sparse input layer's "
            "row-wise Adagrad) or ``16 p d`` (Adam's moments), so, e.g., "
            "``d <= 2^30 / (8 K + 8 p)``, but at least 16 (``d = 107`` for a million labels "
            "and 250,000 sparse features).",
            "hidden_layer_sizes": "``()``, a linear map to the embedding, is what generalises on "
            "sparse data with few examples per label (the paper's network memorises such data).",
            "input_dropout": "Weight decay does not regularise cosine scores, which ignore the "
            "scale of the weights.",
            "score_scale": "Cosines alone lie in [-1, 1], too narrow for the margins of the "
            "surrogates: a margin loss on them cannot separate the labels (``score_scale=1`` with "
            "``learn_score_scale=False`` is the paper's unscaled model). The scale applies to the "
            "hinge and logistic surrogates, whose slopes are bounded by 1. The squared hinge, "
            "exponential and ramp surrogates see the unscaled scores (cosines, or raw inner "
            "products): the slopes of the first two grow with the violation, so on scaled scores "
            "the worst examples get gradients up to ``2 (1 + 2 s)`` (squared hinge) or "
            "``exp(2 s)`` (exponential) times those of the others, a few outliers drive every "
            "step and training collapses; and a growing scale would make the ramp, flat beyond "
            "its margin, flat everywhere.",
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
        margin=1.0,
        n_negatives="auto",
        top_k_negatives="auto",
        negative_weights="topk",
        power_exponent=1.0,
        weight_scale="normalized",
        *,
        input_normalization="auto",
        label_init="centroid",
        encoder_init="auto",
        label_optimizer="auto",
        label_learning_rate=None,
        input_optimizer="rowwise_adagrad",
        input_learning_rate=None,
        score_k=1,
        search="auto",
        n_neighbors=10,
        neighbor_weight="auto",
        centroid_weight="auto",
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
        with naming_inputs("X", "y"):
            X, y = validate_data(
                self,
                X,
                y,
                accept_sparse="csr",
                dtype=(np.float64, np.float32),
                multi_output=True,
                reset=not self.warm_starting(),
            )
        check_float32_range(X, estimator="SNMClassifier")
        rows = X  # as given: the space of the nearest-centroid rule
        X = self._normalize_inputs(X, fitting=True)
        classes, positives, self._multilabel_output = _encode_targets(y)
        self.set_classes(classes)
        if self.score_k > len(classes):
            raise ValueError(f"score_k={self.score_k} exceeds the number of labels {len(classes)}.")
        X, positives, rows = _drop_rows_without_positives(X, positives, rows)
        continuing = self.warm_start and hasattr(self, "embedding_dim_")
        positives = self._table_positives(positives, continuing)
        n_table = positives.shape[1]
        self._check_label_parameters(n_table)
        X_train, y_train, validation, rows_train, rows_validation = self._split_with_rows(
            X, positives, rows
        )
        reads = _label_reads_per_epoch(
            X_train.shape[0],
            n_table,
            self.n_negatives_,
            self.batch_size * current_context(resolve_device(self.device)).world_size,
        )
        # label_optimizer_ is absent from the fits of earlier versions.
        if not (continuing and hasattr(self, "label_optimizer_")):
            self.label_optimizer_ = self.label_optimizer
            if self.label_optimizer == "auto":
                self.label_optimizer_ = (
                    "rowwise_adagrad" if reads < LABEL_REFERENCE_READS else "adagrad"
                )
        if not continuing:
            self.sparse_input_ = sp.issparse(X) and X.shape[1] > SPARSE_INPUT_MIN_FEATURES
            self.embedding_dim_ = (
                _auto_embedding_dim(
                    X.shape[1], n_table, self._input_bytes_per_weight(), self._label_bytes()
                )
                if self.embedding_dim == "auto"
                else self.embedding_dim
            )
        self.label_learning_rate_ = (
            self.label_learning_rate
            or {
                "adagrad": _adagrad_label_rate(reads),
                "rowwise_adagrad": _adagrad_label_rate(reads),
                "sparse_adam": self.learning_rate,
                "sgd": 0.1 * self.batch_size,
            }[self.label_optimizer_]
        )
        self._check_search_parameters()
        self.neighbor_embeddings_ = self._neighbor_labels = self.centroids_ = None
        self.neighbor_weight_ = self.centroid_weight_ = 0.0
        self.fit_loop(X_train, y_train, validation)
        # The blend's weights are chosen on the model the validation rows did not shape.
        self.neighbor_weight_, self.centroid_weight_ = self._choose_blend_weights(
            X_train, y_train, validation, rows_train, rows_validation
        )
        if validation is not None and self._kept_start():
            # No epoch beat the start: rebuild it from every training row (the validation
            # rows included), with the seed the first one had.
            device = next(self.module_.parameters()).device
            with torch.random.fork_rng():
                torch.manual_seed(int(self.shared_random_state().randint(np.iinfo(np.int32).max)))
                self.module_ = self.initialize_module(X.shape[1])
                self.initialize_weights(X, positives)
            self.module_ = self.module_.to(device).eval()
            self.optimizers_ = self.initialize_optimizers()  # on the new parameters
        if self.neighbor_weight_ > 0:
            self._store_neighbors(X, positives)
        if self.centroid_weight_ > 0:
            self.centroids_ = input_centroids(rows, positives)
        self._prepare_search(X if validation is None else validation[0])
        return self

    def _split_with_rows(self, X, positives, rows):
        """:meth:`split_validation` of ``(X, positives)``, and the same split of ``rows``
        (the inputs as given; ``X`` itself without ``input_normalization``, never copied
        twice): ``(X_train, y_train, validation, rows_train, rows_validation)``."""
        if rows is X:
            X_train, y_train, validation = self.split_validation(X, positives)
            return X_train, y_train, validation, X_train, validation and validation[0]
        X_train, parts, validation = self.split_validation(X, _RowsAlike(positives, rows))
        y_train, rows_train = parts.arrays
        if validation is None:
            return X_train, y_train, None, rows_train, None
        (y_val, rows_validation) = validation[1].arrays
        return X_train, y_train, (validation[0], y_val), rows_train, rows_validation

    def _table_positives(self, positives, continuing):
        """The columns of ``positives`` that the label table holds, ``trained_labels_``: the
        labels with a positive example (a warm start keeps the previous fit's)."""
        counts = np.bincount(positives.indices, minlength=positives.shape[1])
        check_class_counts(counts, positives=False, needed_by="SNMClassifier")
        if continuing:
            self.trained_labels_ = self._trained_labels()
            outside = np.setdiff1d(np.flatnonzero(counts), self.trained_labels_)
            if outside.size:
                raise ValueError(
                    f"warm_start=True continues the label table of the previous fit, which holds "
                    f"the labels that had a positive example; y has positives for "
                    f"{outside.size} other labels (e.g. column {outside[0]}). Fit again with "
                    "warm_start=False to learn them."
                )
        else:
            self.trained_labels_ = np.flatnonzero(counts)
        if len(self.trained_labels_) == positives.shape[1]:
            return positives
        return positives[:, self.trained_labels_]

    def _trained_labels(self):
        """``trained_labels_``; every label for fits saved before the attribute existed."""
        trained = getattr(self, "trained_labels_", None)
        return np.arange(len(self.classes_)) if trained is None else trained

    def _table_size(self):
        """Rows of the label table: the labels with a positive training example."""
        return len(self._trained_labels())

    def _choose_blend_weights(self, X_train, y_train, validation, rows_train, rows_validation):
        """``(neighbor_weight_, centroid_weight_)``: each parameter as given, or for ``"auto"``
        its weight with the best Precision@``score_k`` on the validation rows, the training
        rows voting and giving the centroids (ties go to the smaller weight).

        ``neighbor_weight``'s is chosen from ``NEIGHBOR_WEIGHTS`` without the nearest-centroid
        rule (0 without validation rows or beyond ``AUTO_NEIGHBOR_MAX_ROWS`` training rows),
        then ``centroid_weight``'s from ``CENTROID_WEIGHTS`` with the votes at the chosen weight
        (0 without validation rows or with an approximate search). One pass over the
        validation rows serves both: their label scores, votes and cosines are computed once.
        ``rows_train`` and ``rows_validation``: the rows as given, before
        ``input_normalization``.
        """
        neighbor_weights = self._neighbor_weight_choices(X_train, validation)
        centroid_weights = self._centroid_weight_choices(validation)
        if len(neighbor_weights) == 1 and len(centroid_weights) == 1:
            return neighbor_weights[0], centroid_weights[0]
        X_val, y_val = validation
        if any(neighbor_weights):
            self._store_neighbors(X_train, y_train)
        # The votes' weight is compared without the centroids: a fixed centroid_weight is left out.
        scored_weights = centroid_weights if len(centroid_weights) > 1 else (0.0,)
        if len(scored_weights) > 1:
            self.centroids_ = input_centroids(rows_train, y_train)
        k = min(self.score_k, self._table_size())
        embeddings = self.forward(X_val, as_numpy=True)  # once, for the label scores and the votes
        labels = {(a, b): [] for a in neighbor_weights for b in scored_weights}
        for scores, similarities, votes in self._score_chunks(rows_validation, embeddings):
            for a in neighbor_weights:
                base, term = self._blend_parts(scores, similarities, votes, a)
                chunk_top = (
                    [_ordered_block_top_k(base, k)]
                    if term is None
                    else _weighted_sum_top_k(base, term, scored_weights, k)
                )
                for b, (_, chunk_labels) in zip(scored_weights, chunk_top, strict=True):
                    labels[a, b].append(chunk_labels.cpu())
                del base, term  # before the next weight's blocks are made
        top = {key: torch.cat(parts).numpy() for key, parts in labels.items()}
        neighbor_weight = _best_weight(
            neighbor_weights, [top[a, 0.0] for a in neighbor_weights], y_val
        )
        centroid_weight = (
            centroid_weights[0]
            if len(scored_weights) == 1
            else _best_weight(
                scored_weights, [top[neighbor_weight, b] for b in scored_weights], y_val
            )
        )
        self.neighbor_embeddings_ = self._neighbor_labels = self.centroids_ = None
        return neighbor_weight, centroid_weight

    def _neighbor_weight_choices(self, X_train, validation):
        """The weights of the votes to choose from: ``NEIGHBOR_WEIGHTS`` for ``"auto"`` with
        validation rows and at most ``AUTO_NEIGHBOR_MAX_ROWS`` training rows, else the one
        weight."""
        if self.neighbor_weight != "auto":
            return (float(self.neighbor_weight),)
        if validation is None or X_train.shape[0] > AUTO_NEIGHBOR_MAX_ROWS:
            return (0.0,)
        return NEIGHBOR_WEIGHTS

    def _centroid_weight_choices(self, validation):
        """The weights of the nearest-centroid rule to choose from: ``CENTROID_WEIGHTS`` for
        ``"auto"`` with validation rows and an exact search, else the one weight."""
        if self.centroid_weight != "auto":
            return (float(self.centroid_weight),)
        if validation is None or self.search in ("ivf", "faiss"):
            return (0.0,)
        return CENTROID_WEIGHTS

    def _check_search_parameters(self):
        """Refuse a fixed nearest-centroid weight with an approximate search of the labels."""
        if self.centroid_weight != "auto" and self.centroid_weight > 0:
            self._check_search_with_centroids(self.search, "centroid_weight")

    def _check_search_with_centroids(self, search, weight):
        if search in ("ivf", "faiss"):
            raise ValueError(
                f"search={search!r} searches an index of the label table, which the "
                f"nearest-centroid rule of the input space (here {weight}="
                f"{getattr(self, weight)!r}) is not in: predictions with it scan every label "
                "exactly. Use search='exact' or 'auto', or centroid_weight=0."
            )

    def _uses_centroids(self):
        return getattr(self, "centroids_", None) is not None

    def _store_neighbors(self, X, positives):
        """Keep the unit input embeddings and the labels of the training rows (all of them)."""
        self.neighbor_embeddings_ = F.normalize(self.forward(X), dim=1).cpu().numpy()
        table, counts = positive_table(positives, positives.shape[1])
        self._neighbor_labels = (table.numpy(), counts.numpy())

    def _neighbor_keys(self, device):
        """The voting rows' unit embeddings, label table and label counts, on ``device``."""
        arrays = (self.neighbor_embeddings_, *self._neighbor_labels)
        return tuple(torch.from_numpy(array).to(device) for array in arrays)

    def _neighbor_votes(self, embeddings, keys):
        """Sparse (n, K) label votes of the training rows nearest to ``embeddings``; ``keys``
        from :meth:`_neighbor_keys` (moved to the device once per prediction, not per chunk)."""
        return neighbor_votes(embeddings, *keys, self.n_neighbors, self._table_size())

    def _uses_neighbors(self):
        return getattr(self, "neighbor_embeddings_", None) is not None

    def _kept_start(self):
        """Whether early stopping kept the untrained model (no epoch beat it)."""
        return any(getattr(c, "kept_start", False) for c in self.callbacks_)

    def _check_label_parameters(self, n_labels):
        """Set ``n_negatives_`` and ``negative_weights_`` after checking them against the
        ``n_labels`` of the label table."""
        requested = min(1024, n_labels - 1) if self.n_negatives == "auto" else self.n_negatives
        top_k = self.top_k_negatives
        if top_k == "auto":
            top_k = min(16, max(1, requested // 8))
        if top_k > requested:
            raise ValueError(
                f"top_k_negatives={self.top_k_negatives} exceeds n_negatives={requested}: SNM "
                "cannot mine more negatives than it samples."
            )
        if self.surrogate == "ramp" and (self.loss == "bowl" or self.negative_weights == "topk"):
            # The ramp is flat on errors (margins u <= 0): nothing there can be corrected.
            raise ValueError(
                f"surrogate='ramp' cannot train with loss={self.loss!r} and "
                f"negative_weights={self.negative_weights!r}: the ramp has no gradient on "
                "errors, and "
                + (
                    "BOWL's errors are the negatives scored above 0, the only ones that matter, "
                    "so it would learn from the positives alone"
                    if self.loss == "bowl"
                    else "the hardest sampled negatives outrank the positive for most examples "
                    "until the model is trained"
                )
                + ". Use surrogate='ramp' with loss='powl' and negative_weights='uniform' or "
                "'power', or another surrogate."
            )
        user_weights = None
        if not isinstance(self.negative_weights, str):
            user_weights = check_weight_vector(self.negative_weights, requested)
        n_negatives = requested
        if n_negatives > n_labels - 1:
            n_negatives, top_k = n_labels - 1, min(top_k, n_labels - 1)
            warnings.warn(
                f"n_negatives={self.n_negatives} exceeds the {n_labels - 1} negative labels of "
                f"each example (the labels with a positive example, minus one); using "
                f"n_negatives={n_negatives} and "
                f"top_k_negatives={top_k}.",
                UserWarning,
                stacklevel=3,
            )
        self.n_negatives_ = n_negatives
        self.negative_weights_ = owl_weights(
            self.negative_weights if user_weights is None else user_weights[:n_negatives],
            n_negatives,
            top_k=top_k,
            exponent=self.power_exponent,
            scale=self.weight_scale,
            n_labels=n_labels,
        )

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
            self._table_size(),
            **parameters_for(
                self,
                LabelEmbeddingNetwork,
                embedding_dim=self.embedding_dim_,
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
        encoder as a projection of the inputs ``X`` (``encoder_init``)."""
        network, positives = self.module_, y
        n_features = X.shape[1]
        self.encoder_init_ = None
        if self.label_init == "centroid":
            if not layer_sizes(self.hidden_layer_sizes):
                # A linear encoder starts as the coordinates in the principal subspace of the
                # inputs and centroids: the model starts as the input space's centroid rule.
                self.encoder_init_ = self._resolve_encoder_init(X, positives)
                linear = network.encoder.layers[-1]
                seed = int(torch.randint(2**31 - 1, ()))  # fit seeds torch alike on every rank
                if self.encoder_init_ == "svd":
                    directions = principal_input_directions(
                        X, positives, self.embedding_dim_, random_state=seed
                    )
                else:
                    directions = random_input_directions(
                        X.shape[1], self.embedding_dim_, random_state=seed
                    )
                with torch.no_grad():
                    # A SparseLinear stores one row per feature (and a padding row).
                    weight = linear.weight[:-1].T if self.sparse_input_ else linear.weight
                    weight.copy_(torch.as_tensor(directions))
                    linear.bias.zero_()
            centroids = label_centroids(
                network,
                X,
                positives,
                chunk_rows(X.shape[0], 4 * (n_features + self.embedding_dim_)),
            )
            seen = torch.from_numpy(np.diff(positives.tocsc().indptr) > 0)
            with torch.no_grad():
                # Labels with examples take their centroid, the others keep their random row
                # (their centroid is zero), with no copy of the table.
                network.label_embeddings.weight.masked_fill_(seen[:, None], 0.0).add_(centroids)

    def _input_bytes_per_weight(self):
        """Bytes a weight of the first layer takes with its optimiser's state and the copy of
        the best weights."""
        if not self.sparse_input_:
            return 16  # Adam's two moments (SGD's momentum takes less)
        return _ROW_SPARSE_ENTRY_BYTES[self.input_optimizer]

    def _label_bytes(self):
        """Bytes an entry of the label table takes with its optimiser's state and the copy of
        the best weights."""
        return _ROW_SPARSE_ENTRY_BYTES[self.label_optimizer_]

    def _resolve_encoder_init(self, X, positives):
        """``encoder_init``, or for ``"auto"`` the identity, or the exact principal directions
        where they cost less than an epoch, else the random projection."""
        if self.encoder_init != "auto":
            return self.encoder_init
        n_rows, n_features = X.shape
        if n_features <= min(self.embedding_dim_, 2048):
            return "svd"  # the identity: every direction of the input space, found for free
        if n_features > EXACT_PRINCIPAL_FEATURES:
            return "random"
        nnz = X.nnz if sp.issparse(X) else n_rows * n_features
        return (
            "svd"
            if _principal_seconds(n_features)
            <= _epoch_seconds(n_rows, nnz, self.n_negatives_, self.embedding_dim_)
            else "random"
        )

    def initialize_criterion(self, y):
        return OrderedWeightedLoss(
            self.negative_weights_, loss=self.loss, surrogate=self.surrogate, margin=self.margin
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
        input_rate = (
            self.input_learning_rate
            or {
                "rowwise_adagrad": INPUT_ROWWISE_ADAGRAD_RATE,
                "adagrad": 0.005,
                "sparse_adam": self.learning_rate,
                "sgd": self.learning_rate,
            }[self.input_optimizer]
        )
        return self.optimizers_for(network, self.input_optimizer, input_rate) + [
            self._label_optimizer
        ]

    def prepare_targets(self, y, device):
        """Each example's positive labels as a padded table on the device, and their counts."""
        return positive_table(y, y.shape[1], device)

    def get_batch_sampler(self, y, device, random_state):
        # The negatives and the positive draws of a step come from the training device.
        self._label_sampler = NegativeLabelSampler(
            self._table_size(),
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
        positive_sets = table[batch.indices]
        sampled, mask = self._label_sampler.draw(positive_sets)
        vectors = self.network_.normalize_labels(
            self._label_optimizer.gather(torch.cat([positives, sampled]))
        )
        embeddings = self.module_(batch.inputs)
        if isinstance(self.surrogate, str) and self.surrogate in _UNSCALED_SURROGATES:
            embeddings = embeddings / self.network_.log_scale.exp()
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
        k = min(self.score_k, self._table_size())
        _, top = self._top_k(X_val, k, search="exact", neighbors=False)
        return _top_k_score(y_val, top, "precision")

    # ------------------------------------------------------------------ prediction
    def _predicted_top_k(self, X, rows, k):
        """Scores and indices into ``classes_`` (n, k) of the ``k`` best labels, best first:
        :meth:`_top_k` over the label table, then, beyond its rows, the labels without a
        training example in the order of ``classes_``, scored ``UNTRAINED_LABEL_SCORE``."""
        n_labels = len(self.classes_)
        if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k <= n_labels:
            raise ValueError(f"k must be an integer in [1, {n_labels}] (the labels), got {k!r}.")
        trained = self._trained_labels()
        scores, indices = self._top_k(X, min(k, len(trained)), rows=rows)
        if len(trained) == n_labels:
            return scores, indices
        indices = trained[indices]
        if k > len(trained):
            untrained = np.setdiff1d(np.arange(n_labels), trained)[: k - len(trained)]
            n_samples = indices.shape[0]
            indices = np.hstack([indices, np.broadcast_to(untrained, (n_samples, untrained.size))])
            floor = np.full((n_samples, untrained.size), UNTRAINED_LABEL_SCORE, scores.dtype)
            scores = np.hstack([scores, floor])
        return scores, indices

    def _top_k(self, X, k, search=None, neighbors=True, rows=None):
        """Scores and label-table rows (n, k) of the ``k`` best labels, best first (with the
        nearest-centroid rule of ``rows``, the inputs as given, and the neighbours' votes when
        the fit stored them and ``neighbors``)."""
        embeddings = self.forward(X, as_numpy=True)
        search = search or self._search_method()
        if neighbors and self._uses_centroids():
            self._check_search_with_centroids(search, "centroid_weight_")
            return self._centroid_blended_top_k(rows, embeddings, k)
        scores, indices = self._label_top_k(embeddings, k, search)
        if not (neighbors and self._uses_neighbors()):
            return scores, indices
        return self._blended_top_k(embeddings, indices, k)

    def _label_top_k(self, embeddings, k, search):
        """Scores and column indices (n, k) of the ``k`` best labels of the input
        ``embeddings`` by the label scores alone, best first."""
        if search in ("faiss", "ivf"):
            scores, indices = self._approximate_index(search).search(embeddings, k)
            incomplete = np.flatnonzero((indices < 0).any(axis=1))
            if incomplete.size:  # fewer than k labels in the cells probed: search those exactly
                scores[incomplete], indices[incomplete] = self._label_top_k(
                    embeddings[incomplete], k, "exact"
                )
            return scores, indices
        queries = torch.from_numpy(embeddings).to(self.inference_device())
        n_labels = self._table_size()
        scores, indices = top_k_inner_products(queries, self.network_.label_table, n_labels, k)
        return scores.cpu().numpy(), indices.cpu().numpy()

    def _search_method(self):
        """The search of predictions: ``search_`` as the fit resolved ``"auto"``, else
        ``search`` (which may be set after the fit)."""
        return self.search_ if self.search == "auto" else self.search

    def _approximate_index(self, search):
        """The faiss index of the label table for ``search`` (built on first use: faiss
        objects do not pickle), with the ``n_probe`` the fit calibrated."""
        kind, index = getattr(self, "_faiss_index", None) or (None, None)
        if kind != search:
            table = self.network_.label_table().cpu().numpy()
            if search == "faiss":
                index = FaissInnerProductIndex(table)
            else:
                index = FaissIVFIndex(table, random_state=self._search_seed)
                if self.search_probes_ is not None:
                    index.n_probe = self.search_probes_
            self._faiss_index = (search, index)
        return index

    def _prepare_search(self, X_sample):
        """Resolve ``search`` into ``search_``; for an approximate search, build the index and
        measure its recall of the exact top ``max(5, score_k)`` on up to
        ``SEARCH_SAMPLE_ROWS`` rows of ``X_sample`` (``"auto"`` and ``"ivf"``: the smallest
        number of cells probed that reaches ``SEARCH_RECALL_TARGET``; ``"auto"`` falls back
        to the exact search where none does)."""
        self._faiss_index = None
        self.search_, self.search_recall_, self.search_probes_ = self.search, 1.0, None
        self._search_seed = int(self.shared_random_state().randint(np.iinfo(np.int32).max))
        n_labels = self._table_size()
        if self.search == "auto":
            indexed = n_labels >= AUTO_IVF_LABELS and not self._uses_centroids()
            self.search_ = "ivf" if indexed and _faiss_available() else "exact"
        if self.search_ == "exact":
            return
        rows = np.random.RandomState(self._search_seed).permutation(X_sample.shape[0])
        queries = self.forward(X_sample[np.sort(rows[:SEARCH_SAMPLE_ROWS])], as_numpy=True)
        k = min(max(5, self.score_k), n_labels)
        exact = self._label_top_k(queries, k, "exact")[1]
        if self.search_ == "faiss":
            found = self._approximate_index("faiss").search(queries, k)[1]
            self.search_recall_ = overlap_recall(found, exact)
            return
        index = FaissIVFIndex(self.network_.label_table().cpu().numpy(),
                              random_state=self._search_seed)  # fmt: skip
        self.search_recall_ = index.calibrate(queries, exact, target=SEARCH_RECALL_TARGET)
        self.search_probes_ = index.n_probe
        if self.search == "auto" and self.search_recall_ < SEARCH_RECALL_TARGET:
            self.search_, self.search_recall_, self.search_probes_ = "exact", 1.0, None
            return
        self._faiss_index = ("ivf", index)

    def _centroid_blended_top_k(self, rows, embeddings, k):
        """Scores and labels (n, k) of the ``k`` best labels of the prediction scores (see
        :meth:`_blend`) of ``embeddings`` and ``rows`` (the inputs as given), scanning every
        label in chunks of rows."""
        top_scores, top_labels = [], []
        for chunk in self._score_chunks(rows, embeddings):
            chunk_scores, chunk_labels = _ordered_block_top_k(
                self._blend(*chunk, self.centroid_weight_), k
            )
            top_scores.append(chunk_scores.cpu())
            top_labels.append(chunk_labels.cpu())
        return torch.cat(top_scores).numpy(), torch.cat(top_labels).numpy()

    def _score_chunks(self, rows, embeddings, label_scores=None):
        """Chunks of rows ``(scores, similarities, votes)`` on the inference device: the label
        scores of the table's rows (of ``embeddings``, a CPU array or tensor, unless
        ``label_scores`` gives them), the cosines of ``rows`` (the inputs as given) with
        ``centroids_`` (None without them, or when ``rows`` is None) and the neighbours'
        votes (None unless the fit stored them)."""
        device = self.inference_device()
        n_rows, n_labels = embeddings.shape[0], self._table_size()
        keys = self._neighbor_keys(device) if self._uses_neighbors() else None
        centroids = self.centroids_ if rows is not None and self._uses_centroids() else None
        # Blocks of a sixteenth of the working memory (64 MiB by default): a few of them (the
        # label scores, cosines, blends and the sparse product of the cosines) come on top of
        # the model, which at 10^5 labels takes most of a fit's memory, and a block above
        # glibc's largest mmap threshold (32 MiB) goes back to the system when freed, where
        # smaller ones of varying sizes fragment the heap chunk after chunk.
        rows_per_chunk = chunk_rows(n_rows, 16 * 4 * n_labels)
        table = self.network_.label_table().to(device) if label_scores is None else None
        with torch.no_grad():
            for start in range(0, n_rows, rows_per_chunk):
                part = slice(start, start + rows_per_chunk)
                chunk = torch.as_tensor(embeddings[part]).to(device)
                if label_scores is not None:
                    scores = torch.as_tensor(label_scores[part]).to(device)
                else:
                    scores = chunk @ table.T
                votes = None if keys is None else self._neighbor_votes(chunk, keys)
                similarities = None
                if centroids is not None:
                    similarities = centroid_similarities(rows[part], centroids).to(device)
                yield scores, similarities, votes

    def _blend(self, scores, similarities, votes, centroid_weight):
        """The prediction scores of a chunk of :meth:`_score_chunks`:
        ``(1 - a) (v + b s cos) + a s vote``, ``a`` the neighbours' weight and ``b``
        ``centroid_weight``, computed as ``base + term * b`` (:meth:`_blend_parts`)."""
        base, term = self._blend_parts(scores, similarities, votes, self.neighbor_weight_)
        return base if term is None or not centroid_weight else base + term * centroid_weight

    def _blend_parts(self, scores, similarities, votes, neighbor_weight):
        """``(base, term)`` of a chunk of :meth:`_score_chunks` for the neighbours' weight ``a``:
        ``base = (1 - a) v + a s vote`` (``v`` without votes or at ``a = 0``) and ``term = (1 - a)
        s cos`` (None without cosines), whose sum ``base + term * b`` scores the labels."""
        scale = self.network_.score_scale
        base = scores
        if votes is not None and neighbor_weight:
            base = blend_dense(scores, votes, neighbor_weight, scale)
        term = None if similarities is None else similarities * ((1 - neighbor_weight) * scale)
        return base, term

    def _blended_top_k(self, embeddings, candidates, k):
        """Scores and labels (n, k) of the ``k`` best labels of the scores blended with the
        neighbours' votes, in chunks of rows (see
        :func:`~skrank.multilabel._neighbors.blended_top_k`)."""
        device = self.inference_device()
        label_vectors = self.network_.to(device).label_vectors
        keys = self._neighbor_keys(device)
        width = k + self.n_neighbors * self._neighbor_labels[0].shape[1]
        rows_per_chunk = chunk_rows(
            embeddings.shape[0],
            4 * (self.neighbor_embeddings_.shape[0] + width * (embeddings.shape[1] + 8)),
        )
        top_scores, top_labels = [], []
        with torch.no_grad():
            for start in range(0, embeddings.shape[0], rows_per_chunk):
                chunk = torch.from_numpy(embeddings[start : start + rows_per_chunk]).to(device)
                chunk_scores, chunk_labels = blended_top_k(
                    chunk,
                    label_vectors,
                    torch.as_tensor(candidates[start : start + rows_per_chunk], device=device),
                    self._neighbor_votes(chunk, keys),
                    self.neighbor_weight_,
                    self.network_.score_scale,
                    k,
                )
                top_scores.append(chunk_scores.cpu())
                top_labels.append(chunk_labels.cpu())
        return torch.cat(top_scores).numpy(), torch.cat(top_labels).numpy()

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
        return normalized, (X if self._uses_centroids() else None)

    def _normalize_inputs(self, X, fitting):
        """``X`` as the network reads it (``input_normalization``); at fit, learn the idf."""
        if fitting and not (self.warm_start and hasattr(self, "input_normalization_")):
            self.input_transformer_ = None
            negative = (X.data if sp.issparse(X) else X).min(initial=0) < 0
            self.input_normalization_ = self.input_normalization
            if self.input_normalization == "auto":
                linear = not layer_sizes(self.hidden_layer_sizes)
                self.input_normalization_ = (
                    "tfidf" if linear and sp.issparse(X) and not negative else None
                )
            if self.input_normalization_ == "tfidf":
                if negative:
                    raise ValueError(
                        "input_normalization='tfidf' needs non-negative features (counts or "
                        "indicators); X has negative values. Use input_normalization='l2' or "
                        "None."
                    )
                self.input_transformer_ = TfidfTransformer(sublinear_tf=True).fit(X)
        if self.input_transformer_ is not None:
            transformed = self.input_transformer_.transform(X)
            return transformed if sp.issparse(X) else transformed.toarray()
        return normalize(X) if self.input_normalization_ == "l2" else X

    def predict_top_k(self, X, k, return_scores=False):
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

        Returns
        -------
        labels : ndarray of shape (n_samples, k)
            Labels from ``classes_``.
        scores : ndarray of shape (n_samples, k), float32
            Their scores (decreasing along each row; the scaled cosine similarities, plus the
            nearest-centroid rule when ``centroid_weight_ > 0`` and blended with the
            neighbours' votes when ``neighbor_weight_ > 0``; ``-3.4e38`` for labels without a
            training example, see ``trained_labels_``); only if ``return_scores``.
        """
        scores, indices = self._predicted_top_k(*self._validate_for_prediction(X, rows=True), k)
        labels = self.classes_[indices]
        return (labels, scores) if return_scores else labels

    def predict(self, X):
        """Best label of each example; multilabel: indicator of the ``score_k`` best labels.

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
        _, top = self._predicted_top_k(X, rows, self.score_k)
        sparse_output, dtype = self._multilabel_output
        n_samples, k = top.shape
        indicator = sp.csr_matrix(
            (np.ones(n_samples * k, dtype=dtype), top.ravel(), np.arange(0, n_samples * k + 1, k)),
            shape=(n_samples, len(self.classes_)),
        )
        indicator.sort_indices()
        return indicator if sparse_output else indicator.toarray()

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
        _check_dense_scores_fit(X.shape[0], len(self.classes_))
        return self._decision_scores(torch.from_numpy(self.forward(X, as_numpy=True)), rows)

    def _decision_scores(self, embeddings, rows=None, label_scores=None):
        """:meth:`decision_function`'s scores from the input ``embeddings`` (a CPU tensor),
        the inputs as given ``rows`` (for the nearest-centroid rule; None: without it) and the
        scores of the label table's rows ``label_scores`` (computed here when None), in
        chunks of rows; the labels without a training example score
        ``UNTRAINED_LABEL_SCORE``."""
        n_labels = len(self.classes_)
        trained = self._trained_labels()
        chunks = []
        for chunk in self._score_chunks(rows, embeddings, label_scores):
            scores = self._blend(*chunk, self.centroid_weight_).cpu()
            if len(trained) < n_labels:
                every_label = scores.new_full((scores.shape[0], n_labels), UNTRAINED_LABEL_SCORE)
                every_label[:, torch.from_numpy(trained)] = scores
                scores = every_label
            chunks.append(scores)
        scores = torch.cat(chunks).numpy()
        if n_labels == 2 and not self._multilabel_output:
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
        ``g(x)`` (times the score scale) of shape ``(n_samples, embedding_dim_)``. The label
        table is a constant of the graph (``4 K d`` bytes). Outside the graph stay the input
        checks and ``input_normalization`` (applied, with the densification of sparse rows, by
        :meth:`onnx_inputs`), the nearest-centroid rule (``centroid_weight_ > 0``: sparse
        centroids) and the neighbours' votes (``neighbor_weight_ > 0``), which
        :meth:`decision_function_from_onnx` adds to the outputs; without them, ``scores`` is
        what :meth:`decision_function` returns, to float32 rounding (two-class targets: one
        column per class). Needs ``onnx`` and ``onnxscript`` (the ``onnx`` extra, which also
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
        trained = self._trained_labels()
        return export_module(
            LabelScores(
                self.network_,
                None if len(trained) == len(self.classes_) else trained,
                len(self.classes_),
                UNTRAINED_LABEL_SCORE,
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
        embeddings : array-like of shape (n_samples, `embedding_dim_`)
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
        scores = np.asarray(scores, dtype=np.float32)
        embeddings = np.asarray(embeddings, dtype=np.float32)
        width = self.network_.label_embeddings.embedding_dim
        if (
            scores.ndim != 2
            or scores.shape[1] != len(self.classes_)
            or embeddings.shape != (scores.shape[0], width)
        ):
            raise ValueError(
                f"scores must have shape (n_samples, {len(self.classes_)}) and embeddings "
                f"(n_samples, {width}), the outputs of the exported graph; got "
                f"{scores.shape} and {embeddings.shape}."
            )
        rows = None
        if self._uses_centroids():
            if X is None:
                raise ValueError(
                    f"centroid_weight_={self.centroid_weight_}: the nearest-centroid rule is "
                    "outside the graph and reads the inputs; pass X, the rows given to "
                    "onnx_inputs."
                )
            rows = self._validate_for_prediction(X, rows=True)[1]
            if rows.shape[0] != scores.shape[0]:
                raise ValueError(
                    f"X has {rows.shape[0]} rows and scores {scores.shape[0]}: pass the rows "
                    "the graph scored."
                )
        trained = self._trained_labels()
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
        return _top_k_score(check_label_targets(y, len(self.classes_), labels), top, "precision")

    # ------------------------------------------------------------------ misc
    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_faiss_index", None)  # rebuilt on demand; faiss objects do not pickle
        # The label table's optimiser and the negatives' sampler: a fit builds them.
        state.pop("_label_optimizer", None)
        state.pop("_label_sampler", None)
        if state.get("centroids_") is not None:
            # numpy arrays (a CSC matrix's): skops then trusts the file without scipy's classes
            centroids = state["centroids_"]
            state["centroids_"] = {
                "data": centroids.data,
                "indices": centroids.indices,
                "indptr": centroids.indptr,
                "shape": list(centroids.shape),
            }
        return state

    def __setstate__(self, state):
        centroids = state.get("centroids_")
        if isinstance(centroids, dict):
            state = dict(state)
            state["centroids_"] = sp.csc_matrix(
                (centroids["data"], centroids["indices"], centroids["indptr"]),
                shape=tuple(centroids["shape"]),
            )
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.classifier_tags.multi_label = True
        return tags


# ---------------------------------------------------------------------- target handling
def _encode_targets(y):
    """Labels and the sparse positive-label indicator of ``y``.

    Returns ``(classes, indicator, multilabel_output)`` where ``multilabel_output`` is False for
    multiclass targets, else ``(sparse_output, dtype)`` of the indicator given.
    """
    with warnings.catch_warnings():
        # Far more labels than examples per label is the normal case of extreme classification.
        warnings.filterwarnings("ignore", message="The number of unique classes is greater")
        with naming_inputs("y"):
            check_classification_targets(y)
        target_type = type_of_target(y, input_name="y")
    if target_type == "multilabel-indicator":
        values = values_outside_zero_one(y)
        if values is not None:
            raise ValueError(
                f"y is a multilabel indicator matrix with values {values}; "
                "SNMClassifier needs 0/1 (1: the label is positive). For a -1/1 matrix, "
                "pass y > 0."
            )
        sparse_output = sp.issparse(y)
        dtype = y.dtype.str  # a string: saved estimators hold no numpy type
        indicator = canonical_csr(y, dtype=np.int8, drop_zeros=True)
        classes = np.arange(indicator.shape[1])
        multilabel_output = (sparse_output, dtype)
    elif target_type in ("binary", "multiclass"):
        y = column_or_1d(y, warn=True)
        classes, codes = encode_labels(y)
        indicator = _one_hot(codes, len(classes))
        multilabel_output = False
    else:
        raise ValueError(
            "SNMClassifier needs multiclass labels or a multilabel 0/1 indicator matrix; got "
            f"targets of type {target_type!r}."
        )
    check_class_counts(np.ones(len(classes)), positives=False, needed_by="SNMClassifier")
    return classes, indicator, multilabel_output


def _one_hot(codes, n_labels):
    n_samples = codes.shape[0]
    return sp.csr_matrix(
        (np.ones(n_samples, dtype=np.int8), codes, np.arange(n_samples + 1)),
        shape=(n_samples, n_labels),
    )


def _best_weight(weights, tops, targets):
    """The weight whose top-k labels (``tops``, one (n, k) array a weight) have the best
    Precision@k on ``targets``; the smallest among ties."""
    precision = {
        weight: _top_k_score(targets, top, "precision")
        for weight, top in zip(weights, tops, strict=True)
    }
    best = max(precision.values())
    return min(weight for weight, value in precision.items() if value == best)


class _RowsAlike:
    """Arrays indexed by the same rows: ``self[rows]`` indexes each of them (a memory-mapped
    array through a :class:`~skrank.nn.RowSubset`, never copied)."""

    def __init__(self, *arrays):
        self.arrays = arrays

    def __getitem__(self, rows):
        return _RowsAlike(
            *(RowSubset(a, rows) if memory_mapped(a) else a[rows] for a in self.arrays)
        )


def _drop_rows_without_positives(X, positives, rows):
    counts = np.diff(positives.indptr)
    empty = counts == 0
    if empty.all():
        raise ValueError("No training example has a positive label.")
    if empty.any():
        warnings.warn(
            f"{int(empty.sum())} of {len(counts)} training examples have no positive label and "
            "were skipped.",
            UserWarning,
            stacklevel=3,
        )
        keep = np.flatnonzero(~empty)
        kept = X[keep]
        return kept, positives[keep], (kept if rows is X else rows[keep])
    return X, positives, rows


def _top_k_score(targets, top, kind):
    """Mean Precision@k or Recall@k (``kind``) of the top-k label columns ``top`` (n, k), by
    skrank.metrics' label core."""
    hits, n_true = top_k_hits(targets, top)
    return float(mean_top_k_scores(hits, n_true, np.array([top.shape[1]]), kind)[0])


def _faiss_available():
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _check_dense_scores_fit(n_samples, n_labels):
    needed = 4 * n_samples * n_labels
    available = available_host_bytes()
    if available is not None and needed > available / 2:
        raise MemoryError(
            f"decision_function would build a {n_samples} x {n_labels} score matrix "
            f"({needed / 2**30:.1f} GiB), more than half of the {available / 2**30:.1f} GiB of "
            "available memory. Use predict_top_k(X, k), which never builds it, or pass fewer "
            "rows at a time."
        )


# Operations a second of a 2-core CPU: LAPACK's dense eigendecomposition runs near the peak of
# the cores, a training step far below it (sparse gathers, sorts and row updates).
DENSE_OPERATIONS_PER_SECOND = 2e10
STEP_OPERATIONS_PER_SECOND = 2e9


def _principal_seconds(n_features):
    """Estimated time of the exact principal directions: the eigendecomposition of a
    ``p x p`` Gram matrix, about ``9 p^3`` operations (tridiagonal reduction and vectors)."""
    return 9 * n_features**3 / DENSE_OPERATIONS_PER_SECOND


def _epoch_seconds(n_rows, nnz, n_negatives, embedding_dim):
    """Estimated time of one training epoch: forward and backward passes (3 times 2
    operations a multiply-add) over each row's positive and sampled negatives and its
    non-zeros."""
    operations = 6 * embedding_dim * (n_rows * (n_negatives + 1) + nnz)
    return operations / STEP_OPERATIONS_PER_SECOND


def _label_reads_per_epoch(n_rows, n_labels, n_negatives, batch_size):
    """Average number of times an epoch over ``n_rows`` reads a row of the label table: each
    step of ``batch_size`` rows samples ``n_negatives`` of the ``n_labels`` and reads
    ``batch_size`` positives."""
    return n_rows / batch_size * (n_negatives + batch_size) / n_labels


def _adagrad_label_rate(reads):
    """Default Adagrad rate of label rows read ``reads`` times an epoch: ``LABEL_ADAGRAD_RATE``
    times ``sqrt(max(1, LABEL_REFERENCE_READS / reads))``. Adagrad moves a row by about
    ``rate * sqrt(reads)`` over its reads whatever the scale of its gradients, so rows read
    rarely (many labels, few sampled) get the larger rate that moves them as far an epoch."""
    return LABEL_ADAGRAD_RATE * math.sqrt(max(1.0, LABEL_REFERENCE_READS / reads))


def _auto_embedding_dim(n_features, n_labels, input_bytes=16, label_bytes=12):
    """``embedding_dim="auto"``: the number of features, at most 1024 and at most what keeps
    the label table with its optimiser's state and the copy of the best weights
    (``label_bytes`` an entry: 12 with Adagrad, 8 with row-wise Adagrad) and a linear encoder
    with its optimiser's state and copy (``input_bytes`` an entry: 16 with Adam's moments, 8
    with row-wise Adagrad) within ``AUTO_EMBEDDING_BYTES``; at least 16."""
    within_budget = AUTO_EMBEDDING_BYTES // (label_bytes * n_labels + input_bytes * n_features)
    return int(min(n_features, 1024, max(16, within_budget)))
