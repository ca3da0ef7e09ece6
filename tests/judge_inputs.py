"""The judge tests' inputs: ``judge_input_of(obj, row)`` is the ``JudgeInput`` of the shapes the tests
write, an input object (MT-RAG's ``input`` turns, a ``query`` or ragas' ``user_input``, open-rag-eval's
``passages`` with ids and ``answer_status``, ``labels``) and a pipeline row (``prediction``,
``targets``, ``passages``, ``metrics``...), read as ragscale's reader reads them (ragscale.record:
``query_of``, ``passage_ids_of``); what the row holds wins."""

from __future__ import annotations

import json
from typing import Any

from ragscale.judges.judge_input import JudgeInput, judge_input
from ragscale.record import passage_ids_of, query_of


def judge_input_of(obj: dict | None = None, row: dict | None = None, **fields: Any) -> JudgeInput:
    """The JudgeInput of an input object and a row (both optional); ``fields`` are row columns too."""
    obj, row = obj or {}, {**(row or {}), **fields}
    turns = obj.get("input")
    view = {
        "query": query_of(obj),
        "conversation": turns if isinstance(turns, list) else None,
        "passage_ids": passage_ids_of(obj, len(row.get("passages") or [])),
        "answer_status": obj.get("answer_status"),
        "labels": None if obj.get("labels") is None else json.dumps(obj["labels"]),
    }
    return judge_input({**view, **row})
