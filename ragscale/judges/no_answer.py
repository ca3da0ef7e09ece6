"""No-answer detection (open-rag-eval's ``no_answer_score``; seed "Open RAG Eval Metrics
Documentation", No-Answer Detection): did the system attempt to answer the query, right or
wrong, or did it decline ("no result", "not enough information")?

Follows vectara/open-rag-eval ``open_rag_eval/metrics/no_answer_metric.py`` (``NoAnswerMetric``):
the few-shot ``_ANSWERED_PROMPT`` (templates/orag_no_answer_v1.txt, verbatim) over the query
and the answer as open-rag-eval sees it, the answer parts' texts joined by spaces, i.e. without
the citation markers (``ragscale.metrics.trec.answer_text``), with the system message of
``OpenAIModel.parse``. open-rag-eval asks for the pydantic structured output
``QueryAnswered{answered: "yes"|"no"}``; ragscale constrains the output with the same JSON
schema. Anything else is a parse failure, never a default. open-rag-eval's sampling
(temperature 0, seed 42) is the judge engine's configuration in ragscale.

Metric ``answered``: 1.0 for "yes" (an attempt), 0.0 for "no" (declined); its mean over
records is open-rag-eval's "questions answered" percentage / 100. Details:
``{"query_answered": "yes"|"no"}`` (open-rag-eval's ``no_answer_score`` column). A record
without a generated answer is ``null`` (open-rag-eval does not evaluate it at all).
"""

from __future__ import annotations

from ragscale.judges.base import JudgeSpec, JudgeParseError, JudgePrompt, JudgeResult, JudgeRun, Undefined, load_json_object
from ragscale.judges.umbrela import orag_messages
from ragscale.metrics.trec import answer_text
from ragscale.record import query_of
from ragscale.metrics.registry import MetricSpec, declare

NAME = "no_answer"
VERSION = "open-rag-eval-no-answer-v1"
LABELS = {"yes": 1.0, "no": 0.0}
SCHEMA = {
    "type": "object",
    "properties": {"answered": {"type": "string", "enum": list(LABELS)}},
    "required": ["answered"],
}


def render(query: str, answer: str) -> JudgePrompt:
    """The no-answer prompt for one (query, answer text without citation markers)."""
    return JudgePrompt(NAME, VERSION, orag_messages("orag_no_answer_v1", {"query": query, "answer": answer}), SCHEMA,
                       max_tokens=32)


def parse(raw: str) -> str:
    """``{"answered": "yes"|"no"}`` -> the label; anything else raises JudgeParseError."""
    label = load_json_object(NAME, raw).get("answered")
    if not isinstance(label, str) or label.strip().lower() not in LABELS:
        raise JudgeParseError(NAME, raw, f"answered {label!r} is not yes or no")
    return label.strip().lower()


def start(obj: dict, row: dict) -> JudgeRun:
    """One prompt per record; ``answered`` = 1.0 / 0.0 (see the module docstring)."""
    prediction = row.get("prediction") or ""
    if not prediction.strip():
        return Undefined("no generated answer")
    label = yield render(query_of(obj), answer_text(prediction)), parse
    return JudgeResult(metrics={"answered": LABELS[label]}, details={"query_answered": label})


declare(MetricSpec("answered", "judge", "no_answer", scalar=True, short="Answered", rate_title="% questions answered",
                   reference="vectara/open-rag-eval open_rag_eval/metrics/no_answer_metric.py"))


def _start(obj: dict, row: dict) -> JudgeRun:
    """open-rag-eval's no-answer judge; a run whose input says the system gave no answer
    (open-rag-eval's ``NO_ANSWER`` marker, or an empty answer) is not answered, without asking."""
    status = obj.get("answer_status")
    if status in ("NO_ANSWER", "missing"):
        return JudgeResult({"answered": 0.0}, {"query_answered": "no", "source": f"input ({status})"})
    return (yield from start(obj, row))


JUDGE_SPECS = (JudgeSpec(NAME, "answered", VERSION, _start),)
