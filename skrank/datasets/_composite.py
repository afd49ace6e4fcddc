"""Composite digits: many long-tailed classes built from the shipped MNIST images."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch, check_random_state

from .._compat import Interval, StrOptions, validate_params
from ._real import load_mnist

_DIGIT_SIDE = 28


def _long_tailed_sizes(n_samples, n_classes, exponent, min_size, max_size=None):
    """Class sizes proportional to ``rank ** -exponent`` (rank 1, 2, ...), at least
    ``min_size`` and at most ``max_size`` each, summing to ``n_samples`` exactly (largest
    remainders).

    The classes a share would take beyond ``max_size`` hold ``max_size`` items, and the others
    share the rest in the same proportions (the largest ``k`` classes are capped, with ``k``
    the fewest for which the next class's share fits).
    """
    weights = np.arange(1, n_classes + 1, dtype=float) ** -exponent
    n_capped = 0
    if max_size is not None:
        free = n_samples - np.arange(n_classes) * max_size - np.arange(n_classes, 0, -1) * min_size
        rest = np.cumsum(weights[::-1])[::-1]  # weights of the classes from rank k + 1 on
        fits = min_size + free * weights / rest <= max_size
        n_capped = int(np.argmax(fits))  # fits at k = n_classes - 1 when sizes can sum up
    weights = weights[n_capped:]
    spare = n_samples - n_capped * (max_size or 0) - weights.shape[0] * min_size
    share = spare * weights / weights.sum()
    sizes = np.floor(share).astype(np.int64)
    # Ties of the remainders go to the larger class (stable sort on the rank order).
    remainder_order = np.argsort(-(share - sizes), kind="stable")
    sizes[remainder_order[: spare - sizes.sum()]] += 1
    return np.concatenate([np.full(n_capped, max_size or 0, dtype=np.int64), sizes + min_size])


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_digits": [Interval(Integral, 1, 4, closed="both")],
        "n_classes": [Interval(Integral, 2, None, closed="left"), None],
        "tail_exponent": [Interval(Real, 0, None, closed="left")],
        "min_class_size": [Interval(Integral, 2, None, closed="left")],
        "max_class_size": [Interval(Integral, 2, None, closed="left"), None],
        "subset": [StrOptions({"train", "test", "all"})],
        "return_X_y": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_composite_digits(
    n_samples=10_000,
    *,
    n_digits=2,
    n_classes=None,
    tail_exponent=0.5,
    min_class_size=4,
    max_class_size=None,
    subset="all",
    return_X_y=False,
    random_state=None,
):
    """Images of ``n_digits`` MNIST digits side by side: many classes with long-tailed sizes.

    A class is a sequence of ``n_digits`` digits (class ``37`` shows a 3 then a 7); an item of
    the class places one MNIST image of each of its digits side by side, each drawn at random
    among the 10,000 shipped images (:func:`load_mnist`) of that digit. With ``n_digits=3``
    there are up to 1,000 classes. The class sizes are long-tailed as in retrieval data
    (Stanford Online Products, iNaturalist): the class of size rank ``r`` (1 for the largest)
    holds ``min_class_size`` items plus a share of the rest proportional to
    ``r ** -tail_exponent``, at most ``max_class_size`` (the largest classes are then capped
    and the others share what they leave in the same proportions); which class gets which
    rank is random.

    **Class-disjoint halves.** For retrieval of classes never seen in training, ``subset``
    selects one of two halves of the same draw: the classes of odd size rank (1, 3, 5, ...)
    form ``"train"`` and those of even rank ``"test"``, so the halves share no class and have
    the same tail; their items are moreover built from disjoint halves of the MNIST images
    (stratified by digit), so no test pixel is seen in training. ``"all"`` returns both.
    Every ``subset`` of one ``random_state`` comes from the same draw.

    Parameters
    ----------
    n_samples : int, default=10_000
        Number of items of the whole draw (both halves).
    n_digits : int, default=2
        Digits per image (1 to 4); images are ``28 x 28 n_digits`` pixels.
    n_classes : int or None, default=None
        Number of classes, at most ``10 ** n_digits``; None uses all ``10 ** n_digits`` digit
        sequences, else as many distinct sequences drawn at random.
    tail_exponent : float, default=0.5
        Exponent of the size decay; 0 gives classes of equal size (up to one item). With 100
        classes of 10,000 items, 0.5 gives sizes from 520 down to 56, and 1 from 1,855 to 23.
    min_class_size : int, default=4
        Items of every class at least (at least 2, so every item has a positive).
    max_class_size : int or None, default=None
        Items of every class at most; None: no cap. With 1,000 classes of 35,000 items, tail
        exponent 0.5 and ``min_class_size=10``, 300 caps the largest class (415 items
        uncapped) and gives sizes from 300 down to 23, 35 on average.
    subset : {"all", "train", "test"}, default="all"
        Which classes to return (see above).
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.
    random_state : int, RandomState instance or None, default=None
        Seed of the classes, their sizes and the images drawn; pass an int for reproducible
        output.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data``, ndarray of float32 of shape (n, 784 n_digits), the rows of ``images``
        flattened; ``images``, of shape (n, 28, 28 n_digits), grey levels in [0, 1];
        ``target``, ndarray of int64 of shape (n,), the class as the number its digits spell;
        ``digits``, of shape (n, n_digits), the digits of each item; ``source_indices``, of
        shape (n, n_digits), the row of :func:`load_mnist` each digit image comes from;
        ``subset``, of shape (n,), ``"train"`` or ``"test"``; ``target_names``, the classes
        of the returned items (sorted); ``DESCR``. Items are in random order.
    (data, target) : tuple if ``return_X_y`` is True

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.datasets import make_composite_digits
    >>> X, y = make_composite_digits(2_000, n_classes=40, subset="train", return_X_y=True,
    ...                              random_state=0)
    >>> X_test, y_test = make_composite_digits(2_000, n_classes=40, subset="test",
    ...                                        return_X_y=True, random_state=0)
    >>> X.shape[1], np.unique(y).shape[0], np.unique(y_test).shape[0]
    (1568, 20, 20)
    >>> bool(np.intersect1d(y, y_test).size == 0)
    True
    """
    n_sequences = 10**n_digits
    n_classes = n_sequences if n_classes is None else n_classes
    if n_classes > n_sequences:
        raise ValueError(
            f"n_classes={n_classes} exceeds the {n_sequences} sequences of n_digits={n_digits} "
            "digits; raise n_digits or lower n_classes."
        )
    if n_samples < n_classes * min_class_size:
        raise ValueError(
            f"n_samples={n_samples} cannot give {n_classes} classes min_class_size="
            f"{min_class_size} items each; use n_samples >= {n_classes * min_class_size}."
        )
    if max_class_size is not None and max_class_size < min_class_size:
        raise ValueError(
            f"max_class_size={max_class_size} is below min_class_size={min_class_size}."
        )
    if max_class_size is not None and n_samples > n_classes * max_class_size:
        raise ValueError(
            f"n_samples={n_samples} cannot fit in {n_classes} classes of at most max_class_size="
            f"{max_class_size} items; use n_samples <= {n_classes * max_class_size}."
        )
    rng = check_random_state(random_state)
    mnist_images, mnist_digits = load_mnist(return_X_y=True)
    mnist_images = mnist_images.reshape(-1, _DIGIT_SIDE, _DIGIT_SIDE)

    # Classes, by size rank (rank 1 first); odd ranks train, even ranks test.
    classes = rng.choice(n_sequences, size=n_classes, replace=False)
    sizes = _long_tailed_sizes(n_samples, n_classes, tail_exponent, min_class_size, max_class_size)
    class_half = np.arange(n_classes) % 2  # 0: train, 1: test
    # MNIST images split into halves stratified by digit: half h serves the classes of half h.
    image_half = np.empty(mnist_digits.shape[0], dtype=np.int64)
    pools = {}
    for digit in range(10):
        rows = rng.permutation(np.flatnonzero(mnist_digits == digit))
        image_half[rows[: rows.shape[0] // 2]] = 0
        image_half[rows[rows.shape[0] // 2 :]] = 1
        for half in (0, 1):
            pools[half, digit] = rows[image_half[rows] == half]

    place = 10 ** np.arange(n_digits - 1, -1, -1)
    digits = (classes[:, None] // place) % 10  # (n_classes, n_digits)
    item_class = np.repeat(np.arange(n_classes), sizes)
    item_digits = digits[item_class]
    sources = np.empty_like(item_digits)
    for position in range(n_digits):
        for half in (0, 1):
            for digit in range(10):
                where = (item_digits[:, position] == digit) & (class_half[item_class] == half)
                pool = pools[half, digit]
                sources[where, position] = pool[rng.randint(pool.shape[0], size=where.sum())]
    order = rng.permutation(item_class.shape[0])
    item_class, item_digits, sources = item_class[order], item_digits[order], sources[order]
    if subset != "all":
        keep = class_half[item_class] == (subset == "test")
        item_class, item_digits, sources = item_class[keep], item_digits[keep], sources[keep]

    images = mnist_images[sources].transpose(0, 2, 1, 3)
    images = np.ascontiguousarray(images.reshape(-1, _DIGIT_SIDE, _DIGIT_SIDE * n_digits))
    data = images.reshape(images.shape[0], -1)
    target = classes[item_class].astype(np.int64)
    if return_X_y:
        return data, target
    return Bunch(
        data=data,
        target=target,
        images=images,
        digits=item_digits.astype(np.int64),
        source_indices=sources.astype(np.int64),
        subset=np.where(class_half[item_class] == 1, "test", "train"),
        target_names=np.unique(target),
        DESCR=(
            f"Composite digits: {n_digits} MNIST digits side by side, {n_classes} long-tailed "
            f"classes (tail exponent {tail_exponent}); subset {subset!r}, {target.shape[0]} items."
        ),
    )
