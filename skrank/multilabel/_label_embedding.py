"""Input and label embeddings whose inner products score labels (Reddi et al., 2019, Section 5)."""

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..nn import MLP


class LabelEmbeddingNetwork(nn.Module):
    """Scores ``v_y(x) = <g(x), u_y>`` with ``g`` an MLP and ``u_y`` a row of a label table.

    Both ``g(x)`` and ``u_y`` are L2-normalised, so scores lie in [-1, 1]. The label table is an
    ``nn.Embedding`` with sparse gradients: a training step that reads ``m`` labels produces a
    gradient of ``m`` rows, whatever the number of labels ``K``, so a sparse-aware optimiser
    (plain SGD, Adagrad, SparseAdam) updates only those rows.

    Parameters
    ----------
    n_features : int
        Input dimension.
    n_labels : int
        Number of labels ``K`` (rows of the table).
    embedding_dim : int, default=512
        Dimension of both embeddings.
    hidden_layer_sizes : tuple of int, default=(512,)
        Hidden layers of ``g`` (the paper: one ReLU layer of 512, then a linear map to 512).
    activation : str, default="relu"
        Activation of the hidden layers (see :class:`MLP`).
    dropout : float, default=0.0
        Dropout after each hidden activation.

    Examples
    --------
    >>> import torch
    >>> from skrank.multilabel import LabelEmbeddingNetwork
    >>> network = LabelEmbeddingNetwork(n_features=6, n_labels=1000, embedding_dim=8,
    ...                                 hidden_layer_sizes=(16,))
    >>> embeddings = network(torch.randn(4, 6))
    >>> network.scores(embeddings, torch.tensor([3, 999])).shape
    torch.Size([4, 2])
    """

    def __init__(
        self,
        n_features,
        n_labels,
        embedding_dim=512,
        hidden_layer_sizes=(512,),
        activation="relu",
        dropout=0.0,
    ):
        super().__init__()
        self.encoder = MLP(
            n_features,
            hidden_layer_sizes,
            embedding_dim,
            activation=activation,
            dropout=dropout,
            normalize=True,
        )
        # One initialisation pass over the (possibly huge) table: rows of norm about 1, so that
        # normalisation does not shrink their gradients.
        self.label_embeddings = torch.nn.utils.skip_init(
            nn.Embedding, n_labels, embedding_dim, sparse=True
        )
        nn.init.normal_(self.label_embeddings.weight, std=1.0 / math.sqrt(embedding_dim))

    def forward(self, x):
        """L2-normalised input embeddings ``g(x)``, shape (batch_size, embedding_dim)."""
        return self.encoder(x)

    def label_vectors(self, labels):
        """L2-normalised embeddings of ``labels`` (a LongTensor), reading only those rows."""
        return F.normalize(self.label_embeddings(labels), dim=-1)

    def scores(self, embeddings, labels):
        """Scores ``(n, len(labels))`` of the given labels for the input embeddings."""
        return embeddings @ self.label_vectors(labels).T

    def positive_scores(self, embeddings, labels):
        """Score of one label per example: ``labels`` has shape (n,), the result too."""
        return (embeddings * self.label_vectors(labels)).sum(dim=1)

    def label_table(self, start=0, stop=None):
        """Normalised rows ``start:stop`` of the label table (no gradient)."""
        with torch.no_grad():
            return F.normalize(self.label_embeddings.weight[start:stop], dim=1)


class _UncheckedSparseStep:
    """Steps with torch's sparse-invariant checks explicitly off.

    The sparse gradients of an ``nn.Embedding`` are valid by construction; opting out explicitly
    also silences the warning torch gives when the checks are off by default.
    """

    def step(self, closure=None):
        with torch.sparse.check_sparse_tensor_invariants(enable=False):
            return super().step(closure)


class _SparseAdagrad(_UncheckedSparseStep, torch.optim.Adagrad):
    pass


class _SparseAdam(_UncheckedSparseStep, torch.optim.SparseAdam):
    pass


class _SparseSGD(_UncheckedSparseStep, torch.optim.SGD):
    pass


_SPARSE_OPTIMIZERS = {"adagrad": _SparseAdagrad, "sparse_adam": _SparseAdam, "sgd": _SparseSGD}


def sparse_row_optimizer(name, parameters, learning_rate):
    """An optimiser that updates only the rows of a table present in its sparse gradient.

    Parameters
    ----------
    name : {"adagrad", "sparse_adam", "sgd"}
        Adagrad, SparseAdam (lazy Adam) or plain SGD (no momentum: a momentum buffer would have
        to decay every row it ever touched, a cost that grows with the table).
    parameters : iterable of torch.nn.Parameter
        Parameters with sparse gradients (e.g. ``nn.Embedding(..., sparse=True).weight``).
    learning_rate : float
        Step size.

    Returns
    -------
    optimizer : torch.optim.Optimizer
    """
    if name not in _SPARSE_OPTIMIZERS:
        raise ValueError(f"name must be one of {sorted(_SPARSE_OPTIMIZERS)}, got {name!r}.")
    return _SPARSE_OPTIMIZERS[name](parameters, lr=learning_rate)
