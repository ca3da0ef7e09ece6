"""The judge pools of a run, planned on the driver before Ray starts.

``plan_judges`` resolves the engines and the actors' arguments from the judge settings; the judge
stage kind's builder (``judge_stages``) declares one ``JudgeActor`` pool (ragscale.actors.judge)
for the run's judge, then one per member of a judge panel (``@<tag>`` on the metrics it writes),
each threaded with :func:`batches_in_flight` batches at once. No Ray import: ragscale.pipeline
runs what this declares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ragscale.actors.engines import streams
from ragscale.actors.judge import JudgeActor
from ragscale.actors.judge_runs import judge_limits
from ragscale.errors import UserError
from ragscale.judges import JUDGES
from ragscale.judges.base import PROTOCOLS
from ragscale.stage_kinds import Stage, needs_of, stage_kind

if TYPE_CHECKING:  # the config module (Hydra's ConfigStore) is not loaded in the workers
    from ragscale.config import JudgeSettings


def plan_judges(settings: JudgeSettings, metrics: Sequence[str], cluster: Mapping[str, Any]) -> dict:
    """The judge pool's plan from the judge settings (ragscale.config.JudgeSettings, made by
    ragscale.plan.plan_run; on the driver, before Ray starts): the main judge's and each panel
    member's JudgeActor arguments (engines resolved and checked), and ``needs_derive`` when a
    panel's median must be taken after the judges."""
    from ragscale.actors.engines import resolve as resolve_engine
    from ragscale.cachedir import judge_cache_path
    from ragscale.errors import UserError
    from ragscale.judges import JUDGED
    from ragscale.metrics.registry import lookup

    pool = cluster.get("judge") or {}
    judged = list(dict.fromkeys(JUDGED[m] for m in metrics if m in JUDGED))
    panel = list(settings.panel)
    on_panel: list[str] = []
    panel_kwargs: list[dict] = []
    if panel:
        single = [m for m, j in JUDGED.items() if JUDGES[j].metrics == (m,) and not lookup(m).embedded]
        for m in settings.panel_metrics:
            if m not in single:
                raise UserError(f"panel_metrics: {m!r} is not a single-score judged metric ({', '.join(single)})")
        on_panel = list(dict.fromkeys(JUDGED[m] for m in settings.panel_metrics if m in metrics))
        names = [c["name"] for c in panel]
        if len(set(names)) != len(names):
            raise UserError(f"judge_panel: judge names must be unique, got {names}")
        panel_kwargs = [{"engine": resolve_engine(c, pool), "judges": on_panel, "tag": c["name"],
                         "cache_path": judge_cache_path(c["cache_path"], f"judge_panel[{c['name']}].cache_path"),
                         "max_retries": c["max_retries"], "protocol": _protocol(c, f"judge_panel[{c['name']}]"),
                         **judge_limits(c, f"judge_panel[{c['name']}]", settings.overwrite)}
                        for c in panel]
    j = dict(settings.judge)
    kwargs: dict[str, Any] = {
        "engine": resolve_engine(j, pool),
        "judges": [n for n in judged if n not in on_panel],
        "cache_path": judge_cache_path(j["cache_path"]),
        "max_retries": j["max_retries"],
        "protocol": _protocol(j, "judge"),
        **judge_limits(j, "judge", settings.overwrite),
    }
    k = settings.taxonomy_k
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise UserError(f"taxonomy.k must be a positive integer or null (every chunk), got {k!r}")
    options = {name: {"k": k} for name in ("taxonomy_retrieval", "taxonomy_grounding") if name in kwargs["judges"]}
    if options:
        kwargs["options"] = options
    return {"judge_kwargs": kwargs, "panel_confs": tuple(panel), "panel_kwargs": tuple(panel_kwargs),
            "needs_derive": bool(on_panel)}


def _protocol(conf: Mapping[str, Any], where: str) -> str:
    """A judge config's ``protocol``, checked (a one-line UserError names the choices)."""
    from ragscale.errors import UserError, did_you_mean

    p = conf.get("protocol") or "constrained"
    if p not in PROTOCOLS:
        raise UserError(f"{where}.protocol: unknown judging protocol {p!r}{did_you_mean(str(p), PROTOCOLS)}; "
                        f"protocols are {', '.join(PROTOCOLS)} (docs/metrics.md, Judging protocols)")
    return p


def protocols_used(kwargs: Mapping[str, Any]) -> dict[str, str]:
    """run.json: the protocol each judge of a JudgeActor's kwargs runs under (a judge without a
    reference protocol runs ``constrained`` whatever was asked)."""
    asked = kwargs.get("protocol", "constrained")
    return {j: JUDGES[j].protocol(asked) for j in kwargs["judges"]}


def batches_in_flight(engine: Mapping[str, Any], pool: Mapping[str, Any]) -> int:
    """Batches a judge actor works on at once: ``cluster.judge.batches_in_flight``, else 4 when
    the engine streams (ragscale.actors.engines.streams), else 1."""
    asked = pool.get("batches_in_flight")
    if asked is None:
        return 4 if streams(engine) else 1
    if int(asked) < 1:
        raise UserError(f"cluster.judge.batches_in_flight must be >= 1 (or null), got {asked}")
    return int(asked)


@stage_kind("judge", order=30)
def judge_stages(plan: Any) -> list[Stage]:
    """A judge pool for the run's judge (when it has judges) and one per panel member. Each
    produces the run's metrics of its judges (``@tag`` for a panel member) and their details, and
    may write every metric of its judges (``writes``: a judge writes all of its metrics)."""
    if "judge" not in plan.stages:
        return []
    out = []
    pool = plan.cluster.get("judge", {})
    for kwargs in ([plan.judge_kwargs] if plan.judge_kwargs.get("judges") else []) + list(plan.panel_kwargs):
        suffix = f"@{kwargs['tag']}" if kwargs.get("tag") else ""
        made = frozenset(m for j in kwargs["judges"] for m in JUDGES[j].metrics if m in plan.metrics)
        produces = frozenset({f"{m}{suffix}" for m in made} | {f"details:{j}" for j in kwargs["judges"]})
        out.append(Stage("judge", JudgeActor, kwargs, needs=needs_of(made), produces=produces, pool=pool,
                         batch_size=16, restart_counter="judge_actor_restarts",
                         calls=batches_in_flight(kwargs["engine"], pool),
                         writes=tuple(m + suffix for j in kwargs["judges"] for m in JUDGES[j].metrics)))
    return out
