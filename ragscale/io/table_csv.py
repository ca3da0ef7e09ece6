"""A CSV table of records: one record per row, one field per column (what ``DataFrame.to_csv``,
ragas' ``EvaluationResult.to_pandas().to_csv`` and spreadsheets write). A CSV is read this way
unless its header is open-rag-eval's (one row per passage: ragscale.io.orag_csv).

Cells are kept as text (``"007"`` stays ``"007"``); an empty cell is null; a cell holding a JSON
or Python list literal (how lists are written to CSV, e.g. ``['passage 1', 'passage 2']``) is
read as a list when a field that takes a list is read from it (ragscale.columns ``as_list``).
A malformed row becomes a record whose ``input_error`` names its lines, so nothing is dropped.
"""

from __future__ import annotations

from typing import Iterator

from ragscale.errors import UserError
from ragscale.io.csv_rows import csv_rows, header_names, open_csv
from ragscale.record import TABLE_FORMAT as FORMAT  # a record that stands for a row that could not be read


def is_orag_header(path: str) -> bool:
    """Whether the CSV's header is open-rag-eval's (it names ``passage_id`` or ``query_run``: one
    row per retrieved passage)."""
    with open_csv(path) as fh:
        for _first, _last, fields, _error, _raw in csv_rows(fh):
            names = {f.strip() for f in fields or []}
            return bool(names & {"passage_id", "query_run"})
    return False


def header(path: str) -> list[str]:
    """The column names of a table CSV; a one-line UserError when it has no usable header."""
    with open_csv(path) as fh:
        for first, _last, fields, error, _raw in csv_rows(fh):
            return header_names(path, first, fields, error)  # (a row of empty cells is skipped as blank)
    raise UserError(f"{path}: the CSV is empty (no header row)")


def read_rows(path: str, limit: int | None = None) -> Iterator[dict]:
    """The records of a table CSV, in order: ``{column: cell}`` (empty cells null), or for a row
    that cannot be read ``{"format": FORMAT, "input_error": "<lines>: <why>"}``."""
    names = header(path)
    count = 0
    with open_csv(path) as fh:
        rows = csv_rows(fh)
        next(rows, None)  # the header
        for first, last, fields, error, _raw in rows:
            if limit is not None and count >= limit:
                return
            count += 1
            span = f"line {first}" if first == last else f"lines {first}-{last}"
            if error is not None:
                yield {"format": FORMAT, "input_error": f"{path}: {span}: malformed CSV row ({error})"}
            elif len(fields) != len(names):
                yield {"format": FORMAT, "input_error": f"{path}: {span}: {len(fields)} fields, the header has "
                                                        f"{len(names)}"}
            else:
                yield {n: (v if v != "" else None) for n, v in zip(names, fields) if n}
