"""ONNX export of the torch estimators: the graph's outputs against the estimators' own."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import fit_small_estimator, onnx_session
from scipy.special import expit


@pytest.fixture(scope="module")
def fitted():
    names = [
        "SOPRCEmbedder",
        "SNMClassifier-multilabel-tfidf",
        "SNMClassifier-multilabel-tfidf-centroids",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: fit_small_estimator(name) for name in names}


def test_soprc_onnx_graph_equals_transform(fitted, tmp_path):
    model, X = fitted["SOPRCEmbedder"]
    session = onnx_session(model, tmp_path)
    assert [i.name for i in session.get_inputs()] == ["X"]
    (embedding,) = session.run(None, {"X": model.onnx_inputs(X)})
    np.testing.assert_allclose(embedding, model.transform(X), rtol=1e-5, atol=1e-6)
    (sparse_embedding,) = session.run(None, {"X": model.onnx_inputs(sp.csr_matrix(X[:7]))})
    np.testing.assert_allclose(sparse_embedding, model.transform(X[:7]), rtol=1e-5, atol=1e-6)


def test_snm_onnx_graph_equals_the_label_scores(fitted, tmp_path):
    model, X = fitted["SNMClassifier-multilabel-tfidf"]  # TF-IDF inputs, sparse, votes on
    assert model.input_normalization_ == "tfidf"
    session = onnx_session(model, tmp_path)
    inputs = model.onnx_inputs(X)
    assert isinstance(inputs, np.ndarray) and inputs.dtype == np.float32
    scores, embeddings = session.run(None, {"X": inputs})
    network_scores = model.network_(torch.from_numpy(inputs)) @ model.network_.label_table().T
    trained = model.trained_labels_
    assert scores.shape[1] == len(model.classes_) == len(trained) + 1
    np.testing.assert_allclose(
        scores[:, trained], network_scores.detach().numpy(), rtol=1e-5, atol=1e-5
    )
    assert np.all(scores[:, 1] == np.float32(np.finfo(np.float32).min))
    finished = model.decision_function_from_onnx(scores, embeddings)
    np.testing.assert_allclose(finished, model.decision_function(X), rtol=1e-5, atol=1e-5)
    assert model.neighbor_weight_ > 0  # the votes stay outside the graph
    assert not np.allclose(scores, model.decision_function(X), atol=1e-3)
    # probabilities stay outside the graph: the documented map of the finished scores
    knots, logits = model.probability_knots_, model.probability_logits_
    probabilities = expit(np.interp(finished, knots, logits))
    probabilities[:, 1] = 0  # the label without a training example
    np.testing.assert_allclose(probabilities, model.predict_proba(X), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="outputs of the exported graph"):
        model.decision_function_from_onnx(scores[:, :3], embeddings)


def test_snm_onnx_outputs_take_the_centroid_rule_outside_the_graph(fitted, tmp_path):
    model, X = fitted["SNMClassifier-multilabel-tfidf-centroids"]
    assert model.centroid_weight_ == 2.0 and model.neighbor_weight_ > 0
    session = onnx_session(model, tmp_path)
    inputs = model.onnx_inputs(X)
    scores, embeddings = session.run(None, {"X": inputs})
    network_scores = model.network_(torch.from_numpy(inputs)) @ model.network_.label_table().T
    trained = model.trained_labels_
    np.testing.assert_allclose(
        scores[:, trained], network_scores.detach().numpy(), rtol=1e-5, atol=1e-5
    )
    finished = model.decision_function_from_onnx(scores, embeddings, X)
    np.testing.assert_allclose(finished, model.decision_function(X), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="pass X"):
        model.decision_function_from_onnx(scores, embeddings)
    with pytest.raises(ValueError, match="X has 3 rows"):
        model.decision_function_from_onnx(scores, embeddings, X[:3])


def test_onnx_export_names_the_extra_when_packages_are_missing(fitted, monkeypatch, tmp_path):
    import importlib.util

    model, _ = fitted["SOPRCEmbedder"]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r'pip install "\.\[onnx\]"'):
        model.export_onnx(tmp_path / "model.onnx")
