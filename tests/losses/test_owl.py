"""Ordered weighted losses against brute-force per-example computations and the paper's theorems."""

import itertools
import math
import pickle

import numpy as np
import pytest
import torch

from skrank.losses import (
    OrderedWeightedLoss,
    bowl,
    get_surrogate,
    ordered_weighted_loss,
    owl_weights,
    powl,
)

# Independent scalar references of the surrogates (Section 3 of the paper).
REFERENCE_SURROGATES = {
    "hinge": lambda u: max(1 - u, 0.0),
    "logistic": lambda u: math.log2(1 + math.exp(-u)),
    "squared_hinge": lambda u: max(1 - u, 0.0) ** 2,
    "exponential": lambda u: math.exp(-u),
    "ramp": lambda u: 1.0 if u <= 0 else (1 - u / 0.5 if u <= 0.5 else 0.0),  # margin 0.5
}
CONVEX = ["hinge", "logistic", "squared_hinge", "exponential"]


def brute_force_loss(kind, surrogate, positive, negatives, mask, weights):
    """One example: sort its valid negatives by decreasing score, weigh by rank."""
    phi = REFERENCE_SURROGATES[surrogate]
    kept = sorted((s for s, m in zip(negatives, mask, strict=True) if m), reverse=True)
    total = phi(positive) if kind == "bowl" else 0.0
    for weight, score in zip(weights, kept, strict=False):
        total += weight * (phi(positive - score) if kind == "powl" else phi(-score))
    return total


def full_owl(kind, surrogate, scores, label, theta):
    """The paper's Definitions 3-4 over all K labels, via the tensor implementation."""
    scores = torch.as_tensor(scores, dtype=torch.float64)
    negatives = torch.cat([scores[:label], scores[label + 1 :]])[None, :]
    return float(
        ordered_weighted_loss(
            scores[label : label + 1],
            negatives,
            theta,
            loss=kind,
            surrogate=surrogate,
            margin=0.5,
        )[0]
    )


@pytest.mark.parametrize("kind", ["powl", "bowl"])
@pytest.mark.parametrize("surrogate", sorted(REFERENCE_SURROGATES))
def test_losses_match_brute_force_per_example(kind, surrogate):
    rng = np.random.RandomState(0)
    n, m = 7, 9
    positive = rng.uniform(-1, 1, n)
    negatives = np.round(rng.uniform(-1, 1, (n, m)), 1)  # ties included
    mask = rng.rand(n, m) < 0.7
    mask[0] = False  # an example without any negative
    for weights in (
        owl_weights("topk", m, top_k=2),
        owl_weights("uniform", m),
        owl_weights("power", 5, exponent=1.5),  # fewer weights than columns
        np.sort(rng.rand(12))[::-1],  # more weights than columns
    ):
        got = ordered_weighted_loss(
            torch.tensor(positive),
            torch.tensor(negatives),
            weights,
            loss=kind,
            surrogate=surrogate,
            mask=torch.tensor(mask),
            margin=0.5,
        )
        expected = [
            brute_force_loss(kind, surrogate, positive[i], negatives[i], mask[i], weights)
            for i in range(n)
        ]
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_gradient_reaches_only_the_weighted_negatives():
    negatives = torch.tensor([[0.1, 0.7, -0.3, 0.4]], requires_grad=True)
    positive = torch.tensor([0.2], requires_grad=True)
    mask = torch.tensor([[True, False, True, True]])  # 0.7 is the example's own positive
    powl(positive, negatives, owl_weights("topk", 4, top_k=1), mask=mask).sum().backward()
    # the hardest valid negative is 0.4 (column 3): only it gets a gradient
    np.testing.assert_array_equal(negatives.grad.numpy(), [[0, 0, 0, 1.0]])
    assert positive.grad.item() == -1.0


def test_masked_rows_and_infinite_margins_give_finite_gradients():
    negatives = torch.zeros((2, 3), requires_grad=True)
    positive = torch.zeros(2, requires_grad=True)
    mask = torch.tensor([[False, False, False], [True, True, False]])
    for surrogate in ["hinge", "logistic", "squared_hinge", "exponential", "ramp"]:
        loss = bowl(positive, negatives, owl_weights("uniform", 3), surrogate, mask=mask)
        loss.sum().backward()
        assert torch.isfinite(negatives.grad).all() and torch.isfinite(positive.grad).all()
        assert negatives.grad[0].abs().sum() == 0


@pytest.mark.parametrize("kind", ["powl", "bowl"])
@pytest.mark.parametrize("surrogate", CONVEX)
def test_convex_in_the_score_vector_theorem_2(kind, surrogate):
    rng = np.random.RandomState(1)
    n_labels = 6
    for _ in range(200):
        theta = np.sort(rng.rand(n_labels - 1))[::-1]  # non-increasing
        label = rng.randint(n_labels)
        first, second = rng.normal(size=(2, n_labels))
        t = rng.rand()
        mixed = full_owl(kind, surrogate, t * first + (1 - t) * second, label, theta)
        bound = t * full_owl(kind, surrogate, first, label, theta) + (1 - t) * full_owl(
            kind, surrogate, second, label, theta
        )
        assert mixed <= bound + 1e-9


def test_increasing_weights_break_convexity():
    """The monotonicity condition of Theorem 2 is needed: theta = (0, 1) is not convex."""
    theta = torch.tensor([0.0, 1.0])  # bypasses owl_weights' check on purpose
    at = [full_owl("powl", "hinge", v, 0, theta) for v in ([0, 1, -1], [0, -1, 1], [0, 0, 0])]
    assert at[2] > 0.5 * at[0] + 0.5 * at[1]


@pytest.mark.parametrize("surrogate", sorted(REFERENCE_SURROGATES))
@pytest.mark.parametrize("k", [1, 3])
def test_surrogate_of_the_retrieval_loss_theorem_3(surrogate, k):
    rng = np.random.RandomState(2)
    n_labels = 7
    for _ in range(300):
        scores = np.round(rng.uniform(-1, 1, n_labels), 1)  # ties at the k-th score happen
        label = rng.randint(n_labels)
        theta = np.concatenate([np.full(k, 1.0 / k), np.sort(rng.rand(n_labels - 1 - k))[::-1] / k])
        others = np.sort(np.delete(scores, label))[::-1]
        missed = float(scores[label] <= others[k - 1])  # ties count as a miss (paper's margin)
        assert full_owl("powl", surrogate, scores, label, theta) >= missed - 1e-12
        # BOWL >= 2 * miss needs a convex surrogate (the proof uses convexity); the ramp
        # still gives BOWL >= miss.
        factor = 2.0 if surrogate in CONVEX else 1.0
        assert full_owl("bowl", surrogate, scores, label, theta) >= factor * missed - 1e-12


def test_ramp_bowl_can_fall_below_twice_the_retrieval_loss():
    # v_y = 0.5 below the best negative 0.6: ramp(0.5) + ramp(-0.6) = 0.5 + 1 < 2 (margin 1)
    scores = [0.5, 0.6, -0.5]
    loss = ordered_weighted_loss(
        torch.tensor([scores[0]]), torch.tensor([scores[1:]]), [1.0, 0.0], surrogate="ramp"
    )
    assert float(loss[0]) == pytest.approx(1.5)


def hypergeometric_rank_weights(varthetas, n_negatives_total, n_sampled):
    """theta_i = sum_j vartheta_j P(the i-th best of all negatives is the j-th best sampled)."""
    theta = np.zeros(n_negatives_total)
    for i in range(1, n_negatives_total + 1):
        for j in range(1, n_sampled + 1):
            ways = math.comb(i - 1, j - 1) * math.comb(n_negatives_total - i, n_sampled - j)
            theta[i - 1] += varthetas[j - 1] * ways / math.comb(n_negatives_total, n_sampled)
    return theta


@pytest.mark.parametrize("kind", ["powl", "bowl"])
@pytest.mark.parametrize("weights", ["topk", "uniform", "power"])
def test_expected_snm_loss_is_an_owl_lemma_2(kind, weights):
    """Averaging Algorithm 1 over every B-subset gives the OWL with hypergeometric weights."""
    rng = np.random.RandomState(3)
    n_labels, n_sampled, top_k = 8, 3, 2
    scores = rng.normal(size=n_labels)
    label = 2
    varthetas = owl_weights(weights, n_sampled, top_k=top_k, scale="paper", n_labels=n_labels)
    negatives = np.delete(scores, label)
    expected = np.mean(
        [
            brute_force_loss(
                kind,
                "hinge",
                scores[label],
                negatives[list(subset)],
                [True] * n_sampled,
                varthetas,
            )
            for subset in itertools.combinations(range(n_labels - 1), n_sampled)
        ]
    )
    theta = hypergeometric_rank_weights(varthetas, n_labels - 1, n_sampled)
    assert full_owl(kind, "hinge", scores, label, theta) == pytest.approx(expected, rel=1e-12)
    assert theta.sum() == pytest.approx(varthetas.sum())  # ||theta||_1 = ||vartheta||_1
    if weights != "power":
        # the paper's scaling gives theta_j = 1/k' on the top k' labels (a valid surrogate)
        np.testing.assert_allclose(theta[:top_k], 1.0 / top_k)
    if weights == "uniform":
        np.testing.assert_allclose(theta, 1.0 / top_k)  # negative sampling: every label


def test_owl_weights_shapes_and_scales():
    np.testing.assert_allclose(owl_weights("topk", 5, top_k=2), [0.5, 0.5, 0, 0, 0])
    np.testing.assert_allclose(owl_weights("uniform", 4), [0.25] * 4)
    power = owl_weights("power", 4, exponent=2.0)
    np.testing.assert_allclose(
        power, np.array([1, 1 / 4, 1 / 9, 1 / 16]) / (1 + 1 / 4 + 1 / 9 + 1 / 16)
    )
    np.testing.assert_allclose(owl_weights("power", 3, exponent=0.0), [1 / 3] * 3)
    # paper scaling: the largest weight is (K - 1) / (k' B)
    np.testing.assert_allclose(
        owl_weights("topk", 4, top_k=2, scale="paper", n_labels=101), [12.5, 12.5, 0, 0]
    )
    np.testing.assert_allclose(
        owl_weights("uniform", 4, top_k=2, scale="paper", n_labels=101), 12.5
    )
    np.testing.assert_allclose(owl_weights([3.0, 1.0], 2), [3.0, 1.0])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: owl_weights("topk", 3, top_k=4), "top_k=4 exceeds n_negatives=3"),
        (lambda: owl_weights("best", 3), "kind must be"),
        (lambda: owl_weights("power", 3, exponent=-1), "exponent"),
        (lambda: owl_weights([0.1, 0.5], 2), "non-increasing"),
        (lambda: owl_weights([0.5, -0.1], 2), "non-negative"),
        (lambda: owl_weights([np.nan, 0.1], 2), "finite"),
        (lambda: owl_weights([0.0, 0.0], 2), "all zero"),
        (lambda: owl_weights([1.0, 0.5], 3), "3"),
        (lambda: owl_weights("topk", 0), "n_negatives must be a positive integer"),
        (lambda: owl_weights("topk", 4, scale="paper"), "n_labels"),
        (lambda: owl_weights("topk", 4, scale="paper", n_labels=4), "n_labels"),
        (lambda: owl_weights("topk", 4, scale="sum"), "scale"),
        (lambda: get_surrogate("hingey"), "surrogate must be one of"),
        (lambda: get_surrogate("ramp", margin=0.0), "margin > 0"),
        (lambda: OrderedWeightedLoss([1.0], loss="owl"), "loss must be"),
        (lambda: powl(torch.zeros(3), torch.zeros(2, 4), [1.0]), r"shape \(2,\)"),
        (
            # a (n, n_positives) matrix: the message says the shape it needs
            lambda: powl(torch.zeros(2, 3), torch.zeros(2, 4), [1.0]),
            r"positive_scores must have shape \(2,\), one score per row of negative_scores; "
            r"got shape \(2, 3\)",
        ),
        (lambda: powl(torch.zeros(2), torch.zeros(2, 4), [1.0], mask=torch.ones(2, 3) > 0), "mask"),
        (lambda: powl(torch.zeros(2), torch.zeros(8), [1.0]), "2-D"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_module_matches_functional_form_and_round_trips():
    rng = np.random.RandomState(4)
    positive = torch.tensor(rng.uniform(-1, 1, 5), dtype=torch.float32)
    negatives = torch.tensor(rng.uniform(-1, 1, (5, 6)), dtype=torch.float32)
    mask = torch.tensor(rng.rand(5, 6) < 0.8)
    weights = owl_weights("power", 6, exponent=1.0)
    criterion = OrderedWeightedLoss(weights, loss="powl", surrogate="ramp", margin=0.3)
    expected = powl(positive, negatives, weights, "ramp", mask=mask, margin=0.3).mean()
    torch.testing.assert_close(criterion(positive, negatives, mask), expected)
    torch.testing.assert_close(
        criterion.example_losses(positive, negatives, mask),
        powl(positive, negatives, weights, "ramp", mask=mask, margin=0.3),
    )
    restored = pickle.loads(pickle.dumps(criterion))
    torch.testing.assert_close(restored(positive, negatives, mask), expected)
    assert "powl" in repr(criterion)
    custom = OrderedWeightedLoss(weights, surrogate=lambda u: torch.relu(2 - u))
    manual = torch.relu(2 - positive) + (
        torch.relu(2 + negatives.sort(dim=1, descending=True).values) * torch.tensor(weights)
    ).sum(1)
    torch.testing.assert_close(custom(positive, negatives), manual.mean().float())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_highest_scores_are_topk_with_its_gradient(dtype):
    """The OWL's ranks (numpy's selection on the CPU, topk for other types) give topk's values
    and gradient, masked (-inf) entries included."""
    from skrank.losses._owl import _highest_scores

    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(40, 57, generator=generator).to(dtype)
    scores[3, :50] = -math.inf  # fewer finite entries than ranks
    weights = torch.rand(9, generator=generator).to(dtype)
    ours = scores.clone().requires_grad_()
    reference = scores.clone().requires_grad_()
    got = _highest_scores(ours, 9)
    expected = torch.topk(reference, 9, dim=1).values
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    torch.where(got.isfinite(), got * weights, 0).sum().backward()
    torch.where(expected.isfinite(), expected * weights, 0).sum().backward()
    torch.testing.assert_close(ours.grad, reference.grad, rtol=0, atol=0)
