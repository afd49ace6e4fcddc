"""Every public function and method that takes arrays leaves them bitwise unchanged.

``ENTRY_POINTS`` calls each callable of a public ``__all__`` (and each public method of its
classes) on inputs of every kind it accepts: writable and read-only dense arrays, read-only
memory maps, CSR matrices and arrays (float32 and float64) with unsorted indices, explicit zeros
and duplicate entries (read-only, and one writable), pandas frames where scikit-learn accepts
them, and torch tensors for the torch functions. After each call every input must hold exactly
the bytes it held before, and no call may fail because a buffer is read-only.

A callable of a public ``__all__`` that is neither in ``ENTRY_POINTS`` nor in ``EXEMPT`` (with
the reason it takes no arrays) fails ``test_every_public_callable_is_checked``, and so does a
public method of a checked class that its entry neither calls nor exempts.
"""

import importlib
import inspect
import io
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from helpers import TensorItems
from matplotlib import pyplot as plt

from skrank import (
    MMC,
    PointwiseROCSimilarity,
    SNMClassifier,
    SOPRCEmbedder,
    datasets,
    losses,
    metrics,
    multilabel,
    nn,
    plotting,
    sampling,
    similarity,
)
from skrank.datasets import dump_extreme_file

PUBLIC_MODULES = [
    "skrank",
    "skrank.datasets",
    "skrank.embedding",
    "skrank.exceptions",
    "skrank.losses",
    "skrank.metrics",
    "skrank.multilabel",
    "skrank.nn",
    "skrank.plotting",
    "skrank.sampling",
    "skrank.similarity",
]

# ------------------------------------------------------------------------------ input kinds
SPARSE_KINDS = (
    "csr_matrix-float32-readonly",
    "csr_matrix-float64-readonly",
    "csr_array-float32-readonly",
    "csr_array-float64-readonly",
    "csr_matrix-float32-writable",
)
DENSE_KINDS = ("ndarray", "ndarray-readonly", "memmap-readonly")
PANDAS_KIND = "pandas"
TENSOR_KIND = "tensor"
ARRAY_KINDS = (*DENSE_KINDS, *SPARSE_KINDS, PANDAS_KIND)


def noncanonical_csr(dense, container=sp.csr_matrix, dtype=np.float64, indicator=False):
    """``dense`` as a CSR matrix in the least canonical form that represents it: each row's
    entries in decreasing column order, one explicit zero where the row has a zero, and its
    first non-zero split into two duplicate entries (halves of the value, or ``1`` and an
    explicit ``0`` for a 0/1 ``indicator``, whose stored values stay 0 or 1)."""
    dense = np.asarray(dense, dtype=dtype)
    data, indices, indptr = [], [], [0]
    for row in dense:
        nonzero = np.flatnonzero(row)[::-1].tolist()
        zeros = np.flatnonzero(row == 0)
        row_data = [row[j] for j in nonzero]
        row_indices = list(nonzero)
        if nonzero:
            first = nonzero[-1]  # the smallest column, stored last
            if indicator:
                row_data.append(0.0)
            else:
                row_data[-1] = row[first] / 2
                row_data.append(row[first] / 2)
            row_indices.append(first)
        if zeros.size:
            row_data.insert(0, 0.0)
            row_indices.insert(0, int(zeros[0]))
        data += row_data
        indices += row_indices
        indptr.append(len(indices))
    return container(
        (
            np.array(data, dtype=dtype),
            np.array(indices, dtype=np.int32),
            np.array(indptr, dtype=np.int32),
        ),
        shape=dense.shape,
    )


def _frozen(array):
    array.setflags(write=False)
    return array


def _snapshot(value):
    """What ``value`` holds, byte for byte, to compare with after a call."""
    if sp.issparse(value):
        return (
            "sparse",
            type(value),
            value.format,
            value.shape,
            *(
                (a.dtype.str, a.shape, a.tobytes())
                for a in (value.data, value.indices, value.indptr)
            ),
        )
    if isinstance(value, pd.DataFrame):
        return (
            "frame",
            list(value.columns),
            list(value.dtypes),
            list(value.index),
            value.to_numpy().tobytes(),
        )
    if isinstance(value, pd.Series):
        return ("series", value.name, list(value.index), value.to_numpy().tobytes())
    if isinstance(value, torch.Tensor):
        contents = value.detach().contiguous().numpy().tobytes()
        return ("tensor", value.dtype, tuple(value.shape), value.stride(), contents)
    return ("array", type(value), value.dtype.str, value.shape, value.strides, value.tobytes())


@dataclass
class Inputs:
    """Inputs of one kind for one entry point; every input made is checked after the call."""

    kind: str
    directory: object
    made: list = field(default_factory=list)

    def _keep(self, value):
        self.made.append((value, _snapshot(value)))
        return value

    def _dense(self, base, dtype=None):
        array = np.array(base, dtype=dtype)
        if self.kind == "ndarray":
            return array
        if self.kind == "memmap-readonly":
            path = self.directory / f"input{len(self.made)}.npy"
            np.save(path, array)
            return np.load(path, mmap_mode="r")
        return _frozen(array)

    def X(self, base, dtype=None):
        """A 2-D array argument that may be sparse or a data frame."""
        if self.kind in SPARSE_KINDS:
            return self._keep(self._sparse(base, indicator=False))
        if self.kind == PANDAS_KIND:
            frame = pd.DataFrame(np.array(base, dtype=dtype))
            frame.columns = [f"x{j}" for j in range(frame.shape[1])]
            return self._keep(frame)
        return self._keep(self._dense(base, dtype))

    def Y(self, base):
        """A 0/1 indicator matrix that may be sparse or a data frame."""
        if self.kind in SPARSE_KINDS:
            return self._keep(self._sparse(base, indicator=True))
        return self.X(base)

    def y(self, base, dtype=None):
        """A 1-D array argument (a data frame kind gives a series)."""
        if self.kind == PANDAS_KIND:
            return self._keep(pd.Series(np.array(base, dtype=dtype), name="y"))
        return self.array(base, dtype)

    def array(self, base, dtype=None):
        """An array argument that is always dense (read-only for the sparse and frame kinds)."""
        if self.kind in (*SPARSE_KINDS, PANDAS_KIND):
            return self._keep(_frozen(np.array(base, dtype=dtype)))
        return self._keep(self._dense(base, dtype))

    def tensor(self, base, dtype=torch.float32):
        return self._keep(torch.tensor(np.asarray(base), dtype=dtype))

    def _sparse(self, base, indicator):
        container_name, dtype, access = self.kind.split("-")
        matrix = noncanonical_csr(
            base, getattr(sp, container_name), np.dtype(dtype), indicator=indicator
        )
        if access == "readonly":
            for array in (matrix.data, matrix.indices, matrix.indptr):
                _frozen(array)
        return matrix

    def assert_unchanged(self):
        changed = [
            f"input {number} ({type(value).__name__})"
            for number, (value, before) in enumerate(self.made)
            if _snapshot(value) != before
        ]
        assert not changed, f"changed by the call: {', '.join(changed)}"


# ------------------------------------------------------------------------------ data
RNG = np.random.RandomState(0)
N, D, CLASSES = 24, 5, 3
LABELS = np.repeat(np.arange(CLASSES), N // CLASSES)
FEATURES = RNG.normal(size=(CLASSES, D))[LABELS] + 0.5 * RNG.normal(size=(N, D))
FEATURES[RNG.rand(N, D) < 0.3] = 0.0  # zeros for the explicit zeros of the sparse kinds
FEATURES[:, 0] += 3.0  # no all-zero row
INDICATOR = (RNG.rand(N, 6) < 0.35).astype(np.float64)
INDICATOR[np.arange(N), LABELS] = 1.0  # every row and every label has a positive
SCORES = RNG.normal(size=(N, 6))
PAIRS = np.stack([FEATURES[:12], FEATURES[12:]], axis=1)
PAIR_LABELS = (LABELS[:12] == LABELS[12:]).astype(np.int64)
PAIR_LABELS[:2] = [1, 0]
SIMILARITY = FEATURES @ FEATURES.T
BINARY = (LABELS == 0).astype(np.int64)

TORCH_FAST = dict(device="cpu", max_epochs=1, random_state=0)
SNM_PARAMS = dict(n_negatives=2, embedding_dim=4, hidden_layer_sizes=(8,), batch_size=8)
SOPRC_PARAMS = dict(hidden_layer_sizes=(8,), n_components=4, batch_size=12)


def _fitted_embedder():
    return SOPRCEmbedder(**SOPRC_PARAMS, **TORCH_FAST).fit(FEATURES, LABELS)


# ------------------------------------------------------------------------------ entry points
@dataclass(frozen=True)
class Entry:
    """How to call a public callable on inputs of a kind.

    ``call(inputs, tmp_path)`` makes its array arguments with ``inputs`` and calls the callable
    (and, for a class, its public methods: ``methods`` names those it calls; ``exempt_methods``
    maps the others to the reason they take no user arrays). ``kinds`` are the input kinds the
    callable accepts.
    """

    call: object
    kinds: tuple = ARRAY_KINDS
    methods: tuple = ()
    exempt_methods: dict = field(default_factory=dict)


NO_SPARSE = (*DENSE_KINDS, PANDAS_KIND)
ARRAYS_ONLY = (*DENSE_KINDS, *SPARSE_KINDS)
DENSE_ONLY = DENSE_KINDS
TENSORS = (TENSOR_KIND,)

_ENGINE_STEPS = (
    "called by fit with the engine's own tensors (batches, targets, weights); fit is checked"
)
ENGINE_METHODS = dict.fromkeys(
    [
        "fit_loop",
        "get_batch_sampler",
        "get_default_callbacks",
        "get_loss",
        "initialize_criterion",
        "initialize_module",
        "initialize_optimizers",
        "load_training_state",
        "prepare_targets",
        "rebuild_module",
        "restore_weights",
        "run_single_epoch",
        "snapshot_weights",
        "stop_training",
        "train_step",
        "training_state",
        "validation_score",
        "inference_device",
        "initialize_weights",
        "optimizers_for",
        "set_classes",
        "set_training",
        "shared_random_state",
        "warm_starting",
    ],
    _ENGINE_STEPS,
)
ENGINE_METHODS["split_validation"] = (
    "called by fit on the validated X and y (the estimators hold out a validation part by "
    "default); fit is checked on every kind"
)
ONNX_METHODS = {
    "export_onnx": "writes the fitted network to a file; takes no arrays",
    "onnx_inputs": "example inputs for export_onnx, built from the fitted estimator",
    "decision_function_from_onnx": (
        "reads the outputs of an ONNX runtime session; tests/multilabel/test_onnx.py checks it"
    ),
}


def _call_snm(inputs, tmp_path):
    X = inputs.X(FEATURES)
    model = SNMClassifier(**SNM_PARAMS, **TORCH_FAST).fit(X, inputs.y(LABELS))
    model.predict(inputs.X(FEATURES))
    model.predict_top_k(inputs.X(FEATURES), 2, return_scores=True)
    model.decision_function(inputs.X(FEATURES))
    model.predict_proba(inputs.X(FEATURES))
    model.forward(inputs.X(FEATURES))
    model.score(inputs.X(FEATURES), inputs.y(LABELS))
    multilabel_model = SNMClassifier(**SNM_PARAMS, **TORCH_FAST).fit(
        inputs.X(FEATURES, np.float32), inputs.Y(INDICATOR)
    )
    multilabel_model.predict(inputs.X(FEATURES))
    multilabel_model.predict_proba(inputs.X(FEATURES))
    multilabel_model.predict_top_k(inputs.X(FEATURES), 2, return_proba=True)
    multilabel_model.score(inputs.X(FEATURES), inputs.Y(INDICATOR))


def _call_soprc(inputs, tmp_path):
    model = SOPRCEmbedder(**SOPRC_PARAMS, **TORCH_FAST)
    model.fit(inputs.X(FEATURES, np.float32), inputs.y(LABELS))  # float32: kept as it is
    model.fit(inputs.X(FEATURES), inputs.y(LABELS))
    model.transform(inputs.X(FEATURES))
    model.forward(inputs.X(FEATURES))
    model.score(inputs.X(FEATURES), inputs.y(LABELS))


def _call_mmc(inputs, tmp_path):
    model = MMC(max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # five iterations do not converge
        model.fit(inputs.X(FEATURES), inputs.y(LABELS))
    model.transform(inputs.X(FEATURES))
    model.pair_distance(inputs.X(FEATURES[:12]), inputs.X(FEATURES[12:]))
    model.pair_distance(inputs.array(PAIRS))
    model.pair_score(inputs.X(FEATURES[:12]), inputs.X(FEATURES[12:]))
    model.figure_of_merit(inputs.X(FEATURES), inputs.y(LABELS))
    model.decision_function(inputs.array(PAIRS))
    model.objective_and_constraint(inputs.X(FEATURES), inputs.y(LABELS))
    model.score(inputs.X(FEATURES), inputs.y(LABELS))
    model.score(inputs.array(PAIRS), inputs.y(PAIR_LABELS))
    pair_model = MMC(max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pair_model.fit(inputs.array(PAIRS), inputs.y(PAIR_LABELS))


def _call_pointwise_roc(inputs, tmp_path):
    model = PointwiseROCSimilarity(alpha=0.5, random_state=0)
    model.fit(inputs.X(FEATURES), inputs.y(LABELS))
    model.partial_fit(inputs.X(FEATURES), inputs.y(LABELS))
    model.calibrate_threshold(inputs.X(FEATURES), inputs.y(LABELS))
    with pytest.warns(FutureWarning, match="renamed pair_score"):  # the deprecated name
        model.similarity(inputs.X(FEATURES[:12]), inputs.X(FEATURES[12:]))
    model.pair_score(inputs.X(FEATURES[:12]), inputs.X(FEATURES[12:]))
    model.pairwise_similarity(inputs.X(FEATURES), inputs.X(FEATURES[:4]))
    model.decision_function(inputs.array(PAIRS))
    model.predict(inputs.array(PAIRS))
    model.score(inputs.X(FEATURES), inputs.y(LABELS))
    streamed = PointwiseROCSimilarity(alpha=0.5, random_state=0)
    streamed.partial_fit(inputs.X(FEATURES[:12]), inputs.y(LABELS[:12]), classes=np.arange(3))


def _call_dump_extreme_file(inputs, tmp_path):
    datasets.dump_extreme_file(inputs.X(FEATURES), inputs.Y(INDICATOR), io.BytesIO())


def _retrieval(function, **kwargs):
    def call(inputs, tmp_path):
        function(inputs.X(FEATURES), inputs.y(LABELS), **kwargs)

    return call


def _top_k_metric(function, **kwargs):
    def call(inputs, tmp_path):
        function(inputs.y(LABELS), inputs.array(SCORES[:, :3]), 2, **kwargs)
        function(inputs.Y(INDICATOR), inputs.array(SCORES), 2, **kwargs)

    return call


def _call_psp(inputs, tmp_path):
    propensities = inputs.array(np.linspace(0.2, 0.9, 6))
    metrics.top_k_psp_score(inputs.Y(INDICATOR), inputs.array(SCORES), 2, propensities=propensities)
    metrics.top_k_psp_score(
        inputs.y(LABELS), inputs.array(SCORES[:, :3]), 2, propensities=inputs.array([0.5] * 3)
    )


def _call_top_k_label_scores(inputs, tmp_path):
    top = np.argsort(-SCORES, axis=1, kind="stable")[:, :3]
    propensities = inputs.array(np.linspace(0.2, 0.9, 6))
    metrics.top_k_label_scores(inputs.Y(INDICATOR), inputs.array(top), 2, propensities=propensities)


def _call_scorer(make):
    def call(inputs, tmp_path):
        make()(_fitted_embedder(), inputs.X(FEATURES), inputs.y(LABELS))

    return call


def _call_faiss(cls, **kwargs):
    def call(inputs, tmp_path):
        pytest.importorskip("faiss")
        table = RNG.normal(size=(64, 4)).astype(np.float32)
        index = cls(inputs.array(table, np.float32), **kwargs)
        queries = inputs.array(table[:5], np.float32)
        index.search(queries, 3)
        if hasattr(index, "calibrate"):
            exact = np.argsort(-(table[:5] @ table.T), axis=1)[:, :3]
            index.calibrate(queries, inputs.array(exact))

    return call


def _call_top_k_inner_products(inputs, tmp_path):
    table = inputs.tensor(FEATURES)
    metrics.top_k_inner_products(inputs.tensor(FEATURES[:4]), lambda a, b: table[a:b], N, 3)


def _call_expected_calibration_error(inputs, tmp_path):
    metrics.expected_calibration_error(
        inputs.array(np.array([0, 1, 1, 0, 1])), inputs.array(np.array([0.1, 0.7, 0.9, 0.4, 0.5]))
    )


def _call_label_propensities(inputs, tmp_path):
    metrics.label_propensities(inputs.Y(INDICATOR))


def _call_pair_metrics(function, *args):
    def call(inputs, tmp_path):
        function(inputs.array(SIMILARITY), inputs.y(LABELS), *args)

    return call


def _call_pointwise_roc_score(inputs, tmp_path):
    metrics.pointwise_roc_score(inputs.y(BINARY), inputs.y(FEATURES[:, 0]), 0.25)


def _call_auprc(inputs, tmp_path):
    metrics.auprc_score(inputs.y(BINARY), inputs.y(FEATURES[:, 0]))


def _call_top_k_indices(inputs, tmp_path):
    metrics.top_k_indices(inputs.array(SCORES), 2)


def _labels_only(function, *args):
    def call(inputs, tmp_path):
        function(inputs.y(LABELS), *args)

    return call


def _call_iter_negative_pairs(inputs, tmp_path):
    list(sampling.iter_negative_pairs(inputs.y(LABELS), max_pairs_per_block=50))


def _call_draw_positive_labels(inputs, tmp_path):
    sampling.draw_positive_labels(inputs.Y(INDICATOR), random_state=0)


def _call_batch_sampler(inputs, tmp_path):
    sampler = sampling.ClassBalancedBatchSampler(inputs.y(LABELS), 8, 4, random_state=0)
    sampler.epoch()


def _call_negative_label_sampler(inputs, tmp_path):
    sampler = sampling.NegativeLabelSampler(6, 2, random_state=0)
    sampler.sample(inputs.y(LABELS))
    if inputs.kind in SPARSE_KINDS:  # an indicator of positive labels is sparse
        sampler.sample(inputs.Y(INDICATOR))


def _call_training_inputs(inputs, tmp_path):
    for sparse_rows in (False, True):
        training = nn.TrainingInputs(inputs.X(FEATURES, np.float32), "cpu", sparse_rows)
        training.rows(torch.arange(4, device=training.index_device))
        list(training.chunks(10))
        epoch = sampling.ShuffledBatchSampler(N, 8, random_state=0).epoch()
        training.batch(epoch, 0)
        list(training.batches(epoch))


def _call_pair_scatter(function):
    def call(inputs, tmp_path):
        function(inputs.X(FEATURES), inputs.y(LABELS))

    return call


def _call_pair_statistics(inputs, tmp_path):
    statistics = similarity.PairStatistics(D)
    statistics.update(inputs.X(FEATURES), inputs.y(LABELS))
    other = similarity.PairStatistics(D)
    other.update(inputs.X(FEATURES[:6]), inputs.y(LABELS[:6]))
    statistics.merge(other)
    statistics.positive_matrix()
    statistics.negative_matrix()


def _problem_matrices():
    statistics = similarity.PairStatistics(D)
    unit = FEATURES / np.linalg.norm(FEATURES, axis=1, keepdims=True)
    statistics.update(unit, LABELS)
    return unit, statistics.positive_matrix(), statistics.negative_matrix()


def _call_solver(function, **kwargs):
    def call(inputs, tmp_path):
        _, P, N_matrix = _problem_matrices()
        function(inputs.array(P), inputs.array(N_matrix), 0.0, **kwargs)

    return call


def _call_feasible_alpha_range(inputs, tmp_path):
    similarity.feasible_alpha_range(inputs.array(_problem_matrices()[2]))


def _call_regularized_positive_matrix(inputs, tmp_path):
    similarity.regularized_positive_matrix(inputs.array(_problem_matrices()[1]), 3.0)


def _call_select_alpha(inputs, tmp_path):
    unit, P, N_matrix = _problem_matrices()
    similarity.select_alpha(
        inputs.array(P), inputs.array(N_matrix), inputs.X(unit), inputs.y(LABELS), 0.25,
        n_levels=3,
    )  # fmt: skip


def _call_negative_pair_outer_mean(inputs, tmp_path):
    sample = sampling.sample_negative_pairs(LABELS, 20, random_state=0)
    pairs = sampling.PairSample(
        inputs.array(sample.first), inputs.array(sample.second), inputs.array(sample.weight)
    )
    similarity.negative_pair_outer_mean(inputs.X(FEATURES), pairs)


def _call_figure_of_merit(inputs, tmp_path):
    similarity.figure_of_merit(inputs.X(FEATURES), inputs.y(LABELS))


def _call_negative_pair_similarities(inputs, tmp_path):
    A = np.eye(FEATURES.shape[1])
    similarity.negative_pair_similarities(
        inputs.X(FEATURES), inputs.array(np.unique(LABELS, return_inverse=True)[1]),
        inputs.array(A), max_pairs=10, random_state=0,
    )  # fmt: skip


def _call_threshold_at_fpr(inputs, tmp_path):
    similarity.threshold_at_fpr(inputs.array(np.linspace(-1.0, 1.0, 25)), 0.1)


def _call_pair_groups(inputs, tmp_path):
    similarity.pair_groups(inputs.array(np.array([[0, 1], [1, 2], [4, 5]])))
    similarity.pair_groups(inputs.array(PAIRS))


def _call_one_standard_error_rule(inputs, tmp_path):
    refit = similarity.one_standard_error_rule({"alpha": 0.5})
    refit(
        {
            "params": [{"alpha": 0.5}, {"alpha": 0.4}],
            "mean_test_score": inputs.array([0.5, 0.6]),
            "std_test_score": inputs.array([0.1, 0.1]),
            "split0_test_score": inputs.array([0.4, 0.5]),
            "split1_test_score": inputs.array([0.6, 0.7]),
        }
    )


def _call_mean_precision_recall_display(inputs, tmp_path):
    display = plotting.MeanPrecisionRecallDisplay(
        inputs.array([1.0, 0.5]), inputs.array([0.0, 1.0])
    )
    display.plot()
    plotting.MeanPrecisionRecallDisplay.from_predictions(inputs.y(LABELS), inputs.X(FEATURES))
    plotting.MeanPrecisionRecallDisplay.from_estimator(
        _fitted_embedder(), inputs.X(FEATURES), inputs.y(LABELS)
    )


def _call_pair_roc_display(inputs, tmp_path):
    display = plotting.PairROCDisplay(inputs.array([0.0, 0.5, 1.0]), inputs.array([0.0, 0.8, 1.0]))
    display.plot()
    plotting.PairROCDisplay.from_predictions(inputs.y(PAIR_LABELS), inputs.y(PAIRS[:, 0, 0]))
    model = PointwiseROCSimilarity(alpha=0.5).fit(FEATURES, LABELS)
    plotting.PairROCDisplay.from_estimator(model, inputs.X(FEATURES), inputs.y(LABELS))


def _call_training_history_display(inputs, tmp_path):
    display = plotting.TrainingHistoryDisplay(
        inputs.array([1, 2]), inputs.array([0.5, 0.4]), validation_score=inputs.array([0.1, 0.2])
    )
    display.plot()
    history = [{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": 0.4}]
    plotting.TrainingHistoryDisplay.from_history(history)
    plotting.TrainingHistoryDisplay.from_estimator(_fitted_embedder())


# Torch functions: tensors in, tensors out.
POSITIVE = np.linspace(-0.5, 0.9, 6)
NEGATIVES = np.linspace(-0.9, 0.8, 24).reshape(6, 4)


def _call_surrogate(function, *args):
    def call(inputs, tmp_path):
        function(inputs.tensor(NEGATIVES), *args)

    return call


def _call_owl(function, **kwargs):
    def call(inputs, tmp_path):
        weights = inputs.tensor(losses.owl_weights("topk", 4, top_k=2))
        mask = inputs.tensor(NEGATIVES > 0.5, dtype=torch.bool)
        function(inputs.tensor(POSITIVE), inputs.tensor(NEGATIVES), weights, mask=mask, **kwargs)

    return call


def _call_ordered_weighted_loss_module(inputs, tmp_path):
    loss = losses.OrderedWeightedLoss(inputs.tensor(losses.owl_weights("topk", 4, top_k=2)))
    mask = inputs.tensor(NEGATIVES > 0.5, dtype=torch.bool)
    loss(inputs.tensor(POSITIVE), inputs.tensor(NEGATIVES), mask=mask)
    loss.example_losses(inputs.tensor(POSITIVE), inputs.tensor(NEGATIVES), mask)


def _call_soprc_loss_module(inputs, tmp_path):
    loss = losses.SOPRCLoss(inputs.tensor([4, 4, 4], dtype=torch.long))
    embeddings = inputs.tensor(FEATURES[:12])
    labels = inputs.tensor(LABELS[:12] * 0 + np.repeat([0, 1, 2], 4), dtype=torch.long)
    loss(embeddings, labels)
    loss.forward_grouped(inputs.tensor(FEATURES[:12].reshape(3, 4, D)), labels[::4].clone())
    loss.score_loss(inputs.tensor(np.clip(SIMILARITY[:12, :12] / 40, -1, 1)), labels)
    loss.auxiliary_vector(0)


def _call_soprc_query_loss(inputs, tmp_path):
    losses.soprc_query_loss(
        inputs.tensor(POSITIVE[:3]), inputs.tensor(NEGATIVES[0]), inputs.tensor(POSITIVE), 0.3
    )


def _call_interpolate_scores(inputs, tmp_path):
    losses.interpolate_scores(inputs.tensor(POSITIVE), 4)


def _call_one_sided(function):
    def call(inputs, tmp_path):
        function(inputs.tensor(NEGATIVES), 0.1)

    return call


def _call_label_embedding_network(inputs, tmp_path):
    network = multilabel.LabelEmbeddingNetwork(D, 6, embedding_dim=4, hidden_layer_sizes=(8,))
    embeddings = network(inputs.tensor(FEATURES))
    network.label_table()
    labels = inputs.tensor([0, 2, 5], dtype=torch.long)
    network.label_vectors(labels)
    network.normalize_labels(inputs.tensor(NEGATIVES[:3, :4]))
    network.scores(embeddings.detach(), labels)
    network.positive_scores(embeddings.detach(), inputs.tensor(LABELS, dtype=torch.long))


def _call_mlp(inputs, tmp_path):
    nn.MLP(D, (8,), 4)(inputs.tensor(FEATURES))


def _call_conv_net(inputs, tmp_path):
    nn.ConvNet((1, 2, 2), (4,), 3)(inputs.tensor(FEATURES[:, :4].reshape(-1, 1, 2, 2)))


def _call_sparse_linear(inputs, tmp_path):
    layer = nn.SparseLinear(D, 3)
    layer(inputs.tensor(FEATURES))
    layer(
        nn.SparseRows(
            inputs.tensor([[0, 2], [1, D]], dtype=torch.long), inputs.tensor([[1.0, 2.0], [3.0, 0]])
        )
    )


def _call_row_subset(inputs, tmp_path):
    subset = nn.RowSubset(inputs.X(FEATURES), inputs.array([3, 1, 4, 1]))
    subset.take(inputs.array([0, 2]))
    np.asarray(subset)


def _call_dense_float32(inputs, tmp_path):
    nn.dense_float32(inputs.X(FEATURES))


def _call_check_image_items(inputs, tmp_path):
    images = np.abs(FEATURES[:, :4]).reshape(-1, 2, 2)
    nn.check_image_items(inputs.array(images))
    nn.check_image_items(inputs.array(np.minimum(images * 50, 255), dtype=np.uint8))


def _call_item_dataset(inputs, tmp_path):
    """Items of a Dataset of the user's arrays: float images, uint8 images (scaled) and
    feature rows, read through an item transform."""
    images = np.abs(FEATURES[:, :4]).reshape(-1, 2, 2)
    for values in (images, np.minimum(images * 50, 255).astype(np.uint8), FEATURES):
        items = nn.ItemDataset(TensorItems(inputs.array(values)), item_transform=lambda x: 2 * x)
        items.read(1, seed=0)
        np.asarray(items[np.array([2, 0])])


def _call_input_inspection(function):
    def call(inputs, tmp_path):
        function(inputs.X(FEATURES))

    return call


def _call_unit_rows(inputs, tmp_path):
    nn.UnitRows(torch.nn.Linear(D, 3))(inputs.tensor(FEATURES))


def _call_gather(function):
    def call(inputs, tmp_path):
        function(inputs.tensor(FEATURES), nn.DistributedContext(0, 1))

    return call


_TAKES_NO_ARRAYS = "takes no arrays"
_RECORD = (
    "a record of the arrays it is given (a named tuple or a frozen dataclass): computes nothing"
)
_CALLBACK = "a training callback: receives the estimator, takes no user arrays"
_READER = (
    "reads a file, takes no arrays; the readers are fuzzed in tests/datasets/test_reader_fuzz.py"
)
_GENERATOR = "draws a data set from its parameters, takes no arrays"
_LOADER = "loads a data set shipped with skrank, takes no arrays"
_WARNING = "an exception or warning class"

EXEMPT = {
    "skrank.datasets.load_bibtex": _LOADER,
    "skrank.datasets.load_corel5k": _LOADER,
    "skrank.datasets.load_mnist": _LOADER,
    "skrank.datasets.load_extreme_file": _READER,
    "skrank.datasets.load_extreme_split": _READER,
    "skrank.datasets.load_sparse_arff": _READER,
    "skrank.datasets.make_composite_digits": _GENERATOR,
    "skrank.datasets.make_extreme_classification": _GENERATOR,
    "skrank.datasets.make_large_output_classification": _GENERATOR,
    "skrank.datasets.make_score_simulation": _GENERATOR,
    "skrank.datasets.make_sparse_multilabel_classification": _GENERATOR,
    "skrank.datasets.make_sphere_classes": _GENERATOR,
    "skrank.exceptions.DivergenceWarning": _WARNING,
    "skrank.exceptions.ExtremeFormatError": _WARNING,
    "skrank.exceptions.InconsistentVersionWarning": _WARNING,
    "skrank.exceptions.SolverAccuracyWarning": _WARNING,
    "skrank.losses.get_surrogate": "returns a surrogate by name; the surrogates are checked",
    "skrank.losses.owl_weights": "computes weights from their parameters, " + _TAKES_NO_ARRAYS,
    "skrank.multilabel.RowSparseOptimizer": (
        "an optimiser: updating the table it is given in place is what it is for"
    ),
    "skrank.nn.DistributedContext": _RECORD,
    "skrank.nn.check_onnx_installed": "checks that packages are installed, " + _TAKES_NO_ARRAYS,
    "skrank.nn.current_context": "reads the process group of a device, " + _TAKES_NO_ARRAYS,
    "skrank.nn.export_module": "writes a module to a file, " + _TAKES_NO_ARRAYS,
    "skrank.nn.layer_sizes": "normalises a layer-size parameter, " + _TAKES_NO_ARRAYS,
    "skrank.nn.read_image": "decodes an image file, " + _TAKES_NO_ARRAYS,
    "skrank.nn.module_output_dim": (
        "runs a module on a batch of zeros it makes itself, " + _TAKES_NO_ARRAYS
    ),
    "skrank.nn.BaseTorchEstimator": (
        "the abstract base of the torch estimators: its methods are checked through "
        "SNMClassifier and SOPRCEmbedder"
    ),
    "skrank.nn.Batch": _RECORD,
    "skrank.nn.Callback": _CALLBACK,
    "skrank.nn.Checkpoint": _CALLBACK,
    "skrank.nn.ComponentParameters": "documents a component's parameters, " + _TAKES_NO_ARRAYS,
    "skrank.nn.EarlyStopping": _CALLBACK,
    "skrank.nn.LRScheduler": _CALLBACK,
    "skrank.nn.ProgressBar": _CALLBACK,
    "skrank.nn.RowSparseOptimizer": (
        "an optimiser: updating the table it is given in place is what it is for"
    ),
    "skrank.nn.SparseRows": _RECORD,
    "skrank.nn.WeightAveraging": _CALLBACK,
    "skrank.nn.resolve_device": "resolves a device name, " + _TAKES_NO_ARRAYS,
    "skrank.nn.store_parameters": "stores constructor arguments on an estimator, "
    + _TAKES_NO_ARRAYS,
    "skrank.sampling.EpochBatches": _RECORD,
    "skrank.sampling.PairSample": _RECORD,
    "skrank.sampling.ShuffledBatchSampler": "draws batches of row numbers, " + _TAKES_NO_ARRAYS,
    "skrank.sampling.sample_distinct_labels": "draws labels from counts, " + _TAKES_NO_ARRAYS,
    "skrank.similarity.NeymanPearsonSolution": _RECORD,
}
_MODULE_REPR = {"extra_repr": "describes the module, " + _TAKES_NO_ARRAYS}

_ESTIMATOR_COMMON = {"fit", "score"}
ENTRY_POINTS = {
    "skrank.SNMClassifier": Entry(
        _call_snm,
        methods=(
            "fit",
            "predict",
            "predict_top_k",
            "predict_proba",
            "decision_function",
            "forward",
            "score",
        ),
        exempt_methods={**ENGINE_METHODS, **ONNX_METHODS},
    ),
    "skrank.SOPRCEmbedder": Entry(
        _call_soprc,
        methods=("fit", "transform", "forward", "score"),
        exempt_methods={
            **ENGINE_METHODS,
            "export_onnx": ONNX_METHODS["export_onnx"],
            "onnx_inputs": ONNX_METHODS["onnx_inputs"],
        },
    ),
    "skrank.MMC": Entry(
        _call_mmc,
        kinds=NO_SPARSE,
        methods=(
            "fit",
            "transform",
            "pair_distance",
            "pair_score",
            "figure_of_merit",
            "decision_function",
            "objective_and_constraint",
            "score",
        ),
        exempt_methods={
            "get_mahalanobis_matrix": "returns the fitted matrix, " + _TAKES_NO_ARRAYS,
            "get_metric": "returns the fitted distance function, " + _TAKES_NO_ARRAYS,
        },
    ),
    "skrank.PointwiseROCSimilarity": Entry(
        _call_pointwise_roc,
        kinds=NO_SPARSE,
        methods=(
            "fit",
            "partial_fit",
            "calibrate_threshold",
            "similarity",
            "pair_score",
            "pairwise_similarity",
            "decision_function",
            "predict",
            "score",
        ),
    ),
    "skrank.datasets.dump_extreme_file": Entry(_call_dump_extreme_file, kinds=ARRAYS_ONLY),
    "skrank.losses.OrderedWeightedLoss": Entry(
        _call_ordered_weighted_loss_module,
        kinds=TENSORS,
        methods=("forward", "example_losses"),
        exempt_methods=_MODULE_REPR,
    ),
    "skrank.losses.SOPRCLoss": Entry(
        _call_soprc_loss_module,
        kinds=TENSORS,
        methods=("forward", "forward_grouped", "score_loss", "auxiliary_vector"),
        exempt_methods=_MODULE_REPR,
    ),
    "skrank.losses.bowl": Entry(_call_owl(losses.bowl), kinds=TENSORS),
    "skrank.losses.powl": Entry(_call_owl(losses.powl), kinds=TENSORS),
    "skrank.losses.ordered_weighted_loss": Entry(
        _call_owl(losses.ordered_weighted_loss, loss="powl"), kinds=TENSORS
    ),
    "skrank.losses.exponential": Entry(_call_surrogate(losses.exponential), kinds=TENSORS),
    "skrank.losses.hinge": Entry(_call_surrogate(losses.hinge), kinds=TENSORS),
    "skrank.losses.logistic": Entry(_call_surrogate(losses.logistic), kinds=TENSORS),
    "skrank.losses.ramp": Entry(_call_surrogate(losses.ramp, 0.5), kinds=TENSORS),
    "skrank.losses.squared_hinge": Entry(_call_surrogate(losses.squared_hinge), kinds=TENSORS),
    "skrank.losses.interpolate_scores": Entry(_call_interpolate_scores, kinds=TENSORS),
    "skrank.losses.one_sided_huber": Entry(_call_one_sided(losses.one_sided_huber), kinds=TENSORS),
    "skrank.losses.one_sided_sigmoid": Entry(
        _call_one_sided(losses.one_sided_sigmoid), kinds=TENSORS
    ),
    "skrank.losses.soprc_query_loss": Entry(_call_soprc_query_loss, kinds=TENSORS),
    "skrank.metrics.FaissIVFIndex": Entry(
        _call_faiss(metrics.FaissIVFIndex, n_lists=4),
        kinds=DENSE_ONLY,
        methods=("search", "calibrate"),
    ),
    "skrank.metrics.FaissInnerProductIndex": Entry(
        _call_faiss(metrics.FaissInnerProductIndex), kinds=DENSE_ONLY, methods=("search",)
    ),
    "skrank.metrics.auprc_score": Entry(_call_auprc, kinds=NO_SPARSE),
    "skrank.metrics.get_scorer": Entry(
        _call_scorer(lambda: metrics.get_scorer("mean_auprc")), kinds=NO_SPARSE
    ),
    "skrank.metrics.make_retrieval_scorer": Entry(
        _call_scorer(lambda: metrics.make_retrieval_scorer(metrics.recall_at_k_score, k=2)),
        kinds=NO_SPARSE,
    ),
    "skrank.metrics.expected_calibration_error": Entry(
        _call_expected_calibration_error, kinds=DENSE_ONLY
    ),
    "skrank.metrics.label_propensities": Entry(_call_label_propensities),
    "skrank.metrics.map_at_r_score": Entry(_retrieval(metrics.map_at_r_score), kinds=NO_SPARSE),
    "skrank.metrics.mean_auprc_score": Entry(_retrieval(metrics.mean_auprc_score), kinds=NO_SPARSE),
    "skrank.metrics.mean_precision_recall_curve": Entry(
        _retrieval(metrics.mean_precision_recall_curve), kinds=NO_SPARSE
    ),
    "skrank.metrics.precision_at_k_score": Entry(
        _retrieval(metrics.precision_at_k_score, k=2), kinds=NO_SPARSE
    ),
    "skrank.metrics.query_auprc_scores": Entry(
        _retrieval(metrics.query_auprc_scores), kinds=NO_SPARSE
    ),
    "skrank.metrics.r_precision_score": Entry(
        _retrieval(metrics.r_precision_score), kinds=NO_SPARSE
    ),
    "skrank.metrics.recall_at_k_score": Entry(
        _retrieval(metrics.recall_at_k_score, k=2), kinds=NO_SPARSE
    ),
    "skrank.metrics.retrieval_scores": Entry(
        _retrieval(metrics.retrieval_scores, k=(1, 2), at_r=True), kinds=NO_SPARSE
    ),
    "skrank.metrics.pair_scores_and_labels": Entry(
        _call_pair_metrics(metrics.pair_scores_and_labels), kinds=NO_SPARSE
    ),
    "skrank.metrics.pairwise_roc_score": Entry(
        _call_pair_metrics(metrics.pairwise_roc_score, 0.25), kinds=NO_SPARSE
    ),
    "skrank.metrics.pointwise_roc_score": Entry(_call_pointwise_roc_score, kinds=NO_SPARSE),
    "skrank.metrics.top_k_indices": Entry(_call_top_k_indices, kinds=DENSE_ONLY),
    "skrank.metrics.top_k_inner_products": Entry(_call_top_k_inner_products, kinds=TENSORS),
    "skrank.metrics.top_k_ndcg_score": Entry(_top_k_metric(metrics.top_k_ndcg_score)),
    "skrank.metrics.top_k_precision_score": Entry(_top_k_metric(metrics.top_k_precision_score)),
    "skrank.metrics.top_k_recall_score": Entry(_top_k_metric(metrics.top_k_recall_score)),
    "skrank.metrics.top_k_psp_score": Entry(_call_psp),
    "skrank.metrics.top_k_label_scores": Entry(_call_top_k_label_scores),
    "skrank.multilabel.LabelEmbeddingNetwork": Entry(
        _call_label_embedding_network,
        kinds=TENSORS,
        methods=(
            "forward",
            "label_table",
            "label_vectors",
            "normalize_labels",
            "scores",
            "positive_scores",
        ),
    ),
    "skrank.nn.MLP": Entry(_call_mlp, kinds=TENSORS, methods=("forward",)),
    "skrank.nn.ConvNet": Entry(_call_conv_net, kinds=TENSORS, methods=("forward",)),
    "skrank.nn.SparseLinear": Entry(
        _call_sparse_linear,
        kinds=TENSORS,
        methods=("forward",),
        exempt_methods={
            **_MODULE_REPR,
            "reset_parameters": "draws the layer's own weights, " + _TAKES_NO_ARRAYS,
        },
    ),
    "skrank.nn.RowSubset": Entry(_call_row_subset, kinds=DENSE_ONLY, methods=("take",)),
    "skrank.nn.UnitRows": Entry(_call_unit_rows, kinds=TENSORS, methods=("forward",)),
    "skrank.nn.dense_float32": Entry(_call_dense_float32, kinds=ARRAYS_ONLY),
    "skrank.nn.gather_summing_gradient": Entry(
        _call_gather(nn.gather_summing_gradient), kinds=TENSORS
    ),
    "skrank.nn.gather_with_gradient": Entry(_call_gather(nn.gather_with_gradient), kinds=TENSORS),
    "skrank.nn.input_dtypes": Entry(_call_input_inspection(nn.input_dtypes), kinds=ARRAYS_ONLY),
    "skrank.nn.memory_mapped": Entry(_call_input_inspection(nn.memory_mapped), kinds=ARRAYS_ONLY),
    "skrank.nn.item_rank": Entry(_call_input_inspection(nn.item_rank), kinds=ARRAY_KINDS),
    "skrank.nn.check_image_items": Entry(_call_check_image_items, kinds=DENSE_ONLY),
    "skrank.nn.TrainingInputs": Entry(
        _call_training_inputs, kinds=ARRAYS_ONLY, methods=("rows", "chunks", "batch", "batches")
    ),
    "skrank.nn.ItemDataset": Entry(_call_item_dataset, kinds=DENSE_ONLY, methods=("read",)),
    "skrank.nn.is_item_source": Entry(_call_input_inspection(nn.is_item_source), kinds=ARRAY_KINDS),
    "skrank.plotting.MeanPrecisionRecallDisplay": Entry(
        _call_mean_precision_recall_display,
        kinds=NO_SPARSE,
        methods=("plot", "from_predictions", "from_estimator"),
    ),
    "skrank.plotting.PairROCDisplay": Entry(
        _call_pair_roc_display,
        kinds=NO_SPARSE,
        methods=("plot", "from_predictions", "from_estimator"),
    ),
    "skrank.plotting.TrainingHistoryDisplay": Entry(
        _call_training_history_display,
        kinds=DENSE_ONLY,
        methods=("plot", "from_history", "from_estimator"),
    ),
    "skrank.sampling.ClassBalancedBatchSampler": Entry(
        _call_batch_sampler,
        kinds=NO_SPARSE,
        methods=("epoch",),
        exempt_methods={
            "state_dict": "returns the sampler's random state, " + _TAKES_NO_ARRAYS,
            "load_state_dict": "restores the sampler's random state, " + _TAKES_NO_ARRAYS,
        },
    ),
    "skrank.sampling.NegativeLabelSampler": Entry(
        _call_negative_label_sampler,
        methods=("sample",),
        exempt_methods={
            "draw": "takes the padded positive table that sample builds from the user's labels"
        },
    ),
    "skrank.sampling.count_pairs": Entry(_labels_only(sampling.count_pairs), kinds=NO_SPARSE),
    "skrank.sampling.draw_positive_labels": Entry(_call_draw_positive_labels, kinds=SPARSE_KINDS),
    "skrank.sampling.iter_negative_pairs": Entry(_call_iter_negative_pairs, kinds=NO_SPARSE),
    "skrank.sampling.sample_negative_pairs": Entry(
        _labels_only(sampling.sample_negative_pairs, 10, 0), kinds=NO_SPARSE
    ),
    "skrank.sampling.sample_negative_tuples": Entry(
        _labels_only(sampling.sample_negative_tuples, 10, 0), kinds=NO_SPARSE
    ),
    "skrank.similarity.PairStatistics": Entry(
        _call_pair_statistics,
        kinds=NO_SPARSE,
        methods=("update", "merge", "positive_matrix", "negative_matrix"),
    ),
    "skrank.similarity.dissimilar_pair_scatter": Entry(
        _call_pair_scatter(similarity.dissimilar_pair_scatter), kinds=NO_SPARSE
    ),
    "skrank.similarity.similar_pair_scatter": Entry(
        _call_pair_scatter(similarity.similar_pair_scatter), kinds=NO_SPARSE
    ),
    "skrank.similarity.feasible_alpha_range": Entry(_call_feasible_alpha_range, kinds=DENSE_ONLY),
    "skrank.similarity.figure_of_merit": Entry(_call_figure_of_merit, kinds=DENSE_ONLY),
    "skrank.similarity.negative_pair_similarities": Entry(
        _call_negative_pair_similarities, kinds=DENSE_ONLY
    ),
    "skrank.similarity.threshold_at_fpr": Entry(_call_threshold_at_fpr, kinds=DENSE_ONLY),
    "skrank.similarity.negative_pair_outer_mean": Entry(
        _call_negative_pair_outer_mean, kinds=DENSE_ONLY
    ),
    "skrank.similarity.one_standard_error_rule": Entry(
        _call_one_standard_error_rule, kinds=DENSE_ONLY
    ),
    "skrank.similarity.pair_groups": Entry(_call_pair_groups, kinds=DENSE_ONLY),
    "skrank.similarity.regularized_positive_matrix": Entry(
        _call_regularized_positive_matrix, kinds=DENSE_ONLY
    ),
    "skrank.similarity.select_alpha": Entry(_call_select_alpha, kinds=DENSE_ONLY),
    "skrank.similarity.solve_cvxpy": Entry(_call_solver(similarity.solve_cvxpy), kinds=DENSE_ONLY),
    "skrank.similarity.solve_kkt": Entry(_call_solver(similarity.solve_kkt), kinds=DENSE_ONLY),
}
# The same objects under their other public names.
ALIASES = {
    "skrank.embedding.SOPRCEmbedder": "skrank.SOPRCEmbedder",
    "skrank.multilabel.SNMClassifier": "skrank.SNMClassifier",
    "skrank.similarity.MMC": "skrank.MMC",
    "skrank.similarity.PointwiseROCSimilarity": "skrank.PointwiseROCSimilarity",
}


def public_callables():
    """``{qualified name: object}`` of every callable in a public ``__all__``."""
    found = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value):
                found[f"{module_name}.{name}"] = value
    return found


def _public_methods(cls):
    """Public methods defined by skrank on ``cls`` (inherited ones from scikit-learn, torch or
    the standard library are theirs to check)."""
    names = set()
    for name, value in inspect.getmembers(cls):
        if name.startswith("_") or not callable(value):
            continue
        if (getattr(value, "__module__", None) or "").startswith("skrank"):
            names.add(name)
    return names


def test_every_public_callable_is_checked():
    names = set(public_callables())
    unchecked = names - set(ENTRY_POINTS) - set(EXEMPT) - set(ALIASES)
    assert not unchecked, f"public callables neither checked nor exempted: {sorted(unchecked)}"
    stale = (set(ENTRY_POINTS) | set(EXEMPT) | set(ALIASES)) - names
    assert not stale, f"entries of callables that are no longer public: {sorted(stale)}"
    assert all(len(reason) > 20 for reason in EXEMPT.values())
    assert len(names) >= 100  # the count the closing note of this check reports


@pytest.mark.parametrize(
    "name", sorted(n for n, e in ENTRY_POINTS.items() if inspect.isclass(public_callables()[n]))
)
def test_every_public_method_is_checked(name):
    entry = ENTRY_POINTS[name]
    methods = _public_methods(public_callables()[name])
    assert set(entry.methods) | set(entry.exempt_methods) == methods


def _cases():
    return [
        pytest.param(name, kind, id=f"{name.removeprefix('skrank.')}-{kind}")
        for name, entry in sorted(ENTRY_POINTS.items())
        for kind in entry.kinds
    ]


def check_inputs_unchanged(call, kind, tmp_path):
    """Run ``call`` on inputs of ``kind``; fail if it changes one of them."""
    inputs = Inputs(kind, tmp_path)
    try:
        call(inputs, tmp_path)
    finally:
        plt.close("all")
    assert inputs.made, "the call made no inputs of the kind"
    inputs.assert_unchanged()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("name", "kind"), _cases())
def test_inputs_unchanged(name, kind, tmp_path, one_torch_thread):
    check_inputs_unchanged(ENTRY_POINTS[name].call, kind, tmp_path)


def _dump_extreme_file_before_the_fix(X, Y, file):
    """``dump_extreme_file`` of skrank 0.2.0.dev0, whose preparation of its inputs wrote through
    ``csr_matrix`` views into the caller's arrays (the writing of the file is today's)."""
    X = sp.csr_matrix(X, dtype=np.float64)
    Y = sp.csr_matrix(Y)
    Y.eliminate_zeros()
    X.sum_duplicates()
    X.sort_indices()
    Y.sort_indices()
    dump_extreme_file(X, Y, file)


@pytest.mark.parametrize("kind", SPARSE_KINDS)
def test_the_check_catches_dump_extreme_file_before_the_fix(kind, tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "dump_extreme_file", _dump_extreme_file_before_the_fix)
    call = ENTRY_POINTS["skrank.datasets.dump_extreme_file"].call
    if kind.endswith("writable"):  # the values converted, the caller's indices sorted
        with pytest.raises(AssertionError, match="changed by the call: input 0"):
            check_inputs_unchanged(call, kind, tmp_path)
    else:
        with pytest.raises(ValueError, match="read-only"):
            check_inputs_unchanged(call, kind, tmp_path)


@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csr_array])
@pytest.mark.parametrize("indicator", [False, True])
def test_noncanonical_csr_represents_the_dense_matrix(container, indicator):
    base = INDICATOR if indicator else FEATURES
    matrix = noncanonical_csr(base, container, indicator=indicator)
    assert not matrix.has_sorted_indices
    assert (matrix.data == 0).any()
    assert matrix.nnz > np.count_nonzero(base) + base.shape[0]  # duplicates and zeros
    np.testing.assert_array_equal(matrix.toarray(), base)
