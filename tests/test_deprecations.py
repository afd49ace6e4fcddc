"""Names that moved in skrank 0.2 still work for one release, with a FutureWarning."""

import importlib

import pytest

import skrank.metrics
import skrank.multilabel
import skrank.sampling
import skrank.similarity

MOVED = [
    ("skrank.pairs", "PairSample", skrank.sampling),
    ("skrank.pairs", "count_pairs", skrank.sampling),
    ("skrank.pairs", "iter_negative_pairs", skrank.sampling),
    ("skrank.pairs", "sample_negative_pairs", skrank.sampling),
    ("skrank.pairs", "sample_negative_tuples", skrank.sampling),
    ("skrank.pairs", "PairStatistics", skrank.similarity),
    ("skrank.pairs", "similar_pair_scatter", skrank.similarity),
    ("skrank.pairs", "dissimilar_pair_scatter", skrank.similarity),
    ("skrank.pairs", "negative_pair_outer_mean", skrank.similarity),
    ("skrank.losses", "NegativeLabelSampler", skrank.sampling),
    ("skrank.losses", "draw_positive_labels", skrank.sampling),
    ("skrank.losses", "sample_distinct_labels", skrank.sampling),
    ("skrank.nn", "ClassBalancedBatchSampler", skrank.sampling),
    ("skrank.nn", "ShuffledBatchSampler", skrank.sampling),
    ("skrank.nn", "LabelEmbeddingNetwork", skrank.multilabel),
    ("skrank.nn", "top_k_inner_products", skrank.metrics),
    ("skrank.snm", "SNMClassifier", skrank.multilabel),
    ("skrank.mmc", "MMC", skrank.similarity),
]


@pytest.mark.parametrize("old_module, name, new_module", MOVED, ids=lambda v: str(v))
def test_moved_name_warns_and_is_the_new_object(old_module, name, new_module):
    module = importlib.import_module(old_module)
    with pytest.warns(FutureWarning, match=rf"{old_module}\.{name} moved to {new_module.__name__}"):
        old = getattr(module, name)
    assert old is getattr(new_module, name)


def test_unknown_name_of_a_deprecated_module_is_an_attribute_error():
    module = importlib.import_module("skrank.pairs")
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        module.nothing  # noqa: B018
