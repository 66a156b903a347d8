"""Line-checked reading of delimited text files: every problem names the file, the line and what is wrong.

Files are read whole (the largest supported, MovieLens-1M ``ratings.dat``, is 24 MB) and checked in two passes:
splitting and field counts per line in Python, then numeric columns vectorised with pandas. A :class:`BadRows`
policy decides whether a malformed row raises :class:`DataError` or is skipped and counted.
"""

from __future__ import annotations

import csv
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from recagent_gym.data.schema import DataError

logger = logging.getLogger(__name__)

BadRowMode = Literal["error", "skip"]
_EXAMPLES_KEPT = 5

NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A number as the data files write it: ASCII digits, optional sign, decimal point and exponent."""
_PLAIN_CHARS = re.compile(r"[0-9+\-.eE \t]*")
"""Characters of a column that holds only such numbers (and blanks), which numpy then parses as they are meant."""

TIMESTAMP_RANGE: tuple[int, int] = (0, 4_102_444_800)
"""Plausible interaction times, seconds since the epoch: 1970-01-01 to 2100-01-01 (anything else is a broken row)."""


@dataclass
class BadRows:
    """What a malformed row does (raise, or skip and count), and the tally of skipped rows per file.

    In ``error`` mode the first problem found raises: rows are checked in passes (encoding and field count while
    reading, then each column), so it is the first of its kind, not always the first line with any problem.
    """

    mode: BadRowMode = "error"
    counts: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    """The first few skipped rows' messages, for the log."""

    def __post_init__(self) -> None:
        if self.mode not in ("error", "skip"):
            raise ValueError(f"on_bad_row must be 'error' or 'skip', not {self.mode!r}")

    def report(self, path: Path, line: int, problem: str) -> None:
        """Raise :class:`DataError` for the row, or count it as skipped."""
        message = f"{path}, line {line}: {problem}"
        if self.mode == "error":
            raise DataError(message + " (use on_bad_row='skip' to skip malformed rows)")
        self.counts[str(path)] += 1
        if len(self.examples) < _EXAMPLES_KEPT:
            self.examples.append(message)
        logger.debug("skipped %s", message)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def log_summary(self, dataset: str) -> None:
        """One warning with the count per file (nothing when no row was skipped)."""
        if not self.total:
            return
        per_file = ", ".join(f"{Path(p).name}: {n}" for p, n in sorted(self.counts.items()))
        logger.warning(
            "%s: skipped %d malformed rows (%s); first: %s", dataset, self.total, per_file, "; ".join(self.examples)
        )


@dataclass
class RawTable:
    """Rows of one file as strings, with the physical line number of each row and a mask of rows still valid."""

    path: Path
    columns: dict[str, np.ndarray]
    lines: np.ndarray
    bad: BadRows
    ok: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.ok = np.ones(len(self.lines), dtype=bool)

    def __len__(self) -> int:
        return len(self.lines)

    def reject(self, mask: np.ndarray, problem: Callable[[int], str]) -> None:
        """Report every still-valid row where ``mask`` holds; ``problem(row)`` describes it."""
        for row in np.flatnonzero(mask & self.ok):
            self.bad.report(self.path, int(self.lines[row]), problem(int(row)))
            self.ok[row] = False

    def text(self, name: str, *, strip: bool = True) -> np.ndarray:
        values = self.columns[name]
        return np.array([v.strip() for v in values], dtype=object) if strip else values

    def numbers(self, name: str, *, kind: Literal["int", "float"], allow_empty: bool = False) -> np.ndarray:
        """The column parsed as numbers; rows that do not parse are rejected (empty gives NaN if allowed).

        Only plain ASCII numbers count (:data:`NUMBER`): Python and numpy would also read other scripts' digits
        (``١٢``, fullwidth ``１``) and ``1_000``, so such ids and ratings would load as numbers, unlike ``²``.
        """
        values = self.columns[name]
        try:  # fast path: numpy parses clean ASCII columns in C; anything else gets the row-by-row check
            if _PLAIN_CHARS.fullmatch("".join(values)):
                parsed = np.asarray(values, dtype=str).astype(np.float64)
                if np.isfinite(parsed).all() and (kind == "float" or (parsed == np.round(parsed)).all()):
                    return parsed
        except ValueError:
            pass
        raw = pd.Series(values, dtype=object).str.strip()
        plain = raw.str.fullmatch(NUMBER, na=False).to_numpy(dtype=bool)
        parsed = pd.to_numeric(raw.where(plain, "x"), errors="coerce").to_numpy(dtype=np.float64)
        empty = (raw == "").to_numpy()
        invalid = ~np.isfinite(parsed) & ~(empty & allow_empty)
        if kind == "int":
            invalid |= np.isfinite(parsed) & (parsed != np.round(parsed))
        what = "an integer" if kind == "int" else "a number"
        self.reject(invalid, lambda r: f"column {name!r}: {values[r]!r} is not {what}{_ascii_hint(values[r])}")
        return np.where(invalid, np.nan, parsed)

    def ints(self, name: str, *, low: float = -(2.0**53), high: float = 2.0**53) -> np.ndarray:
        """An integer column (rejected rows hold 0); values outside ``[low, high]`` are rejected."""
        parsed = self.bounded(name, self.numbers(name, kind="int"), low, high)
        return np.where(np.isfinite(parsed), parsed, 0).astype(np.int64)

    def bounded(self, name: str, values: np.ndarray, low: float, high: float) -> np.ndarray:
        """``values`` of column ``name`` with those outside ``[low, high]`` rejected (NaN); NaN stays NaN."""
        outside = np.isfinite(values) & ((values < low) | (values > high))
        self.reject(outside, lambda r: f"column {name!r}: {self.columns[name][r].strip()} is outside {low:g}..{high:g}")
        return np.where(outside, np.nan, values)

    def ratings(self, name: str, scale: tuple[float, float], *, allow_empty: bool = False) -> np.ndarray:
        """A rating column on ``scale`` (inclusive); ratings off the scale are rejected, never passed on."""
        return self.bounded(name, self.numbers(name, kind="float", allow_empty=allow_empty), *scale)

    def timestamps(self, name: str) -> np.ndarray:
        """Seconds since the epoch within :data:`TIMESTAMP_RANGE` (1970 to 2100); others are rejected."""
        return self.ints(name, low=TIMESTAMP_RANGE[0], high=TIMESTAMP_RANGE[1])

    def positions(self, name: str, values: np.ndarray, index: pd.Index, what: str) -> np.ndarray:
        """Row positions of ``values`` in ``index``; rows with an unknown id are rejected (position -1)."""
        pos = index.get_indexer(values)
        self.reject(pos < 0, lambda r: f"column {name!r}: unknown {what} {self.columns[name][r].strip()!r}")
        return pos

    def reject_duplicates(self, values: np.ndarray, what: str) -> None:
        """Reject every later row whose value already appeared on a valid earlier row."""
        first: dict[object, int] = {}
        dup = np.zeros(len(values), dtype=bool)
        for row in np.flatnonzero(self.ok):
            key = values[row]
            if key in first:
                dup[row] = True
            else:
                first[key] = int(self.lines[row])
        self.reject(dup, lambda r: f"duplicate {what} {_show(values[r])} (first on line {first[values[r]]})")


def _ascii_hint(text: str) -> str:
    return "" if text.isascii() else " (numbers are written with the ASCII digits 0-9)"


def _show(value: object) -> str:
    return repr(value.item() if isinstance(value, np.generic) else value)


def _decoded_lines(path: Path, encoding: str, bad: BadRows, line_box: list[int]) -> Iterator[str]:
    """Decoded lines (ending in ``\\n``); a line that does not decode is reported; ``line_box[0]`` tracks the line.

    Lines end only at ``\\n`` (a ``\\r`` before it is dropped later): ``str.splitlines`` would also split at
    characters such as latin-1's NEL (0x85) inside titles.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if data.startswith(b"\xef\xbb\xbf") and encoding.replace("-", "").lower() == "utf8":
        data = data[3:]
    try:
        raw_lines: list[bytes] | list[str] = data.decode(encoding).split("\n")
    except UnicodeDecodeError:
        raw_lines = data.split(b"\n")  # decode line by line to name the bad ones
    last = len(raw_lines) - 1
    for number, raw in enumerate(raw_lines, start=1):
        if number - 1 == last and not raw:
            return
        line_box[0] = number
        if isinstance(raw, bytes):
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as exc:
                byte = raw[exc.start : exc.start + 1]
                bad.report(path, number, f"not valid {encoding} (byte {byte!r} at column {exc.start + 1})")
                continue
        else:
            text = raw
        yield text + "\n"


def read_table(
    path: Path,
    columns: Sequence[str],
    *,
    sep: str,
    bad: BadRows,
    encoding: str = "utf-8",
    header: bool = False,
    quoted: bool = False,
    optional: Sequence[str] = (),
    skip_blank: bool = True,
) -> RawTable:
    """Read ``path`` into a :class:`RawTable` of string columns.

    ``columns`` are the fields in file order when there is no header. With ``header=True`` the first line names the
    columns: every name in ``columns`` must be present (except those in ``optional``, which are filled with empty
    strings); other header names are kept too. ``quoted`` parses CSV quoting (RFC 4180) instead of a plain split.
    Rows with the wrong number of fields are reported to ``bad``.
    """
    line_box = [0]
    lines_iter = _decoded_lines(path, encoding, bad, line_box)
    rows: Iterator[list[str]]
    if quoted:
        rows = csv.reader(lines_iter, delimiter=sep, strict=True)
    else:
        rows = (line.rstrip("\r\n").split(sep) for line in lines_iter)

    names = list(columns)
    out_rows: list[list[str]] = []
    out_lines: list[int] = []
    header_done = not header
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as exc:
            bad.report(path, line_box[0], f"malformed CSV ({exc})")
            continue
        line = line_box[0]
        if skip_blank and (not row or (len(row) == 1 and not row[0].strip())):
            continue
        if not header_done:
            names = _check_header(path, line, row, columns, optional)
            header_done = True
            continue
        if len(row) != len(names):
            bad.report(path, line, f"expected {len(names)} fields separated by {sep!r}, found {len(row)}")
            continue
        out_rows.append(row)
        out_lines.append(line)
    if not header_done:
        raise DataError(f"{path}: the file is empty (expected a header line)")

    matrix = np.array(out_rows, dtype=object).reshape(len(out_rows), len(names))
    table = {name: matrix[:, j] for j, name in enumerate(names)}
    for name in optional:
        table.setdefault(name, np.full(len(out_rows), "", dtype=object))
    return RawTable(path, table, np.asarray(out_lines, dtype=np.int64), bad)


def _check_header(path: Path, line: int, row: list[str], columns: Sequence[str], optional: Sequence[str]) -> list[str]:
    names = [name.strip().lstrip("\ufeff") for name in row]
    duplicated = sorted(n for n, c in Counter(names).items() if c > 1)
    if duplicated:
        raise DataError(f"{path}, line {line}: duplicate column names {duplicated}")
    missing = [c for c in columns if c not in names and c not in optional]
    if missing:
        raise DataError(f"{path}, line {line}: header {names} misses the columns {missing}")
    return names
