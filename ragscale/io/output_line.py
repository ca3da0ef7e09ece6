"""The records.jsonl line of a finished pipeline row (the writer's side of ``ragscale.record``): the
input's fields as the reader kept them, ragscale's metrics, error and provenance, built from the
row's JSON texts without parsing them again."""

from __future__ import annotations

import json

from ragscale.io.lines import clean_nan

# The columns the writer reads (``output_line``): the driver converts only these to Python.
OUTPUT_COLUMNS = ("key", "model_id", "source_file", "source_line", "input_json", "input_metrics", "input_has_model_id",
                  "metrics", "warnings", "error", "judge_errors", "stats", "details")


def _finite(text: str | None, default: str) -> str:
    """A stage's JSON text as the output writes it: non-finite numbers (never valid JSON) as null."""
    if not text:
        return default
    if "NaN" in text or "Infinity" in text:
        return json.dumps(clean_nan(json.loads(text)), ensure_ascii=False)
    return text


def output_line(row: dict) -> str:
    """The records.jsonl line of a finished row: the input's fields kept (NaN as null), plus
    ``model_id``, ``metrics`` (merged over any metrics the input already had), ``error`` and
    ``ragscale`` provenance (record key, source file and line, warnings, judge errors with
    their raw outputs, details). Built from the row's JSON texts without parsing them."""
    metrics = _finite(row.get("metrics"), "{}")
    if row.get("input_metrics"):
        metrics = json.dumps({**json.loads(row["input_metrics"]), **json.loads(metrics)}, ensure_ascii=False)
    prov = (f'{{"record_key": {json.dumps(row["key"], ensure_ascii=False)}, "source_file": {json.dumps(row["source_file"], ensure_ascii=False)}, '
            f'"source_line": {int(row["source_line"])}, '
            f'"warnings": {json.dumps(list(row.get("warnings") or []), ensure_ascii=False)}, '
            f'"judge_errors": {_finite(row.get("judge_errors"), "[]")}, "details": {_finite(row.get("details"), "{}")}}}')
    head = (row.get("input_json") or "{}")[:-1]
    own = "" if row.get("input_has_model_id") else f'"model_id": {json.dumps(row["model_id"], ensure_ascii=False)}, '
    tail = f'{own}"metrics": {metrics}, "error": {row.get("error") or "null"}, "ragscale": {prov}}}'
    return head + (", " if head.strip() != "{" else "") + tail
