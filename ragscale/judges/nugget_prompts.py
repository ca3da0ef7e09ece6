"""The nugget judge's constrained-protocol prompts (ragscale.judges.nuggets): its name and prompt
version, the caps, the JSON schemas, the three renderers (creation, importance, assignment) and
their parsers. Prompt texts: templates/nuggets_{create,importance,assign}_v1.txt."""

from __future__ import annotations

import re
from typing import Sequence

from ragscale.judges.base import JudgeParseError, JudgePrompt, load_json_object
from ragscale.judges.templates import load_template
from ragscale.metrics.nuggets import ASSIGNMENT_SCORES, IMPORTANCES

NAME = "nuggets"
VERSION = "openrageval-autonugget-v1"
MAX_NUGGETS = 30  # AutoNuggetMetric.max_nuggets
MAX_NUGGET_CHARS = 200  # a nugget is 1-12 words; the bound stops a looping small model
NO_INFO = "Not enough information, no answer found"

CREATE_SCHEMA = {
    "type": "object",
    "properties": {
        "nuggets": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_NUGGET_CHARS},
            "minItems": 1,  # the prompt never allows an empty list (its fallback is one "Not enough information" nugget)
            "maxItems": MAX_NUGGETS,
        }
    },
    "required": ["nuggets"],
}


def _labels_schema(key: str, labels: Sequence[str], n: int) -> dict:
    return {
        "type": "object",
        "properties": {
            key: {"type": "array", "items": {"type": "string", "enum": list(labels)}, "minItems": n, "maxItems": n}
        },
        "required": [key],
    }


def importance_schema(n: int) -> dict:
    """``{"importance": [...]}``: exactly ``n`` of "vital" / "okay"."""
    return _labels_schema("importance", IMPORTANCES, n)


def assignment_schema(n: int) -> dict:
    """``{"assignment": [...]}``: exactly ``n`` of "support" / "partial_support" / "not_support"."""
    return _labels_schema("assignment", list(ASSIGNMENT_SCORES), n)


_CLOSING_TAG = re.compile(r"<\s*/\s*(query|context|passage)\s*>", re.IGNORECASE)


def _fence(tag: str, text: str) -> str:
    """``text`` between ``<tag>`` and ``</tag>``; a closing fence tag inside it is escaped."""
    escaped = _CLOSING_TAG.sub(lambda m: f"<\\/{m.group(1).lower()}>", text)
    return f"<{tag}>{escaped}</{tag}>"


def render_create(query: str, passages: Sequence[str], nuggets: Sequence[str]) -> JudgePrompt:
    """One creation iteration: the shared instructions, then the query, the context (the
    given passages numbered ``[1]``...) and the current nugget list."""
    context = "\n" + "\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages)) + "\n"
    text = (load_template("nuggets_create_v1")
            + f"Search Query: {_fence('query', query)}\n\n"
            + f"Context:\n{_fence('context', context)}\n\n"
            + f"Initial Nugget List: {list(nuggets)!r}\nInitial Nugget List Length: {len(nuggets)}\n\n"
            + "Updated Nugget List:\n")
    # 30 nuggets of ~12 words each, with room for whitespace a grammar allows
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), CREATE_SCHEMA, max_tokens=2048)


def render_importance(query: str, nuggets: Sequence[str]) -> JudgePrompt:
    """One importance batch (at most ``BATCH`` nuggets, ragscale.judges.nugget_rounds)."""
    text = (load_template("nuggets_importance_v1").replace("{len_nuggets}", str(len(nuggets)))
            + f"Search Query: {_fence('query', query)}\nNugget List: {list(nuggets)!r}\nLabels:\n")
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), importance_schema(len(nuggets)),
                       max_tokens=32 + 16 * len(nuggets))


def render_assign(query: str, answer: str, nuggets: Sequence[str]) -> JudgePrompt:
    """One assignment batch: the answer (the "passage") is fenced; the nugget list comes last,
    so the batches of one record share everything before it."""
    passage = "\n" + answer + "\n"
    text = (load_template("nuggets_assign_v1").replace("{len_nuggets}", str(len(nuggets)))
            + f"Search Query: {_fence('query', query)}\n\n"
            + f"Passage:\n{_fence('passage', passage)}\n\n"
            + f"Nugget List: {list(nuggets)!r}\n\nLabels:\n")
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), assignment_schema(len(nuggets)),
                       max_tokens=32 + 16 * len(nuggets))


def parse_nuggets(raw: str) -> list[str]:
    """``{"nuggets": [str, ...]}`` -> the nuggets, blank ones dropped, at most ``MAX_NUGGETS``
    (the first ones); may be empty. Raises JudgeParseError otherwise."""
    items = load_json_object(NAME, raw).get("nuggets")
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise JudgeParseError(NAME, raw, "nuggets is not a list of strings")
    return [s for s in items if s.strip()][:MAX_NUGGETS]


def _parse_labels(raw: str, key: str, allowed: Sequence[str], n: int) -> list[str]:
    items = load_json_object(NAME, raw).get(key)
    if not isinstance(items, list) or len(items) != n:
        raise JudgeParseError(NAME, raw, f"{key} is not a list of {n} labels")
    out = []
    for label in items:
        norm = label.strip().lower() if isinstance(label, str) else None
        if norm not in allowed:
            raise JudgeParseError(NAME, raw, f"{key} label {label!r} is not one of {', '.join(allowed)}")
        out.append(norm)
    return out


def parse_importance(raw: str, n: int) -> list[str]:
    """``{"importance": [...]}`` with exactly ``n`` labels "vital"/"okay" -> the labels."""
    return _parse_labels(raw, "importance", IMPORTANCES, n)


def parse_assignment(raw: str, n: int) -> list[str]:
    """``{"assignment": [...]}`` with exactly ``n`` labels support/partial_support/not_support."""
    return _parse_labels(raw, "assignment", list(ASSIGNMENT_SCORES), n)
