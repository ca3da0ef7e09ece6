"""Stage declarations and the table of stage kinds (no Ray, no Arrow: workers import it).

A stage kind registers its builder next to its worker, the way Ray Data's ``StatefulStage``
declares its UDF with its map settings: ``@stage_kind("encoder", order=10)`` over a function
``(plan) -> list[Stage]`` in ragscale/actors/encoder.py. ragscale.pipeline.graph calls every
builder in ``order`` and checks the graph; it has no branch per kind. A builder returns ``[]``
when the run does not use its kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ragscale.errors import UserError
from ragscale.metrics.registry import lookup


@dataclass(frozen=True)
class Stage:
    """One pipeline stage, as its kind's builder declares it (ragscale.pipeline.graph runs it)."""

    name: str
    worker: Any  # a Worker class (actor pool), or a function(batch table, **kwargs) -> table (CPU task)
    kwargs: Mapping[str, Any] = field(default_factory=dict)  # constructor or function keyword arguments
    needs: frozenset[str] = frozenset()  # metrics (or "details:<judge>") read from earlier stages
    produces: frozenset[str] = frozenset()  # metrics (or "details:<judge>") written
    pool: Mapping[str, Any] | None = None  # cluster.<pool> of an actor pool; None: a CPU task
    batch_size: int | None = 256
    num_cpus: float = 0.1  # of a CPU task
    restart_counter: str | None = None  # run.json counter of the pool's actor restarts
    calls: int = 1  # batches an actor of the pool works on at once (threaded; a streaming judge engine)
    writes: tuple[str, ...] = ()  # metrics it may write besides ``produces`` (every metric of a judge), in order

    @property
    def label(self) -> str:
        """The stage's name in the progress display and the run's lines (a judge panel's by their tag)."""
        tag = self.kwargs.get("tag") if self.pool is not None else None
        return f"{self.name}@{tag}" if tag else self.name


Builder = Callable[[Any], "list[Stage]"]


@dataclass(frozen=True)
class StageKind:
    """A kind of stage: its name, its place in the run (``order``) and its builder."""

    name: str
    order: int
    build: Builder


_KINDS: dict[str, StageKind] = {}


def stage_kind(name: str, order: int) -> Callable[[Builder], Builder]:
    """Register the decorated ``(plan) -> list[Stage]`` as the builder of kind ``name``, run at
    ``order`` among the kinds (lower first). A name registered twice by two functions is refused."""

    def register(build: Builder) -> Builder:
        known = _KINDS.get(name)
        if known is not None and (known.build.__module__, known.build.__qualname__) != (build.__module__, build.__qualname__):
            raise UserError(f"stage kind {name!r} is registered twice ({known.build.__module__} and {build.__module__})")
        _KINDS[name] = StageKind(name, order, build)
        return build

    return register


def stage_kinds() -> list[StageKind]:
    """The registered kinds in run order (``order``, then name)."""
    return sorted(_KINDS.values(), key=lambda k: (k.order, k.name))


def of_stage(metrics: Any, stage: str) -> frozenset[str]:
    """The run's metrics that the catalog computes in ``stage`` (MetricSpec.stage)."""
    return frozenset(m for m in metrics if lookup(m) is not None and lookup(m).stage == stage)


def needs_of(produces: frozenset[str]) -> frozenset[str]:
    """What the produced metrics require (their catalog ``requires``), less what the stage makes itself."""
    out = {r for m in produces if lookup(m) is not None for r in lookup(m).requires}
    return frozenset(out - produces)
