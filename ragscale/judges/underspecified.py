"""MTRAG-UN's underspecified judge (``underspecified_eval``): is the response a clarification request?

Follows IBM/mt-rag-benchmark ``underspecified_eval.format_underspecified_judge`` and
``judge_wrapper.underspecified_eval``: the prompt (verbatim, the response last) asks for
``{"decision": "yes/no", "explanation": ...}``; yes -> 1, no -> 0. ragscale constrains the
decision to yes/no with a JSON schema; MT-RAG scores anything else 0.5, ragscale records
a parse failure instead (never a default score).
"""

from __future__ import annotations

from ragscale.judges.base import JudgeRun, JudgeSpec, single, JudgeParseError, JudgePrompt, load_json_object
from ragscale.judges.templates import load_template, neutralize
from ragscale.metrics.registry import MetricSpec, declare

NAME = "underspecified"
VERSION = "mtrag-underspecified-v1"
DECISIONS = {"yes": 1.0, "no": 0.0}
SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": list(DECISIONS)},
        "explanation": {"type": "string", "maxLength": 300},
    },
    "required": ["decision", "explanation"],
}
_TAIL = "\n\n    "  # what follows {{ response }} in MT-RAG's template


def render(response: str) -> JudgePrompt:
    """The underspecified-judge prompt for one response."""
    t = "mtrag_underspecified_v1"  # the response cannot fake the template's "## ..." sections
    text = load_template(t) + neutralize(response, t) + _TAIL
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), SCHEMA, max_tokens=160)


def parse(raw: str) -> float:
    """``{"decision": "yes"|"no", ...}`` -> 1.0 | 0.0; anything else raises JudgeParseError."""
    decision = load_json_object(NAME, raw).get("decision")
    if not isinstance(decision, str) or decision.strip().lower() not in DECISIONS:
        raise JudgeParseError(NAME, raw, f"decision {decision!r} is not yes or no")
    return DECISIONS[decision.strip().lower()]


declare(MetricSpec("underspecified_eval", "judge", "idk", needs=("targets",), short="UNDSP",
                   reference="IBM/mt-rag-benchmark MTRAG-UN (underspecified judge)"))


def _start(obj: dict, row: dict) -> "JudgeRun":
    return single(render(row["prediction"]), parse)


JUDGE_SPECS = (JudgeSpec(NAME, "underspecified_eval", VERSION, _start),)
