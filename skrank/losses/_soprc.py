"""SOPRC: the sampling-rate-invariant stochastic estimator of 1 - AUPRC (Wen et al., NeurIPS 2022).

The mathematics (read more in the :ref:`User Guide <soprc>`) corrects the paper's printed
formulas: ``l1`` is the one-sided Huber loss that is continuous at 0, the TPR estimate counts the
positive itself (``+1``) so it never divides by zero, and the auxiliary vector of a class is updated
by interpolating the batch's sorted positive scores onto ``L_c`` evenly spaced quantile positions.

Public pieces: the surrogates :func:`one_sided_huber` and :func:`one_sided_sigmoid`, the
interpolation :func:`interpolate_scores` (the paper's Alg. 2), the single-query estimator
:func:`soprc_query_loss`, and the retrieval loss :class:`SOPRCLoss`.
"""

import functools
from numbers import Integral, Real

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..utils._unit_rows import unit_rows_and_norms, unit_rows_gradient
from ..utils._validation import check_ndim, check_positive_int

__all__ = [
    "SOPRCLoss",
    "interpolate_scores",
    "one_sided_huber",
    "one_sided_sigmoid",
    "soprc_query_loss",
]


def one_sided_huber(x, tau):
    """The surrogate ``l1 >= 1{x <= 0}`` of the false-positive indicator.

    ``l1(x) = 1 - 2x/tau`` for ``x < 0``, ``(1 - x/tau)^2`` for ``0 <= x < tau`` and ``0`` for
    ``x >= tau``: convex, decreasing, continuous with a continuous derivative.

    Parameters
    ----------
    x : torch.Tensor
        Score differences ``s_positive - s_negative``.
    tau : float
        Margin ``tau1 > 0`` beyond which a pair costs nothing.

    Returns
    -------
    loss : torch.Tensor
        ``l1(x)``, same shape as ``x``.

    Examples
    --------
    >>> import torch
    >>> from skrank.losses import one_sided_huber
    >>> one_sided_huber(torch.tensor([-0.1, 0.0, 0.05, 0.2]), tau=0.1)
    tensor([3.0000, 1.0000, 0.2500, 0.0000])
    """
    inside = (1 - x.clamp(min=0) / tau).clamp(min=0) ** 2
    return torch.where(x < 0, 1 - 2 * x / tau, inside)


def one_sided_sigmoid(x, tau):
    """The surrogate ``l2 <= 1{x <= 0}`` of the true-positive indicator.

    ``l2(x) = (exp(-x/tau) - 1) / (exp(-x/tau) + 1) = tanh(-x / (2 tau))`` for ``x < 0`` and
    ``0`` for ``x >= 0``; it tends to the indicator of ``x < 0`` as ``tau -> 0``.

    Parameters
    ----------
    x : torch.Tensor
        Score differences ``s_positive - u``.
    tau : float
        Temperature ``tau2 > 0``.

    Returns
    -------
    loss : torch.Tensor
        ``l2(x)``, same shape as ``x``, in ``[0, 1)``.

    Examples
    --------
    >>> import torch
    >>> from skrank.losses import one_sided_sigmoid
    >>> one_sided_sigmoid(torch.tensor([-1.0, 0.0, 1.0]), tau=0.5)
    tensor([0.7616, 0.0000, 0.0000])
    """
    return torch.where(x < 0, torch.tanh(-x / (2 * tau)), torch.zeros_like(x))


def _indicator(x):
    """``1{x <= 0}`` as a float tensor (the exact form of both surrogates)."""
    return (x <= 0).to(x.dtype)


def _extend_sorted(sorted_scores, counts, score_range):
    """Sorted scores with one extrapolated value at each end: the knots of the interpolation φ.

    Row ``r`` holds ``counts[r] >= 1`` ascending scores ``u_1 <= ... <= u_n``, then ``+inf``
    padding. Returns rows ``(u_0, u_1, ..., u_n, u_{n+1}, 0, ...)`` of width ``width + 2`` with
    ``u_0 = max(2 u_1 - u_2, low)`` and ``u_{n+1} = min(2 u_n - u_{n-1}, high)``; knot ``i``
    stands at quantile ``(i - 0.5) / n``.
    """
    low, high = score_range
    rows, width = sorted_scores.shape
    ends = _END_COLUMNS(width, sorted_scores.device)[counts]
    picked = sorted_scores.gather(1, ends[:, :4]).view(rows, 2, 2)
    slopes = _EXTRAPOLATION(sorted_scores.dtype, sorted_scores.device)
    extrapolated = torch.matmul(picked, slopes).clamp_(min=low, max=high)
    body = sorted_scores.nan_to_num(posinf=0.0)
    extended = torch.cat([extrapolated[:, :1], body, torch.zeros_like(extrapolated[:, :1])], 1)
    return extended.scatter_(1, ends[:, 4:], extrapolated[:, 1:])


@functools.lru_cache(maxsize=16)
def _end_columns(width, device):
    """For each count ``n`` of sorted scores in a row of ``width``, the columns of ``u_1, u_2,
    u_n, u_{n-1}`` (``u_1`` for a missing ``u_2``, ``u_{n-1}``) and of ``u_{n+1}`` in the
    extended row: a ``(width + 1, 5)`` table."""
    n = torch.arange(width + 1).clamp(min=1)
    table = torch.stack([torch.zeros_like(n), (n - 1).clamp(max=1), n - 1, (n - 2).clamp(min=0)])
    return torch.cat([table, (n + 1)[None]]).T.contiguous().to(device)


_END_COLUMNS = _end_columns


@functools.lru_cache(maxsize=16)
def _EXTRAPOLATION(dtype, device):
    """``(2, -1)``: ``2 u_1 - u_2`` extrapolates the first score, ``2 u_n - u_{n-1}`` the last."""
    return torch.tensor([2.0, -1.0], dtype=dtype, device=device)


def _read_quantiles(extended, counts, lengths, inside, half=None):
    """The piecewise-linear interpolant through the knots of ``_extend_sorted`` read at
    ``(j - 0.5) / lengths[r]``, ``j = 1..lengths[r]``; rows ``(rows, width)``, zero where
    ``inside`` (``column < lengths[r]``, of the rows' width) is False. ``half`` holds
    ``j + 0.5`` for the columns ``j`` (computed when not given).

    Linear in ``extended`` for fixed counts and lengths, so rows sharing both can be averaged
    before reading.
    """
    if half is None:
        half = torch.arange(inside.shape[1], device=extended.device, dtype=extended.dtype) + 0.5
    counts = counts[:, None]
    # Target t lies between knots i and i + 1 with i = floor(t n + 0.5), i in 0..n.
    knot = half / lengths.clamp(min=1)[:, None] * counts + 0.5
    segment = torch.minimum(knot.long(), counts)
    weight = knot - segment
    values = torch.lerp(extended.gather(1, segment), extended.gather(1, segment + 1), weight)
    return torch.where(inside, values, 0.0)


def interpolate_scores(scores, length, score_range=(-1.0, 1.0)):
    """Map scores to ``length`` evenly spaced quantiles of their distribution (the paper's φ).

    The ``n`` sorted scores are placed at quantiles ``(i - 0.5)/n``, extended by one linearly
    extrapolated value at each end (clamped to ``score_range``), and the piecewise-linear
    interpolant is read at ``(j - 0.5)/length``, ``j = 1..length``. SOPRC uses it to turn the few
    positive scores of a batch into an estimate of the sorted scores of all positives.

    Parameters
    ----------
    scores : torch.Tensor of shape (n,)
        At least one score, in any order.
    length : int
        Number of quantile positions (``L_c``).
    score_range : tuple of float, default=(-1.0, 1.0)
        Bounds for the extrapolated end values (cosine similarities lie in ``[-1, 1]``).

    Returns
    -------
    interpolated : torch.Tensor of shape (length,)
        Ascending estimates of the quantiles; equal to ``sort(scores)`` when ``length == n``.

    Examples
    --------
    >>> import torch
    >>> from skrank.losses import interpolate_scores
    >>> interpolate_scores(torch.tensor([0.5, 0.1, 0.3]), 6)
    tensor([0.0500, 0.1500, 0.2500, 0.3500, 0.4500, 0.5500])
    """
    scores = torch.as_tensor(scores)
    if scores.ndim != 1 or scores.shape[0] == 0:
        raise ValueError(f"scores must be a non-empty 1-D tensor, got shape {tuple(scores.shape)}.")
    check_positive_int(length, "length")
    counts = torch.tensor([scores.shape[0]], device=scores.device)
    lengths = torch.tensor([int(length)], device=scores.device)
    extended = _extend_sorted(scores.sort().values[None, :], counts, score_range)
    inside = torch.ones(1, int(length), dtype=torch.bool, device=scores.device)
    return _read_quantiles(extended, counts, lengths, inside)[0]


def _precision_loss(fpr, tpr, prior):
    """``sigma((1 - prior)/prior * fpr/tpr)`` with ``sigma(x) = x/(1 + x)``, i.e. 1 - precision."""
    weighted_fpr = (1 - prior) * fpr
    return weighted_fpr / (weighted_fpr + prior * tpr)


def soprc_query_loss(
    positive_scores,
    negative_scores,
    auxiliary=None,
    prior=None,
    *,
    tau1=0.1,
    tau2=0.001,
    exact=False,
):
    """The SOPRC estimator of ``1 - AUPRC`` for one query with binary labels.

    For each positive score ``s_p``::

        FPR(p) = mean_j l1(s_p - s_j)                over the negative scores s_j
        TPR(p) = (1 + sum_u l2(s_p - u)) / (L + 1)   over the L entries u of ``auxiliary``
        loss   = mean_p sigma((1 - prior)/prior * FPR(p)/TPR(p)),   sigma(x) = x/(1 + x)

    With ``exact=True`` both surrogates are replaced by ``1{x <= 0}`` and, when ``auxiliary``
    holds all positive scores of the full list and ``prior`` its positive rate, the mean of the
    estimator over random batches is (asymptotically) ``1 - AUPRC`` of the full list whatever the
    batch's positive rate. Gradients flow through ``positive_scores`` and ``negative_scores``.

    Parameters
    ----------
    positive_scores : torch.Tensor of shape (n_positives,)
        Scores of the query's positives in the batch (at least one).
    negative_scores : torch.Tensor of shape (n_negatives,)
        Scores of its negatives in the batch (at least one).
    auxiliary : torch.Tensor of shape (L,) or None, default=None
        Estimate of the scores of all positives of the list (the auxiliary vector ``v``); ``None``
        uses ``positive_scores`` themselves (the batch-positives ablation).
    prior : float or None, default=None
        Positive rate ``pi`` of the full list; ``None`` uses the batch rate
        ``n_positives / (n_positives + n_negatives)`` (the biased AP-style estimator).
    tau1 : float, default=0.1
        Margin of the FPR surrogate :func:`one_sided_huber`.
    tau2 : float, default=0.001
        Temperature of the TPR surrogate :func:`one_sided_sigmoid`.
    exact : bool, default=False
        Use the exact indicators instead of the surrogates.

    Returns
    -------
    loss : torch.Tensor
        Scalar estimate of ``1 - AUPRC`` (an upper bound of it in the surrogate form).

    Examples
    --------
    >>> import torch
    >>> from skrank.losses import soprc_query_loss
    >>> positives, negatives = torch.tensor([0.9, 0.4]), torch.tensor([0.5, 0.1, 0.0])
    >>> # 1 - AP of this list of 5 items: 1 - (1/1 + 2/3) / 2 = 1/6
    >>> round(float(soprc_query_loss(positives, negatives, prior=2 / 5, exact=True)), 4)
    0.1667
    """
    positive_scores = torch.as_tensor(positive_scores)
    negative_scores = torch.as_tensor(negative_scores, dtype=positive_scores.dtype)
    for name, value in (("positive_scores", positive_scores), ("negative_scores", negative_scores)):
        if value.ndim != 1 or value.shape[0] == 0:
            raise ValueError(f"{name} must be a non-empty 1-D tensor, got {tuple(value.shape)}.")
    auxiliary = positive_scores if auxiliary is None else torch.as_tensor(auxiliary)
    if auxiliary.ndim != 1:
        raise ValueError(f"auxiliary must be a 1-D tensor, got shape {tuple(auxiliary.shape)}.")
    if prior is None:
        prior = positive_scores.shape[0] / (positive_scores.shape[0] + negative_scores.shape[0])
    elif not isinstance(prior, Real) or not 0 < prior < 1:
        raise ValueError(f"prior must be a number in (0, 1), got {prior!r}.")
    if exact:
        fpr = _exact_exceedance(positive_scores, negative_scores) / negative_scores.shape[0]
        tpr = 1 + _exact_exceedance(positive_scores, auxiliary)
    else:
        _check_temperatures(tau1, tau2)
        differences = positive_scores[:, None] - negative_scores[None, :]
        fpr = one_sided_huber(differences, tau1).mean(dim=1)
        tpr = 1 + one_sided_sigmoid(positive_scores[:, None] - auxiliary[None, :], tau2).sum(dim=1)
    tpr = tpr / (auxiliary.shape[0] + 1)
    return _precision_loss(fpr, tpr, prior).mean()


def _exact_exceedance(thresholds, scores):
    """For each threshold, how many ``scores`` are ``>=`` it; sorts only the thresholds."""
    ordered, order = thresholds.detach().sort()
    # rank[i]: number of thresholds <= scores[i]; scores[i] >= ordered[k] iff rank[i] > k.
    rank = torch.searchsorted(ordered, scores.detach().to(ordered.dtype).contiguous(), right=True)
    histogram = torch.bincount(rank, minlength=ordered.shape[0] + 1)
    at_least = histogram.flip(0).cumsum(0).flip(0)[1:]
    counts = torch.empty_like(at_least)
    counts[order] = at_least
    return counts.to(thresholds.dtype)


def _check_temperatures(tau1, tau2):
    for name, value in (("tau1", tau1), ("tau2", tau2)):
        if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}.")


class SOPRCLoss(nn.Module):
    """SOPRC loss for retrieval: stochastic AUPRC optimisation with per-class auxiliary vectors.

    Every item of a batch is a query against the rest of the batch: its positives ``P_q`` are the
    other items of its class, its negatives ``N_q`` all items of other classes. For a query of
    class ``c``, with dataset prior ``pi_c = (n_c - 1)/(N - 1)`` and the auxiliary vector
    ``v_c`` (an estimate of the sorted scores of all ``L_c = n_c - 1`` positives of such a
    query), the loss of the query is::

        FPR(q, p) = mean_{j in N_q} l1(s_qp - s_qj)
        TPR(q, p) = (1 + sum_{u in v_c} l2(s_qp - u)) / (L_c + 1)
        loss_q    = mean_{p in P_q} sigma((1 - pi_c)/pi_c * FPR(q, p)/TPR(q, p))

    plus the semi-variance regulariser ``lambda_pos/|P_q| sum_{s_qp < mu+} (s_qp - mu+)^2 +
    lambda_neg/|N_q| sum_{s_qj > mu-} (s_qj - mu-)^2``; the loss is the mean over queries with at
    least one positive and one negative. In training mode every call first updates ``v_c`` of
    the classes in the batch (without gradient): each query's sorted positive scores are
    interpolated onto ``L_c`` quantile positions (:func:`interpolate_scores`), averaged over the
    queries of the class, and blended in as ``v_c <- (1 - beta) v_c + beta * mean`` (the first
    time a class is seen, ``v_c <- mean``). In evaluation mode the vectors are left unchanged.

    Two ways to call it:

    - ``loss(embeddings, labels)``: any batch, labels in any order. Grouping the batch by class
      reads the labels back to the host (a synchronisation on a GPU).
    - ``loss.forward_grouped(embeddings, classes, valid)``: a batch laid out as ``G`` groups of
      ``M`` items, group ``g`` holding items of the class ``classes[g]`` (distinct classes), with
      ``valid`` marking the items (False: padding). Its shapes depend only on ``G``, ``M`` and
      the longest auxiliary vector, so a training step never synchronises with the host: this is
      what :class:`~skrank.SOPRCEmbedder` calls with the batches of
      :class:`~skrank.sampling.ClassBalancedBatchSampler`.

    Memory per call: ``B^2 (M - 1)`` floats for the FPR terms and ``G M (M - 1) L / 2`` for the
    TPR terms, with ``B = G M`` the batch size, ``M`` the largest class of the batch and ``L``
    the longest auxiliary vector (the largest ``L_c``); cap ``L_c`` with ``max_auxiliary_length``
    when classes are very large. The auxiliary vectors take ``sum_c L_c <= N`` floats, stored flat
    in the buffer ``auxiliary`` (plus one scratch entry) with ``auxiliary_offsets`` and
    ``auxiliary_lengths``; ``state_dict`` round-trips. With ``tpr_source="batch"`` the TPR reads
    the query's batch positives, not ``v_c``: the loss then keeps no auxiliary state (the buffer
    ``auxiliary`` is empty, ``class_seen`` stays False, :meth:`auxiliary_vector` raises) and a
    step neither gathers nor updates vectors; ``beta`` and ``max_auxiliary_length`` have no
    effect.

    Read more in the :ref:`User Guide <losses>`.

    Parameters
    ----------
    class_counts : array-like of int of shape (n_classes,)
        Number of training items ``n_c`` of each class; labels passed to the loss are class
        indices ``0..n_classes-1``.
    tau1 : float, default=0.1
        Margin of the FPR surrogate (the one-sided Huber :func:`~skrank.losses.one_sided_huber`).
    tau2 : float, default=0.001
        Temperature of the TPR surrogate (the one-sided sigmoid
        :func:`~skrank.losses.one_sided_sigmoid`).
    beta : float, default=0.1
        Moving-average rate of the per-class auxiliary vectors, in ``(0, 1]``
        (``tpr_source="auxiliary"`` only).
    lambda_pos : float, default=5.0
        Weight of the semi-variance of the positive scores below their mean (0 disables it).
    lambda_neg : float, default=1.0
        Weight of the semi-variance of the negative scores above their mean (0 disables it).
    max_auxiliary_length : int or None, default=None
        Cap on the length ``L_c`` of the auxiliary vectors; None uses ``L_c = n_c - 1`` (the
        paper). ``tpr_source="auxiliary"`` only.
    prior : {"dataset", "batch"}, default="dataset"
        Class prior of the estimator: ``"dataset"``, the class's share ``pi_c`` of the training
        items; ``"batch"``, the query's batch rate ``|P_q|/(|P_q| + |N_q|)`` (the biased
        AP-style estimator, an ablation).
    tpr_source : {"auxiliary", "batch"}, default="auxiliary"
        Where the TPR of each positive comes from: the query's other positives in the batch
        (``"batch"``; gradients then flow through them, as in an AP loss), or the per-class
        auxiliary vectors ``v_c`` of the paper (``"auxiliary"``, an estimate of the scores of all
        positives). With ``"batch"`` the loss keeps no auxiliary vectors.
    exact : bool, default=False
        Use exact indicators ``1{x <= 0}`` instead of the surrogates (no useful gradient; for
        evaluating the estimator).
    score_range : tuple of float, default=(-1.0, 1.0)
        Range of the scores, bounding the extrapolated ends of the interpolation.
    dataset_prior_weight : float, default=1.0
        With ``prior="dataset"``, the prior of a query is ``rate^(1 - w) pi_c^w`` with ``w``
        this weight, in ``[0, 1]``, and ``rate = |P_q| / (|P_q| + |N_q|)`` its batch rate: 1
        is the dataset prior, 0 the batch rate. An attribute a training loop may change
        between steps: :class:`~skrank.SOPRCEmbedder` raises it from 0 to 1 over the first
        ``prior_warmup`` of its steps (with many classes, the small dataset priors of the
        small classes leave their queries almost no gradient while the ranking is poor).

    Examples
    --------
    >>> import torch
    >>> from skrank.losses import SOPRCLoss
    >>> loss_fn = SOPRCLoss(class_counts=[10, 10, 10])
    >>> embeddings = torch.randn(12, 8, requires_grad=True)
    >>> labels = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    >>> loss = loss_fn(embeddings, labels)
    >>> loss.backward()
    >>> tuple(loss_fn.auxiliary_vector(0).shape)
    (9,)
    >>> grouped = loss_fn.forward_grouped(embeddings.view(3, 4, 8), torch.tensor([0, 1, 2]))
    >>> bool(torch.isclose(grouped, loss_fn(embeddings, labels)))
    True
    """

    def __init__(
        self,
        class_counts,
        *,
        tau1=0.1,
        tau2=0.001,
        beta=0.1,
        lambda_pos=5.0,
        lambda_neg=1.0,
        max_auxiliary_length=None,
        prior="dataset",
        tpr_source="auxiliary",
        exact=False,
        score_range=(-1.0, 1.0),
        dataset_prior_weight=1.0,
    ):
        super().__init__()
        counts = _check_class_counts(class_counts)
        _check_temperatures(tau1, tau2)
        if not isinstance(beta, Real) or not 0 < beta <= 1:
            raise ValueError(f"beta must be in (0, 1], got {beta!r}.")
        for name, value in (("lambda_pos", lambda_pos), ("lambda_neg", lambda_neg)):
            if not isinstance(value, Real) or not value >= 0:
                raise ValueError(f"{name} must be a non-negative number, got {value!r}.")
        if max_auxiliary_length is not None and (
            isinstance(max_auxiliary_length, bool)
            or not isinstance(max_auxiliary_length, Integral)
            or max_auxiliary_length < 1
        ):
            raise ValueError(
                f"max_auxiliary_length must be a positive integer or None, got "
                f"{max_auxiliary_length!r}."
            )
        if prior not in ("dataset", "batch"):
            raise ValueError(f"prior must be 'dataset' or 'batch', got {prior!r}.")
        if (
            isinstance(dataset_prior_weight, bool)
            or not isinstance(dataset_prior_weight, Real)
            or not 0 <= dataset_prior_weight <= 1
        ):
            raise ValueError(
                f"dataset_prior_weight must be a number in [0, 1], got {dataset_prior_weight!r}."
            )
        self.dataset_prior_weight = float(dataset_prior_weight)
        if tpr_source not in ("auxiliary", "batch"):
            raise ValueError(f"tpr_source must be 'auxiliary' or 'batch', got {tpr_source!r}.")
        low, high = score_range
        if not low < high:
            raise ValueError(f"score_range must be (low, high) with low < high, got {score_range}.")
        self.tau1, self.tau2, self.beta = float(tau1), float(tau2), float(beta)
        self.lambda_pos, self.lambda_neg = float(lambda_pos), float(lambda_neg)
        self.prior, self.tpr_source, self.exact = prior, tpr_source, bool(exact)
        self.score_range = (float(low), float(high))

        lengths = counts - 1
        if max_auxiliary_length is not None:
            lengths = np.minimum(lengths, max_auxiliary_length)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        keeps_state = tpr_source == "auxiliary"
        # Static width of every gathered auxiliary row: shapes never depend on the batch.
        self._width = int(lengths.max()) if keeps_state else 0
        self.register_buffer(
            "priors", torch.as_tensor((counts - 1) / (counts.sum() - 1), dtype=torch.float32)
        )
        # The last entry is scratch space: writes outside a class's vector land there. The
        # batch-TPR form reads no auxiliary vector: it keeps none (an empty buffer).
        n_entries = int(lengths.sum()) + 1 if keeps_state else 0
        self.register_buffer("auxiliary", torch.zeros(n_entries))
        self.register_buffer("auxiliary_offsets", torch.as_tensor(offsets, dtype=torch.long))
        self.register_buffer("auxiliary_lengths", torch.as_tensor(lengths, dtype=torch.long))
        self.register_buffer("class_seen", torch.zeros(counts.shape[0], dtype=torch.bool))
        self._layouts = {}
        # Per class: the prior, its complement and the TPR normaliser 1 / (L_c + 1).
        priors = np.maximum((counts - 1) / (counts.sum() - 1), 1e-12)
        self.register_buffer(
            "class_factors",
            torch.as_tensor(
                np.stack([priors, 1 - priors, 1 / (lengths + 1)], axis=1), dtype=torch.float32
            ),
            persistent=False,
        )

    @property
    def n_classes(self):
        """Number of classes."""
        return self.priors.shape[0]

    def auxiliary_vector(self, label):
        """The auxiliary vector ``v_c`` of class index ``label`` (ascending once it was seen).

        Only a loss built with ``tpr_source="auxiliary"`` keeps these vectors.
        """
        self._check_keeps_auxiliary()
        start, length = int(self.auxiliary_offsets[label]), int(self.auxiliary_lengths[label])
        return self.auxiliary[start : start + length]

    def _check_keeps_auxiliary(self):
        if self.auxiliary.shape[0] == 0:
            raise ValueError(
                "This SOPRCLoss was built with tpr_source='batch', which keeps no auxiliary "
                "vectors; build it with tpr_source='auxiliary' to use them."
            )

    # ------------------------------------------------------------------ entry points
    def forward(self, embeddings, labels):
        """Loss of a batch of embeddings, scored by cosine similarity.

        Parameters
        ----------
        embeddings : torch.Tensor of shape (batch_size, n_dims)
            Embeddings (L2-normalised here, so any scale works).
        labels : torch.Tensor of shape (batch_size,)
            Class indices in ``0..n_classes-1``, in any order.

        Returns
        -------
        loss : torch.Tensor
            Scalar loss.
        """
        check_ndim(embeddings, 2, "(batch_size, n_dims)", input_name="embeddings")
        layout = _GroupLayout.of(self._check_labels(labels, embeddings.shape[0]))
        grouped = embeddings[layout.index].view(*layout.valid.shape, -1)
        return self.forward_grouped(grouped, layout.classes, layout.valid)

    def forward_grouped(self, embeddings, classes, valid=None, queries=None):
        """Loss of a batch laid out as groups of items of distinct classes; no host sync.

        Parameters
        ----------
        embeddings : torch.Tensor of shape (n_groups, group_size, n_dims)
            ``embeddings[g]`` are items of class ``classes[g]`` (L2-normalised here).
        classes : torch.Tensor of shape (n_groups,)
            Class index of each group; distinct classes (the auxiliary update of a class
            repeated in a batch would keep only one group's estimate).
        valid : torch.Tensor of bool of shape (n_groups, group_size), default=None
            Which entries are items (False: padding, ignored). None: all of them.
        queries : slice or None, default=None
            Only the terms of these queries, a slice of the items in group order (item ``g M
            + m`` is ``embeddings[g, m]``), each still ranking the whole batch: the result is
            their sum over the number of queries of the whole batch, so the results of
            disjoint slices covering the batch add up to its loss, and so do their gradients.
            Data-parallel training gives each process the queries of its own items, which
            divides the cost of the loss by the number of processes (as
            :class:`~skrank.SOPRCEmbedder` does under ``torchrun``). None: every query.
            Requires ``tpr_source="batch"`` (an auxiliary vector is updated from all the
            queries of its class).

        Returns
        -------
        loss : torch.Tensor
            Scalar loss.
        """
        check_ndim(embeddings, 3, "(n_groups, group_size, n_dims)", input_name="embeddings")
        n_groups, size, _ = embeddings.shape
        valid = self._check_valid(valid, (n_groups, size), embeddings.device)
        if classes.dtype != torch.long:
            classes = classes.long()
        flat = embeddings.reshape(n_groups * size, -1)
        if queries is None:
            # Symmetric up to rounding: the pair shortcut reads s_qp for s_pq, 1e-7 apart at most.
            return self._loss(_CosineGram.apply(flat), classes, valid, symmetric=True)
        queries = self._check_queries(queries, n_groups * size)
        unit = F.normalize(flat, dim=1)
        scores = unit[queries] @ unit.T
        return self._loss(scores, classes, valid, symmetric=False, queries=queries)

    def score_loss(self, scores, labels):
        """Loss of a batch given its ``(batch_size, batch_size)`` similarity matrix.

        Parameters
        ----------
        scores : torch.Tensor of shape (batch_size, batch_size)
            ``scores[q, i]`` is the score of item ``i`` for query ``q`` (within
            ``score_range``); the diagonal is ignored.
        labels : torch.Tensor of shape (batch_size,)
            Class indices in ``0..n_classes-1``.

        Returns
        -------
        loss : torch.Tensor
            Scalar loss.
        """
        if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
            raise ValueError(f"scores must be a square matrix, got shape {tuple(scores.shape)}.")
        layout = _GroupLayout.of(self._check_labels(labels, scores.shape[0]))
        grouped = scores[layout.index][:, layout.index]
        symmetric = bool(torch.equal(scores, scores.T))
        return self._loss(grouped, layout.classes, layout.valid, symmetric=symmetric)

    def _check_labels(self, labels, size):
        labels = torch.as_tensor(labels)
        if labels.shape != (size,):
            raise ValueError(f"labels must have shape ({size},), got {tuple(labels.shape)}.")
        if labels.is_floating_point() or (
            labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= self.n_classes)
        ):
            raise ValueError(f"labels must be class indices in 0..{self.n_classes - 1}.")
        return labels.long()

    def _check_queries(self, queries, n_items):
        if self.tpr_source != "batch":
            raise ValueError(
                'queries needs tpr_source="batch": with "auxiliary" a class\'s vector is '
                "updated from all the queries of the class."
            )
        if not isinstance(queries, slice) or queries.step not in (None, 1):
            raise TypeError(f"queries must be a slice with step 1 or None, got {queries!r}.")
        start, stop, _ = queries.indices(n_items)
        return slice(start, max(start, stop))

    @staticmethod
    def _check_valid(valid, shape, device):
        if valid is None:
            return torch.ones(shape, dtype=torch.bool, device=device)
        if tuple(valid.shape) != shape:
            raise ValueError(f"valid must have shape {shape}, got {tuple(valid.shape)}.")
        if valid.dtype != torch.bool or valid.device != device:
            valid = valid.to(device=device, dtype=torch.bool)
        return valid

    # ------------------------------------------------------------------ the grouped core
    def _loss(self, scores, classes, valid, symmetric, queries=None):
        """The loss of the grouped batch whose ``scores`` are its rows ``queries`` (None: all,
        a square matrix), summed over those rows and divided by the batch's valid queries."""
        n_groups, size = valid.shape
        if size < 2:  # groups of one item: no query has a positive
            return scores.sum() * 0.0
        layout = self._layout(n_groups, size, scores.device)
        fused = not self.exact and self.tpr_source == "auxiliary"
        # The fused path differentiates by hand: its batch is built without autograd.
        batch = _GroupedBatch(scores.detach() if fused else scores, valid, layout, queries)
        reference = n_reference = None
        if self.tpr_source == "auxiliary":
            self._check_keeps_auxiliary()
            lengths = self.auxiliary_lengths[classes]
            target, inside = self._auxiliary_positions(classes, lengths, layout)
            vectors = self.auxiliary[target]
            if self.training:
                vectors = self._update_auxiliary(
                    batch, classes, lengths, vectors, target, inside, layout
                )
            reference = torch.where(inside, vectors, float("-inf"))
            n_reference = lengths.repeat_interleave(size)
        if fused:
            factors = self.class_factors[classes].repeat_interleave(size, 0)
            if self.prior == "batch" or self.dataset_prior_weight < 1:
                prior = self._query_priors(batch, classes, size)[:, None]
                factors = torch.cat([prior, 1 - prior, factors[:, 2:]], dim=1)
            return _SurrogateGroupedLoss.apply(
                scores, batch, layout, reference, factors, self, symmetric
            )
        prior = self._query_priors(batch, classes, size)
        per_query = self._query_losses(batch, reference, n_reference, prior)
        per_query = per_query + self._semivariance(batch)
        total = torch.where(batch.query_valid, per_query, torch.zeros_like(per_query)).sum()
        return total / batch.n_queries.clamp(min=1)

    def _layout(self, n_groups, size, device):
        """The index tensors of a grouped batch of this shape, built once and kept."""
        key = (n_groups, size, str(device))
        if key not in self._layouts:
            self._layouts[key] = _StaticLayout(n_groups, size, self._width, device)
        return self._layouts[key]

    def _auxiliary_positions(self, classes, lengths, layout):
        """Flat positions ``(n, width)`` in ``auxiliary`` of the vectors of ``classes`` (the
        scratch entry past each vector's end), and the mask of the positions inside them."""
        inside = layout.auxiliary_columns < lengths[:, None]
        positions = self.auxiliary_offsets[classes][:, None] + layout.auxiliary_columns
        return torch.where(inside, positions, self.auxiliary.shape[0] - 1), inside

    def _query_priors(self, batch, classes, size):
        weight = self.dataset_prior_weight if self.prior == "dataset" else 0.0
        if weight > 0:
            dataset = self.priors[classes].clamp(min=1e-12).repeat_interleave(size)[batch.rows]
            if weight == 1:
                return dataset
        prior = batch.n_positives / (batch.n_positives + batch.n_negatives).clamp(min=1)
        prior = prior.to(batch.scores.dtype).clamp(min=1e-12)
        if weight == 0:
            return prior
        # Log-linear between the batch rate and the dataset prior.
        return torch.exp(torch.lerp(prior.log(), dataset.to(prior.dtype).log(), weight))

    @torch.no_grad()
    def _update_auxiliary(self, batch, classes, lengths, vectors, target, inside, layout):
        """Update the vectors of ``classes`` (``vectors``, read at ``target``); return them."""
        n_groups, size = classes.shape[0], layout.size
        positive = batch.positive_scores
        if positive.requires_grad:
            positive = positive.detach()
        sorted_scores = torch.where(batch.positive_valid, positive, float("inf")).sort(dim=1)
        counts = batch.n_positives.clamp(min=1)
        extended = _extend_sorted(sorted_scores.values, counts, self.score_range)
        # All valid queries of a group have the same number of positives, and φ is linear in
        # the knots: the mean of their interpolations is the interpolation of the mean knots.
        # Rows of padding or of queries without positives hold infinities: they must not mix in.
        queries = batch.query_valid.view(n_groups, size, 1)
        knots = torch.where(queries, extended.view(n_groups, size, -1), 0.0).sum(dim=1)
        n_queries = queries.sum(dim=1)
        knots = knots / n_queries.clamp(min=1)
        group_counts = counts.view(n_groups, size).amax(dim=1)
        half = layout.half if knots.dtype == torch.float32 else layout.half.to(knots.dtype)
        mean = _read_quantiles(knots, group_counts, lengths, inside, half)
        if mean.dtype != self.auxiliary.dtype:
            mean = mean.to(self.auxiliary.dtype)
        previous = torch.where(inside, vectors, 0.0)
        # Blend where the class was seen, copy where it is new, keep where no query updates it.
        updated = n_queries > 0
        rate = torch.where(self.class_seen[classes, None], self.beta, 1.0) * updated
        blended = torch.lerp(previous, mean, rate)
        self.auxiliary.index_put_((target.view(-1),), blended.view(-1))
        self.class_seen.index_put_((classes,), updated.view(-1), accumulate=True)
        return blended

    def _query_losses(self, batch, reference, n_reference, prior):
        """``loss_q`` of every query, shape (G M,), by autograd (the exact and batch-TPR forms)."""
        positive = batch.positive_scores
        # Items that are not negatives of a query get score -inf: every term then vanishes.
        negatives = batch.scores.masked_fill(~batch.negative_mask, float("-inf"))
        if self.exact:
            fpr = _indicator(positive[:, :, None] - negatives[:, None, :]).sum(dim=2)
        else:
            fpr = _FalsePositiveSum.apply(positive, negatives, self.tau1)
        fpr = fpr / batch.n_negatives.clamp(min=1)[:, None]
        if self.tpr_source == "auxiliary":  # exact: the surrogate form is the fused path
            thresholds = positive.reshape(reference.shape[0], -1)
            terms = _indicator(thresholds[:, :, None] - reference[:, None, :])
            tpr = terms.sum(dim=2).view_as(positive)
        else:
            masked = positive.masked_fill(~batch.positive_valid, float("-inf"))
            differences = positive[:, :, None] - masked[:, None, :]
            terms = (
                _indicator(differences) if self.exact else one_sided_sigmoid(differences, self.tau2)
            )
            tpr, n_reference = terms.sum(dim=2), batch.n_positives
        tpr = (1 + tpr) / (n_reference[:, None] + 1)
        per_positive = _precision_loss(fpr, tpr, prior[:, None]) * batch.positive_valid
        return per_positive.sum(dim=1) / batch.n_positives.clamp(min=1)

    def _semivariance(self, batch):
        """The semi-variance regulariser of every query, shape (G M,)."""
        total = torch.zeros_like(batch.n_negatives, dtype=batch.scores.dtype)
        if self.lambda_pos > 0:
            positive, valid = batch.positive_scores, batch.positive_valid
            n_positives = batch.n_positives.clamp(min=1)
            mean = (positive * valid).sum(dim=1) / n_positives
            below = (mean[:, None] - positive).clamp(min=0) * valid
            total = total + self.lambda_pos * (below**2).sum(dim=1) / n_positives
        if self.lambda_neg > 0:
            mask, n_negatives = batch.negative_mask, batch.n_negatives.clamp(min=1)
            mean = (batch.scores * mask).sum(dim=1) / n_negatives
            above = (batch.scores - mean[:, None]).clamp(min=0) * mask
            total = total + self.lambda_neg * (above**2).sum(dim=1) / n_negatives
        return total

    def extra_repr(self):
        return (
            f"n_classes={self.n_classes}, tau1={self.tau1}, tau2={self.tau2}, beta={self.beta}, "
            f"lambda_pos={self.lambda_pos}, lambda_neg={self.lambda_neg}, prior={self.prior!r}, "
            f"tpr_source={self.tpr_source!r}, exact={self.exact}"
        )


class _SurrogateGroupedLoss(torch.autograd.Function):
    """The SOPRC loss of a grouped batch (surrogates, auxiliary TPR) with its gradient with
    respect to the scores written out, so that forward and backward take few tensor operations.

    With ``c_qp`` the weight of positive ``p`` of query ``q`` in the mean, ``w = 1 - pi``,
    ``D = w FPR + pi TPR`` and ``r = 1 - (s_qp - s_qj) / tau1`` (``l1 = r^2`` for ``r < 1``,
    ``2 r - 1`` beyond: twice the Huber loss of ``r``): ``dL/dFPR = c w pi TPR / D^2``,
    ``dL/dTPR = -c pi w FPR / D^2``, the FPR terms give ``-2 m / tau1`` to ``s_qp`` and
    ``+2 m / tau1`` to ``s_qj`` (``m = min(r, 1)``), the TPR terms ``-(1 - tanh^2) / (2 tau2)`` to
    ``s_qp``, and the semi-variance of values ``v`` over a mask ``u`` with mean ``mu`` gives
    ``2 lambda / n (b - u sum(b) / n)`` with ``b = [v - mu]_+`` (negatives), or minus that with
    ``b = [mu - v]_+`` (positives).
    """

    @staticmethod
    def forward(ctx, scores, batch, layout, reference, factors, loss, symmetric):
        positive, valid = batch.positive_scores, batch.positive_valid
        n_positives, n_negatives = batch.n_positives_clamped, batch.n_negatives_clamped
        if factors.dtype != scores.dtype:
            factors = factors.to(scores.dtype)
        prior, complement, tpr_scale = factors.split(1, dim=1)
        negatives = torch.where(batch.negative_mask, scores, float("-inf"))
        ratio = (negatives[:, None, :] + (loss.tau1 - positive)[:, :, None]).mul_(1 / loss.tau1)
        ratio.clamp_(min=0)
        zeros = layout.zeros if ratio.dtype == torch.float32 else torch.zeros_like(ratio)
        fpr = F.huber_loss(ratio, zeros, reduction="none").sum(dim=2)
        fpr = fpr / (n_negatives / 2)
        # TPR: tanh((u - s) / (2 tau2)) over the reference values u above the threshold s.
        if symmetric:  # s_qp = s_pq, and q, p share v_c: one term per unordered pair
            thresholds = scores.reshape(-1)[layout.pair_entries]
        else:
            thresholds = positive.reshape(reference.shape[0], -1)
        gap = (reference[:, None, :] - thresholds[:, :, None]).mul_(0.5 / loss.tau2)
        gap = gap.clamp_(min=0).tanh_()
        above = torch.count_nonzero(gap, dim=2)
        sums = torch.stack([gap.sum(dim=2), above - gap.square_().sum(dim=2)])
        sums = sums.view(2, -1)[:, layout.pair_of] if symmetric else sums.view(2, *positive.shape)
        weighted_fpr = complement * fpr
        weighted_tpr = prior * tpr_scale * (1 + sums[0])
        denominator = weighted_fpr + weighted_tpr
        per_query = (weighted_fpr / denominator * valid).sum(dim=1, keepdim=True) / n_positives
        below = above = None
        if loss.lambda_pos > 0:
            mean = (positive * valid).sum(dim=1, keepdim=True) / n_positives
            below = (mean - positive).clamp_(min=0).mul_(valid)
            per_query += below.square().sum(dim=1, keepdim=True) * (loss.lambda_pos / n_positives)
        if loss.lambda_neg > 0:
            mean = torch.where(batch.negative_mask, scores, 0.0).sum(dim=1, keepdim=True)
            above = (scores - mean / n_negatives).clamp_(min=0).mul_(batch.negative_mask)
            per_query += above.square().sum(dim=1, keepdim=True) * (loss.lambda_neg / n_negatives)
        ctx.loss, ctx.batch, ctx.layout = loss, batch, layout
        ctx.save_for_backward(
            ratio, sums[1], tpr_scale, prior, complement, weighted_fpr, weighted_tpr, denominator,
            *(() if below is None else (below,)), *(() if above is None else (above,)),
        )  # fmt: skip
        return (per_query * batch.query_weight).sum()

    @staticmethod
    def backward(ctx, grad_output):
        loss, batch = ctx.loss, ctx.batch
        (ratio, tpr_slope, tpr_scale, prior, complement) = ctx.saved_tensors[:5]
        weighted_fpr, weighted_tpr, denominator = ctx.saved_tensors[5:8]
        regularised = list(ctx.saved_tensors[8:])
        n_positives, n_negatives = batch.n_positives_clamped, batch.n_negatives_clamped
        query = batch.query_weight * grad_output
        common = (query / n_positives) * batch.positive_valid / denominator.square()
        grad_fpr = common * complement * weighted_tpr
        # d l1 / d r = 2 min(r, 1), and d r / d s_qp = -1 / tau1, d r / d s_qj = 1 / tau1.
        slope = ratio.clamp_(max=1).mul_((grad_fpr * (2 / loss.tau1) / n_negatives)[:, :, None])
        grad_scores = slope.sum(dim=1)
        grad_positive = slope.sum(dim=2).neg_()
        grad_positive += common * prior * weighted_fpr * tpr_scale * tpr_slope * (0.5 / loss.tau2)
        if loss.lambda_pos > 0:
            below = regularised.pop(0)
            factor = query * (2 * loss.lambda_pos) / n_positives
            total = below.sum(dim=1, keepdim=True) / n_positives
            grad_positive -= factor * (below - batch.positive_valid * total)
        if loss.lambda_neg > 0:
            above = regularised.pop(0)
            factor = query * (2 * loss.lambda_neg) / n_negatives
            total = above.sum(dim=1, keepdim=True) / n_negatives
            grad_scores += factor * (above - batch.negative_mask * total)
        grad_scores.scatter_add_(1, ctx.layout.positions, grad_positive)
        return grad_scores, None, None, None, None, None, None


class _FalsePositiveSum(torch.autograd.Function):
    """``sum_j l1(s_qp - s_qj)`` for every query ``q`` and positive ``p``, in one pass.

    Inputs: positive scores ``(B, K)`` and the scores ``(B, B)`` of the negatives (``-inf`` at
    the other items, whose terms vanish). With ``r = max(1 - x/tau, 0)`` and ``m = min(r, 1)``,
    ``l1(x) = m (2r - m)`` and ``l1'(x) = -2m/tau``: the forward pass keeps the ``(B, K, B)``
    derivative and no other intermediate, which halves the time of plain autograd.
    """

    @staticmethod
    def forward(ctx, positive, negatives, tau):
        ratio = (1 - positive / tau)[:, :, None] + (negatives / tau)[:, None, :]
        ratio = ratio.clamp_(min=0)
        capped = ratio.clamp(max=1)
        values = ratio.mul_(2).sub_(capped).mul_(capped).sum(dim=2)
        ctx.save_for_backward(capped.mul_(-2 / tau))
        return values

    @staticmethod
    def backward(ctx, grad_output):
        (slope,) = ctx.saved_tensors
        weighted = slope * grad_output[:, :, None]
        return weighted.sum(dim=2), -weighted.sum(dim=1), None


class _CosineGram(torch.autograd.Function):
    """Cosine similarities ``U U^T`` of the rows of ``E`` (``U`` = rows L2-normalised, as
    :func:`torch.nn.functional.normalize`), with a backward pass in a few operations:
    ``dU = (G + G^T) U`` and ``dE = (dU - U <dU, U>) / |E|``."""

    @staticmethod
    def forward(ctx, embeddings):
        unit, norms = unit_rows_and_norms(embeddings)
        ctx.save_for_backward(unit, norms)
        return unit @ unit.T

    @staticmethod
    def backward(ctx, grad_output):
        unit, norms = ctx.saved_tensors
        return unit_rows_gradient((grad_output + grad_output.T) @ unit, unit, norms)


class _StaticLayout:
    """Index tensors of a batch of ``G`` groups of ``M`` items (``B = G M``), by shape only.

    ``positions`` (B, M - 1): the columns of the other members of each item's group;
    ``different`` (B, B): items of different groups; ``pair_entries`` (G, M (M - 1) / 2): the
    flat index in the (B, B) scores of each unordered pair ``a < b`` of each group;
    ``pair_of`` (B, M - 1): for each item and other member, the flat index of their pair among
    all groups' pairs; ``auxiliary_columns`` (1, width): the positions of an auxiliary vector.
    """

    def __init__(self, n_groups, size, width, device):
        self.size = size
        self.auxiliary_columns = torch.arange(width, device=device)[None, :]
        self.half = self.auxiliary_columns[0] + 0.5
        self.zeros = torch.zeros(n_groups * size, size - 1, n_groups * size, device=device)
        columns = torch.arange(size - 1, device=device)
        rows = torch.arange(size, device=device)[:, None]
        others = columns[None, :] + (columns[None, :] >= rows).long()  # (M, M - 1)
        starts = torch.arange(n_groups, device=device).repeat_interleave(size) * size
        self.positions = starts[:, None] + others.repeat(n_groups, 1)
        group = torch.arange(n_groups, device=device).repeat_interleave(size)
        self.different = group[:, None] != group[None, :]
        first, second = torch.triu_indices(size, size, offset=1, device=device)
        n_items = n_groups * size
        group_starts = torch.arange(n_groups, device=device)[:, None] * size
        self.pair_entries = (group_starts + first) * n_items + group_starts + second
        pair_index = torch.zeros(size, size, dtype=torch.long, device=device)
        numbers = torch.arange(first.shape[0], device=device)
        pair_index[first, second] = numbers
        pair_index[second, first] = numbers
        pair_offsets = torch.arange(n_groups, device=device).repeat_interleave(size)
        self.pair_of = pair_offsets[:, None] * first.shape[0] + pair_index.gather(1, others).repeat(
            n_groups, 1
        )


class _GroupedBatch:
    """Positives and negatives of every query of a grouped batch, in the layout's shapes.

    ``scores`` is ``(B, B)``, or ``(R, B)`` for the rows ``rows`` (a slice) alone; the positives
    of an item are the other valid members of its group (``positive_scores`` and
    ``positive_valid`` of shape (R, M - 1)), its negatives the valid items of the other groups.
    ``n_queries`` counts the valid queries of the whole batch.
    """

    def __init__(self, scores, valid, layout, rows=None):
        self.rows = slice(None) if rows is None else rows
        flat = valid.reshape(-1)
        column = flat[self.rows, None]
        positions = layout.positions[self.rows]
        self.scores = scores
        self.positive_scores = scores.gather(1, positions)
        self.positive_valid = flat[positions] & column
        self.n_positives = self.positive_valid.sum(dim=1)
        self.negative_mask = layout.different[self.rows] & column & flat
        self.n_negatives = self.negative_mask.sum(dim=1)
        self.query_valid = (self.n_positives > 0) & (self.n_negatives > 0) & flat[self.rows]
        if rows is None:
            self.n_queries = self.query_valid.sum()
        else:  # a valid item is a query when its group has another item and others exist
            per_group = valid.sum(dim=1)
            answered = (per_group >= 2) & (per_group < per_group.sum())
            self.n_queries = (per_group * answered).sum()
        # As (B, 1) floats, for the fused loss: counts (at least one) and each query's weight
        # in the mean over the valid queries.
        counts = torch.stack([self.n_positives, self.n_negatives], dim=1).clamp_(min=1)
        counts = counts.to(scores.dtype)
        self.n_positives_clamped, self.n_negatives_clamped = counts[:, :1], counts[:, 1:]
        weight = self.query_valid.to(scores.dtype)
        self.query_weight = (weight / weight.sum().clamp(min=1))[:, None]


class _GroupLayout:
    """Where each item of a batch with labels in any order goes in a grouped layout."""

    def __init__(self, index, valid, classes):
        self.index, self.valid, self.classes = index, valid, classes

    @classmethod
    def of(cls, labels):
        """Group ``labels`` by class: reads the group sizes back to the host."""
        classes, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
        n_groups, size = classes.shape[0], max(int(counts.max()), 1) if labels.numel() else 1
        order = torch.argsort(inverse, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(labels.shape[0], device=labels.device) - starts[inverse[order]]
        position = inverse[order] * size + slot
        index = torch.zeros(n_groups * size, dtype=torch.long, device=labels.device)
        valid = torch.zeros(n_groups * size, dtype=torch.bool, device=labels.device)
        index[position] = order
        valid[position] = True
        return cls(index, valid.view(n_groups, size), classes)


def _check_class_counts(class_counts):
    counts = np.asarray(class_counts)
    if counts.ndim != 1 or counts.shape[0] < 2:
        raise ValueError(
            f"class_counts must list the sizes of at least two classes, got {class_counts!r}."
        )
    if not np.issubdtype(counts.dtype, np.integer) or counts.min() < 1:
        raise ValueError(f"class_counts must be positive integers, got {class_counts!r}.")
    if counts.max() < 2:
        raise ValueError(
            "No class has at least two items, so no query has a positive: SOPRC needs classes "
            "with two or more items."
        )
    return counts.astype(np.int64)
