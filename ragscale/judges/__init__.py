"""LLM judges: prompt rendering and parsing, pure and versioned; engines live in ragscale/actors/engines/.

``JUDGES`` is the one registry: judge name -> the metric it fills, its prompt version, and
how to start it on a record's ``JudgeInput`` (judge_input.py; a generator of (prompt, parse)
steps, see base.py), collected from the judge modules' ``JUDGE_SPECS``: adding a judge is one module (its
template, renderer, parser, ``JUDGE_SPECS`` and its metrics' catalog entries) plus its template file.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Sequence

from ragscale.judges.base import JudgeResult, JudgeRun, JudgeSpec, single  # noqa: F401 - re-exported


def _collect() -> dict[str, JudgeSpec]:
    """Every judge module's ``JUDGE_SPECS`` (a judge is one module plus its template), then the
    plugins' (ragscale.plugins)."""
    from ragscale.plugins import contributed

    out: dict[str, JudgeSpec] = {}
    modules = [importlib.import_module(f"{__name__}.{info.name}")
               for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name)]
    for spec in [s for module in modules for s in getattr(module, "JUDGE_SPECS", ())] + contributed("JUDGE_SPECS"):
        if spec.name in out:
            raise ValueError(f"judge {spec.name!r} is declared twice")
        out[spec.name] = spec
    return out


JUDGES: dict[str, JudgeSpec] = _collect()
# metric -> judge name
JUDGED: dict[str, str] = {m: s.name for s in JUDGES.values() for m in s.metrics}


def judge_phases(specs: Sequence[JudgeSpec]) -> list[list[JudgeSpec]]:
    """Order judges into phases: each judge runs in a phase after every judge it needs
    (``after``) among ``specs``; judges of one phase are batched together."""
    names = {s.name for s in specs}
    level: dict[str, int] = {}

    def depth(spec: JudgeSpec, seen: tuple[str, ...] = ()) -> int:
        if spec.name in seen:
            raise ValueError(f"judge dependency cycle: {' -> '.join(seen + (spec.name,))}")
        if spec.name not in level:
            deps = [JUDGES[a] for a in spec.after if a in names]
            level[spec.name] = 1 + max((depth(d, seen + (spec.name,)) for d in deps), default=-1)
        return level[spec.name]

    phases: list[list[JudgeSpec]] = []
    for spec in specs:
        d = depth(spec)
        while len(phases) <= d:
            phases.append([])
        phases[d].append(spec)
    return [p for p in phases if p]
