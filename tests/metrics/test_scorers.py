"""Tests of the skrank.metrics scorers: name parsing, dispatch protocol, GridSearchCV, pickling."""

import pickle

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.metrics import accuracy_score, average_precision_score
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.neighbors import NeighborhoodComponentsAnalysis
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank import PointwiseROCSimilarity
from skrank.metrics import (
    get_scorer,
    make_retrieval_scorer,
    mean_auprc_score,
    pairwise_roc_score,
    precision_at_k_score,
    recall_at_k_score,
    retrieval_scores,
    top_k_indices,
    top_k_precision_score,
    top_k_recall_score,
)


def clustered(n_samples=60, n_features=4, n_classes=4, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(n_classes, size=n_samples)
    X = rng.normal(size=(n_samples, n_features)) + 2 * rng.normal(size=(n_classes, n_features))[y]
    return X, y


class CentroidClassifier(ClassifierMixin, BaseEstimator):
    """Scores each class by minus the squared distance to its centroid, scaled by ``power``."""

    def __init__(self, power=1.0):
        self.power = power

    def fit(self, X, y):
        self.classes_, codes = np.unique(y, return_inverse=True)
        self.centroids_ = np.array([X[codes == c].mean(axis=0) for c in range(len(self.classes_))])
        return self

    def decision_function(self, X):
        distances = ((X[:, None, :] - self.centroids_[None]) ** 2).sum(axis=2)
        return -(distances**self.power)

    def predict(self, X):
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    def set_centroids(self, n_kept):
        """Keep the first centroids only: scores then miss columns (a broken classifier)."""
        self.centroids_ = self.centroids_[:n_kept]
        return self


class TopKCentroidClassifier(CentroidClassifier):
    """Has ``predict_top_k``; its ``decision_function`` must then not be used by the scorers."""

    def decision_function(self, X):
        raise AssertionError("the scorer should call predict_top_k")

    def predict_top_k(self, X, k, return_scores=False):
        scores = super().decision_function(X)
        return self.classes_[np.argsort(-scores, axis=1, kind="stable")[:, :k]]


class IdentityEmbedder(TransformerMixin, BaseEstimator):
    """Identity embedding without a declared retrieval metric."""

    def fit(self, X, y=None):
        self.n_features_in_ = np.shape(X)[1]
        return self

    def transform(self, X):
        return np.asarray(X)


class CosineEmbedder(IdentityEmbedder):
    """Identity embedding that declares cosine as its retrieval metric."""

    retrieval_metric = "cosine"


class PairSimilarity(BaseEstimator):
    """Exposes ``pairwise_similarity`` (and no transform)."""

    def fit(self, X, y=None):
        return self

    def pairwise_similarity(self, X):
        return -np.abs(X[:, :1] - X[:, :1].T)


# ---------------------------------------------------------------- names


def test_get_scorer_parses_names_and_falls_back_to_sklearn():
    assert repr(get_scorer("hit_rate@10")) == "skrank.metrics.get_scorer('hit_rate@10')"
    assert get_scorer("tpr@fpr=1e-2").fpr == 0.01
    assert get_scorer("precision@5").k == 5
    X, y = clustered()
    model = CentroidClassifier().fit(X, y)
    assert get_scorer("accuracy")(model, X, y) == accuracy_score(y, model.predict(X))
    assert get_scorer(mean_auprc_score) is mean_auprc_score  # callables pass through


@pytest.mark.parametrize(
    "name",
    ["hit_rate@0", "recall@", "label_recall@x", "precision@-1", "hit_rate@1.5", "map@5"],
)
def test_get_scorer_rejects_malformed_ranking_names(name):
    with pytest.raises(ValueError, match="Malformed scorer name"):
        get_scorer(name)


@pytest.mark.parametrize("name", ["tpr@fpr=0", "tpr@fpr=1.5", "tpr@fpr=abc", "tpr@fpr=nan"])
def test_get_scorer_rejects_bad_fpr(name):
    with pytest.raises(ValueError, match="fpr|not a number"):
        get_scorer(name)


def test_unknown_name_raises_sklearn_error():
    with pytest.raises(ValueError, match="not a valid scoring value"):
        get_scorer("no_such_metric")


# ---------------------------------------------------------------- embedders


def test_embedding_scorers_use_the_retrieval_metric_protocol():
    X, y = clustered()
    X[:, 0] *= np.linspace(0.2, 5, len(X))  # euclidean and cosine rankings differ
    cosine = mean_auprc_score(X, y, metric="cosine")
    euclidean = mean_auprc_score(X, y, metric="euclidean")
    assert cosine != pytest.approx(euclidean)
    scorer = get_scorer("mean_auprc")
    embedder = CosineEmbedder().fit(X, y)
    assert scorer(embedder, X, y) == pytest.approx(cosine)  # the class attribute
    pipeline = make_pipeline(CosineEmbedder()).fit(X, y)
    assert scorer(pipeline, X, y) == pytest.approx(cosine)  # the final step's attribute
    assert scorer(PCA().fit(X), X, y) == pytest.approx(
        mean_auprc_score(PCA().fit(X).transform(X), y, metric="euclidean")
    )  # default: euclidean
    assert get_scorer("mean_auprc", metric="euclidean")(embedder, X, y) == pytest.approx(
        euclidean
    )  # the scorer's metric wins


def _brute_force_retrieval(similarity, y):
    """Mean AUPRC and Recall@1 of each item as a query against the others, by loops."""
    average_precisions, hits = [], []
    for query in range(len(y)):
        others = np.arange(len(y)) != query
        relevant = y[others] == y[query]
        average_precisions.append(average_precision_score(relevant, similarity[query, others]))
        hits.append(relevant[np.argmax(similarity[query, others])])
    return np.mean(average_precisions), np.mean(hits)


@pytest.mark.parametrize("pipeline", [False, True])
def test_retrieval_scorers_rank_by_the_similarity_of_a_similarity_learner(pipeline):
    # PointwiseROCSimilarity has pairwise_similarity and no transform; its decision_function
    # scores pairs. The retrieval scorers raised "it is a classifier" (mean_auprc) or a
    # pairs-shape error (recall@1); they rank the items by its similarity.
    X, y = clustered(seed=1)
    model = PointwiseROCSimilarity(alpha=0.5, random_state=0)
    model = make_pipeline(StandardScaler(), model) if pipeline else model
    model.fit(X[:40], y[:40])
    similarity = (
        model[-1].pairwise_similarity(model[:-1].transform(X[40:]))
        if pipeline
        else (model.pairwise_similarity(X[40:]))
    )
    mean_auprc, recall_at_1 = _brute_force_retrieval(similarity, y[40:])
    assert get_scorer("mean_auprc")(model, X[40:], y[40:]) == pytest.approx(mean_auprc)
    assert get_scorer("hit_rate@1")(model, X[40:], y[40:]) == pytest.approx(recall_at_1)
    assert get_scorer("mean_auprc")(model, X[40:], y[40:]) != pytest.approx(
        mean_auprc_score(X[40:], y[40:])  # not the input space's cosine ranking
    )
    with pytest.raises(ValueError, match="ranks items by its own pairwise_similarity"):
        get_scorer("mean_auprc", metric="cosine")(model, X[40:], y[40:])
    with pytest.raises(ValueError, match="needs a classifier"):
        get_scorer("ndcg@2")(model, X[40:], y[40:])


def test_the_former_private_retrieval_metric_attribute_still_works_with_a_warning():
    class OldCosineEmbedder(IdentityEmbedder):
        _retrieval_metric = "cosine"

    X, y = clustered()
    X[:, 0] *= np.linspace(0.2, 5, len(X))
    with pytest.warns(FutureWarning, match="name the class attribute retrieval_metric"):
        score = get_scorer("mean_auprc")(OldCosineEmbedder().fit(X, y), X, y)
    assert score == pytest.approx(mean_auprc_score(X, y, metric="cosine"))
    assert score != pytest.approx(mean_auprc_score(X, y, metric="euclidean"))


def test_at_r_scorers_and_device_through_make_retrieval_scorer():
    X, y = clustered()
    embedder = CosineEmbedder().fit(X, y)
    reference = retrieval_scores(X, y, k=[], at_r=True, metric="cosine", device="numpy")
    assert get_scorer("map@r")(embedder, X, y) == pytest.approx(reference["map@r"], abs=1e-6)
    assert get_scorer("r_precision")(embedder, X, y) == pytest.approx(
        reference["r_precision"], abs=1e-6
    )
    assert reference["map@r"] != pytest.approx(reference["r_precision"])
    numpy_scorer = make_retrieval_scorer(mean_auprc_score, device="numpy")
    assert numpy_scorer(embedder, X, y) == pytest.approx(reference["mean_auprc"], abs=1e-12)
    assert pickle.loads(pickle.dumps(get_scorer("map@r")))(embedder, X, y) == pytest.approx(
        reference["map@r"], abs=1e-6
    )


def test_top_k_scorers_on_an_embedder_are_retrieval_metrics():
    X, y = clustered()
    embedder = CosineEmbedder().fit(X, y)
    assert get_scorer("hit_rate@3")(embedder, X, y) == recall_at_k_score(X, y, 3)
    assert get_scorer("precision@3")(embedder, X, y) == precision_at_k_score(X, y, 3)


def test_hit_rate_and_label_recall_say_which_recall_they_are():
    X, y = clustered()
    embedder = CosineEmbedder().fit(X, y)
    classifier = CentroidClassifier().fit(X, y)
    Y = np.eye(4, dtype=int)[y]
    Y[::2, (y[::2] + 1) % 4] = 1  # half the examples have two labels
    multilabel = CentroidClassifier().fit(X, Y.argmax(axis=1))
    top_2 = top_k_indices(multilabel.decision_function(X), 2)
    hits = np.take_along_axis(Y, top_2, axis=1)
    # Over labels: hit rate counts an example once a true label is in its top k, label recall
    # the share of its true labels found there (they differ for multilabel targets).
    assert get_scorer("hit_rate@2")(multilabel, X, Y) == pytest.approx(np.mean(hits.any(1)))
    label_recall = np.mean(hits.sum(1) / Y.sum(1))
    assert get_scorer("label_recall@2")(multilabel, X, Y) == pytest.approx(label_recall)
    assert label_recall != pytest.approx(np.mean(hits.any(1)))
    # Over retrieval (an embedder): the share of queries with a positive among their k best.
    assert get_scorer("hit_rate@2")(embedder, X, y) == recall_at_k_score(X, y, 2)
    with pytest.raises(ValueError, match=r"needs a classifier.*For an embedder, 'hit_rate@2'"):
        get_scorer("label_recall@2")(embedder, X, y)
    # The former name warns and keeps its two meanings for one release.
    with pytest.warns(FutureWarning, match=r"'recall@2' is deprecated .* 'hit_rate@2' .*"):
        former = get_scorer("recall@2")
    assert former(embedder, X, y) == get_scorer("hit_rate@2")(embedder, X, y)
    assert former(classifier, X, y) == get_scorer("label_recall@2")(classifier, X, y)


def test_make_retrieval_scorer():
    X, y = clustered()
    scorer = make_retrieval_scorer(precision_at_k_score, metric="euclidean", k=4)
    expected = precision_at_k_score(X, y, 4, metric="euclidean")
    assert scorer(CosineEmbedder(), X, y) == expected
    assert "precision_at_k_score" in repr(scorer) and "k=4" in repr(scorer)


# ---------------------------------------------------------------- classifiers


@pytest.mark.parametrize("model_class", [CentroidClassifier, TopKCentroidClassifier])
@pytest.mark.parametrize("k", [1, 2])
def test_top_k_scorers_on_a_classifier_are_label_metrics(model_class, k):
    X, codes = clustered()
    y = np.array(["ant", "bee", "cat", "dog"])[codes]
    model = model_class().fit(X, y)
    scores = CentroidClassifier.decision_function(model, X)
    expected_recall = top_k_recall_score(y, scores, k, labels=model.classes_)
    expected_precision = top_k_precision_score(y, scores, k, labels=model.classes_)
    assert get_scorer(f"label_recall@{k}")(model, X, y) == pytest.approx(expected_recall)
    assert get_scorer(f"precision@{k}")(model, X, y) == pytest.approx(expected_precision)


@pytest.mark.parametrize("as_sparse", [False, True])
def test_top_k_scorer_with_multilabel_indicator_targets(as_sparse):
    class MultilabelScores(CentroidClassifier):
        def fit(self, X, Y):
            self.classes_ = np.arange(Y.shape[1])
            self.centroids_ = np.array([X[Y[:, j] == 1].mean(axis=0) for j in self.classes_])
            return self

    X, codes = clustered(seed=1)
    Y = np.eye(4, dtype=int)[codes]
    Y[::3, 0] = 1  # some examples have two labels
    model = MultilabelScores().fit(X, Y)
    expected = top_k_recall_score(Y, model.decision_function(X), 2)
    targets = sparse.csr_matrix(Y) if as_sparse else Y
    assert get_scorer("label_recall@2")(model, X, targets) == pytest.approx(expected)


def test_classifier_scorer_errors():
    X, y = clustered()
    model = CentroidClassifier().fit(X, y)
    with pytest.raises(ValueError, match="it is a classifier"):
        get_scorer("mean_auprc")(model, X, y)
    with pytest.raises(ValueError, match="it is a classifier"):
        get_scorer("tpr@fpr=0.1")(model, X, y)
    with pytest.raises(ValueError, match="needs an estimator with transform"):
        get_scorer("mean_auprc")(PairSimilarity(), X, y)

    class BinaryScores(CentroidClassifier):
        def decision_function(self, X):
            return super().decision_function(X)[:, 1]

    with pytest.raises(ValueError, match=r"decision_function\(X\) must be 2-D"):
        get_scorer("label_recall@1")(BinaryScores().fit(X, y % 2), X, y % 2)
    with pytest.raises(ValueError, match=r"scores of shape \(n_samples, 4\); got \(60, 2\)"):
        get_scorer("label_recall@1")(CentroidClassifier().fit(X, y).set_centroids(2), X, y)
    with pytest.raises(TypeError, match="no extra arguments"):
        get_scorer("label_recall@1")(model, X, y, sample_weight=np.ones(len(y)))


class OnlyTopK(BaseEstimator):
    """A classifier with ``predict_top_k`` only, returning ``width`` columns of labels."""

    def __init__(self, width=None):
        self.width = width

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict_top_k(self, X, k, return_scores=False):
        return np.tile(self.classes_[::-1], (len(X), 1))[:, : self.width or k]


def test_classifier_with_only_predict_top_k():
    X, y = clustered()
    model = OnlyTopK().fit(X, y)
    expected = np.mean(np.isin(y, model.classes_[::-1][:2]))
    assert get_scorer("label_recall@2")(model, X, y) == pytest.approx(expected)
    with pytest.raises(ValueError, match="it is a classifier"):
        get_scorer("mean_auprc")(model, X, y)
    with pytest.raises(ValueError, match=r"must return an array of shape \(n_samples, 2\)"):
        get_scorer("label_recall@2")(OnlyTopK(width=3).fit(X, y), X, y)


def test_top_k_scorer_uses_predict_top_k_of_a_pipeline_final_step():
    X, y = clustered()
    model = make_pipeline(StandardScaler(), TopKCentroidClassifier()).fit(X, y)
    reference = CentroidClassifier().fit(model[0].transform(X), y)
    expected = top_k_recall_score(y, reference.decision_function(model[0].transform(X)), k=2)
    assert get_scorer("label_recall@2")(model, X, y) == pytest.approx(expected)
    only_top_k = make_pipeline(StandardScaler(), OnlyTopK()).fit(X, y)
    assert get_scorer("precision@1")(only_top_k, X, y) == pytest.approx(
        get_scorer("precision@1")(only_top_k[-1], only_top_k[0].transform(X), y)
    )


def test_classifier_with_non_finite_scores():
    class NaNScores(CentroidClassifier):
        def decision_function(self, X):
            scores = super().decision_function(X)
            scores[0, 0] = np.nan
            return scores

    X, y = clustered()
    with pytest.raises(ValueError, match="decision_function.*NaN"):
        get_scorer("label_recall@1")(NaNScores().fit(X, y), X, y)


# ---------------------------------------------------------------- pair ROC


def test_tpr_at_fpr_scorer():
    X, y = clustered()
    scorer = get_scorer("tpr@fpr=0.1")
    expected = pairwise_roc_score(PairSimilarity().pairwise_similarity(X), y, 0.1)
    assert scorer(PairSimilarity(), X, y) == pytest.approx(expected)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert scorer(CosineEmbedder(), X, y) == pytest.approx(
        pairwise_roc_score(unit @ unit.T, y, 0.1)
    )
    squared_distances = ((X[:, None] - X[None]) ** 2).sum(axis=2)
    assert scorer(PCA().fit(X), X, y) == pytest.approx(
        pairwise_roc_score(-squared_distances, y, 0.1)
    )


def test_tpr_at_fpr_scorer_on_a_pipeline_ending_with_a_pair_similarity():
    from skrank import PointwiseROCSimilarity

    X, y = clustered()
    # The final step has decision_function (on pairs) and pairwise_similarity: the scorer
    # must use the latter, on X transformed by the other steps.
    model = make_pipeline(StandardScaler(), PointwiseROCSimilarity(alpha=0.45)).fit(X, y)
    expected = pairwise_roc_score(model[-1].pairwise_similarity(model[0].transform(X)), y, 0.1)
    assert get_scorer("tpr@fpr=0.1")(model, X, y) == pytest.approx(expected)
    single_step = make_pipeline(PairSimilarity()).fit(X, y)
    assert get_scorer("tpr@fpr=0.1")(single_step, X, y) == pytest.approx(
        pairwise_roc_score(PairSimilarity().pairwise_similarity(X), y, 0.1)
    )


# ---------------------------------------------------------------- model selection


def test_scorers_in_grid_search_with_a_transformer():
    X, y = clustered(n_features=6)
    cv = KFold(2)
    search = GridSearchCV(
        make_pipeline(StandardScaler(), PCA()),
        {"pca__n_components": [1, 4]},
        scoring={"map": get_scorer("mean_auprc"), "r5": get_scorer("hit_rate@5")},
        refit="map",
        cv=cv,
        error_score="raise",
    ).fit(X, y)
    for i, n_components in enumerate([1, 4]):
        fold_scores = []
        for train, test in cv.split(X):
            model = make_pipeline(StandardScaler(), PCA(n_components)).fit(X[train])
            fold_scores.append(
                mean_auprc_score(model.transform(X[test]), y[test], metric="euclidean")
            )
        assert search.cv_results_["mean_test_map"][i] == pytest.approx(np.mean(fold_scores))
    assert search.best_params_ == {"pca__n_components": 4}


@pytest.mark.parametrize("name", ["mean_auprc", "hit_rate@3", "precision@2", "tpr@fpr=0.05"])
def test_scorers_are_picklable(name):
    X, y = clustered()
    scorer = get_scorer(name, metric="cosine")
    restored = pickle.loads(pickle.dumps(scorer))
    assert repr(restored) == repr(scorer)
    embedder = CosineEmbedder().fit(X)
    assert restored(embedder, X, y) == scorer(embedder, X, y)


@pytest.mark.filterwarnings("ignore:One or more of the test scores are non-finite")
def test_scorers_with_a_classifier_in_grid_search_and_cross_val_score():
    X, y = clustered()
    search = GridSearchCV(
        CentroidClassifier(),
        {"power": [0.5, 1.0]},
        scoring={"p3": get_scorer("precision@3"), "tpr": get_scorer("tpr@fpr=0.05")},
        refit=False,
        cv=2,
        error_score=np.nan,
    )
    with pytest.warns(UserWarning, match="Scoring failed"):  # tpr@fpr needs an embedding
        search.fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_p3"]))
    assert np.all(np.isnan(search.cv_results_["mean_test_tpr"]))
    scores = cross_val_score(
        NeighborhoodComponentsAnalysis(n_components=2, max_iter=5, random_state=0),
        X,
        y,
        scoring=get_scorer("tpr@fpr=0.05"),
        cv=2,
        error_score="raise",
    )
    assert scores.shape == (2,) and np.all((scores >= 0) & (scores <= 1))
