"""Text from the inputs (model ids, task ids, questions, answers) written safely into the run's text
outputs: the one place that decides how (docs/security.md, "Outputs").

- :func:`visible`: control characters (C0, DEL, C1), bidirectional controls (U+202E and kin, which
  reorder what a reader sees) and line separators are written as escapes (``\\x00``, ``\\u202e``,
  ``\\n``): in leaderboard.md, the console, every CSV and report.html, so no id can hide text, reverse
  it or split a table row. The HTML report and CSV cells keep tabs and line breaks (a CSV quotes them).
- :func:`csv_cell`: a CSV cell as OWASP recommends against CSV (formula) injection: a text cell that
  begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (or their full-width forms, which
  some spreadsheets read the same) gets a leading ``'``, so spreadsheets show it as text and never run
  it; a number (``-0.5``, ``1e-3``) stays a number. :func:`csv_writer` writes every cell this way.
- :func:`file_name`: a file name for an id, length-bounded and collision-free (a hash suffix).

Reading a cell back gives the cell written, escapes and leading quote included (tests/unit/test_io_properties.py).
"""

from __future__ import annotations

import csv
import hashlib
import re
from typing import IO, Any, Iterable

# C0 and C1 controls and DEL, the bidirectional controls (ALM, LRM, RLM, LRE..RLO, LRI..PDI), the line
# and paragraph separators
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
LINE_BREAKS = "\t\n\r"  # kept where the format holds them (CSV cells, HTML text)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # OWASP's, and full-width
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
MAX_STEM = 64  # characters of an id kept in a file name (then a hash)
CONSOLE_WIDTH = 60  # characters of a model id the console's per-model lines show


def _escape(m: re.Match) -> str:
    ch = m.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def visible(text: str, keep: str = "") -> str:
    """``text`` with every control, bidirectional and line-separator character written as its escape
    (``\\x00``, ``\\u202e``, ``\\n``), except those in ``keep`` (e.g. :data:`LINE_BREAKS`)."""
    if not _HIDDEN.search(text):
        return text
    return _HIDDEN.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)


def console_name(name: str, limit: int = CONSOLE_WIDTH) -> str:
    """A model id as the console shows it: :func:`visible`, cut to ``limit`` characters with ``…``."""
    text = visible(name)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def md_cell(text: Any) -> str:
    """A markdown table cell: :func:`visible` (a line break cannot split the row) and ``|`` escaped."""
    return visible(str(text)).replace("|", "\\|")


def csv_cell(value: Any) -> Any:
    """A CSV cell: numbers, booleans and None as they are; text :func:`visible` (line breaks and tabs
    kept: the CSV quotes them) and, when it would start a formula, prefixed with ``'`` (OWASP)."""
    if not isinstance(value, str):
        return value
    text = visible(value, LINE_BREAKS)
    if text.startswith(FORMULA_START) and not NUMBER.fullmatch(text):
        return "'" + text
    return text


class _SafeWriter:
    """``csv.writer`` whose every cell goes through :func:`csv_cell`."""

    def __init__(self, fh: IO[str], **kwargs: Any):
        self._w = csv.writer(fh, **kwargs)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._w.writerow([csv_cell(c) for c in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(fh: IO[str], **kwargs: Any) -> _SafeWriter:
    """A ``csv.writer`` (same arguments) that writes every cell with :func:`csv_cell`: every CSV that
    ragscale writes goes through it."""
    return _SafeWriter(fh, **kwargs)


def file_name(name: str, taken: set[str], suffix: str = ".csv") -> str:
    """A file name for the id ``name``: letters, digits, ``.``, ``_`` and ``-`` kept (others become ``_``),
    at most :data:`MAX_STEM` of them, then ``-<8 hex of its sha1>`` whenever the id was changed or the
    name is ``taken`` (compared without case, as some file systems do); the name is added to ``taken``."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:MAX_STEM] or "model"
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()
    stem, width = base, 8
    if base != name or base.casefold() in taken:
        stem = f"{base}-{digest[:width]}"
        while stem.casefold() in taken and width < len(digest):
            width += 8
            stem = f"{base}-{digest[:width]}"
    taken.add(stem.casefold())
    return stem + suffix
