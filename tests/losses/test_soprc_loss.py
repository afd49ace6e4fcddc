"""Tests of the SOPRC loss against brute-force per-query computations on tiny batches."""

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from skrank.losses import (
    SOPRCLoss,
    interpolate_scores,
    one_sided_huber,
    one_sided_sigmoid,
    soprc_query_loss,
)
from skrank.losses._soprc import _FalsePositiveSum
from skrank.sampling import ClassBalancedBatchSampler

TAU1, TAU2 = 0.3, 0.05


# ---------------------------------------------------------------- brute-force references
def huber_reference(x, tau):
    if x < 0:
        return 1 - 2 * x / tau
    return (1 - x / tau) ** 2 if x < tau else 0.0


def sigmoid_reference(x, tau):
    return (math.exp(-x / tau) - 1) / (math.exp(-x / tau) + 1) if x < 0 else 0.0


def step(x):
    return 1.0 if x <= 0 else 0.0


def query_loss_reference(positives, negatives, auxiliary, prior, exact):
    """The estimator of one query, one positive at a time, with Python loops."""
    l1 = step if exact else (lambda x: huber_reference(x, TAU1))
    l2 = step if exact else (lambda x: sigmoid_reference(x, TAU2))
    losses = []
    for s_p in positives:
        fpr = sum(l1(s_p - s_j) for s_j in negatives) / len(negatives)
        tpr = (1 + sum(l2(s_p - u) for u in auxiliary)) / (len(auxiliary) + 1)
        ratio = (1 - prior) / prior * fpr / tpr
        losses.append(ratio / (1 + ratio))
    return float(np.mean(losses))


def semivariance_reference(positives, negatives, lambda_pos, lambda_neg):
    mu_pos, mu_neg = np.mean(positives), np.mean(negatives)
    below = sum((s - mu_pos) ** 2 for s in positives if s < mu_pos) / len(positives)
    above = sum((s - mu_neg) ** 2 for s in negatives if s > mu_neg) / len(negatives)
    return lambda_pos * below + lambda_neg * above


def interpolation_reference(scores, length, low=-1.0, high=1.0):
    """φ with np.interp: knots at (i - 0.5)/n, extrapolated ends, read at (j - 0.5)/L."""
    u = np.sort(np.asarray(scores, dtype=np.float64))
    n = u.shape[0]
    if n == 1:
        return np.full(length, u[0])
    start = max(2 * u[0] - u[1], low)
    end = min(2 * u[-1] - u[-2], high)
    knots = (np.arange(n + 2) - 0.5) / n
    return np.interp((np.arange(length) + 0.5) / length, knots, np.r_[start, u, end])


def batch_loss_reference(loss_fn, scores, labels, auxiliary, queries=None):
    """SOPRCLoss by loops over queries; ``auxiliary[c]`` is the vector v_c used. With
    ``queries`` (indices), the sum of their terms over the number of queries of the batch."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels)
    totals = {}
    for q in range(labels.shape[0]):
        others = np.arange(labels.shape[0]) != q
        positives = scores[q, others & (labels == labels[q])]
        negatives = scores[q, labels != labels[q]]
        if positives.size == 0 or negatives.size == 0:
            continue
        rate = positives.size / (positives.size + negatives.size)
        if loss_fn.prior == "dataset":
            weight = loss_fn.dataset_prior_weight
            prior = rate ** (1 - weight) * float(loss_fn.priors[labels[q]]) ** weight
        else:
            prior = rate
        reference = auxiliary[labels[q]] if loss_fn.tpr_source == "auxiliary" else positives
        value = query_loss_reference(positives, negatives, reference, prior, loss_fn.exact)
        value += semivariance_reference(
            positives, negatives, loss_fn.lambda_pos, loss_fn.lambda_neg
        )
        totals[q] = value
    if queries is None:
        return float(np.mean(list(totals.values())))
    return sum(totals.get(q, 0.0) for q in queries) / len(totals)


def torch_reference(loss_fn, scores, labels):
    """SOPRCLoss by a loop over queries of :func:`soprc_query_loss` (plain autograd)."""
    totals = []
    for q in range(labels.shape[0]):
        others = torch.arange(labels.shape[0]) != q
        positives = scores[q, others & (labels == labels[q])]
        negatives = scores[q, labels != labels[q]]
        if positives.numel() == 0 or negatives.numel() == 0:
            continue
        c = int(labels[q])
        prior = None
        if loss_fn.prior == "dataset":
            rate = positives.numel() / (positives.numel() + negatives.numel())
            weight = loss_fn.dataset_prior_weight
            prior = rate ** (1 - weight) * float(loss_fn.priors[c]) ** weight
        auxiliary = loss_fn.auxiliary_vector(c) if loss_fn.tpr_source == "auxiliary" else None
        value = soprc_query_loss(
            positives, negatives, auxiliary, prior, tau1=TAU1, tau2=TAU2, exact=loss_fn.exact
        )
        mu_pos, mu_neg = positives.mean(), negatives.mean()
        below = ((mu_pos - positives).clamp(min=0) ** 2).sum() / positives.numel()
        above = ((negatives - mu_neg).clamp(min=0) ** 2).sum() / negatives.numel()
        totals.append(value + loss_fn.lambda_pos * below + loss_fn.lambda_neg * above)
    return torch.stack(totals).mean()


def random_batch(seed, sizes=(3, 4, 2, 5)):
    """A batch with groups of unequal sizes, in shuffled order, and its cosine scores."""
    rng = np.random.RandomState(seed)
    labels = np.concatenate([np.full(size, c) for c, size in enumerate(sizes)])
    labels = labels[rng.permutation(labels.shape[0])]
    embeddings = torch.as_tensor(rng.normal(size=(labels.shape[0], 3)), dtype=torch.float64)
    embeddings = torch.nn.functional.normalize(embeddings, dim=1)
    return embeddings, torch.as_tensor(labels)


# ---------------------------------------------------------------- surrogates
def test_surrogates_match_their_definitions_and_bound_the_indicator():
    x = torch.linspace(-1, 1, 401, dtype=torch.float64)
    l1 = one_sided_huber(x, TAU1)
    l2 = one_sided_sigmoid(x, TAU2)
    np.testing.assert_allclose(l1, [huber_reference(float(v), TAU1) for v in x], rtol=1e-12)
    np.testing.assert_allclose(l2, [sigmoid_reference(float(v), TAU2) for v in x], atol=1e-12)
    indicator = (x <= 0).double()
    assert torch.all(l1 >= indicator) and torch.all(l2 <= indicator)
    assert torch.all(torch.diff(l1) <= 0) and torch.all(torch.diff(l1, n=2) >= -1e-12)
    # continuous at 0 and at tau1 (the paper's printed l1 jumps at 0)
    eps = torch.tensor([-1e-9, 1e-9, TAU1 - 1e-9, TAU1 + 1e-9], dtype=torch.float64)
    values = one_sided_huber(eps, TAU1)
    assert abs(values[0] - values[1]) < 1e-6 and abs(values[2] - values[3]) < 1e-6
    # l2 tends to the indicator of x < 0 as tau2 -> 0
    sharp = one_sided_sigmoid(torch.tensor([-0.01, 0.01]), 1e-5)
    torch.testing.assert_close(sharp, torch.tensor([1.0, 0.0]))


def test_surrogate_gradients_are_finite_everywhere():
    x = torch.tensor([-50.0, -0.1, 0.0, 0.05, 0.3, 50.0], requires_grad=True)
    (one_sided_huber(x, TAU1).sum() + one_sided_sigmoid(x, 1e-4).sum()).backward()
    assert torch.all(torch.isfinite(x.grad))
    # l1' = -2/tau1 below 0, -2 (1 - x/tau1)/tau1 on [0, tau1), 0 beyond; l2' = 0 at x >= 0 and
    # -sech^2(x / 2 tau2) / (2 tau2) below, which underflows to 0 at these x / tau2.
    expected = [-2 / TAU1, -2 / TAU1, -2 / TAU1, -2 * (1 - 0.05 / TAU1) / TAU1, 0.0, 0.0]
    torch.testing.assert_close(x.grad, torch.tensor(expected))
    x = torch.tensor([-0.3, -0.05, 0.02], dtype=torch.float64, requires_grad=True)
    one_sided_sigmoid(x, 0.1).sum().backward()
    expected = [-1 / math.cosh(v / 0.2) ** 2 / 0.2 if v < 0 else 0.0 for v in (-0.3, -0.05, 0.02)]
    torch.testing.assert_close(x.grad, torch.tensor(expected, dtype=torch.float64))


# ---------------------------------------------------------------- interpolation
@pytest.mark.parametrize("n, length", [(1, 5), (2, 7), (3, 3), (4, 11), (7, 3), (25, 1000)])
def test_interpolation_matches_numpy_reference(n, length):
    rng = np.random.RandomState(n + length)
    scores = rng.uniform(-0.9, 0.9, size=n)
    got = interpolate_scores(torch.as_tensor(scores), length)
    np.testing.assert_allclose(got.numpy(), interpolation_reference(scores, length), atol=1e-12)
    assert torch.all(torch.diff(got) >= 0)


def test_interpolation_is_identity_at_equal_length_and_clamps_extrapolation():
    scores = torch.tensor([0.3, -0.2, 0.8, 0.1], dtype=torch.float64)
    torch.testing.assert_close(interpolate_scores(scores, 4), scores.sort().values)
    wide = interpolate_scores(torch.tensor([-0.95, 0.95]), 100)
    assert wide.min() >= -1 and wide.max() <= 1
    narrow = interpolate_scores(torch.tensor([0.0, 0.5]), 4, score_range=(-0.1, 0.6))
    assert narrow.min() >= -0.1 and narrow.max() <= 0.6
    with pytest.raises(ValueError, match="non-empty"):
        interpolate_scores(torch.tensor([]), 3)
    with pytest.raises(ValueError, match="length"):
        interpolate_scores(torch.tensor([0.1]), 0)


# ---------------------------------------------------------------- single-query form
@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("use_auxiliary", [False, True])
def test_query_loss_matches_brute_force(exact, use_auxiliary):
    rng = np.random.RandomState(3)
    positives = rng.normal(0.3, 0.3, size=4)
    negatives = rng.normal(0.0, 0.3, size=9)
    positives[1] = negatives[2]  # a tie
    auxiliary = rng.normal(0.3, 0.3, size=13) if use_auxiliary else None
    got = soprc_query_loss(
        torch.as_tensor(positives),
        torch.as_tensor(negatives),
        None if auxiliary is None else torch.as_tensor(auxiliary),
        prior=0.2,
        tau1=TAU1,
        tau2=TAU2,
        exact=exact,
    )
    reference = positives if auxiliary is None else auxiliary
    expected = query_loss_reference(positives, negatives, reference, 0.2, exact)
    assert float(got) == pytest.approx(expected, rel=1e-10)


def test_query_loss_default_prior_is_the_batch_rate_and_surrogate_bounds_exact():
    rng = np.random.RandomState(4)
    positives = torch.as_tensor(rng.normal(0.5, 0.3, size=5))
    negatives = torch.as_tensor(rng.normal(0.0, 0.3, size=15))
    batch_rate = soprc_query_loss(positives, negatives, tau1=TAU1, tau2=TAU2)
    explicit = soprc_query_loss(positives, negatives, prior=0.25, tau1=TAU1, tau2=TAU2)
    assert float(batch_rate) == pytest.approx(float(explicit), rel=1e-12)
    exact = soprc_query_loss(positives, negatives, prior=0.25, exact=True)
    assert float(explicit) >= float(exact)  # l1 >= indicator >= l2: an upper bound


def test_exact_query_loss_on_the_full_list_approaches_one_minus_ap():
    """With v = all positives and all negatives, only the +1 of the TPR separates it from 1 - AP."""
    rng = np.random.RandomState(5)
    positives, negatives = rng.normal(1, 1, size=2000), rng.normal(0, 1, size=8000)
    loss = soprc_query_loss(
        torch.as_tensor(positives),
        torch.as_tensor(negatives),
        torch.as_tensor(positives),
        prior=0.2,
        exact=True,
    )
    labels = np.r_[np.ones(2000), np.zeros(8000)]
    ap = average_precision_score(labels, np.r_[positives, negatives])
    assert float(loss) == pytest.approx(1 - ap, abs=2e-3)


def test_query_loss_gradient_raises_positives_lowers_negatives_and_reaches_a_given_vector():
    positives = torch.tensor([0.2, 0.5], requires_grad=True)
    negatives = torch.tensor([0.3, 0.0, 0.4], requires_grad=True)
    auxiliary = torch.tensor([0.1, 0.2, 0.45, 0.6], requires_grad=True)
    soprc_query_loss(positives, negatives, auxiliary, prior=0.1, tau2=0.1).backward()
    assert torch.all(positives.grad <= 0) and positives.grad.abs().sum() > 0
    assert torch.all(negatives.grad >= 0) and negatives.grad.abs().sum() > 0
    # The function is plain autograd: a vector passed with requires_grad gets a gradient, and
    # raising the reference values (more positives above each threshold) lowers the loss.
    assert torch.all(auxiliary.grad <= 0) and auxiliary.grad.abs().sum() > 0
    # SOPRCLoss treats its vectors as state: they never receive a gradient.
    loss_fn = SOPRCLoss([5, 5])
    loss_fn(torch.randn(6, 3, requires_grad=True), torch.tensor([0, 0, 0, 1, 1, 1])).backward()
    assert not loss_fn.auxiliary.requires_grad and loss_fn.auxiliary.grad is None


def test_query_loss_validates_input():
    with pytest.raises(ValueError, match="positive_scores"):
        soprc_query_loss(torch.tensor([]), torch.tensor([0.1]), prior=0.1)
    with pytest.raises(ValueError, match="negative_scores"):
        soprc_query_loss(torch.tensor([0.1]), torch.ones(2, 2), prior=0.1)
    with pytest.raises(ValueError, match="prior"):
        soprc_query_loss(torch.tensor([0.1]), torch.tensor([0.1]), prior=1.0)
    with pytest.raises(ValueError, match="tau1"):
        soprc_query_loss(torch.tensor([0.1]), torch.tensor([0.1]), prior=0.5, tau1=0.0)


# ---------------------------------------------------------------- retrieval loss
LOSS_SETTINGS = [
    {},
    {"exact": True},
    {"prior": "batch"},
    {"tpr_source": "batch"},
    {"tpr_source": "batch", "exact": True, "prior": "batch"},
    {"lambda_pos": 0.0, "lambda_neg": 0.0},
    {"dataset_prior_weight": 0.3},
    {"tpr_source": "batch", "dataset_prior_weight": 0.3},
    {"tpr_source": "batch", "dataset_prior_weight": 0.0},
]


@pytest.mark.parametrize("settings", LOSS_SETTINGS, ids=str)
def test_batch_loss_matches_brute_force(settings):
    embeddings, labels = random_batch(0)
    class_counts = [7, 9, 4, 12]
    settings = dict(settings)
    tpr_source = settings.pop("tpr_source", "auxiliary")
    loss_fn = SOPRCLoss(
        class_counts, tau1=TAU1, tau2=TAU2, lambda_pos=2.0, lambda_neg=0.5, tpr_source=tpr_source
    )
    for name, value in settings.items():
        setattr(loss_fn, name, value)
    rng = np.random.RandomState(1)
    auxiliary = {c: np.sort(rng.uniform(-1, 1, size=n - 1)) for c, n in enumerate(class_counts)}
    if tpr_source == "auxiliary":
        for c, vector in auxiliary.items():
            loss_fn.auxiliary_vector(c).copy_(torch.as_tensor(vector))
    loss_fn.eval()  # no update of v: compare with the vectors set above
    scores = embeddings @ embeddings.T
    got = loss_fn(embeddings, labels)
    expected = batch_loss_reference(loss_fn, scores, labels.numpy(), auxiliary)
    assert float(got) == pytest.approx(expected, rel=1e-5)
    assert float(loss_fn.score_loss(scores, labels)) == pytest.approx(expected, rel=1e-5)
    if not loss_fn.exact:  # gradients of the fused passes and the pair shortcut
        leaf = embeddings.clone().requires_grad_(True)
        loss_fn(leaf, labels).backward()
        reference_leaf = embeddings.clone().requires_grad_(True)
        unit = torch.nn.functional.normalize(reference_leaf, dim=1)
        torch_reference(loss_fn, unit @ unit.T, labels).backward()
        torch.testing.assert_close(leaf.grad, reference_leaf.grad)


@pytest.mark.parametrize(
    "settings", [{}, {"exact": True, "prior": "batch"}, {"lambda_pos": 0.0, "lambda_neg": 0.0}]
)
def test_query_slices_match_brute_force_and_add_up_to_the_batch_loss(settings):
    """``forward_grouped(..., queries=s)``: the terms of the queries in ``s`` over the number
    of queries of the whole batch; slices covering the batch sum to its loss and gradient."""
    rng = np.random.RandomState(3)
    classes = torch.tensor([2, 0, 3, 1])
    # Padding, and a group of one item (not a query, still a negative of the others).
    valid = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]], dtype=bool)
    embeddings = torch.as_tensor(rng.normal(size=(4, 4, 3)), dtype=torch.float64)
    settings = {"lambda_pos": 2.0, "lambda_neg": 0.5, **settings}
    loss_fn = SOPRCLoss([7, 9, 4, 12], tau1=TAU1, tau2=TAU2, tpr_source="batch", **settings)
    flat_valid = valid.reshape(-1).numpy()
    unit = torch.nn.functional.normalize(embeddings.reshape(16, 3), dim=1)
    scores = (unit @ unit.T).numpy()[np.ix_(flat_valid, flat_valid)]
    labels = classes.repeat_interleave(4).numpy()[flat_valid]
    position = np.cumsum(flat_valid) - 1  # of each item among the valid ones
    leaf = embeddings.clone().requires_grad_(True)
    full = loss_fn.forward_grouped(leaf, classes, valid)
    parts = []
    for start, stop in [(0, 5), (5, 11), (11, 16)]:
        part = loss_fn.forward_grouped(leaf, classes, valid, queries=slice(start, stop))
        rows = [position[i] for i in range(start, stop) if flat_valid[i]]
        expected = batch_loss_reference(loss_fn, scores, labels, None, queries=rows)
        assert part.item() == pytest.approx(expected, rel=1e-8)
        parts.append(part)
    assert sum(parts).item() == pytest.approx(full.item(), rel=1e-12)
    if not loss_fn.exact:
        (full_gradient,) = torch.autograd.grad(full, leaf)
        (parts_gradient,) = torch.autograd.grad(sum(parts), leaf)
        torch.testing.assert_close(parts_gradient, full_gradient)


def test_query_slices_need_the_batch_tpr_and_a_contiguous_slice():
    embeddings, classes = torch.randn(3, 2, 4), torch.tensor([0, 1, 2])
    with pytest.raises(ValueError, match='tpr_source="batch"'):
        SOPRCLoss([5, 5, 5]).forward_grouped(embeddings, classes, queries=slice(0, 2))
    loss_fn = SOPRCLoss([5, 5, 5], tpr_source="batch")
    for queries in (slice(0, 6, 2), [0, 1]):
        with pytest.raises(TypeError, match="queries must be a slice"):
            loss_fn.forward_grouped(embeddings, classes, queries=queries)


@pytest.mark.parametrize("exact", [False, True])
def test_asymmetric_scores_use_each_query_row(exact):
    """``score_loss`` accepts any score matrix: row q holds the scores for query q."""
    embeddings, labels = random_batch(8)
    loss_fn = SOPRCLoss([7, 9, 4, 12], tau1=TAU1, tau2=TAU2, exact=exact).double().eval()
    rng = np.random.RandomState(2)
    for c in range(4):
        vector = np.sort(rng.uniform(-1, 1, size=int(loss_fn.auxiliary_lengths[c])))
        loss_fn.auxiliary_vector(c).copy_(torch.as_tensor(vector))
    scores = embeddings @ embeddings.T + 0.1 * torch.as_tensor(rng.normal(size=(14, 14)))
    scores.requires_grad_(True)
    got = loss_fn.score_loss(scores, labels)
    reference_scores = scores.detach().clone().requires_grad_(True)
    expected = torch_reference(loss_fn, reference_scores, labels)
    torch.testing.assert_close(got, expected)
    if not exact:
        got.backward()
        expected.backward()
        torch.testing.assert_close(scores.grad, reference_scores.grad)


def test_auxiliary_update_interpolates_averages_and_blends():
    embeddings, labels = random_batch(2)
    class_counts = [6, 8, 3, 20]
    loss_fn = SOPRCLoss(class_counts, beta=0.25, max_auxiliary_length=10)
    assert loss_fn.auxiliary_lengths.tolist() == [5, 7, 2, 10]
    scores = (embeddings @ embeddings.T).numpy()
    y = labels.numpy()

    def class_mean_of_interpolations(c):
        members = np.flatnonzero(y == c)
        rows = [
            interpolation_reference(
                scores[q, members[members != q]], int(loss_fn.auxiliary_lengths[c])
            )
            for q in members
        ]
        return np.mean(rows, axis=0)

    loss_fn.train()
    loss_fn(embeddings, labels)
    first = {c: class_mean_of_interpolations(c) for c in range(4)}
    for c in range(4):
        np.testing.assert_allclose(loss_fn.auxiliary_vector(c).numpy(), first[c], atol=1e-6)
    assert loss_fn.class_seen.all()

    other_embeddings, _ = random_batch(3)
    embeddings2 = other_embeddings[: labels.shape[0]]
    scores = (embeddings2 @ embeddings2.T).numpy()
    loss_fn(embeddings2, labels)
    for c in range(4):
        expected = 0.75 * first[c] + 0.25 * class_mean_of_interpolations(c)
        np.testing.assert_allclose(loss_fn.auxiliary_vector(c).numpy(), expected, atol=1e-6)


def test_unseen_class_keeps_its_vector_and_eval_mode_does_not_update():
    embeddings, labels = random_batch(4, sizes=(3, 4))
    loss_fn = SOPRCLoss([5, 5, 5])
    loss_fn.train()
    loss_fn(embeddings, labels)
    assert loss_fn.class_seen.tolist() == [True, True, False]
    assert torch.all(loss_fn.auxiliary_vector(2) == 0)
    before = loss_fn.auxiliary.clone()
    loss_fn.eval()
    loss_fn(embeddings.flip(0), labels)
    torch.testing.assert_close(loss_fn.auxiliary, before)


def test_batch_tpr_keeps_no_auxiliary_state():
    """With tpr_source="batch" nothing reads v_c: no vector is stored, gathered or updated, and
    the loss equals the brute-force batch-TPR loss in training mode too."""
    embeddings, labels = random_batch(7)
    loss_fn = SOPRCLoss([7, 9, 4, 12], tau1=TAU1, tau2=TAU2, tpr_source="batch").double()
    assert loss_fn.auxiliary.shape == (0,)
    loss_fn.train()
    leaf = embeddings.clone().requires_grad_(True)
    got = loss_fn(leaf, labels)
    got.backward()
    reference_leaf = embeddings.clone().requires_grad_(True)
    unit = torch.nn.functional.normalize(reference_leaf, dim=1)
    expected = torch_reference(loss_fn, unit @ unit.T, labels)
    expected.backward()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(leaf.grad, reference_leaf.grad)
    assert loss_fn.auxiliary.shape == (0,) and not loss_fn.class_seen.any()
    grouped = loss_fn.forward_grouped(embeddings.view(2, 7, 3), torch.tensor([0, 3]))
    assert torch.isfinite(grouped) and not loss_fn.class_seen.any()
    with pytest.raises(ValueError, match="tpr_source='batch'.*keeps no auxiliary"):
        loss_fn.auxiliary_vector(0)
    # The state of either mode round-trips; a batch-mode state does not load into the other.
    restored = SOPRCLoss([7, 9, 4, 12], tpr_source="batch")
    restored.load_state_dict(loss_fn.float().state_dict())
    with pytest.raises(RuntimeError, match="auxiliary"):
        SOPRCLoss([7, 9, 4, 12]).load_state_dict(loss_fn.state_dict())
    loss_fn.tpr_source = "auxiliary"  # switched after construction: no vectors to read
    with pytest.raises(ValueError, match="keeps no auxiliary"):
        loss_fn(embeddings.float(), labels)


def test_state_dict_round_trip_restores_the_auxiliary_vectors():
    embeddings, labels = random_batch(5)
    loss_fn = SOPRCLoss([7, 9, 4, 12], max_auxiliary_length=6)
    loss_fn(embeddings.float(), labels)
    restored = SOPRCLoss([7, 9, 4, 12], max_auxiliary_length=6)
    restored.load_state_dict(loss_fn.state_dict())
    for name in ("auxiliary", "auxiliary_offsets", "auxiliary_lengths", "class_seen", "priors"):
        assert torch.equal(getattr(restored, name), getattr(loss_fn, name)), name
    loss_fn.eval(), restored.eval()
    assert float(restored(embeddings.float(), labels)) == float(loss_fn(embeddings.float(), labels))


def test_batch_loss_gradients_and_degenerate_batches():
    embeddings, labels = random_batch(6)
    embeddings = embeddings.float().requires_grad_(True)
    loss_fn = SOPRCLoss([7, 9, 4, 12])
    loss = loss_fn(embeddings, labels)
    loss.backward()
    assert torch.isfinite(loss) and torch.all(torch.isfinite(embeddings.grad))
    assert embeddings.grad.abs().sum() > 0
    # a single class (no negatives) or all-distinct labels (no positives): zero loss, no update
    for batch_labels in (torch.zeros(4, dtype=torch.long), torch.arange(4)):
        fresh = SOPRCLoss([7, 9, 4, 12])
        x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), requires_grad=True)
        value = fresh(x, batch_labels)
        value.backward()
        assert float(value.detach()) == 0.0 and not fresh.class_seen.any()


def test_priors_and_lengths_follow_the_class_counts():
    loss_fn = SOPRCLoss([1, 3, 6])
    torch.testing.assert_close(loss_fn.priors, torch.tensor([0.0, 2 / 9, 5 / 9]))
    assert loss_fn.auxiliary_lengths.tolist() == [0, 2, 5]
    assert loss_fn.auxiliary.shape == (7 + 1,)  # the vectors, then one scratch entry


def test_loss_validates_its_arguments():
    with pytest.raises(ValueError, match="at least two classes"):
        SOPRCLoss([10])
    with pytest.raises(ValueError, match="two or more items"):
        SOPRCLoss([1, 1, 1])
    with pytest.raises(ValueError, match="positive integers"):
        SOPRCLoss([2.5, 3])
    with pytest.raises(ValueError, match="beta"):
        SOPRCLoss([3, 3], beta=0.0)
    with pytest.raises(ValueError, match="prior"):
        SOPRCLoss([3, 3], prior="uniform")
    with pytest.raises(ValueError, match="max_auxiliary_length"):
        SOPRCLoss([3, 3], max_auxiliary_length=0)
    with pytest.raises(ValueError, match="dataset_prior_weight"):
        SOPRCLoss([3, 3], dataset_prior_weight=1.5)
    loss_fn = SOPRCLoss([3, 3])
    with pytest.raises(ValueError, match="class indices"):
        loss_fn(torch.randn(4, 2), torch.tensor([0, 0, 1, 2]))
    with pytest.raises(ValueError, match="class indices"):
        loss_fn(torch.randn(4, 2), torch.tensor([0.0, 0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="labels must have shape"):
        loss_fn(torch.randn(4, 2), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="2-D"):
        loss_fn(torch.randn(4), torch.tensor([0, 0, 1, 1]))
    with pytest.raises(ValueError, match="square"):
        loss_fn.score_loss(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]))


def test_false_positive_sums_have_correct_gradients():
    """The hand-written backward pass of the FPR sums agrees with finite differences."""
    rng = np.random.RandomState(7)
    positive = torch.tensor(rng.uniform(-1, 1, size=(5, 3)), requires_grad=True)
    negatives = torch.as_tensor(rng.uniform(-1, 1, size=(5, 5)))
    negatives[0, 1] = negatives[3, 3] = float("-inf")  # not a negative of that query
    negatives.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda p, n: _FalsePositiveSum.apply(p, n, 0.4), (positive, negatives)
    )
    values = _FalsePositiveSum.apply(positive, negatives, 0.4)
    finite = torch.isfinite(negatives)[:, None, :]
    expected = (one_sided_huber(positive[:, :, None] - negatives[:, None, :], 0.4) * finite).sum(2)
    torch.testing.assert_close(values, expected)


def test_cosine_gram_matches_normalize_and_matmul_with_its_gradient():
    from skrank.losses._soprc import _CosineGram

    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(7, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    assert torch.autograd.gradcheck(_CosineGram.apply, (embeddings,))
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    torch.testing.assert_close(_CosineGram.apply(embeddings), unit @ unit.T)


@pytest.mark.parametrize("tpr_source", ["batch", "auxiliary"])
def test_a_batch_drawn_from_thousands_of_classes_matches_brute_force(tpr_source):
    """3,000 long-tailed classes (priors down to 1e-5, auxiliary vectors of up to 400 entries
    at offsets across the whole buffer), a batch of the class-balanced sampler with groups
    padded for the classes smaller than a group."""
    rng = np.random.RandomState(5)
    counts = 2 + (400 / np.arange(1, 3001)).astype(np.int64)
    rng.shuffle(counts)
    y = np.repeat(np.arange(3000), counts)
    epoch = ClassBalancedBatchSampler(y, 48, 4, random_state=0).epoch()
    classes, indices = epoch.groups[0], epoch.indices[0]
    valid = epoch.valid[0].view(12, 4)
    assert not valid.all()  # some groups are padded
    embeddings = torch.as_tensor(rng.normal(size=(y.shape[0], 5)))[indices].view(12, 4, 5)
    loss_fn = SOPRCLoss(
        counts, tau1=TAU1, tau2=TAU2, lambda_pos=10.0, lambda_neg=2.0, tpr_source=tpr_source
    )
    auxiliary = {}
    if tpr_source == "auxiliary":
        for c in classes.tolist():
            vector = np.sort(rng.uniform(-1, 1, size=counts[c] - 1)).astype(np.float32)
            loss_fn.auxiliary_vector(c).copy_(torch.as_tensor(vector))
            auxiliary[c] = vector.astype(np.float64)
    loss_fn.eval()
    leaf = embeddings.clone().requires_grad_(True)
    got = loss_fn.forward_grouped(leaf, classes, valid)
    flat = valid.reshape(-1)
    unit = torch.nn.functional.normalize(embeddings.reshape(48, 5)[flat], dim=1)
    labels = classes.repeat_interleave(4)[flat]
    expected = batch_loss_reference(loss_fn, (unit @ unit.T).numpy(), labels.numpy(), auxiliary)
    assert float(got.detach()) == pytest.approx(expected, rel=1e-6)
    got.backward()
    reference_leaf = embeddings.reshape(48, 5)[flat].clone().requires_grad_(True)
    unit = torch.nn.functional.normalize(reference_leaf, dim=1)
    torch_reference(loss_fn, unit @ unit.T, labels).backward()
    torch.testing.assert_close(leaf.grad.reshape(48, 5)[flat], reference_leaf.grad)
    assert (leaf.grad.reshape(48, 5)[~flat] == 0).all()
