"""Data sets: loaders of the real data shipped with skrank and generators from the papers.

The real data (MNIST test set, Bibtex, Corel5k) are read from compressed copies inside the
package; nothing is ever downloaded.
"""

from ._arff import load_sparse_arff
from ._composite import make_composite_digits
from ._extreme import (
    EXTREME_PRESETS,
    dump_extreme_file,
    load_extreme_file,
    load_extreme_split,
    make_extreme_classification,
)
from ._real import load_bibtex, load_corel5k, load_mnist
from ._sparse_multilabel import make_sparse_multilabel_classification
from ._synthetic import (
    make_large_output_classification,
    make_score_simulation,
    make_sphere_classes,
)

__all__ = [
    "EXTREME_PRESETS",
    "dump_extreme_file",
    "load_bibtex",
    "load_corel5k",
    "load_extreme_file",
    "load_extreme_split",
    "load_mnist",
    "load_sparse_arff",
    "make_composite_digits",
    "make_extreme_classification",
    "make_large_output_classification",
    "make_score_simulation",
    "make_sparse_multilabel_classification",
    "make_sphere_classes",
]
