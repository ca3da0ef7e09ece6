"""Everything written from the records after the pipeline, in ONE pass over records.jsonl:
the summary and records.parquet, the groups of repeated runs for consistency, the per-task
values the significance tests between models pair, the judged and human values calibration
pairs; then the report sinks (:data:`SINKS`): the leaderboard (and significance.csv), the
calibration files, the open-rag-eval results CSVs (TREC steps), judge-vs-human agreement and the
HTML report. The driver (ragscale.driver) drives it:

    outputs = Outputs(plan, out_dir, printer); outputs.read()              # the one pass
    summary = outputs.finish_summary(consistency)                          # summary.json/csv
    run.json["outputs"] = outputs.finish_reports(summary, run_info)        # the report sinks' files

A report sink is a :class:`Sink` (``add`` each record, ``finish`` -> the run.json ``outputs``
entries of the files it wrote) that a :class:`SinkSpec` opens from the plan's
:class:`ReportSettings` and checks at plan time. A failing output (a sink, significance,
calibration, an export that wrote only some of its files) is a warning line, never fatal:
records.jsonl and the summary are written, ``failed`` lists what failed (run.json
``outputs_failed``), and the run exits 5 (INCOMPLETE, ragscale.exitcodes).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from ragscale.errors import UserError
from ragscale.exitcodes import INCOMPLETE, STATUS
from ragscale.registry import REGISTRY
from ragscale.report import qrels_sink

TREC_STEPS = ("retrieval", "nuggets", "citation", "hallucination", "no_answer")


@dataclass(frozen=True)
class ReportSettings:
    """What the report pass writes, decided at plan time (``RunPlan.reports``): the config's
    ``significance``, ``calibration`` and ``agreement`` blocks (ragscale.config's dataclasses),
    ``trec.export_csv``, ``html_report``, the unit of resampling (``cluster_by``: a field, or None for
    every task on its own) and the ``slices`` block (ragscale.config.SlicesConf)."""

    significance: Any
    calibration: Any
    agreement: Any
    export_csv: bool = True
    html_report: bool = True
    cluster_by: str | None = None
    slices: Any = None
    qrels: Any = None  # ragscale.config.QrelsConf as a dict: retrieval against human qrels (ragscale.report.qrels_sink)


@dataclass(frozen=True)
class Finished:
    """What a sink's ``finish`` gets: the run's summary, run.json's content as written (its status
    already says which outputs failed before this one) and the run's folder."""

    summary: dict
    run_info: dict
    out_dir: str

    def rel(self, path: str) -> str:
        """``path`` relative to the run's folder, as run.json's ``outputs`` names files."""
        return os.path.relpath(path, self.out_dir)


class Sink(Protocol):
    """A report sink: fed every record of the one pass, then finished once. ``finish`` returns
    run.json ``outputs`` entries ({key: relative path or paths}, {} when it wrote nothing); a sink
    that wrote only some of its files lists the others in an optional ``failures``."""

    def add(self, rec: dict) -> None: ...

    def finish(self, done: Finished) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SinkSpec:
    """A report sink as the report pass opens it: ``key`` names it (run.json ``outputs``),
    ``label`` is what a warning calls it, ``open(settings, plan, out_dir)`` returns the sink or
    None when this run does not write it, ``check(settings, metrics)`` refuses bad settings at plan
    time (a one-line UserError) before any record is read."""

    key: str
    label: str
    open: Callable[[ReportSettings, Any, str], Sink | None]
    check: Callable[[ReportSettings, Sequence[str]], None] = lambda settings, metrics: None


class _Leaderboard:
    """leaderboard.md and leaderboard.csv (and significance.csv) from the summary."""

    def add(self, rec: dict) -> None:
        pass

    def finish(self, done: Finished) -> dict[str, Any]:
        if not done.summary["models"]:
            return {}
        from ragscale.report.leaderboard import write_leaderboard

        paths = write_leaderboard(done.summary, done.out_dir)
        out: dict[str, Any] = {"leaderboard": [done.rel(paths[k]) for k in ("markdown", "csv")]}
        if "significance" in paths:
            out["significance"] = [done.rel(paths["significance"])]
        return out


class _CalibrationFiles:
    """calibration/calibration.{csv,json,md} from the summary's calibration block."""

    def add(self, rec: dict) -> None:
        pass

    def finish(self, done: Finished) -> dict[str, Any]:
        block = done.summary.get("calibration")
        if block is None:
            return {}
        from ragscale.report.calibration import write_outputs

        paths = write_outputs(block, os.path.join(done.out_dir, "calibration"))
        return {"calibration": [done.rel(p) for p in sorted(paths.values())]}


class _Fed:
    """A sink of the report modules (their own ``finish`` signatures, shared with their commands)
    as a :class:`Sink`: ``write(sink, done)`` finishes it and returns its outputs entry."""

    def __init__(self, key: str, sink: Any, write: Callable[[Any, Finished], Any]):
        self.key, self.sink, self.write = key, sink, write

    def add(self, rec: dict) -> None:
        self.sink.add(rec)

    @property
    def failures(self) -> Sequence[str]:
        return getattr(self.sink, "failures", ())

    def finish(self, done: Finished) -> dict[str, Any]:
        return {self.key: self.write(self.sink, done)}


def _open_orag(settings: ReportSettings, plan: Any, out_dir: str) -> Sink | None:
    if not (settings.export_csv and any(s in plan.steps for s in TREC_STEPS)):
        return None
    from ragscale.report.orag_export import OragSink

    return _Fed("open_rag_eval_csv", OragSink(out_dir), lambda sink, done: [done.rel(p) for p in sink.finish()])


def _open_agreement(settings: ReportSettings, plan: Any, out_dir: str) -> Sink | None:
    a = settings.agreement
    if not a.human:
        return None
    from ragscale.report.agreement import AgreementSink, write_outputs

    def write(sink: Any, done: Finished) -> list[str]:
        paths = write_outputs(sink.finish(), os.path.join(done.out_dir, "agreement"))
        return [done.rel(p) for p in sorted(paths.values())]

    return _Fed("agreement", AgreementSink(out_dir, a.human, list(a.pairs), n_boot=a.bootstrap, seed=a.seed,
                                           cluster_by=settings.cluster_by), write)


def _check_agreement(settings: ReportSettings, metrics: Sequence[str]) -> None:
    a = settings.agreement
    if a.human:
        from ragscale.report.agreement import parse_pairs

        if not os.path.isfile(a.human):
            raise UserError(f"agreement.human: no such file: {a.human}")
        parse_pairs(list(a.pairs))


def _open_html(settings: ReportSettings, plan: Any, out_dir: str) -> Sink | None:
    if not settings.html_report:
        return None
    from ragscale.report.html import HtmlSink

    metrics = list(plan.metrics) + plan.panel_columns()
    return _Fed("html_report", HtmlSink(out_dir, metrics), lambda sink, done: done.rel(sink.finish(done.summary,
                                                                                                   done.run_info)))


def _check_calibration(settings: ReportSettings, metrics: Sequence[str]) -> None:
    """calibration.* before any work: the labels file, ppi-python, the settings, the pairs and the
    scale maps (the human values' ranges are checked at the end, against the judged ones)."""
    c = settings.calibration
    if not c.human:
        return
    from ragscale.report.agreement import read_human
    from ragscale.report.calibration_settings import check_settings, resolve
    from ragscale.stats.ppi import ppi

    if not os.path.isfile(c.human):
        raise UserError(f"calibration.human: no such file: {c.human}")
    ppi()
    check_settings(c)
    resolve(read_human(c.human), list(c.pairs), list(c.map), metrics)


# The report sinks, in the order they finish (and run.json lists their files).
SINKS: tuple[SinkSpec, ...] = (
    SinkSpec("leaderboard", "leaderboard", lambda settings, plan, out_dir: _Leaderboard()),
    SinkSpec("calibration", "calibration files",
             lambda settings, plan, out_dir: _CalibrationFiles() if settings.calibration.human else None,
             _check_calibration),
    SinkSpec("open_rag_eval_csv", "open-rag-eval CSV export", _open_orag),
    SinkSpec("retrieval", "retrieval against qrels", qrels_sink.open_sink, qrels_sink.check),
    SinkSpec("agreement", "judge-vs-human agreement", _open_agreement, _check_agreement),
    SinkSpec("html_report", "HTML report", _open_html),
)


for _spec in SINKS:
    REGISTRY.register("sink", _spec.key, _spec)


def sink_specs() -> tuple[SinkSpec, ...]:
    """ragscale's report sinks (:data:`SINKS`), then the others registered (ragscale/registry.py,
    kind ``sink``: the plugins')."""
    own = {spec.key for spec in SINKS}
    return (*SINKS, *(spec for key, spec in REGISTRY.entries("sink").items() if key not in own))


def check_reports(settings: ReportSettings, metrics: Sequence[str]) -> None:
    """Every setting of the report pass, at plan time: significance's and each sink's."""
    from ragscale.report.significance import check_settings

    check_settings(settings.significance)
    for spec in sink_specs():
        spec.check(settings, metrics)


class Outputs:
    """The sinks of one run, fed by one pass over its records."""

    def __init__(self, plan: Any, out_dir: str, printer: Callable[[str], None] = print):
        from ragscale.report.summary import SummarySink

        self.settings: ReportSettings = plan.reports
        self.out_dir, self.printer = out_dir, printer
        self.failed: list[str] = []  # "<output>: <why>" of each output that failed (run.json outputs_failed)
        self.columns = plan.columns  # the records are read through the user's column names, as the inputs were
        self.metrics = list(plan.metrics) + plan.panel_columns()
        self.summary = SummarySink(out_dir, self.metrics)
        self.groups = None
        if "consistency" in plan.steps:
            from ragscale.metrics.consistency import GroupCollector, numeric_metrics
            from ragscale.metrics.registry import record_scalar

            self.groups = GroupCollector(numeric_metrics(plan.metrics), record_scalar)
        self.paired = None  # per-task values for the significance block (ragscale.report.significance)
        if self.settings.significance.enabled:
            from ragscale.report.significance import PairedValues, collected_metrics

            slices = self.settings.slices
            # the compared metrics first (the tests'), then every metric for the intervals of its means
            self.paired = PairedValues(list(dict.fromkeys(collected_metrics(self.metrics) + self.metrics)),
                                       cluster_by=self.settings.cluster_by,
                                       slice_by=list(getattr(slices, "by", None) or []))
        self.jury = None  # the judge panel's agreement (ragscale.report.jury)
        if plan.panel_columns():
            from ragscale.report.jury import JuryValues, panel_of

            self.jury = JuryValues(panel_of(plan.panel_columns()))
        self.calibration = None  # human-calibrated estimates (ragscale.report.calibration)
        c = self.settings.calibration
        if c.human:
            from ragscale.report.calibration import CalibrationSink

            try:
                self.calibration = CalibrationSink(c.human, list(c.pairs), list(c.map), self.metrics, c,
                                                   cluster_by=self.settings.cluster_by)
            except Exception as e:  # noqa: BLE001 - reported, never fatal
                self._warn_calibration(e)
        self.sinks: dict[str, tuple[str, Sink]] = {}  # SinkSpec.key -> (what a warning calls it, sink)
        for spec in sink_specs():
            try:
                sink = spec.open(self.settings, plan, out_dir)
            except Exception as e:  # noqa: BLE001 - reported, never fatal
                self.fail(spec.label, e)
                continue
            if sink is not None:
                self.sinks[spec.key] = (spec.label, sink)

    def fail(self, label: str, e: BaseException | str) -> None:
        """Report an output that failed (wholly or partly): a warning line, and ``failed`` for run.json."""
        why = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
        self.printer(f"[ragscale] warning: {label} failed: {why}")
        self.failed.append(f"{label}: {why}")

    def read(self) -> None:
        """The one pass over records.jsonl; a report sink that fails is dropped with a warning."""
        from ragscale.io.output import RECORDS, iter_records

        try:
            for rec in iter_records(os.path.join(self.out_dir, RECORDS), self.columns):
                self.summary.add(rec)
                if self.groups is not None:
                    self.groups.add(rec)
                if self.calibration is not None:
                    try:
                        self.calibration.add(rec)
                    except Exception as e:  # noqa: BLE001 - reported, never fatal
                        self._warn_calibration(e)
                        self.calibration = None
                for name, label in (("paired", "significance"), ("jury", "jury")):
                    if getattr(self, name) is not None:
                        try:
                            getattr(self, name).add(rec)
                        except Exception as e:  # noqa: BLE001 - reported, never fatal
                            self.fail(label, e)
                            setattr(self, name, None)
                for key, (label, sink) in list(self.sinks.items()):
                    try:
                        sink.add(rec)
                    except Exception as e:  # noqa: BLE001 - reported, never fatal
                        self.fail(label, e)
                        del self.sinks[key]
        finally:
            self.summary.close()

    def finish_summary(self, consistency: dict | None = None) -> dict:
        """Write summary.json and summary.csv (with the significance block); returns the summary."""
        summary = self.summary.finish(consistency, self._significance if self.paired is not None else None,
                                      self._calibrate if self.calibration is not None else None,
                                      self._inference)
        repeats = (summary.get("duplicates") or {}).get("records")
        if repeats:
            self.printer(f"[ragscale] warning: {repeats} record{' repeats' if repeats == 1 else 's repeat'} an "
                         "earlier answer of its model to its task: only the first answer is scored, each repeat is "
                         "an input error (summary.json duplicates)")
        return summary

    def _warn_calibration(self, e: Exception) -> None:
        self.fail("calibration", str(e) if isinstance(e, UserError) else e)

    def _calibrate(self, summary: dict) -> dict | None:
        """summary.json's calibration block; a failure (e.g. labels on an unstated scale) is a
        warning: the run's own results stand."""
        try:
            block = self.calibration.finish(summary, self.settings.significance)
        except Exception as e:  # noqa: BLE001 - reported, never fatal
            self._warn_calibration(e)
            return None
        self.printer(f"[ragscale] calibration: {block['matched']} record(s) with human labels, "
                     f"{len(block['metrics'])} metric(s) calibrated"
                     + (f"; the leaderboard ranks by calibrated {block['ranked_by']}" if block["ranked_by"] else ""))
        return block

    def _significance(self, summary: dict) -> dict | None:
        """summary.json's significance block (None with fewer than 2 models); a failure is a warning."""
        from ragscale.report.significance import for_summary

        paired, t0 = self.paired, time.time()
        try:
            block = for_summary(summary, paired, self.settings.significance)
        except Exception as e:  # noqa: BLE001 - reported, never fatal
            self.fail("significance", e)
            return None
        if block is None:
            return None
        if paired.keyless:
            self.printer(f"[ragscale] significance: {paired.keyless} record(s) without a task_id, query_id or "
                         "conversation_id + turn left out (nothing to pair them by)")
        tests = sum(e["p"] is not None for entries in block["metrics"].values() for e in entries)
        self.printer(f"[ragscale] significance: {tests} paired comparisons ({block['design']}, "
                     f"{len(block['metrics'])} metric(s), {block['resamples']} resamples) in {time.time() - t0:.1f}s")
        return block

    def _inference(self, summary: dict) -> dict:
        """summary.json's ``intervals``, ``slices`` and ``jury`` (ragscale.report.slices); a failure is a warning."""
        from ragscale.report.slices import summary_blocks

        return summary_blocks(summary, self.paired, self.jury, self.settings, self.printer, self.fail)

    def finish_reports(self, summary: dict, run_info: dict) -> dict:
        """Finish every report sink in :data:`SINKS` order; returns run.json's ``outputs`` (paths
        relative to the run dir). Each sink sees run.json as written, with the outputs that failed
        before it (the HTML report, last, shows them)."""
        out: dict = {}
        as_written = json.loads(json.dumps(run_info, default=str))  # run.json's content, as the report shows it
        done = Finished(summary, as_written, self.out_dir)
        for label, sink in self.sinks.values():
            if self.failed:
                as_written.update(status=STATUS[INCOMPLETE], outputs_failed=list(self.failed))
            try:
                out.update(sink.finish(done))
            except Exception as e:  # noqa: BLE001 - reported, never fatal
                self.fail(label, e)
            for why in getattr(sink, "failures", ()):  # files an export could not write, the others written
                self.fail(label, why)
        return out
