"""The inputs checked against what the chosen metrics need, before Ray starts.

The first ``SAMPLE`` records of each file are read the way the pipeline reads them (the user's
``columns`` applied). When none of them has an answer, or none has a field that a chosen metric
needs (a question, passages, a reference answer), the run is refused in one line that names the
columns the file has and the ``column_map`` that would read them. A field missing from only
some records is left to those records' own errors and null metrics.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Sequence

from ragscale.columns import guess, remap
from ragscale.errors import RecordError, UserError
from ragscale.io.frames import is_written
from ragscale.io.inputs import InputFile

SAMPLE = 1000  # records read per file
WHAT = {"answer": "an answer", "question": "a question", "contexts": "retrieved passages",
        "reference": "a reference answer"}


def sample(f: InputFile, n: int = SAMPLE) -> Iterator[Any]:
    """The first ``n`` records of an input file as parsed objects (lines that are not JSON skipped);
    none for open-rag-eval's CSV, whose layout its own reader checks."""
    if f.fmt == "jsonl":
        with open(f.path, "rb") as fh:
            count = 0
            for line in fh:
                if count >= n:
                    return
                if not line.strip():
                    continue
                count += 1
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
    elif f.fmt == "table":
        from ragscale.io.table_csv import read_rows

        yield from read_rows(f.path, limit=n)
    elif f.fmt == "parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(f.path).iter_batches(batch_size=n):
            yield from batch.to_pylist()
            return


def present(obj: Any, columns: dict[str, str]) -> set[str]:
    """The fields (answer, question, contexts, reference) a record holds, read as the pipeline reads it."""
    from ragscale.record import extract_fields, query_of

    if not isinstance(obj, dict) or obj.get("input_error"):
        return set()
    view = remap(obj, columns)
    out = {"question"} if query_of(view).strip() else set()
    try:
        fields = extract_fields(view, need_targets=False)
    except RecordError:
        return out
    if fields["prediction"]:
        out.add("answer")
    if fields["passages"]:
        out.add("contexts")
    if fields["targets"]:
        out.add("reference")
    return out


def _columns(records: Iterable[Any]) -> list[str]:
    seen: dict[str, None] = {}
    for obj in records:
        if isinstance(obj, dict):
            seen.update(dict.fromkeys(map(str, obj)))
    return list(seen)


def suggestion(found: Sequence[str], missing: Iterable[str], columns: dict[str, str]) -> str:
    """``column_map={...} in Python, columns.<field>=<name> on the command line`` for the fields
    that ``found`` columns likely hold (ragscale.columns SYNONYMS), or how to name them."""
    guesses = {f: guess(found, f) for f in ("question", "answer", "contexts", "reference") if f not in columns}
    guesses = {f: g for f, g in guesses.items() if g is not None and g not in columns.values()}
    if not any(f in guesses for f in missing):
        field = next(iter(missing))
        return f"name its column with column_map={{'{field}': NAME}} in Python, columns.{field}=NAME on the command line"
    mapping = ", ".join(f"{f!r}: {g!r}" for f, g in guesses.items())
    cli = " ".join(f"columns.{f}={g}" for f, g in guesses.items())
    return f"name your columns with column_map={{{mapping}}} in Python, {cli} on the command line"


def check_fields(files: Sequence[InputFile], needs: dict[str, list[str]]) -> None:
    """Refuse the run (a one-line UserError) when a file's first records hold no answer, or none
    of them holds a field that ``needs`` (field -> the chosen metrics that need it) names."""
    for f in files:
        records = list(sample(f))
        if not records:
            continue  # an empty file: reported as such by the run
        columns = f.column_map
        held: set[str] = set()
        for obj in records:
            held |= present(obj, columns)
        wanted = {"answer": []} | dict(needs)
        missing = [field for field in wanted if field not in held]
        if not missing:
            continue
        found = _columns(records)
        shown = ", ".join(found[:12]) + (", ..." if len(found) > 12 else "") if found else "none (no JSON objects)"
        field, users = missing[0], wanted[missing[0]]
        names = ", ".join(users[:4]) + (" ..." if len(users) > 4 else "")
        what = f"{names} {'needs' if len(users) == 1 else 'need'} {WHAT[field]}, and no record has one" if users \
            else f"no record has {WHAT[field]}"
        checked = f"the first {len(records)} checked" if len(records) == SAMPLE else f"{len(records)} checked"
        where = "the data" if is_written(f.path) else f.path
        raise UserError(f"{where}: {what} ({checked}); its columns: {shown}; {suggestion(found, missing, columns)}")
