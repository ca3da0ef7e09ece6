"""TREC RAG metrics of vectara/open-rag-eval (seed "Open RAG Eval Metrics Documentation"):
pure functions over judge outputs. No Ray, torch or model imports here.
"""

from __future__ import annotations

import re

_MULTI = re.compile(r"\[\d+(?:,\s*\d+)+\]")
_COMMA_BETWEEN = re.compile(r"\]\s*,\s*\[")
_BLOCK = re.compile(r"(?:\[\d+\])+")
_ONE = re.compile(r"\[\d+\]")


def parse_generated_answer(text: str) -> list[dict]:
    """Split an answer into parts with the bracket citations that close them, as
    open-rag-eval's ``RAGResultsLoader._parse_generated_answer`` does: ``[1, 2]`` and
    ``[1], [2]`` become ``[1][2]``; each text segment before a citation block is a part
    citing that block's ids (``"[1]"``, ...); a trailing uncited segment longer than one
    character is a part with no citations; an answer without citations is one part.

    Returns ``[{"text": str, "citations": [str, ...]}, ...]``."""
    text = _MULTI.sub(lambda m: "".join(f"[{n}]" for n in re.findall(r"\d+", m.group())), text)
    text = _COMMA_BETWEEN.sub("][", text)
    blocks = list(_BLOCK.finditer(text))
    if not blocks:
        return [{"text": text, "citations": []}]
    parts = []
    start = 0
    for block in blocks:
        segment = text[start : block.start()].strip()
        if segment:
            parts.append({"text": segment, "citations": _ONE.findall(block.group())})
        start = block.end()
    tail = text[blocks[-1].end() :].strip()
    if len(tail) > 1:
        parts.append({"text": tail, "citations": []})
    return parts


def answer_text(text: str) -> str:
    """The answer without its citation markers: the parts' texts joined by spaces (what
    open-rag-eval's hallucination metric sends to HHEM as the hypothesis)."""
    return " ".join(p["text"] for p in parse_generated_answer(text))
