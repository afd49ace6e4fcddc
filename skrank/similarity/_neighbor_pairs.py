"""Local pairs: each item with its nearest neighbours of the same class, or of other classes.

Large-margin metric learners (LMNN, Weinberger & Saul, 2009) constrain only the pairs that matter
to a nearest-neighbour rule: each item with its ``k`` nearest same-class items in the input
metric (its *target neighbours*), and each item with the nearby items of other classes (its
*impostors*). :class:`~skrank.MMC` can use them as its similar set (``positives="nearest"``) and
its dissimilar set (``negatives="nearest"``): Xing et al.'s criterion with other pair sets, so
its solver and certificate are unchanged.
"""

import numpy as np
from sklearn.neighbors import NearestNeighbors

from ..sampling import PairSample
from ..sampling._pairs import class_codes
from ..utils._docstrings import fill_docs
from ._pair_statistics import PAIR_STATISTICS_DOCS

__all__ = ["nearest_pairs"]


@fill_docs(PAIR_STATISTICS_DOCS)
def nearest_pairs(X, y, n_neighbors, *, same_class=True):
    """Each item with its ``n_neighbors`` nearest items of its class (or of other classes).

    Neighbours are found in the Euclidean metric of ``X``, an item is never its own neighbour,
    and a class with fewer than ``n_neighbors + 1`` items gives each of its items all the others
    (``same_class=True``; ``n_neighbors`` items of the other classes at most otherwise). The
    pairs are unordered and counted once (``{i, j}`` is one pair when ``j`` is a neighbour of
    ``i``, of ``j``, or both), with equal weights summing to one.

    Parameters
    ----------
    {items}
    {class_labels}
    n_neighbors : int
        Number of neighbours of each item.
    same_class : bool, default=True
        Neighbours among the items of the same class (target neighbours) or among the items of
        the other classes (impostors).

    Returns
    -------
    sample : PairSample
        Pairs ``first < second``, sorted, with weights ``1 / n_pairs``.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.similarity._neighbor_pairs import nearest_pairs
    >>> X = np.array([[0.0], [1.0], [3.0], [0.5], [4.0]])
    >>> pairs = nearest_pairs(X, [0, 0, 0, 1, 1], n_neighbors=1)
    >>> pairs.first, pairs.second
    (array([0, 1, 3]), array([1, 2, 4]))
    """
    codes, counts = class_codes(y, negatives=not same_class)
    X = np.asarray(X, dtype=np.float64)
    first, second = [], []
    for label in range(counts.shape[0]):
        members = np.flatnonzero(codes == label)
        if same_class:
            candidates, k = members, min(n_neighbors, members.shape[0] - 1)
            if k == 0:
                continue
            # kneighbors() with no query excludes each item itself (even a duplicate's copy).
            neighbors = NearestNeighbors(n_neighbors=k).fit(X[candidates]).kneighbors()[1]
        else:
            candidates = np.flatnonzero(codes != label)
            k = min(n_neighbors, candidates.shape[0])
            neighbors = NearestNeighbors(n_neighbors=k).fit(X[candidates]).kneighbors(X[members])[1]
        first.append(np.repeat(members, k))
        second.append(candidates[neighbors.ravel()])
    first, second = np.concatenate(first), np.concatenate(second)
    pairs = np.unique(np.stack([np.minimum(first, second), np.maximum(first, second)]), axis=1)
    return PairSample(pairs[0], pairs[1], np.full(pairs.shape[1], 1.0 / pairs.shape[1]))
