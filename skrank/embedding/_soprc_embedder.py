"""SOPRCEmbedder: an embedding trained to maximise the AUPRC of cosine-similarity retrieval."""

import copy
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import extmath
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from .._compat import Interval, StrOptions, _fit_context
from ..losses import SOPRCLoss
from ..metrics import mean_auprc_score
from ..nn import (
    ITEM_SHAPES,
    MLP,
    TORCH_ATTRIBUTE_DOCS,
    TORCH_INPUT_DOCS,
    TORCH_PARAMETER_CONSTRAINTS,
    TORCH_PARAMETER_DOCS,
    BaseTorchEstimator,
    Callback,
    ConvNet,
    ItemDataset,
    UnitRows,
    WeightAveraging,
    check_image_items,
    check_onnx_installed,
    dense_float32,
    export_module,
    gather_summing_gradient,
    gather_with_gradient,
    input_dtypes,
    is_item_source,
    item_rank,
    layer_sizes,
    module_output_dim,
)
from ..sampling import ClassBalancedBatchSampler
from ..utils._docstrings import fill_shared_docs
from ..utils._labels import CLASS_LABELS_DOCS, check_class_counts, encode_labels
from ..utils._params import ComponentParameters, parameters_for, store_parameters
from ..utils._validation import check_float32_range, naming_inputs

__all__ = ["SOPRCEmbedder"]

# hidden_layer_sizes="auto": the layers of the default MLP of feature rows, and the channels of
# the default ConvNet of images.
_DEFAULT_MLP_LAYERS = (256,)
_DEFAULT_CONV_CHANNELS = (32, 64, 128)
# prior_warmup="auto" for feature rows (images: None).
_AUTO_PRIOR_WARMUP = 0.25

_ITEMS_TYPE = (
    "{array-like, sparse matrix} of shape (n_samples, n_features), array-like of shape "
    "(n_samples, height, width) or (n_samples, channels, height, width), "
    "torch.utils.data.Dataset, or sequence of str or os.PathLike"
)
_ITEM_DOCS = {
    "training_X": (
        "X",
        _ITEMS_TYPE,
        "Training items: feature rows (a sparse matrix is densified one mini-batch at a time) "
        "or images (``uint8`` images are read as values / 255 one mini-batch at a time), or a "
        "torch Dataset of item tensors or the paths of image files, read one mini-batch at a "
        "time by ``num_workers`` processes (see :ref:`item-datasets`). The network computes in "
        "float32: the largest absolute value of float items must lie in [2^-63, 2^63] (about "
        "1.1e-19 to 9.2e18), or an error asks to scale ``X``.",
    ),
    "X": (
        "X",
        _ITEMS_TYPE,
        "Items: feature rows, or images of the fit's ``item_shape_`` (for a Dataset or files, "
        "after ``item_transform``).",
    ),
}


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
    methods={**TORCH_INPUT_DOCS, **CLASS_LABELS_DOCS, **_ITEM_DOCS},
)
class SOPRCEmbedder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseTorchEstimator):
    """Embedding whose cosine-similarity ranking maximises AUPRC, trained by SOPRC.

    Learns a map ``x -> e = g(x)`` (an MLP of feature rows, a convolutional network of images,
    or any ``torch.nn.Module``) with L2-normalised outputs, such that for every item used as a
    query the items of its class rank first by cosine similarity ``e_q . e_i``: it minimises the
    SOPRC estimator of ``1 - AUPRC`` (mean average precision) of Wen et al. (NeurIPS 2022), with
    the corrections of skrank's design notes (see :class:`skrank.losses.SOPRCLoss`). Each batch
    holds ``P = batch_size // samples_per_class`` distinct classes of ``samples_per_class``
    items (:class:`~skrank.sampling.ClassBalancedBatchSampler`): each class takes ``ceil(n_c /
    samples_per_class)`` groups per epoch, so that every item and every class is drawn at least
    once per epoch (a class too large for one group in every batch cycles through its items over
    epochs), and every batch has the same shape (a class smaller than a group is padded).

    Read more in the :ref:`User Guide <soprc>`.

    The items are feature rows, ``X`` of shape ``(n_samples, n_features)``, or images:
    ``(n_samples, height, width)`` (one channel) or ``(n_samples, channels, height, width)``,
    whose shape ``(channels, height, width)`` is kept as ``item_shape_``. ``uint8`` images are
    read as values / 255 in [0, 1] (as torchvision and kornia expect), batch by batch, so that
    no float copy of the whole set is made (in memory or memory-mapped); float images are read
    as they are. The network, the ``augmentation`` and the ONNX graph of
    :meth:`export_onnx` all see those values. ``X`` may also be a
    :class:`torch.utils.data.Dataset` of item tensors or the paths of image files (decoded by
    Pillow), read the same way one mini-batch at a time by ``num_workers`` processes, each item
    mapped by ``item_transform``. Read more in :ref:`soprc-images`.

    Parameters
    ----------
    module : torch.nn.Module or None, default=None
        Embedding network mapping a batch of items, ``(batch, n_features)`` or ``(batch,
        *item_shape_)``, to ``(batch, n_outputs)``; it is copied, never modified. ``None``
        builds an :class:`~skrank.nn.MLP` for feature rows and a
        :class:`~skrank.nn.ConvNet` for images, from ``hidden_layer_sizes`` and
        ``n_components``.
    hidden_layer_sizes : "auto", int or tuple of int, default="auto"
        The layers of the default network: for feature rows the widths of the MLP's hidden
        layers (an int: one layer, as in ``MLPClassifier``), ``"auto"`` ``(256,)``; for images
        the output channels of the ConvNet's convolution blocks, ``"auto"`` ``(32, 64, 128)``.
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
        1 / (weight_averaging * T)`` (0.99 for 260 steps and 0.4). ``"auto"``, for feature
        rows, takes it from the share of the training classes a batch holds: 0.4 when a batch
        holds every class, falling linearly to 0.2 when it holds at most half of them; for
        images it is None (see below). The averaged weights are
        those scored on the validation part, kept by early stopping and by the fitted
        estimator (a :class:`~skrank.nn.WeightAveraging` callback; one in ``callbacks``
        replaces it). None keeps the last step's weights. Added in 0.2, chosen
        on held-out training classes (``benchmarks/studies/``: +0.021 validation
        mean AUPRC); ``"auto"``: 0.2 rather than 0.4 at 300 training classes of 35 items on
        average (+0.014 after 5 epochs), 0.4 at 30; for images None, as ``prior_warmup``
        (see there); see the :ref:`User Guide <soprc>`.
    prior_warmup : float, "auto" or None, default="auto"
        Fraction of the fit's training steps over which the class prior of the loss moves
        from each query's batch rate ``|P_q| / (|P_q| + |N_q|)`` to the dataset prior ``pi_c``
        (log-linearly: :class:`~skrank.losses.SOPRCLoss`'s ``dataset_prior_weight`` rises
        from 0 to 1), with ``prior="dataset"``. With many classes the dataset priors of the
        small classes are tiny, which leaves their queries almost no gradient while the
        ranking is poor; the batch rate does not. None uses the dataset prior from the first
        step. A warm start trains on with the dataset prior. ``"auto"`` is 0.25 for feature
        rows and None for images. Added in 0.2, chosen on held-out training classes: for
        feature rows on 1,000 classes (``benchmarks/studies/``: +0.008 validation mean AUPRC
        after 5 epochs, level after 20); for images on 20 held-out training classes of the
        composite digits (``benchmarks/bench_soprc_images.py``, 5 epochs, seeds 0 and 1):
        0.861 validation mean AUPRC with both 0.25 and ``weight_averaging``'s horizon 0.4,
        0.895 with neither (see :ref:`soprc-images`).
    augmentation : callable or None, default=None
        Applied to every training batch before the network: a callable taking a float tensor
        of shape ``(batch, *item_shape_)`` on the training device (the values the network
        reads) and returning one of the same shape, e.g. a kornia ``AugmentationSequential``,
        which draws the parameters of each item independently. Never applied by
        :meth:`transform`, :meth:`score`, the validation score or early stopping. Its random
        draws come from torch's generator, which ``fit`` seeds from ``random_state``: two fits
        on the CPU with the same seed give the same model. A saved model does not store it
        (it serves training only): a model loaded from pickle, joblib or skops has
        ``augmentation=None``; set it again before fitting on with ``warm_start``.
    freeze_batchnorm : bool, default=False
        Keep the batch-normalisation layers of ``module`` as they are: their running
        statistics (the layers stay in evaluation mode each time training resumes) and their
        affine parameters (not trained), as the SOPRC paper does with a pretrained backbone.
        Needs a ``module``: the default network has no pretrained weights.
    item_transform : callable or None, default=None
        Applied to each item of a torch Dataset or of image files ``X`` as it is read, at
        ``fit``, validation and :meth:`transform` alike (e.g. resizing the images to one
        shape): a callable taking a float32 tensor on the CPU, ``(channels, height, width)``
        (``uint8`` values read as values / 255) or ``(n_features,)``, and returning the item
        the network reads, of the same shape for every item. It runs in the ``num_workers``
        processes that read the items (it must pickle where they are spawned); its random
        draws, if any, come from torch's generator, seeded for each read from ``random_state``
        and the item's place in the epoch, so that the model does not depend on
        ``num_workers``. An array ``X`` is refused with it: transform the array first. A saved
        model does not store it: a model loaded from pickle, joblib or skops has
        ``item_transform=None``; set it again before transforming items that need it.
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
    item_shape_ : tuple of int
        The shape of an item: ``(n_features,)`` for feature rows, ``(channels, height,
        width)`` for images.
    {shared_attributes}
    n_features_in_ : int
        Number of features seen in ``fit`` (for images, values of an item).
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
    # The augmentation serves training only, and the item transform is the user's to give
    # again: a saved model stores None in their place, so that nothing of theirs (a kornia
    # pipeline, a function) is needed or run at load time.
    training_only_parameters = ("augmentation", "item_transform")

    _parameter_constraints = {
        **TORCH_PARAMETER_CONSTRAINTS,
        "module": [torch.nn.Module, None],
        "hidden_layer_sizes": [
            "array-like",
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
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
        "prior_warmup": [Interval(Real, 0, 1, closed="right"), StrOptions({"auto"}), None],
        "augmentation": [callable, None],
        "freeze_batchnorm": ["boolean"],
        "item_transform": [callable, None],
    }

    component_parameters = ComponentParameters(
        SOPRCLoss,
        ("tau1", "tau2", "beta", "lambda_pos", "lambda_neg", "max_auxiliary_length", "prior")
        + ("tpr_source",),
        defaults={"lambda_pos": 10.0, "lambda_neg": 2.0, "tpr_source": "batch"},
        notes={
            "lambda_neg": "``(10, 2)`` since 0.2 (the paper's ``(5, 1)`` before), chosen on a "
            "validation split of the MNIST training images (``benchmarks/studies/``: +0.004 "
            "validation mean AUPRC over 3 seeds) and level on held-out "
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
        hidden_layer_sizes="auto",
        n_components=None,
        *,
        samples_per_class=4,
        class_weights="proportional",
        weight_averaging="auto",
        prior_warmup="auto",
        augmentation=None,
        freeze_batchnorm=False,
        item_transform=None,
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
        if self.freeze_batchnorm and self.module is None:
            raise ValueError(
                "freeze_batchnorm=True keeps the batch normalisation of a pretrained module "
                "fixed, but module=None builds a new network, which has no pretrained weights: "
                "pass your module, or set freeze_batchnorm=False."
            )
        X, y = self._validate_training_data(X, y, reset=not self.warm_starting())
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

    def _validate_training_data(self, X, y, reset):
        """``(X, y)`` validated, ``item_shape_`` and ``n_features_in_`` set when ``reset``."""
        if is_item_source(X):
            X = self._item_dataset(X, reset)
        else:
            self._check_no_item_transform()
            rank = item_rank(X)
            if rank == 2:
                with naming_inputs("X", "y"):
                    X, y = validate_data(
                        self, X, y, accept_sparse="csr", dtype=input_dtypes(X), reset=reset
                    )
                check_float32_range(X, estimator="SOPRCEmbedder")
                self._check_item_kind(X, reset)
                if reset:
                    self.item_shape_ = (X.shape[1],)
                return X, y
            if rank not in (3, 4):
                raise ValueError(f"X must be {ITEM_SHAPES}; got an array of shape {np.shape(X)}.")
            self._check_item_kind(X, reset)
            X = check_image_items(
                X, item_shape=None if reset else self.item_shape_, estimator="SOPRCEmbedder"
            )
        with naming_inputs("y"):
            y = column_or_1d(y, warn=True)
        with naming_inputs("X", "y"):
            check_consistent_length(X, y)
        if reset:
            self.item_shape_ = tuple(int(side) for side in X.shape[1:])
            self.n_features_in_ = int(np.prod(self.item_shape_))
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        return X, y

    def _item_dataset(self, X, reset):
        """A Dataset or image files ``X`` as an :class:`~skrank.nn.ItemDataset`, its items
        checked against the fitted ``item_shape_`` unless ``reset``."""
        items = ItemDataset(
            X,
            self.item_transform,
            None if reset else self._item_shape(),
            estimator="SOPRCEmbedder",
        )
        self._check_item_kind(items, reset)
        return items

    def _check_no_item_transform(self):
        if self.item_transform is not None:
            raise ValueError(
                "item_transform applies to the items of a torch Dataset or of image files X as "
                "they are read; X is an array: transform it before, or give it as a Dataset."
            )

    def _check_item_kind(self, X, reset):
        """Refuse images for a model of feature rows and feature rows for a model of images."""
        if reset or not hasattr(self, "n_features_in_"):
            return
        fitted_images = len(self._item_shape()) > 1
        if fitted_images != (item_rank(X) > 2):
            raise ValueError(
                f"X has items of shape {np.shape(X)[1:]}, but SOPRCEmbedder was fitted on "
                + (
                    f"images of shape (channels, height, width) = {self._item_shape()}."
                    if fitted_images
                    else f"feature rows of shape (n_samples, {self.n_features_in_})."
                )
            )

    def _item_shape(self):
        # Models saved before image items had feature rows only, and no item_shape_.
        return getattr(self, "item_shape_", (self.n_features_in_,))

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

    def _default_network(self, item_size, n_components):
        # The loss and transform normalise the embedding: the network need not.
        auto = self.hidden_layer_sizes == "auto"
        if isinstance(item_size, Integral):
            sizes = _DEFAULT_MLP_LAYERS if auto else self.hidden_layer_sizes
            return MLP(item_size, sizes, n_components, normalize=False)
        if len(item_size) == 1:
            return self._default_network(item_size[0], n_components)
        sizes = _DEFAULT_CONV_CHANNELS if auto else layer_sizes(self.hidden_layer_sizes)
        return ConvNet(item_size, sizes, n_components)

    def initialize_optimizers(self):
        """The engine's optimisers, without the parameters of the batch-normalisation layers
        of ``module`` when ``freeze_batchnorm``."""
        if self.freeze_batchnorm:
            for layer in _batch_norm_layers(self.network_):
                layer.requires_grad_(False)
        return super().initialize_optimizers()

    def set_training(self, training=True):
        """The engine's mode, with the batch-normalisation layers of ``module`` in evaluation
        mode when ``freeze_batchnorm``."""
        super().set_training(training)
        if training and self.freeze_batchnorm:
            for layer in _batch_norm_layers(self.network_):
                layer.eval()

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
            return self._default_network(self._item_shape(), self.n_components_)
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
        images = len(self._item_shape()) > 1
        warmup = self.prior_warmup
        if warmup == "auto":
            warmup = None if images else _AUTO_PRIOR_WARMUP
        if warmup is not None and self.prior == "dataset":
            callbacks.append(_PriorWarmUp(warmup))
        user_averages = any(isinstance(c, WeightAveraging) for c in self.callbacks or [])
        fraction = self.weight_averaging
        if fraction == "auto":
            fraction = (
                None
                if images
                else averaging_fraction(self.sampler_.classes_per_batch, self.sampler_.n_classes)
            )
        if fraction is not None and not user_averages:
            steps = self.max_epochs * len(self.sampler_)
            decay = max(0.0, 1.0 - 1.0 / (fraction * steps))
            callbacks.append(WeightAveraging(decay=decay))
        return callbacks

    def prepare_targets(self, y, device):
        return None  # the batches' groups carry the classes

    def get_loss(self, batch, targets):
        inputs = batch.inputs
        if self.augmentation is not None:
            inputs = self._augmented(inputs)
        embeddings = self.module_(inputs)
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
        # The loss computes in float32 (under autocast its products would be bfloat16, and
        # its custom gradients would meet float32 saved tensors).
        with torch.autocast(embeddings.device.type, enabled=False):
            loss = self.criterion_.forward_grouped(
                embeddings.view(*shape, -1), groups, valid.view(shape), queries=queries
            )
        if queries is None:
            return loss
        # The ranks' shares add up to the batch's loss; the engine and DistributedDataParallel
        # average over the ranks.
        return loss * context.world_size

    def _augmented(self, inputs):
        """``augmentation`` of a training batch, outside autocast (on float32 values)."""
        with torch.autocast(inputs.device.type, enabled=False):
            augmented = self.augmentation(inputs)
        if not isinstance(augmented, torch.Tensor) or augmented.shape != inputs.shape:
            shape = (
                tuple(augmented.shape)
                if isinstance(augmented, torch.Tensor)
                else type(augmented).__name__
            )
            raise ValueError(
                f"augmentation must return a tensor of the shape of the batch it is given, "
                f"{tuple(inputs.shape)}; it returned {shape}."
            )
        return augmented

    def validation_score(self, X_val, y_val):
        return mean_auprc_score(
            self._embed(X_val), y_val, metric="cosine", device=self.training_device
        )

    def _embed(self, X):
        embedding = self.forward(X, as_numpy=True)
        norms = extmath.row_norms(embedding)[:, None]  # no temporary of the output's size
        return np.divide(
            embedding, np.maximum(norms, np.finfo(embedding.dtype).tiny), out=embedding
        )

    def transform(self, X):
        """Embed items: L2-normalised rows, compared by cosine similarity (dot product).

        Images are read in chunks sized by scikit-learn's ``working_memory``.

        Parameters
        ----------
        {X}

        Returns
        -------
        embedding : ndarray of float32 of shape (n_samples, `n_components_`)
            Unit-norm embeddings.
        """
        return self._embed(self._validate_for_transform(X))

    def _validate_for_transform(self, X):
        check_is_fitted(self)
        if is_item_source(X):
            return self._item_dataset(X, reset=False)
        self._check_no_item_transform()
        self._check_item_kind(X, reset=False)
        if len(self._item_shape()) > 1:
            return check_image_items(
                X, item_shape=self.item_shape_, estimator="SOPRCEmbedder", fitting=False
            )
        with naming_inputs("X"):
            X = validate_data(self, X, accept_sparse="csr", dtype=input_dtypes(X), reset=False)
        check_float32_range(X, estimator="SOPRCEmbedder", fitting=False)
        return X

    def export_onnx(self, path, *, opset_version=None):
        """Write the embedding as an ONNX graph, to serve it without Python or torch.

        The graph maps its input ``X``, a dense float32 array of shape ``(n_samples,
        n_features_in_)`` (for images ``(n_samples, *item_shape_)``, the float values the
        network reads: ``uint8`` images divided by 255), to its output ``embedding``, of shape
        ``(n_samples, n_components_)``: the network's output rows scaled to unit norm, what
        :meth:`transform` returns, to float32 rounding. The input checks stay outside the
        graph, and so do sparse inputs, which it reads densified, and the scaling of ``uint8``
        images: :meth:`onnx_inputs` applies them. Needs
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
        shape = self._item_shape()
        item_size = shape if len(shape) > 1 else self.n_features_in_
        return export_module(network, item_size, path, ["embedding"], opset_version)

    def onnx_inputs(self, X):
        """``X`` checked and densified as a float32 array: the input of the graph of
        :meth:`export_onnx`. Images get their channel axis, and ``uint8`` images are divided
        by 255.

        Parameters
        ----------
        {X}

        Returns
        -------
        inputs : ndarray of float32
            Of shape ``(n_samples, n_features)`` for feature rows, ``(n_samples,
            *item_shape_)`` for images.
        """
        X = self._validate_for_transform(X)
        if X.ndim > 2 and X.dtype == np.uint8:
            return np.divide(X, 255, dtype=np.float32)
        return dense_float32(X)

    def score(self, X, y):
        """Mean AUPRC (mean average precision) of retrieval by cosine similarity on ``(X, y)``.

        Every item is a query against all the others; queries without a positive are skipped.
        Computed exactly by :func:`skrank.metrics.mean_auprc_score` on the fitted model's
        device (its torch path: float32 similarities).

        Parameters
        ----------
        {X}
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


def _batch_norm_layers(module):
    return [
        layer
        for layer in module.modules()
        if isinstance(layer, torch.nn.modules.batchnorm._BatchNorm)
    ]


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
