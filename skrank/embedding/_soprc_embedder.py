"""SOPRCEmbedder: an embedding trained to maximise the AUPRC of cosine-similarity retrieval."""

import copy
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import Interval, StrOptions, _fit_context
from ..losses import SOPRCLoss
from ..metrics import mean_auprc_score
from ..nn import (
    MLP,
    TORCH_ATTRIBUTE_DOCS,
    TORCH_INPUT_DOCS,
    TORCH_PARAMETER_CONSTRAINTS,
    TORCH_PARAMETER_DOCS,
    BaseTorchEstimator,
    Callback,
    UnitRows,
    WeightAveraging,
    check_onnx_installed,
    dense_float32,
    export_module,
    gather_summing_gradient,
    gather_with_gradient,
    input_dtypes,
    module_output_dim,
)
from ..sampling import ClassBalancedBatchSampler
from ..utils._docstrings import fill_shared_docs
from ..utils._labels import CLASS_LABELS_DOCS, check_class_counts, encode_labels
from ..utils._params import ComponentParameters, parameters_for, store_parameters
from ..utils._validation import check_float32_range, naming_inputs

__all__ = ["SOPRCEmbedder"]


def averaging_fraction(classes_per_batch, n_classes):
    """The horizon of ``weight_averaging="auto"``, as a fraction of a fit's steps.

    0.4 when every batch holds every training class, falling linearly with the share of the
    classes a batch holds to 0.2 when it holds at most half of them. Chosen on held-out
    training classes after 5 epochs in batches of 50 classes: with 300 training classes 0.2
    scores 0.014 above 0.4 (35 items a class on average) or level with it (15 on average),
    with 30 classes (200 on average) 0.006 below it.

    Parameters
    ----------
    classes_per_batch : int
        Classes in a batch (``P``).
    n_classes : int
        Classes of the training data.

    Returns
    -------
    fraction : float
        In [0.2, 0.4].
    """
    share = min(classes_per_batch / n_classes, 1.0)
    return 0.4 * max(share, 0.5)


@fill_shared_docs(
    TORCH_PARAMETER_DOCS,
    TORCH_ATTRIBUTE_DOCS,
    methods={**TORCH_INPUT_DOCS, **CLASS_LABELS_DOCS},
)
class SOPRCEmbedder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseTorchEstimator):
    """Embedding whose cosine-similarity ranking maximises AUPRC, trained by SOPRC.

    Learns a map ``x -> e = g(x)`` (an MLP, or any ``torch.nn.Module``) with L2-normalised
    outputs, such that for every item used as a query the items of its class rank first by
    cosine similarity ``e_q . e_i``: it minimises the SOPRC estimator of ``1 - AUPRC`` (mean
    average precision) of Wen et al. (NeurIPS 2022), with the corrections of skrank's design
    notes (see :class:`skrank.losses.SOPRCLoss`). Each batch holds ``P = batch_size //
    samples_per_class`` distinct classes of ``samples_per_class`` items
    (:class:`~skrank.sampling.ClassBalancedBatchSampler`): each class takes ``ceil(n_c /
    samples_per_class)`` groups per epoch, so that every item and every class is drawn at least
    once per epoch (a class too large for one group in every batch cycles through its items
    over epochs), and every batch has the same shape (a class smaller than a group is padded).

    Read more in the :ref:`User Guide <soprc>`.

    Parameters
    ----------
    module : torch.nn.Module or None, default=None
        Embedding network mapping ``(batch, n_features)`` to ``(batch, n_outputs)``; it is
        copied, never modified. ``None`` builds an :class:`~skrank.nn.MLP` from
        ``hidden_layer_sizes`` and ``n_components``.
    hidden_layer_sizes : int or tuple of int, default=(256,)
        Hidden layers of the default MLP (an int: one layer, as in ``MLPClassifier``).
    n_components : int or None, default=None
        Embedding dimension: of the default MLP (64 when None), or, with a ``module``, the
        width its output must have (None: whatever it is).
    samples_per_class : int, default=4
        Items of each class in a batch (``M``); a batch holds ``P = batch_size // M`` classes.
    class_weights : {"proportional", "uniform"}, default="proportional"
        How many groups each class gets per epoch: in proportion to its number of items (every
        item once), or as many for every class (small classes then recur within an epoch).
    weight_averaging : float, "auto" or None, default="auto"
        Horizon of an exponential moving average of the network's weights, as a fraction of
        the fit's training steps ``T`` (``max_epochs`` times the batches per epoch): after
        every step, ``average = decay * average + (1 - decay) * weights`` with ``decay = 1 -
        1 / (weight_averaging * T)`` (0.99 for 260 steps and 0.4). ``"auto"`` takes it from the
        share of the training classes a batch holds: 0.4 when a batch holds every class,
        falling linearly to 0.2 when it holds at most half of them. The averaged weights are
        those scored on the validation part, kept by early stopping and by the fitted
        estimator (a :class:`~skrank.nn.WeightAveraging` callback; one in ``callbacks``
        replaces it). None keeps the last step's weights. Added in 0.2, chosen
        on held-out training classes (``benchmarks/studies/``: +0.021 validation
        mean AUPRC); ``"auto"``: 0.2 rather than 0.4 at 300 training classes of 35 items on
        average (+0.014 after 5 epochs), 0.4 at 30; see the :ref:`User Guide <soprc>`.
    prior_warmup : float or None, default=0.25
        Fraction of the fit's training steps over which the class prior of the loss moves
        from each query's batch rate ``|P_q| / (|P_q| + |N_q|)`` to the dataset prior ``pi_c``
        (log-linearly: :class:`~skrank.losses.SOPRCLoss`'s ``dataset_prior_weight`` rises
        from 0 to 1), with ``prior="dataset"``. With many classes the dataset priors of the
        small classes are tiny, which leaves their queries almost no gradient while the
        ranking is poor; the batch rate does not. None uses the dataset prior from the first
        step. A warm start trains on with the dataset prior. Added in 0.2, chosen on held-out
        training classes of 1,000 classes (``benchmarks/studies/``: +0.008
        validation mean AUPRC after 5 epochs, level after 20); see the :ref:`User Guide
        <soprc>`.
    {component_parameters}
    {shared_parameters}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels seen in ``fit``.
    module_ : torch.nn.Module
        The trained embedding network.
    criterion_ : skrank.losses.SOPRCLoss
        The loss, with its auxiliary vectors when ``tpr_source="auxiliary"`` (with ``"batch"``
        its ``auxiliary`` buffer is empty).
    n_components_ : int
        Embedding dimension.
    {shared_attributes}
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

    retrieval_metric = "cosine"

    _parameter_constraints = {
        **TORCH_PARAMETER_CONSTRAINTS,
        "module": [torch.nn.Module, None],
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "tau1": [Interval(Real, 0, None, closed="neither")],
        "tau2": [Interval(Real, 0, None, closed="neither")],
        "beta": [Interval(Real, 0, 1, closed="right")],
        "lambda_pos": [Interval(Real, 0, None, closed="left")],
        "lambda_neg": [Interval(Real, 0, None, closed="left")],
        "max_auxiliary_length": [Interval(Integral, 1, None, closed="left"), None],
        "prior": [StrOptions({"dataset", "batch"})],
        "tpr_source": [StrOptions({"auxiliary", "batch"})],
        "samples_per_class": [Interval(Integral, 2, None, closed="left")],
        "class_weights": [StrOptions({"proportional", "uniform"})],
        "weight_averaging": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"}), None],
        "prior_warmup": [Interval(Real, 0, 1, closed="right"), None],
    }

    component_parameters = ComponentParameters(
        SOPRCLoss,
        ("tau1", "tau2", "beta", "lambda_pos", "lambda_neg", "max_auxiliary_length", "prior")
        + ("tpr_source",),
        defaults={"lambda_pos": 10.0, "lambda_neg": 2.0, "tpr_source": "batch"},
        notes={
            "lambda_neg": "``(10, 2)`` since 0.2 (the paper's ``(5, 1)`` before), chosen on a "
            "validation split of the MNIST training images (``benchmarks/bench_soprc.py "
            "--validation``: +0.004 validation mean AUPRC over 3 seeds) and level on held-out "
            "training classes (``benchmarks/studies/``: +0.0005 over 6 seeds).",
            "max_auxiliary_length": "Memory per step grows as ``batch_size * "
            "(samples_per_class - 1) * max L_c``.",
            "tpr_source": '``"batch"`` is the default since 0.2: on classes unseen in training '
            "(``benchmarks/studies/``, chosen on held-out training classes) it "
            "gave 0.02 more validation mean AUPRC over three seeds; see the :ref:`User Guide "
            "<soprc>`.",
        },
    )

    engine_defaults = {
        "optimizer": "sgd",
        "learning_rate": 0.05,
        "weight_decay": 4e-4,
        "batch_size": 224,
    }

    def __init__(
        self,
        module=None,
        hidden_layer_sizes=(256,),
        n_components=None,
        *,
        samples_per_class=4,
        class_weights="proportional",
        weight_averaging="auto",
        prior_warmup=0.25,
        **parameters,
    ):
        store_parameters(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train the embedding on labelled items.

        Holds out ``validation_fraction`` of the items (stratified by class when every class
        has two items; the held-out part must keep a class with two items), then trains on
        class-balanced batches for at most ``max_epochs`` epochs. With ``warm_start=True``,
        training continues from the previous fit, whose classes ``y`` must repeat.

        Parameters
        ----------
        {training_X}
        {class_labels}
            Items of the same class are positives of each other.

        Returns
        -------
        self : SOPRCEmbedder
            The fitted embedder.
        """
        if self.batch_size < 2 * self.samples_per_class:
            raise ValueError(
                f"batch_size={self.batch_size} holds fewer than two classes of samples_per_class="
                f"{self.samples_per_class} items (a batch holds batch_size // samples_per_class "
                f"classes), so no item has a negative; use batch_size >= "
                f"{2 * self.samples_per_class}."
            )
        with naming_inputs("X", "y"):
            X, y = validate_data(
                self,
                X,
                y,
                accept_sparse="csr",
                dtype=input_dtypes(X),
                reset=not self.warm_starting(),
            )
        check_float32_range(X, estimator="SOPRCEmbedder")
        classes, codes = encode_labels(y)
        counts = check_class_counts(np.bincount(codes), needed_by="SOPRCEmbedder")
        self.set_classes(classes)
        stratify = codes if counts.min() >= 2 else None
        X_train, codes_train, validation = self.split_validation(X, codes, stratify=stratify)
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
        return self.fit_loop(X_train, codes_train, validation)

    def initialize_module(self, n_features):
        if self.module is None:
            n_components = 64 if self.n_components is None else self.n_components
            module = self._default_network(n_features, n_components)
        else:
            module = copy.deepcopy(self.module)
        device = self.training_device
        width = module_output_dim(module.to(device), n_features, device)
        if self.n_components is not None and width != self.n_components:
            raise ValueError(
                f"The module maps to {width} dimensions but n_components={self.n_components}; "
                "set n_components=None (or to the module's output width)."
            )
        self.n_components_ = width
        return module

    def _default_network(self, n_features, n_components):
        # The loss and transform normalise the embedding: the network need not.
        return MLP(n_features, self.hidden_layer_sizes, n_components, normalize=False)

    def initialize_criterion(self, y):
        # A class absent from the training part (possible without stratification) gets a
        # count of 1: it never forms a positive pair.
        counts = np.bincount(y, minlength=self.classes_.shape[0])
        self._class_counts = np.maximum(counts, 1)
        return SOPRCLoss(self._class_counts, **parameters_for(self, SOPRCLoss))

    def rebuild_module(self, name):
        """The default MLP (not a ``module`` of the user's) and the loss, for loading a saved
        embedder (see :meth:`skrank.nn.BaseTorchEstimator.rebuild_module`)."""
        if name == "module_" and self.module is None:
            return self._default_network(self.n_features_in_, self.n_components_)
        counts = getattr(self, "_class_counts", None)  # set by initialize_criterion
        if name == "criterion_" and counts is not None:
            return SOPRCLoss(counts, **parameters_for(self, SOPRCLoss))
        return None

    def get_batch_sampler(self, y, device, random_state):
        # Data-parallel: the global batch holds world_size equal parts of whole groups.
        world = self.world_size_
        n_classes = np.unique(y).shape[0]
        if n_classes < world:
            raise ValueError(
                f"A data-parallel fit on {world} processes needs at least {world} classes in a "
                f"batch; the training data have {n_classes}."
            )
        groups = world * min(self.batch_size // self.samples_per_class, n_classes // world)
        return ClassBalancedBatchSampler(
            y,
            groups * self.samples_per_class,
            self.samples_per_class,
            class_weights=self.class_weights,
            random_state=random_state,
            device=device,
        )

    def get_default_callbacks(self):
        """The engine's default callbacks, the warm-up of the prior from ``prior_warmup``, and
        a :class:`~skrank.nn.WeightAveraging` from ``weight_averaging`` unless ``callbacks``
        holds one."""
        callbacks = super().get_default_callbacks()
        if self.prior_warmup is not None and self.prior == "dataset":
            callbacks.append(_PriorWarmUp(self.prior_warmup))
        user_averages = any(isinstance(c, WeightAveraging) for c in self.callbacks or [])
        if self.weight_averaging is not None and not user_averages:
            steps = self.max_epochs * len(self.sampler_)
            fraction = self.weight_averaging
            if fraction == "auto":
                fraction = averaging_fraction(
                    self.sampler_.classes_per_batch, self.sampler_.n_classes
                )
            decay = max(0.0, 1.0 - 1.0 / (fraction * steps))
            callbacks.append(WeightAveraging(decay=decay))
        return callbacks

    def prepare_targets(self, y, device):
        return None  # the batches' groups carry the classes

    def get_loss(self, batch, targets):
        embeddings = self.module_(batch.inputs)
        if embeddings.dtype != torch.float32:  # bfloat16 under autocast
            embeddings = embeddings.float()
        groups, valid, queries = batch.groups, batch.valid, None
        context = self.training_context
        if context.active:
            groups, valid = batch.global_groups, batch.global_valid  # the same on every rank
            if self.criterion_.tpr_source == "auxiliary":
                # Every rank computes the loss of the whole batch (and the same vector updates).
                embeddings = gather_with_gradient(embeddings, context)
            else:  # each rank the queries of its own items, against the whole batch
                embeddings = gather_summing_gradient(embeddings, context)
                queries = batch.part
        shape = (groups.shape[0], self.samples_per_class)
        loss = self.criterion_.forward_grouped(
            embeddings.view(*shape, -1), groups, valid.view(shape), queries=queries
        )
        if queries is None:
            return loss
        # The ranks' shares add up to the batch's loss; the engine and DistributedDataParallel
        # average over the ranks.
        return loss * context.world_size

    def validation_score(self, X_val, y_val):
        return mean_auprc_score(
            self._embed(X_val), y_val, metric="cosine", device=self.training_device
        )

    def _embed(self, X):
        embedding = self.forward(X, as_numpy=True)
        norms = np.linalg.norm(embedding, axis=1, keepdims=True)
        return np.divide(
            embedding, np.maximum(norms, np.finfo(embedding.dtype).tiny), out=embedding
        )

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
        return self._embed(self._validate_for_transform(X))

    def _validate_for_transform(self, X):
        check_is_fitted(self)
        with naming_inputs("X"):
            X = validate_data(self, X, accept_sparse="csr", dtype=input_dtypes(X), reset=False)
        check_float32_range(X, estimator="SOPRCEmbedder", fitting=False)
        return X

    def export_onnx(self, path, *, opset_version=None):
        """Write the embedding as an ONNX graph, to serve it without Python or torch.

        The graph maps its input ``X``, a dense float32 array of shape ``(n_samples,
        n_features_in_)``, to its output ``embedding``, of shape ``(n_samples,
        n_components_)``: the network's output rows scaled to unit norm, what :meth:`transform`
        returns, to float32 rounding. The input checks stay outside the graph, and so do
        sparse inputs, which it reads densified: :meth:`onnx_inputs` applies both. Needs
        ``onnx`` and ``onnxscript`` (the ``onnx`` extra, which also installs ``onnxruntime`` to
        run graphs). Read more in the :ref:`User Guide <persistence>`.

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
        >>> embedder.export_onnx("embedder.onnx")  # doctest: +SKIP
        >>> session = onnxruntime.InferenceSession("embedder.onnx")  # doctest: +SKIP
        >>> (embedding,) = session.run(None, {"X": embedder.onnx_inputs(X)})  # doctest: +SKIP
        """
        check_is_fitted(self)
        check_onnx_installed("SOPRCEmbedder.export_onnx")
        network = UnitRows(self.network_)
        return export_module(network, self.n_features_in_, path, ["embedding"], opset_version)

    def onnx_inputs(self, X):
        """``X`` checked and densified as a float32 array: the input of the graph of
        :meth:`export_onnx`.

        Parameters
        ----------
        {X}

        Returns
        -------
        inputs : ndarray of float32 of shape (n_samples, n_features)
        """
        return dense_float32(self._validate_for_transform(X))

    def score(self, X, y):
        """Mean AUPRC (mean average precision) of retrieval by cosine similarity on ``(X, y)``.

        Every item is a query against all the others; queries without a positive are skipped.
        Computed exactly by :func:`skrank.metrics.mean_auprc_score` on the fitted model's
        device (its torch path: float32 similarities).

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
        return mean_auprc_score(
            self.transform(X), y, metric="cosine", device=self.inference_device()
        )

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


class _PriorWarmUp(Callback):
    """Raises the loss's ``dataset_prior_weight`` from 0 to 1 over the first ``fraction`` of
    the fit's training steps, one step at a time (1 after them, after training, and through a
    warm start that trains on from a previous fit)."""

    def __init__(self, fraction):
        self.fraction = fraction

    def on_train_begin(self, estimator, X, y, validation):
        steps = estimator.max_epochs * len(estimator.sampler_)
        self._length = 0.0 if estimator.history_ else self.fraction * steps
        self._step = 0

    def on_batch_begin(self, estimator, batch):
        weight = min(1.0, self._step / self._length) if self._length > 0 else 1.0
        estimator.criterion_.dataset_prior_weight = weight
        self._step += 1

    def on_train_end(self, estimator, interrupted):
        estimator.criterion_.dataset_prior_weight = 1.0

    def state_dict(self):
        return {"step": self._step, "length": self._length}

    def load_state_dict(self, state):
        self._step, self._length = int(state["step"]), float(state["length"])
