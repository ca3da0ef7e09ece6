"""The stage graph of a run, built from declarations and checked before Ray starts.

Each stage kind registers its builder next to its worker (ragscale.stage_kinds); a stage
declares what it needs (metrics, or ``details:<judge>`` left by a judge) and what it produces.
``build_stages`` lays them out from the run plan, kind by kind, and ``check_graph`` refuses,
in one line, a stage whose need no earlier stage produces. No Ray import here.
"""

from __future__ import annotations

from typing import Any

# the modules whose stage kinds a run may use: importing them registers their builders
import ragscale.actors.encoder  # noqa: F401 - encoder, relevancy
import ragscale.actors.judge_plan  # noqa: F401 - judge (and panel members)
import ragscale.actors.nli  # noqa: F401 - nli
import ragscale.pipeline.cpu_stages  # noqa: F401 - hhem_unavailable, derive
from ragscale.errors import UserError
from ragscale.stage_kinds import Stage, of_stage, stage_kinds


def build_stages(plan: Any) -> list[Stage]:
    """The run's stages in order (after the lexical stage, which reads the inputs): every stage
    kind's builder (ragscale.stage_kinds) in its order, then the graph checked."""
    stages = [st for kind in stage_kinds() for st in kind.build(plan)]
    check_graph(stages, first=of_stage(plan.metrics, "lexical"))
    return stages


def row_metrics(plan: Any) -> list[str]:
    """Every metric a record of the run can carry, in the run's order: the plan's metrics, what
    each stage produces, and what it may write besides (``Stage.writes``: every metric of each
    judge the run runs, a panel member's with its ``@tag``). The fields of the rows' ``metrics`` struct."""
    out = list(plan.metrics)
    for st in build_stages(plan):
        out.extend(sorted(m for m in st.produces if not m.startswith("details:")))
        out.extend(st.writes)
    return list(dict.fromkeys(out))


def check_graph(stages: list[Stage], first: frozenset[str] = frozenset()) -> None:
    """Every stage's needs are produced by the lexical stage (``first``) or an earlier stage;
    otherwise a one-line UserError naming the stage and what it lacks."""
    available = set(first)
    for st in stages:
        missing = sorted(st.needs - available - st.produces)
        if missing:
            raise UserError(f"stage {st.name} needs {', '.join(missing)}, which no earlier stage produces "
                            "(enable the metric or step that computes it)")
        available |= st.produces
