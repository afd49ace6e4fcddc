"""Ordered weighted losses (OWL) of Reddi et al. (AISTATS 2019), the losses of Stochastic Negative
Mining.

For an example with positive label ``y`` and score vector ``v``, sort the scores of its negative
labels in decreasing order, ``v_B[1] >= v_B[2] >= ...``, and with a surrogate ``phi`` of the step
``1{u <= 0}`` and non-negative weights ``theta``:

* POWL (pairwise): ``sum_j theta_j * phi(v_y - v_B[j])``;
* BOWL (binary): ``phi(v_y) + sum_j theta_j * phi(-v_B[j])``.

With all ``K - 1`` negatives these are the paper's Definitions 3 and 4; with ``B`` negatives sampled
uniformly and weights ``vartheta`` they are its Algorithm 1 (Stochastic Negative Mining), an
unbiased estimate of an OWL over all labels. Everything here is a pure function of score tensors,
plus :class:`OrderedWeightedLoss`, the same as a ``torch.nn.Module``.
"""

import functools
import math
from numbers import Integral, Real

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..utils._docstrings import fill_docs
from ..utils._validation import check_ndim, check_positive_int

__all__ = [
    "OrderedWeightedLoss",
    "bowl",
    "exponential",
    "get_surrogate",
    "hinge",
    "logistic",
    "ordered_weighted_loss",
    "owl_weights",
    "powl",
    "ramp",
    "squared_hinge",
]


# ---------------------------------------------------------------------------------- surrogates
_SURROGATE_DOCS = {
    "margins_to_losses": """
        Parameters
        ----------
        u : torch.Tensor
            Margins.

        Returns
        -------
        loss : torch.Tensor
            Same shape as ``u``.
        """
}


@fill_docs(_SURROGATE_DOCS)
def hinge(u):
    """Hinge surrogate ``max(1 - u, 0)`` (convex).

    {margins_to_losses}
    """
    return torch.clamp(1 - u, min=0)


@fill_docs(_SURROGATE_DOCS)
def logistic(u):
    """Logistic surrogate ``log2(1 + exp(-u))`` (convex; equals 1 at 0).

    {margins_to_losses}
    """
    return F.softplus(-u) / math.log(2)


@fill_docs(_SURROGATE_DOCS)
def squared_hinge(u):
    """Squared hinge surrogate ``max(1 - u, 0) ** 2`` (convex).

    {margins_to_losses}
    """
    return torch.clamp(1 - u, min=0) ** 2


@fill_docs(_SURROGATE_DOCS)
def exponential(u):
    """Exponential surrogate ``exp(-u)`` (convex).

    {margins_to_losses}
    """
    return torch.exp(-u)


def ramp(u, margin=1.0):
    """Ramp surrogate ``1{u <= 0} + (1 - u / margin) 1{0 < u <= margin}`` (not convex).

    Parameters
    ----------
    u : torch.Tensor
        Margins.
    margin : float, default=1.0
        The margin ``rho > 0`` at which the loss reaches 0.

    Returns
    -------
    loss : torch.Tensor
        Same shape as ``u``, in [0, 1]. Its gradient is zero where ``u <= 0`` or ``u > margin``.
    """
    return torch.clamp(1 - u / margin, min=0, max=1)


_SURROGATES = {
    "hinge": hinge,
    "logistic": logistic,
    "squared_hinge": squared_hinge,
    "exponential": exponential,
    "ramp": ramp,
}


def get_surrogate(surrogate, *, margin=1.0):
    """The surrogate function ``phi`` of a name, or a callable unchanged.

    Parameters
    ----------
    surrogate : {"hinge", "logistic", "squared_hinge", "exponential", "ramp"} or callable
        A name, or a function mapping a tensor of margins to a tensor of losses of the same shape
        (element-wise, non-increasing, with ``phi(u) >= 1{u <= 0}`` for the guarantees of the
        paper to hold).
    margin : float, default=1.0
        Margin ``rho`` of the ramp surrogate (ignored by the others).

    Returns
    -------
    phi : callable
        Element-wise surrogate.
    """
    if callable(surrogate):
        return surrogate
    if surrogate not in _SURROGATES:
        raise ValueError(
            f"surrogate must be one of {sorted(_SURROGATES)} or a callable, got {surrogate!r}."
        )
    if surrogate == "ramp":
        if not (isinstance(margin, Real) and margin > 0):
            raise ValueError(f"The ramp surrogate needs a margin > 0, got {margin!r}.")
        return functools.partial(ramp, margin=margin)
    return _SURROGATES[surrogate]


# ---------------------------------------------------------------------------------- weights
def owl_weights(
    kind="topk", n_negatives=1024, *, top_k=1, exponent=1.0, scale="normalized", n_labels=None
):
    """The weight vector ``vartheta`` over the ``n_negatives`` sorted sampled negatives.

    Parameters
    ----------
    kind : {"topk", "uniform", "power"} or array-like of shape (n_negatives,), default="topk"
        ``"topk"``: equal weights on the ``top_k`` highest-scored negatives, 0 beyond (top-k'
        Stochastic Negative Mining; ``top_k=1`` is the paper's best setting). ``"uniform"``: equal
        weights on all of them (negative sampling). ``"power"``: ``vartheta_j`` proportional to
        ``j ** -exponent``. An array gives the weights directly; it must be non-negative and
        non-increasing (the condition of the paper's Theorem 2 and Algorithm 1).
    n_negatives : int, default=1024
        Number ``B`` of sampled negatives.
    top_k : int, default=1
        Number ``k'`` of mined negatives of ``"topk"``; also the ``k'`` of the paper's scaling.
    exponent : float, default=1.0
        Exponent ``a >= 0`` of ``"power"``.
    scale : {"normalized", "paper"}, default="normalized"
        ``"normalized"``: the weights sum to 1, so the loss is a weighted mean of its negative terms
        (an array is used as given). ``"paper"``: the weights are rescaled so that the largest is
        ``(K - 1) / (k' B)``; for ``"topk"`` this is the paper's ``vartheta_j = (K-1)/(k' B)``,
        under which the expected sampled loss is an OWL with ``theta_j = 1/k'`` on the top ``k'``
        of all labels (its Lemma 2), and for ``"uniform"`` it is the paper's negative sampling,
        an unbiased estimate of the sum over all negatives divided by ``k'``.
    n_labels : int or None, default=None
        Number of labels ``K``; needed by ``scale="paper"``.

    Returns
    -------
    weights : ndarray of shape (n_negatives,), dtype float64
        Non-negative, non-increasing weights.

    Examples
    --------
    >>> from skrank.losses import owl_weights
    >>> owl_weights("topk", 4, top_k=2)
    array([0.5, 0.5, 0. , 0. ])
    >>> owl_weights("topk", 4, top_k=2, scale="paper", n_labels=9)
    array([1., 1., 0., 0.])
    """
    n_negatives = check_positive_int(n_negatives, "n_negatives")
    top_k = check_positive_int(top_k, "top_k")
    if isinstance(kind, str):
        weights = _named_weights(kind, n_negatives, top_k, exponent)
    else:
        weights = check_weight_vector(kind, n_negatives)
    if scale == "normalized":
        return weights
    if scale != "paper":
        raise ValueError(f"scale must be 'normalized' or 'paper', got {scale!r}.")
    if n_labels is None or not isinstance(n_labels, Integral) or n_labels < n_negatives + 1:
        raise ValueError(
            f"scale='paper' needs n_labels (K) of at least n_negatives + 1 = {n_negatives + 1}, "
            f"got {n_labels!r}."
        )
    return weights / weights.max() * (n_labels - 1) / (top_k * n_negatives)


def _named_weights(kind, n_negatives, top_k, exponent):
    if kind == "topk":
        if top_k > n_negatives:
            raise ValueError(
                f"top_k={top_k} exceeds n_negatives={n_negatives}: it cannot mine more negatives "
                "than it samples."
            )
        weights = np.zeros(n_negatives)
        weights[:top_k] = 1.0 / top_k
        return weights
    if kind == "uniform":
        return np.full(n_negatives, 1.0 / n_negatives)
    if kind == "power":
        if not (isinstance(exponent, Real) and np.isfinite(exponent) and exponent >= 0):
            raise ValueError(f"exponent must be a finite number >= 0, got {exponent!r}.")
        weights = np.arange(1, n_negatives + 1, dtype=np.float64) ** -float(exponent)
        return weights / weights.sum()
    raise ValueError(
        f"kind must be 'topk', 'uniform', 'power' or an array of weights, got {kind!r}."
    )


def check_weight_vector(weights, n_negatives=None):
    """Validate a user weight vector: 1-D, finite, non-negative, non-increasing, not all zero.

    Parameters
    ----------
    weights : array-like of shape (n_negatives,)
        Weights over the sorted negatives.
    n_negatives : int or None, default=None
        Required length, if any.

    Returns
    -------
    weights : ndarray of float64
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 1 or weights.size == 0:
        raise ValueError(f"The weight vector must be 1-D and non-empty, got shape {weights.shape}.")
    if n_negatives is not None and weights.size != n_negatives:
        raise ValueError(
            f"The weight vector has {weights.size} entries but n_negatives={n_negatives}."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("The weights must be finite and non-negative.")
    if np.any(np.diff(weights) > 0):
        raise ValueError(
            "The weights must be non-increasing (weight j applies to the j-th highest-scored "
            "negative); this is what makes the ordered weighted loss convex (Theorem 2)."
        )
    if not weights.any():
        raise ValueError("The weights are all zero: the loss would ignore every negative.")
    return weights


# ---------------------------------------------------------------------------------- losses
_OWL_DOCS = {
    "scores": [
        (
            "positive_scores",
            "torch.Tensor of shape (n_samples,)",
            "Score of the positive label of each example.",
        ),
        (
            "negative_scores",
            "torch.Tensor of shape (n_samples, n_negatives)",
            "Scores of the negative labels, in any order.",
        ),
        (
            "weights",
            "array-like or torch.Tensor of shape (n_weights,)",
            "Non-negative, non-increasing weights by rank. Ranks beyond ``n_weights`` weigh 0; "
            "weights beyond the number of valid negatives of a row are unused for that row.",
        ),
    ],
    "options": [
        ("surrogate", "str or callable", "See :func:`get_surrogate`."),
        (
            "mask",
            "torch.Tensor of bool, shape (n_samples, n_negatives)",
            "``True`` where the entry is a negative of the example (e.g. ``False`` for its own "
            "positive labels in a shared sample). None: all entries are negatives.",
        ),
        ("margin", "float", "Margin of the ramp surrogate."),
    ],
}
_OWL_DOCS["returns"] = {"Returns": [("losses", "torch.Tensor of shape (n_samples,)", "")]}
_OWL_DOCS["sections"] = {
    "Parameters": _OWL_DOCS["scores"] + _OWL_DOCS["options"],
    **_OWL_DOCS["returns"],
}

# The inputs of OrderedWeightedLoss's forward and example_losses.
_MODULE_INPUT_DOCS = {"inputs": _OWL_DOCS["scores"][:2] + [_OWL_DOCS["options"][1]]}


def _ranks_used(weights):
    """Number of leading ranks with a non-zero weight (at least 1), from host values."""
    nonzero = np.flatnonzero(np.asarray(weights) > 0)
    return int(nonzero.max()) + 1 if nonzero.size else 1


def _highest_scores(scores, k):
    """The ``k`` highest scores of each row of ``scores`` (n, m), best first, as
    ``torch.topk(scores, k, dim=1).values`` (ties may take their gradient from another column
    of the same score). On the CPU, numpy's introselect finds them: for a few ranks of a row of
    hundreds, about twice as fast as ``topk`` with its backward pass."""
    if scores.device.type != "cpu" or scores.dtype not in (torch.float32, torch.float64):
        return torch.topk(scores, k, dim=1).values
    with torch.no_grad():
        values = scores.detach().numpy()
        candidates = np.argpartition(values, -k, axis=1)[:, -k:]
        order = np.argsort(-np.take_along_axis(values, candidates, axis=1), axis=1, kind="stable")
        columns = torch.from_numpy(np.take_along_axis(candidates, order, axis=1))
    return scores.gather(1, columns)


def _sorted_negatives(negative_scores, weights, mask, n_ranks=None):
    """The highest negative scores of each row, best first, as many as ``weights`` needs.

    Returns ``(scores, valid, weights)``: ``scores`` (n, r) finite (masked ranks hold 0),
    ``valid`` (n, r) marks real negatives, ``weights`` truncated to the ``r`` ranks used.
    ``n_ranks`` (the ranks of non-zero weight) is computed from ``weights`` when not given,
    which reads a weight tensor back to the host.
    """
    if n_ranks is None:
        n_ranks = _ranks_used(weights.detach().cpu() if torch.is_tensor(weights) else weights)
    if not isinstance(weights, torch.Tensor):
        weights = np.ascontiguousarray(weights, dtype=np.float64)
    weights = torch.as_tensor(weights, dtype=negative_scores.dtype, device=negative_scores.device)
    n_ranks = min(n_ranks, negative_scores.shape[1])
    if mask is None:
        top = _highest_scores(negative_scores, n_ranks)
        return top, torch.ones_like(top, dtype=torch.bool), weights[:n_ranks]
    if mask.shape != negative_scores.shape:
        raise ValueError(
            f"mask has shape {tuple(mask.shape)} but negative_scores has "
            f"{tuple(negative_scores.shape)}."
        )
    masked = negative_scores.masked_fill(~mask, -math.inf)
    top = _highest_scores(masked, n_ranks)
    valid = torch.isfinite(top)
    return torch.where(valid, top, torch.zeros_like(top)), valid, weights[:n_ranks]


def _check_positive_scores(positive_scores, negative_scores):
    check_ndim(negative_scores, 2, "(n_samples, n_negatives)", input_name="negative_scores")
    if positive_scores.shape != negative_scores.shape[:1]:
        raise ValueError(
            f"positive_scores must have shape ({negative_scores.shape[0]},), one score per row "
            f"of negative_scores; got shape {tuple(positive_scores.shape)}."
        )


@fill_docs(_OWL_DOCS)
def powl(positive_scores, negative_scores, weights, surrogate="hinge", *, mask=None, margin=1.0):
    """Pairwise ordered weighted loss of each example.

    ``sum_j weights[j] * phi(positive_score - negative_score_[j])`` where ``negative_score_[j]``
    is the ``j``-th highest score among the example's (valid) negatives.

    {sections}

    Examples
    --------
    The second example's first negative is masked (e.g. one of its own positive labels):

    >>> import torch
    >>> from skrank.losses import powl
    >>> positive_scores = torch.tensor([0.5, 0.0])
    >>> negative_scores = torch.tensor([[0.9, -0.2, 0.1], [0.3, 0.2, -1.0]])
    >>> mask = torch.tensor([[True, True, True], [False, True, True]])
    >>> powl(positive_scores, negative_scores, [1.0, 0.5], mask=mask)
    tensor([1.7000, 1.2000])
    """
    return _owl("powl", positive_scores, negative_scores, weights, surrogate, mask, margin)


@fill_docs(_OWL_DOCS)
def bowl(positive_scores, negative_scores, weights, surrogate="hinge", *, mask=None, margin=1.0):
    """Binary ordered weighted loss of each example.

    ``phi(positive_score) + sum_j weights[j] * phi(-negative_score_[j])`` with the negatives
    sorted by decreasing score.

    {sections}

    Examples
    --------
    With the hinge, ``phi(0.5) + phi(-0.9) = 0.5 + 1.9``:

    >>> import torch
    >>> from skrank.losses import bowl
    >>> bowl(torch.tensor([0.5]), torch.tensor([[0.9, -0.2, 0.1]]), [1.0])
    tensor([2.4000])
    """
    return _owl("bowl", positive_scores, negative_scores, weights, surrogate, mask, margin)


def _owl(loss, positive_scores, negative_scores, weights, surrogate, mask, margin, n_ranks=None):
    """POWL or BOWL of each example (``n_ranks``: see :func:`_sorted_negatives`)."""
    _check_positive_scores(positive_scores, negative_scores)
    phi = get_surrogate(surrogate, margin=margin)
    top, valid, weights = _sorted_negatives(negative_scores, weights, mask, n_ranks)
    if loss == "powl":
        terms = phi(positive_scores[:, None] - top) * weights
        return torch.where(valid, terms, torch.zeros_like(terms)).sum(dim=1)
    terms = phi(-top) * weights
    return phi(positive_scores) + torch.where(valid, terms, torch.zeros_like(terms)).sum(dim=1)


@fill_docs(_OWL_DOCS)
def ordered_weighted_loss(
    positive_scores,
    negative_scores,
    weights,
    *,
    loss="bowl",
    surrogate="hinge",
    mask=None,
    margin=1.0,
):
    """POWL or BOWL of each example (see :func:`powl` and :func:`bowl`).

    Parameters
    ----------
    {scores}
    loss : {"bowl", "powl"}, default="bowl"
        Which ordered weighted loss.
    {options}

    {returns}
    """
    if loss not in _LOSSES:
        raise ValueError(f"loss must be 'bowl' or 'powl', got {loss!r}.")
    return _LOSSES[loss](
        positive_scores, negative_scores, weights, surrogate, mask=mask, margin=margin
    )


_LOSSES = {"bowl": bowl, "powl": powl}


class OrderedWeightedLoss(nn.Module):
    """POWL or BOWL as a ``torch.nn.Module``, averaged over the examples of a batch.

    Stochastic Negative Mining (Reddi et al., 2019, Algorithm 1): given each example's positive
    score and the scores of ``B`` sampled negative labels, sort the negatives by score and weigh
    them by rank with ``weights``; top-k' weights make the loss focus on the hardest sampled
    negatives, uniform weights give plain negative sampling. See :func:`owl_weights` for the
    weight vectors and :class:`~skrank.losses.NegativeLabelSampler` for drawing the negatives.

    Read more in the :ref:`User Guide <losses>`.

    Parameters
    ----------
    weights : array-like of shape (n_weights,)
        Non-negative, non-increasing weights by rank (e.g. from :func:`owl_weights`). Stored as a
        buffer: it follows the module's device and is part of its ``state_dict``.
    loss : {"bowl", "powl"}, default="bowl"
        Binary or pairwise ordered weighted loss.
    surrogate : {"hinge", "logistic", "squared_hinge", "exponential", "ramp"} or callable, \
default="hinge"
        The surrogate ``phi`` of the 0-1 step.
    margin : float, default=1.0
        Margin of the ramp surrogate.

    Examples
    --------
    >>> import torch
    >>> from skrank.losses import OrderedWeightedLoss, owl_weights
    >>> criterion = OrderedWeightedLoss(owl_weights("topk", n_negatives=3), loss="powl")
    >>> positive = torch.tensor([0.5, 0.2], requires_grad=True)
    >>> negatives = torch.tensor([[0.9, -0.2, 0.1], [0.0, 0.3, -0.5]])
    >>> criterion(positive, negatives)
    tensor(1.2500, grad_fn=<MeanBackward0>)
    """

    def __init__(self, weights, loss="bowl", surrogate="hinge", margin=1.0):
        super().__init__()
        if loss not in _LOSSES:
            raise ValueError(f"loss must be 'bowl' or 'powl', got {loss!r}.")
        self.loss = loss
        self.surrogate = surrogate
        self.margin = margin
        self._phi = get_surrogate(surrogate, margin=margin)
        weights = check_weight_vector(weights)
        self._n_ranks = _ranks_used(weights)  # from host values: no read-back at each call
        self.register_buffer("weights", torch.as_tensor(weights, dtype=torch.float32))

    @fill_docs(_MODULE_INPUT_DOCS)
    def forward(self, positive_scores, negative_scores, mask=None, valid=None):
        """Mean loss over the (valid) examples of the batch.

        Parameters
        ----------
        {inputs}
        valid : torch.Tensor of bool, shape (n_samples,), default=None
            Which rows are examples (False: padding of a fixed-shape batch, left out of the
            mean). None: all rows.

        Returns
        -------
        loss : torch.Tensor
            Scalar.
        """
        losses = self.example_losses(positive_scores, negative_scores, mask)
        if valid is None:
            return losses.mean()
        losses = torch.where(valid, losses, torch.zeros_like(losses))
        return losses.sum() / valid.sum().clamp(min=1)

    @fill_docs(_MODULE_INPUT_DOCS)
    def example_losses(self, positive_scores, negative_scores, mask=None):
        """The loss of each example, before :meth:`forward` averages them (e.g. to weigh the
        examples in your own reduction).

        Parameters
        ----------
        {inputs}

        Returns
        -------
        losses : torch.Tensor of shape (n_samples,)
        """
        return _owl(
            self.loss,
            positive_scores,
            negative_scores,
            self.weights,
            self._phi,
            mask,
            self.margin,
            self._n_ranks,
        )

    def extra_repr(self):
        return f"loss={self.loss!r}, surrogate={self.surrogate!r}, n_weights={len(self.weights)}"
