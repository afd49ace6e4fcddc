"""SOPRCEmbedder: an embedding trained to maximise the AUPRC of cosine-similarity retrieval."""

import copy
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import Interval, StrOptions, _fit_context
from ..losses import SOPRCLoss
from ..metrics import mean_auprc_score
from ..nn import MLP, BaseTorchEstimator, resolve_device
from ..nn._modules import module_output_dim
from ..sampling import ClassBalancedBatchSampler
from ..utils._labels import check_class_counts, encode_labels

__all__ = ["SOPRCEmbedder"]


class SOPRCEmbedder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseTorchEstimator):
    """Embedding whose cosine-similarity ranking maximises AUPRC, trained by SOPRC.

    Learns a map ``x -> e = g(x)`` (an MLP, or any ``torch.nn.Module``) with L2-normalised
    outputs, such that for every item used as a query the items of its class rank first by
    cosine similarity ``e_q . e_i``: it minimises the SOPRC estimator of ``1 - AUPRC`` (mean
    average precision) of Wen et al. (NeurIPS 2022), with the corrections of skrank's design
    notes (see :class:`skrank.losses.SOPRCLoss`). Batches hold ``batch_size //
    samples_per_class`` classes of ``samples_per_class`` items each (fewer classes when the data
    has fewer); every item is seen once per epoch.

    Read more in the :ref:`User Guide <soprc>`.

    Parameters
    ----------
    module : torch.nn.Module or None, default=None
        Embedding network mapping ``(batch, n_features)`` to ``(batch, n_outputs)``; it is
        copied, never modified. ``None`` builds an :class:`~skrank.nn.MLP` from
        ``hidden_layer_sizes`` and ``n_components``.
    hidden_layer_sizes : tuple of int, default=(256,)
        Hidden layers of the default MLP.
    n_components : int, default=64
        Embedding dimension of the default MLP.
    tau1 : float, default=0.1
        Margin of the FPR surrogate (one-sided Huber).
    tau2 : float, default=0.001
        Temperature of the TPR surrogate (one-sided sigmoid).
    beta : float, default=0.1
        Moving-average rate of the per-class auxiliary vectors.
    lambda_pos : float, default=5.0
        Weight of the semi-variance of positive scores below their mean (0 disables it).
    lambda_neg : float, default=1.0
        Weight of the semi-variance of negative scores above their mean (0 disables it).
    max_auxiliary_length : int or None, default=None
        Cap on the length ``L_c = n_c - 1`` of the auxiliary vectors; memory per step grows as
        ``batch_size * (samples_per_class - 1) * L_c``.
    prior : {"dataset", "batch"}, default="dataset"
        Class prior of the estimator; ``"batch"`` is the biased AP-style ablation.
    tpr_source : {"auxiliary", "batch"}, default="auxiliary"
        ``"batch"`` estimates the TPR from the batch positives instead of the auxiliary vectors
        (an ablation).
    samples_per_class : int, default=4
        Items of each class in a batch (``M``).
    batch_size : int, default=224
        Target batch size (``P * M``).
    optimizer : {"sgd", "adam", "adamw"}, default="sgd"
        Optimiser.
    learning_rate : float, default=0.05
        Initial learning rate.
    momentum : float, default=0.9
        Momentum of SGD.
    weight_decay : float, default=4e-4
        L2 penalty.
    lr_milestones : array-like of int or None, default=None
        Epochs after which the learning rate is multiplied by ``lr_decay``.
    lr_decay : float, default=0.1
        Factor of the step decay.
    max_epochs : int, default=20
        Number of passes over the training data.
    tol : float or None, default=None
        Minimum improvement over ``n_iter_no_change`` epochs of the training loss (or of the
        validation mean AUPRC with ``early_stopping``); ``None`` trains ``max_epochs`` epochs.
    n_iter_no_change : int, default=5
        Epochs without an improvement of ``tol`` before training stops.
    early_stopping : bool, default=False
        Stop on the validation mean AUPRC and keep the best weights (needs
        ``validation_fraction``).
    validation_fraction : float or None, default=None
        Fraction of the training data held out (stratified when possible) to record the
        validation mean AUPRC each epoch in ``history_``.
    warm_start : bool, default=False
        Continue from the previous fit's weights and auxiliary vectors.
    device : str or torch.device, default="auto"
        ``"auto"`` uses CUDA when available, else the CPU.
    verbose : int, default=0
        Show a progress bar over epochs.
    random_state : int, RandomState instance or None, default=None
        Seeds the weights, the batches and the validation split.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels seen in ``fit``.
    module_ : torch.nn.Module
        The trained embedding network.
    criterion_ : skrank.losses.SOPRCLoss
        The loss with its auxiliary vectors.
    n_components_ : int
        Embedding dimension.
    history_ : list of dict
        Per epoch: ``loss``, ``learning_rate``, ``duration`` and, with ``validation_fraction``,
        ``validation_score`` (mean AUPRC of the held-out items).
    n_iter_ : int
        Epochs run by the last ``fit``.
    converged_ : bool
        Whether the convergence test stopped training.
    device_ : str
        Device the model was trained on.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen in ``fit``, when they are all strings.

    See Also
    --------
    skrank.losses.SOPRCLoss : The loss, usable in any training loop.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from skrank import SOPRCEmbedder
    >>> X, y = make_blobs(n_samples=200, centers=4, n_features=10, random_state=0)
    >>> embedder = SOPRCEmbedder(hidden_layer_sizes=(32,), n_components=8, max_epochs=5,
    ...                          batch_size=32, random_state=0).fit(X, y)
    >>> embedder.transform(X).shape
    (200, 8)
    >>> embedder.score(X, y) > 0.9
    True
    """

    _retrieval_metric = "cosine"

    _parameter_constraints = {
        **BaseTorchEstimator._torch_parameter_constraints,
        "module": [torch.nn.Module, None],
        "hidden_layer_sizes": ["array-like"],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "tau1": [Interval(Real, 0, None, closed="neither")],
        "tau2": [Interval(Real, 0, None, closed="neither")],
        "beta": [Interval(Real, 0, 1, closed="right")],
        "lambda_pos": [Interval(Real, 0, None, closed="left")],
        "lambda_neg": [Interval(Real, 0, None, closed="left")],
        "max_auxiliary_length": [Interval(Integral, 1, None, closed="left"), None],
        "prior": [StrOptions({"dataset", "batch"})],
        "tpr_source": [StrOptions({"auxiliary", "batch"})],
        "samples_per_class": [Interval(Integral, 2, None, closed="left")],
    }

    def __init__(
        self,
        module=None,
        hidden_layer_sizes=(256,),
        n_components=64,
        *,
        tau1=0.1,
        tau2=0.001,
        beta=0.1,
        lambda_pos=5.0,
        lambda_neg=1.0,
        max_auxiliary_length=None,
        prior="dataset",
        tpr_source="auxiliary",
        samples_per_class=4,
        batch_size=224,
        optimizer="sgd",
        learning_rate=0.05,
        momentum=0.9,
        weight_decay=4e-4,
        lr_milestones=None,
        lr_decay=0.1,
        max_epochs=20,
        tol=None,
        n_iter_no_change=5,
        early_stopping=False,
        validation_fraction=None,
        warm_start=False,
        device="auto",
        verbose=0,
        random_state=None,
    ):
        self.module = module
        self.hidden_layer_sizes = hidden_layer_sizes
        self.n_components = n_components
        self.tau1 = tau1
        self.tau2 = tau2
        self.beta = beta
        self.lambda_pos = lambda_pos
        self.lambda_neg = lambda_neg
        self.max_auxiliary_length = max_auxiliary_length
        self.prior = prior
        self.tpr_source = tpr_source
        self.samples_per_class = samples_per_class
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.lr_milestones = lr_milestones
        self.lr_decay = lr_decay
        self.max_epochs = max_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.warm_start = warm_start
        self.device = device
        self.verbose = verbose
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train the embedding on labelled items.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training items.
        y : array-like of shape (n_samples,)
            Class labels (any hashable values); items of the same class are positives of each
            other.

        Returns
        -------
        self : SOPRCEmbedder
            The fitted embedder.
        """
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[np.float32, np.float64])
        check_classification_targets(y)
        classes, codes = encode_labels(y)
        check_class_counts(np.bincount(codes), needed_by="SOPRCEmbedder")
        if (
            self.warm_start
            and hasattr(self, "classes_")
            and not np.array_equal(classes, self.classes_)
        ):
            raise ValueError(
                "warm_start=True needs the classes of the previous fit; got different classes."
            )
        self.classes_ = classes
        counts = np.bincount(codes)
        stratify = codes if counts.min() >= 2 else None
        X_train, codes_train, validation = self._split_validation(X, codes, stratify=stratify)
        check_class_counts(
            np.bincount(codes_train, minlength=classes.shape[0]),
            input_name="the training part of y",
            needed_by="SOPRCEmbedder",
        )
        if validation is not None and np.bincount(validation[1]).max() < 2:
            raise ValueError(
                f"validation_fraction={self.validation_fraction} leaves no class with two items "
                "in the validation set, so it has no query with a positive; hold out more."
            )
        self._run_training(X_train, codes_train, validation)
        return self

    def _build_module(self, n_features):
        if self.module is None:
            module = MLP(n_features, tuple(self.hidden_layer_sizes), self.n_components)
        else:
            module = copy.deepcopy(self.module)
        device = resolve_device(self.device)
        self.n_components_ = module_output_dim(module.to(device), n_features, device)
        return module

    def _build_criterion(self, targets):
        # A class absent from the training part (possible without stratification) gets a
        # count of 1: it never forms a positive pair.
        counts = np.bincount(targets, minlength=self.classes_.shape[0])
        return SOPRCLoss(
            np.maximum(counts, 1),
            tau1=self.tau1,
            tau2=self.tau2,
            beta=self.beta,
            lambda_pos=self.lambda_pos,
            lambda_neg=self.lambda_neg,
            max_auxiliary_length=self.max_auxiliary_length,
            prior=self.prior,
            tpr_source=self.tpr_source,
        )

    def _batch_sampler(self, targets, random_state):
        return ClassBalancedBatchSampler(
            targets, self.batch_size, self.samples_per_class, random_state=random_state
        )

    def _batch_loss(self, inputs, targets, indices):
        labels = torch.as_tensor(targets[indices], device=inputs.device)
        return self.criterion_(self.module_(inputs), labels)

    def _validation_score(self, X_val, y_val):
        return mean_auprc_score(self._embed(X_val), y_val, metric="cosine")

    def _embed(self, X):
        embedding = self._forward_in_chunks(X)
        norms = np.linalg.norm(embedding, axis=1, keepdims=True)
        return embedding / np.maximum(norms, np.finfo(embedding.dtype).tiny)

    def transform(self, X):
        """Embed items: L2-normalised rows, compared by cosine similarity (dot product).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Items.

        Returns
        -------
        embedding : ndarray of float32 of shape (n_samples, `n_components_`)
            Unit-norm embeddings.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float32, np.float64], reset=False)
        return self._embed(X)

    def score(self, X, y):
        """Mean AUPRC (mean average precision) of retrieval by cosine similarity on ``(X, y)``.

        Every item is a query against all the others; queries without a positive are skipped.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Items.
        y : array-like of shape (n_samples,)
            Their class labels.

        Returns
        -------
        score : float
            Mean over queries of their AUPRC.
        """
        return mean_auprc_score(self.transform(X), y, metric="cosine")

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float32"]
        tags.non_deterministic = False
        return tags
