"""Extreme classification data: a generator with the statistics of the benchmark data sets as
parameters, and the text format of the Extreme Classification Repository."""

import io
import re
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.utils import check_random_state

from .._compat import Interval, StrOptions, validate_params
from ..exceptions import ExtremeFormatError
from ..utils._validation import canonical_csr
from ._io import DECOMPRESSION_ERRORS, file_name, is_path, open_binary
from ._synthetic import _draw_zipf

# The data sets of Table 1 of Reddi et al. (2019): features, labels, average labels per row and
# rows per label (the number of rows follows). Non-zeros per row are not in the table: the
# generator's default is used for every preset.
EXTREME_PRESETS = {
    "amazoncat-13k": dict(
        n_features=203_882, n_labels=13_330, labels_per_row=5.04, rows_per_label=448.57
    ),
    "wikilshtc-325k": dict(
        n_features=1_617_899, n_labels=325_056, labels_per_row=3.19, rows_per_label=17.46
    ),
    "amazon-670k": dict(
        n_features=135_909, n_labels=670_091, labels_per_row=5.45, rows_per_label=3.99
    ),
    "amazon-3m": dict(
        n_features=337_067, n_labels=2_812_281, labels_per_row=36.17, rows_per_label=31.64
    ),
}

_DEFAULTS = dict(
    n_features=50_000,
    n_labels=10_000,
    labels_per_row=2.0,
    rows_per_label=10.0,
    nonzeros_per_row=75.0,
    label_exponent=1.0,
    cluster_share=0.5,
    cluster_size=10,
    words_per_label=40,
    signal=0.4,
)


@validate_params(
    {
        "preset": [StrOptions(set(EXTREME_PRESETS)), None],
        "n_samples": [Interval(Integral, 1, None, closed="left"), None],
        "n_features": [Interval(Integral, 2, None, closed="left"), None],
        "n_labels": [Interval(Integral, 2, None, closed="left"), None],
        "nonzeros_per_row": [Interval(Real, 1, None, closed="left"), None],
        "labels_per_row": [Interval(Real, 1, None, closed="left"), None],
        "rows_per_label": [Interval(Real, 0, None, closed="neither"), None],
        "label_exponent": [Interval(Real, 0, None, closed="left"), None],
        "cluster_share": [Interval(Real, 0, 1, closed="both"), None],
        "cluster_size": [Interval(Integral, 1, None, closed="left"), None],
        "words_per_label": [Interval(Integral, 1, None, closed="left"), None],
        "signal": [Interval(Real, 0, 1, closed="both"), None],
        "features": [StrOptions({"tfidf", "counts"})],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_extreme_classification(
    preset=None,
    *,
    n_samples=None,
    n_features=None,
    n_labels=None,
    nonzeros_per_row=None,
    labels_per_row=None,
    rows_per_label=None,
    label_exponent=None,
    cluster_share=None,
    cluster_size=None,
    words_per_label=None,
    signal=None,
    features="tfidf",
    random_state=None,
):
    """Draw a sparse multilabel problem shaped like extreme classification data.

    Every statistic of the data is a parameter: the numbers of features and labels, the mean
    numbers of non-zeros and of labels per row, the mean number of rows per label (which sets
    the number of rows), the power law of the label frequencies and the share of a row's
    labels drawn from one cluster of related labels. ``preset`` takes the sizes of a data set
    of the SNM paper's Table 1 (any parameter given overrides the preset's value; with
    ``n_labels`` alone, ``n_samples`` follows from the preset's rows per label).

    Construction (a topic model of bag-of-words text). Labels are ranked in a random order and
    label of rank ``r`` has popularity proportional to ``r ** -label_exponent``; consecutive
    label indices form clusters of ``cluster_size`` related labels. A row has ``1 +
    Poisson(labels_per_row - 1)`` distinct labels: the first by popularity, each other one from
    the first label's cluster with probability ``cluster_share`` (uniformly), else by
    popularity. Each label has a topic of ``words_per_label`` features with Dirichlet(1)
    weights, and related labels share half of their topic with their cluster. A row has ``1 +
    Poisson(nonzeros_per_row - 1)`` distinct features, drawn as words: with probability
    ``signal`` from the topic of one of its labels, else from a background distribution over
    all features (``P(j)`` proportional to ``1 / (j + 10)``); the count of each feature is how
    often it was drawn among the first draws that give the row its distinct features. Rows that
    run out of distinct words keep fewer non-zeros (rare unless ``nonzeros_per_row`` nears
    ``n_features``); a row's labels likewise, when a cluster is smaller than its label count.

    Memory: ``O(nnz)`` for the data and ``O(n_labels * words_per_label)`` for the topics.

    Parameters
    ----------
    preset : {"amazoncat-13k", "wikilshtc-325k", "amazon-670k", "amazon-3m"} or None, \
default=None
        Sizes of a data set of Reddi et al.'s Table 1: its features, labels, labels per row and
        rows per label (so its number of rows). None: the defaults below.
    n_samples : int or None, default=None
        Number of rows. None: ``round(n_labels * rows_per_label / labels_per_row)``.
    n_features : int or None, default=None
        Number of features (50,000 without a preset).
    n_labels : int or None, default=None
        Number of labels ``K`` (10,000 without a preset).
    nonzeros_per_row : float or None, default=None
        Mean number of non-zero features of a row (75).
    labels_per_row : float or None, default=None
        Mean number of labels of a row (2.0 without a preset).
    rows_per_label : float or None, default=None
        Mean number of rows of a label, used to set ``n_samples`` when it is None (10.0
        without a preset).
    label_exponent : float or None, default=None
        Exponent ``a`` of the power law of label popularity, ``r ** -a`` for the label of rank
        ``r`` (1.0: Zipf's law; 0: uniform).
    cluster_share : float in [0, 1] or None, default=None
        Probability that a label after a row's first is drawn from the first label's cluster
        (0.5).
    cluster_size : int or None, default=None
        Labels per cluster of related labels (10).
    words_per_label : int or None, default=None
        Features of a label's topic (40).
    signal : float in [0, 1] or None, default=None
        Probability that a word comes from the topics of the row's labels rather than the
        background (0.4).
    features : {"tfidf", "counts"}, default="tfidf"
        ``"tfidf"``: sublinear TF-IDF weights with rows of unit norm (scikit-learn's
        ``TfidfTransformer(sublinear_tf=True)``), as the Extreme Classification Repository's
        bag-of-words features; ``"counts"``: the word counts.
    random_state : int, RandomState instance or None, default=None
        Seed of the draws.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
        Features, with sorted column indices.
    Y : scipy.sparse.csr_matrix of shape (n_samples, n_labels), int8
        Label indicator.

    Examples
    --------
    >>> from skrank.datasets import make_extreme_classification
    >>> X, Y = make_extreme_classification(n_labels=1000, n_features=5000, random_state=0)
    >>> X.shape, Y.shape
    ((5000, 5000), (5000, 1000))
    >>> X, Y = make_extreme_classification("amazon-670k", n_labels=20_000, random_state=0)
    >>> X.shape, Y.shape
    ((14642, 135909), (14642, 20000))
    """
    given = dict(
        n_features=n_features,
        n_labels=n_labels,
        nonzeros_per_row=nonzeros_per_row,
        labels_per_row=labels_per_row,
        rows_per_label=rows_per_label,
        label_exponent=label_exponent,
        cluster_share=cluster_share,
        cluster_size=cluster_size,
        words_per_label=words_per_label,
        signal=signal,
    )
    p = {**_DEFAULTS, **EXTREME_PRESETS.get(preset, {})}
    p.update({name: value for name, value in given.items() if value is not None})
    if n_samples is None:
        n_samples = max(1, int(round(p["n_labels"] * p["rows_per_label"] / p["labels_per_row"])))
    if p["words_per_label"] > p["n_features"]:
        raise ValueError(
            f"words_per_label={p['words_per_label']} exceeds n_features={p['n_features']}: a "
            "topic is a set of distinct features."
        )
    rng = check_random_state(random_state)
    n_labels, n_features = p["n_labels"], p["n_features"]

    # Labels: popularity by a random ranking; clusters of consecutive indices.
    ranking = rng.permutation(n_labels)
    wanted_labels = 1 + rng.poisson(p["labels_per_row"] - 1, size=n_samples)
    n_candidates = 2 * wanted_labels + 2
    candidate_rows = np.repeat(np.arange(n_samples), n_candidates)
    starts = np.cumsum(n_candidates) - n_candidates
    labels = ranking[_draw_zipf(n_labels, p["label_exponent"], candidate_rows.size, rng)]
    first = labels[starts]
    from_cluster = rng.random_sample(labels.size) < p["cluster_share"]
    from_cluster[starts] = False
    cluster_start = (first // p["cluster_size"]) * p["cluster_size"]
    cluster_start = np.repeat(cluster_start, n_candidates)[from_cluster]
    cluster_width = np.minimum(p["cluster_size"], n_labels - cluster_start)
    labels[from_cluster] = cluster_start + (
        rng.random_sample(cluster_start.size) * cluster_width
    ).astype(np.int64)
    label_rows, labels, _ = _first_distinct(candidate_rows, labels, wanted_labels, n_labels)
    Y = sp.csr_matrix(
        (np.ones(labels.size, dtype=np.int8), (label_rows, labels)), shape=(n_samples, n_labels)
    )

    # Words: topics shared in part within clusters, then per row words from topics or background.
    topics = _draw_topics(n_labels, n_features, p["words_per_label"], p["cluster_size"], rng)
    weights = np.cumsum(rng.gamma(1.0, size=topics.shape), axis=1)
    weights /= weights[:, -1:]
    wanted_words = 1 + rng.poisson(p["nonzeros_per_row"] - 1, size=n_samples)
    n_draws = 2 * wanted_words + 10
    word_rows = np.repeat(np.arange(n_samples), n_draws)
    words = _draw_background(n_features, word_rows.size, rng)
    topical = rng.random_sample(word_rows.size) < p["signal"]
    rows = word_rows[topical]
    row_label_counts = np.diff(Y.indptr)
    chosen = Y.indices[Y.indptr[rows] + (rng.random_sample(rows.size) * row_label_counts[rows])
                       .astype(np.int64)]  # fmt: skip
    shifted = (weights + np.arange(n_labels)[:, None]).ravel()
    flat = np.searchsorted(shifted, chosen + rng.random_sample(rows.size))
    words[topical] = topics.ravel()[np.minimum(flat, (chosen + 1) * topics.shape[1] - 1)]
    word_rows, words, counts = _first_distinct(word_rows, words, wanted_words, n_features)
    X = sp.csr_matrix(
        (counts.astype(np.float64), (word_rows, words)), shape=(n_samples, n_features)
    )
    X.sort_indices()
    if features == "tfidf":
        X = TfidfTransformer(sublinear_tf=True).fit_transform(X).tocsr()
        X.sort_indices()
    return X, Y.tocsr()


def _first_distinct(rows, values, wanted, n_values):
    """For each row, its first ``wanted[row]`` distinct values in order of drawing, and how often
    each was drawn up to the last kept draw (rows given in increasing order).

    Returns ``(rows, values, counts)`` of the kept entries, sorted by row and value.
    """
    keys = rows.astype(np.int64) * n_values + values
    _, first_index, inverse = np.unique(keys, return_index=True, return_inverse=True)
    is_first = np.zeros(keys.size, dtype=bool)
    is_first[first_index] = True
    # Rank of each first occurrence among its row's first occurrences, in drawing order.
    n_first = np.cumsum(is_first)
    row_starts = np.searchsorted(rows, np.arange(rows.max(initial=-1) + 1))
    rank = n_first - 1 - np.concatenate([[0], n_first])[row_starts][rows]
    keep_first = is_first & (rank < wanted[rows])
    # A draw counts if its value is kept and it comes no later than the row's last kept draw.
    kept_value = keep_first[first_index][inverse]
    last_kept = np.full(wanted.size, -1)
    np.maximum.at(last_kept, rows[keep_first], np.flatnonzero(keep_first))
    counted = kept_value & (np.arange(keys.size) <= last_kept[rows])
    kept_keys, counts = np.unique(keys[counted], return_counts=True)
    return kept_keys // n_values, kept_keys % n_values, counts


def _draw_topics(n_labels, n_features, words_per_label, cluster_size, rng):
    """Each label's topic: half of it its cluster's shared words, half its own (with repeats
    allowed across the halves, which the drawing of distinct words absorbs)."""
    shared = words_per_label // 2
    n_clusters = -(-n_labels // cluster_size)
    cluster_words = rng.randint(n_features, size=(n_clusters, shared))
    own = rng.randint(n_features, size=(n_labels, words_per_label - shared))
    return np.hstack([cluster_words[np.arange(n_labels) // cluster_size], own])


def _draw_background(n_features, size, rng):
    """Features drawn with probabilities proportional to ``1 / (j + 10)``."""
    weights = 1.0 / (np.arange(n_features) + 10.0)
    cumulative = np.cumsum(weights)
    cumulative /= cumulative[-1]
    return np.minimum(np.searchsorted(cumulative, rng.random_sample(size)), n_features - 1)


# ---------------------------------------------------------------------- repository text format
_HEADER = re.compile(rb"^\s*(\d+)\s+(\d+)\s+(\d+)\s*$")
# scikit-learn's svmlight parser holds a feature index in a C int.
_MAX_EXTREME_SIZE = np.iinfo(np.int32).max


def load_extreme_file(file, *, dtype=np.float64):
    """Read a data file of the Extreme Classification Repository.

    The format: a header line ``n_points n_features n_labels``, then one line per row,
    ``l1,l2,... f:v f:v ...`` with 0-based label and feature indices, feature indices
    increasing; a row without labels starts with a space. The rows are parsed by scikit-learn's
    svmlight reader (compiled, no Python loop per row; memory ``O(nnz)``); gzip-compressed files
    are read as well.

    What is read, exactly: the header holds three non-negative integers (ASCII digits), the
    numbers of features and labels at most ``2**31 - 1``. On the other lines, ``#`` starts a
    comment, tokens are separated by ASCII whitespace (so ``\\r\\n`` line ends are read too),
    and lines without tokens are skipped. A row's first token, unless it holds a ``:``, is its
    comma-separated labels: numbers with an integer value in ``[0, n_labels)``, distinct. Every
    other token is a feature ``index:value``: an integer index in ``[0, n_features)``,
    increasing along the row, and a value finite in ``dtype`` (explicit zeros are dropped).
    Numbers are read as Python's ``int`` and ``float`` read them. The file holds ``n_points``
    rows.

    Parameters
    ----------
    file : str, path-like or binary file-like
        The file (a path, or an object opened in binary mode).
    dtype : numpy dtype, default=np.float64
        Dtype of the feature values.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_points, n_features)
        Features.
    Y : scipy.sparse.csr_matrix of shape (n_points, n_labels), int8
        Label indicator.

    Raises
    ------
    ExtremeFormatError
        For an empty file, a malformed header, a malformed row (a token that is neither
        labels nor a feature, a label or feature index out of the header's range, unsorted or
        duplicate feature indices, a duplicate label, a value that is not finite), or a number
        of rows other than the header's; the message names the file and the line (a file object
        that cannot seek names the row instead of the line).

    Examples
    --------
    >>> import io
    >>> from skrank.datasets import load_extreme_file
    >>> text = b"2 5 3\\n0,2 1:0.5 4:1.0\\n 0:2.0\\n"
    >>> X, Y = load_extreme_file(io.BytesIO(text))
    >>> X.toarray()
    array([[0. , 0.5, 0. , 0. , 1. ],
           [2. , 0. , 0. , 0. , 0. ]])
    >>> Y.toarray()
    array([[1, 0, 1],
           [0, 0, 0]], dtype=int8)
    """
    name = file_name(file)
    start = None if is_path(file) or not file.seekable() else file.tell()
    dtype = np.dtype(dtype)
    try:
        with open_binary(file) as stream:
            sizes = _read_header(stream.readline(), name)
            try:
                X, label_sets, query_ids = load_svmlight_file(
                    stream,
                    n_features=max(sizes[1], 1),  # the parser needs one; a 0 is checked below
                    dtype=dtype,
                    multilabel=True,
                    zero_based=True,
                    query_id=True,
                )
            except (ValueError, OverflowError) as error:
                raise _located_error(file, name, start, sizes, dtype, str(error)) from error
    except DECOMPRESSION_ERRORS as error:
        raise ExtremeFormatError(f"{name}: damaged gzip compression ({error}).") from error
    n_points, n_features, n_labels = sizes
    lengths = np.fromiter(map(len, label_sets), dtype=np.int64, count=len(label_sets))
    labels = np.fromiter(
        (label for labels in label_sets for label in labels),
        dtype=np.float64,
        count=int(lengths.sum()),
    )
    del label_sets
    entry_rows = np.repeat(np.arange(X.shape[0]), lengths)
    invalid = (labels < 0) | (labels >= n_labels) | (labels != np.round(labels))
    order = np.lexsort((labels, entry_rows))
    invalid[order[1:]] |= (np.diff(labels[order]) == 0) & (np.diff(entry_rows[order]) == 0)
    bad_entries = ~np.isfinite(X.data) | (X.indices >= n_features)
    bad_rows = np.concatenate(
        [entry_rows[invalid], X.indptr.searchsorted(np.flatnonzero(bad_entries), side="right") - 1]
    )
    # svmlight reads a row's first feature "qid:..." as a query id, which this format has not.
    if bad_rows.size or query_ids.size:
        where = f"row {bad_rows.min() + 1}" if bad_rows.size else "a feature 'qid:...'"
        raise _located_error(file, name, start, sizes, dtype, f"{where} is malformed.")
    if X.shape[0] != n_points:
        raise ExtremeFormatError(
            f"{name}, line 1: the header announces {n_points} rows but the file has {X.shape[0]}."
        )
    X = X[:, :n_features] if n_features < X.shape[1] else X
    X.eliminate_zeros()
    Y = sp.csr_matrix(
        (
            np.ones(labels.size, dtype=np.int8),
            labels.astype(np.int64),
            np.r_[0, np.cumsum(lengths)],
        ),
        shape=(n_points, n_labels),
    )
    Y.sort_indices()
    return X, Y


def _read_header(header, name):
    """``(n_points, n_features, n_labels)`` of the header line, or an ExtremeFormatError."""
    if not header:
        raise ExtremeFormatError(f"{name} is empty: expected a header line.")
    match = _HEADER.match(header)
    if match is None:
        raise ExtremeFormatError(
            f"{name}, line 1: expected the header 'n_points n_features n_labels', got "
            f"{header[:80]!r}."
        )
    sizes = tuple(int(v) for v in match.groups())
    if max(sizes[1:]) > _MAX_EXTREME_SIZE:
        raise ExtremeFormatError(
            f"{name}, line 1: the header announces {sizes[1]} features and {sizes[2]} labels; "
            f"at most {_MAX_EXTREME_SIZE} of each can be read."
        )
    return sizes


def _located_error(file, name, start, sizes, dtype, fallback):
    """The first malformed line of the file, as an ExtremeFormatError; read again line by line,
    on the error path only (a stream that cannot be read twice gets ``fallback``)."""
    if is_path(file) or start is not None:
        if start is not None:
            file.seek(start)
        with open_binary(file) as stream:
            for number, line in enumerate(stream, start=1):
                problem = _line_problem(line, *sizes[1:], dtype) if number > 1 else None
                if problem:
                    return ExtremeFormatError(f"{name}, line {number}: {problem}")
    return ExtremeFormatError(f"{name}: {fallback}")


def _line_problem(line, n_features, n_labels, dtype):
    """What makes a line of the file's body malformed, or None: the rules of
    :func:`load_extreme_file`, checked token by token."""
    tokens = line.split(b"#", 1)[0].split()
    if not tokens:
        return None
    label_tokens, features = (
        ([], tokens) if b":" in tokens[0] else (tokens[0].split(b","), tokens[1:])
    )
    seen = set()
    for token in label_tokens:
        shown = token.decode(errors="replace")
        try:
            label = float(token)
        except ValueError:
            return f"label {shown!r} is not a number."
        if not (0 <= label < n_labels and label == round(label)):
            return f"label {shown} is not an integer in [0, {n_labels}) (n_labels of the header)."
        if label in seen:
            return f"label {shown} appears twice."
        seen.add(label)
    previous = -1
    for token in features:
        shown = token.decode(errors="replace")
        index, colon, value = token.partition(b":")
        try:
            index = int(index) if colon else None
        except ValueError:
            index = None
        if index is None:
            return f"feature {shown!r} is not 'index:value'."
        try:
            value = float(value)
        except ValueError:
            return f"feature {shown!r} has no numeric value."
        with np.errstate(over="ignore"):
            if not np.isfinite(dtype.type(value)):
                return f"feature {shown!r} has a value that is not finite in {dtype}."
        if not 0 <= index < n_features:
            return f"feature index {index} is out of range [0, {n_features}) (the header's)."
        if index == previous:
            return f"feature {index} appears twice."
        if index < previous:
            return f"feature indices are not increasing ({previous}, then {index})."
        previous = index
    return None


def dump_extreme_file(X, Y, file):
    """Write ``(X, Y)`` in the Extreme Classification Repository's text format.

    The inverse of :func:`load_extreme_file`: ``load_extreme_file(dump_extreme_file(X, Y, f))``
    gives back ``X`` (values written with 17 significant digits, so float64 round-trips
    exactly) and ``Y``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Features.
    Y : {array-like, sparse matrix} of shape (n_samples, n_labels)
        0/1 label indicator.
    file : str, path-like or binary file-like
        Destination (a path, or an object opened in binary mode).
    """
    X = canonical_csr(X, dtype=np.float64)
    Y = canonical_csr(Y, drop_zeros=True)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows and Y has {Y.shape[0]}; they must agree.")
    if Y.nnz and not np.all(Y.data == 1):
        raise ValueError("Y must be a 0/1 label indicator.")
    header = f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}\n".encode()
    if is_path(file):
        with open(file, "wb") as stream:
            _write_extreme_rows(stream, header, X, Y)
    else:
        _write_extreme_rows(file, header, X, Y)


def _write_extreme_rows(stream, header, X, Y, rows_per_chunk=10_000):
    stream.write(header)
    for start in range(0, X.shape[0], rows_per_chunk):
        stop = min(start + rows_per_chunk, X.shape[0])
        stream.write(_extreme_lines(X[start:stop], Y[start:stop]).encode())


def _extreme_lines(X, Y):
    """The text of the rows of ``(X, Y)``: the tokens of every row with their separators, put in
    order by one sort and joined once (no Python loop per row)."""
    n_rows = X.shape[0]
    label_rows = np.repeat(np.arange(n_rows), np.diff(Y.indptr))
    feature_rows = np.repeat(np.arange(n_rows), np.diff(X.indptr))
    # Each token carries its separator: "," between labels, " " between features, and a
    # newline after a row's last feature. A row without features ends after its labels; one
    # without labels or features is written " 0:0" (an empty line would be skipped).
    label_last = np.zeros(Y.nnz, dtype=bool)
    label_last[Y.indptr[1:][np.diff(Y.indptr) > 0] - 1] = True
    feature_last = np.zeros(X.nnz, dtype=bool)
    feature_last[X.indptr[1:][np.diff(X.indptr) > 0] - 1] = True
    labels = np.char.add(np.char.mod("%d", Y.indices), np.where(label_last, "", ","))
    features = np.char.add(
        np.char.add(np.char.mod("%d", X.indices), ":"),
        np.char.add(np.char.mod("%.17g", X.data), np.where(feature_last, "\n", " ")),
    )
    has_labels, has_features = np.diff(Y.indptr) > 0, np.diff(X.indptr) > 0
    spaces = np.where(has_features, " ", np.where(has_labels, "\n", " 0:0\n"))
    tokens = np.concatenate([labels.astype(object), spaces.astype(object), features.astype(object)])
    part = np.repeat([0, 1, 2], [Y.nnz, n_rows, X.nnz])
    rows = np.concatenate([label_rows, np.arange(n_rows), feature_rows])
    order = np.lexsort((np.arange(tokens.size), part, rows))
    return "".join(tokens[order])


def load_extreme_split(file):
    """Read a split file of the Extreme Classification Repository (``*_trSplit.txt``,
    ``*_tstSplit.txt``): one column per split, each row a 1-based row number of the data file.

    Parameters
    ----------
    file : str, path-like or binary file-like
        The split file.

    Returns
    -------
    rows : ndarray of shape (n_rows, n_splits), int64
        0-based row numbers, one column per split.
    """
    name = file_name(file)
    with open_binary(file) as stream:
        text = stream.read()
    if not text.strip():
        raise ExtremeFormatError(f"{name} is empty.")
    try:
        rows = np.loadtxt(io.BytesIO(text), dtype=np.int64, ndmin=2)
    except ValueError as error:
        raise ExtremeFormatError(f"{name}: {error}") from error
    if rows.min() < 1:
        raise ExtremeFormatError(f"{name}: row numbers are 1-based; found {rows.min()}.")
    return rows - 1
