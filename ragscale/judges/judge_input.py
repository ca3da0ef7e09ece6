"""``JudgeInput``: the one input a judge's ``start`` reads (ragscale/judges/base.py), the record's
normalized fields, frozen; ``judge_input`` builds it from a pipeline row.

The judge actor builds it once per record and judge phase (ragscale/actors/judge.py
``start_phase``), after the earlier phases wrote their metrics into the row: ``metrics`` holds
what the earlier stages and judges computed (the nuggets judge reads UMBRELA's grades there).
A judge reads its fields as they are; nothing here re-reads the input record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Sequence

Turn = Mapping[str, Any]  # one conversation turn, ``{"speaker", "text"}``, read-only


def inquiry(turns: Sequence[Turn]) -> str:
    """MT-RAG ``extract_conversation``: one ``speaker: text`` line per turn."""
    return "\n".join(f"{t.get('speaker')}: {t.get('text')}" for t in turns)


def _read_only(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class JudgeInput:
    """What a judge reads of one record. The containers are tuples and read-only mappings
    (``metrics`` and ``labels`` read-only at their top level: the values inside are the parsed
    JSON). ``passage_ids`` has one id per passage: ids that do not match the passages one to one
    are replaced by the bracketed 1-based ranks (``"[1]"``, ``"[2]"``, ...), what bracket
    citations refer to (ragscale.record ``passage_ids_of``)."""

    key: str | None = None  # the record's key (``<file tag>:<line>``), unique within a run
    model_id: str | None = None
    task_id: str | None = None
    query: str = ""  # the question (ragscale.record ``query_of``: the input's, else the last user turn), or ""
    conversation: tuple[Turn, ...] | None = None  # MT-RAG's turns; None: the input has none
    prediction: str = ""  # the evaluated answer; "" when the record has none
    targets: tuple[str, ...] = ()  # the reference answers
    passages: tuple[str, ...] = ()  # the retrieved passages' texts, in rank order
    passage_ids: tuple[str, ...] = ()  # one per passage (see above)
    answerability: str | None = None  # MT-RAG's (``ANSWERABLE``, ``UNANSWERABLE``, ...)
    answer_status: str | None = None  # open-rag-eval's (``ok``, ``NO_ANSWER``, ``API_ERROR``, ``missing``)
    # the input's own taxonomy labels: a read-only mapping; a JSON value that is not an object is
    # kept as it is, for the taxonomy judges to report as the record's input error; None: no labels
    labels: Any = None
    metrics: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # computed so far

    def __post_init__(self) -> None:
        if len(self.passage_ids) != len(self.passages):
            object.__setattr__(self, "passage_ids", tuple(f"[{i + 1}]" for i in range(len(self.passages))))

    @property
    def turns(self) -> tuple[Turn, ...]:
        """The conversation a judge shows: MT-RAG's turns, else the question as one user turn (a
        ragas, open-rag-eval or mapped record: MT-RAG's form of a first-turn task), else none."""
        if self.conversation:
            return self.conversation
        return (_read_only({"speaker": "user", "text": self.query}),) if self.query.strip() else ()

    @property
    def user_input(self) -> str:
        """ragas' ``user_input`` of the record: its conversation as ``speaker: text`` lines (as
        MT-RAG passes it to ragas), else its question itself."""
        return inquiry(self.conversation) if self.conversation else self.query


def _metrics(value: Any) -> Mapping[str, Any]:
    """The metrics a row holds so far (a worker's row: a dict, ragscale.row), read-only."""
    return _read_only(value if isinstance(value, Mapping) else {})


def judge_input(row: Mapping[str, Any]) -> JudgeInput:
    """The ``JudgeInput`` of a pipeline row (ragscale.record ``Record.to_row`` plus the stages'
    metrics); a column the row lacks or holds null reads as empty."""
    conversation = row.get("conversation")
    labels = json.loads(row["labels"]) if row.get("labels") is not None else None  # the labels column is JSON text
    return JudgeInput(
        key=row.get("key"),
        model_id=row.get("model_id"),
        task_id=row.get("task_id"),
        query=row.get("query") or "",
        conversation=None if conversation is None else tuple(_read_only(t) for t in conversation),
        prediction=row.get("prediction") or "",
        targets=tuple(row.get("targets") or ()),
        passages=tuple(row.get("passages") or ()),
        passage_ids=tuple(str(i) for i in row.get("passage_ids") or ()),
        answerability=row.get("answerability"),
        answer_status=row.get("answer_status"),
        labels=_read_only(labels) if isinstance(labels, dict) else labels,
        metrics=_metrics(row.get("metrics")),
    )
