"""open-rag-eval's input CSV (vectara/open-rag-eval ``open_rag_eval/rag_results_loader.py``).

One row per retrieved passage: ``query_id, query, query_run, passage_id, passage,
generated_answer``; the rows of one (query_id, query_run) group are one RAG result, whose
answer is the first non-empty ``generated_answer`` of the group. open-rag-eval requires
``query``, ``passage_id``, ``passage`` and ``generated_answer``; ``query_id`` and
``query_run`` are optional.

Where ragscale differs from the reference on purpose (deterministic ids, input order,
nothing dropped, malformed rows as per-record input errors, strict quoting and UTF-8) is
listed in docs/inputs.md.
"""

from __future__ import annotations

import csv
import hashlib
import re
from typing import Iterator

from ragscale.errors import UserError
from ragscale.io.csv_rows import csv_rows, header_names, open_csv

FORMAT = "open-rag-eval-csv"
REQUIRED = ("query", "passage_id", "passage", "generated_answer")
OPTIONAL = ("query_id", "query_run")
NO_ANSWER = "NO_ANSWER"  # open_rag_eval/utils/constants.py
API_ERROR = "API_ERROR"
_CITABLE_ID = re.compile(r"\[\d+\]")


def derived_query_id(query: str) -> str:
    """The stable id given to a row without a query_id: ``q_`` + 12 hex of sha1(query)."""
    return "q_" + hashlib.sha1(query.strip().encode("utf-8")).hexdigest()[:12]


def _short(text: str, n: int = 50) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def _header(path: str, rows) -> tuple[dict[str, int], int]:
    """Validate the header row; return (column name -> index, number of header fields)."""
    for first, _last, fields, error, raw in rows:
        names = header_names(path, first, fields, error, "open-rag-eval CSV")
        missing = [c for c in REQUIRED if c not in names]
        if missing:
            hint = ""
            if len(names) == 1 and any(sep in raw[0] for sep in (";", "\t", "|")):
                hint = " (the file must be comma-separated)"
            shown = ", ".join(n if n.isprintable() else repr(n) for n in names[:8])
            shown += ", ..." if len(names) > 8 else ""
            raise UserError(
                f"{path}: not an open-rag-eval CSV: missing column(s) {', '.join(missing)} "
                f"(header: {shown}){hint}; needs {', '.join(REQUIRED)} (optional: {', '.join(OPTIONAL)})"
            )
        return {n: i for i, n in enumerate(names) if n}, len(names)
    raise UserError(f"{path}: the open-rag-eval CSV is empty (no header row)")


def check_header(path: str) -> None:
    """Raise a one-line UserError unless ``path`` is a CSV whose header has open-rag-eval's
    required columns (``REQUIRED``); a UTF-8 BOM is allowed."""
    with open_csv(path, "open-rag-eval CSV") as fh:
        _header(path, csv_rows(fh))


def _parse_run(text: str) -> int | None:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:  # "2.0": what pandas writes for an int column that has an empty cell
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


class _Group:
    """The rows of one (query_id, query_run) group, checked as they come."""

    def __init__(self, query_id: str, query_run: int, first_line: int):
        self.query_id = query_id
        self.query_run = query_run
        self.first_line = first_line
        self.query: str | None = None
        self.query_line = 0
        self.passages: list[dict] = []
        self.passage_line: dict[str, int] = {}
        self.answers: list[tuple[int, str]] = []
        self.lines: list[int] = []
        self.errors: list[tuple[int, str]] = []
        self.warnings: list[str] = []
        self._noted: set[str] = set()

    def note(self, line: int, warning: str) -> None:
        """A warning, once per group (at the first line it applies to)."""
        if warning not in self._noted:
            self._noted.add(warning)
            self.warnings.append(f"line {line}: {warning}")

    def add_row(self, first: int, span: str, query: str, pid: str, text: str, answer: str) -> None:
        self.lines.append(first)
        if not query:
            self.errors.append((first, f"{span}: empty query"))
        elif self.query is None:
            self.query, self.query_line = query, first
        elif query != self.query:
            self.errors.append(
                (first, f"{span}: query {_short(query)} differs from line {self.query_line}'s {_short(self.query)}")
            )
        if pid and not text.strip():
            self.errors.append((first, f"{span}: passage {pid!r} has empty text"))
        elif text.strip() and not pid:
            self.errors.append((first, f"{span}: empty passage_id"))
        elif pid in self.passage_line:
            before = self.passage_line[pid]
            if next(p["text"] for p in self.passages if p["id"] == pid) == text:
                self.warnings.append(
                    f"line {first}: passage_id {pid!r} repeats line {before} with the same text; kept once"
                )
            else:
                self.errors.append((first, f"{span}: passage_id {pid!r} repeats line {before} with other text"))
        elif pid:
            self.passage_line[pid] = first
            self.passages.append({"id": pid, "text": text})
            if not _CITABLE_ID.fullmatch(pid):
                self.note(first, f"passage_id {pid!r} is not of the form [N]; bracket citations cannot refer to it")
        if answer.strip():
            self.answers.append((first, answer))

    def record(self, queries: dict[str, tuple[str, int]]) -> dict:
        """The normalized record; ``queries`` maps query_id -> (query, line) of its first run."""
        rec = _record(self.query_id, self.query or "", self.query_run, self.first_line)
        rec["csv_lines"] = sorted(self.lines)
        rec["passages"] = self.passages
        warnings = rec["warnings"] = list(self.warnings)
        if self.answers:
            line0, answer = self.answers[0]
            for line, other in self.answers[1:]:
                if other.strip() != answer.strip():
                    warnings.append(
                        f"line {line}: another generated_answer than line {line0}'s; "
                        "the first is used (as open-rag-eval)"
                    )
            marker = answer.strip()
            status = marker if marker in (NO_ANSWER, API_ERROR) else "ok"
            rec["generated_answer"], rec["answer_status"] = (answer if status == "ok" else marker), status
        if not self.passages:
            warnings.append("no passages (no row with a passage_id and passage)")
        if self.query is not None:
            first_query, line = queries.setdefault(self.query_id, (self.query, self.query_line))
            if first_query != self.query:
                warnings.append(
                    f"line {self.query_line}: query differs from line {line}'s, "
                    f"another run of query_id {self.query_id!r}"
                )
        if self.errors:
            rec["input_error"] = "; ".join(m for _, m in sorted(self.errors, key=lambda e: e[0]))
        return rec


def _record(query_id: str, query: str, query_run: int | None, first_line: int) -> dict:
    return {
        "format": FORMAT,
        "query_id": query_id,
        "query": query,
        "query_run": query_run,
        "task_id": query_id,
        "passages": [],
        "generated_answer": None,
        "answer_status": "missing",
        "csv_lines": [first_line],
        "input_error": None,
        "warnings": [],
    }


# a row not read as a group's row: (line, fields (None: unparsable), message, cells trusted)
_Loose = tuple[int, list[str] | None, str, bool]


def _cell(cols: dict[str, int], fields: list[str], name: str) -> str:
    """The row's cell of column ``name``; "" when the header has no such column or the row is short."""
    i = cols.get(name)
    return fields[i] if i is not None and i < len(fields) else ""


def _key_cells(cols: dict[str, int], fields: list[str]) -> tuple[str, str, str, int | None]:
    """(query, query_id, query_run text, query_run) of a row, stripped; the run is 1 when its cell
    is empty and None when it is not an integer. The query_id is not derived here."""
    query = _cell(cols, fields, "query").strip()
    qid = _cell(cols, fields, "query_id").strip()
    run_text = _cell(cols, fields, "query_run").strip()
    run = 1 if not run_text else _parse_run(run_text)
    return query, qid, run_text, run


def _misshapen(first: int, span: str, fields: list[str] | None, error: str | None, raw: list[str],
               width: int) -> _Loose | None:
    """The loose-row entry of a row that is not well-formed CSV (unparsable, not UTF-8, or not
    ``width`` fields); None for a well-formed row. An unparsable row is re-read leniently, only to
    find the group it names; its cells are not trusted as a record's own."""
    if error is not None:
        if fields is None:  # best effort to find the row's group: parse it leniently
            fields = next(csv.reader(raw), None) if raw else None
            trusted = False
        else:  # parsed, but not valid UTF-8
            trusted = len(fields) == width
        return (first, fields, f"{span}: malformed CSV row ({error})", trusted)
    if len(fields) != width:
        hint = " (an unquoted comma?)" if len(fields) > width else ""
        return (first, fields, f"{span}: {len(fields)} fields, the header has {width}{hint}", False)
    return None


def _group_rows(
    rows: Iterator[tuple[int, int, list[str] | None, str | None, list[str]]], cols: dict[str, int], width: int
) -> tuple[dict[tuple[str, int], _Group], list[_Loose]]:
    """Read the data rows into their (query_id, query_run) groups, in order of first row; the
    rows that name no usable group (malformed, no query_id nor query, bad query_run) are
    returned apart as loose rows, to be placed once every group is known."""
    groups: dict[tuple[str, int], _Group] = {}
    loose: list[_Loose] = []
    for first, last, fields, error, raw in rows:
        span = f"line {first}" if first == last else f"lines {first}-{last}"
        bad = _misshapen(first, span, fields, error, raw, width)
        if bad is not None:
            loose.append(bad)
            continue
        query, qid, run_text, run = _key_cells(cols, fields)
        if not qid and not query:
            loose.append((first, fields, f"{span}: empty query_id and query", True))
            continue
        if run is None:
            loose.append((first, fields, f"{span}: query_run {run_text!r} is not an integer", True))
            continue
        derived = not qid
        qid = qid or derived_query_id(query)
        g = groups.get((qid, run))
        if g is None:
            g = groups[(qid, run)] = _Group(qid, run, first)
        if derived:
            what = "empty query_id" if "query_id" in cols else "no query_id column"
            g.note(first, f"{what}; query_id {qid} derived from the query text")
        if not run_text and "query_run" in cols:
            g.note(first, "empty query_run taken as 1")
        g.add_row(first, span, query, _cell(cols, fields, "passage_id").strip(), _cell(cols, fields, "passage"),
                  _cell(cols, fields, "generated_answer"))
    return groups, loose


def _loose_records(loose: list[_Loose], groups: dict[tuple[str, int], _Group],
                   cols: dict[str, int]) -> list[tuple[int, dict]]:
    """Place the loose rows: each becomes an error of the group it names (so the whole group is
    reported), else a ``(line, record)`` of its own, with the row's query_id and query only when
    its fields could be read by the header."""
    records: list[tuple[int, dict]] = []
    for line, fields, message, trusted in loose:
        qid, query, run = "", "", None
        if fields:
            query, qid, _run_text, run = _key_cells(cols, fields)
            qid = qid or (derived_query_id(query) if query else "")
        g = groups.get((qid, run)) if qid and run is not None else None
        if g is not None:
            g.errors.append((line, message))
            g.lines.append(line)
            continue
        if not trusted:
            qid, query = "", ""
        rec = _record(qid or f"line-{line}", query, None, line)
        rec["input_error"] = message
        records.append((line, rec))
    return records


def read_records(path: str) -> Iterator[dict]:
    """Yield one normalized record per (query_id, query_run) group of an open-rag-eval CSV,
    in order of the group's first row (see the module docstring for the rules).

    Record: ``{"format": "open-rag-eval-csv", "query_id", "query", "query_run",
    "task_id" (= query_id), "passages": [{"id", "text"}], "generated_answer" (str|None),
    "answer_status" ("ok"|"missing"|"NO_ANSWER"|"API_ERROR"), "csv_lines" (line where each
    row starts), "input_error" (None|str), "warnings" ([str])}``. Raises UserError only for
    an unreadable file or a bad header.
    """
    with open_csv(path, "open-rag-eval CSV") as fh:
        rows = csv_rows(fh)
        cols, width = _header(path, rows)
        groups, loose = _group_rows(rows, cols, width)
        # loose rows first: they add errors to the groups they name before those are recorded
        records = _loose_records(loose, groups, cols)
        queries: dict[str, tuple[str, int]] = {}
        for g in sorted(groups.values(), key=lambda g: g.first_line):
            records.append((g.first_line, g.record(queries)))

    for _, rec in sorted(records, key=lambda r: r[0]):
        yield rec
