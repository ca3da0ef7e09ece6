"""Everything written from the records after the pipeline, in ONE pass over records.jsonl:
the summary and records.parquet, the groups of repeated runs for consistency, the per-task
values the significance tests between models pair, the judged and human values calibration
pairs, the open-rag-eval results CSVs (TREC steps), judge-vs-human agreement and the HTML
report's statistics; then, from the summary, the
leaderboard. The driver (ragscale.driver) drives it:

    outputs = Outputs(cfg, plan, out_dir, printer); outputs.read()        # the one pass
    summary = outputs.finish_summary(consistency)                          # summary.json/csv
    run.json["outputs"] = outputs.finish_reports(summary, run_info)        # leaderboard, CSVs, report

A failing output (a report sink, the leaderboard, significance, calibration, an export that wrote
only some of its files) is a warning line, never fatal: records.jsonl and the summary are written,
``failed`` lists what failed (run.json ``outputs_failed``), and the run exits 5 (INCOMPLETE,
ragscale.exitcodes).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

from ragscale.exitcodes import INCOMPLETE, STATUS

TREC_STEPS = ("retrieval", "nuggets", "citation", "hallucination", "no_answer")


class Outputs:
    """The sinks of one run, fed by one pass over its records."""

    def __init__(self, cfg: Any, plan: Any, out_dir: str, printer: Callable[[str], None] = print):
        from ragscale.report.summary import SummarySink

        self.cfg, self.out_dir, self.printer = cfg, out_dir, printer
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
        if cfg.significance.enabled:
            from ragscale.report.significance import PairedValues, collected_metrics

            self.paired = PairedValues(collected_metrics(self.metrics))
        self.calibration = None  # human-calibrated estimates (ragscale.report.calibration)
        if cfg.calibration.human:
            from ragscale.report.calibration import CalibrationSink

            c = cfg.calibration
            try:
                self.calibration = CalibrationSink(c.human, list(c.pairs), list(c.map), self.metrics, c)
            except Exception as e:  # noqa: BLE001 - reported, never fatal
                self._warn_calibration(e)
        self.calibration_block: dict | None = None
        self.sinks: dict[str, tuple[str, Any]] = {}  # run.json outputs key -> (what a warning calls it, sink)
        self._open("open_rag_eval_csv", "open-rag-eval CSV export", lambda: self._orag(plan))
        self._open("agreement", "judge-vs-human agreement", self._agreement)
        self._open("html_report", "HTML report", self._html)

    def fail(self, label: str, e: BaseException | str) -> None:
        """Report an output that failed (wholly or partly): a warning line, and ``failed`` for run.json."""
        why = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
        self.printer(f"[ragscale] warning: {label} failed: {why}")
        self.failed.append(f"{label}: {why}")

    def _open(self, key: str, label: str, make: Callable[[], Any]) -> None:
        try:
            sink = make()
        except Exception as e:  # noqa: BLE001 - reported, never fatal
            self.fail(label, e)
            return
        if sink is not None:
            self.sinks[key] = (label, sink)

    def _orag(self, plan: Any) -> Any:
        if not (self.cfg.trec.export_csv and any(s in plan.steps for s in TREC_STEPS)):
            return None
        from ragscale.report.orag_export import OragSink

        return OragSink(self.out_dir)

    def _agreement(self) -> Any:
        a = self.cfg.agreement
        if not a.human:
            return None
        from ragscale.report.agreement import AgreementSink

        return AgreementSink(self.out_dir, a.human, list(a.pairs), n_boot=a.bootstrap, seed=a.seed)

    def _html(self) -> Any:
        if not self.cfg.html_report:
            return None
        from ragscale.report.html import HtmlSink

        return HtmlSink(self.out_dir, self.metrics)

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
                if self.paired is not None:
                    try:
                        self.paired.add(rec)
                    except Exception as e:  # noqa: BLE001 - reported, never fatal
                        self.fail("significance", e)
                        self.paired = None
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
                                      self._calibrate if self.calibration is not None else None)
        repeats = (summary.get("duplicates") or {}).get("records")
        if repeats:
            self.printer(f"[ragscale] warning: {repeats} record{' repeats' if repeats == 1 else 's repeat'} an "
                         "earlier answer of its model to its task: only the first answer is scored, each repeat is "
                         "an input error (summary.json duplicates)")
        return summary

    def _warn_calibration(self, e: Exception) -> None:
        from ragscale.errors import UserError

        self.fail("calibration", str(e) if isinstance(e, UserError) else e)

    def _calibrate(self, summary: dict) -> dict | None:
        """summary.json's calibration block; a failure (e.g. labels on an unstated scale) is a
        warning: the run's own results stand."""
        try:
            block = self.calibration.finish(summary, self.cfg.significance)
        except Exception as e:  # noqa: BLE001 - reported, never fatal
            self._warn_calibration(e)
            return None
        self.calibration_block = block
        self.printer(f"[ragscale] calibration: {block['matched']} record(s) with human labels, "
                     f"{len(block['metrics'])} metric(s) calibrated"
                     + (f"; the leaderboard ranks by calibrated {block['ranked_by']}" if block["ranked_by"] else ""))
        return block

    def _significance(self, summary: dict) -> dict | None:
        """summary.json's significance block (None with fewer than 2 models); a failure is a warning."""
        from ragscale.report.significance import for_summary

        paired, t0 = self.paired, time.time()
        try:
            block = for_summary(summary, paired, self.cfg.significance)
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

    def finish_reports(self, summary: dict, run_info: dict) -> dict:
        """Write the leaderboard and the report sinks' files; returns run.json's ``outputs``
        (paths relative to the run dir)."""
        out: dict = {}
        if summary["models"]:
            try:
                from ragscale.report.leaderboard import write_leaderboard

                paths = write_leaderboard(summary, self.out_dir)
                out["leaderboard"] = [self._rel(paths[k]) for k in ("markdown", "csv")]
                if "significance" in paths:
                    out["significance"] = [self._rel(paths["significance"])]
            except Exception as e:  # noqa: BLE001
                self.fail("leaderboard", e)
        if self.calibration_block is not None:
            try:
                from ragscale.report.calibration import write_outputs

                paths = write_outputs(self.calibration_block, os.path.join(self.out_dir, "calibration"))
                out["calibration"] = [self._rel(p) for p in sorted(paths.values())]
            except Exception as e:  # noqa: BLE001
                self.fail("calibration files", e)
        as_written = json.loads(json.dumps(run_info, default=str))  # run.json's content, as the report shows it
        for key, (label, sink) in self.sinks.items():
            if self.failed:  # the report (the last sink) shows what failed before it
                as_written.update(status=STATUS[INCOMPLETE], outputs_failed=list(self.failed))
            try:
                out[key] = self._finish(key, sink, summary, as_written)
            except Exception as e:  # noqa: BLE001 - reported, never fatal
                self.fail(label, e)
            for why in getattr(sink, "failures", ()):  # files an export could not write, the others written
                self.fail(label, why)
        return out

    def _finish(self, key: str, sink: Any, summary: dict, run_info: dict) -> Any:
        if key == "html_report":
            return self._rel(sink.finish(summary, run_info))
        if key == "agreement":
            from ragscale.report.agreement import write_outputs

            paths = write_outputs(sink.finish(), os.path.join(self.out_dir, "agreement"))
            return [self._rel(p) for p in sorted(paths.values())]
        return [self._rel(p) for p in sink.finish()]

    def _rel(self, path: str) -> str:
        return os.path.relpath(path, self.out_dir)
