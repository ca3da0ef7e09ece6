"""The records.jsonl line of a finished pipeline row (the writer's side of ``ragscale.record``): the
input's fields as the reader kept them, ragscale's metrics, error and provenance, and under
``ragscale.record`` the record's normalized fields as the reader read them (``record_entry``, read back
by ragscale.record_fields: the one accessor of the report sinks). The metrics
are serialised here, once per record; the details and judge errors the stages serialised once
each (ragscale.row) are joined as they are."""

from __future__ import annotations

import json

from ragscale.io.lines import clean_nan
from ragscale.io.orag_csv import API_ERROR, NO_ANSWER

# The columns the writer reads (``output_line``): the driver converts only these to Python.
ENTRY_COLUMNS = ("task_id", "query", "prediction", "answerability", "answer_status", "passage_ids")  # record_entry
OUTPUT_COLUMNS = ("key", "model_id", "source_file", "source_line", "input_json", "input_metrics", "input_has_model_id",
                  "metrics", "metric_keys", "warnings", "error", "judge_errors", "stats", "details", *ENTRY_COLUMNS)


def _finite(text: str | None, default: str) -> str:
    """A JSON text as the output writes it: non-finite numbers (never valid JSON) as null."""
    if not text:
        return default
    if "NaN" in text or "Infinity" in text:
        return json.dumps(clean_nan(json.loads(text)), ensure_ascii=False)
    return text


def _details(details: dict | None) -> str:
    """``{judge: details}`` from each judge's JSON text (ragscale.row), without parsing them."""
    return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_finite(v, 'null')}"
                           for k, v in (details or {}).items()) + "}"


def record_entry(row: dict) -> str:
    """The output line's ``ragscale.record``: the record's normalized fields from the row's typed
    columns (no passage or reference text: those stay in the input part). ``answer`` is the evaluated
    answer: the prediction; for an open-rag-eval run without one, open-rag-eval's marker that its
    ``generated_answer`` holds (``NO_ANSWER``, ``API_ERROR``; ``answer_status`` says which); else null.
    A record the reader refused has what it read before it stopped (nulls otherwise)."""
    status = row.get("answer_status")
    answer = row.get("prediction") or (status if status in (NO_ANSWER, API_ERROR) else None)
    ids = row.get("passage_ids")
    return json.dumps({"task_id": row.get("task_id"), "query": row.get("query") or None, "answer": answer,
                       "answerability": row.get("answerability"), "answer_status": status,
                       "passage_ids": None if ids is None else list(ids)}, ensure_ascii=False)


def output_line(row: dict) -> str:
    """The records.jsonl line of a finished row: the input's fields kept (NaN as null), plus
    ``model_id``, ``metrics`` (merged over any metrics the input already had), ``error`` and
    ``ragscale`` provenance (record key, source file and line, the record's normalized fields
    (``record``: :func:`record_entry`), warnings, judge errors with their raw outputs, details).
    ``row`` is a worker's row (ragscale.row): metrics a dict."""
    ours = row.get("metrics") or {}
    if row.get("input_metrics"):
        ours = {**json.loads(row["input_metrics"]), **ours}
    metrics = _finite(json.dumps(ours, ensure_ascii=False), "{}")
    prov = (f'{{"record_key": {json.dumps(row["key"], ensure_ascii=False)}, "source_file": {json.dumps(row["source_file"], ensure_ascii=False)}, '
            f'"source_line": {int(row["source_line"])}, '
            f'"record": {record_entry(row)}, '
            f'"warnings": {json.dumps(list(row.get("warnings") or []), ensure_ascii=False)}, '
            f'"judge_errors": [{", ".join(_finite(e, "null") for e in row.get("judge_errors") or ())}], '
            f'"details": {_details(row.get("details"))}}}')
    head = (row.get("input_json") or "{}")[:-1]
    own = "" if row.get("input_has_model_id") else f'"model_id": {json.dumps(row["model_id"], ensure_ascii=False)}, '
    tail = f'{own}"metrics": {metrics}, "error": {row.get("error") or "null"}, "ragscale": {prov}}}'
    return head + (", " if head.strip() != "{" else "") + tail
