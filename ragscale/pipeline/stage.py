"""The stage protocol and its Ray adapter.

A stage is declared once (``ragscale.stage_kinds.Stage``, by its kind's builder next to its
worker): its name (the ``stage`` of a record's error and the ``time_<name>_s`` counter), the
worker that does the work, what it needs and produces, and its placement (an actor pool from
``cluster.<pool>``, or a CPU task). Workers are plain
classes over records (ragscale/actors/): ``process(rows) -> counters``, rows changed in
place, no Ray and no Arrow. This module owns the rest: Arrow conversion (a worker's row is a
dict, ragscale.row; only the columns a stage may change are converted back, each metric
checked against its type), per-record failure isolation, stats and restart counting, and one
output row per input row (checked).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, Protocol

import pyarrow as pa

from ragscale.record import error_json
from ragscale.row import STAGE_COLUMNS, metric_checks
from ragscale.stage_kinds import Stage


class Worker(Protocol):
    """What a pipeline worker offers: process a batch of record rows in place, return counters."""

    def process(self, rows: list[dict]) -> Mapping[str, float] | None: ...


def to_rows(batch: pa.Table) -> list[dict]:
    """A batch's rows as workers see them (ragscale.row): ``metrics`` a dict of the metrics the
    record has (in the order they were set), ``details`` a dict, lists as lists."""
    rows = batch.to_pylist()
    for r in rows:
        struct = r["metrics"] or {}
        r["metrics"] = {k: struct[k] for k in r.pop("metric_keys") or ()}
        r["details"] = dict(r["details"] or ())
        r["judge_errors"] = list(r["judge_errors"] or ())
        r["warnings"] = list(r["warnings"] or ())
    return rows


def writer_rows(batch: pa.Table) -> list[dict]:
    """A finished batch's rows as the writer reads them (``OUTPUT_COLUMNS``, nothing more)."""
    from ragscale.io.output_line import OUTPUT_COLUMNS

    return to_rows(batch.select(list(OUTPUT_COLUMNS)))


def _checked(rows: list[dict], schema: pa.Schema, stage: str) -> None:
    """Each row's metrics fit their types in ``schema``: a metric the run did not plan, or a value
    of another type (a string for a score, 1.5 for a count), fails its record, naming the metric."""
    checks = metric_checks(schema)
    for r in rows:
        for name in list(r["metrics"]):
            check = checks.get(name)
            why = "is not a metric the run planned (declare it: ragscale.metrics.registry)" if check is None \
                else check(r["metrics"][name])
            if why is not None:
                del r["metrics"][name]
                if not r["error"]:
                    r["error"] = error_json(stage, f"metric {name!r}: {why}" if check else f"metric {name!r} {why}")


def to_table(rows: list[dict], schema: pa.Schema, stage: str, base: pa.Table | None = None) -> pa.Table:
    """The rows back as Arrow in ``schema``; with ``base`` (the batch they came from), only the
    columns a stage may change are converted, the record's own fields are kept as they were."""
    _checked(rows, schema, stage)
    cols = {
        "metrics": [r["metrics"] for r in rows],
        "metric_keys": [list(r["metrics"]) or None for r in rows],
        "warnings": [r.get("warnings") or None for r in rows],
        "error": [r.get("error") for r in rows],
        "judge_errors": [r.get("judge_errors") or None for r in rows],
        "stats": [r.get("stats") for r in rows],
        "details": [r.get("details") or None for r in rows],
    }
    if base is None:
        return pa.Table.from_pylist([{**r, **{k: v[i] for k, v in cols.items()}} for i, r in enumerate(rows)],
                                    schema=schema)
    for name in STAGE_COLUMNS:
        base = base.set_column(base.schema.get_field_index(name), schema.field(name),
                               pa.array(cols[name], type=schema.field(name).type))
    return base


def add_stats(rows: list[dict], **values: float) -> None:
    """Add a batch's counters (e.g. ``time_lexical_s``) to its first row; the driver sums them."""
    if rows:
        t = json.loads(rows[0]["stats"]) if rows[0].get("stats") else {}
        for k, v in values.items():
            t[k] = t.get(k, 0) + v
        rows[0]["stats"] = json.dumps(t)


def apply_per_record(rows: list[dict], stage: str, fn: Callable[[list[dict]], None]) -> None:
    """Run ``fn`` on the error-free rows as one batch; if the batch fails, retry record by
    record so that one bad record only fails itself (its error names ``stage``)."""
    live = [r for r in rows if not r["error"]]
    if not live:
        return
    try:
        fn(live)
    except Exception:  # noqa: BLE001
        for r in live:
            try:
                fn([r])
            except Exception as e:  # noqa: BLE001
                r["error"] = error_json(stage, f"{type(e).__name__}: {e}")


def process_rows(worker: Worker, stage: str, rows: list[dict]) -> None:
    """Run ``worker`` over ``rows`` with per-record failure isolation; the batch's counters
    (and its compute seconds, ``time_<stage>_s``) go to the first row's stats."""
    t0 = time.perf_counter()
    counters: dict[str, float] = defaultdict(int)

    def run(rs: list[dict]) -> None:
        for k, v in (worker.process(rs) or {}).items():  # counted once the (sub)batch succeeded
            counters[k] += v

    apply_per_record(rows, stage, run)
    add_stats(rows, **{f"time_{stage}_s": time.perf_counter() - t0}, **counters)


def process_table(worker: Worker, stage: str, batch: pa.Table, **extra: float) -> pa.Table:
    """``process_rows`` over an Arrow batch (``extra`` counters added to its stats): one output
    row per input row (a worker is given lists of the rows, never ``rows`` itself)."""
    rows = to_rows(batch)
    process_rows(worker, stage, rows)
    if extra:
        add_stats(rows, **extra)
    return to_table(rows, batch.schema, stage, base=batch)


def actor_class(stage: Stage, hub: Any = None, label: str | None = None) -> type:
    """The Ray Data callable class of an actor-pool stage. An instance whose process is a
    restart of one that died (Ray's ``max_restarts``: its node lost, a crash, an OOM kill)
    adds ``restart_counter: 1`` to the stats of the first batch it returns (a lower bound:
    a restart whose every batch is lost again is not counted).

    With a progress ``hub`` (ragscale.pipeline.progress), each batch's records are counted
    under ``label`` (default: the stage's name), and a worker with a ``progress`` attribute
    gets the reporter's ``add`` there, to report inside a batch (the judges' prompts)."""
    worker_cls, name, counter = stage.worker, stage.name, stage.restart_counter
    label = label or name

    class Adapter:
        def __init__(self, **kwargs: Any):
            from ragscale.pipeline.progress import Reporter

            self.worker = worker_cls(**kwargs)
            self.reporter = Reporter(hub, label) if hub is not None else None
            if self.reporter is not None and hasattr(self.worker, "progress"):
                self.worker.progress = self.reporter.add
            import warnings

            import ray

            with warnings.catch_warnings():  # it reads the deprecated RuntimeContext.actor_id
                warnings.simplefilter("ignore")
                self._restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)

        def __call__(self, batch: pa.Table) -> pa.Table:
            extra = {counter: 1} if self._restarted and counter and batch.num_rows else {}
            if extra:
                self._restarted = False
            out = process_table(self.worker, name, batch, **extra)
            if self.reporter is not None:
                from ragscale.pipeline.progress import RECORDS

                self.reporter.add(RECORDS, done=out.num_rows)
                self.reporter.flush()
            return out

    # Ray Data names the stage after the class: keep "MapBatches(EncoderActor)" etc.
    Adapter.__name__, Adapter.__qualname__, Adapter.__doc__ = worker_cls.__name__, worker_cls.__qualname__, worker_cls.__doc__
    return Adapter


def sum_stats(rows: Iterable[dict], into: dict[str, float]) -> None:
    """Add the counters carried by ``rows`` (their ``stats`` JSON) to ``into``."""
    for r in rows:
        if r.get("stats"):
            for k, v in json.loads(r["stats"]).items():
                into[k] = into.get(k, 0) + v
