"""The file readers, fuzzed: mutations of valid files read as an independent parse reads them.

Valid files are drawn, then mutated the ways downloads and hand edits break files: truncation,
swapped fields, huge indices, non-ASCII text, CRLF line ends, a missing header, NaN and
infinity, empty rows, duplicated tokens, damaged gzip compression. For each, the reader either
returns exactly what the reference parser below returns, or raises its format error naming the
file and a line that the reference finds malformed; nothing else (no other exception, no wrong
shape). The references are written here from the documented formats, independently of the
readers (which call scikit-learn's svmlight parser, or their own).

The default run draws a bounded number of examples; ``pytest -m fuzz --hypothesis-profile=fuzz``
runs many more (the ``fuzz`` profile is registered in ``tests/conftest.py``).
"""

import gzip
import io
import math
import re
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from skrank.datasets import load_extreme_file, load_sparse_arff
from skrank.exceptions import ExtremeFormatError

FILE_NAME = "fuzzed-file.txt"
# A line named by a format error: "<file>, line <n>:"; a file-level error names the file alone.
LINE_IN_MESSAGE = re.compile(r"line (\d+)")


class NamedBytes(io.BytesIO):
    """A binary file object with a name, as an opened file has."""

    name = FILE_NAME


class Malformed(Exception):
    """What the reference parsers return for a file they reject: the malformed lines (1-based),
    none for a fault of the whole file (an empty one); ``compression`` for damaged gzip
    compression (which a reader may notice after reading a malformed line of what it could
    decompress, so any line it names is accepted)."""

    def __init__(self, lines=(), compression=False):
        super().__init__(sorted(lines), compression)
        self.lines = set(lines)
        self.compression = compression


def _decompressed(data):
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except Exception as error:  # any failure to decompress is a fault of the whole file
        raise Malformed(compression=True) from error


def check_reader(read, reference, data, error_type):
    """``read(file)`` returns what ``reference(data)`` returns, or raises ``error_type`` naming
    the file and, if the message names a line, one the reference finds malformed."""
    try:
        expected = reference(data)
    except Malformed as malformed:
        event("rejected, a line" if malformed.lines else "rejected, the whole file")
        with pytest.raises(error_type) as raised:
            read(NamedBytes(data))
        message = str(raised.value)
        assert FILE_NAME in message, message
        line = LINE_IN_MESSAGE.search(message)
        if malformed.compression:
            pass
        elif line is not None:
            assert int(line.group(1)) in malformed.lines, (message, sorted(malformed.lines))
        else:
            assert not malformed.lines or malformed.lines == {1}, (message, malformed.lines)
        return
    event("read")
    actual = read(NamedBytes(data))
    assert_same_result(actual, expected)


def assert_same_result(actual, expected):
    for got, wanted in zip(actual, expected, strict=True):
        if isinstance(wanted, dict):  # a sparse matrix: shape, dtype and stored entries
            assert got.shape == wanted["shape"] and got.dtype == wanted["dtype"]
            coo = got.tocoo()
            entries = dict(
                zip(
                    zip(coo.row.tolist(), coo.col.tolist(), strict=True),
                    coo.data.tolist(),
                    strict=True,
                )
            )
            assert len(entries) == coo.nnz  # no duplicate entries
            assert entries == wanted["entries"]
            assert all(value != 0 for value in entries.values())
        elif isinstance(wanted, np.ndarray):
            np.testing.assert_array_equal(got, wanted)
        else:
            assert got == wanted


# ------------------------------------------------------------------------------ extreme format
INT32_MAX = 2**31 - 1


def reference_extreme(data, dtype=np.float64):
    """Parse the Extreme Classification Repository's format (the rules of
    ``load_extreme_file``'s docstring) line by line, collecting every malformed line."""
    text = _decompressed(data)
    if not text:
        raise Malformed()
    lines = text.split(b"\n")
    header = lines[0].split()
    if len(header) != 3 or not all(field.isdigit() for field in header):
        raise Malformed({1})
    n_points, n_features, n_labels = map(int, header)
    if n_features > INT32_MAX or n_labels > INT32_MAX:
        raise Malformed({1})
    malformed, rows = set(), []
    for number, line in enumerate(lines[1:], start=2):
        if b"#" in line:
            line = line[: line.index(b"#")]
        tokens = line.split()
        if not tokens:
            continue
        try:
            rows.append(_extreme_row(tokens, n_features, n_labels, dtype))
        except ValueError:
            malformed.add(number)
    if len(rows) != n_points:
        malformed.add(1)
    if malformed:
        raise Malformed(malformed)
    X = {
        (row, index): value
        for row, (_, features) in enumerate(rows)
        for index, value in features
        if value != 0
    }
    Y = {(row, label): 1 for row, (labels, _) in enumerate(rows) for label in labels}
    return (
        dict(shape=(n_points, n_features), dtype=np.dtype(dtype), entries=X),
        dict(shape=(n_points, n_labels), dtype=np.dtype(np.int8), entries=Y),
    )


def _extreme_row(tokens, n_features, n_labels, dtype):
    """(labels, [(index, value)]) of a row's tokens; a ValueError if it breaks a rule."""
    labels = []
    if b":" not in tokens[0]:
        for token in tokens.pop(0).split(b","):
            label = float(token)
            if not (label.is_integer() and 0 <= label < n_labels) or int(label) in labels:
                raise ValueError(token)
            labels.append(int(label))
    features = []
    for token in tokens:
        if token.count(b":") < 1:
            raise ValueError(token)
        index_text, value_text = token.split(b":", 1)
        index = int(index_text)
        with np.errstate(over="ignore"):
            value = float(np.dtype(dtype).type(float(value_text)))
        if not math.isfinite(value) or not 0 <= index < n_features:
            raise ValueError(token)
        if features and index <= features[-1][0]:
            raise ValueError(token)
        features.append((index, value))
    return labels, features


@st.composite
def extreme_files(draw):
    """A valid file, as lines of text (the header first)."""
    n_features = draw(st.integers(0, 6))
    n_labels = draw(st.integers(0 if n_features else 1, 5))
    n_rows = draw(st.integers(0, 5))
    value_format = draw(st.sampled_from(["%r", "%.17g", "%g", "%.3f", "%d"]))
    lines = [" " * draw(st.integers(0, 1)) + f"{n_rows} {n_features} {n_labels}"]
    for _ in range(n_rows):
        labels = draw(
            st.lists(st.integers(0, max(n_labels - 1, 0)), unique=True, max_size=min(n_labels, 3))
        )
        min_features = 0 if labels or not n_features else 1
        indices = sorted(
            draw(
                st.lists(
                    st.integers(0, max(n_features - 1, 0)),
                    unique=True,
                    min_size=min_features,
                    max_size=min(n_features, 4),
                )
            )
        )
        values = draw(
            st.lists(
                st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False),
                min_size=len(indices),
                max_size=len(indices),
            )
        )
        features = [
            f"{i}:{value_format % (round(v) if value_format == '%d' else v)}"
            for i, v in zip(indices, values, strict=True)
        ]
        if not labels and not features:  # a row without labels and features
            features = ["0:0"]
        lines.append(",".join(map(str, labels)) + " " + " ".join(features))
    return lines


NON_ASCII = ["é", "€", "\u00a0", "\u2028", "０", "\ufeff", "𝟙"]
NON_FINITE = ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e400"]
HUGE = [str(2**31), str(2**31 - 1), str(2**63), "99999999999999999999999", "1e30", "-1"]


@st.composite
def mutated(draw, lines_strategy):
    """Bytes of a valid file (lines), mutated zero to three times, maybe gzip-compressed (and
    then maybe damaged)."""
    lines = list(draw(lines_strategy))
    mutations = draw(st.lists(st.sampled_from(_MUTATIONS), max_size=3))
    for mutation in mutations:
        lines = mutation(draw, lines)
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    text = newline.join(lines) + draw(st.sampled_from([newline, ""]))
    data = text.encode("utf-8")
    if draw(st.integers(0, 9)) == 0:  # a byte level change: invalid UTF-8, a NUL, a lone CR
        position = draw(st.integers(0, len(data)))
        data = (
            data[:position]
            + draw(st.sampled_from([b"\xff", b"\x00", b"\r", b"\xc3"]))
            + data[position:]
        )
    if draw(st.integers(0, 9)) == 0:
        data = gzip.compress(data, mtime=0)
        if draw(st.booleans()):  # truncated or corrupted compression
            position = draw(st.integers(0, len(data) - 1))
            data = (
                data[:position]
                if draw(st.booleans())
                else (data[:position] + bytes([data[position] ^ 0x55]) + data[position + 1 :])
            )
    return data


def _pick_line(draw, lines):
    return draw(st.integers(0, len(lines) - 1)) if lines else None


def _replace_token(draw, lines, replacement):
    """A number of some line replaced by ``replacement``."""
    number = _pick_line(draw, lines)
    if number is None:
        return lines
    spans = [m.span() for m in re.finditer(r"[-+]?\d+(?:\.\d*)?(?:e[-+]?\d+)?", lines[number])]
    if not spans:
        return lines
    start, stop = draw(st.sampled_from(spans))
    line = lines[number]
    return [*lines[:number], line[:start] + replacement + line[stop:], *lines[number + 1 :]]


def _truncate(draw, lines):
    text = "\n".join(lines)
    return text[: draw(st.integers(0, len(text)))].split("\n")


def _swap_fields(draw, lines):
    number = _pick_line(draw, lines)
    if number is None:
        return lines
    fields = re.split(r"([\s,]+)", lines[number])
    values = list(range(0, len(fields), 2))
    if len(values) < 2:
        return lines
    a, b = draw(st.lists(st.sampled_from(values), min_size=2, max_size=2, unique=True))
    fields[a], fields[b] = fields[b], fields[a]
    return [*lines[:number], "".join(fields), *lines[number + 1 :]]


def _huge_number(draw, lines):
    return _replace_token(draw, lines, draw(st.sampled_from(HUGE)))


def _non_finite(draw, lines):
    return _replace_token(draw, lines, draw(st.sampled_from(NON_FINITE)))


def _non_ascii(draw, lines):
    number = _pick_line(draw, lines)
    if number is None:
        return lines
    line = lines[number]
    position = draw(st.integers(0, len(line)))
    character = draw(st.sampled_from(NON_ASCII))
    return [*lines[:number], line[:position] + character + line[position:], *lines[number + 1 :]]


def _missing_header(draw, lines):
    return lines[1:]


def _empty_rows(draw, lines):
    position = draw(st.integers(1 if lines else 0, len(lines)))
    empty = draw(st.sampled_from(["", " ", "\t", "# a comment", "%", "{}", " 0:0", ","]))
    return [*lines[:position], empty, *lines[position:]]


def _duplicate_token(draw, lines):
    number = _pick_line(draw, lines)
    if number is None:
        return lines
    tokens = lines[number].split(" ")
    position = draw(st.integers(0, len(tokens) - 1))
    tokens.insert(position, tokens[position])
    return [*lines[:number], " ".join(tokens), *lines[number + 1 :]]


def _drop_line(draw, lines):
    number = _pick_line(draw, lines)
    return lines if number is None else [*lines[:number], *lines[number + 1 :]]


_MUTATIONS = [
    _truncate,
    _swap_fields,
    _huge_number,
    _non_finite,
    _non_ascii,
    _missing_header,
    _empty_rows,
    _duplicate_token,
    _drop_line,
]


@pytest.mark.fuzz
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated(extreme_files()), dtype=st.sampled_from([np.float64, np.float32]))
def test_extreme_reader_reads_as_the_reference(data, dtype):
    check_reader(
        lambda file: load_extreme_file(file, dtype=dtype),
        lambda data: reference_extreme(data, dtype),
        data,
        ExtremeFormatError,
    )


# ------------------------------------------------------------------------------ ARFF
NUMERIC_TYPES = ("numeric", "real", "integer")


def reference_arff(data, n_labels):
    """Parse the ARFF subset of ``load_sparse_arff``'s docstring line by line. The header ends
    at its first fault (which may change the meaning of the lines after it); every malformed
    data line is collected."""
    text = _decompressed(data).decode("utf-8-sig", errors="surrogateescape")
    lines = re.split("\r\n|\r|\n", text)
    attributes, names, relation = [], set(), None
    number = 0
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if _not_text(line):
            raise Malformed({number})
        if not line or line[0] == "%":
            continue
        keyword, rest = line.split(None, 1) if len(line.split(None, 1)) == 2 else (line, "")
        keyword = keyword.lower()
        try:
            if keyword == "@relation":
                relation, _ = _reference_name(rest)
            elif keyword == "@attribute":
                name, declared = _reference_name(rest)
                if name in names:
                    raise ValueError(name)
                names.add(name)
                attributes.append((name, _reference_type(declared.strip())))
            elif keyword == "@data" and attributes:
                break
            else:
                raise ValueError(keyword)
        except ValueError as error:
            raise Malformed({number}) from error
    else:
        raise Malformed()  # no @data section
    if n_labels > len(attributes):
        raise Malformed()
    is_label = [index >= len(attributes) - n_labels for index in range(len(attributes))]
    rows, malformed = [], set()
    for row_number, line in enumerate(lines[number:], start=number + 1):
        line = line.strip()
        if _not_text(line):
            malformed.add(row_number)
        elif line and line[0] != "%":
            try:
                rows.append(_reference_row(line, attributes, is_label))
            except (ValueError, OverflowError):
                malformed.add(row_number)
    if malformed:
        raise Malformed(malformed)
    features = [i for i in range(len(attributes)) if not is_label[i]]
    labels = [i for i in range(len(attributes)) if is_label[i]]

    def matrix(columns, dtype):
        position = {attribute: column for column, attribute in enumerate(columns)}
        entries = {
            (row, position[index]): (int(value) if dtype == np.int64 else value)
            for row, values in enumerate(rows)
            for index, value in values.items()
            if index in position and value != 0
        }
        return dict(shape=(len(rows), len(columns)), dtype=np.dtype(dtype), entries=entries)

    return (
        matrix(features, np.float64),
        matrix(labels, np.int64),
        np.array([attributes[i][0] for i in features], dtype=object),
        np.array([attributes[i][0] for i in labels], dtype=object),
        relation,
    )


def _not_text(line):
    """Whether a decoded line holds bytes that were not UTF-8 (as lone surrogates)."""
    return any("\ud800" <= character <= "\udfff" for character in line)


def _reference_name(text):
    """(name, rest of the text): quoted with escapes, or up to whitespace or ``{``."""
    if text[:1] in ("'", '"'):
        quote, name, position = text[0], [], 1
        while position < len(text):
            character = text[position]
            if character == "\\" and position + 1 < len(text):
                name.append(text[position + 1])
                position += 2
            elif character == "\\":
                break
            elif character == quote:
                return "".join(name), text[position + 1 :]
            else:
                name.append(character)
                position += 1
        raise ValueError("unterminated quote")
    match = re.match(r"[^\s{]+", text)
    if match is None:
        raise ValueError("missing name")
    return match.group(), text[match.end() :]


def _reference_unquote(token):
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return token[1:-1]
    return token


def _reference_type(declared):
    """None for a numeric attribute, the declared values of a nominal one."""
    if declared.lower() in NUMERIC_TYPES:
        return None
    if not (declared.startswith("{") and declared.endswith("}")):
        raise ValueError(declared)
    values = [float(_reference_unquote(value.strip())) for value in declared[1:-1].split(",")]
    if values[0] != 0:
        raise ValueError(declared)
    return values


def _reference_value(token):
    token = _reference_unquote(token)
    if token == "?":
        raise ValueError(token)
    return float(token)


def _reference_row(line, attributes, is_label):
    """``{attribute index: value}`` of a data line."""
    if line[0] == "{":
        if line[-1] != "}":
            raise ValueError(line)
        body = line[1:-1]
        values = {}
        for entry in body.split(",") if body.strip() else []:
            parts = entry.split()
            if len(parts) != 2:
                raise ValueError(entry)
            index = int(parts[0])
            if not 0 <= index < len(attributes) or (values and index <= max(values)):
                raise ValueError(entry)
            if index > np.iinfo(np.int64).max:
                raise OverflowError(entry)
            values[index] = _reference_value(parts[1])
    else:
        tokens = [token.strip() for token in line.split(",")]
        if len(tokens) != len(attributes):
            raise ValueError(line)
        values = {index: _reference_value(token) for index, token in enumerate(tokens)}
    for index, value in values.items():
        declared = attributes[index][1]
        if not math.isfinite(value):
            raise ValueError(value)
        if declared is not None and value not in declared and value != 0:
            raise ValueError(value)
        if is_label[index] and value not in (0, 1):
            raise ValueError(value)
    return values


_SIMPLE_NAMES = st.text("abcxyz_0123", min_size=1, max_size=4)


@st.composite
def arff_files(draw):
    """A valid ARFF file (lines) and its number of label attributes."""
    n_features = draw(st.integers(0, 4))
    n_labels = draw(st.integers(0 if n_features else 1, 3))
    names = draw(
        st.lists(
            _SIMPLE_NAMES,
            min_size=n_features + n_labels,
            max_size=n_features + n_labels,
            unique=True,
        )
    )
    quoted = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    lines = [draw(st.sampled_from(["@relation toy", "@RELATION 'a toy'", "% a comment", ""]))]
    types = []
    for index, (name, quote) in enumerate(zip(names, quoted, strict=True)):
        shown = f"'{name} x'" if quote else name
        label = index >= n_features
        declared = (
            "{0,1}" if label else draw(st.sampled_from(["numeric", "REAL", "integer", "{0,1,2.5}"]))
        )
        types.append(declared)
        lines.append(f"@attribute {shown} {declared}")
    lines.append(draw(st.sampled_from(["@data", "@DATA"])))
    for _ in range(draw(st.integers(0, 4))):
        values = []
        for declared in types:
            if declared == "{0,1}":
                values.append(draw(st.sampled_from([0, 1])))
            elif declared == "{0,1,2.5}":
                values.append(draw(st.sampled_from([0, 1, 2.5])))
            else:
                values.append(draw(st.sampled_from([0, 0, -1.5, 3, 1e-3, 123456.789])))
        if draw(st.booleans()):
            entries = [f"{i} {v!r}" for i, v in enumerate(values) if v != 0]
            lines.append("{" + ",".join(entries) + "}")
        else:
            lines.append(",".join(repr(v) for v in values))
    return lines, n_labels


@st.composite
def mutated_arff(draw):
    lines, n_labels = draw(arff_files())
    data = draw(mutated(st.just(lines)))
    return data, n_labels


@pytest.mark.fuzz
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated_arff())
def test_arff_reader_reads_as_the_reference(case):
    data, n_labels = case

    def read(file):
        bunch = load_sparse_arff(file, n_labels=n_labels)
        return bunch.data, bunch.target, bunch.feature_names, bunch.target_names, bunch.relation

    check_reader(read, lambda data: reference_arff(data, n_labels), data, ValueError)


# ------------------------------------------------------------------------------ cost
def _extreme_text(n_rows, rng):
    lines = [f"{n_rows} 1000 50"]
    for _ in range(n_rows):
        labels = np.sort(rng.choice(50, 2, replace=False))
        features = np.sort(rng.choice(1000, 20, replace=False))
        pairs = " ".join(f"{j}:{v:.6f}" for j, v in zip(features, rng.rand(20), strict=True))
        lines.append(f"{labels[0]},{labels[1]} {pairs}")
    return ("\n".join(lines) + "\n").encode()


def _arff_text(n_rows, rng):
    lines = ["@relation cost"]
    lines += [f"@attribute f{j} numeric" for j in range(1000)]
    lines += [f"@attribute l{j} {{0,1}}" for j in range(50)] + ["@data"]
    for _ in range(n_rows):
        features = np.sort(rng.choice(1000, 20, replace=False))
        labels = np.sort(rng.choice(50, 2, replace=False)) + 1000
        entries = [f"{j} {v:.6f}" for j, v in zip(features, rng.rand(20), strict=True)]
        lines.append("{" + ",".join(entries + [f"{j} 1" for j in labels]) + "}")
    return ("\n".join(lines) + "\n").encode()


# Peak memory of a read per byte of file, measured about 2.1 (extreme) and 6.0 (ARFF).
READERS = {
    "extreme": (_extreme_text, lambda data: load_extreme_file(io.BytesIO(data)), 4.0),
    "arff": (_arff_text, lambda data: load_sparse_arff(io.BytesIO(data), n_labels=50), 10.0),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reading_cost_is_linear_in_the_file_size(reader):
    make, read, bytes_per_byte = READERS[reader]
    rng = np.random.RandomState(0)
    files = [make(n_rows, rng) for n_rows in (500, 2000)]
    seconds = []
    for data in files:
        tracemalloc.start()
        try:
            read(data)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= bytes_per_byte * len(data), (peak, len(data))
        seconds.append(min(_seconds(read, data) for _ in range(3)))
    # Four times the file: at most twice the linear time (a quadratic cost takes 16 times).
    assert seconds[1] / seconds[0] <= 2 * len(files[1]) / len(files[0]), seconds


def _seconds(read, data):
    start = time.perf_counter()
    read(data)
    return time.perf_counter() - start
