"""Deprecated module: the pair samplers moved to :mod:`skrank.sampling`, the pair statistics to
:mod:`skrank.similarity` (skrank 0.2). The old names warn and will be removed in skrank 0.3."""

from .utils._deprecation import moved_attributes

_NEW_HOMES = {
    **dict.fromkeys(
        [
            "PairSample",
            "count_pairs",
            "iter_negative_pairs",
            "sample_negative_pairs",
            "sample_negative_tuples",
        ],
        "skrank.sampling",
    ),
    **dict.fromkeys(
        [
            "PairStatistics",
            "dissimilar_pair_scatter",
            "negative_pair_outer_mean",
            "similar_pair_scatter",
        ],
        "skrank.similarity",
    ),
}
__getattr__ = moved_attributes(__name__, _NEW_HOMES)
