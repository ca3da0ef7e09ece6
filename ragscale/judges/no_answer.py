"""No-answer detection (open-rag-eval's ``no_answer_score``; seed "Open RAG Eval Metrics
Documentation", No-Answer Detection): did the system attempt to answer the query, right or
wrong, or did it decline ("no result", "not enough information")?

Follows vectara/open-rag-eval ``open_rag_eval/metrics/no_answer_metric.py`` (``NoAnswerMetric``):
the few-shot ``_ANSWERED_PROMPT`` (templates/orag_no_answer_v1.txt, verbatim) over the query
and the answer as open-rag-eval sees it, the answer parts' texts joined by spaces, i.e. without
the citation markers (``ragscale.metrics.trec.answer_text``), with the system message of
``OpenAIModel.parse``. open-rag-eval asks for the pydantic structured output
``QueryAnswered{answered: "yes"|"no"}``; the constrained protocol (version
``open-rag-eval-no-answer-v1``) constrains the output with an equivalent inline JSON schema,
anything else is a parse failure, never a default, and samples as the judge engine does
(greedy, seed 0; open-rag-eval: temperature 0, seed 42).

Metric ``answered``: 1.0 for "yes" (an attempt), 0.0 for "no" (declined); its mean over
records is open-rag-eval's "questions answered" percentage / 100. Details:
``{"query_answered": "yes"|"no"}`` (open-rag-eval's ``no_answer_score`` column). Under the
constrained protocol a record whose input marks no answer (open-rag-eval's ``NO_ANSWER``, or
no answer row: ``answer_status`` NO_ANSWER / missing) is *not answered* (0.0, without asking:
the system gave no answer), any other record without a generated answer (``API_ERROR``, an
empty answer) is ``null``.

Reference protocol (``judge.protocol=reference``, version ``open-rag-eval-no-answer-ref-v1``):
the same prompt and system message, the JSON schema pydantic gives ``QueryAnswered`` (the enum
in ``$defs``), temperature 0 and seed 42 (the metric's model_kwargs), the output read as
open-rag-eval's OpenAI client reads it (ragscale.judges.umbrela ``OragOutput.parse``: one JSON
object, ``"answered"`` exactly "yes" or "no"). Every record without a generated answer,
NO_ANSWER included, is ``null``: open-rag-eval's loader skips it, so it is in neither the
numerator nor the denominator of "questions answered". Still different: no max_tokens in
open-rag-eval (``ORAG_MAX_TOKENS`` here); the actor's re-asks after a parse failure (none in
open-rag-eval; judge.max_retries=0); a failure fails every metric of the record in
open-rag-eval, here ``answered`` only.
"""

from __future__ import annotations

from ragscale.judges.templates import Markers, declare_markers
from ragscale.judges.base import JudgeSpec, JudgeParseError, JudgePrompt, JudgeResult, JudgeRun, Undefined, load_json_object
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.umbrela import ORAG_SKIPPED, OragOutput, orag_messages, reference_prompt
from ragscale.metrics.trec import answer_text
from ragscale.metrics.registry import UNIT, MetricSpec, declare

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


REFERENCE_VERSION = "open-rag-eval-no-answer-ref-v1"
REFERENCE_OUTPUT = OragOutput("QueryAnswered", "answered", tuple(LABELS), "QueryAnsweredValues")


def render_reference(query: str, answer: str) -> JudgePrompt:
    """The no-answer prompt as open-rag-eval sends it (reference protocol)."""
    return reference_prompt(NAME, REFERENCE_VERSION, "orag_no_answer_v1", {"query": query, "answer": answer},
                            REFERENCE_OUTPUT)


def parse_reference(raw: str) -> str:
    """open-rag-eval's reading: ``QueryAnswered.answered.value``; anything else raises JudgeParseError."""
    return REFERENCE_OUTPUT.parse(NAME, raw)


def start(inp: JudgeInput, protocol: str = "constrained") -> JudgeRun:
    """One prompt per record; ``answered`` = 1.0 / 0.0 (see the module docstring)."""
    prediction = inp.prediction
    if not prediction.strip():
        return Undefined(ORAG_SKIPPED if protocol == "reference" else "no generated answer")
    ask, read = (render_reference, parse_reference) if protocol == "reference" else (render, parse)
    label = yield ask(inp.query, answer_text(prediction)), read
    return JudgeResult(metrics={"answered": LABELS[label]}, details={"query_answered": label})


declare(MetricSpec("answered", "judge", "no_answer", scalar=True, short="Answered", bounds=UNIT, jury="majority", rate_title="% questions answered",
                   needs=("question",), aliases=("no_answer_score", "no_answer"),
                   reference="vectara/open-rag-eval open_rag_eval/metrics/no_answer_metric.py"))


def _start(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> JudgeRun:
    """open-rag-eval's no-answer judge; under the constrained protocol a run whose input says the
    system gave no answer (open-rag-eval's ``NO_ANSWER`` marker, or no answer row) is not
    answered, without asking; under the reference protocol it is skipped (null), as open-rag-eval
    skips it."""
    status = inp.answer_status
    if status in ("NO_ANSWER", "missing") and protocol != "reference":
        return JudgeResult({"answered": 0.0}, {"query_answered": "no", "source": f"input ({status})"})
    return (yield from start(inp, protocol))


declare_markers("orag_no_answer_v1", Markers(labels=("Query:", "Answer:", "Your Response:")))

JUDGE_SPECS = (JudgeSpec(NAME, "answered", VERSION, _start, reference_version=REFERENCE_VERSION,
                         completion_tokens=10, probe=lambda u: [render(u, u)],
                         delimiters=("markers", "orag_no_answer_v1")),)
