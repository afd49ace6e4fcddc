"""The prediction blend of the label scores, the nearest-centroid rule and the neighbours'
votes, and the choice of its two weights, against dense brute-force references."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import brute_force_top_k
from sklearn import config_context
from snm_data import brute_force_centroids, brute_force_cosines, brute_force_votes

from skrank.metrics import top_k_precision_score
from skrank.multilabel._blend import (
    Blend,
    NeighborVotes,
    best_weight,
    choose_blend_weights,
    held_out_blend,
    top_k_score,
)
from skrank.multilabel._centroids import input_centroids

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SCALE = 3.0


def _problem(seed=0, n_keys=40, n_queries=30, n_labels=9, dim=5):
    """Input embeddings that are the inputs themselves, label vectors, and labelled keys."""
    rng = np.random.RandomState(seed)
    table = rng.normal(size=(n_labels, dim)).astype(np.float32)
    keys = rng.normal(size=(n_keys, dim)).astype(np.float32)
    Y_keys = (keys @ table.T + rng.normal(size=(n_keys, n_labels)) > 1.0).astype(np.int8)
    Y_keys[np.arange(n_keys), np.argmax(keys @ table.T, axis=1)] = 1
    queries = rng.normal(size=(n_queries, dim)).astype(np.float32)
    Y_queries = (queries @ table.T + rng.normal(size=(n_queries, n_labels)) > 1.0).astype(np.int8)
    Y_queries[np.arange(n_queries), np.argmax(queries @ table.T, axis=1)] = 1
    return table, keys, Y_keys, queries, Y_queries


def _dense_blend(queries, table, keys, Y_keys, a, b):
    votes = brute_force_votes(queries, keys / np.linalg.norm(keys, axis=1)[:, None], Y_keys, 3)
    cosines = brute_force_cosines(queries, brute_force_centroids(keys, Y_keys))
    scores = queries @ table.T
    return (1 - a) * (scores + b * SCALE * cosines) + a * SCALE * votes


def test_neighbor_votes_from_rows_are_unit_embeddings_and_label_tables():
    _, keys, Y_keys, _, _ = _problem()
    votes = NeighborVotes.from_rows(torch.from_numpy(keys.copy()), sp.csr_matrix(Y_keys))
    np.testing.assert_allclose(np.linalg.norm(votes.embeddings, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(votes.counts, Y_keys.sum(axis=1))
    for row in range(len(keys)):
        labels = votes.labels[row, : votes.counts[row]]
        np.testing.assert_array_equal(np.sort(labels), np.flatnonzero(Y_keys[row]))


@pytest.mark.parametrize(("a", "b"), [(0.0, 0.0), (0.3, 0.0), (0.0, 2.0), (0.4, 1.5)])
def test_blended_scores_and_top_k_are_the_dense_rule(a, b):
    table, keys, Y_keys, queries, _ = _problem()
    neighbors = NeighborVotes.from_rows(keys.copy(), sp.csr_matrix(Y_keys)) if a else None
    centroids = input_centroids(keys, sp.csr_matrix(Y_keys)) if b else None
    blend = Blend(SCALE, a, b, neighbors, 3, centroids)
    rows = queries if b else None
    chunks = blend.scores_in_chunks(queries, torch.from_numpy(table), "cpu", rows)
    expected = _dense_blend(queries, table, keys, Y_keys, a, b)
    np.testing.assert_allclose(torch.cat(list(chunks)).numpy(), expected, atol=1e-5)
    scores, labels = blend.dense_top_k(queries, torch.from_numpy(table), "cpu", rows, 4)
    np.testing.assert_array_equal(labels, brute_force_top_k(expected.astype(np.float32), 4))
    if a and not b:  # the votes' exact top-k from the label scores' own candidates
        candidates = brute_force_top_k(queries @ table.T, 4)
        vectors = torch.from_numpy(table)
        voted = blend.voted_top_k(queries, lambda rows: vectors[rows], 9, candidates, "cpu", 4)
        np.testing.assert_array_equal(voted[1], labels)
        np.testing.assert_allclose(voted[0], scores, atol=1e-5)


@pytest.mark.parametrize("working_memory", [1024, 1e-4])  # 1e-4 MiB: chunks of a few rows
@pytest.mark.parametrize("b", [0.0, 1.5])
def test_held_out_rows_are_scored_by_the_training_rows_their_neighbours_found_once(
    working_memory, b
):
    """``held_out_blend``: the votes and the centroids of the training rows alone, the held-out
    rows' nearest voting rows found once and read chunk by chunk, as the dense rule scores."""
    table, keys, Y_keys, queries, _ = _problem(seed=2)
    train = (keys, sp.csr_matrix(Y_keys), keys)
    blend = held_out_blend(
        Blend(SCALE, n_neighbors=3), train, lambda X: X.copy(), queries, votes=True, centroids=True
    )
    assert [part.shape for part in blend.nearest] == [(len(queries), 3)] * 2
    blend = blend._replace(neighbor_weight=0.4, centroid_weight=b)
    if not b:
        blend = blend._replace(centroids=None)
    expected = _dense_blend(queries, table, keys, Y_keys, 0.4, b)
    vectors = torch.from_numpy(table)
    with config_context(working_memory=working_memory):
        chunks = list(blend.scores_in_chunks(queries, vectors, "cpu", queries))
        dense = blend.dense_top_k(queries, vectors, "cpu", queries, 4)
        candidates = brute_force_top_k(queries @ table.T, 4)
        voted = blend.voted_top_k(queries, lambda rows: vectors[rows], 9, candidates, "cpu", 4)
    assert (len(chunks) == 1) == (working_memory == 1024)
    np.testing.assert_allclose(torch.cat(chunks).numpy(), expected, atol=1e-5)
    np.testing.assert_array_equal(dense[1], brute_force_top_k(expected.astype(np.float32), 4))
    if not b:
        np.testing.assert_array_equal(voted[1], dense[1])
        np.testing.assert_allclose(voted[0], dense[0], atol=1e-5)


def test_the_weights_chosen_are_the_best_of_a_brute_force_comparison():
    table, keys, Y_keys, queries, Y_queries = _problem(seed=1)
    neighbor_weights, centroid_weights = (0.0, 0.3, 0.6), (0.0, 1.0, 4.0)
    train = (keys, sp.csr_matrix(Y_keys), keys)
    blend = held_out_blend(
        Blend(SCALE, n_neighbors=3), train, lambda X: X.copy(), queries, votes=True, centroids=True
    )
    chosen = choose_blend_weights(
        neighbor_weights=neighbor_weights,
        centroid_weights=centroid_weights,
        held_out=(queries, sp.csr_matrix(Y_queries), queries),
        blend=blend,
        table=torch.from_numpy(table),
        device="cpu",
        k=1,
    )

    def precision(a, b):
        dense = _dense_blend(queries, table, keys, Y_keys, a, b).astype(np.float32)
        return np.mean(Y_queries[np.arange(len(queries)), brute_force_top_k(dense, 1)[:, 0]])

    by_votes = [precision(a, 0.0) for a in neighbor_weights]
    a = neighbor_weights[int(np.argmax(by_votes))]  # argmax: the first, the smallest, of ties
    by_centroids = [precision(a, b) for b in centroid_weights]
    assert chosen == (a, centroid_weights[int(np.argmax(by_centroids))])
    assert len(set(by_votes)) > 1 and len(set(by_centroids)) > 1  # the choice matters here
    # one candidate each: returned as given, nothing computed
    fixed = dict(neighbor_weights=(0.2,), centroid_weights=(3.0,), held_out=None, blend=None)
    fixed.update(table=None, device=None, k=1)
    assert choose_blend_weights(**fixed) == (0.2, 3.0)


def test_best_weight_takes_the_smallest_of_ties_and_top_k_score_is_the_metric():
    targets = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 0]], dtype=np.int8))
    tops = [np.array([[1], [0]]), np.array([[0], [1]]), np.array([[2], [1]])]
    assert best_weight((0.5, 0.2, 0.1), tops, targets) == 0.1  # weights 0.2 and 0.1 tie
    top = np.array([[0, 1], [1, 2]])
    expected = top_k_precision_score(targets.toarray(), np.eye(3)[top].sum(axis=1), k=2)
    assert top_k_score(targets, top, "precision") == pytest.approx(expected)
    assert top_k_score(targets, top, "recall") == pytest.approx((0.5 + 1.0) / 2)
