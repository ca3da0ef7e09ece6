"""A self-contained HTML report of one run (``python -m ragscale.report RUN_DIR``).

One file, inline CSS and inline SVG charts, no scripts and nothing fetched: it opens from
disk, and its tables fit a 1280 px screen. The answer comes first: the run's status in one
line, the leaderboard (summary.json, else computed here: the ranking metric's mean with its
interval, calibrated when summary.json has a ``calibration`` block, and which models are
significantly better than which), every metric's mean grouped by metric family, the
differences between models (when summary.json has a ``significance`` block) and the
calibration; then per-metric distributions, the breakdowns by answerability and by turn, the
lowest-scoring records (each once, with every score it is among the lowest on, its question,
references, passages, answer, metric values and the judges' details and raw outputs), judge
work (run.json ``judge_work`` and the records' ``judge_errors``) and record errors; run
provenance and configuration (run.json) last, collapsed. Every text taken from the run is
HTML-escaped. The status line says "ok" only when every record was scored (ragscale.exitcodes).

records.jsonl is read in one streaming pass with bounded memory: per metric and model a
running mean/variance, min/max, exact 20-bin histogram counts over [0, 1] and a uniform
reservoir sample (fixed seed) for quantiles; per score a heap of the N records furthest from
its best value (``html_records``).

This module holds the scan and renders the page: jinja2 templates in ``templates/`` (package
data) with autoescaping on, a base layout and one template per section. What each section
shows is computed in ``html_context`` (and ``html_significance``, ``html_records``), the
charts' geometry in ``html_svg`` (all package-private); no Python code writes markup.
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any, Sequence

import jinja2

from ragscale import version
from ragscale.report import html_scan
from ragscale.report.html_context import page_context
from ragscale.report.html_scan import Scan
from ragscale.report.plots import check_run_dir, read_json
from ragscale.report.safe import LINE_BREAKS, visible
from ragscale.report.text import fmt, trunc

# ---------------------------------------------------------------- entry point

class HtmlSink:
    """report.html from one pass over the records (shared with the other report sinks) plus the
    run's summary and run.json, rendered when the pass is over."""

    def __init__(self, run_dir: str, metrics: Sequence[str] | None, worst_n: int = 5):
        from ragscale.errors import UserError

        if worst_n < 0:
            raise UserError(f"worst_n must be >= 0, got {worst_n}")
        self.run_dir, self.worst_n = run_dir, worst_n
        self.scan = Scan(list(metrics) if metrics else None, worst_n)

    def add(self, rec: dict) -> None:
        if isinstance(rec, dict):
            self.scan.add(rec)

    def finish(self, summary: dict | None, run: dict | None, out_path: str | None = None) -> str:
        """Write the report (default ``<run_dir>/report.html``) and return its path."""
        return _render(self.run_dir, self.scan, summary, run, self.worst_n, out_path)


def write_report(run_dir: str, out_path: str | None = None, *, worst_n: int = 5) -> str:
    """Write the report of a finished run dir (its records.jsonl, summary.json, run.json) and return its path."""
    path = check_run_dir(run_dir)
    summary = read_json(os.path.join(run_dir, "summary.json"))
    sink = HtmlSink(run_dir, [m for m in (summary or {}).get("metrics") or [] if isinstance(m, str)], worst_n)
    from ragscale.io.output import run_columns

    sink.scan.run(path, run_columns(run_dir))
    return sink.finish(summary, read_json(os.path.join(run_dir, "run.json")), out_path)


def _render(run_dir: str, scan: Scan, summary: dict | None, run: dict | None, worst_n: int,
            out_path: str | None) -> str:
    from ragscale.errors import UserError

    context = page_context(run_dir, scan, summary, run, worst_n)
    doc = _environment().get_template("report.html.j2").render(
        context, reservoir=html_scan.RESERVOIR, version=version.__version__, generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    out = out_path or os.path.join(run_dir, "report.html")
    tmp = out + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(doc)
        os.replace(tmp, out)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc}") from None
    return out


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    """The report's templates (``ragscale/report/templates``, package data) with autoescaping on for
    every template: each text taken from the run is escaped where it is printed, its control and
    bidirectional characters written as escapes first (ragscale.report.safe.visible; line breaks kept)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("ragscale.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, finalize=_shown)
    env.filters.update(fmt=fmt, trunc=trunc, px=lambda v: f"{v:.1f}", json_shape=_json_shape,
                       dumps=lambda v: json.dumps(v, ensure_ascii=False, default=str), columns=_columns)
    return env


def _shown(value: Any) -> Any:
    """What a template prints of a value: a text with its control and bidirectional characters as
    escapes (ragscale.report.safe.visible; line breaks kept), then autoescaped."""
    return visible(value, LINE_BREAKS) if isinstance(value, str) and not hasattr(value, "__html__") else value


def _json_shape(obj: Any) -> str:
    """How the templates' ``json`` macro shows a JSON value."""
    if obj is None:
        return "null"
    if isinstance(obj, (bool, int, float)):
        return "number"
    if isinstance(obj, str):
        return "text"
    if isinstance(obj, dict):
        return "dict"
    if isinstance(obj, list):
        if obj and all(isinstance(x, dict) for x in obj):
            return "records"
        return "scalars" if all(not isinstance(x, (dict, list)) for x in obj) else "list"
    return "other"


def _columns(rows: list[dict], limit: int) -> list[str]:
    """The keys of a list of dicts in first-seen order (at most ``limit``)."""
    cols: list[str] = []
    for row in rows:
        cols.extend(k for k in row if k not in cols)
    return cols[:limit]
