"""Input and label embeddings whose inner products score labels (Reddi et al., 2019, Section 5)."""

import math
import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize
from sklearn.utils import check_random_state
from sklearn.utils.extmath import randomized_svd
from torch import nn

from ..nn import MLP, SparseRows, TrainingInputs
from ..utils._memory import chunk_rows
from ..utils._unit_rows import unit_rows

# Up to this many features the principal directions are the exact eigenvectors of a dense
# Gram matrix (its eigendecomposition takes seconds), beyond by a randomised SVD.
EXACT_PRINCIPAL_FEATURES = 4096


class LabelEmbeddingNetwork(nn.Module):
    """Scores ``v_y(x) = <g(x), u_y>`` with ``g`` an MLP and ``u_y`` a row of a label table.

    With ``scores="cosine"`` both the output of the MLP and ``u_y`` are L2-normalised, and
    ``g(x)`` is that unit vector times a score scale ``s`` (an inverse temperature, learnable or
    fixed, as in normalised-softmax and CosFace-style classifiers): scores lie in ``[-s, s]``.
    Without a scale (``s = 1``) cosine scores cannot reach the margins of the hinge-type
    surrogates, and a loss over many sampled negatives cannot separate them. With
    ``scores="dot"`` neither side is normalised: ``g(x)`` is ``s`` times the MLP's output and
    ``u_y`` the raw row, so scores are unbounded inner products. The label table is an
    ``nn.Embedding`` with sparse gradients: a training step that reads ``m`` labels produces a
    gradient of ``m`` rows, whatever the number of labels ``K``, so a sparse-aware optimiser
    (plain SGD, Adagrad, SparseAdam) updates only those rows.

    Parameters
    ----------
    n_features : int
        Input dimension.
    n_labels : int
        Number of labels ``K`` (rows of the table).
    n_components : int, default=512
        Dimension ``d`` of the input and label embeddings.
    hidden_layer_sizes : int or tuple of int, default=(512,)
        Hidden layers of ``g``, an int for one (the paper: one ReLU layer of 512, then a
        linear map to 512).
    activation : {"relu", "gelu", "tanh", "leaky_relu"}, default="relu"
        Activation of the hidden layers (see :class:`~skrank.nn.MLP`).
    dropout : float, default=0.0
        Dropout after each hidden activation.
    input_dropout : float, default=0.0
        Dropout on the inputs (features dropped at random while training: a regulariser of
        sparse, bag-of-words-like inputs that also applies to a linear ``g``).
    scores : {"cosine", "dot"}, default="cosine"
        Cosine similarities (normalised embeddings) times the scale, or raw inner products
        times the scale.
    score_scale : float, default=1.0
        Scale ``s > 0`` of the scores (an inverse temperature), its initial value when
        ``learn_score_scale``.
    learn_score_scale : bool, default=False
        Learn ``s`` with the network (it is stored as ``log s``, so it stays positive).
    sparse_input : bool, default=False
        Read sparse inputs as :class:`~skrank.nn.SparseRows` through a first layer that
        touches only the weights of the features present (:class:`~skrank.nn.SparseLinear`;
        see :class:`~skrank.nn.MLP`).

    Examples
    --------
    >>> import torch
    >>> from skrank.multilabel import LabelEmbeddingNetwork
    >>> network = LabelEmbeddingNetwork(n_features=6, n_labels=1000, n_components=8,
    ...                                 hidden_layer_sizes=(16,))
    >>> embeddings = network(torch.randn(4, 6))
    >>> network.scores(embeddings, torch.tensor([3, 999])).shape
    torch.Size([4, 2])
    """

    def __init__(
        self,
        n_features,
        n_labels,
        n_components=512,
        hidden_layer_sizes=(512,),
        activation="relu",
        dropout=0.0,
        input_dropout=0.0,
        scores="cosine",
        score_scale=1.0,
        learn_score_scale=False,
        sparse_input=False,
        **renamed,
    ):
        super().__init__()
        if "embedding_dim" in renamed:
            warnings.warn(
                "LabelEmbeddingNetwork(embedding_dim=...) was renamed n_components in skrank 0.2; "
                "embedding_dim will be removed in skrank 0.3.",
                FutureWarning,
                stacklevel=2,
            )
            n_components = renamed.pop("embedding_dim")
        if renamed:
            unexpected = next(iter(renamed))
            raise TypeError(
                f"LabelEmbeddingNetwork() got an unexpected keyword argument {unexpected!r}"
            )
        if scores not in ("cosine", "dot"):
            raise ValueError(f"scores must be 'cosine' or 'dot', got {scores!r}.")
        if not score_scale > 0:
            raise ValueError(f"score_scale must be positive, got {score_scale!r}.")
        self.cosine = scores == "cosine"
        self.input_dropout = nn.Dropout(input_dropout) if input_dropout > 0 else nn.Identity()
        self.encoder = MLP(
            n_features,
            hidden_layer_sizes,
            n_components,
            activation=activation,
            dropout=dropout,
            normalize=self.cosine,
            sparse_input=sparse_input,
        )
        self.accepts_sparse_rows = self.encoder.accepts_sparse_rows
        # Part of the forward pass (so that data-parallel training averages its gradient).
        self.log_scale = nn.Parameter(
            torch.tensor(math.log(score_scale)), requires_grad=bool(learn_score_scale)
        )
        # One initialisation pass over the (possibly huge) table: rows of norm about 1, so that
        # normalisation does not shrink their gradients. (A given weight skips Embedding's own
        # initialisation; loading builds the table on the meta device, where there is nothing
        # to draw.)
        table = torch.empty(n_labels, n_components, device=torch.get_default_device())
        if table.device.type != "meta":
            table.normal_(std=1.0 / math.sqrt(n_components))
        self.label_embeddings = nn.Embedding(n_labels, n_components, sparse=True, _weight=table)

    def forward(self, x):
        """Input embeddings ``g(x)`` (times the score scale), shape (batch_size, n_components);
        ``x`` a dense tensor or :class:`~skrank.nn.SparseRows`."""
        if isinstance(x, SparseRows):
            x = x.with_values(self.input_dropout(x.values))
        else:
            x = self.input_dropout(x)
        return self.encoder(x) * self.log_scale.exp()

    @property
    def score_scale(self):
        """The current score scale ``s`` (a float)."""
        return float(self.log_scale.detach().exp())

    def normalize_labels(self, vectors):
        """Label rows as scored: L2-normalised for cosine scores, unchanged for inner products."""
        return unit_rows(vectors) if self.cosine else vectors

    def label_vectors(self, labels):
        """Embeddings of ``labels`` (a LongTensor) as scored, reading only those rows."""
        return self.normalize_labels(self.label_embeddings(labels))

    def scores(self, embeddings, labels):
        """Scores ``(n, len(labels))`` of the given labels for the input embeddings."""
        return embeddings @ self.label_vectors(labels).T

    def positive_scores(self, embeddings, labels):
        """Score of one label per example: ``labels`` has shape (n,), the result too."""
        return (embeddings * self.label_vectors(labels)).sum(dim=1)

    def label_table(self, start=0, stop=None):
        """Rows ``start:stop`` of the label table as scored (no gradient)."""
        with torch.no_grad():
            return self.normalize_labels(self.label_embeddings.weight[start:stop])


class LabelScores(nn.Module):
    """The label scores of every label and the input embeddings of a
    :class:`LabelEmbeddingNetwork`, its label table (as scored) a constant: the graph that
    ``SNMClassifier.export_onnx`` writes.

    Parameters
    ----------
    network : LabelEmbeddingNetwork
        The network.
    table_labels : array-like of int or None, default=None
        The label of each row of the table, among ``n_labels``; None: row ``i`` is label ``i``.
    n_labels : int or None, default=None
        Number of labels scored, with ``table_labels``; the labels without a row score
        ``missing_score``.
    missing_score : float, default=0.0
        Score of the labels without a row of the table.
    """

    def __init__(self, network, table_labels=None, n_labels=None, missing_score=0.0):
        super().__init__()
        self.network = network
        self.register_buffer("labels", network.label_table())
        columns = None
        if table_labels is not None:
            # Column of each label among the table's scores and, last, the missing score.
            columns = torch.full((n_labels,), len(table_labels), dtype=torch.long)
            columns[torch.as_tensor(table_labels, dtype=torch.long)] = torch.arange(
                len(table_labels)
            )
        self.register_buffer("columns", columns)
        self.missing_score = missing_score

    def forward(self, x):
        """Scores ``(n, K)`` of every label, and the input embeddings ``(n, d)``."""
        embeddings = self.network(x)
        scores = embeddings @ self.labels.T
        if self.columns is not None:
            missing = torch.full_like(scores[:, :1], self.missing_score)
            scores = torch.cat([scores, missing], dim=1).index_select(1, self.columns)
        return scores, embeddings


@torch.no_grad()
def start_at_centroids(network, X, positives, encoder_init=None, seed=None):
    """Start ``network`` as (close to) the nearest-centroid rule of its inputs: a linear
    encoder as the projection ``encoder_init`` (``"identity"`` or ``"svd"``: the principal
    directions of the inputs and their label centroids; ``"random"``: a Gaussian projection;
    None: left as it is), then each label row at the centroid of its examples' embeddings
    (labels without an example keep their random row).

    Parameters
    ----------
    network : LabelEmbeddingNetwork
        The network, changed in place.
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        Training inputs, as the network reads them.
    positives : scipy.sparse matrix of shape (n_samples, n_labels)
        Positive-label indicator.
    encoder_init : {"identity", "svd", "random"} or None, default=None
        The start of a linear encoder (its last layer; None for another encoder).
    seed : int or None, default=None
        Seed of the projection.
    """
    n_components = network.label_embeddings.embedding_dim
    if encoder_init is not None:
        linear = network.encoder.layers[-1]
        # A SparseLinear stores one row per feature (and a padding row).
        weight = linear.weight[:-1].T if network.accepts_sparse_rows else linear.weight
        if encoder_init == "random":
            random_input_directions(X.shape[1], n_components, seed, out=weight)
        else:
            weight.copy_(
                torch.as_tensor(principal_input_directions(X, positives, n_components, seed))
            )
        linear.bias.zero_()
    # Blocks of a sixteenth of the working memory: the rows (dense at worst) and their
    # embeddings gathered once for each of their labels.
    labels_per_row = positives.nnz / max(1, positives.shape[0])
    rows_per_chunk = chunk_rows(
        X.shape[0], 16 * 4 * (X.shape[1] + n_components * (1 + labels_per_row))
    )
    centroids = label_centroids(network, X, positives, rows_per_chunk)
    seen = torch.from_numpy(np.diff(sp.csc_matrix(positives).indptr) > 0)
    # Labels with examples take their centroid, the others keep their random row (their
    # centroid is zero), with no copy of the table.
    network.label_embeddings.weight.masked_fill_(seen[:, None], 0.0).add_(centroids)


@torch.no_grad()
def label_centroids(network, X, positives, rows_per_chunk=1024):
    """Each label's centroid of the (unscaled) input embeddings of its examples.

    Parameters
    ----------
    network : LabelEmbeddingNetwork
        The network whose encoder embeds ``X`` (run in evaluation mode, on the CPU).
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        Inputs, read ``rows_per_chunk`` rows at a time (densified, or as sparse rows for a
        network that reads them).
    positives : scipy.sparse matrix of shape (n_samples, n_labels)
        Positive-label indicator.
    rows_per_chunk : int, default=1024
        Rows embedded at a time.

    Returns
    -------
    centroids : torch.Tensor of shape (n_labels, n_components), float32
        The mean embedding of each label's examples (L2-normalised for cosine scores); zero rows
        for labels without an example. Memory beyond the result: one chunk (the result is
        computed in place).
    """
    positives = sp.csr_matrix(positives)
    n_labels = positives.shape[1]
    device = next(network.parameters()).device
    training = network.training
    network.eval()
    sums = None
    for start in range(0, X.shape[0], rows_per_chunk):
        block = TrainingInputs(
            X[start : start + rows_per_chunk], device, sparse_rows=network.accepts_sparse_rows
        )
        embeddings = network.encoder(next(block.chunks(block.n_samples)))
        if sums is None:
            sums = embeddings.new_zeros((n_labels, embeddings.shape[1]))
        labels = positives[start : start + rows_per_chunk].tocoo()
        sums.index_add_(
            0,
            torch.as_tensor(labels.col, dtype=torch.long, device=device),
            embeddings[torch.as_tensor(labels.row, dtype=torch.long, device=device)],
        )
    network.train(training)
    counts = torch.as_tensor(np.diff(positives.tocsc().indptr), device=device)
    # In place: the table may be the largest array of the fit.
    centroids = sums.div_(counts.clamp(min=1)[:, None].to(sums.dtype))
    if network.cosine:  # F.normalize's rule: divided by max(norm, 1e-12)
        centroids.div_(torch.linalg.vector_norm(centroids, dim=1, keepdim=True).clamp_(min=1e-12))
    return centroids


def principal_input_directions(X, positives, n_directions, random_state=None):
    """Orthonormal directions spanning most of the L2-normalised inputs and label centroids.

    The top right singular vectors of the stacked matrix ``[C; X_n]`` (exactly, as the top
    eigenvectors of its Gram matrix, up to ``EXACT_PRINCIPAL_FEATURES`` features; by
    scikit-learn's ``randomized_svd`` beyond), with ``X_n`` the rows
    of ``X`` scaled to unit norm and ``C`` the L2-normalised mean of each label's rows of
    ``X_n``. A linear encoder whose weights are these rows maps inputs and centroids to their
    coordinates in that subspace, so that inner products (and cosines) there are those of the
    input space up to the discarded directions: exactly those of the input space when
    ``n_directions`` reaches the rank of ``[C; X_n]``.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        Inputs.
    positives : scipy.sparse matrix of shape (n_samples, n_labels)
        Positive-label indicator.
    n_directions : int
        Number of rows wanted. Beyond ``min(n_samples + n_labels, n_features)`` the extra rows
        are Gaussian with norm about 1e-3 (so that no embedding coordinate is stuck at a
        zero-gradient start).
    random_state : int, RandomState instance or None, default=None
        Seed of the randomised SVD and of the extra rows.

    Returns
    -------
    directions : ndarray of shape (n_directions, n_features), float64
        Orthonormal rows (the singular vectors, by decreasing singular value), then the
        extra rows.
    """
    rng = check_random_state(random_state)
    inputs = normalize(sp.csr_matrix(X, dtype=np.float64))
    centroids = normalize(sp.csr_matrix(positives, dtype=np.float64).T @ inputs)
    stacked = sp.vstack([centroids, inputs]).tocsr()
    n_exact = min(n_directions, *stacked.shape)
    n_features = stacked.shape[1]
    if n_exact == n_features and n_exact <= 2048:
        # Every direction of the input space: no need to find them.
        basis = np.eye(n_exact)
    elif n_features <= EXACT_PRINCIPAL_FEATURES:
        # The top eigenvectors of the Gram matrix: exact, and cheaper than the randomised SVD.
        gram = (stacked.T @ stacked).toarray()
        _, vectors = scipy.linalg.eigh(gram, subset_by_index=[n_features - n_exact, n_features - 1])
        basis = vectors[:, ::-1].T
    else:
        _, _, basis = randomized_svd(stacked, n_exact, random_state=rng)
    extra = 1e-3 * rng.normal(size=(n_directions - n_exact, n_features)) / math.sqrt(n_features)
    return np.vstack([basis, extra])


def random_input_directions(n_features, n_directions, random_state=None, out=None):
    """A Gaussian random projection: rows of ``n_features`` independent ``N(0, 1/n_directions)``
    entries.

    The projection preserves norms and inner products of the inputs in expectation, up to a
    relative distortion of order ``1/sqrt(n_directions)`` (the Johnson-Lindenstrauss lemma): a
    linear encoder that starts as it, with label embeddings at the centroids of their inputs,
    starts close to the input space's centroid rule, at the cost of drawing the matrix
    (unlike :func:`principal_input_directions`, no pass over the data).

    Parameters
    ----------
    n_features : int
        Input dimension.
    n_directions : int
        Number of rows.
    random_state : int or None, default=None
        Seed of the draws (a torch generator).
    out : torch.Tensor of shape (n_directions, n_features) or None, default=None
        Where to draw them (e.g. a layer's weight, or a view of it), with no other copy.

    Returns
    -------
    directions : torch.Tensor of shape (n_directions, n_features), float32
        ``out`` when given.
    """
    generator = torch.Generator()
    if random_state is not None:
        generator.manual_seed(int(random_state))
    else:
        generator.seed()
    directions = torch.empty(n_directions, n_features) if out is None else out
    # Drawn in the order of memory (a transposed view too): several times faster.
    layout = directions.T if directions.T.is_contiguous() else directions
    layout.normal_(0.0, 1.0 / math.sqrt(n_directions), generator=generator)
    return directions


def check_graph_outputs(scores, embeddings, n_columns, width):
    """``scores`` (n, n_columns) and ``embeddings`` (n, width) as float32 arrays, the outputs
    of the graph of :class:`LabelScores`; a ``ValueError`` naming the shapes otherwise."""
    scores = np.asarray(scores, dtype=np.float32)
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if (
        scores.ndim != 2
        or scores.shape[1] != n_columns
        or embeddings.shape != (scores.shape[0], width)
    ):
        raise ValueError(
            f"scores must have shape (n_samples, {n_columns}) and embeddings "
            f"(n_samples, {width}), the outputs of the exported graph; got "
            f"{scores.shape} and {embeddings.shape}."
        )
    return scores, embeddings


def graph_rows(X, n_scored, centroid_weight, validate):
    """The inputs as given, ``validate(X)``, that the nearest-centroid rule reads beside the
    graph's outputs of ``n_scored`` rows; a ``ValueError`` when ``X`` is None or its rows
    are not the ones scored."""
    if X is None:
        raise ValueError(
            f"centroid_weight_={centroid_weight}: the nearest-centroid rule is outside the "
            "graph and reads the inputs; pass X, the rows given to onnx_inputs."
        )
    rows = validate(X)
    if rows.shape[0] != n_scored:
        raise ValueError(
            f"X has {rows.shape[0]} rows and scores {n_scored}: pass the rows the graph scored."
        )
    return rows
