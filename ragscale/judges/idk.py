"""MT-RAG step 2, the IDK judge (``idk_eval``).

Follows IBM/mt-rag-benchmark ``judge_utils.format_idk_judge`` and ``first_token_idk``:
the few-shot prompt over the whole conversation (``speaker: text`` lines) and the
response; label yes -> 1.0, partial -> 0.5, no -> 0.0. ragscale constrains the label to
those three with a JSON schema instead of reading the first word of free text, and a
label outside them is a parse failure, never a default score (MT-RAG maps any other
first word to 0.5).

Under the ``reference`` protocol (mtrag_reference.py) the same prompt text goes with MT-RAG's
system message and sampling, as free text, read by MT-RAG's ``first_token_idk``: yes -> 1,
no -> 0, any other first word -> 0.5, and an output that does not start with a word is
"unknown": idk_eval is null with ``{"label": "unknown"}`` in its details, and IDK
conditioning keeps the raw metric for that record, as MT-RAG's ``get_idk_score`` does.
"""

from __future__ import annotations

from typing import Sequence

from ragscale.judges import mtrag_reference as ref
from ragscale.judges.templates import Markers, declare_markers
from ragscale.judges.base import probe_turns
from ragscale.judges.base import JudgeResult, JudgeRun, JudgeSpec, single, JudgeParseError, JudgePrompt, load_json_object
from ragscale.judges.judge_input import JudgeInput, Turn, inquiry
from ragscale.judges.templates import load_template, neutralize
from ragscale.metrics.registry import UNIT, MetricSpec, declare

NAME = "idk"
VERSION = "mtrag-idk-v1"
REFERENCE_VERSION = "mtrag-idk-ref-v1"
LABELS = {"yes": 1.0, "partial": 0.5, "no": 0.0}
SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": list(LABELS)}},
    "required": ["label"],
}


def _text(turns: Sequence[Turn], response: str) -> str:
    t = "mtrag_idk_v1"  # no line of the conversation or the response can fake an [Output] section
    return (load_template(t) + f"[Inquiry]\n{neutralize(inquiry(turns), t)}\n\n"
            f"[Response]\n{neutralize(response, t)}\n\n[Output]\n")


def render(turns: Sequence[Turn], response: str) -> JudgePrompt:
    """The IDK prompt: the shared few-shot instructions first, this record's inquiry and response last."""
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": _text(turns, response)},), SCHEMA, max_tokens=16)


def render_reference(turns: Sequence[Turn], response: str) -> JudgePrompt:
    """MT-RAG's ``format_idk_judge`` prompt as its client sends it (reference protocol)."""
    return ref.prompt(NAME, REFERENCE_VERSION, _text(turns, response))


def parse(raw: str) -> float:
    """``{"label": "yes"|"partial"|"no"}`` -> 1.0 | 0.5 | 0.0; anything else raises JudgeParseError."""
    label = load_json_object(NAME, raw).get("label")
    if not isinstance(label, str) or label.strip().lower() not in LABELS:
        raise JudgeParseError(NAME, raw, f"label {label!r} is not one of yes, partial, no")
    return LABELS[label.strip().lower()]


declare(MetricSpec("idk_eval", "judge", "idk", short="IDK", bounds=UNIT, jury="majority", reference="IBM/mt-rag-benchmark scripts/evaluation/judge_utils.py (IDK judge)"))


def _reference(turns: Sequence[Turn], response: str) -> JudgeRun:
    value = yield render_reference(turns, response), ref.first_token_idk
    if value == ref.IDK_UNKNOWN:
        return JudgeResult({"idk_eval": None}, {"label": ref.IDK_UNKNOWN})
    return value


def _start(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> "JudgeRun":
    """The judge on a record: its conversation (``JudgeInput.turns``: the question as one user
    turn when it has none) and its answer."""
    if protocol == "reference":
        return _reference(inp.turns, inp.prediction)
    return single(render(inp.turns, inp.prediction), parse)


declare_markers("mtrag_idk_v1", Markers(inline=("[Inquiry]", "[Response]", "[Output]")))

JUDGE_SPECS = (JudgeSpec(NAME, "idk_eval", VERSION, _start, reference_version=REFERENCE_VERSION,
                         completion_tokens=8, probe=lambda u: [render(probe_turns(u), u)],
                         delimiters=("markers", "mtrag_idk_v1")),)
