"""The outputs written after the records and the summary: the per-model leaderboard, the
open-rag-eval results CSVs (TREC steps), judge-vs-human agreement and the HTML report.

A failing sink is a warning, never fatal: records.jsonl and the summary are already written.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

TREC_STEPS = ("retrieval", "nuggets", "citation", "hallucination", "no_answer")


def _leaderboard(cfg: Any, plan: Any, out_dir: str, summary: dict, info: dict) -> list[str] | None:
    if not summary["models"]:
        return None
    from ragscale.report.leaderboard import write_leaderboard

    paths = write_leaderboard(summary, out_dir)
    return [os.path.relpath(paths[k], out_dir) for k in ("markdown", "csv")]


def _orag_csv(cfg: Any, plan: Any, out_dir: str, summary: dict, info: dict) -> list[str] | None:
    if not (cfg.trec.export_csv and any(s in plan.steps for s in TREC_STEPS)):
        return None
    from ragscale.report.orag_export import export_orag_csv_by_model

    return [os.path.relpath(p, out_dir) for p in export_orag_csv_by_model(out_dir)]


def _agreement(cfg: Any, plan: Any, out_dir: str, summary: dict, info: dict) -> list[str] | None:
    if not cfg.agreement.human:
        return None
    from ragscale.report.agreement import agreement, write_outputs

    result = agreement(out_dir, cfg.agreement.human, list(cfg.agreement.pairs),
                       n_boot=cfg.agreement.bootstrap, seed=cfg.agreement.seed)
    paths = write_outputs(result, os.path.join(out_dir, "agreement"))
    return [os.path.relpath(p, out_dir) for p in sorted(paths.values())]


def _html(cfg: Any, plan: Any, out_dir: str, summary: dict, info: dict) -> str | None:
    if not cfg.html_report:
        return None
    from ragscale.report.html import write_report

    as_written = json.loads(json.dumps(info, default=str))  # run.json's content, as the report shows it
    return os.path.relpath(write_report(out_dir, run_info=as_written), out_dir)


# run.json ``outputs`` key -> (what the warning calls it, the sink)
SINKS: dict[str, tuple[str, Callable[..., Any]]] = {
    "leaderboard": ("leaderboard", _leaderboard),
    "open_rag_eval_csv": ("open-rag-eval CSV export", _orag_csv),
    "agreement": ("judge-vs-human agreement", _agreement),
    "html_report": ("HTML report", _html),
}


def write_reports(cfg: Any, plan: Any, out_dir: str, summary: dict, info: dict,
                  printer: Callable[[str], None] = print) -> dict:
    """Run every sink; returns run.json's ``outputs`` (paths relative to ``out_dir``)."""
    out: dict = {}
    for key, (label, sink) in SINKS.items():
        try:
            result = sink(cfg, plan, out_dir, summary, info)
        except Exception as e:  # noqa: BLE001 - reported, never fatal
            printer(f"[ragscale] warning: {label} failed: {type(e).__name__}: {e}")
            continue
        if result is not None:
            out[key] = result
    return out
