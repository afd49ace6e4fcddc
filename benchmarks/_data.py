"""The benchmarks' data: every split a benchmark reads, built in one place.

- **MNIST-10k** (the 10,000 test digits shipped with skrank, pixels in [0, 1]):
  :func:`mnist_split` (a stratified train/test split), :func:`mnist_rows` (the first rows),
  :func:`pca` (principal axes fitted on the first part, centred or not);
- **composite digits** (two to four MNIST digits side by side, classes disjoint between the
  halves): :func:`composite_digits` (the training and test halves at 100, 1,000 or 10,000
  classes), :func:`composite_validation` and :func:`validation_images` (held-out training
  classes, the latter rebuilt from disjoint images);
- **extreme classification** (sparse rows, indicator targets): :func:`xmc_split` serves debtags
  and debian-suggests (:func:`text_labels`: TF-IDF rows of Debian package names and descriptions,
  the fixed splits of ``shared/data``), Bibtex and Corel5k (the Mulan splits shipped with
  skrank) and the generated rows of ``make_extreme_classification``.

Every function is deterministic: the same arguments give the same arrays.
"""

import csv
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import PCA
from sklearn.model_selection import GroupShuffleSplit, train_test_split

from skrank.datasets import (
    load_bibtex,
    load_corel5k,
    load_mnist,
    make_composite_digits,
    make_extreme_classification,
)

REPOSITORY = Path(__file__).resolve().parent.parent
# The data files that are not shipped: $SKRANK_SHARED_DATA, else shared/data in the repository or
# beside it.
SHARED_DATA = Path(
    os.environ.get("SKRANK_SHARED_DATA")
    or next(
        (path for path in (REPOSITORY / "shared" / "data", REPOSITORY.parent / "shared" / "data")
         if path.exists()),
        REPOSITORY.parent / "shared" / "data",
    )
)  # fmt: skip


# ------------------------------------------------------------------------------ MNIST
def mnist_split(train_size=None, test_size=2000, seed=0, dtype=np.float64):
    """A stratified split of MNIST-10k: ``X_train, X_test, y_train, y_test``: ``train_size``
    items (the rest when None), ``test_size`` items (or their share), ``seed`` the split's
    ``random_state``, pixels of type ``dtype``."""
    X, y = load_mnist(return_X_y=True)
    return train_test_split(
        X.astype(dtype), y, train_size=train_size, test_size=test_size, stratify=y,
        random_state=seed,
    )  # fmt: skip


def mnist_rows(n_samples=None, dtype=np.float32):
    """The first ``n_samples`` digits of MNIST-10k (every one when None): ``X, y``."""
    X, y = load_mnist(return_X_y=True)
    return X[:n_samples].astype(dtype), y[:n_samples]


def pca(X_fit, *others, n_components=0.9, centred=True, svd_solver="covariance_eigh"):
    """``X_fit`` and each of ``others`` on the principal axes of ``X_fit``.

    ``n_components``: an int (that many axes) or a float (the share of the variance kept).
    ``centred=False``: the products with the axes, not centred (``X @ components_.T``), as
    ``python -m skrank``'s PointwiseROCSimilarity row. ``svd_solver``: scikit-learn's (its
    ``"auto"`` and ``"randomized"`` give other axes to rounding, or a nearby subspace).
    """
    fitted = PCA(n_components, svd_solver=svd_solver, random_state=0).fit(X_fit)
    if centred:
        return [fitted.transform(X) for X in (X_fit, *others)]
    return [X @ fitted.components_.T for X in (X_fit, *others)]


# ------------------------------------------------------------------------------ composite digits
# Two digits and 100 classes, as in the SOPRC paper's protocol sized for a CPU; three and four
# digits with a Zipf tail (2 + a share proportional to 1 / rank items a class) down to 3-4
# items a class, most classes holding fewer than 8, as in Stanford Online Products.
COMPOSITE_SCALES = {
    100: dict(n_samples=10_000, n_digits=2, n_classes=100),
    1000: dict(n_samples=15_000, n_digits=3, tail_exponent=1.0, min_class_size=2),
    10000: dict(n_samples=150_000, n_digits=4, tail_exponent=1.0, min_class_size=2),
}
# Larger classes, as in iNaturalist, In-Shop or faces: tens to hundreds of items a class
# (1,000 classes: 10 to 300, 35 on average; 100 classes: 112 to 1,032).
LARGE_CLASS_SCALES = {
    100: dict(n_samples=20_000, n_digits=2, n_classes=100, tail_exponent=0.5, min_class_size=10),
    1000: dict(
        n_samples=35_000, n_digits=3, tail_exponent=0.5, min_class_size=10, max_class_size=300
    ),
}


def composite_scale(classes=100, large=False):
    """The ``make_composite_digits`` parameters at ``classes`` classes."""
    scales = LARGE_CLASS_SCALES if large else COMPOSITE_SCALES
    if classes not in scales:
        kind = "large classes" if large else "composite digits"
        raise ValueError(f"The {kind} are defined at {sorted(scales)} classes, not {classes}.")
    return scales[classes]


def composite_digits(classes=100, large=False):
    """The two halves of the class-disjoint data: ``X_train, y_train, X_test, y_test`` (the
    test classes and the MNIST images they are built from are not in the training half)."""
    halves = [
        make_composite_digits(**composite_scale(classes, large), subset=subset, random_state=0)
        for subset in ("train", "test")
    ]
    return halves[0].data, halves[0].target, halves[1].data, halves[1].target


def composite_validation(classes=100, large=False, image_disjoint=False):
    """The validation split of the training half: ``X_fit, y_fit, X_val, y_val``, 20 of 50
    training classes held out (``image_disjoint``: redrawn as :func:`validation_images` does).
    The test half plays no part."""
    train = make_composite_digits(**composite_scale(classes, large), subset="train", random_state=0)
    if image_disjoint:
        X_fit, y_fit, X_val, y_val = validation_images(train)
        return X_fit.reshape(len(X_fit), -1), y_fit, X_val.reshape(len(X_val), -1), y_val
    fit_rows, val_rows = _held_out(train)
    return (train.data[fit_rows], train.target[fit_rows],
            train.data[val_rows], train.target[val_rows])  # fmt: skip


def _held_out(train):
    """The rows of the fitting and of the held-out classes (40% of them) of a training half."""
    split = GroupShuffleSplit(n_splits=1, test_size=0.4, random_state=0)
    return next(split.split(train.target, groups=train.target))


def validation_images(train):
    """The class- *and* image-disjoint validation split of a ``make_composite_digits`` training
    half ``train``: ``X_fit, y_fit, X_val, y_val``, X images ``(n, 28, 28 d)`` in [0, 1].

    40% of the classes held out (``GroupShuffleSplit(test_size=0.4, random_state=0)``, classes
    as groups); the MNIST images of ``train`` cut into halves stratified by digit, every item of
    the fitting classes redrawn from the first (same class, same digits), every item of the
    held-out classes from the second, as the test half is built.
    """
    rng = np.random.default_rng(0)
    images, digits = load_mnist(return_X_y=True)
    pool = np.unique(train.source_indices)
    halves = {}
    for digit in range(10):
        rows = rng.permutation(pool[digits[pool] == digit])
        halves[0, digit], halves[1, digit] = np.array_split(rows, 2)
    parts = []
    for half, rows in enumerate(_held_out(train)):
        item_digits = train.digits[rows]
        sources = np.empty_like(item_digits)
        for digit in range(10):
            where = item_digits == digit
            sources[where] = rng.choice(halves[half, digit], size=int(where.sum()))
        side = images.reshape(-1, 28, 28)[sources]  # (n, n_digits, 28, 28)
        parts += [side.transpose(0, 2, 1, 3).reshape(rows.shape[0], 28, -1), train.target[rows]]
    return tuple(parts)


# ------------------------------------------------------------------------------ extreme labels
# Generated rows: make_extreme_classification's presets, sized for a 2-core machine (a fifth of
# the rows for test), and the smoke run's sizes.
GENERATED = {
    "amazoncat-13k": dict(preset="amazoncat-13k", n_features=50_000, n_samples=40_000),
    "wikilshtc-325k": dict(
        preset="wikilshtc-325k", n_labels=100_000, n_features=200_000, n_samples=40_000
    ),
    "amazon-670k": dict(preset="amazon-670k", n_samples=40_000),
}
QUICK_GENERATED = {
    "amazoncat-13k": dict(preset="amazoncat-13k", n_features=5_000, n_samples=4_000),
    "wikilshtc-325k": dict(
        preset="wikilshtc-325k", n_labels=5_000, n_features=8_000, n_samples=4_000
    ),  # fmt: skip
    "amazon-670k": dict(preset="amazon-670k", n_labels=20_000, n_samples=3_000),
}
# The Debian package indexes: the variable naming their folder (else shared/data's), file,
# label column, the characters that split a package's name into words, the escape character.
TEXT_LABELS = {
    "debtags": ("SKRANK_DEBTAGS", "debtags.tsv.gz", "tags", r"[-.]", None),
    "debian-suggests": (
        "SKRANK_DEBIAN_SUGGESTS", "debian-suggests.tsv.gz", "labels", r"[-.+]", "\\"
    ),
}  # fmt: skip
QUICK_ROWS = (4_000, 1_000)
XMC_DATA = (*TEXT_LABELS, "bibtex", "corel5k", *GENERATED)


def text_labels(name, quick=False):
    """debtags' or debian-suggests' rows: ``X_train, Y_train, X_test, Y_test``.

    One row a Debian package: TF-IDF of its name (split on ``-`` and ``.``, and ``+`` in
    debian-suggests) and its one-line description (the vocabulary of the training rows);
    labels: its tags (debtags) or the packages it recommends or suggests (debian-suggests), on
    the file's fixed split. ``Y_test`` has a column more for each label seen only in test rows,
    after the training labels: no method predicts it, so it counts as a miss. ``quick``: the
    first 4,000 training and 1,000 test rows. The files are read from ``$SKRANK_DEBTAGS``
    (debtags) or ``$SKRANK_DEBIAN_SUGGESTS``, else from the data set's folder of
    :data:`SHARED_DATA`.
    """
    import pandas as pd
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import MultiLabelBinarizer

    variable, file, column, separators, escape = TEXT_LABELS[name]
    path = Path(os.environ.get(variable) or SHARED_DATA / name) / file
    if not path.exists():
        raise FileNotFoundError(f"No {path}: set {variable} to the folder holding {file}.")
    table = pd.read_csv(
        path, sep="\t", quoting=csv.QUOTE_NONE, escapechar=escape, keep_default_na=False
    )
    text = table["package"].str.replace(separators, " ", regex=True) + " " + table["description"]
    labels = table[column].str.split(",")
    train, test = (table["split"] == "train").to_numpy(), (table["split"] == "test").to_numpy()
    if quick:
        train = train & (np.cumsum(train) <= QUICK_ROWS[0])
        test = test & (np.cumsum(test) <= QUICK_ROWS[1])
    seen = MultiLabelBinarizer().fit(labels[train]).classes_
    test_only = sorted({label for row in labels[test] for label in row}.difference(seen))
    binarizer = MultiLabelBinarizer(classes=[*seen, *test_only], sparse_output=True)
    binarizer.fit(labels[train | test])
    vectorizer = TfidfVectorizer().fit(text[train])
    return (
        vectorizer.transform(text[train]),
        binarizer.transform(labels[train])[:, : len(seen)].tocsr(),
        vectorizer.transform(text[test]),
        binarizer.transform(labels[test]).tocsr(),
    )


def xmc_split(name, quick=False):
    """An extreme-classification split as CSR matrices: ``X_train, Y_train, X_test, Y_test``.

    ``name``: one of :data:`XMC_DATA`. Bibtex and Corel5k: word counts (SNMClassifier's input
    normalisation weights them itself; the peers read :func:`tfidf` of them).
    """
    if name in TEXT_LABELS:
        parts = text_labels(name, quick)
    elif name in ("bibtex", "corel5k"):
        loader = {"bibtex": load_bibtex, "corel5k": load_corel5k}[name]
        train, test = loader(subset="train"), loader(subset="test")
        parts = train.data, train.target, test.data, test.target
    elif name in GENERATED:
        X, Y = make_extreme_classification(
            **(QUICK_GENERATED if quick else GENERATED)[name], random_state=0
        )
        n_train = X.shape[0] - X.shape[0] // 5
        parts = X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]
    else:
        raise ValueError(f"No extreme-classification data {name!r}: {list(XMC_DATA)}.")
    parts = [sp.csr_matrix(part) for part in parts]
    for part in parts:
        part.sort_indices()  # napkinXC reads unsorted rows wrongly (and crashes)
    return tuple(parts)


def tfidf(X_train, *others):
    """Sublinear TF-IDF rows of count matrices, fitted on ``X_train``: what the peers of the
    extreme-classification benchmarks read for Bibtex and Corel5k."""
    from sklearn.feature_extraction.text import TfidfTransformer

    fitted = TfidfTransformer(sublinear_tf=True).fit(X_train)
    return [fitted.transform(X).tocsr() for X in (X_train, *others)]
