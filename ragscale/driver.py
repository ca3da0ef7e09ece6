"""The driver side of a run: scan inputs, resume, stream the records through Ray, write outputs.

scan (pointers, sweep order, ``limit``) -> resume state (finished keys of records.jsonl)
-> Ray pipeline (ragscale.pipeline) -> records.jsonl as records finish -> one pass over
records.jsonl feeding every output (summary and records.parquet, consistency groups,
open-rag-eval CSVs, agreement, the report's statistics; ragscale.report.sinks) ->
consistency -> summary files -> leaderboard, CSVs, agreement, report.html -> run.json, written once
-> the MLflow run (tracking=mlflow; ragscale.tracking).

Only ``execute`` sees the config, to plan it (ragscale.plan.plan_run); everything after reads the
frozen plan: what to compute, how to run it (``plan.options``) and the redacted config run.json records.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import replace
from typing import Any, Callable

from ragscale.exitcodes import FAILED, INTERRUPTS, OK, STATUS, failed, interrupted, of_run, outcome
from ragscale.config import RunOptions
from ragscale.plan import RunPlan, plan_run
from ragscale.provenance import run_info as build_run_info

Printer = Callable[[str], None]


def _one_line(e: BaseException) -> str:
    """``Type: first line`` of an exception; for a Ray task error, of the worker's own exception."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException) and cause is not e:
        return _one_line(cause)
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def start_line(plan: RunPlan, labels: list[str]) -> str:
    """The line printed as Ray starts: the stages, and the torch pools that run on a GPU
    (``cluster.<pool>.num_gpus`` > 0, ragscale.actors._torch.pool_device)."""
    on_gpu = [name for name, kw in (("encoder", plan.encoder_kwargs), ("hhem", plan.nli_kwargs.get("hhem")))
              if (kw or {}).get("device") == "cuda"]
    return (f"[ragscale] starting Ray and the stages' workers ({', '.join(labels)}"
            f"{'; on GPU: ' + ', '.join(on_gpu) if on_gpu else ''})")


class Signals:
    """SIGTERM and SIGHUP handled like Ctrl-C in the driver for one run (``with Signals() as stop``):
    while the pipeline streams (``arm``) they raise KeyboardInterrupt there, so the run stops, writes
    what is finished and run.json (``interrupted``, exit 128 + the signal); before and after it they
    are noted and honoured at the next step (``signum``). Installed from the main thread only (never
    in Ray's workers, which run no driver code), re-installed after ``ray.init`` (which puts its own
    SIGTERM handler in), and the previous handlers put back on exit (a notebook's kernel keeps its own)."""

    NAMES = ("SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.signum: int | None = None
        self.armed = False
        self._saved: dict[int, Any] = {}
        self._main = threading.current_thread() is threading.main_thread()

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum
        if self.armed:
            self.armed = False  # once: a second signal does not interrupt the stopping
            raise KeyboardInterrupt

    def install(self) -> None:
        """Put the handlers in (again: ``ray.init`` replaces SIGTERM's)."""
        for sig in (getattr(signal, n) for n in self.NAMES if hasattr(signal, n)):
            if self._main:
                self._saved.setdefault(sig, signal.getsignal(sig))
                signal.signal(sig, self._handle)

    def arm(self) -> None:
        """Raise KeyboardInterrupt at the signal (at once if one came already)."""
        if self.signum is not None:
            raise KeyboardInterrupt
        self.armed = True

    def disarm(self) -> None:
        """Only note the signal from here on."""
        self.armed = False

    def failure(self) -> str:
        """run.json's ``failure`` for the interrupt: by the signal noted, else Ctrl-C's SIGINT."""
        return interrupted(self.signum or signal.SIGINT)

    def __enter__(self) -> "Signals":
        self.install()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.armed = False
        for sig, handler in self._saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _stream(plan: RunPlan, todo: Any, writer: Any, printer: Printer, out_dir: str, stop: Signals,
            pointers: Any = ()) -> tuple:
    """Stream ``todo`` through the Ray pipeline into ``writer``, showing live progress; a signal
    (``stop``) or Ctrl-C stops it with what is finished written. The nugget banks of a per-query run
    are built first, from every record (``pointers``; ragscale.pipeline.nugget_bank). Returns
    (failure, ray_info, stats); ray_info's ``nugget_bank`` is run.json's."""
    from ragscale.pipeline.dataset import ray_session, run_pipeline, stage_labels
    from ragscale.pipeline.progress import ProgressDisplay, choose_mode, start_hub
    from ragscale.pipeline.resources import demand, fit

    failure, ray_info, stats, opts = None, {}, {}, plan.options
    mode = "off" if opts.ray_progress_bars else choose_mode(opts.progress, printer)
    try:
        if todo and stop.signum is None:
            printer(start_line(plan, stage_labels(plan)))
            native_log = os.path.join(out_dir, "logs", "ray-native.log")
            with ray_session(plan.cluster, verbose=opts.verbose, native_log=native_log) as ray_info:
                stop.install()  # ray.init put its own SIGTERM handler in (sys.exit: no outputs, no run.json)
                fitted = fit(demand(plan), ray_info["resources"], local=ray_info["address"] == "local",
                             fit_cpus=bool(plan.cluster.get("fit_cpus", True)))
                if fitted.notice:
                    printer(f"[ragscale] {fitted.notice}")
                if fitted.cpu_scale != 1.0:
                    ray_info["cpu_scale"] = fitted.cpu_scale
                from ragscale.pipeline.nugget_bank import build_banks

                stop.arm()
                try:
                    plan, ray_info["nugget_bank"] = build_banks(plan, pointers, out_dir, printer, fitted.cpu_scale)
                finally:
                    stop.disarm()
                hub = start_hub() if mode != "off" else None
                with ProgressDisplay(hub, stage_labels(plan), len(todo), mode, opts.progress_interval_s,
                                     printer) as display:

                    def on_rows(rows: list[dict]) -> None:
                        before = writer.errors
                        writer.write_lines((r["key"], r["line"], r["errored"]) for r in rows)
                        display.update(len(rows), writer.errors - before)

                    stop.arm()
                    try:
                        stats = run_pipeline(plan, todo, on_rows, ray_progress_bars=opts.ray_progress_bars, hub=hub,
                                             cpu_scale=fitted.cpu_scale)
                    finally:
                        stop.disarm()
    except KeyboardInterrupt:
        failure = stop.failure()
    except Exception as e:  # noqa: BLE001 - reported as a one-line failure, records so far are kept
        failure = _one_line(e)
    finally:
        stop.install()  # ray.shutdown leaves Ray's handler in
        writer.close()
    if failure is None and stop.signum is not None and len(todo) > writer.written:
        failure = stop.failure()  # it came before the pipeline started
    return failure, ray_info, stats


def scan_records(plan: RunPlan, out_dir: str) -> tuple:
    """(plan with CSVs normalized, pointers of the run (the first ``plan.options.limit``),
    finished keys, pointers still to do)."""
    from ragscale.io.inputs import PointerArray, materialize_csv
    from ragscale.io.output import RecordKeys, finished_keys

    plan = replace(plan, files=tuple(materialize_csv(list(plan.files), out_dir)))
    # Every model's answer to a task side by side (across files of a sweep, or inside one
    # file holding several models): shared texts are encoded once and judge prompts share
    # their prefix. `limit` then keeps whole tasks. Pointers and finished keys are numpy
    # columns, so the driver's memory does not grow with the number of records.
    pointers = PointerArray.scan(list(plan.files), with_tasks=True).ordered_for_sweep()
    if plan.options.limit is not None:
        pointers = pointers[: plan.options.limit]
    keys = RecordKeys(list(plan.files), pointers)
    for key in finished_keys(out_dir):
        keys.add(key)
    return plan, pointers, keys, pointers[~keys.done_mask(pointers)]


def _consistency(plan: RunPlan, out_dir: str, groups: list[dict], verbose: bool) -> tuple[dict | None, str | None]:
    """Consistency across repeated runs (step ``consistency``): (summary block, failure)."""
    try:
        from ragscale.pipeline.consistency import run_consistency

        return run_consistency(out_dir, groups, plan.consistency, plan.cluster, verbose), None
    except Exception as e:  # noqa: BLE001 - the records are kept; the run is marked failed
        return None, f"consistency: {type(e).__name__}: {e}"


def _tolerant(printer: Printer) -> Printer:
    """``printer`` that lets a closed terminal (a lost SSH session, SIGHUP) not stop the run's outputs."""
    def show(line: str) -> None:
        try:
            printer(line)
        except OSError:
            pass

    return show


def engines_ready(plan: RunPlan) -> None:
    """Check, before anything starts, what the judge engines need to send prompts that the config
    cannot show (an API key's environment variable set): a one-line UserError. Not for
    ``ragscale prompts``, which sends nothing."""
    from ragscale.actors.engines import ready

    for kwargs in (plan.judge_kwargs, *plan.panel_kwargs):
        if kwargs.get("engine") and kwargs.get("judges"):
            ready(kwargs["engine"])


def execute(cfg: Any, printer: Printer = print, output_dir: str | None = None) -> int:
    """Run one evaluation from a composed config; returns the process exit code (ragscale.exitcodes:
    0 every record scored, 1 stopped (a re-run of the same command resumes), 3 some records failed,
    4 nothing scored, 128 + the signal when SIGINT, SIGTERM or SIGHUP stopped it). ``output_dir``
    overrides the config's. The output_dir is locked from before anything is written there until
    the end (ragscale.io.lock; a run already in it is a UserError), and SIGTERM and SIGHUP stop the
    run as Ctrl-C does (``Signals``)."""
    t_start = time.time()
    return execute_plan(plan_run(cfg), printer, output_dir, t_start=t_start)


def execute_plan(plan: RunPlan, printer: Printer = print, output_dir: str | None = None,
                 t_start: float | None = None) -> int:
    """Run a frozen plan (``plan_run``'s); ``execute`` without the planning. ``output_dir``
    overrides ``plan.options.output_dir``; ``t_start``: when the run began (its planning), now if None."""
    from ragscale.io.lock import OutputDirLock

    t_start = time.time() if t_start is None else t_start
    engines_ready(plan)
    out_dir = os.path.abspath(output_dir or plan.options.output_dir)
    printer = _tolerant(printer)
    with OutputDirLock(out_dir, printer), Signals() as stop:
        return _execute(plan, out_dir, printer, stop, t_start)


def _execute(plan: RunPlan, out_dir: str, printer: Printer, stop: Signals, t_start: float) -> int:
    """``execute`` with its output_dir locked and the signals handled."""
    from ragscale.io.output import RecordWriter, prepare

    opts = plan.options
    for line in prepare(out_dir, plan.fingerprint(), resume=opts.resume, overwrite=opts.overwrite):
        printer(line)
    t0 = time.time()
    plan, pointers, keys, todo = scan_records(plan, out_dir)
    timings = {"scan": time.time() - t0}
    printer(f"[ragscale] scenario={plan.scenario} steps={','.join(plan.steps) or 'none'} files={len(plan.files)} "
            f"records={len(pointers)} already_done={len(pointers) - len(todo)} output_dir={out_dir}")
    if plan.nli_unavailable:
        printer(f"[ragscale] warning: {plan.nli_unavailable}. hhem will be null for every record; set "
                "hallucination.model=/path/to/hallucination_evaluation_model, or hallucination.judge_fallback=true "
                "for a judge-based factual_consistency_judge (a different metric)")
    writer = RecordWriter(out_dir, keys)
    t1 = time.time()
    failure, ray_info, stats = _stream(plan, todo, writer, printer, out_dir, stop, pointers)
    bank = ray_info.pop("nugget_bank", None)
    timings["pipeline_wall"] = time.time() - t1
    summary, outputs, failure = _finish(plan, out_dir, failure, timings, printer)
    missing = len(pointers) - keys.expected_done()
    timings["total"] = time.time() - t_start
    overall = summary.get("overall") or {}  # failed records: an error, or a judge engine that failed (summary.py)
    judge_failed = int(overall.get("judge_failed") or 0)
    records = {"in": len(pointers), "resumed": len(pointers) - len(todo), "written_this_run": writer.written,
               "out": keys.expected_done(), "errored": failed(overall),
               "judge_failed": judge_failed, "missing": missing, "duplicates_dropped": writer.duplicates}
    info = build_run_info(plan, t_start=t_start, failure=failure, timings=timings, stats=stats,
                          ray_info=ray_info, records=records)
    if bank:
        info["nugget_bank"] = bank
    info["outputs"] = outputs.finish_reports(summary, info)
    if outputs.failed:  # an output not written, wholly or partly: exit 5 (ragscale.exitcodes.INCOMPLETE)
        info["outputs_failed"] = outputs.failed
        info["status"] = STATUS[of_run(info["failure"], records, outputs.failed)]
    with open(os.path.join(out_dir, "run.json"), "w") as fh:
        json.dump(info, fh, indent=2, default=str)
    from ragscale.tracking import track

    tracked = track(opts.tracking, out_dir, json.loads(json.dumps(info, default=str)), summary, printer)
    _print_end(opts, out_dir, summary, info, printer, tracked)
    return of_run(info["failure"], records, info.get("outputs_failed"))


def _finish(plan: RunPlan, out_dir: str, failure: str | None, timings: dict,
            printer: Printer) -> tuple[dict, Any, str | None]:
    """The one pass over records.jsonl (summary, parquet, consistency groups, report sinks), then
    consistency and the summary files; returns (summary, the report sinks, failure)."""
    from ragscale.report.sinks import Outputs

    t2 = time.time()
    printer("[ragscale] writing the summary, records.parquet and the reports")
    outputs = Outputs(plan, out_dir, printer)
    summary: dict = {"metrics": list(plan.metrics), "models": {}, "overall": None}
    try:
        outputs.read()
    except Exception as e:  # noqa: BLE001 - records.jsonl is complete; re-running rewrites the summary
        timings["finalize"], timings["consistency"] = time.time() - t2, 0.0
        return summary, outputs, failure or f"summary: {_one_line(e)}"
    consistency, t3 = None, time.time()
    if outputs.groups is not None and not failure:
        groups = outputs.groups.result()
        from ragscale.metrics.consistency import scored as has_runs

        n = plan.consistency["min_runs"]
        scored = sum(has_runs(g, n) for g in groups)
        printer(f"[ragscale] consistency across repeated runs: {scored} (model, query) groups with >= {n} runs"
                + (f" ({len(groups) - scored} with fewer, counted in fewer_runs)" if scored < len(groups) else ""))
        consistency, failure = _consistency(plan, out_dir, groups, plan.options.verbose)
    timings["consistency"] = time.time() - t3
    try:
        summary = outputs.finish_summary(consistency)
    except Exception as e:  # noqa: BLE001 - records.jsonl is complete; re-running rewrites the summary
        failure = failure or f"summary: {_one_line(e)}"
    timings["finalize"] = time.time() - t2 - timings["consistency"]
    return summary, outputs, failure


def _print_end(options: RunOptions, out_dir: str, summary: dict, info: dict, printer: Printer,
               tracked: str | None = None) -> None:
    """The per-model table and the closing lines: each model's headline score (and why the ranking
    passed over a headline), the significant differences, what was written, where the run was
    tracked (``tracked``: ragscale.tracking.track's line), the outcome in the exit code's words
    (ragscale.exitcodes.outcome: "ok" only when every record was scored) and (last) what to open."""
    from ragscale.metrics.registry import label
    from ragscale.report.leaderboard import fallback_lines, model_lines
    from ragscale.report.ranking import ranking
    from ragscale.report.significance import significant_lines
    from ragscale.report.slices import console_lines
    from ragscale.report.summary import format_table

    if options.print_summary and summary["models"]:
        printer("")
        printer(format_table(summary))
    rec = info["records"]
    printer(f"\n[ragscale] {rec['out']}/{rec['in']} records evaluated ({rec['errored']} with errors) "
            f"in {info['timings_s']['total']:.1f}s")
    if summary.get("input_errors"):
        printer(f"[ragscale] {summary['input_errors']['records']} of them: {summary['input_errors']['reason']}")
    lines = model_lines(summary) if summary["models"] else []
    if lines:
        for why in fallback_lines(summary):
            printer(f"[ragscale] {why}")
        basis, calibrated = ranking(summary)
        printer(f"[ragscale] {len(lines)} model(s), ranked by {'calibrated ' if calibrated else ''}{label(basis)}:")
        for line in lines:
            printer(f"[ragscale]  {line}")
        lost = console_lines(summary)
        if lost:
            printer("[ragscale] where models lose (slices, Benjamini-Hochberg; leaderboard.md has all):")
            for line in lost:
                printer(f"[ragscale]  {line}")
        pairs = significant_lines(summary)
        if pairs:
            unit = ((summary.get("significance") or {}).get("unit") or {}).get("text")
            printer("[ragscale] significant differences (paired tests, adjusted p-values"
                    + (f", {unit}" if unit else "") + "; leaderboard.md has all):")
            for line in pairs:
                printer(f"[ragscale]  {line}")
    _print_files(out_dir, summary, info, printer, tracked)


def _print_files(out_dir: str, summary: dict, info: dict, printer: Printer, tracked: str | None) -> None:
    """The last lines: the files, the tracking, the outcome, and what to open."""
    rec, outputs = info["records"], info["outputs"]
    printer(f"[ragscale] records:     {os.path.join(out_dir, 'records.jsonl')} (and records.parquet)")
    if outputs.get("leaderboard"):
        printer(f"[ragscale] leaderboard: {os.path.join(out_dir, outputs['leaderboard'][0])}")
    if outputs.get("retrieval"):
        printer(f"[ragscale] retrieval:   {os.path.join(out_dir, outputs['retrieval'][-1])} (against qrels.file)")
    if tracked:
        printer(f"[ragscale] {tracked}")
    code = of_run(info["failure"], rec, info.get("outputs_failed"))
    report = os.path.join(out_dir, outputs["html_report"]) if outputs.get("html_report") else None
    if code in INTERRUPTS:
        printer(f"[ragscale] run {info['failure']}: {rec['out']} of {rec['in']} records written; re-run the same "
                f"command to resume (exit code {code})")
        return
    if code == FAILED:
        printer(f"[ragscale] run failed: {info['failure'] or str(rec['missing']) + ' records missing'}; "
                "re-run the same command to resume")
        return
    if code == OK:
        printer("[ragscale] ok: every record was scored")
    else:
        anchor = "errors" if rec["errored"] > rec.get("judge_failed", 0) else "judges"  # only judges failed: their table
        where = f"{report}#{anchor}" if report else os.path.join(out_dir, "records.jsonl")
        printer(f"[ragscale] warning: {outcome(code, rec['in'], rec['errored'], rec.get('judge_failed', 0))} "
                f"(exit code {code})"
                + (f"; their errors: {where}" if rec["errored"] else ""))
    printer(f"[ragscale] open the report: {report}" if report
            else f"[ragscale] summary: {os.path.join(out_dir, 'summary.json')}")
