"""SOPRC: the sampling-rate-invariant stochastic estimator of 1 - AUPRC (Wen et al., NeurIPS 2022).

The mathematics (read more in the :ref:`User Guide <soprc>`) corrects the paper's printed
formulas: ``l1`` is the one-sided Huber loss that is continuous at 0, the TPR estimate counts the
positive itself (``+1``) so it never divides by zero, and the auxiliary vector of a class is updated
by interpolating the batch's sorted positive scores onto ``L_c`` evenly spaced quantile positions.

Public pieces: the surrogates :func:`one_sided_huber` and :func:`one_sided_sigmoid`, the
interpolation :func:`interpolate_scores` (the paper's Alg. 2), the single-query estimator
:func:`soprc_query_loss`, and the retrieval loss :class:`SOPRCLoss`.
"""

from numbers import Integral, Real

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

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

    Row ``r`` holds ``counts[r] >= 1`` ascending scores ``u_1 <= ... <= u_n`` (then padding).
    Returns rows ``(u_0, u_1, ..., u_n, u_{n+1}, 0, ...)`` of width ``width + 2`` with
    ``u_0 = max(2 u_1 - u_2, low)`` and ``u_{n+1} = min(2 u_n - u_{n-1}, high)``; knot ``i``
    stands at quantile ``(i - 0.5) / n``.
    """
    rows, width = sorted_scores.shape
    low, high = score_range
    row_index = torch.arange(rows, device=sorted_scores.device)
    first = sorted_scores[:, 0]
    last = sorted_scores[row_index, counts - 1]
    second = sorted_scores[row_index, (counts - 1).clamp(max=1)]
    second_last = sorted_scores[row_index, (counts - 2).clamp(min=0)]
    columns = torch.arange(width, device=sorted_scores.device)
    extended = sorted_scores.new_zeros(rows, width + 2)
    extended[:, 1:-1] = sorted_scores.masked_fill(columns[None, :] >= counts[:, None], 0)
    extended[:, 0] = (2 * first - second).clamp(min=low)
    extended[row_index, counts + 1] = (2 * last - second_last).clamp(max=high)
    return extended


def _read_quantiles(extended, counts, lengths, width):
    """The piecewise-linear interpolant through the knots of ``_extend_sorted`` read at
    ``(j - 0.5) / lengths[r]``, ``j = 1..lengths[r]``; rows ``(rows, width)``, zero padded
    (``width >= max(lengths)``).

    Linear in ``extended`` for fixed counts and lengths, so rows sharing both can be averaged
    before reading.
    """
    dtype, device = extended.dtype, extended.device
    positions = torch.arange(width, device=device, dtype=dtype)
    quantiles = (positions[None, :] + 0.5) / lengths.clamp(min=1).to(dtype)[:, None]
    # Target t lies between knots i and i + 1 with i = floor(t n + 0.5), i in 0..n.
    knot = quantiles * counts.to(dtype)[:, None] + 0.5
    segment = torch.minimum(knot.floor().long(), counts[:, None])
    weight = knot - segment.to(dtype)
    values = torch.lerp(extended.gather(1, segment), extended.gather(1, segment + 1), weight)
    return values.masked_fill(positions[None, :] >= lengths[:, None], 0)


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
    if isinstance(length, bool) or not isinstance(length, Integral) or length < 1:
        raise ValueError(f"length must be a positive integer, got {length!r}.")
    counts = torch.tensor([scores.shape[0]], device=scores.device)
    lengths = torch.tensor([int(length)], device=scores.device)
    extended = _extend_sorted(scores.sort().values[None, :], counts, score_range)
    return _read_quantiles(extended, counts, lengths, int(length))[0]


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
    ``auxiliary_lengths``; ``state_dict`` round-trips.

    Read more in the :ref:`User Guide <losses>`.

    Parameters
    ----------
    class_counts : array-like of int of shape (n_classes,)
        Number of training items ``n_c`` of each class; labels passed to the loss are class
        indices ``0..n_classes-1``.
    tau1 : float, default=0.1
        Margin of the FPR surrogate :func:`one_sided_huber`.
    tau2 : float, default=0.001
        Temperature of the TPR surrogate :func:`one_sided_sigmoid`.
    beta : float, default=0.1
        Moving-average rate of the auxiliary vectors, in ``(0, 1]``.
    lambda_pos : float, default=5.0
        Weight of the semi-variance of the positive scores below their mean.
    lambda_neg : float, default=1.0
        Weight of the semi-variance of the negative scores above their mean.
    max_auxiliary_length : int or None, default=None
        Cap on ``L_c``; ``None`` uses ``L_c = n_c - 1`` (the paper).
    prior : {"dataset", "batch"}, default="dataset"
        ``"dataset"`` uses ``pi_c``; ``"batch"`` the query's batch rate ``|P_q|/(|P_q| + |N_q|)``
        (the biased AP-style estimator, an ablation).
    tpr_source : {"auxiliary", "batch"}, default="auxiliary"
        ``"batch"`` estimates the TPR from the query's batch positives instead of ``v_c`` (an
        ablation; gradients then flow through them, as in an AP loss).
    exact : bool, default=False
        Use exact indicators ``1{x <= 0}`` instead of the surrogates (no useful gradient; for
        evaluating the estimator).
    score_range : tuple of float, default=(-1.0, 1.0)
        Range of the scores, bounding the extrapolated ends of the interpolation.

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
        # Static width of every gathered auxiliary row: shapes never depend on the batch.
        self._width = int(lengths.max())
        self.register_buffer(
            "priors", torch.as_tensor((counts - 1) / (counts.sum() - 1), dtype=torch.float32)
        )
        # The last entry is scratch space: writes outside a class's vector land there.
        self.register_buffer("auxiliary", torch.zeros(int(lengths.sum()) + 1))
        self.register_buffer("auxiliary_offsets", torch.as_tensor(offsets, dtype=torch.long))
        self.register_buffer("auxiliary_lengths", torch.as_tensor(lengths, dtype=torch.long))
        self.register_buffer("class_seen", torch.zeros(counts.shape[0], dtype=torch.bool))

    @property
    def n_classes(self):
        """Number of classes."""
        return self.priors.shape[0]

    def auxiliary_vector(self, label):
        """The auxiliary vector ``v_c`` of class index ``label`` (ascending once it was seen)."""
        start, length = int(self.auxiliary_offsets[label]), int(self.auxiliary_lengths[label])
        return self.auxiliary[start : start + length]

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
        if embeddings.ndim != 2:
            raise ValueError(
                f"embeddings must be 2-D (batch_size, n_dims), got {tuple(embeddings.shape)}."
            )
        layout = _GroupLayout.of(self._check_labels(labels, embeddings.shape[0]))
        grouped = embeddings[layout.index].view(*layout.valid.shape, -1)
        return self.forward_grouped(grouped, layout.classes, layout.valid)

    def forward_grouped(self, embeddings, classes, valid=None):
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

        Returns
        -------
        loss : torch.Tensor
            Scalar loss.
        """
        if embeddings.ndim != 3:
            raise ValueError(
                "embeddings must be 3-D (n_groups, group_size, n_dims), got "
                f"{tuple(embeddings.shape)}."
            )
        n_groups, size, _ = embeddings.shape
        flat = F.normalize(embeddings.reshape(n_groups * size, -1), dim=1)
        scores = flat @ flat.T
        # Matrix products need not be exactly symmetric; the pair shortcut needs s_qp == s_pq.
        scores = (scores + scores.T) / 2
        valid = self._check_valid(valid, (n_groups, size), embeddings.device)
        return self._loss(scores, classes.long(), valid, symmetric=True)

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

    @staticmethod
    def _check_valid(valid, shape, device):
        if valid is None:
            return torch.ones(shape, dtype=torch.bool, device=device)
        if tuple(valid.shape) != shape:
            raise ValueError(f"valid must have shape {shape}, got {tuple(valid.shape)}.")
        return valid.to(device=device, dtype=torch.bool)

    # ------------------------------------------------------------------ the grouped core
    def _loss(self, scores, classes, valid, symmetric):
        if valid.shape[1] < 2:  # groups of one item: no query has a positive
            return scores.sum() * 0.0
        batch = _GroupedBatch(scores, classes, valid, symmetric)
        if self.training:
            self._update_auxiliary(batch)
        per_query = self._query_losses(batch) + self._semivariance(batch)
        queries = batch.query_valid
        total = torch.where(queries, per_query, torch.zeros_like(per_query)).sum()
        return total / queries.sum().clamp(min=1)

    @torch.no_grad()
    def _update_auxiliary(self, batch):
        n_groups, size, n_others = batch.positive_scores.shape
        sorted_scores = (
            batch.positive_scores.detach()
            .masked_fill(~batch.positive_valid, float("inf"))
            .sort(dim=2)
            .values.view(n_groups * size, n_others)
        )
        counts = batch.n_positives.view(-1)
        extended = _extend_sorted(sorted_scores, counts.clamp(min=1), self.score_range)
        # All valid queries of a group have the same number of positives, and φ is linear in
        # the knots: the mean of their interpolations is the interpolation of the mean knots.
        queries = batch.query_valid.view(n_groups, size)
        n_queries = queries.sum(dim=1)
        # Rows of padding or of queries without positives hold infinities: they must not mix in.
        extended = torch.where(queries.view(-1, 1), extended, torch.zeros_like(extended))
        knots = extended.view(n_groups, size, -1).sum(dim=1)
        knots = knots / n_queries.clamp(min=1)[:, None]
        group_counts = batch.n_positives.amax(dim=1).clamp(min=1)
        lengths = self.auxiliary_lengths[batch.classes]
        mean = _read_quantiles(knots, group_counts, lengths, self._width).to(self.auxiliary.dtype)
        positions, inside = self._auxiliary_positions(batch.classes)
        previous = self._gather_auxiliary(positions, inside, padding=0.0)
        seen = self.class_seen[batch.classes]
        blended = torch.where(seen[:, None], torch.lerp(previous, mean, self.beta), mean)
        updated = n_queries > 0
        blended = torch.where(updated[:, None], blended, previous)
        # Positions past a vector's end write the scratch entry, which is never read.
        target = torch.where(inside, positions, self.auxiliary.shape[0] - 1)
        self.auxiliary.index_put_((target.view(-1),), blended.view(-1))
        self.class_seen[batch.classes] = seen | updated

    def _query_losses(self, batch):
        """``loss_q`` of every query, shape (G M,) (meaningless where not ``query_valid``)."""
        n_groups, size, n_others = batch.positive_scores.shape
        positive = batch.positive_scores.view(n_groups * size, n_others)
        # Items that are not negatives of a query get score -inf: every term then vanishes.
        negatives = batch.scores.masked_fill(~batch.negative_mask, float("-inf"))
        if self.exact:
            fpr = _indicator(positive[:, :, None] - negatives[:, None, :]).sum(dim=2)
        else:
            fpr = _FalsePositiveSum.apply(positive, negatives, self.tau1)
        fpr = fpr / batch.n_negatives.clamp(min=1)[:, None]

        n_positives = batch.n_positives.view(-1)
        if self.tpr_source == "auxiliary":
            tpr = self._auxiliary_true_positive_sums(batch).view(n_groups * size, n_others)
            n_reference = self.auxiliary_lengths[batch.classes].repeat_interleave(size)
        else:
            reference = positive.masked_fill(
                ~batch.positive_valid.view(n_groups * size, n_others), float("-inf")
            )
            differences = positive[:, :, None] - reference[:, None, :]
            terms = (
                _indicator(differences) if self.exact else one_sided_sigmoid(differences, self.tau2)
            )
            tpr, n_reference = terms.sum(dim=2), n_positives
        tpr = (1 + tpr) / (n_reference[:, None] + 1)

        if self.prior == "dataset":
            prior = self.priors[batch.classes].repeat_interleave(size)
        else:
            prior = n_positives / (n_positives + batch.n_negatives).clamp(min=1)
        prior = prior.to(batch.scores.dtype).clamp(min=1e-12)[:, None]
        per_positive = _precision_loss(fpr, tpr, prior) * batch.positive_valid.view_as(fpr)
        return per_positive.sum(dim=1) / n_positives.clamp(min=1)

    def _auxiliary_true_positive_sums(self, batch):
        """``sum_{u in v_c} l2(s_qp - u)`` for every query and positive, shape (G, M, M - 1)."""
        n_groups, size, n_others = batch.positive_scores.shape
        positions, inside = self._auxiliary_positions(batch.classes)
        reference = self._gather_auxiliary(positions, inside, padding=float("-inf"))
        if not batch.symmetric:
            thresholds = batch.positive_scores.reshape(n_groups, size * n_others)
            return self._true_positive_sums(thresholds, reference).view(n_groups, size, n_others)
        # s_qp = s_pq and q, p share the class, hence v_c: one term per unordered pair.
        first, second, pair_of = _unordered_pairs(size, batch.scores.device)
        thresholds = batch.group_blocks[:, first, second]
        pair_sums = self._true_positive_sums(thresholds, reference)
        return pair_sums[:, pair_of]

    def _true_positive_sums(self, thresholds, reference):
        """Row-wise ``sum_u l2(t - u)`` (or ``1{t <= u}``) of thresholds ``(R, W)`` against
        reference rows ``(R, L)`` padded with ``-inf``."""
        if self.exact:
            return _indicator(thresholds[:, :, None] - reference[:, None, :]).sum(dim=2)
        return _TruePositiveSum.apply(thresholds, reference, self.tau2)

    def _auxiliary_positions(self, classes):
        """Flat positions ``(n, width)`` of the vectors of ``classes`` in ``auxiliary``, and the
        mask of the positions inside each vector."""
        columns = torch.arange(self._width, device=classes.device)
        positions = self.auxiliary_offsets[classes][:, None] + columns[None, :]
        return positions, columns[None, :] < self.auxiliary_lengths[classes][:, None]

    def _gather_auxiliary(self, positions, inside, padding):
        """The vectors at ``positions``, ``padding`` outside each vector."""
        target = torch.where(inside, positions, self.auxiliary.shape[0] - 1)
        rows = self.auxiliary[target]
        return rows.masked_fill(~inside, padding)

    def _semivariance(self, batch):
        """The semi-variance regulariser of every query, shape (G M,)."""
        total = torch.zeros_like(batch.n_negatives, dtype=batch.scores.dtype)
        if self.lambda_pos > 0:
            positive, valid = batch.positive_scores, batch.positive_valid
            n_positives = batch.n_positives.clamp(min=1)
            mean = (positive * valid).sum(dim=2) / n_positives
            below = (mean[:, :, None] - positive).clamp(min=0) * valid
            total = total + self.lambda_pos * ((below**2).sum(dim=2) / n_positives).view(-1)
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


class _TruePositiveSum(torch.autograd.Function):
    """``sum_u l2(s_qp - u)`` over reference rows ``u`` (``-inf`` padded), no gradient to ``u``.

    ``l2(s - u) = tanh((u - s) / (2 tau))`` for ``u > s``; the forward pass sums the values and
    the derivatives ``-(1 - tanh^2)/(2 tau)`` so that only a ``(B, K)`` tensor is kept.
    """

    @staticmethod
    def forward(ctx, positive, reference, tau):
        scale = 1 / (2 * tau)
        gap = (reference * scale)[:, None, :] - (positive * scale)[:, :, None]
        values = gap.clamp_(min=0).tanh_()
        total = values.sum(dim=2)
        # tanh > 0 exactly where u > s: the derivative sums 1 - tanh^2 over those terms only.
        n_above = torch.sign(values).sum(dim=2)
        slope = (n_above - values.square_().sum(dim=2)) * -scale
        ctx.save_for_backward(slope)
        return total

    @staticmethod
    def backward(ctx, grad_output):
        (slope,) = ctx.saved_tensors
        return grad_output * slope, None, None


class _GroupedBatch:
    """Positives and negatives of every query of a batch laid out as ``G`` groups of ``M`` items.

    ``scores`` is ``(G M, G M)`` in that layout; the positives of the item ``(g, i)`` are the other
    valid items ``(g, j)`` of its group (``M - 1`` slots), its negatives the valid items of the
    other groups. Every shape depends on ``G`` and ``M`` only.
    """

    def __init__(self, scores, classes, valid, symmetric):
        n_groups, size = valid.shape
        if scores.shape != (n_groups * size, n_groups * size):
            raise ValueError(
                f"scores of shape {tuple(scores.shape)} do not match {n_groups} groups of {size}."
            )
        if classes.shape != (n_groups,):
            raise ValueError(f"classes must have shape ({n_groups},), got {tuple(classes.shape)}.")
        device = scores.device
        self.scores, self.classes, self.symmetric = scores, classes, symmetric
        others = _other_members(size, device)
        blocks = torch.diagonal(scores.view(n_groups, size, n_groups, size), dim1=0, dim2=2)
        self.group_blocks = blocks.permute(2, 0, 1)
        self.positive_scores = self.group_blocks.gather(2, others.expand(n_groups, -1, -1))
        self.positive_valid = valid[:, others] & valid[:, :, None]
        self.n_positives = self.positive_valid.sum(dim=2)
        group_of = torch.arange(n_groups, device=device).repeat_interleave(size)
        flat_valid = valid.view(-1)
        self.negative_mask = (
            (group_of[:, None] != group_of[None, :]) & flat_valid[:, None] & flat_valid[None, :]
        )
        self.n_negatives = self.negative_mask.sum(dim=1)
        self.query_valid = flat_valid & (self.n_positives.view(-1) > 0) & (self.n_negatives > 0)


def _other_members(size, device):
    """``(size, size - 1)``: for each position of a group, the other positions in order."""
    columns = torch.arange(size - 1, device=device)
    rows = torch.arange(size, device=device)[:, None]
    return columns[None, :] + (columns[None, :] >= rows).long()


def _unordered_pairs(size, device):
    """The ``size (size - 1) / 2`` pairs ``a < b`` of a group, and for each position and other
    member (as in :func:`_other_members`) the index of their pair."""
    first, second = torch.triu_indices(size, size, offset=1, device=device)
    pair_index = torch.zeros(size, size, dtype=torch.long, device=device)
    numbers = torch.arange(first.shape[0], device=device)
    pair_index[first, second] = numbers
    pair_index[second, first] = numbers
    return first, second, pair_index.gather(1, _other_members(size, device))


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
