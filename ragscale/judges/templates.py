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
  only, the exact markers of that template (``MARKERS``, declared by the judge module that
  renders the template: case-sensitive, spelled and spaced as the template writes them), with a backslash after the first character of an inline marker
  (``[Output]`` -> ``[\\Output]``) or before a line's one (``Passage:`` -> ``\\Passage:``).

Text that only resembles a marker (``[response]``, ``[the end of the season]``, ``passage:``)
is left as it is: the reference prompts stay the references' own for every text but one that
holds a template's exact marker (docs/metrics.md lists them). The judges' JSON schemas
(constrained decoding) and parsers do the rest: whatever a response says, the output is a value
of the judge's schema or a parse failure (never a default score).
"""

from __future__ import annotations

import functools
import os
import re
from typing import NamedTuple

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

# The tags that fence untrusted text in judge prompts.
FENCE_TAGS = ("query", "context", "passage", "passages", "chunk", "answer", "conversation", "response",
              "document", "reference", "question")
_CLOSING_FENCE = re.compile(r"<\s*/\s*(%s)\s*>" % "|".join(FENCE_TAGS), re.IGNORECASE)

class Markers(NamedTuple):
    """A template's section markers, exactly as it writes them: ``inline`` anywhere in a text,
    ``labels`` at the start of a line (after spaces or tabs) with text after them, ``lines`` a
    whole line (a heading)."""

    inline: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()


# template -> its section markers, declared by the judge module that renders the template
# (``declare_markers``, next to its renderer). Only these strings, case-sensitive, are escaped in
# untrusted text (tests/unit/test_prompt_injection.py); importing ragscale.judges declares them all.
MARKERS: dict[str, Markers] = {}


def declare_markers(template: str, markers: Markers) -> None:
    """Declare ``template``'s section markers (once; the same markers again is a no-op)."""
    if MARKERS.get(template, markers) != markers:
        raise ValueError(f"template {template!r} has its section markers declared twice, differently")
    MARKERS[template] = markers
    marker_patterns.cache_clear()


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


def _alternatives(markers: tuple[str, ...]) -> str:
    return "|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True))


@functools.lru_cache(maxsize=None)
def marker_patterns(template: str) -> tuple[re.Pattern, ...]:
    """Patterns of ``template``'s markers (``MARKERS``), case-sensitive: group ``m`` is the
    marker, group ``lead`` (line markers) the spaces before it."""
    if template not in MARKERS:
        raise KeyError(f"no section markers registered for template {template!r}")
    marks = MARKERS[template]
    found = []
    if marks.inline:
        found.append(re.compile(f"(?P<m>{_alternatives(marks.inline)})"))
    if marks.labels:
        found.append(re.compile(f"(?m)^(?P<lead>[ \\t]*)(?P<m>{_alternatives(marks.labels)})"))
    if marks.lines:
        found.append(re.compile(f"(?m)^(?P<lead>[ \\t]*)(?P<m>{_alternatives(marks.lines)})(?=[ \\t]*$)"))
    return tuple(found)


def neutralize(text: str, template: str) -> str:
    """``text`` with each of ``template``'s exact section markers (``MARKERS``) escaped by a
    backslash: before a line's marker (``\\Passage:``, ``\\## Output format``), after the first
    character of an inline one (``[\\Output]``, ``<\\/passage>``). Other text is unchanged."""
    for rx in marker_patterns(template):
        if "lead" in rx.groupindex:
            text = rx.sub(lambda m: m["lead"] + "\\" + m["m"], text)
        else:
            text = rx.sub(lambda m: m["m"][0] + "\\" + m["m"][1:], text)
    return text
