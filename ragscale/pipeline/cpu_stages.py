"""The CPU-task stages of the Ray pipeline (no Ray import here): read + lexical metrics, derive, null metric.

Every stage takes and returns a ``pyarrow.Table`` in the run's row schema (ragscale.row) with exactly one
output row per input row; a record that fails a stage keeps its row and gets an
``error`` naming the stage, and later stages pass it through untouched.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from ragscale.io.expectations import check
from ragscale.io.inputs import InputFile, Pointer, PointerArray, read_raw
from ragscale.metrics.custom import CUSTOM_METRICS, FACT_METRICS, custom_metrics
from ragscale.io.output_line import output_line
from ragscale.pipeline.stage import add_stats, to_rows, to_table, writer_rows
from ragscale.record import add_judge_errors, error_json, read_record
from ragscale.row import row_schema, set_detail
from ragscale.stage_kinds import Stage, needs_of, of_stage, stage_kind


def lexical_functions(metrics: Sequence[str]) -> dict[str, Callable]:
    """name -> compute function of the enabled lexical metrics that the catalog computes per record."""
    from ragscale.metrics.registry import lookup

    return {m: lookup(m).compute for m in metrics if lookup(m).stage == "lexical" and lookup(m).compute is not None}


def lexical_metrics(prediction: str, targets: Sequence[str], passages: Sequence[str],
                    functions: Mapping[str, Callable]) -> dict:
    """The lexical metrics of one record (catalog functions), in their declared value shapes."""
    return {name: fn(prediction, targets, passages) for name, fn in functions.items()}


POINTER_SCHEMA = pa.schema([("file_idx", pa.int32()), ("line", pa.int64()), ("offset", pa.int64()),
                            ("first", pa.int64())])  # first: the record this one repeats (Pointer.first)


def pointer_table(pointers: Sequence[Pointer] | PointerArray) -> pa.Table:
    """Pointers as an Arrow table: the pipeline's input rows (one per record). The task id
    is not carried: the first stage reads it from the record itself."""
    if isinstance(pointers, PointerArray):
        cols = {"file_idx": pointers.file_idx, "line": pointers.line, "offset": pointers.offset,
                "first": pointers.first}
    else:
        cols = {"file_idx": [p.file_idx for p in pointers], "line": [p.line for p in pointers],
                "offset": [p.offset for p in pointers], "first": [p.first for p in pointers]}
    return pa.table(cols, schema=POINTER_SCHEMA)


def load_and_lexical(batch: pa.Table, *, files: Sequence[InputFile], metrics: Sequence[str],
                     schema: pa.Schema | None = None, expectations: Any = None, lexical: Mapping[str, Callable] | None = None,
                     need_targets: bool | None = None, need_answer: bool = True, need_passages: bool = True,
                     qrels: Mapping | None = None) -> pa.Table:
    """Stage 1: read the records the pointer rows name, validate them, compute lexical metrics
    (``lexical``: name -> function, default the catalog's for ``metrics``) and the custom
    metrics, with the fact checks of ``expectations``. One output row per pointer row, in the
    run's row ``schema`` (ragscale.row.row_schema; default: a schema of ``metrics``).
    ``lexical`` and ``need_*`` (ragscale.record.read_record) come from the driver's catalog (a
    metric declared in a notebook is known there, not in the workers). ``qrels`` (the run's
    qrels.*): each record's retrieval against the qrels, :func:`add_qrels_figures`."""
    t0 = time.perf_counter()
    functions = lexical_functions(metrics) if lexical is None else lexical
    need_targets = needs_targets(metrics) if need_targets is None else need_targets
    pointers = [Pointer(**p) for p in batch.to_pylist()]
    rows = [_record_row(files, p, raw, metrics, functions, (need_targets, need_answer, need_passages), expectations)
            for p, raw in zip(pointers, read_raw(files, pointers))]
    if qrels:
        add_qrels_figures(rows, qrels, files[0].column_map if files else None)
    add_stats(rows, time_lexical_s=time.perf_counter() - t0)
    return to_table(rows, schema or row_schema(metrics), "lexical")


def _record_row(files: Sequence[InputFile], p: Pointer, raw: str, metrics: Sequence[str],
                functions: Mapping[str, Callable], needs: tuple[bool, bool, bool], expectations: Any = None) -> dict:
    f = files[p.file_idx]
    row = read_record(raw, key=p.key(files), model_id=f.stem, task_id=p.task, source_file=f.path, source_line=p.line,
                      need_targets=needs[0], need_answer=needs[1], need_passages=needs[2],
                      columns=f.column_map).to_row()
    if p.first >= 0 and not row["error"]:  # a (model, task) answered earlier in the inputs: counted once
        row["error"] = error_json("input", p.repeat_error(files, row["model_id"], row["task_id"]))
    if row["error"]:
        return row
    try:
        m = lexical_metrics(row["prediction"], row["targets"], row["passages"], functions)
        if CUSTOM_NAMES & set(metrics):
            m.update(custom_record_metrics(row, metrics, expectations))
        row["metrics"] = m
    except Exception as e:  # noqa: BLE001 - one bad record must not stop the run
        row["error"] = error_json("lexical", f"{type(e).__name__}: {e}")
    return row


NOT_SCORED = "its retrieval is not scored against the qrels ({}): retrieval.json counts it"
NO_IDS = "its contexts are not passages with a document_id each"


def add_qrels_figures(rows: list[dict], conf: Mapping, columns: Mapping[str, str] | None = None) -> None:
    """Each read record's retrieval against the run's qrels (``conf``: qrels.*), as its
    ``details["qrels"]`` (the figures retrieval.json gives its query: metrics.qrels_retrieval); a
    record whose query has no qrels, or whose passages carry no ``document_id``, gets a warning.
    ``columns``: the user's column names (the same for every input file)."""
    from ragscale.io.qrels import qrels_once
    from ragscale.metrics.qrels_retrieval import record_figures, retrieval_record

    live = [(row, retrieval_record(json.loads(row["input_json"]), row["task_id"], columns))
            for row in rows if not row["error"]]
    for row, rec in live:
        if rec is None:
            row["warnings"] = [*row["warnings"], NOT_SCORED.format(NO_IDS)]
    scored = [(row, rec) for row, rec in live if rec is not None]
    figures = record_figures(qrels_once(conf["file"]), [rec for _, rec in scored], list(conf["k"]),
                             list(conf["measures"]), not conf.get("keep_identical_ids"))
    for (row, _), got in zip(scored, figures):
        if got is None:
            row["warnings"] = [*row["warnings"], NOT_SCORED.format("its query has no qrels")]
        else:
            set_detail(row, "qrels", got)


CUSTOM_NAMES = frozenset({*CUSTOM_METRICS, *FACT_METRICS})


def custom_record_metrics(row: dict, metrics: Sequence[str], expectations: Any) -> dict:
    """The custom answer metrics of one record (seed "Evaluation Metrics Documentation") and
    its fact checks; the checks' outcomes go to ``details.fact_checks``. Reference-based
    metrics are null with a warning when the record has no reference answer."""
    enabled = set(metrics)
    answer = row["prediction"] or ""
    reference = row["targets"][0] if row["targets"] else None
    out = custom_metrics(answer, reference, enabled)
    if reference is None and enabled & (set(CUSTOM_METRICS) - {"source_citation"}):
        row["warnings"] = [*row["warnings"], "no reference answer: the reference-based custom metrics are null"]
    wanted = [n for n in FACT_METRICS if n in enabled]
    if wanted:
        exp = expectations.find(row["task_id"], row["query"]) if expectations is not None else None
        scores, details = check(exp, answer) if exp is not None else ({}, None)
        for n in wanted:
            out[n] = scores.get(n)
        if details is not None:
            set_detail(row, "fact_checks", details)
    return out


def needs_targets(metrics: Sequence[str]) -> bool:
    """Whether an MT-RAG record without ``targets`` is an input error: MT-RAG's metrics need a
    reference answer; the TREC metrics do not, and the custom metrics are null for such a record
    with a warning instead (custom_record_metrics)."""
    from ragscale.metrics.registry import needs_field

    return needs_field([m for m in metrics if m not in CUSTOM_NAMES], "reference")


def derive(batch: pa.Table, *, metrics: Sequence[str], panel: dict | None = None) -> pa.Table:
    """Last stage: the judge panel's verdicts, then every derived metric of the run (the catalog's
    ``derive`` functions: RB_agg, IDK conditioning, H-Means, P@k/AP@k/MRR) in ``requires`` order.
    ``panel`` maps a metric to its panel judges' tags: the metric is the jury's verdict on the
    ``<metric>@<tag>`` values (ragscale.metrics.registry.jury_verdict: median, mean or majority as
    the catalog says, a vector passage by passage), so the derived metrics read the panel's values.
    A majority split leaves the metric null with an ``undefined`` judge error (stage ``derive``).
    A derived metric that reads a panel judge's details (the IDK judge's "unknown" label) reads
    those of the first member, in panel order, that left details for the record
    (:func:`panel_details`); the record's own details stay as the members wrote them."""
    from ragscale.metrics.registry import Derivation, derived_order, lookup

    t0 = time.perf_counter()
    order = [(name, lookup(name).derive) for name in derived_order(metrics)]
    judge_tags = _judge_tags(panel or {})
    rows = to_rows(batch)
    for row in rows:
        if row["error"]:
            continue
        m = dict(row["metrics"])  # kept only when every derived metric of the record is computed
        try:
            split = _verdicts(m, panel or {})
            d = Derivation(m, row["answerability"], panel_details(row.get("details"), judge_tags))
            for name, fn in order:
                d.name = name
                m[name] = fn(d)
        except Exception as e:  # noqa: BLE001
            row["error"] = error_json("derive", f"{type(e).__name__}: {e}")
            continue
        row["metrics"] = m
        if split:
            add_judge_errors(row, split)
    add_stats(rows, time_derive_s=time.perf_counter() - t0)
    return to_table(rows, batch.schema, "derive", base=batch)


def _verdicts(m: dict, panel: Mapping[str, Sequence[str]]) -> list[dict]:
    """Set each panel metric of one record's metrics ``m`` to the jury's verdict on its members'
    values; returns the judge errors of the verdicts a split panel left null."""
    from ragscale.judges import JUDGED
    from ragscale.metrics.registry import jury_verdict

    errors = []
    for name, tags in panel.items():
        m[name], split = jury_verdict(name, [m.get(f"{name}@{t}") for t in tags])
        if split:
            where = f" on {split} passages" if isinstance(m[name], list) else ""
            errors.append({"judge": JUDGED.get(name, name), "stage": "derive", "undefined": True,
                           "reason": f"judge panel split on {name}{where}: no majority"})
    return errors


def _judge_tags(panel: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """judge -> the tags of the panel members that run it (from ``panel``: metric -> tags)."""
    from ragscale.judges import JUDGED

    out: dict[str, list[str]] = {}
    for name, tags in panel.items():
        out.setdefault(JUDGED.get(name, name), list(tags))
    return out


def panel_details(details: Mapping[str, str] | None, judge_tags: Mapping[str, Sequence[str]]) -> Mapping[str, str] | None:
    """A record's details as the derived metrics read them: a judge that ran on the panel only has
    the details of its first member (``judge_tags`` order) that left details for the record, under
    the judge's own name. The details themselves are not changed (the output keeps each member's
    under ``<judge>@<tag>``; a report part reading ``<judge>`` finds none and leaves that part out)."""
    if not judge_tags or not details:
        return details
    out = dict(details)
    for judge, tags in judge_tags.items():
        if judge not in out:
            first = next((details[f"{judge}@{t}"] for t in tags if f"{judge}@{t}" in details), None)
            if first is not None:
                out[judge] = first
    return out


def panel_tags(plan: Any) -> dict[str, list[str]]:
    """metric -> the tags of the panel members whose values its jury combines: every metric of
    each judge on the panel (a member writes them all), in the run's judge order."""
    from ragscale.judges import JUDGES

    out: dict[str, list[str]] = {}
    for kwargs in plan.panel_kwargs:
        for j in kwargs["judges"]:
            for m in JUDGES[j].metrics:
                out.setdefault(m, []).append(kwargs["tag"])
    return out


@stage_kind("derive", order=50)
def derive_stages(plan: Any) -> list[Stage]:
    """The last stage: the panel's verdicts and the catalog's derived metrics, a CPU task (tiny
    work: a fractional CPU, never starved by actors holding every core). It produces the verdict
    of every metric of the panel's judges and needs the members' values of the run's metrics."""
    if "derive" not in plan.stages:
        return []
    metrics, tags = list(plan.metrics), panel_tags(plan)
    produces = of_stage(metrics, "derive") | frozenset(tags)
    needs = needs_of(of_stage(metrics, "derive")) | {f"{m}@{t}" for m, ts in tags.items() if m in metrics for t in ts}
    return [Stage("derive", derive, {"metrics": metrics, "panel": tags}, needs=frozenset(needs - produces),
                  produces=produces, batch_size=None)]


LINE_SCHEMA = pa.schema([("key", pa.string()), ("line", pa.string()), ("errored", pa.bool_()), ("stats", pa.string())])


def output_lines(batch: pa.Table) -> pa.Table:
    """After the last stage: each finished row as its records.jsonl line (``output_line``: the
    metrics serialised here, once), with its record key, whether it failed, and the batch's counters
    (``LINE_SCHEMA``). Formatted in the workers, so the driver only appends lines."""
    rows = writer_rows(batch)
    return pa.table({"key": [r["key"] for r in rows], "line": [output_line(r) for r in rows],
                     "errored": [r["error"] is not None for r in rows], "stats": [r["stats"] for r in rows]},
                    schema=LINE_SCHEMA)


def null_metric(batch: pa.Table, *, metric: str, judge: str, reason: str) -> pa.Table:
    """Set ``metric`` to null with ``reason`` on every live record (a model that is not on
    this machine: the run said so before it started)."""
    rows = to_rows(batch)
    for row in rows:
        if row["error"]:
            continue
        row["metrics"][metric] = None
        add_judge_errors(row, [{"judge": judge, "reason": reason, "undefined": True}])
    return to_table(rows, batch.schema, "nli", base=batch)


@stage_kind("hhem_unavailable", order=20)
def hhem_unavailable_stages(plan: Any) -> list[Stage]:
    """In the HHEM pool's place when its weights are not on this machine: ``hhem`` null on every
    record, with the reason the run gave before it started (ragscale.actors.nli.plan_nli)."""
    if "nli" not in plan.stages or plan.nli_kwargs:
        return []
    return [Stage("nli", null_metric, {"metric": "hhem", "judge": "hhem", "reason": plan.nli_unavailable or "HHEM unavailable"},
                  produces=frozenset({"hhem"}), batch_size=None)]
