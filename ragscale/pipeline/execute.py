"""Build and run the streaming Ray Data pipeline.

    pointers ─from_arrow─▶ load_and_lexical (CPU tasks) ─▶ EncoderActor pool ─▶ NLIActor pool (HHEM)
             ─▶ JudgeActor pool(s) ─▶ RelevancyActor pool (ragas answer relevancy) ─▶ derive (CPU)
             ─iter_batches─▶ driver: records.jsonl (flushed per batch), progress

Every stage keeps one row per record; a failed record carries its error to the end.

Fault tolerance (docs/fault-tolerance.md): a task (read/lexical, derive) lost with its
worker or node is re-run by Ray Data (its tasks retry system failures without limit); a
dead actor is restarted and the batches it held retried (Ray Data's actor defaults; see
``actor_pool``); run.json counts the restarts (``restart_counted``). Application
errors are not retried by Ray (``DataContext.actor_task_retry_on_errors`` stays off): the
stages catch them per record and keep them as data, and a judge endpoint's transient
failures are retried inside its engine. The driver writes each record key once
(``RecordWriter``), so a batch delivered twice cannot duplicate a record.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ragscale.io.inputs import InputFile, Pointer, PointerArray

log = logging.getLogger("ragscale")


@dataclass
class Plan:
    files: Sequence[InputFile]
    metrics: Sequence[str]
    stages: set[str]
    encoder: dict = field(default_factory=dict)  # Encoder kwargs (model_path resolved)
    baseline: dict | None = None
    judge: dict = field(default_factory=dict)  # JudgeActor arguments (engine, judges, cache_path, max_retries)
    panel: list = field(default_factory=list)  # JudgeActor arguments per judge-panel member (with its tag)
    nli: dict = field(default_factory=dict)  # NLIActor arguments (HHEM found)
    nli_unavailable: str | None = None  # why HHEM is not run (the metric is null with this reason)
    expectations: Any = None  # ragscale.io.expectations.Expectations (custom.expectations), or None
    cluster: dict = field(default_factory=dict)
    ray_progress_bars: bool = False


def _panel_tags(plan: Plan) -> dict[str, list[str]]:
    """metric -> the tags of the panel judges whose scores it is the median of."""
    from ragscale.judges import JUDGES

    out: dict[str, list[str]] = {}
    for kwargs in plan.panel:
        for j in kwargs["judges"]:
            for m in JUDGES[j].metrics:
                out.setdefault(m, []).append(kwargs["tag"])
    return out


def actor_pool(pool: dict, batch_size: int, max_size: int | None = None) -> dict:
    """``map_batches`` arguments of an actor pool from its ``cluster.<pool>`` config: the
    ActorPoolStrategy (``size``, at most ``max_size``), batch size, CPUs and GPUs per actor.

    Fault tolerance (docs/fault-tolerance.md): Ray Data creates pool actors with
    ``max_restarts=-1`` and ``max_task_retries=-1``, so a dead actor (its node lost, a crash,
    an OOM kill) is restarted and the batches it held are retried on it; the pool's
    ``max_restarts`` / ``max_task_retries``, when set (not null), are passed to Ray instead,
    e.g. ``max_restarts: 0`` to fail fast while debugging, or a bound on the retries of a
    batch that kills its actor every time (Ray Data's no-progress timeout, 30 min, is the
    backstop otherwise). Setting them costs two things in Ray 2.60: they go through
    ``map_batches``' deprecated ``**ray_remote_args``, and Ray Data no longer fuses the
    read/lexical task into the pool's actor (fusion needs equal remote arguments)."""
    from ray.data import ActorPoolStrategy

    size = int(pool.get("size", 1))
    out = {
        "compute": ActorPoolStrategy(size=max(1, min(size, max_size)) if max_size is not None else size),
        "batch_size": int(pool.get("batch_size", batch_size)),
        "num_cpus": float(pool.get("num_cpus", 1.0)),
        "num_gpus": float(pool.get("num_gpus", 0.0)),
    }
    for key in ("max_restarts", "max_task_retries"):
        if pool.get(key) is not None:
            out[key] = int(pool[key])
    return out


def _add_batch_stat(table: Any, key: str) -> Any:
    """``table`` (a stage's pyarrow output, ROW_SCHEMA) with ``key`` += 1 in its first row's stats."""
    import pyarrow as pa

    i = table.schema.get_field_index("stats")
    col = table.column(i).to_pylist()
    stats = json.loads(col[0]) if col[0] else {}
    stats[key] = stats.get(key, 0) + 1
    col[0] = json.dumps(stats)
    return table.set_column(i, table.schema.field(i), pa.array(col, type=table.schema.field(i).type))


def restart_counted(cls: type, counter: str) -> type:
    """``cls`` (a Ray Data actor class of the pipeline) that reports its restarts: an instance
    whose process is a restart of one that died (Ray's ``max_restarts``: its node lost, a
    crash, an OOM kill) adds ``counter: 1`` to the stats of the first batch it returns, and
    the driver sums them into run.json (``encoder_actor_restarts`` ->
    ``encoder_work.actor_restarts``, ``judge_actor_restarts`` -> ``judge_work.actor_restarts``,
    ``nli_actor_restarts`` -> ``nli_work.actor_restarts``). One Ray lookup at actor start;
    the batches themselves are untouched. A restart whose every batch is lost again is not
    counted (a lower bound)."""

    class Counted(cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            import warnings

            import ray

            with warnings.catch_warnings():  # it reads the deprecated RuntimeContext.actor_id
                warnings.simplefilter("ignore")
                self._ragscale_restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)

        def __call__(self, batch: Any) -> Any:
            out = super().__call__(batch)
            if self._ragscale_restarted and out.num_rows:
                self._ragscale_restarted = False
                out = _add_batch_stat(out, counter)
            return out

    # Ray Data names the stage after the class: keep "MapBatches(EncoderActor)" etc.
    Counted.__name__, Counted.__qualname__, Counted.__doc__ = cls.__name__, cls.__qualname__, cls.__doc__
    return Counted


def init_ray(cluster: dict) -> dict:
    """Start or connect to Ray; returns a description for run.json."""
    import ray

    if ray.is_initialized():
        return {"address": "existing", "resources": ray.cluster_resources()}
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": True,
    }
    if cluster.get("address"):
        kwargs["address"] = cluster["address"]
    else:
        # Always a fresh in-process instance: never attach to a leftover local cluster
        # (e.g. one orphaned by a killed run).
        kwargs["address"] = "local"
        if cluster.get("num_cpus"):
            kwargs["num_cpus"] = cluster["num_cpus"]
    ray.init(**kwargs)
    return {"address": cluster.get("address") or "local", "resources": ray.cluster_resources()}


def run_pipeline(plan: Plan, pointers: Sequence[Pointer] | PointerArray,
                 on_rows: Callable[[list[dict]], None]) -> dict:
    """Stream the records through the stages; ``on_rows`` gets each finished batch of rows.

    Returns the stages' counters summed over batches (compute seconds per stage, encoder
    texts requested/encoded/cached, tokens, truncations).
    """
    import ray
    from ray.data import DataContext

    if not plan.ray_progress_bars:  # quiet mode: ragscale prints its own progress lines
        logging.getLogger("ray.data").setLevel(logging.ERROR)
    ctx = DataContext.get_current()
    ctx.enable_progress_bars = plan.ray_progress_bars
    ctx.execution_options.preserve_order = False
    ctx.print_on_execution_start = plan.ray_progress_bars

    from ragscale.pipeline.stages import derive, load_and_lexical, pointer_table

    chunk = int(plan.cluster.get("chunk_size", 128))
    blocks = [pointer_table(pointers[i : i + chunk]) for i in range(0, len(pointers), chunk)]
    ds = ray.data.from_arrow(blocks)
    ds = ds.map_batches(
        load_and_lexical,
        batch_size=chunk,
        batch_format="pyarrow",
        fn_kwargs={"files": list(plan.files), "metrics": list(plan.metrics), "expectations": plan.expectations},
        num_cpus=float(plan.cluster.get("lexical_num_cpus", 1.0)),
    )
    if "encoder" in plan.stages:
        from ragscale.actors.encoder import EncoderActor

        pool = plan.cluster.get("encoder", {})
        ds = ds.map_batches(
            restart_counted(EncoderActor, "encoder_actor_restarts"),
            fn_constructor_kwargs={"encoder": plan.encoder, "metrics": list(plan.metrics), "baseline": plan.baseline},
            batch_format="pyarrow",
            **actor_pool(pool, 256),
        )
    if "nli" in plan.stages:
        if plan.nli:
            from ragscale.actors.nli import NLIActor

            pool = plan.cluster.get("nli", {})
            ds = ds.map_batches(
                restart_counted(NLIActor, "nli_actor_restarts"),
                fn_constructor_kwargs=plan.nli,
                batch_format="pyarrow",
                **actor_pool(pool, 16),
            )
        else:
            from ragscale.pipeline.stages import null_metric

            ds = ds.map_batches(null_metric, batch_size=None, batch_format="pyarrow", num_cpus=0.1,
                                fn_kwargs={"metric": "hhem", "judge": "hhem", "reason": plan.nli_unavailable or "HHEM unavailable"})
    if "judge" in plan.stages:
        from ragscale.actors.judge import JudgeActor

        pool = plan.cluster.get("judge", {})
        for kwargs in ([plan.judge] if plan.judge.get("judges") else []) + list(plan.panel):
            ds = ds.map_batches(
                restart_counted(JudgeActor, "judge_actor_restarts"),
                fn_constructor_kwargs=kwargs,
                batch_format="pyarrow",
                **actor_pool(pool, 16),
            )
    if "answer_relevancy" in plan.metrics:
        from ragscale.actors.encoder import RelevancyActor

        ds = ds.map_batches(restart_counted(RelevancyActor, "encoder_relevancy_actor_restarts"),
                            fn_constructor_kwargs={"encoder": plan.encoder}, batch_format="pyarrow",
                            **actor_pool(plan.cluster.get("encoder", {}), 256))
    if "derive" in plan.stages:
        # Tiny CPU work: a fractional CPU so it is never starved by actors holding every core.
        ds = ds.map_batches(
            derive, batch_size=None, batch_format="pyarrow", num_cpus=0.1,
            fn_kwargs={"metrics": list(plan.metrics), "panel": _panel_tags(plan)},
        )

    stats: dict[str, float] = {}
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=1):
        rows = batch.to_pylist()
        for r in rows:
            if r.get("stats"):
                for k, v in json.loads(r["stats"]).items():
                    stats[k] = stats.get(k, 0) + v
        on_rows(rows)
    return stats


class Progress:
    """Prints 'done/total (rate) errors' every ``interval`` seconds and at the end."""

    def __init__(self, total: int, interval: float, printer: Callable[[str], None] = print):
        self.total, self.interval, self.printer = total, interval, printer
        self.start = self.last = time.monotonic()
        self.done = 0
        self.errors = 0
        self.emitted = -1

    def update(self, n: int, errors: int) -> None:
        self.done += n
        self.errors += errors
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.emit()

    def emit(self) -> None:
        if self.emitted == self.done:
            return
        self.emitted = self.done
        el = max(time.monotonic() - self.start, 1e-9)
        self.printer(
            f"[ragscale] {self.done}/{self.total} records ({self.done / el:.1f}/s), {self.errors} errors, {el:.0f}s"
        )
