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
"""

from __future__ import annotations

from typing import Sequence

from ragscale.judges.base import JudgeRun, JudgeSpec, single, JudgeParseError, JudgePrompt, load_json_object
from ragscale.judges.templates import neutralize
from ragscale.metrics.registry import MetricSpec, declare

NAME = "radbench"
VERSION = "mtrag-radbench-v1"
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


def render(turns: Sequence[dict], reference: str, documents: Sequence[str], response: str) -> JudgePrompt:
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


declare(MetricSpec("RB_llm", "judge", "radbench", needs=("targets",), reference="IBM/mt-rag-benchmark scripts/evaluation/judge_utils.py (RADBench judge)"))


def _start(obj: dict, row: dict) -> "JudgeRun":
    return single(render(obj.get("input") or [], row["targets"][0], row["passages"], row["prediction"]), parse)


JUDGE_SPECS = (JudgeSpec(NAME, "RB_llm", VERSION, _start),)
