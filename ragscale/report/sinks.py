"""Everything written from the records after the pipeline, in ONE pass over records.jsonl:
the summary and records.parquet, the groups of repeated runs for consistency, the
open-rag-eval results CSVs (TREC steps), judge-vs-human agreement and the HTML report's
statistics; then, from the summary, the leaderboard. The runner drives it:

    outputs = Outputs(cfg, plan, out_dir, printer); outputs.read()        # the one pass
    summary = outputs.finish_summary(consistency)                          # summary.json/csv
    run.json["outputs"] = outputs.finish_reports(summary, run_info)        # leaderboard, CSVs, report

A failing report sink is a warning, never fatal: records.jsonl and the summary are written.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

TREC_STEPS = ("retrieval", "nuggets", "citation", "hallucination", "no_answer")


class Outputs:
    """The sinks of one run, fed by one pass over its records."""

    def __init__(self, cfg: Any, plan: Any, out_dir: str, printer: Callable[[str], None] = print):
        from ragscale.report.summary import SummarySink

        self.cfg, self.out_dir, self.printer = cfg, out_dir, printer
        self.metrics = list(plan.metrics) + plan.panel_columns()
        self.summary = SummarySink(out_dir, self.metrics)
        self.groups = None
        if "consistency" in plan.steps:
            from ragscale.metrics.consistency import GroupCollector, numeric_metrics
            from ragscale.metrics.registry import record_scalar

            self.groups = GroupCollector(numeric_metrics(plan.metrics), record_scalar)
        self.sinks: dict[str, tuple[str, Any]] = {}  # run.json outputs key -> (what a warning calls it, sink)
        self._open("open_rag_eval_csv", "open-rag-eval CSV export", lambda: self._orag(plan))
        self._open("agreement", "judge-vs-human agreement", self._agreement)
        self._open("html_report", "HTML report", self._html)

    def _open(self, key: str, label: str, make: Callable[[], Any]) -> None:
        try:
            sink = make()
        except Exception as e:  # noqa: BLE001 - reported, never fatal
            self.printer(f"[ragscale] warning: {label} failed: {type(e).__name__}: {e}")
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
            for rec in iter_records(os.path.join(self.out_dir, RECORDS)):
                self.summary.add(rec)
                if self.groups is not None:
                    self.groups.add(rec)
                for key, (label, sink) in list(self.sinks.items()):
                    try:
                        sink.add(rec)
                    except Exception as e:  # noqa: BLE001 - reported, never fatal
                        self.printer(f"[ragscale] warning: {label} failed: {type(e).__name__}: {e}")
                        del self.sinks[key]
        finally:
            self.summary.close()

    def finish_summary(self, consistency: dict | None = None) -> dict:
        """Write summary.json and summary.csv; returns the summary."""
        return self.summary.finish(consistency)

    def finish_reports(self, summary: dict, run_info: dict) -> dict:
        """Write the leaderboard and the report sinks' files; returns run.json's ``outputs``
        (paths relative to the run dir)."""
        out: dict = {}
        if summary["models"]:
            try:
                from ragscale.report.leaderboard import write_leaderboard

                paths = write_leaderboard(summary, self.out_dir)
                out["leaderboard"] = [self._rel(paths[k]) for k in ("markdown", "csv")]
            except Exception as e:  # noqa: BLE001
                self.printer(f"[ragscale] warning: leaderboard failed: {type(e).__name__}: {e}")
        as_written = json.loads(json.dumps(run_info, default=str))  # run.json's content, as the report shows it
        for key, (label, sink) in self.sinks.items():
            try:
                out[key] = self._finish(key, sink, summary, as_written)
            except Exception as e:  # noqa: BLE001 - reported, never fatal
                self.printer(f"[ragscale] warning: {label} failed: {type(e).__name__}: {e}")
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
