"""Loaders of the real data sets shipped in ``skrank/datasets/data`` (no network access)."""

from dataclasses import dataclass
from xml.etree import ElementTree

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

from .._compat import StrOptions, validate_params
from ..utils._docstrings import fill_docs
from . import _descr
from ._arff import load_sparse_arff
from ._idx import read_idx
from ._io import shipped_file

_MULAN_DOCS = {
    "mulan_parameters": [
        (
            "subset",
            '{"train", "test", "all"}',
            'The Mulan split to load; "all" stacks train then test.',
        ),
        ("return_X_y", "bool", "If True, return ``(data, target)`` instead of a Bunch."),
    ],
    "mulan_returns": [
        (
            "data",
            ":class:`~sklearn.utils.Bunch`",
            "With ``data``, CSR matrix of float64 of shape (n_samples, n_features); ``target``, "
            "CSR label-indicator matrix of int64 of shape (n_samples, n_labels); "
            "``feature_names``; ``target_names``, the label names of the Mulan XML header; "
            "``DESCR``. The sizes are in the table above.",
        ),
        ("(data, target)", "tuple", "If ``return_X_y`` is True."),
    ],
}

_MNIST_SHAPE = (28, 28)
_SUBSETS = ("train", "test", "all")


@dataclass(frozen=True)
class _MulanDataset:
    """One Mulan data set: its shipped files, its description and its sizes (for the docs)."""

    name: str
    title: str
    train_file: str
    test_file: str
    labels_file: str
    description: str
    n_labels: int
    n_train: int
    n_test: int
    n_features: int


_BIBTEX = _MulanDataset(
    "bibtex",
    "Bibtex multi-label data set (7,395 BibTeX entries, 159 tags)",
    "bibtex-train.arff.gz",
    "bibtex-test.arff.gz",
    "bibtex.xml.gz",
    _descr.BIBTEX,
    n_labels=159,
    n_train=4880,
    n_test=2515,
    n_features=1836,
)
_COREL5K = _MulanDataset(
    "corel5k",
    "Corel5k multi-label data set (5,000 images, 374 keywords)",
    "Corel5k-train-sparse.arff.gz",
    "Corel5k-test-sparse.arff.gz",
    "Corel5k.xml.gz",
    _descr.COREL5K,
    n_labels=374,
    n_train=4500,
    n_test=500,
    n_features=499,
)


@validate_params({"return_X_y": ["boolean"]}, prefer_skip_nested_validation=True)
def load_mnist(*, return_X_y=False):
    """Load the MNIST test set: 10,000 handwritten digits of 28 x 28 pixels.

    Read from the IDX files shipped with skrank. Read more in ``load_mnist().DESCR``.

    =================   ==============
    Classes                         10
    Samples total               10,000
    Dimensionality                 784
    Features            float32 [0, 1]
    =================   ==============

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data``, ndarray of float32 of shape (10000, 784), the grey levels scaled to [0, 1];
        ``images``, the same values as a view of shape (10000, 28, 28); ``target``, ndarray of
        int64 of shape (10000,), the digits; ``feature_names`` (``"pixel_<row>_<column>"``);
        ``target_names``, the digits 0-9; ``DESCR``, the description of the data set.
    (data, target) : tuple if ``return_X_y`` is True

    Examples
    --------
    >>> from skrank.datasets import load_mnist
    >>> X, y = load_mnist(return_X_y=True)
    >>> X.shape, X.dtype, y[:5]
    ((10000, 784), dtype('float32'), array([7, 2, 1, 0, 4]))
    """
    with shipped_file("t10k-images-idx3-ubyte.gz") as stream:
        raw_images = read_idx(stream)
    with shipped_file("t10k-labels-idx1-ubyte.gz") as stream:
        labels = read_idx(stream)
    if raw_images.dtype != np.uint8 or raw_images.shape[1:] != _MNIST_SHAPE:
        raise ValueError(f"Unexpected MNIST images of {raw_images.dtype} {raw_images.shape}.")
    if labels.dtype != np.uint8 or labels.shape != raw_images.shape[:1]:
        raise ValueError(f"Unexpected MNIST labels of {labels.dtype} {labels.shape}.")
    images = raw_images.astype(np.float32) / np.float32(255)
    data = images.reshape(len(images), -1)
    target = labels.astype(np.int64)
    if return_X_y:
        return data, target
    rows, columns = np.indices(_MNIST_SHAPE).reshape(2, -1)
    return Bunch(
        data=data,
        target=target,
        images=images,
        feature_names=np.array(
            [f"pixel_{r}_{c}" for r, c in zip(rows, columns, strict=True)], dtype=object
        ),
        target_names=np.arange(10),
        DESCR=_descr.MNIST,
    )


_validate_mulan_params = validate_params(
    {"subset": [StrOptions(set(_SUBSETS))], "return_X_y": ["boolean"]},
    prefer_skip_nested_validation=True,
)


_MULAN_DOCSTRING = """Load the {title}.

    Read from the Mulan ARFF files shipped with skrank. Read more in ``load_{name}().DESCR``.

    {table}

    Parameters
    ----------
    {{mulan_parameters}}

    Returns
    -------
    {{mulan_returns}}

    Examples
    --------
    >>> from skrank.datasets import load_{name}
    >>> X, Y = load_{name}(subset="test", return_X_y=True)
    >>> X.shape, Y.shape
    (({n_test}, {n_features}), ({n_test}, {n_labels}))
    """


def _size_table(dataset):
    """The reST table of a Mulan data set's sizes, as the docstrings of scikit-learn's loaders."""
    n_all = dataset.n_train + dataset.n_test
    rows = [
        ("Labels", f"{dataset.n_labels:,}"),
        ("Samples", f"{dataset.n_train:,} train, {dataset.n_test:,} test, {n_all:,} all"),
        ("Dimensionality", f"{dataset.n_features:,}"),
        ("Features", "binary, sparse (CSR float64)"),
    ]
    width = max(len(value) for _, value in rows)
    rule = "=" * 19 + "   " + "=" * width
    lines = [rule, *(f"{key:<19}   {value:>{width}}" for key, value in rows), rule]
    return "\n    ".join(lines)


def _mulan_loader(dataset):
    """The public loader ``load_<name>`` of a Mulan data set, its docstring made from the table."""

    def load(*, subset="train", return_X_y=False):
        return _load_mulan(dataset, subset, return_X_y)

    load.__name__ = load.__qualname__ = f"load_{dataset.name}"
    load.__doc__ = _MULAN_DOCSTRING.format(table=_size_table(dataset), **vars(dataset))
    return _validate_mulan_params(fill_docs(_MULAN_DOCS)(load))


load_bibtex = _mulan_loader(_BIBTEX)
load_corel5k = _mulan_loader(_COREL5K)


def _load_mulan(dataset, subset, return_X_y):
    with shipped_file(dataset.labels_file) as stream:
        label_names = _read_mulan_label_names(stream)
    files = {
        "train": [dataset.train_file],
        "test": [dataset.test_file],
        "all": [dataset.train_file, dataset.test_file],
    }[subset]
    parts = []
    for name in files:
        with shipped_file(name) as stream:
            parts.append(load_sparse_arff(stream, label_names=label_names))
    data = sp.vstack([part.data for part in parts], format="csr")
    target = sp.vstack([part.target for part in parts], format="csr")
    if return_X_y:
        return data, target
    return Bunch(
        data=data,
        target=target,
        feature_names=parts[0].feature_names,
        target_names=parts[0].target_names,
        DESCR=dataset.description,
    )


def _read_mulan_label_names(file):
    """Names of the labels declared in a Mulan XML header (file object), in document order."""
    return [
        element.get("name")
        for element in ElementTree.parse(file).iter()
        if element.tag.rsplit("}", 1)[-1] == "label"
    ]
