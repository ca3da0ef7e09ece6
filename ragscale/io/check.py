"""The inputs checked against what the chosen metrics need, before Ray starts.

The first ``SAMPLE`` records of each file are read the way the pipeline reads them (the user's
``columns`` applied). When none of them has an answer, or none has a field that a chosen metric
needs (a question, passages, a reference answer), the run is refused in one line that names the
columns the file has and the ``column_map`` that would read them. A field missing from only
some records is left to those records' own errors and null metrics. open-rag-eval's CSV is a fixed
layout (its reader checks it) without a reference answer: a metric that needs one is refused.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

from ragscale.columns import guess, remap
from ragscale.errors import RecordError, UserError
from ragscale.io.csv_rows import BOM
from ragscale.io.frames import is_written
from ragscale.io.inputs import InputFile, parquet_file
from ragscale.io.lines import LineError, parse

SAMPLE = 1000  # records read per file
WHAT = {"answer": "an answer", "question": "a question", "contexts": "retrieved passages",
        "reference": "a reference answer"}
ORAG_FIELDS = frozenset({"question", "contexts", "answer", "task_id"})  # open-rag-eval's CSV (ragscale.io.orag_csv)
IDS = ("model_id", "task_id")  # suggested too when a file is read with the wrong names: a model column left
# unmapped would merge every model of the file into one


def sample(f: InputFile, n: int = SAMPLE) -> Iterator[Any]:
    """The first ``n`` records of an input file as parsed objects (lines that cannot be read skipped:
    each is its record's error in the run, ragscale.io.lines); none for open-rag-eval's CSV, whose
    layout its own reader checks."""
    if f.fmt == "jsonl":
        with open(f.path, "rb") as fh:
            count = 0
            for lineno, line in enumerate(fh, start=1):
                if count >= n:
                    return
                if lineno == 1 and line.startswith(BOM):
                    line = line[len(BOM):]
                if not line.strip():
                    continue
                count += 1
                try:
                    yield parse(line)
                except LineError:
                    continue
    elif f.fmt == "table":
        from ragscale.io.table_csv import read_rows

        yield from read_rows(f.path, limit=n)
    elif f.fmt == "parquet":
        for batch in parquet_file(f.path).iter_batches(batch_size=n):
            yield from batch.to_pylist()
            return


def present(obj: Any, columns: dict[str, str]) -> set[str]:
    """The fields (answer, question, contexts, reference, model_id, task_id) a record holds, read as the
    pipeline reads it."""
    from ragscale.record import extract_fields, query_of

    if not isinstance(obj, dict) or obj.get("input_error"):
        return set()
    view = remap(obj, columns)
    out = {"question"} if query_of(view).strip() else set()
    out |= {k for k in IDS if view.get(k) is not None}
    try:
        fields = extract_fields(view, need_targets=False, need_answer=False)  # what it holds, answer or not
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


def suggestion(found: Sequence[str], missing: Sequence[str], columns: dict[str, str]) -> str:
    """``column_map={...} in Python, columns.<field>=<name> on the command line`` for the ``missing``
    fields that ``found`` columns likely hold (ragscale.columns SYNONYMS), or how to name the first."""
    guesses = {f: guess(found, f) for f in (*IDS, "question", "answer", "contexts", "reference") if f in missing}
    guesses = {f: g for f, g in guesses.items() if g is not None and g not in columns.values()}
    if missing[0] not in guesses:
        field = missing[0]
        return f"name its column with column_map={{'{field}': NAME}} in Python, columns.{field}=NAME on the command line"
    mapping = ", ".join(f"{f!r}: {g!r}" for f, g in guesses.items())
    cli = " ".join(f"columns.{f}={g}" for f, g in guesses.items())
    return f"name your columns with column_map={{{mapping}}} in Python, {cli} on the command line"


def check_fields(files: Sequence[InputFile], needs: dict[str, list[str]], need_answer: bool = True) -> None:
    """Refuse the run (a one-line UserError) when a file's first records hold no answer (it is read
    with the wrong names; not asked of a run whose metrics read no answer, ``need_answer`` False),
    or when no file's first records hold a field that ``needs`` (field -> the chosen metrics that
    need it) names; a field that only some files lack is left to their records (null metrics, with
    the reason)."""
    held: set[str] = set()
    first: tuple[InputFile, list] | None = None
    orag: InputFile | None = None
    for f in files:
        if f.fmt == "csv":  # open-rag-eval's fixed layout: its reader checks the columns; it has no reference
            held |= ORAG_FIELDS
            orag = orag or f
            continue
        records = list(sample(f))
        if not records:
            continue  # an empty file: reported as such by the run
        first = first or (f, records)
        mine: set[str] = set()
        for obj in records:
            mine |= present(obj, f.column_map)
        if need_answer and "answer" not in mine:  # read with the wrong names: suggest every field it does not yield
            _refuse(f, records, ["answer", *(n for n in (*IDS, *WHAT) if n not in mine and n != "answer")], [])
        held |= mine
    missing = [field for field in needs if field not in held]
    if missing and first is not None:
        _refuse(*first, missing, needs[missing[0]])
    if missing and orag is not None:
        raise UserError(f"{orag.path}: {_need(needs[missing[0]], missing[0])}, and open-rag-eval's CSV layout has none "
                        "(it holds a question, passages and an answer); give the data as a CSV of one record per row "
                        "or a JSONL with that column (docs/inputs.md)")


def _need(users: list[str], field: str) -> str:
    """'exact_match, RougeL need a reference answer': the chosen metrics that need ``field``."""
    names = ", ".join(users[:4]) + (" ..." if len(users) > 4 else "")
    return f"{names} {'needs' if len(users) == 1 else 'need'} {WHAT[field]}"


def _refuse(f: InputFile, records: list, missing: list[str], users: list[str]) -> None:
    found = _columns(records)
    shown = ", ".join(found[:12]) + (", ..." if len(found) > 12 else "") if found else "none (no JSON objects)"
    field = missing[0]
    what = f"{_need(users, field)}, and no record has one" if users else f"no record has {WHAT[field]}"
    checked = f"the first {len(records)} checked" if len(records) == SAMPLE else f"{len(records)} checked"
    where = "the data" if is_written(f.path) else f.path
    raise UserError(f"{where}: {what} ({checked}); its columns: {shown}; {suggestion(found, missing, f.column_map)}")
