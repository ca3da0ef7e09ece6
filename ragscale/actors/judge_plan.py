"""The judge pools of a run, planned on the driver before Ray starts.

``plan_judges`` resolves the engines and the actors' arguments from the judge settings; the judge
stage kind's builder (``judge_stages``) declares one ``JudgeActor`` pool (ragscale.actors.judge)
for the run's judge, then one per member of a judge panel (``@<tag>`` on the metrics it writes),
each threaded with :func:`batches_in_flight` batches at once. No Ray import: ragscale.pipeline
runs what this declares. Which judges go on a panel: :func:`panel_judges`; how the members'
values become the run's: the derive stage (ragscale.pipeline.cpu_stages.derive,
ragscale.metrics.registry.jury_verdict).
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
    panel's verdicts must be taken after the judges. The judges on the panel (:func:`panel_judges`)
    run on every member and not on the main judge, which runs the others."""
    from ragscale.actors.engines import resolve as resolve_engine
    from ragscale.cachedir import judge_cache_path
    from ragscale.errors import UserError
    from ragscale.judges import JUDGED

    pool = cluster.get("judge") or {}
    judged = list(dict.fromkeys(JUDGED[m] for m in metrics if m in JUDGED))
    panel = list(settings.panel)
    on_panel: list[str] = []
    panel_kwargs: list[dict] = []
    k = settings.taxonomy_k
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise UserError(f"taxonomy.k must be a positive integer or null (every chunk), got {k!r}")
    if panel:
        on_panel = panel_judges(settings.panel_metrics, metrics)
        names = [c["name"] for c in panel]
        if len(set(names)) != len(names):
            raise UserError(f"judge_panel: judge names must be unique, got {names}")
        for name in names:  # the columns are read back at their last "@" (a metric's name may hold one: P@5)
            if "@" in str(name):
                raise UserError(f"judge_panel: a judge name may not contain '@' (it separates metric and judge in "
                                f"the <metric>@<judge> columns), got {name!r}")
        panel_kwargs = [{"engine": resolve_engine(c, pool), "judges": on_panel, "tag": c["name"],
                         "cache_path": judge_cache_path(c["cache_path"], f"judge_panel[{c['name']}].cache_path"),
                         "max_retries": c["max_retries"], "protocol": _protocol(c, f"judge_panel[{c['name']}]"),
                         **judge_limits(c, f"judge_panel[{c['name']}]", settings.overwrite),
                         **_options(on_panel, k)}
                        for c in panel]
    j = dict(settings.judge)
    kwargs: dict[str, Any] = {
        "engine": resolve_engine(j, pool),
        "judges": [n for n in judged if n not in on_panel],
        "cache_path": judge_cache_path(j["cache_path"]),
        "max_retries": j["max_retries"],
        "protocol": _protocol(j, "judge"),
        **judge_limits(j, "judge", settings.overwrite),
        **_options([n for n in judged if n not in on_panel], k),
    }
    return {"judge_kwargs": kwargs, "panel_confs": tuple(panel), "panel_kwargs": tuple(panel_kwargs),
            "needs_derive": bool(on_panel)}


PANEL_ALL = "all"  # panel_metrics=[all]: every judged metric the run computes


def panel_metrics(names: Sequence[str], metrics: Sequence[str]) -> list[str]:
    """The run's metrics that ``panel_metrics`` names: catalog names or any name the catalog
    accepts for one (an alias, a short label: ragscale.metrics.registry.canonical), or ``all``
    (every judged metric the run computes). A name that is no metric, or no judged metric, is a
    one-line UserError. A judged metric the run does not compute is left out (the default,
    ``[RB_llm]``, in a run without RB_llm). Embedded metrics (ragas' answer relevancy: the
    relevancy stage embeds its judge's generated questions, it is no judge's score) cannot go on
    a panel: ``all`` leaves them out, naming one is refused."""
    from ragscale.judges import JUDGED
    from ragscale.metrics.registry import canonical, embedded, lookup

    out: list[str] = []
    for name in names:
        if str(name).strip().lower() == PANEL_ALL:
            out.extend(m for m in metrics if m in JUDGED and not lookup(m).embedded)
            continue
        try:
            m = canonical(str(name))
        except UserError as e:
            raise UserError(f"panel_metrics: {e}") from None
        if m not in JUDGED:
            mine = [x for x in metrics if x in JUDGED and not lookup(x).embedded]
            raise UserError(f"panel_metrics: {name!r} is not a judged metric; a panel scores judged metrics "
                            f"(this run's: {', '.join(mine) or 'none'}) or all")
        if embedded([m]):
            raise UserError(f"panel_metrics: {name!r} cannot go on a judge panel: the relevancy stage computes it "
                            "from embeddings of its judge's generated questions, not from a judge's score")
        if m in metrics:
            out.append(m)
    return list(dict.fromkeys(out))


def panel_judges(names: Sequence[str], metrics: Sequence[str]) -> list[str]:
    """The judges a panel runs, in the run's judge order: each judge of a metric that
    ``panel_metrics`` names (:func:`panel_metrics`) goes on the panel whole (every member writes
    all of its metrics with ``@<tag>``), and so does every judge of the run that reads one of
    them (``after``: nuggets reads UMBRELA's grades, so UMBRELA on the panel takes nuggets along,
    and each member's nuggets read that member's grades). A judge that reads a judge left to the
    main judge reads the main judge's values (nuggets on the panel, UMBRELA not: every member
    reads the same grades). Nothing of ``panel_metrics`` in the run is a one-line UserError."""
    from ragscale.judges import JUDGED

    run_judges = list(dict.fromkeys(JUDGED[m] for m in metrics if m in JUDGED))
    chosen = {JUDGED[m] for m in panel_metrics(names, metrics)}
    if not chosen:
        raise UserError(f"judge_panel is set but this run computes none of panel_metrics "
                        f"({', '.join(map(str, names)) or 'none'}); its judged metrics: "
                        f"{', '.join(m for m in metrics if m in JUDGED) or 'none'} (or panel_metrics=[all])")
    grown = True
    while grown:
        more = {j for j in run_judges if j not in chosen and set(JUDGES[j].after) & chosen}
        chosen |= more
        grown = bool(more)
    return [j for j in run_judges if j in chosen]


def _options(judges: Sequence[str], k: Any) -> dict:
    """``{"options": ...}`` of a JudgeActor running ``judges``: the taxonomy's top-K for its
    retrieval and grounding judges (``taxonomy.k``); {} when none of them runs."""
    options = {name: {"k": k} for name in ("taxonomy_retrieval", "taxonomy_grounding") if name in judges}
    return {"options": options} if options else {}


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
    produces the run's metrics of its judges and their details (``@tag`` on both for a panel
    member: ``details:nuggets@a``), and may write every metric of its judges (``writes``: a judge
    writes all of its metrics). A member needs what its judges read that it does not make itself
    (nuggets on the panel and UMBRELA on the main judge: ``umbrela_scores``, made earlier)."""
    if "judge" not in plan.stages:
        return []
    out = []
    pool = plan.cluster.get("judge", {})
    for kwargs in ([plan.judge_kwargs] if plan.judge_kwargs.get("judges") else []) + list(plan.panel_kwargs):
        suffix = f"@{kwargs['tag']}" if kwargs.get("tag") else ""
        made = frozenset(m for j in kwargs["judges"] for m in JUDGES[j].metrics if m in plan.metrics)
        produces = frozenset({f"{m}{suffix}" for m in made} | {f"details:{j}{suffix}" for j in kwargs["judges"]})
        out.append(Stage("judge", JudgeActor, kwargs, needs=needs_of(made), produces=produces, pool=pool,
                         batch_size=16, restart_counter="judge_actor_restarts",
                         calls=batches_in_flight(kwargs["engine"], pool),
                         writes=tuple(m + suffix for j in kwargs["judges"] for m in JUDGES[j].metrics)))
    return out
