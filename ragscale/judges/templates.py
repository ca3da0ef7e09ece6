"""Versioned prompt templates shipped in ragscale/judges/templates/ (leading '# ' lines are comments),
and the helpers that keep untrusted text (responses, passages, queries, conversations) inside
the delimiters a judge prompt puts around it.

Two kinds of delimiters, two helpers:

- tags, in ragscale's own prompts and the reordered ones (taxonomy, nuggets, factual
  consistency): ``fence(tag, text)`` puts the text between ``<tag>`` and ``</tag>`` with every
  closing fence tag inside it escaped (``</answer>`` -> ``<\\/answer>``), so a response cannot
  close its block early and write "instructions" after it;
- the section markers of the reference prompts ragscale keeps verbatim (MT-RAG's ``[Inquiry]``,
  ``[Response]``, ``[Output]`` and RADBench's ``[The End of Assistant's Answer]``;
  open-rag-eval's ``Query:``, ``Passage:``, ``Your Response:`` lines; the underspecified
  judge's Markdown headings): ``neutralize(text, template)`` escapes, inside the untrusted text
  only, what would read as one of that template's markers, with a backslash after the first
  character of a bracketed marker (``[Output]`` -> ``[\\Output]``) or before a line-start one
  (``Passage:`` -> ``\\Passage:``).

Both leave ordinary text unchanged, byte for byte: the rendered prompts of real inputs, their
cache keys and their equality with the reference prompts stay as they are. The judges' JSON
schemas (constrained decoding) and parsers do the rest: whatever a response says, the output
is a value of the judge's schema or a parse failure (never a default score).
"""

from __future__ import annotations

import functools
import os
import re

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

# The tags that fence untrusted text in judge prompts.
FENCE_TAGS = ("query", "context", "passage", "passages", "chunk", "answer", "conversation", "response",
              "document", "reference", "question")
_CLOSING_FENCE = re.compile(r"<\s*/\s*(%s)\s*>" % "|".join(FENCE_TAGS), re.IGNORECASE)

# Section markers of the verbatim reference templates (and RADBench's, written in radbench.py),
# as (pattern, only at the start of a line). A match inside untrusted text is escaped.
MARKERS: dict[str, tuple[tuple[str, bool], ...]] = {
    "mtrag_idk_v1": ((r"\[\s*(?:Inquiry|Response|Output)\s*\]", False),),
    "radbench": ((r"\[\s*(?:The\s+(?:Start|End)\s+of\s+[^\]\n]{1,80}|Instruction|Faithfulness|Appropriateness"
                  r"|Completeness)\s*\]", False),),
    "mtrag_underspecified_v1": ((r"#{1,6}[ \t]*(?:Role|Input|Definition|Not clarification|Output)\b", True),
                                (r"(?:Response|Output)\s*:", True)),
    "umbrela_v1": ((r"(?:Query|Passage|Final score)\s*:", True),),
    "orag_citation_v1": ((r"(?:Statement|Citation)\s*:", True),),
    "orag_no_answer_v1": ((r"(?:Query|Answer|Your Response)\s*:", True),),
    # open-rag-eval's reference-protocol prompts (umbrela.py, nuggets.py)
    "umbrela_new_v1": ((r"<\s*/?\s*(?:query|passage)\s*>", False),),
    "orag_nuggets_create_v1": ((r"(?:Search Query|Context|Initial Nugget List(?: Length)?|Updated Nugget List)\s*:", True),),
    "orag_nuggets_importance_v1": ((r"(?:Search Query|Nugget List|Labels)\s*:", True),),
    "orag_nuggets_assign_v1": ((r"(?:Search Query|Passage|Nugget List|Labels)\s*:", True),),
}


@functools.lru_cache(maxsize=None)
def load_template(name: str) -> str:
    """The text of ``templates/<name>.txt`` without its leading comment lines."""
    with open(os.path.join(_DIR, f"{name}.txt"), encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    while lines and lines[0].startswith("# "):
        lines.pop(0)
    return "\n".join(lines)


def escape_fences(text: str) -> str:
    """``text`` with every closing fence tag (``</answer>``, ``< / passage >``...) escaped as
    ``<\\/answer>``: inside a fenced block it can no longer close it."""
    return _CLOSING_FENCE.sub(lambda m: f"<\\/{m.group(1).lower()}>", text)


def fence(tag: str, text: str) -> str:
    """``<tag>\\n{text}\\n</tag>`` with the closing fence tags inside ``text`` escaped."""
    if tag not in FENCE_TAGS:
        raise ValueError(f"unknown fence tag {tag!r}; fence tags are {', '.join(FENCE_TAGS)}")
    return f"<{tag}>\n{escape_fences(text)}\n</{tag}>"


@functools.lru_cache(maxsize=None)
def _marker_patterns(template: str) -> tuple[tuple[re.Pattern, bool], ...]:
    if template not in MARKERS:
        raise KeyError(f"no section markers registered for template {template!r}")
    return tuple((re.compile(rf"(?m)^([ \t]*)({pattern})" if line_start else rf"({pattern})", re.IGNORECASE), line_start)
                 for pattern, line_start in MARKERS[template])


def neutralize(text: str, template: str) -> str:
    """``text`` with whatever would read as one of ``template``'s section markers (``MARKERS``)
    escaped by a backslash: before a line-start marker (``\\Passage:``, ``\\## Output``),
    after the bracket of an inline one (``[\\Output]``). Other text is unchanged."""
    for rx, line_start in _marker_patterns(template):
        if line_start:
            text = rx.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
        else:
            text = rx.sub(lambda m: m.group(1)[0] + "\\" + m.group(1)[1:], text)
    return text
