"""The fitted predictor: built from arrays, its top-k and scores over every label (those
without a row of the table last and lowest), and the search it keeps or builds."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import brute_force_top_k

from skrank.multilabel import LabelEmbeddingNetwork
from skrank.multilabel._blend import NeighborVotes
from skrank.multilabel._centroids import input_centroids
from skrank.multilabel._label_search import LabelSearch
from skrank.multilabel._predictor import (
    PredictionSettings,
    build_predictor,
    label_scores_predictor,
)
from skrank.multilabel._targets import UNTRAINED_LABEL_SCORE

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRAINED = np.array([0, 2, 3, 5, 6])  # of 8 labels: 1, 4 and 7 have no row of the table


def _network():
    torch.manual_seed(0)
    network = LabelEmbeddingNetwork(6, len(TRAINED), n_components=4, hidden_layer_sizes=())
    return network.eval()


def _arrays(network, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(20, 6)).astype(np.float32)
    with torch.no_grad():
        embeddings = network(torch.from_numpy(X)).numpy()
    Y = sp.csr_matrix((rng.rand(20, len(TRAINED)) < 0.4).astype(np.int8))
    return X, embeddings, Y


def _predictor(network, method="exact", votes=None, centroids=None, **kwargs):
    return build_predictor(
        PredictionSettings(method, 3, torch.device("cpu")),
        network=network,
        trained=TRAINED,
        n_classes=8,
        neighbor_weight=0.3 if votes is not None else 0.0,
        centroid_weight=2.0 if centroids is not None else 0.0,
        neighbors=votes,
        centroids=centroids,
        n_probe=None,
        search_seed=0,
        **kwargs,
    )


@pytest.mark.parametrize("blend", ["none", "votes", "centroids"])
def test_top_k_is_the_full_sort_of_the_scores_of_every_label(blend):
    network = _network()
    X, embeddings, Y = _arrays(network)
    votes = NeighborVotes.from_rows(embeddings.copy(), Y) if blend == "votes" else None
    centroids = input_centroids(X, Y) if blend == "centroids" else None
    predictor = _predictor(network, votes=votes, centroids=centroids)
    rows = X if centroids is not None else None
    scores = predictor.scores(torch.from_numpy(embeddings), rows)
    assert scores.shape == (20, 8)
    assert (scores[:, [1, 4, 7]] == UNTRAINED_LABEL_SCORE).all()
    if blend == "none":
        label_scores = embeddings @ network.label_table().numpy().T
        np.testing.assert_allclose(scores[:, TRAINED], label_scores, atol=1e-6)
    for k in (1, 5, 8):
        top_scores, labels = predictor.top_k(embeddings, rows, k)
        np.testing.assert_array_equal(labels, brute_force_top_k(scores, k))
        np.testing.assert_allclose(
            top_scores, np.take_along_axis(scores, labels, axis=1), atol=1e-5
        )


def test_the_label_scores_predictor_searches_the_table_exactly_without_a_blend():
    network = _network()
    _, embeddings, _ = _arrays(network)
    predictor = label_scores_predictor(network, TRAINED, 8, torch.device("cpu"))
    assert predictor.settings is None and predictor.search.method == "exact"
    assert predictor.blend.neighbors is None and predictor.blend.centroids is None
    _, rows = predictor.table_top_k(embeddings, None, 2)
    label_scores = embeddings @ network.label_table().numpy().T
    np.testing.assert_array_equal(rows, brute_force_top_k(label_scores, 2))


def test_a_search_of_the_settings_method_is_kept_and_another_replaced():
    network = _network()
    built = LabelSearch(network.label_table, len(TRAINED), "faiss")
    assert _predictor(network, "faiss", search=built).search is built
    replaced = _predictor(network, "exact", search=built).search
    assert replaced is not built and replaced.method == "exact"


def test_an_index_search_with_the_nearest_centroid_rule_is_refused():
    network = _network()
    X, _, Y = _arrays(network)
    with pytest.raises(ValueError, match="centroid_weight_=2.0"):
        _predictor(network, "ivf", centroids=input_centroids(X, Y))
