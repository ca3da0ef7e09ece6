"""The normalized fields of an output record, as the reader read them: the one accessor the report
sinks read a record's question, answer, answerability, answer status and passage ids through.

The writer keeps them in each records.jsonl line under ``ragscale.record`` (ragscale.io.output_line),
built from the row's typed columns, which ``ragscale.record.read_record`` filled once from the
input, through the user's column names when the input has its own (``columns.*``). ``record_fields``
reads that entry; for a record without one (written by an older ragscale, or an open-rag-eval
record read back) it derives the fields from the record's input layout with the reader's helpers
(``ragscale.record``: ``query_of``, ``answer_of``, ``answerability_of``, ``passage_ids_of``), as
the sinks did before the entry existed.

A record that failed at input (an ``error`` of stage ``input``) has in its entry what the reader
knew when it stopped: it extracts no answer, answerability or passages from a record it refuses, so
the fields its entry leaves null come from the input layout (what the sinks always showed of such a
record, e.g. in records.parquet and the summary's answerability classes).

The passage and reference texts are not in the entry (they are large, and the output line keeps
them in its input part): ``record_texts`` reads them from the record's input layout with the
reader's ``extract_fields``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ragscale.errors import RecordError
from ragscale.record import answer_of, answerability_of, extract_fields, passage_ids_of, query_of

ENTRY = "record"  # the key of the entry under the output line's ``ragscale`` object


@dataclass(frozen=True)
class RecordFields:
    """An output record's normalized fields (what ``ragscale.record`` holds)."""

    task_id: str | None = None
    query: str | None = None  # the question; None when the record has none
    answer: str | None = None  # the evaluated answer (open-rag-eval's marker NO_ANSWER / API_ERROR when it has none)
    answerability: str | None = None  # MT-RAG's answerability class
    answer_status: str | None = None  # open-rag-eval's answer status (ok, NO_ANSWER, API_ERROR, missing)
    passage_ids: tuple[str, ...] | None = None  # the ids of the record's passages, in order; None when not read


NONE = RecordFields()
FIELDS = ("task_id", "query", "answer", "answerability", "answer_status", "passage_ids")  # the entry's keys


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _ids(value: Any) -> tuple[str, ...] | None:
    return tuple(str(v) for v in value) if isinstance(value, list) else None


def _entry(rec: dict) -> dict | None:
    prov = rec.get("ragscale")
    entry = prov.get(ENTRY) if isinstance(prov, dict) else None
    return entry if isinstance(entry, dict) else None


def failed_at_input(rec: dict) -> bool:
    """Whether the record has an ``error`` of stage ``input`` (the reader refused it)."""
    err = rec.get("error")
    return isinstance(err, dict) and err.get("stage") == "input"


def derived_fields(rec: Any) -> RecordFields:
    """The fields derived from an output record's input layout (MT-RAG, open-rag-eval, RAGAS) with
    the reader's helpers: what a record without a ``ragscale.record`` entry gives."""
    if not isinstance(rec, dict):
        return NONE
    try:
        n: int | None = len(extract_fields(rec, need_targets=False)["passages"])
    except RecordError:
        n = None
    task = rec.get("task_id")
    return RecordFields(
        task_id=None if task is None else str(task),
        query=query_of(rec) or None,
        answer=answer_of(rec),
        answerability=answerability_of(rec),
        answer_status=_str(rec.get("answer_status")),
        passage_ids=None if n is None else tuple(passage_ids_of(rec, n)),
    )


def record_fields(rec: Any) -> RecordFields:
    """An output record's normalized fields: its ``ragscale.record`` entry when it has one, else
    derived from its input layout (:func:`derived_fields`). The fields that the entry of a record
    that failed at input leaves null (the reader stopped before them) come from its input layout."""
    if not isinstance(rec, dict):
        return NONE
    entry = _entry(rec)
    if entry is None:
        return derived_fields(rec)
    fields = RecordFields(
        task_id=_str(entry.get("task_id")),
        query=_str(entry.get("query")) or None,
        answer=_str(entry.get("answer")),
        answerability=_str(entry.get("answerability")),
        answer_status=_str(entry.get("answer_status")),
        passage_ids=_ids(entry.get("passage_ids")),
    )
    if failed_at_input(rec):
        layout = derived_fields(rec)
        fields = replace(fields, **{k: getattr(layout, k) for k in FIELDS if getattr(fields, k) is None})
    return fields


@dataclass(frozen=True)
class RecordTexts:
    """An output record's passage and reference texts, read from its input layout."""

    contexts: list[str] | None  # the passage texts; None when the record cannot be read
    references: list[str] | None  # the reference answers; None when it has none or cannot be read
    passages: list[tuple[str, str]]  # (passage id, text), the ids from the record's fields


def record_texts(rec: Any, fields: RecordFields | None = None) -> RecordTexts:
    """The passage and reference texts of an output record, read from its input part with the
    reader's ``extract_fields`` (the ``ragscale.record`` entry keeps no texts), and each passage
    with its id: the id from ``fields`` (default ``record_fields(rec)``) when they name as many
    passages, else its id in the input layout."""
    try:
        read = extract_fields(rec, need_targets=False)
    except RecordError:
        return RecordTexts(None, None, [])
    texts = read["passages"]
    ids = (fields or record_fields(rec)).passage_ids
    if ids is None or len(ids) != len(texts):
        ids = tuple(passage_ids_of(rec, len(texts)))
    return RecordTexts(texts, read["targets"] or None, list(zip(ids, texts)))


_ENRICHED = "enrichments"  # MT-RAG: the labels of the last user turn


def field_label(rec: dict, name: str) -> str | None:
    """A record's value of a categorical field as a label (a slice, the unit of resampling:
    ragscale.report.slices): ``answerability`` as the reader read it, else the record's field of that name (a list of one value is the value;
    of several, their sorted values joined by ``+``), else the field among the MT-RAG labels of its
    last user turn (``input[-1].enrichments``); None when it has none."""
    if name == "answerability":
        return record_fields(rec).answerability
    value = rec.get(name)
    if value is None:
        turns = rec.get("input")
        last = turns[-1] if isinstance(turns, list) and turns and isinstance(turns[-1], dict) else {}
        labels = last.get(_ENRICHED) if isinstance(last.get(_ENRICHED), dict) else {}
        value = labels.get(name)
    return _label(value)


def _label(value: Any) -> str | None:
    """A cell as a label: a number without a needless ``.0``, ``true``/``false``, None for an empty
    text, NaN or an object."""
    if isinstance(value, list):
        parts = sorted({p for p in (_label(v) for v in value) if p is not None})
        return "+".join(parts) if parts else None
    if value is None or isinstance(value, (dict, bool)):
        return None if not isinstance(value, bool) else str(value).lower()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = int(value) if value.is_integer() else value
    text = str(value).strip()
    return text or None
