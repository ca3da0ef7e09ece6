"""MT-RAG step 4, the RADBench-style judge (``RB_llm``).

Follows IBM/mt-rag-benchmark ``judge_utils.format_conversation_radbench`` and
``extract_rating``: the judge sees the previous conversation, the current question, the
reference answer, the response and the documents, and rates faithfulness,
appropriateness and completeness on 1-10; ``RB_llm = rating / 10``.

Deliberate differences (docs/metrics.md): the sections are reordered so that what a
sweep shares (instructions, conversation, question, reference, documents) comes first
and the response last, for prefix caching; the rating is constrained by a JSON schema
to the strings "1".."10" (an enum: grammars do not enforce integer ranges) after a
bounded explanation, instead of regex-scraped from free text, and an unusable output is
a parse failure rather than MT-RAG's default of 0.5.

Under the ``reference`` protocol (mtrag_reference.py) the prompt is MT-RAG's, section for
section (the response before the documents; "a detailed justification" and a
"Rating: [[rating]]" line), with its previous conversation and current question cut by
``split_conversation`` per physical line, sent with MT-RAG's system message and sampling
(max_tokens 400) as free text, and read by ``extract_rating`` (the last matching pattern
wins, 0.5 by default). A conversation ``split_conversation`` cannot cut (no "user: " line;
the reference raises) leaves RB_llm null with that reason.
"""

from __future__ import annotations

from typing import Sequence

from ragscale.judges import mtrag_reference as ref
from ragscale.judges.templates import Markers, declare_markers
from ragscale.judges.base import probe_turns
from ragscale.judges.base import JudgeRun, JudgeSpec, single, JudgeParseError, JudgePrompt, Undefined, load_json_object
from ragscale.judges.judge_input import JudgeInput, Turn
from ragscale.judges.templates import neutralize
from ragscale.metrics.registry import UNIT, MetricSpec, declare

NAME = "radbench"
VERSION = "mtrag-radbench-v1"
REFERENCE_VERSION = "mtrag-radbench-ref-v1"
RATINGS = [str(i) for i in range(1, 11)]
SCHEMA = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string", "maxLength": 300},
        "rating": {"type": "string", "enum": RATINGS},
    },
    "required": ["explanation", "rating"],
}

_INSTRUCTIONS = """[Instruction]
Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant to the user question given the provided document and a reference answer.

Your evaluation should assess the faithfulness, appropriateness, and completeness. Your evaluation should focus on the assistant's answer to the question of the current turn.  You will be given the assistant's answer and a reference answer. You will also be given the user questions and assistant's answers of the previous turns of the conversation. You should consider how well the assistant's answer captures the key information, knowledge points mentioned in the reference answer, and how it respects or builds upon the focus and knowledge points from the previous turns. 

[Faithfulness]: You are given the full conversation, the question of the current turn, the assistant's answer, and documents. You should evaluate how faithful is the assistant's answer to the information in the document and previous conversation.
[Appropriateness]: You should evaluate if the assistant's answer is relevant to the question of the current turn and if it addresses all the issues raised by the question without adding extra information.
[Completeness]: You should evaluate whether the assistant's answer is complete with information from the documents.

Begin your evaluation by comparing the assistant's answer against the reference answer in this turn. Be as objective as possible, and provide a short justification for your rating. Then rate the response on a scale of 1 to 10. Answer as JSON: {"explanation": "...", "rating": "<1-10>"}.
"""


# MT-RAG's own wording of the instruction's last paragraph (reference protocol)
_REFERENCE_ASK = (
    "Begin your evaluation by comparing the assistant's answer against the reference answer in this turn. Be as "
    "objective as possible, and provide a detailed justification for your rating. After providing your explanation, "
    'you must rate the response on a scale of 1 to 10, strictly following this format: "Rating: [[rating]]", for '
    'example: "Rating: [[5]]".\n'
)
_SHARED, _CONSTRAINED_ASK = _INSTRUCTIONS.split("Begin your evaluation", 1)


def render_reference(turns: Sequence[Turn], reference: str, documents: Sequence[str], response: str) -> JudgePrompt:
    """MT-RAG's ``format_conversation_radbench`` prompt as its client sends it (reference
    protocol); raises ValueError where MT-RAG's ``split_conversation`` does."""
    def n(text: str) -> str:
        return neutralize(text, "radbench")

    previous, question = ref.split_conversation(ref.conversation(turns))
    docs = "\n\n".join(documents)
    text = (
        f"\n{_SHARED}{_REFERENCE_ASK}\n"
        f"[The Start of Previous Conversation]\n{n(previous)}\n[The End of Previous Conversation]\n\n"
        f"[The Start of Current Turn Question]\n{n(question)}\n[The End of Current Turn Question]\n\n"
        f"[The Start of Reference Answer]\n{n(reference)}\n[The End of Reference Answer]\n\n"
        f"[The Start of Assistant's Answer]\n{n(response)}\n[The End of Assistant's Answer]\n\n"
        f"[The Start of Document]\n{n(docs)}\n[The End of Document]\n"
    )
    return ref.prompt(NAME, REFERENCE_VERSION, text)


def render(turns: Sequence[Turn], reference: str, documents: Sequence[str], response: str) -> JudgePrompt:
    """The RADBench prompt for one record; the response is the last section."""
    def n(text: str) -> str:  # untrusted text cannot fake a "[The End of ...]" section marker
        return neutralize(text, "radbench")

    lines = [f"{t.get('speaker')}: {t.get('text')}" for t in turns]
    previous = n("\n".join(lines[:-1]))
    question = n(str(turns[-1].get("text"))) if turns else ""
    docs = n("\n\n".join(documents))
    reference, response = n(reference), n(response)
    text = (
        f"{_INSTRUCTIONS}\n"
        f"[The Start of Previous Conversation]\n{previous}\n[The End of Previous Conversation]\n\n"
        f"[The Start of Current Turn Question]\n{question}\n[The End of Current Turn Question]\n\n"
        f"[The Start of Reference Answer]\n{reference}\n[The End of Reference Answer]\n\n"
        f"[The Start of Document]\n{docs}\n[The End of Document]\n\n"
        f"[The Start of Assistant's Answer]\n{response}\n[The End of Assistant's Answer]\n"
    )
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), SCHEMA, max_tokens=160)


def parse(raw: str) -> float:
    """``{"explanation": ..., "rating": "1".."10"}`` -> rating / 10; anything else raises JudgeParseError."""
    rating = load_json_object(NAME, raw).get("rating")
    if str(rating).strip() not in RATINGS:
        raise JudgeParseError(NAME, raw, f"rating {rating!r} is not one of 1..10")
    return int(str(rating).strip()) / 10


declare(MetricSpec("RB_llm", "judge", "radbench", needs=("question", "reference"), bounds=UNIT, jury="median", reference="IBM/mt-rag-benchmark scripts/evaluation/judge_utils.py (RADBench judge)"))


def _start(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> "JudgeRun":
    args = (inp.turns, inp.targets[0], inp.passages, inp.prediction)
    return _reference(*args) if protocol == "reference" else single(render(*args), parse)


def _reference(turns: Sequence[Turn], reference: str, documents: Sequence[str], response: str) -> "JudgeRun":
    try:
        prompt = render_reference(turns, reference, documents, response)
    except ValueError as e:
        return Undefined(str(e))
    return (yield prompt, ref.extract_rating)


_SECTIONS = ("Previous Conversation", "Current Turn Question", "Reference Answer", "Assistant's Answer", "Document")
declare_markers("radbench", Markers(inline=("[Instruction]", "[Faithfulness]", "[Appropriateness]", "[Completeness]",
                                            *(f"[The {edge} of {s}]" for s in _SECTIONS for edge in ("Start", "End")))))

JUDGE_SPECS = (JudgeSpec(NAME, "RB_llm", VERSION, _start, reference_version=REFERENCE_VERSION,
                         completion_tokens=120, probe=lambda u: [render(probe_turns(u), u, [u, u], u)],
                         delimiters=("markers", "radbench")),)
