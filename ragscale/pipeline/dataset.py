"""Build and run the streaming Ray Data pipeline.

    pointers ─from_arrow─▶ load_and_lexical (CPU tasks) ─▶ EncoderActor pool ─▶ NLIActor pool (HHEM)
             ─▶ JudgeActor pool(s) ─▶ RelevancyActor pool (ragas answer relevancy) ─▶ derive (CPU)
             ─▶ output_lines (CPU: each row's records.jsonl line, formatted in the workers)
             ─iter_batches─▶ driver: records.jsonl (the lines appended, flushed per batch), progress

Every stage keeps one row per record; a failed record carries its error to the end.

Fault tolerance (docs/fault-tolerance.md): a task (read/lexical, derive) lost with its
worker or node is re-run by Ray Data (its tasks retry system failures without limit); a
dead actor is restarted and the batches it held retried (Ray Data's actor defaults; see
``actor_pool``); run.json counts the restarts (``ragscale.pipeline.stage.actor_class``). Application
errors are not retried by Ray (``DataContext.actor_task_retry_on_errors`` stays off): the
stages catch them per record and keep them as data, and a judge endpoint's transient
failures are retried inside its engine. The driver writes each record key once
(``RecordWriter``), so a batch delivered twice cannot duplicate a record.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from typing import Any, Callable, Iterator, Sequence

from ragscale.io.inputs import Pointer, PointerArray

log = logging.getLogger("ragscale")


def actor_pool(pool: dict, batch_size: int, max_size: int | None = None, calls: int = 1,
               cpu_scale: float = 1.0) -> dict:
    """``map_batches`` arguments of an actor pool from its ``cluster.<pool>`` config: the
    ActorPoolStrategy (``size``, at most ``max_size``), batch size, CPUs and GPUs per actor.
    ``calls`` > 1: each actor is threaded and works on that many batches at once (a streaming
    judge engine, ragscale/actors/judge.py). ``cpu_scale``: the CPU request's factor
    (ragscale.pipeline.resources: the stages fitted to a small Ray instance).

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

    from ragscale.pipeline.resources import scaled

    size = int(pool.get("size", 1))
    out = {
        "compute": ActorPoolStrategy(
            size=max(1, min(size, max_size)) if max_size is not None else size,
            **({"max_concurrent_calls_per_actor": calls, "max_tasks_in_flight_per_actor": calls,
                "enable_true_multi_threading": True} if calls > 1 else {})),
        "batch_size": int(pool.get("batch_size", batch_size)),
        "num_cpus": scaled(float(pool.get("num_cpus", 1.0)), cpu_scale),
        "num_gpus": float(pool.get("num_gpus", 0.0)),
    }
    for key in ("max_restarts", "max_task_retries"):
        if pool.get(key) is not None:
            out[key] = int(pool[key])
    return out


def init_ray(cluster: dict, verbose: bool = True) -> dict:
    """Start or connect to Ray; returns a description for run.json. Not ``verbose``: the
    driver's Ray logger shows errors only (its start-up warnings, e.g. the token-auth notice,
    are hidden); the workers' own log lines still reach the driver."""
    import ray

    if ray.is_initialized():
        return {"address": "existing", "resources": ray.cluster_resources()}
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING if verbose else logging.ERROR,
        "log_to_driver": True,
    }
    # cluster.address, else RAY_ADDRESS (what `ray job submit` sets for the driver it starts: a
    # profile without an address then runs on that cluster, as Ray's own init would)
    address = cluster.get("address") or os.environ.get("RAY_ADDRESS") or None
    if address:
        kwargs["address"] = address
    else:
        # Always a fresh in-process instance: never attach to a leftover local cluster
        # (e.g. one orphaned by a killed run).
        kwargs["address"] = "local"
        if cluster.get("num_cpus"):
            kwargs["num_cpus"] = cluster["num_cpus"]
    ray.init(**kwargs)
    return {"address": address or "local", "resources": ray.cluster_resources()}


def _ship_by_value(functions: Any) -> None:
    """Metric functions declared outside ragscale (a notebook's or a plugin's module) travel to
    the workers by value: the workers may not be able to import their module."""
    import sys

    from ray import cloudpickle

    for fn in functions:
        module = getattr(fn, "__module__", None) or ""
        if module.split(".")[0] != "ragscale" and module in sys.modules and module != "__main__":
            cloudpickle.register_pickle_by_value(sys.modules[module])


@contextlib.contextmanager
def native_stderr_to(path: str | None) -> Iterator[None]:
    """Send what native code writes to file descriptor 2 (Ray's C++ core logs its notices
    there, e.g. on actors whose constructor arguments live in the object store) to ``path``
    for the duration, while Python's ``sys.stderr`` (ragscale's warnings, the workers' log
    lines Ray forwards) still reaches the terminal. A no-op without ``path``, or where
    ``sys.stderr`` is not descriptor 2 (a notebook)."""
    import sys

    try:
        ours = path is not None and sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        ours = False
    if not ours:
        yield
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sys.stderr.flush()
    saved, python_stderr = os.dup(2), sys.stderr
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1, encoding=python_stderr.encoding, errors="backslashreplace")
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stderr.close()
        sys.stderr = python_stderr
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def ray_session(cluster: dict, verbose: bool = True, native_log: str | None = None) -> Iterator[dict]:
    """Ray for one run: started (or connected) on entry, shut down on exit only when this
    run started it (a notebook's or a cluster's own Ray stays up; a driver connected through
    ``RAY_ADDRESS`` only disconnects). Yields run.json's description.
    Not ``verbose``: Ray's start-up notices are hidden, its native log lines go to ``native_log``."""
    import ray

    started = not ray.is_initialized()
    with native_stderr_to(None if verbose else native_log):
        try:
            yield init_ray(cluster, verbose)
        finally:
            if started and ray.is_initialized() and not cluster.get("address"):
                ray.shutdown()


READ_STAGE = "read"  # the first stage's name in the progress display: reads the inputs, lexical metrics


def stage_labels(plan: Any) -> list[str]:
    """The stages of ``plan`` in pipeline order, as the progress display names them."""
    from ragscale.pipeline.graph import build_stages

    return [READ_STAGE, *(st.label for st in build_stages(plan))]


def run_pipeline(plan: Any, pointers: Sequence[Pointer] | PointerArray,
                 on_rows: Callable[[list[dict]], None], ray_progress_bars: bool = False, hub: Any = None,
                 cpu_scale: float = 1.0) -> dict:
    """Stream the records through the stages; ``on_rows`` gets each finished batch as rows of
    ``cpu_stages.LINE_SCHEMA`` (record key, its records.jsonl line, whether it failed, the batch's
    counters: the lines are formatted in the workers). With a progress ``hub``
    (ragscale.pipeline.progress), every stage counts its records there as it works. Every
    stage's CPU request is multiplied by ``cpu_scale`` (ragscale.pipeline.resources.fit).

    Returns the stages' counters summed over batches (compute seconds per stage, encoder
    texts requested/encoded/cached, tokens, truncations).
    """
    import ray
    from ray.data import DataContext

    if not ray_progress_bars:  # quiet mode: ragscale prints its own progress lines
        logging.getLogger("ray.data").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        # Ray 2.60's DataContext() sets its own deprecated fields (use_push_based_shuffle,
        # use_polars, use_arrow_tensor_v2) at construction: a warning about Ray's code, not ours
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray\.data\.context")
        ctx = DataContext.get_current()
    ctx.enable_progress_bars = ray_progress_bars
    ctx.execution_options.preserve_order = False
    ctx.print_on_execution_start = ray_progress_bars

    from ragscale.pipeline.graph import build_stages, row_metrics
    from ragscale.pipeline.progress import reporting_task
    from ragscale.pipeline.resources import OUTPUT_NUM_CPUS, scaled
    from ragscale.pipeline.stage import actor_class, sum_stats
    from ragscale.metrics.registry import needs_field
    from ragscale.io.qrels import run_qrels
    from ragscale.row import row_schema
    from ragscale.pipeline.cpu_stages import (lexical_functions, load_and_lexical, needs_targets, output_lines,
                                              pointer_table)

    chunk = int(plan.cluster.get("chunk_size", 128))
    blocks = [pointer_table(pointers[i : i + chunk]) for i in range(0, len(pointers), chunk)]
    functions = lexical_functions(plan.metrics)
    _ship_by_value(functions.values())
    ds = ray.data.from_arrow(blocks)
    ds = ds.map_batches(
        reporting_task(load_and_lexical, READ_STAGE, hub),
        batch_size=chunk,
        batch_format="pyarrow",
        fn_kwargs={"files": list(plan.files), "metrics": list(plan.metrics), "schema": row_schema(row_metrics(plan)),
                   "expectations": plan.expectations,
                   "lexical": functions, "need_targets": needs_targets(plan.metrics),
                   "need_answer": needs_field(plan.metrics, "answer"),
                   "need_passages": needs_field(plan.metrics, "contexts"),
                   "qrels": run_qrels(plan.reports)},
        num_cpus=scaled(float(plan.cluster.get("lexical_num_cpus", 1.0)), cpu_scale),
    )
    for st in build_stages(plan):
        label = st.label
        if st.pool is None:
            ds = ds.map_batches(reporting_task(st.worker, label, hub), batch_size=st.batch_size, batch_format="pyarrow",
                                num_cpus=scaled(st.num_cpus, cpu_scale), fn_kwargs=dict(st.kwargs))
        else:
            ds = ds.map_batches(actor_class(st, hub, label), fn_constructor_kwargs=dict(st.kwargs),
                                batch_format="pyarrow", **actor_pool(st.pool, st.batch_size or 256, calls=st.calls, cpu_scale=cpu_scale))

    # the records.jsonl lines are formatted in the workers (a CPU task, fused with the derive task)
    ds = ds.map_batches(output_lines, batch_size=None, batch_format="pyarrow", num_cpus=scaled(OUTPUT_NUM_CPUS, cpu_scale))
    stats: dict[str, float] = {}
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=1):
        rows = batch.to_pylist()
        sum_stats(rows, stats)
        on_rows(rows)
    return stats
