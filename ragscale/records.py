"""The Record: the one contract between input readers, pipeline stages and writers.

A pipeline row carries the input record verbatim (``raw``, JSON text) plus the fields
that the metrics need, extracted and validated once (``prediction``, ``targets``,
``passages``), the metrics computed so far (JSON text) and an ``error`` (JSON text or
null). Every stage keeps one output row per input row.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable

import pyarrow as pa

from ragscale.errors import RecordError

ROW_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("model_id", pa.string()),
        ("task_id", pa.string()),
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
        ("raw", pa.string()),
        ("prediction", pa.string()),
        ("targets", pa.list_(pa.string())),
        ("passages", pa.list_(pa.string())),
        ("answerability", pa.string()),
        ("metrics", pa.string()),
        ("warnings", pa.list_(pa.string())),
        ("error", pa.string()),
        ("judge_errors", pa.string()),  # JSON list of {judge, reason, raw} (parse failures)
        ("stats", pa.string()),  # JSON counters/seconds of a batch, on one row
        ("details", pa.string()),  # JSON {judge: details} (rationales, per-item labels)
    ]
)


def clean_nan(value: Any) -> Any:
    """Replace float NaN/inf (MT-RAG files carry literal ``NaN`` tokens) with None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_nan(v) for v in value]
    return value


def _text(value: Any, where: str) -> str:
    if isinstance(value, dict):
        value = value.get("text")
    if not isinstance(value, str):
        raise RecordError("input", f"{where} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise RecordError("input", f"{where} is empty")
    return value


def answerability_of(obj: dict) -> str | None:
    """MT-RAG answerability: top-level ``answerability``, else ``enrichments``, else the last
    user turn's ``enrichments`` (a list like ``["ANSWERABLE"]`` or a plain string)."""
    candidates = [obj.get("answerability"), (obj.get("enrichments") or {}).get("answerability")]
    turns = obj.get("input")
    if isinstance(turns, list) and turns and isinstance(turns[-1], dict):
        candidates.append((turns[-1].get("enrichments") or {}).get("answerability"))
    for c in candidates:
        if isinstance(c, list) and c and isinstance(c[0], str):
            return c[0]
        if isinstance(c, str) and c:
            return c
    return None


ORAG_FORMAT = "open-rag-eval-csv"  # the ``format`` of records normalized from open-rag-eval's CSV


def extract_fields(obj: Any, *, need_targets: bool = True) -> dict:
    """Validate a record and extract prediction, target and passage texts.

    MT-RAG generation records: ``predictions[0].text``, ``targets`` (required when
    ``need_targets``), ``contexts``. open-rag-eval CSV records (normalized by
    ragscale.io.orag_csv): ``generated_answer`` and ``passages``; a row group that
    open-rag-eval skips (no answer, ``NO_ANSWER``, ``API_ERROR``) is kept with an empty
    prediction and a warning, so its judged metrics are null with that reason.

    RAGAS-style records (``user_input``, ``response``, ``reference``, ``retrieved_contexts``,
    or ragas' legacy ``question``, ``answer``, ``ground_truth``, ``contexts``): the
    response, ``[reference]`` when given, and the contexts.

    Raises RecordError(stage="input") with a precise message for a bad record.
    """
    if not isinstance(obj, dict):
        raise RecordError("input", f"record must be a JSON object, got {type(obj).__name__}")
    if obj.get("format") == ORAG_FORMAT:
        return _orag_fields(obj)
    if is_ragas_layout(obj):
        return _ragas_fields(obj)
    preds = obj.get("predictions")
    if not isinstance(preds, list) or not preds:
        raise RecordError("input", "record has no 'predictions' (a non-empty list of {'text': ...})")
    targets = obj.get("targets")
    if need_targets and (not isinstance(targets, list) or not targets):
        raise RecordError("input", "record has no 'targets' (a non-empty list of {'text': ...})")
    if not isinstance(targets, list):
        targets = []
    contexts = obj.get("contexts")
    if contexts is None:
        contexts = []
    if not isinstance(contexts, list):
        raise RecordError("input", f"'contexts' must be a list, got {type(contexts).__name__}")
    return {
        "prediction": _text(preds[0], "predictions[0].text"),
        "targets": [_text(t, f"targets[{i}].text") for i, t in enumerate(targets)],
        "passages": [_text(c, f"contexts[{i}].text") for i, c in enumerate(contexts)],
        "answerability": answerability_of(obj),
    }


RAGAS_ANSWER = ("response", "answer")  # ragas' EvaluationDataset names, then its legacy (0.1) names
RAGAS_QUESTION = ("user_input", "question")
RAGAS_REFERENCE = ("reference", "ground_truth")
RAGAS_CONTEXTS = ("retrieved_contexts", "contexts")


def is_ragas_layout(obj: dict) -> bool:
    """A RAGAS-style record: ``user_input``/``response`` (ragas' SingleTurnSample) or the legacy
    ``question``/``answer``, and no MT-RAG ``predictions``."""
    return "predictions" not in obj and any(k in obj for k in RAGAS_ANSWER)


def _first_key(obj: dict, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if obj.get(k) is not None), None)


def _ragas_fields(obj: dict) -> dict:
    """prediction = ``response`` (or ``answer``); targets = ``[reference]`` (or ``ground_truth``)
    when present; passages = ``retrieved_contexts`` (or ``contexts``), strings or ``{text}``."""
    key = _first_key(obj, RAGAS_ANSWER) or "response"
    ref = _first_key(obj, RAGAS_REFERENCE)
    ctx_key = _first_key(obj, RAGAS_CONTEXTS)
    contexts = obj.get(ctx_key) if ctx_key else []
    if not isinstance(contexts, list):
        raise RecordError("input", f"'{ctx_key}' must be a list of strings, got {type(contexts).__name__}")
    return {
        "prediction": _text(obj.get(key), key),
        "targets": [_text(obj[ref], ref)] if ref else [],
        "passages": [_text(c, f"{ctx_key}[{i}]") for i, c in enumerate(contexts)],
        "answerability": answerability_of(obj),
    }


def _orag_fields(obj: dict) -> dict:
    if obj.get("input_error"):
        raise RecordError("input", str(obj["input_error"]))
    passages = obj.get("passages") or []
    out = {
        "prediction": "",
        "targets": [],
        "passages": [_text(p.get("text") if isinstance(p, dict) else p, f"passages[{i}].text")
                     for i, p in enumerate(passages)],
        "answerability": None,
        "warnings": list(obj.get("warnings") or []),
    }
    status = obj.get("answer_status") or "ok"
    if status == "ok" and isinstance(obj.get("generated_answer"), str) and obj["generated_answer"].strip():
        out["prediction"] = obj["generated_answer"]
    else:
        out["warnings"].append(f"no generated answer ({status}): open-rag-eval skips this query run; "
                               "ragscale keeps it and its answer metrics are null")
    return out


def query_of(obj: dict) -> str:
    """The question a record answers: open-rag-eval's ``query``, else the last user turn of
    MT-RAG's ``input`` conversation, else ``""``."""
    for k in ("query", *RAGAS_QUESTION):
        if isinstance(obj.get(k), str):
            return obj[k]
    turns = obj.get("input")
    if isinstance(turns, list):
        for t in reversed(turns):
            if isinstance(t, dict) and t.get("speaker") == "user" and isinstance(t.get("text"), str):
                return t["text"]
    return ""


def answer_of(obj: dict) -> str | None:
    """The evaluated answer of an input or output record: open-rag-eval's ``generated_answer``
    when the record has one (``None`` for a run without an answer), else MT-RAG's
    ``predictions[0].text``; ``None`` when it is not a string."""
    if obj.get("format") == ORAG_FORMAT or "generated_answer" in obj:
        answer = obj.get("generated_answer")
    elif is_ragas_layout(obj):
        answer = obj.get(_first_key(obj, RAGAS_ANSWER) or "response")
    else:
        preds = obj.get("predictions")
        first = preds[0] if isinstance(preds, list) and preds else None
        answer = first.get("text") if isinstance(first, dict) else first
    return answer if isinstance(answer, str) else None


def passage_ids_of(obj: dict, n: int) -> list[str]:
    """Ids of a record's ``n`` passages, in order: open-rag-eval's ``passage_id`` values
    (``"[1]"``, ...) for normalized CSV records; for MT-RAG ``contexts`` the bracketed
    1-based rank (``"[1]"``, ``"[2]"``, ...), which is what bracket citations refer to."""
    passages = obj.get("passages")
    if isinstance(passages, list) and len(passages) == n and all(isinstance(p, dict) for p in passages):
        return [str(p.get("id")) for p in passages]
    return [f"[{i + 1}]" for i in range(n)]


def add_judge_errors(row: dict, entries: Iterable[dict]) -> None:
    """Append entries (``{judge, reason, raw?, undefined?, ...}``) to the row's ``judge_errors`` JSON list."""
    entries = list(entries)
    if entries:
        errs = json.loads(row["judge_errors"]) if row.get("judge_errors") else []
        errs.extend(entries)
        row["judge_errors"] = json.dumps(errs)


def error_json(stage: str, message: str) -> str:
    return json.dumps({"stage": stage, "message": message})


def output_record(row: dict) -> dict:
    """The record written to records.jsonl: input fields kept (NaN as null), plus
    ``model_id``, ``metrics`` (merged over any metrics the input already had), ``error``
    and ``ragscale`` provenance (record key, source file and line, warnings, judge parse
    failures with their raw outputs)."""
    try:
        obj = json.loads(row["raw"])
    except (TypeError, ValueError):
        obj = None
    if not isinstance(obj, dict):
        obj = {"input_line": row["raw"]}
    obj = clean_nan(obj)
    metrics = dict(obj.get("metrics") or {}) if isinstance(obj.get("metrics"), dict) else {}
    metrics.update(json.loads(row["metrics"]) if row.get("metrics") else {})
    obj["model_id"] = row["model_id"]
    obj["metrics"] = metrics
    obj["error"] = json.loads(row["error"]) if row.get("error") else None
    obj["ragscale"] = {
        "record_key": row["key"],
        "source_file": row["source_file"],
        "source_line": row["source_line"],
        "warnings": list(row.get("warnings") or []),
        "judge_errors": json.loads(row["judge_errors"]) if row.get("judge_errors") else [],
        "details": json.loads(row["details"]) if row.get("details") else {},
    }
    return obj
