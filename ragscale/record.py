"""The Record: the one contract between input readers, pipeline stages and writers.

``read_record`` parses an input line once and extracts, validated, everything the stages
need: the answer (``prediction``), reference answers (``targets``), passages with their ids,
the question and the conversation turns, answerability, open-rag-eval's answer status and
the input's own taxonomy labels. A pipeline row is the Record's typed columns plus what the
stages add: metrics (a typed struct), warnings, an ``error`` ({stage, message}), judge errors,
details and batch counters (ragscale.row). The writer rebuilds the output line from ``input_json`` (the
input object as the output keeps it) without parsing the input again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ragscale.columns import RAGAS_ANSWER, RAGAS_CONTEXTS, RAGAS_QUESTION, RAGAS_REFERENCE, no_answer, remap
from ragscale.errors import RecordError
from ragscale.io.identity import model_of
from ragscale.io.lines import clean_nan, parse
from ragscale.registry import REGISTRY
from ragscale.row import add_judge_errors, row_schema  # noqa: F401 - re-exported: the stages add judge errors through the record
from ragscale.io.output_line import OUTPUT_COLUMNS, output_line  # noqa: F401 - re-exported: the writer's side of the Record

ROW_SCHEMA = row_schema(())  # a row with no metric planned (a run plans its own: ragscale.row.row_schema)
RESERVED = ("model_id", "metrics", "error", "ragscale")  # keys of an output record that ragscale writes (model_id first)


@dataclass
class Record:
    """One input record as every stage sees it, built once by ``read_record``."""

    key: str
    model_id: str
    task_id: str | None
    source_file: str
    source_line: int
    input_json: str
    input_metrics: str | None = None
    input_has_model_id: bool = False
    query: str = ""
    conversation: list[dict] | None = None
    prediction: str | None = None
    targets: list[str] | None = None
    passages: list[str] | None = None
    passage_ids: list[str] | None = None
    answerability: str | None = None
    answer_status: str | None = None
    labels: str | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None

    def to_row(self) -> dict:
        """The pipeline row of the record as a worker sees it (ragscale.row), before any metric."""
        return {**vars(self), "metrics": {}, "judge_errors": [], "stats": None, "details": {}}


def _text(value: Any, where: str) -> str:
    if isinstance(value, dict):
        value = value.get("text")
    if value is None:
        raise RecordError("input", f"no {where}")
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
TABLE_FORMAT = "csv-table"  # the ``format`` of a table CSV's row that could not be read (ragscale.io.table_csv)


@dataclass(frozen=True)
class Reader:
    """An input layout (registry kind ``reader``, ragscale/registry.py): ``detect(obj)`` says whether
    a record (a JSON object) is in it; ``fields(obj, need_targets)`` validates it and returns its
    ``prediction``, ``targets``, ``passages`` (texts) and ``answerability`` (optionally ``warnings``),
    raising RecordError(stage="input") with a precise message for a bad record."""

    name: str
    detect: Callable[[dict], bool]
    fields: Callable[..., dict]


DEFAULT_READER = "mtrag"  # MT-RAG's generation records: tried last, it reads what no other layout claims


def reader_of(obj: dict) -> Reader:
    """The reader of a record: the first registered one that detects it (ragscale's in the order
    below, then other packages'), MT-RAG's when none does."""
    readers = REGISTRY.entries("reader")
    for name, reader in readers.items():
        if name != DEFAULT_READER and reader.detect(obj):
            return reader
    return readers[DEFAULT_READER]


def extract_fields(obj: Any, *, need_targets: bool = True, need_answer: bool = True,
                   need_passages: bool = True) -> dict:
    """Validate a record and extract prediction, target and passage texts, by its layout's reader
    (:func:`reader_of`).

    MT-RAG generation records: ``predictions[0].text``, ``targets`` (required when
    ``need_targets``), ``contexts``. open-rag-eval CSV records (normalized by
    ragscale.io.orag_csv): ``generated_answer`` and ``passages``; a row group that
    open-rag-eval skips (no answer, ``NO_ANSWER``, ``API_ERROR``) is kept with an empty
    prediction and a warning, so its judged metrics are null with that reason.

    RAGAS-style records (``user_input``, ``response``, ``reference``, ``retrieved_contexts``,
    or ragas' legacy ``question``, ``answer``, ``ground_truth``, ``contexts``): the
    response, ``[reference]`` when given, and the contexts.

    Without ``need_answer`` (a run whose metrics read no answer: retrieval only), an MT-RAG record
    without ``predictions`` (MT-RAG's retrieval task, task A) is read with an empty answer, and
    without ``need_passages`` too (no metric reads the passages' texts: retrieval against qrels
    alone) a passage without a text (an id and a score) is read as an empty one.

    Raises RecordError(stage="input") with a precise message for a bad record.
    """
    if not isinstance(obj, dict):
        raise RecordError("input", f"record must be a JSON object, got {type(obj).__name__}")
    reader = reader_of(obj)
    if not need_answer and reader.name == DEFAULT_READER:
        return _mtrag_fields(obj, need_targets, need_answer=False, need_passages=need_passages)
    return reader.fields(obj, need_targets=need_targets)


def _table_error(obj: dict, need_targets: bool = True) -> dict:
    """A table CSV's row that could not be read (ragscale.io.table_csv): its input error."""
    raise RecordError("input", str(obj["input_error"]))


def _mtrag_fields(obj: dict, need_targets: bool = True, need_answer: bool = True, need_passages: bool = True) -> dict:
    preds = obj.get("predictions")
    unread = not need_answer and not preds  # a retrieval record (MT-RAG's task A): no answer to read
    if not unread and (not isinstance(preds, list) or not preds):
        if "predictions" in obj or any(k in obj for k in ("targets", "input")):  # MT-RAG's layout: its words
            raise RecordError("input", "record has no 'predictions' (a non-empty list of {'text': ...})")
        raise RecordError("input", no_answer(obj))
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
        "prediction": "" if unread else _text(preds[0], "predictions[0].text"),
        "targets": [_text(t, f"targets[{i}].text") for i, t in enumerate(targets)],
        "passages": [_text(c, f"contexts[{i}].text") if need_passages or _has_text(c) else ""
                     for i, c in enumerate(contexts)],
        "answerability": answerability_of(obj),
    }


def _has_text(context: Any) -> bool:
    text = context.get("text") if isinstance(context, dict) else context
    return isinstance(text, str) and bool(text.strip())


def is_ragas_layout(obj: dict) -> bool:
    """A RAGAS-style record: ``user_input``/``response`` (ragas' SingleTurnSample) or the legacy
    ``question``/``answer``, and no MT-RAG ``predictions``."""
    return "predictions" not in obj and any(k in obj for k in RAGAS_ANSWER)


def _first_key(obj: dict, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if obj.get(k) is not None), None)


def _ragas_fields(obj: dict, need_targets: bool = True) -> dict:
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
        "targets": ([_text(t, f"{ref}[{i}]") for i, t in enumerate(obj[ref])] if isinstance(obj[ref], list)
                    else [_text(obj[ref], ref)]) if ref else [],
        "passages": [_text(c, f"{ctx_key}[{i}]") for i, c in enumerate(contexts)],
        "answerability": answerability_of(obj),
    }


def _orag_fields(obj: dict, need_targets: bool = True) -> dict:
    if obj.get("input_error"):
        raise RecordError("input", str(obj["input_error"]))
    passages = obj.get("passages") or []
    out = {
        "prediction": "",
        "targets": [],
        "passages": [_text(p, f"passages[{i}].text") for i, p in enumerate(passages)],
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


# ragscale's input layouts, in the order they are tried (MT-RAG's, the default, last)
OWN_READERS = (Reader("open-rag-eval", lambda obj: obj.get("format") == ORAG_FORMAT, _orag_fields),
               Reader("csv-table", lambda obj: obj.get("format") == TABLE_FORMAT and bool(obj.get("input_error")),
                      _table_error),
               Reader("ragas", lambda obj: is_ragas_layout(obj), _ragas_fields),
               Reader(DEFAULT_READER, lambda obj: True, _mtrag_fields))
for _reader in OWN_READERS:
    REGISTRY.register("reader", _reader.name, _reader)


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
    when the record has one (``None`` for a run without an answer), RAGAS' response, another
    package's layout's answer (its reader's), else MT-RAG's ``predictions[0].text``; ``None`` when
    it is not a string."""
    if obj.get("format") == ORAG_FORMAT or "generated_answer" in obj:
        answer = obj.get("generated_answer")
    elif is_ragas_layout(obj):
        answer = obj.get(_first_key(obj, RAGAS_ANSWER) or "response")
    elif (reader := reader_of(obj)) not in OWN_READERS:  # another package's layout: its reader's answer
        try:
            answer = reader.fields(obj, need_targets=False)["prediction"]
        except RecordError:
            answer = None
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


ENGINE_ERROR = "engine error"  # how a judge error of an engine that failed (after its retries) starts


def judge_error_kind(err: dict) -> str:
    """A ``judge_errors`` entry's kind: ``undefined`` (the metric has no value by definition),
    ``engine`` (the engine gave no output after its retries: the record failed, docs/exit-codes.md)
    or ``parse`` (the judge answered, but no usable judgement came of it)."""
    if err.get("undefined"):
        return "undefined"
    return "engine" if str(err.get("reason", "")).startswith(ENGINE_ERROR) else "parse"


def error_json(stage: str, message: str) -> str:
    return json.dumps({"stage": stage, "message": message}, ensure_ascii=False)


def _turns(value: Any) -> list[dict] | None:
    """MT-RAG's conversation turns as ``{speaker, text}`` strings (what the judges render); None
    when the input has no turns or they are not objects."""
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        return None
    return [{k: (None if t.get(k) is None else str(t.get(k))) for k in ("speaker", "text")} for t in value]


UNREADABLE = "input_line"  # where an output record keeps an input line that is not a JSON object


def is_unreadable(rec: dict) -> bool:
    """Whether an output record is an input line that is not a JSON object (kept under
    ``input_line``, with an input error): it names no model, the reader gave it its file's."""
    return rec.get("error") is not None and UNREADABLE in rec and "ragscale" in rec


def _read_input(rec: Record, obj: dict, view: dict, text: str, columns: dict[str, str]) -> None:
    """The input part of a readable record: what the output keeps of it (the line itself when it can:
    no NaN, no key ragscale writes but its own string model_id), its own metrics, task id, question,
    turns, answer status and labels."""
    own_id = isinstance(view.get("model_id"), str) and bool(view["model_id"].strip())
    mapped_id = view is not obj and columns.get("model_id", "model_id") != "model_id"
    # a mapped task id is written as task_id (as ragscale writes model_id), so that every tool reads it
    extra = {"task_id": str(view["task_id"])} if view is not obj and "task_id" not in obj \
        and view.get("task_id") is not None else {}
    verbatim = "NaN" not in text and "Infinity" not in text and not any(k in obj for k in RESERVED[1:]) \
        and ("model_id" not in obj or own_id) and not mapped_id and not extra
    clean = obj if verbatim else clean_nan(obj)
    rec.input_has_model_id = verbatim and own_id and "model_id" in obj
    rec.input_json = text.strip() if verbatim else json.dumps(
        {**{k: v for k, v in clean.items() if k not in RESERVED}, **extra}, ensure_ascii=False)
    if isinstance(clean.get("metrics"), dict) and clean["metrics"]:
        rec.input_metrics = json.dumps(clean["metrics"], ensure_ascii=False)
    if view.get("task_id") is not None:
        rec.task_id = str(view["task_id"])
    rec.query, rec.conversation = query_of(view), _turns(view.get("input"))
    if isinstance(obj.get("answer_status"), str):
        rec.answer_status = obj["answer_status"]
    if obj.get("labels") is not None:
        rec.labels = json.dumps(clean["labels"])


def read_record(raw: str | bytes, *, key: str, model_id: str, task_id: str | None, source_file: str,
                source_line: int, need_targets: bool, columns: dict[str, str] | None = None,
                need_answer: bool = True, need_passages: bool = True) -> Record:
    """Parse one input line (the only parse of it) into a Record; a bad record gets an ``error``
    (stage ``input``) and keeps its input for the output. A line that cannot be read (not UTF-8,
    not JSON, nested too deep: ragscale.io.lines) or names no usable model (ragscale.io.identity)
    is kept whole under ``input_line``, its error naming the file and line. ``columns`` names the
    user's columns for the fields ragscale reads (ragscale.columns); the output keeps the user's names.
    ``need_answer``, ``need_passages`` False: the run reads no answer, no passage text (:func:`extract_fields`)."""
    text = raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")
    rec = Record(key, model_id, task_id, source_file, source_line, input_json=json.dumps({UNREADABLE: text}, ensure_ascii=False))
    try:
        obj = parse(raw)
        view = remap(obj, columns) if columns else obj
        own = model_of(view, "") if isinstance(view, dict) else ""
    except ValueError as e:  # LineError, or a model_id that is no id
        rec.error = error_json("input", f"{source_file}: line {source_line}: {e}")
        return rec
    if isinstance(obj, dict):
        _read_input(rec, obj, view, text, columns or {})
        rec.model_id = own or rec.model_id
    try:
        if need_answer and columns and "answer" in columns and isinstance(obj, dict) \
                and obj.get(columns["answer"]) is None:
            raise RecordError("input", f"no answer: the record has no {columns['answer']!r} (columns.answer)")
        fields = extract_fields(view, need_targets=need_targets, need_answer=need_answer, need_passages=need_passages)
    except RecordError as e:
        rec.error = error_json(e.stage, e.message)
        return rec
    rec.warnings = list(fields.pop("warnings", []))
    for name, value in fields.items():
        setattr(rec, name, value)
    rec.passage_ids = passage_ids_of(view, len(rec.passages or []))
    return rec
