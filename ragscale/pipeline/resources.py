"""What a run's stages ask Ray for, and the CPU requests fitted to what Ray has.

Every actor of every pool holds its CPUs for the whole run, and a CPU task (the read/lexical
task, derive) needs a slot besides. When the actors ask for more than the Ray instance has (a
two-judge panel with the NLI pool on a 2-core machine: three actors of one CPU), one actor is
never placed, its stage never starts and the run makes no progress, silently. So the requests
are scaled down together until they fit: the stages then share the cores, as the threads of one
process would (docs/clusters.md, "CPU requests"). ``cluster.fit_cpus=false`` keeps them as
configured (an autoscaling cluster that grows to them). GPUs are never scaled: a local Ray with
fewer GPUs than the pools ask for refuses the run. No Ray import here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ragscale.errors import UserError

RESOLUTION = 1e-4  # Ray's resource granularity: scaled requests are floored to it
OUTPUT_NUM_CPUS = 0.1  # the task that formats the records.jsonl lines (fused with the derive task)


@dataclass(frozen=True)
class Demand:
    """The stages' requests: per actor pool ``(label, CPUs, GPUs)`` over all its actors, and the
    largest CPU task's CPUs (one task slot is what the read and derive tasks need to go on)."""

    pools: tuple[tuple[str, float, float], ...]
    task_cpus: float

    @property
    def cpus(self) -> float:
        return sum(p[1] for p in self.pools) + self.task_cpus

    @property
    def gpus(self) -> float:
        return sum(p[2] for p in self.pools)

    def parts(self, index: int) -> str:
        """``judge@a 1, nli 1`` for CPUs (``index`` 1) or GPUs (2): the pools that ask for any."""
        return ", ".join(f"{p[0]} {p[index]:g}" for p in self.pools if p[index] > 0)


@dataclass(frozen=True)
class Fit:
    """``cpu_scale``: the factor every stage's CPU request is multiplied by (1.0: as configured);
    ``notice``: the line the run prints about it, or None."""

    cpu_scale: float = 1.0
    notice: str | None = None


def demand(plan: Any) -> Demand:
    """The CPUs and GPUs that ``plan``'s stages ask for (ragscale.pipeline.graph's stages, the
    read/lexical task, and the output task that formats the lines)."""
    from ragscale.pipeline.graph import build_stages

    pools, tasks = [], [float(plan.cluster.get("lexical_num_cpus", 1.0)), OUTPUT_NUM_CPUS]
    for st in build_stages(plan):
        if st.pool is None:
            tasks.append(float(st.num_cpus))
            continue
        size = int(st.pool.get("size", 1))
        pools.append((st.label, size * float(st.pool.get("num_cpus", 1.0)),
                      size * float(st.pool.get("num_gpus", 0.0))))
    return Demand(tuple(pools), max(tasks))


def scaled(cpus: float, scale: float) -> float:
    """A CPU request times ``scale``, floored to Ray's resolution (never below it)."""
    if scale >= 1.0:
        return cpus
    return max(RESOLUTION, math.floor(cpus * scale / RESOLUTION) * RESOLUTION)


def fit(need: Demand, resources: dict, local: bool, fit_cpus: bool = True) -> Fit:
    """The CPU scale for ``need`` on a Ray instance with ``resources`` (``ray.cluster_resources()``);
    ``local``: an instance this run started (no autoscaler to wait for). A local instance with
    fewer GPUs than the pools ask for is a UserError; a connected one gets a warning."""
    gpus = float(resources.get("GPU", 0.0))
    said: list[str] = []  # the notices, joined by "; "
    if need.gpus > gpus + RESOLUTION:
        text = (f"the actor pools ask for {need.gpus:g} GPU(s) ({need.parts(2)}) and Ray has {gpus:g}")
        if local:
            raise UserError(f"{text}: set the pools' num_gpus to 0 (cluster=local runs on CPUs), or run on a "
                            "machine with the GPUs")
        said.append(f"warning: {text}: the run waits until the cluster has them")
    cpus = float(resources.get("CPU", 0.0))
    if need.cpus <= cpus + RESOLUTION or cpus <= 0:
        return Fit(1.0, said[0] if said else None)  # the GPU warning, if any
    asked = f"the stages ask for {need.cpus:g} CPUs ({need.parts(1)}, and {need.task_cpus:g} for a task) and Ray has {cpus:g}"
    if not fit_cpus:
        said.append(f"warning: {asked}: the run waits until the cluster has them (cluster.fit_cpus=false)")
        return Fit(1.0, "; ".join(said))
    scale = cpus / need.cpus
    said.append(f"{asked}: every stage's CPU request is scaled by {scale:.3g} so that all of them run at once "
                "(they share the cores; cluster.fit_cpus=false keeps the requests)")
    return Fit(scale, "; ".join(said))
