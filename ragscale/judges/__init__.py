"""LLM judges: prompt rendering and parsing, pure and versioned; engines live in ragscale/actors/engines/.

``JUDGES`` is the registry's table of judges (ragscale/registry.py, kind ``judge``): judge name ->
the metric it fills, its prompt version, and how to start it on a record's ``JudgeInput``
(judge_input.py; a generator of (prompt, parse) steps, see base.py). Importing this package
registers every judge module's ``JUDGE_SPECS``, then loads the plugins, whose judges join the same
table: adding a judge is one module (its template, renderer, parser, ``JUDGE_SPECS`` and its
metrics' catalog entries) plus its template file.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterator, Mapping, Sequence

from ragscale.judges.base import JudgeResult, JudgeRun, JudgeSpec, single  # noqa: F401 - re-exported
from ragscale.registry import REGISTRY

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
    for _spec in getattr(importlib.import_module(f"{__name__}.{_info.name}"), "JUDGE_SPECS", ()):
        REGISTRY.register("judge", _spec.name, _spec)

# judge name -> JudgeSpec: ragscale's, then the plugins' (a live table: a judge registered later joins it)
JUDGES: dict[str, JudgeSpec] = REGISTRY.table("judge")
REGISTRY.load("judge")  # the plugins' judges, now (a plugin that fails to load stops this import)


class _Judged(Mapping[str, str]):
    """metric -> the name of the judge that fills it, read from :data:`JUDGES` as it is now."""

    def _table(self) -> dict[str, str]:
        return {m: s.name for s in JUDGES.values() for m in s.metrics}

    def __getitem__(self, metric: str) -> str:
        return self._table()[metric]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


JUDGED: Mapping[str, str] = _Judged()


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
