"""MTRAG-UN's underspecified judge (``underspecified_eval``): is the response a clarification request?

Follows IBM/mt-rag-benchmark ``underspecified_eval.format_underspecified_judge`` and
``judge_wrapper.underspecified_eval``: the prompt (verbatim, the response last) asks for
``{"decision": "yes/no", "explanation": ...}``; yes -> 1, no -> 0. ragscale constrains the
decision to yes/no with a JSON schema; MT-RAG scores anything else 0.5, ragscale records
a parse failure instead (never a default score).

Under the ``reference`` protocol (mtrag_reference.py) the same prompt text goes with MT-RAG's
system message and sampling as free text, scored as ``judge_wrapper.underspecified_eval``
does: the output's JSON object (fenced or the first ``{...}``) has decision yes -> 1, no -> 0,
and anything else, unreadable JSON included, -> 0.5.
"""

from __future__ import annotations

from ragscale.judges import mtrag_reference as ref
from ragscale.judges.templates import Markers, declare_markers
from ragscale.judges.base import JudgeRun, JudgeSpec, single, JudgeParseError, JudgePrompt, load_json_object
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.templates import load_template, neutralize
from ragscale.metrics.registry import UNIT, MetricSpec, declare

NAME = "underspecified"
VERSION = "mtrag-underspecified-v1"
REFERENCE_VERSION = "mtrag-underspecified-ref-v1"
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


def _text(response: str) -> str:
    t = "mtrag_underspecified_v1"  # the response cannot fake the template's "## ..." sections
    return load_template(t) + neutralize(response, t) + _TAIL


def render(response: str) -> JudgePrompt:
    """The underspecified-judge prompt for one response."""
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": _text(response)},), SCHEMA, max_tokens=160)


def render_reference(response: str) -> JudgePrompt:
    """MT-RAG's ``format_underspecified_judge`` prompt as its client sends it (reference protocol)."""
    return ref.prompt(NAME, REFERENCE_VERSION, _text(response))


def parse(raw: str) -> float:
    """``{"decision": "yes"|"no", ...}`` -> 1.0 | 0.0; anything else raises JudgeParseError."""
    decision = load_json_object(NAME, raw).get("decision")
    if not isinstance(decision, str) or decision.strip().lower() not in DECISIONS:
        raise JudgeParseError(NAME, raw, f"decision {decision!r} is not yes or no")
    return DECISIONS[decision.strip().lower()]


declare(MetricSpec("underspecified_eval", "judge", "idk", short="UNDSP", bounds=UNIT, jury="majority",
                   reference="IBM/mt-rag-benchmark MTRAG-UN (underspecified judge)"))


def _start(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> "JudgeRun":
    if protocol == "reference":
        return single(render_reference(inp.prediction), ref.underspecified_decision)
    return single(render(inp.prediction), parse)


declare_markers("mtrag_underspecified_v1", Markers(labels=("Response:",), lines=(
    "## Role", "## Input", "## Definition", "## Not clarification responses:", "## Output format")))

JUDGE_SPECS = (JudgeSpec(NAME, "underspecified_eval", VERSION, _start, reference_version=REFERENCE_VERSION,
                         completion_tokens=8, probe=lambda u: [render(u)],
                         delimiters=("markers", "mtrag_underspecified_v1")),)
