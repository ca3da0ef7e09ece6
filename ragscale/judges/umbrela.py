"""UMBRELA passage relevance (open-rag-eval's retrieval metric; seed "Open RAG Eval Metrics
Documentation", UMBRELA).

Follows vectara/open-rag-eval ``open_rag_eval/metrics/umbrela_metric.py`` (``UMBRELAMetric``)
and ``models/llm_judges.py`` (``OpenAIModel.parse``): one prompt per (query, passage), a grade
0-3, ``mean_umbrela_score`` = the mean grade (``evaluators/trec_evaluator.py``).

- Prompt: open-rag-eval's *standard* ``_UMBRELA_PROMPT`` (templates/umbrela_v1.txt, verbatim
  with its source indentation), i.e. castorini/umbrela's ``qrel_zeroshot_bing`` prompt whose
  last line asks for a bare integer instead of ``##final score: N``. open-rag-eval switches to
  a reworded ``_UMBRELA_NEW_PROMPT`` when the judge model's name contains "gpt-oss" or "qwen";
  ragscale always uses the standard prompt, whatever the judge model, so that a grade depends
  on the model alone. The system message is the one ``OpenAIModel.parse`` sends. The query and
  passage sit where the template puts them (the few instruction lines after them are short):
  everything up to the passage is shared by all passages of a record.
- Output: open-rag-eval asks for structured output with the pydantic model
  ``UMBRELAScore{score: "0"|"1"|"2"|"3"}`` (a string enum); ragscale constrains the output with
  the same JSON schema (``{"score": "0".."3"}``, no rationale: the prompt asks for none) instead
  of umbrela's ``##final score: N`` line. Anything else is a parse failure, never a default.
- Sampling: open-rag-eval uses temperature 0, top_p 1, presence_penalty 0.5,
  frequency_penalty 0, seed 42 (the UMBRELA paper's settings); in ragscale sampling is the
  judge engine's configuration, not this module's.
- Failures: open-rag-eval fails the whole record when one grade fails; ragscale gives that
  passage a ``None`` grade (listed in judge_errors by the actor) and averages the others.
  open-rag-eval keys grades by passage id (a repeated id is graded once); ragscale grades every
  passage, in input order.

Metrics: ``umbrela_scores`` (one grade or ``None`` per passage, input order), ``umbrela_mean``.
Details: ``{passage id: grade or None}``. The retrieval metrics derived from the grades
(Precision@K, AP@K, MRR) are in ragscale/metrics/trec.py.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ragscale.judges.base import (JudgeSpec, Failed, JudgeParseError, JudgePrompt, JudgeResult, JudgeRun, Undefined,
                                  load_json_object)
from ragscale.judges.templates import load_template, neutralize
from ragscale.metrics.trec import umbrela_mean
from ragscale.record import passage_ids_of, query_of
from ragscale.metrics.registry import MetricSpec, declare

NAME = "umbrela"
VERSION = "open-rag-eval-umbrela-v1"
GRADES = ["0", "1", "2", "3"]
SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "string", "enum": GRADES}},
    "required": ["score"],
}

# What open-rag-eval's OpenAIModel.parse sends as the system message of every judge prompt.
ORAG_SYSTEM = "You are a helpful assistant that follows user instructions precisely and provides accurate information."
# open-rag-eval's prompts are indented class attributes ending in "\n" + 4 spaces; the template
# files keep the text up to the last line, and this tail is appended (see the template headers).
_TAIL = "\n    "
_SLOT = re.compile(r"\{(\w+)\}")


def orag_messages(template: str, values: Mapping[str, str]) -> tuple[dict, ...]:
    """An open-rag-eval prompt as chat messages: its system message, then the template with
    ``{name}`` slots filled in one pass (text inserted is never re-scanned, so a query or
    passage containing ``{passage}`` stays literal) plus the source string's tail."""
    # a value cannot fake the template's own "Passage:" / "Your Response:" lines (templates.neutralize)
    text = _SLOT.sub(lambda m: neutralize(values[m.group(1)], template), load_template(template).rstrip("\n")) + _TAIL
    return ({"role": "system", "content": ORAG_SYSTEM}, {"role": "user", "content": text})


def render(query: str, passage: str) -> JudgePrompt:
    """The UMBRELA prompt for one (query, passage)."""
    return JudgePrompt(NAME, VERSION, orag_messages("umbrela_v1", {"query": query, "passage": passage}), SCHEMA,
                       max_tokens=32)


def parse(raw: str) -> int:
    """``{"score": "0".."3"}`` -> the grade; anything else raises JudgeParseError."""
    score = load_json_object(NAME, raw).get("score")
    if isinstance(score, (bool, float)) or str(score).strip() not in GRADES:
        raise JudgeParseError(NAME, raw, f"score {score!r} is not one of 0, 1, 2, 3")
    return int(str(score).strip())


def start(obj: dict, row: dict) -> JudgeRun:
    """Grade every passage of a record in one fan-out round (see the module docstring)."""
    passages = list(row.get("passages") or [])
    if not passages:
        return Undefined("no passages")
    query = query_of(obj)
    if not query.strip():
        return Undefined("no query")
    answers: list[Any] = yield [(render(query, p), parse) for p in passages]
    grades = [None if isinstance(a, Failed) else a for a in answers]
    ids = passage_ids_of(obj, len(passages))
    return JudgeResult(
        metrics={"umbrela_scores": grades, "umbrela_mean": umbrela_mean(grades)},
        details=dict(zip(ids, grades)),
    )


declare(
    MetricSpec("umbrela_scores", "judge", "retrieval", shape="vector", reference="castorini/umbrela, vectara/open-rag-eval open_rag_eval/metrics/umbrela_metric.py"),
    MetricSpec("umbrela_mean", "judge", "retrieval", scalar=True, requires=("umbrela_scores",), short="UMBRELA",
               reference="vectara/open-rag-eval open_rag_eval/metrics/umbrela_metric.py"),
)


JUDGE_SPECS = (JudgeSpec(NAME, "umbrela_scores", VERSION, start, ("umbrela_scores", "umbrela_mean")),)
