"""Who answered what: a record's model, its task and its run, read the same way by the scan (which
finds the records that repeat an earlier one), the reader (``ragscale.record.read_record``) and the
report (significance pairs models by task). docs/inputs.md states the rules.

- ``model_id``: a string as is; a number as its string (``123`` -> ``"123"``, as a CSV cell reads);
  missing, null or blank: the file's name; anything else (a list, an object, true/false) is refused.
- The task: ``task_id``, else ``query_id`` (open-rag-eval), else ``conversation_id`` + ``turn``.
- The run: open-rag-eval's ``query_run`` (repeated runs of one task are one record each).

Two records with the same model, task and run are one answer given twice: the first (in input order)
is scored, each later one is an input error naming the first (the summary counts them).
"""

from __future__ import annotations

import math
from typing import Any


REPEAT = "(a repeat: only the first answer is scored)"  # ends the input error of a record that repeats one


def ident(value: Any) -> str | None:
    """An id cell as ragscale keeps it: a string as is, a number as its string (``7`` -> ``"7"``), None as
    None; a ValueError for anything else (a list, an object, a boolean, NaN)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(value)
    raise ValueError(f"model_id must be a string or a number, got {type(value).__name__}")


def model_of(view: dict, default: str) -> str:
    """The model of a record (read through the user's columns): its ``model_id`` (:func:`ident`),
    ``default`` (the file's name) when it has none or a blank one; a ValueError when it is no id."""
    model = ident(view.get("model_id"))
    return default if model is None or not model.strip() else model


def task_key(rec: dict) -> str | None:
    """What identifies a record's task across models: ``task_id``, else ``query_id`` (open-rag-eval),
    else ``conversation_id`` + ``turn``; None when the record has none of them."""
    for name in ("task_id", "query_id"):
        if rec.get(name) is not None:
            return f"{name}={rec[name]}"
    if rec.get("conversation_id") is not None and rec.get("turn") is not None:
        return f"conversation_id={rec['conversation_id']}#turn={rec['turn']}"
    return None


def slot_of(view: Any, default: str) -> tuple[str, str, str] | None:
    """(model, task, run) of a record: what two records answering the same must not share; None for
    a record without a task (nothing to pair it by) or without a usable model id."""
    if not isinstance(view, dict):
        return None
    try:
        model = model_of(view, default)
        task = task_key(view)
    except (ValueError, RecursionError):
        return None
    return None if task is None else (model, task, str(view.get("query_run")))
