"""LLM judges: prompt rendering and parsing, pure and versioned; engines live in actors/engines/.

``JUDGES`` is the one registry: judge name -> the metric it fills, its prompt version, and
how to start it on a pipeline record (a generator of (prompt, parse) steps, see base.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ragscale.judges import faithfulness, idk, radbench, underspecified
from ragscale.judges.base import JudgeRun, single


@dataclass(frozen=True)
class JudgeSpec:
    name: str
    metric: str
    version: str
    start: Callable[[dict, dict], JudgeRun]  # (raw input object, pipeline row) -> judge run


def _idk(obj: dict, row: dict) -> JudgeRun:
    return single(idk.render(obj.get("input") or [], row["prediction"]), idk.parse)


def _radbench(obj: dict, row: dict) -> JudgeRun:
    prompt = radbench.render(obj.get("input") or [], row["targets"][0], row["passages"], row["prediction"])
    return single(prompt, radbench.parse)


def _underspecified(obj: dict, row: dict) -> JudgeRun:
    return single(underspecified.render(row["prediction"]), underspecified.parse)


JUDGES: dict[str, JudgeSpec] = {
    s.name: s
    for s in (
        JudgeSpec(idk.NAME, "idk_eval", idk.VERSION, _idk),
        JudgeSpec(faithfulness.NAME, "RL_F", faithfulness.VERSION, faithfulness.from_record),
        JudgeSpec(radbench.NAME, "RB_llm", radbench.VERSION, _radbench),
        JudgeSpec(underspecified.NAME, "underspecified_eval", underspecified.VERSION, _underspecified),
    )
}
# metric -> judge name
JUDGED: dict[str, str] = {s.metric: s.name for s in JUDGES.values()}
