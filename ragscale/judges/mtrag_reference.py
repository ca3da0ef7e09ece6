"""MT-RAG's judges under the ``reference`` protocol: what IBM/mt-rag-benchmark's client sends
and how its parsers read the answers, quirks included (docs/metrics.md, Judging protocols).

The reference client (``scripts/evaluation/azure_openai_client.py``, the one the paper's
gpt-4o-mini judges ran through) sends the system message "You are a helpful assistant.", the
prompt as the user message, temperature 0, top_p 1, max_tokens 400, seed 100, and strips
the output. Its parsers (``judge_utils.py``, ``judge_wrapper.py``) never fail: an answer they
cannot read gets a default score (0.5), which is what this module reproduces, so that with
the reference's judge model the scores are the reference's.

Shared by idk.py, radbench.py and underspecified.py; nothing here runs under ``constrained``.
"""

from __future__ import annotations

import re
from typing import Sequence

from ragscale.judges.base import JudgePrompt, loads_json

SYSTEM = "You are a helpful assistant."
SAMPLING = (0.0, 100)  # (temperature, seed) of AzureOpenAIClient._params
PARAMS = (("top_p", 1.0),)
MAX_TOKENS = 400
DEFAULT = 0.5  # what MT-RAG's parsers score an answer they cannot read
# MT-RAG's first_token_idk answers "unknown" (a string, not a score) when the output does not
# start with a word: the record's idk_eval is null with this label in its details, and IDK
# conditioning then keeps the raw metric, as get_idk_score's last branch does.
IDK_UNKNOWN = "unknown"


def prompt(judge: str, version: str, text: str) -> JudgePrompt:
    """One MT-RAG judge request as the reference client sends it (free-text output)."""
    return JudgePrompt(judge, version, ({"role": "system", "content": SYSTEM}, {"role": "user", "content": text}),
                       None, max_tokens=MAX_TOKENS, sampling=SAMPLING, params=PARAMS)


def conversation(turns: Sequence[dict]) -> str:
    """``extract_conversation``: one ``speaker: text`` line per turn."""
    return "\n".join(f"{t.get('speaker')}: {t.get('text')}" for t in turns)


def split_conversation(inquiry: str) -> tuple[str, str]:
    """``split_conversation``: (previous conversation, current question) by *physical line*.

    The question is the text after "user: " on the last line that starts with "user:"; the
    previous conversation is every line but the very last one (so a multi-line last question
    keeps only its first line as the question, and its other lines but the last stay in the
    previous conversation); with a single "user:" line it is empty. Raises ValueError where
    the reference raises (no "user:" line, or one without "user: ")."""
    lines = inquiry.splitlines()
    users = [line for line in lines if line.startswith("user:")]
    if not users:
        raise ValueError("MT-RAG's split_conversation finds no line starting with 'user:'")
    parts = users[-1].split("user: ")
    if len(parts) < 2:
        raise ValueError("MT-RAG's split_conversation finds no 'user: ' in the last user line")
    if len(users) == 1:
        return "", parts[1].strip()
    return "\n".join(lines[:-1]), parts[1].strip()


# extract_rating's patterns, in its order: every pattern that matches overwrites the rating
# with its first match (no break), so the last matching pattern wins. MT-RAG writes a number as
# ``\d*\.?\d+`` (or with ``[0-9]``); that form backtracks catastrophically on a long run of
# digits (cubic for "out of 10": a 5,000-digit output would hold the judge for hours), so
# ``_num`` spells the same strings unambiguously, and "out of 10" skips start positions inside a
# number (a number starting there would also start one position earlier, unless it has a sign):
# the same first match as MT-RAG's patterns (tests/unit/test_judge_hostile_outputs.py compares
# them on random texts), in linear time per match.


def _num(d: str) -> str:
    """MT-RAG's ``{d}*\\.?{d}+`` (``d``: its digit class) without its ambiguity."""
    return rf"(?:{d}+(?:\.{d}+)?|\.{d}+)"


_N09, _ND = _num("[0-9]"), _num(r"\d")
_RATING_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"Rating: \[\[(\d+)\]\]",
    r"Rating: (\d+)",
    r"\[\[(\d+)\]\]",
    r"\[(\d+)\]",
    rf"Rating: \[\[({_N09})\]\]",
    rf"Overall Rating: ({_N09})",
    rf"Score: ({_N09})/10",
    rf"Score: ({_N09})",
    r"\[Rating\]\n(\d+)",
    r"Rating: \[\[(\d+)/10\]\]",
    rf"Rating: \[\[([-+]?{_ND})",
    rf"(?:(?<!\d)|(?=[-+]))([-+]?{_ND}) out of 10",
))
_FOR_EXAMPLE = re.compile(r"for example:.*?$", re.IGNORECASE | re.MULTILINE)


def extract_rating(text: str) -> float:
    """``extract_rating``: the RADBench rating / 10 as MT-RAG reads it. "for example: ..." to the
    end of a line is dropped first; the last of its patterns that matches wins; no match, or a
    value outside (0, 1], gives 0.5 ("Rating: [[0]]" -> 0.5, "[[8.5]]" -> 0.85)."""
    text = _FOR_EXAMPLE.sub("", str(text))
    value = DEFAULT
    for rx in _RATING_PATTERNS:
        found = rx.findall(text)
        if found:
            value = float(found[0]) / 10
    return value if 0 < value <= 1 else DEFAULT


_FIRST_WORD = re.compile(r"\s*([A-Za-z]+)")


def first_token_idk(text: str) -> float | str:
    """``first_token_idk``: the output's first word, yes -> 1.0, no -> 0.0, any other word ->
    0.5; an output that does not start with a letter (after whitespace) -> ``IDK_UNKNOWN``."""
    m = _FIRST_WORD.match(text)
    if not m:
        return IDK_UNKNOWN
    word = m.group(1).lower()
    return 1.0 if word == "yes" else 0.0 if word == "no" else DEFAULT


_INVALID_ESCAPE = re.compile(r'\\(?![\"\\/bfnrt]|u[0-9a-fA-F]{4})')


def underspecified_decision(text: str) -> float:
    """``judge_wrapper.underspecified_eval``'s scoring: the JSON object of the output (fenced
    ```json, else the first ``{...}`` span, invalid escapes removed) has ``decision`` yes -> 1.0,
    no -> 0.0; anything else, or no readable JSON, -> 0.5."""
    fenced = "```json" in text
    m = re.search(r"```json\s*(.*?)\s*```" if fenced else r"\{\s*(.*?)\s*\}", text, re.DOTALL)
    if not m:
        return DEFAULT
    body = _INVALID_ESCAPE.sub("", m.group(1))
    if not body.startswith("{"):
        body = "{" + body
    if not body.endswith("}"):
        body = body + "}"
    try:
        obj = loads_json(body)  # nested too deep: a ValueError (MT-RAG's bare except: 0.5)
        decision = obj.get("decision", "").lower()
    except (ValueError, AttributeError, TypeError):
        return DEFAULT
    return 1.0 if decision == "yes" else 0.0 if decision == "no" else DEFAULT
