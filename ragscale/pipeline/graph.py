"""The stage graph of a run, built from declarations and checked before Ray starts.

Each stage declares what it needs (metrics, or ``details:<judge>`` left by a judge) and
what it produces; ``build_stages`` lays them out from the run plan and ``check_graph``
refuses, in one line, a stage whose need no earlier stage produces. No Ray import here.
"""

from __future__ import annotations

from typing import Any, Mapping

from ragscale.errors import UserError
from ragscale.metrics.registry import embedded, lookup
from ragscale.pipeline.stage import Stage

RELEVANCY_DETAILS = "details:ragas_answer_relevancy"  # what ragas' answer-relevancy judge leaves for the encoder


def _of_stage(metrics: Any, stage: str) -> frozenset[str]:
    return frozenset(m for m in metrics if lookup(m) is not None and lookup(m).stage == stage)


def _needs(produces: frozenset[str]) -> frozenset[str]:
    """What the produced metrics require (their catalog ``requires``), less what the stage makes itself."""
    out = {r for m in produces if lookup(m) is not None for r in lookup(m).requires}
    return frozenset(out - produces)


def panel_tags(plan: Any) -> dict[str, list[str]]:
    """metric -> the tags of the panel judges whose scores it is the median of."""
    from ragscale.judges import JUDGES

    out: dict[str, list[str]] = {}
    for kwargs in plan.panel_kwargs:
        for j in kwargs["judges"]:
            for m in JUDGES[j].metrics:
                out.setdefault(m, []).append(kwargs["tag"])
    return out


def _judge_stages(plan: Any) -> list[Stage]:
    from ragscale.actors.judge import JudgeActor
    from ragscale.judges import JUDGES

    out = []
    pool = plan.cluster.get("judge", {})
    for kwargs in ([plan.judge_kwargs] if plan.judge_kwargs.get("judges") else []) + list(plan.panel_kwargs):
        suffix = f"@{kwargs['tag']}" if kwargs.get("tag") else ""
        made = frozenset(m for j in kwargs["judges"] for m in JUDGES[j].metrics if m in plan.metrics)
        produces = frozenset({f"{m}{suffix}" for m in made} | {f"details:{j}" for j in kwargs["judges"]})
        out.append(Stage("judge", JudgeActor, kwargs, needs=_needs(made), produces=produces, pool=pool,
                         batch_size=16, restart_counter="judge_actor_restarts",
                         calls=batches_in_flight(kwargs["engine"], pool)))
    return out


def batches_in_flight(engine: Mapping[str, Any], pool: Mapping[str, Any]) -> int:
    """Batches a judge actor works on at once: ``cluster.judge.batches_in_flight``, else 4 when
    the engine streams (ragscale.actors.engines.streams), else 1."""
    from ragscale.actors.engines import streams

    asked = pool.get("batches_in_flight")
    if asked is None:
        return 4 if streams(engine) else 1
    if int(asked) < 1:
        raise UserError(f"cluster.judge.batches_in_flight must be >= 1 (or null), got {asked}")
    return int(asked)


def build_stages(plan: Any) -> list[Stage]:
    """The run's stages in order (after the lexical stage, which reads the inputs), checked."""
    from ragscale.actors.encoder import EncoderActor, RelevancyActor
    from ragscale.actors.nli import NLIActor
    from ragscale.pipeline.cpu_stages import derive, null_metric

    metrics = list(plan.metrics)
    stages: list[Stage] = []
    if "encoder" in plan.stages:
        stages.append(Stage("encoder", EncoderActor, {"encoder": plan.encoder_kwargs, "metrics": metrics,
                                                      "baseline": plan.baseline},
                            produces=_of_stage(metrics, "encoder"), pool=plan.cluster.get("encoder", {}),
                            batch_size=256, restart_counter="encoder_actor_restarts"))
    if "nli" in plan.stages:
        if plan.nli_kwargs:
            stages.append(Stage("nli", NLIActor, plan.nli_kwargs, produces=frozenset({"hhem"}),
                                pool=plan.cluster.get("nli", {}), batch_size=16, restart_counter="nli_actor_restarts"))
        else:
            stages.append(Stage("nli", null_metric, {"metric": "hhem", "judge": "hhem",
                                                     "reason": plan.nli_unavailable or "HHEM unavailable"},
                                produces=frozenset({"hhem"}), batch_size=None))
    if "judge" in plan.stages:
        stages.extend(_judge_stages(plan))
    relevancy = embedded(metrics)
    if relevancy:
        # the encoder pool's settings; with an embeddings endpoint (relevancy.embeddings=openai) no
        # encoder is loaded and the actor, an HTTP client, holds no GPU
        endpoint = getattr(plan, "relevancy_kwargs", None) or {}
        pool = dict(plan.cluster.get("encoder", {}), **({"num_gpus": 0.0} if endpoint else {}))
        stages.append(Stage("relevancy", RelevancyActor,
                            {"endpoint": endpoint} if endpoint else {"encoder": plan.encoder_kwargs},
                            needs=frozenset({RELEVANCY_DETAILS}), produces=frozenset(relevancy),
                            pool=pool, batch_size=256, restart_counter="encoder_relevancy_actor_restarts"))
    if "derive" in plan.stages:
        tags = panel_tags(plan)
        produces = _of_stage(metrics, "derive") | frozenset(tags)
        needs = _needs(_of_stage(metrics, "derive")) | {f"{m}@{t}" for m, ts in tags.items() for t in ts}
        # Tiny CPU work: a fractional CPU so it is never starved by actors holding every core.
        stages.append(Stage("derive", derive, {"metrics": metrics, "panel": tags}, needs=frozenset(needs - produces),
                            produces=produces, batch_size=None))
    check_graph(stages, first=_of_stage(metrics, "lexical"))
    return stages


def row_metrics(plan: Any) -> list[str]:
    """Every metric a record of the run can carry, in the run's order: the plan's metrics, what
    each stage produces, and every metric of each judge the run runs (a judge writes all of its
    metrics; a panel member's with its ``@tag``). The fields of the rows' ``metrics`` struct."""
    from ragscale.judges import JUDGES

    out = list(plan.metrics)
    for st in build_stages(plan):
        out.extend(sorted(m for m in st.produces if not m.startswith("details:")))
        if st.pool is not None and st.kwargs.get("judges") is not None:
            suffix = f"@{st.kwargs['tag']}" if st.kwargs.get("tag") else ""
            out.extend(m + suffix for j in st.kwargs["judges"] for m in JUDGES[j].metrics)
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
