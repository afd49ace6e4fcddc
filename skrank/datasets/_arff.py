"""Reader of sparse ARFF files with label attributes (the multi-label format of Mulan)."""

import io
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Integral
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

from .._compat import HasMethods, Interval, validate_params
from ._io import DECOMPRESSION_ERRORS, file_name, is_path, open_binary

_NUMERIC_TYPES = frozenset({"numeric", "real", "integer"})
# A quote, then escaped characters or characters other than the quote and a backslash, then the
# same quote.
_QUOTED_NAME = re.compile(r"""(['"])((?:\\.|(?!\1)[^\\])*)\1""")
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNQUOTED_NAME = re.compile(r"[^\s{]+")
_ENTRY = r"[^\s,]+\s+[^\s,]+"
_SPARSE_BODY = re.compile(rf"\s*(?:{_ENTRY}\s*(?:,\s*{_ENTRY}\s*)*)?")


@dataclass(frozen=True)
class _Attribute:
    """An ARFF attribute: its name and, for a nominal one, its declared values as numbers."""

    name: str
    nominal_values: tuple | None


class _Entries(NamedTuple):
    """The stored entries of the data section, one per (row, attribute) given in the file."""

    indices: np.ndarray  # attribute index of each entry
    values: np.ndarray
    rows: np.ndarray  # row of each entry
    line_numbers: np.ndarray  # line of each row
    n_rows: int


@validate_params(
    {
        "file": [str, os.PathLike, HasMethods("read")],
        "label_names": ["array-like", None],
        "n_labels": [Interval(Integral, 0, None, closed="left"), None],
    },
    prefer_skip_nested_validation=True,
)
def load_sparse_arff(file, *, label_names=None, n_labels=None):
    """Load an ARFF file into sparse feature and label-indicator matrices.

    Reads the sparse rows ``{index value, ...}`` of the multi-label ARFF files of Mulan (which
    ``scipy.io.arff`` cannot read), and dense comma-separated rows too. Attributes may be
    numeric (``numeric``, ``real``, ``integer``) or nominal with numeric values whose first
    declared value is 0, such as ``{0,1}`` (a sparse row omits an attribute at its first value).
    Lines starting with ``%`` are comments; names may be quoted.

    What is read, exactly: UTF-8 text (a byte order mark is dropped), lines ending in ``\\n``,
    ``\\r\\n`` or ``\\r``, each stripped of surrounding whitespace; empty lines and comments are
    skipped. The header's lines start with ``@relation``, ``@attribute`` or ``@data`` (in any
    case); a name is quoted (``'...'`` or ``"..."``, a backslash escaping the next character) or
    runs to the first whitespace or ``{``; attribute names are distinct. Each line after
    ``@data`` is a row: ``{index value, ...}`` with attribute indices increasing, or one value
    per attribute separated by commas; values may be quoted, ``?`` (missing) is refused. Numbers
    are read as Python's ``int`` and ``float`` read them; values are finite, a nominal
    attribute's are among its declared ones and a label's are 0 or 1. Zeros are not stored.

    Parameters
    ----------
    file : str, path-like or file object
        The ARFF file, plain or gzip-compressed (detected from its content), or an open text or
        binary file object (left open).
    label_names : sequence of str, default=None
        Names of the label attributes, which may be anywhere in the file; the columns of
        ``target`` follow this order. Give either this or ``n_labels``.
    n_labels : int, default=None
        Number of label attributes, taken as the last ``n_labels`` attributes (Mulan's layout).

    Returns
    -------
    bunch : :class:`~sklearn.utils.Bunch`
        With ``data``, the features as a CSR matrix of float64 of shape (n_samples, n_features);
        ``target``, the label-indicator CSR matrix of int64 of shape (n_samples, n_labels);
        ``feature_names`` and ``target_names``, arrays of str in column order; ``relation``, the
        name given by ``@relation`` (None if absent).

    Raises
    ------
    ValueError
        On a malformed or unsupported file (damaged gzip compression included), on a label
        value other than 0 or 1, on label names that are not attributes: the message names the
        file and, for a fault of one line, the line.

    Examples
    --------
    >>> import io
    >>> from skrank.datasets import load_sparse_arff
    >>> text = '''@relation toy
    ... @attribute f1 numeric
    ... @attribute f2 numeric
    ... @attribute sky {0,1}
    ... @data
    ... {0 2.5,2 1}
    ... {}
    ... '''
    >>> bunch = load_sparse_arff(io.StringIO(text), n_labels=1)
    >>> bunch.data.toarray()
    array([[2.5, 0. ],
           [0. , 0. ]])
    >>> bunch.target.toarray()
    array([[1],
           [0]])
    >>> bunch.target_names
    array(['sky'], dtype=object)
    """
    name = file_name(file, "the ARFF file")
    try:
        with _open_text(file) as text:
            numbered_lines = _numbered_lines(text)
            relation, attributes = _parse_header(numbered_lines)
            label_columns = _label_attribute_indices(attributes, label_names, n_labels)
            entries = _parse_data(numbered_lines, len(attributes))
        is_label = np.zeros(len(attributes), dtype=bool)
        is_label[label_columns] = True
        _check_entries(entries, attributes, is_label)
    except _FormatProblem as problem:
        where = name if problem.line_number is None else f"{name}, line {problem.line_number}"
        raise ValueError(f"{where}: {problem}") from None
    except DECOMPRESSION_ERRORS as error:
        raise ValueError(f"{name}: damaged gzip compression ({error}).") from error
    feature_columns = np.flatnonzero(~is_label)
    names = np.array([attribute.name for attribute in attributes], dtype=object)
    return Bunch(
        data=_select_columns(entries, feature_columns, len(attributes), np.float64),
        target=_select_columns(entries, label_columns, len(attributes), np.int64),
        feature_names=names[feature_columns],
        target_names=names[label_columns],
        relation=relation,
    )


@contextmanager
def _open_text(file):
    if not is_path(file) and hasattr(file, "read") and isinstance(file.read(0), str):
        yield file
        return
    with open_binary(file) as stream:
        # Bytes that are not UTF-8 are kept as lone surrogates, found line by line below; a
        # byte order mark is dropped.
        text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape")
        try:
            yield text
        finally:
            text.detach()


class _FormatProblem(Exception):
    """A fault of the file, at a line (1-based) or of the whole file (``line_number`` None)."""

    def __init__(self, message, line_number=None):
        super().__init__(message)
        self.line_number = line_number


def _syntax_error(line_number, message):
    return _FormatProblem(message, line_number)


def _numbered_lines(text):
    """``(line number, line)`` of each line, refusing a line that is not text (bytes that are
    not UTF-8, or a lone surrogate)."""
    for line_number, line in enumerate(text, start=1):
        if _SURROGATE.search(line):
            raise _syntax_error(line_number, "the line is not UTF-8 text")
        yield line_number, line


def _parse_header(numbered_lines):
    relation, attributes, seen = None, [], set()
    for line_number, raw_line in numbered_lines:
        line = raw_line.strip()
        if not line or line.startswith("%"):
            continue
        keyword, *rest = line.split(None, 1)
        keyword, rest = keyword.lower(), rest[0] if rest else ""
        if keyword == "@relation":
            relation = _split_name(rest, line_number)[0]
        elif keyword == "@attribute":
            name, declared_type = _split_name(rest, line_number)
            if name in seen:
                raise _syntax_error(line_number, f"duplicate attribute name {name!r}")
            seen.add(name)
            attributes.append(_parse_attribute(name, declared_type.strip(), line_number))
        elif keyword == "@data":
            if not attributes:
                raise _syntax_error(line_number, "@data before any @attribute")
            return relation, attributes
        else:
            raise _syntax_error(
                line_number, f"expected @relation, @attribute or @data, got {line[:40]!r}"
            )
    raise _FormatProblem("no @data section (the line before the data rows).")


def _split_name(text, line_number):
    """Split a possibly quoted name off the start of ``text``; return (name, rest)."""
    quoted = _QUOTED_NAME.match(text)
    if quoted:
        return re.sub(r"\\(.)", r"\1", quoted.group(2)), text[quoted.end() :]
    if text[:1] in ("'", '"'):
        raise _syntax_error(line_number, f"unterminated quote in {text[:40]!r}")
    unquoted = _UNQUOTED_NAME.match(text)
    if not unquoted:
        raise _syntax_error(line_number, "missing name")
    return unquoted.group(), text[unquoted.end() :]


def _unquote(token):
    if len(token) >= 2 and token[0] == token[-1] and token[0] in ("'", '"'):
        return token[1:-1]
    return token


def _parse_attribute(name, declared_type, line_number):
    if declared_type.lower() in _NUMERIC_TYPES:
        return _Attribute(name, None)
    if not (declared_type.startswith("{") and declared_type.endswith("}")):
        raise _syntax_error(
            line_number,
            f"unsupported type {declared_type!r} of attribute {name!r}; supported are numeric, "
            "real, integer and nominal types with numeric values such as {0,1}",
        )
    declared = [_unquote(value.strip()) for value in declared_type[1:-1].split(",")]
    try:
        nominal_values = tuple(float(value) for value in declared)
    except ValueError:
        raise _syntax_error(
            line_number,
            f"nominal attribute {name!r} has non-numeric values {declared_type}; only numeric "
            "nominal values such as {0,1} are supported",
        ) from None
    if nominal_values[0] != 0:
        raise _syntax_error(
            line_number,
            f"the first value of nominal attribute {name!r} must be 0, because sparse rows "
            f"leave out attributes at their first value; got {declared_type}",
        )
    return _Attribute(name, nominal_values)


def _label_attribute_indices(attributes, label_names, n_labels):
    if (label_names is None) == (n_labels is None):
        raise ValueError("Give exactly one of label_names and n_labels.")
    n_attributes = len(attributes)
    if n_labels is not None:
        if n_labels > n_attributes:
            raise _FormatProblem(
                f"n_labels={n_labels} exceeds the number of attributes, {n_attributes}."
            )
        return np.arange(n_attributes - n_labels, n_attributes)
    label_names = list(label_names)
    if len(set(label_names)) != len(label_names):
        raise ValueError("label_names contains duplicate names.")
    position = {attribute.name: index for index, attribute in enumerate(attributes)}
    missing = [name for name in label_names if name not in position]
    if missing:
        raise _FormatProblem(
            f"{len(missing)} label name(s) are not attributes of the ARFF file, e.g. {missing[:3]}."
        )
    return np.array([position[name] for name in label_names], dtype=np.int64)


def _parse_data(numbered_lines, n_attributes):
    indices, values, row_lengths, line_numbers = [], [], [], []
    for line_number, raw_line in numbered_lines:
        line = raw_line.strip()
        if not line or line.startswith("%"):
            continue
        if line.startswith("{"):
            row_indices, row_values = _parse_sparse_row(line, line_number)
        else:
            row_indices, row_values = _parse_dense_row(line, line_number, n_attributes)
        indices.append(row_indices)
        values.append(row_values)
        row_lengths.append(len(row_indices))
        line_numbers.append(line_number)
    return _Entries(
        indices=np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64),
        values=np.concatenate(values) if values else np.zeros(0),
        rows=np.repeat(np.arange(len(row_lengths)), row_lengths),
        line_numbers=np.array(line_numbers, dtype=np.int64),
        n_rows=len(row_lengths),
    )


def _parse_sparse_row(line, line_number):
    body = line[1:-1] if line.endswith("}") else None
    if body is None or not _SPARSE_BODY.fullmatch(body):
        raise _syntax_error(
            line_number, f"malformed sparse row {line[:40]!r}; expected {{index value, ...}}"
        )
    tokens = body.replace(",", " ").split()
    try:
        row_indices = np.array(tokens[0::2], dtype=np.int64)
    except OverflowError:
        raise _syntax_error(line_number, f"attribute index out of range in {line[:40]!r}") from None
    except ValueError:
        raise _syntax_error(
            line_number, f"attribute indices must be integers in {line[:40]!r}"
        ) from None
    return row_indices, _parse_values(tokens[1::2], line_number)


def _parse_dense_row(line, line_number, n_attributes):
    tokens = [token.strip() for token in line.split(",")]
    if len(tokens) != n_attributes:
        raise _syntax_error(
            line_number, f"dense row has {len(tokens)} values, expected {n_attributes}"
        )
    row_values = _parse_values(tokens, line_number)
    nonzero = np.flatnonzero(row_values)
    return nonzero, row_values[nonzero]


def _parse_values(tokens, line_number):
    try:
        return np.array(tokens, dtype=np.float64)
    except ValueError:
        pass
    parsed = np.empty(len(tokens))
    for position, token in enumerate(tokens):
        token = _unquote(token)
        if token == "?":
            raise _syntax_error(line_number, "missing values ('?') are not supported")
        try:
            parsed[position] = float(token)
        except ValueError:
            raise _syntax_error(line_number, f"value {token!r} is not a number") from None
    return parsed


def _check_entries(entries, attributes, is_label):
    """Raise a ValueError naming the line of the first invalid entry, if any."""
    indices, values, rows = entries.indices, entries.values, entries.rows

    def fail_at_first(invalid, describe):
        if invalid.any():
            entry = int(np.flatnonzero(invalid)[0])
            raise _syntax_error(entries.line_numbers[rows[entry]], describe(entry))

    n_attributes = len(attributes)
    fail_at_first(
        (indices < 0) | (indices >= n_attributes),
        lambda e: f"attribute index {indices[e]} is out of range [0, {n_attributes})",
    )
    not_increasing = np.zeros(len(indices), dtype=bool)
    not_increasing[1:] = (rows[1:] == rows[:-1]) & (indices[1:] <= indices[:-1])
    fail_at_first(
        not_increasing,
        lambda e: (
            f"attribute indices must increase within a row ({indices[e]} after {indices[e - 1]})"
        ),
    )
    fail_at_first(~np.isfinite(values), lambda e: f"non-finite value {values[e]}")
    for nominal_values in {a.nominal_values for a in attributes if a.nominal_values is not None}:
        of_this_type = np.array([a.nominal_values == nominal_values for a in attributes])
        fail_at_first(
            of_this_type[indices] & ~np.isin(values, nominal_values),
            lambda e: (
                f"value {values[e]:g} of nominal attribute "
                f"{attributes[indices[e]].name!r} is not one of its declared values"
            ),
        )
    fail_at_first(
        is_label[indices] & ~np.isin(values, (0, 1)),
        lambda e: (
            f"label attribute {attributes[indices[e]].name!r} has value {values[e]:g}; "
            "labels must be 0 or 1"
        ),
    )


def _select_columns(entries, attribute_columns, n_attributes, dtype):
    """CSR matrix of the entries of the given attributes, columns in the given order."""
    column_of_attribute = np.full(n_attributes, -1)
    column_of_attribute[attribute_columns] = np.arange(len(attribute_columns))
    columns = column_of_attribute[entries.indices]
    kept = (columns >= 0) & (entries.values != 0)
    matrix = sp.csr_matrix(
        (entries.values[kept].astype(dtype), (entries.rows[kept], columns[kept])),
        shape=(entries.n_rows, len(attribute_columns)),
        dtype=dtype,
    )
    matrix.sum_duplicates()
    return matrix
