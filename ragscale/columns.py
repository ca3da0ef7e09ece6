"""The fields ragscale reads from a record, by their canonical names, and the column names
other tools use for them. ``column_map`` / ``columns.<field>=<name>`` name the user's own
column for a field; this table is the one definition the reader, the config schema, the input
check and docs/inputs.md use.
"""

from __future__ import annotations

from typing import Any

from ragscale.io.identity import ident

# field -> what it is (docs/inputs.md shows this table)
FIELDS: dict[str, str] = {
    "question": "the user's question (a string)",
    "answer": "the evaluated answer (a string)",
    "contexts": "the retrieved passages (a list of strings or of {text} objects; one string is one passage)",
    "reference": "the reference answer (a string, or a list of strings for several references)",
    "model_id": "the model that answered (a string; default: the file's or the data's name)",
    "task_id": "the task (question) id, shared by every model's answer to it",
    "answerability": "MT-RAG's answerability label (ANSWERABLE, UNANSWERABLE, PARTIAL, ...)",
}

# field -> names other tools and datasets use for it, most common first (for the suggestion
# a refused input gets: "column_map={'answer': 'generated'}")
SYNONYMS: dict[str, tuple[str, ...]] = {
    "question": ("question", "user_input", "query", "prompt", "input", "instruction", "q"),
    "answer": ("answer", "response", "generated_answer", "generated", "generation", "prediction", "output",
               "completion", "model_answer", "pred", "a"),
    "contexts": ("contexts", "retrieved_contexts", "context", "passages", "documents", "docs", "retrieved",
                 "chunks", "sources", "evidence"),
    "reference": ("reference", "ground_truth", "gold", "gold_answer", "expected", "expected_answer", "target",
                  "targets", "label", "answer_gt", "ideal"),
    "model_id": ("model_id", "model", "system", "run", "model_name"),
    "task_id": ("task_id", "question_id", "query_id", "qid", "id", "sample_id"),
    "answerability": ("answerability",),
}

# The names each input layout reads for a field (ragscale.record's readers): ragas' EvaluationDataset
# names, then its legacy (0.1) names; MT-RAG's; open-rag-eval's.
RAGAS_ANSWER = ("response", "answer")
RAGAS_QUESTION = ("user_input", "question")
RAGAS_REFERENCE = ("reference", "ground_truth")
RAGAS_CONTEXTS = ("retrieved_contexts", "contexts")
LAYOUT_NAMES: dict[str, tuple[str, ...]] = {
    "question": (*RAGAS_QUESTION, "query"),
    "answer": (*RAGAS_ANSWER, "predictions", "generated_answer"),
    "contexts": RAGAS_CONTEXTS,
    "reference": (*RAGAS_REFERENCE, "targets"),
    "model_id": ("model_id",),
    "task_id": ("task_id",),
    "answerability": ("answerability",),
}
# where a mapped field goes in the layout the record is read as
_RAGAS_KEY = {"question": "user_input", "answer": "response", "contexts": "retrieved_contexts", "reference": "reference"}
_MTRAG_KEY = {"question": "query", "answer": "predictions", "contexts": "contexts", "reference": "targets"}


def mapped(columns: Any) -> dict[str, str]:
    """The user's column names by field (``column_map`` / ``columns.<field>``), unset fields left out;
    an unknown field is a one-line UserError."""
    from ragscale.errors import UserError, did_you_mean

    items = dict(columns or {})
    for field in items:
        if field not in FIELDS:
            raise UserError(f"column_map: unknown field {field!r}{did_you_mean(field, FIELDS)}; "
                            f"the fields are {', '.join(FIELDS)}")
    out = {f: c for f, c in items.items() if c is not None}
    for field, col in out.items():
        if not isinstance(col, str) or not col:
            raise UserError(f"column_map: the column for {field!r} must be a column name, got {col!r}")
    return out


def as_list(value: Any) -> Any:
    """A list-valued cell as a list: a list as is; a string that is a JSON or Python list literal
    (how CSV exports, ragas' among them, write lists) parsed; any other string one item."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            import ast
            import json

            from ragscale.io.lines import MAX_DEPTH, depth

            for parse in (json.loads, ast.literal_eval):
                try:
                    parsed = parse(text)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    continue
                if isinstance(parsed, list) and depth(parsed) <= MAX_DEPTH:  # deeper: kept as the text it is
                    return parsed
        return [value]
    return value


def remap(obj: Any, columns: dict[str, str]) -> Any:
    """The record ``obj`` with the user's columns (``columns``: field -> column name) under the
    names its layout reads: ragas' names (``response``, ``retrieved_contexts`` ...) when the
    answer is mapped or the record is not MT-RAG's, else MT-RAG's (``predictions``, ``contexts``,
    ``targets``). The layout's own names for a mapped field are dropped, so they never compete."""
    if not columns or not isinstance(obj, dict):
        return obj
    values = {f: obj.get(c) for f, c in columns.items()}
    mtrag = "answer" not in columns and "predictions" in obj
    view = dict(obj)
    for field in columns:
        for name in LAYOUT_NAMES[field]:
            view.pop(name, None)
    for field, value in values.items():
        if field in ("model_id", "task_id"):
            try:
                value = ident(value)
            except ValueError:  # not an id: the reader refuses it (a model), or keeps its text (a task)
                pass
        elif field == "contexts" and value is not None:
            value = as_list(value)
        elif field == "reference" and value is not None:
            value = as_list(value) if mtrag or isinstance(value, list) else value
        if mtrag and field in _MTRAG_KEY and value is not None and field in ("answer", "reference"):
            value = [v if isinstance(v, dict) else {"text": v} for v in (value if isinstance(value, list) else [value])]
        key = (_MTRAG_KEY if mtrag else _RAGAS_KEY).get(field, field)
        if value is not None:
            view[key] = value
    return view


def guess(found: Any, field: str) -> str | None:
    """The column among ``found`` that most likely holds ``field`` (its SYNONYMS, in order), or None."""
    names = {str(c).casefold(): str(c) for c in found}
    return next((names[s] for s in SYNONYMS[field] if s in names), None)


def no_answer(obj: dict) -> str:
    """The message of a record in which no field holds the answer: the names ragscale reads,
    the record's own fields, and the mapping that would read it (``columns.answer=generated``)."""
    fields = ", ".join(list(map(str, obj))[:12]) + (", ..." if len(obj) > 12 else "")
    hint = guess(obj, "answer")
    how = f"columns.answer={hint} (column_map={{'answer': {hint!r}}} in Python)" if hint else \
        "columns.answer=NAME (column_map={'answer': NAME} in Python)"
    return (f"no answer: the record has none of response, answer (ragas), predictions (MT-RAG), generated_answer "
            f"(open-rag-eval); its fields: {fields or 'none'}; name the answer's column with {how}")
