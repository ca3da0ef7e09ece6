"""Synthetic answers of the judge steps whose outputs later rounds need, so that the dry run
(ragscale prompts) can render those rounds: documented in docs/prompts.md ("estimated")."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ragscale.judges.base import JudgePrompt
from ragscale.judges.judge_input import JudgeInput

UMBRELA_GRADE = 3  # the synthetic grade of every passage: every passage reaches the nuggets' context


def sentences(text: str) -> list[str]:
    """``text`` split after ``.``, ``!`` or ``?`` followed by white space; blank pieces dropped."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text or "") if s.strip()]


@dataclass
class Trace:
    """One (record, judge) run of the dry run: its round, the answers it got, whether any was synthetic."""

    judge: str
    inp: JudgeInput  # what the judge reads of the record
    estimated: bool = False
    round: int = 0
    # per round: (fan-out?, its output schema's one property or None, the parsed value(s))
    answers: list[tuple[bool, str | None, Any]] = field(default_factory=list)


def output_field(prompt: JudgePrompt) -> str | None:
    """The one property of the prompt's output schema (``statements``, ``score``...), if it has one."""
    props = list((prompt.schema or {}).get("properties") or {})
    return props[0] if len(props) == 1 else None


def _answer(prompt: JudgePrompt, name: str, value: Any) -> str:
    """A JSON output ``{name: value}``, as the judges' prompts ask for it under both protocols; a
    list within the bounds the prompt's schema sets (maxItems, the items' maxLength)."""
    name = output_field(prompt) or name
    spec = ((prompt.schema or {}).get("properties") or {}).get(name) or {}
    if isinstance(value, list):
        width = (spec.get("items") or {}).get("maxLength")
        value = [v[:width] for v in value] if width else value
        value = value[: spec["maxItems"]] if spec.get("maxItems") else value
    return json.dumps({name: value}, ensure_ascii=False)


def _listed(value: Any) -> list:
    """A parsed list output (the nuggets), also when a parser returns it inside its output model."""
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):  # a one-item fan-out round
        value = value[0]
    return value if isinstance(value, list) else []


def _faithfulness(t: Trace, item: int | None, prompt: JudgePrompt) -> str | None:
    """RAGAS faithfulness: the statements (round 1) are the answer's sentences; the verdicts end it."""
    return _answer(prompt, "statements", sentences(t.inp.prediction)) if t.round == 1 else None


def _umbrela(t: Trace, item: int | None, prompt: JudgePrompt) -> str | None:
    """UMBRELA: every passage graded ``UMBRELA_GRADE`` (so every passage is in the nuggets' context)."""
    return _answer(prompt, "score", str(UMBRELA_GRADE))


def _nuggets(t: Trace, item: int | None, prompt: JudgePrompt) -> str | None:
    """Nuggets: a creation answers the list as it stands (at first the answer's sentences), so the
    creation stops at a fixed point where it can; every nugget is vital; the assignment ends it."""
    from ragscale.judges.nugget_prompts import NO_INFO
    from ragscale.judges.nugget_rounds import BATCH
    from ragscale.metrics.nuggets import IMPORTANCES
    from ragscale.metrics.trec import answer_text

    fan_outs = [fan for fan, _, _ in t.answers]
    kind = output_field(prompt) or ("nuggets" if item is None else "" if any(fan_outs) else "importance")
    created = [_listed(v) for fan, name, v in t.answers if (name or ("nuggets" if not fan else "")) == "nuggets"]
    if kind == "nuggets":
        if created:
            return _answer(prompt, "nuggets", created[-1])
        return _answer(prompt, "nuggets", sentences(answer_text(t.inp.prediction)) or [NO_INFO])
    if kind == "importance":  # batch `item` of the created nuggets
        nuggets = created[-1] if created else []
        batch = nuggets if item is None else nuggets[item * BATCH:(item + 1) * BATCH]
        return _answer(prompt, "importance", [IMPORTANCES[0]] * len(batch))
    return None


# judge name -> the synthetic output of a step whose output is not generated yet (None: the judge's
# run ends there); the output goes through the step's own parser, whatever the protocol
SYNTHETIC: dict[str, Callable[[Trace, int | None, JudgePrompt], str | None]] = {
    "ragas_faithfulness": _faithfulness, "umbrela": _umbrela, "nuggets": _nuggets,
}
