"""Reading a CSV file row by row with the line numbers and the raw text of each row, strictly:
UTF-8 (a BOM skipped; a line that is not UTF-8 is an error of its row), csv ``strict`` quoting,
cells of any length. Shared by open-rag-eval's CSV (ragscale.io.orag_csv) and table CSVs (one
record per row, ragscale.io.table_csv).
"""

from __future__ import annotations

import csv
import sys
from typing import Iterator

from ragscale.errors import UserError

BOM = b"\xef\xbb\xbf"


class Lines:
    """Physical lines of a file as text, 1-based numbered; remembers the lines read since
    the last ``take()`` (the raw text of the CSV row being parsed) and which of them were
    not valid UTF-8."""

    def __init__(self, fh):
        self._fh = fh
        self.lineno = 0
        self.buffer: list[str] = []
        self.bad: list[int] = []
        self._pending: list[bytes] = []

    def __iter__(self):
        return self

    def __next__(self) -> str:
        if not self._pending:
            raw = self._fh.readline()
            if not raw:
                raise StopIteration
            if self.lineno == 0 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            # a lone \r (old Mac files) ends a line too
            self._pending = raw.splitlines(keepends=True) or [raw]
        raw = self._pending.pop(0)
        self.lineno += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = raw.decode("utf-8", errors="replace")
            self.bad.append(self.lineno)
        self.buffer.append(line)
        return line

    def take(self) -> tuple[int, int, list[str], list[int]]:
        """(first line, last line, raw lines, non-UTF-8 lines) of the row just read."""
        first = self.lineno - len(self.buffer) + 1
        out = (first, self.lineno, self.buffer, [n for n in self.bad if n >= first])
        self.buffer, self.bad = [], []
        return out


def csv_rows(fh) -> Iterator[tuple[int, int, list[str] | None, str | None, list[str]]]:
    """Yield ``(first_line, last_line, fields, csv_error, raw_lines)`` for each non-blank
    row; ``fields`` is None and ``csv_error`` set when the row could not be parsed."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long passages/answers in one cell
    lines = Lines(fh)
    reader = csv.reader(lines, strict=True)
    while True:
        try:
            fields = next(reader)
            error = None
        except StopIteration:
            return
        except csv.Error as e:
            fields, error = None, str(e)
        first, last, raw, bad = lines.take()
        if fields is not None and not any(f.strip() for f in fields):
            continue  # blank line, or a row of empty cells
        if bad and error is None:
            error = "not valid UTF-8 (save the file as UTF-8)"
        yield first, last, fields, error, raw


def open_csv(path: str, what: str = "CSV"):
    try:
        return open(path, "rb")
    except OSError as e:
        raise UserError(f"{path}: cannot read the {what} ({e.strerror or e})") from None


def header_names(path: str, first: int, fields: list[str] | None, error: str | None, what: str = "") -> list[str]:
    """The column names of a header row (``csv_rows``' first row), stripped; a one-line UserError
    when the row is unreadable or names a column twice (``what`` prefixes the reason)."""
    if error is not None:
        raise UserError(f"{path}: line {first}: the header row{' of the ' + what if what else ''} is unreadable ({error})")
    names = [f.strip() for f in fields or []]
    dup = sorted({n for n in names if n and names.count(n) > 1})
    if dup:
        raise UserError(f"{path}: {'not an ' + what + ': ' if what else ''}column(s) {', '.join(dup)} appear twice "
                        "in the header")
    return names
