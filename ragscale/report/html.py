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
import math
import os
import random
import time
from collections import Counter, defaultdict
from typing import Any, Sequence

import jinja2

from ragscale.metrics.registry import record_scalar
from ragscale.record import judge_error_kind
from ragscale.report.html_records import Lowest, record_info
from ragscale.report.plots import check_run_dir, is_flag, read_json
from ragscale.report.safe import LINE_BREAKS, visible
from ragscale.report.summary import Unreadable
from ragscale.report.text import fmt, trunc

RESERVOIR = 2000
BINS = 20
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac"]


# ---------------------------------------------------------------- streaming accumulators

class _Dist:
    """Running statistics of one metric for one model (bounded memory)."""

    def __init__(self, seed: int) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.lo = math.inf
        self.hi = -math.inf
        self.hist = [0] * BINS
        self.unit = True  # every value in [0, 1]: ``hist`` is exact
        self.sample: list[float] = []
        self.rng = random.Random(seed)

    def add(self, v: float) -> None:
        self.n += 1
        d = v - self.mean
        self.mean += d / self.n
        self.m2 += d * (v - self.mean)
        self.lo = min(self.lo, v)
        self.hi = max(self.hi, v)
        if 0.0 <= v <= 1.0:
            self.hist[min(BINS - 1, int(v * BINS))] += 1
        else:
            self.unit = False
        if len(self.sample) < RESERVOIR:
            self.sample.append(v)
        else:
            j = self.rng.randrange(self.n)
            if j < RESERVOIR:
                self.sample[j] = v

    @property
    def sd(self) -> float:
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else math.nan

    @property
    def exact(self) -> bool:
        return self.n <= RESERVOIR

    def quantile(self, q: float) -> float | None:
        if not self.sample:
            return None
        s = sorted(self.sample)
        pos = q * (len(s) - 1)
        i = int(math.floor(pos))
        j = min(i + 1, len(s) - 1)
        return s[i] + (s[j] - s[i]) * (pos - i)


class _JudgeIssues:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.examples: list[dict] = []

    def add(self, err: dict, model: str, key: str) -> None:
        kind = {"undefined": "undefined", "engine": "engine errors", "parse": "parse failures"}[judge_error_kind(err)]
        self.counts[kind] += 1
        reason = trunc(str(err.get("reason", "")), 200)
        if reason in self.reasons or len(self.reasons) < 200:
            self.reasons[reason] += 1
        if len(self.examples) < 3 and err.get("raw") is not None:
            self.examples.append({"kind": kind, "model": model, "record": key, "reason": reason,
                                  "raw": trunc(str(err.get("raw")), 1500)})


def _descriptive(metric: str) -> bool:
    """A count or length (the catalog gives it no direction): no "lowest-scoring" list."""
    from ragscale.metrics.registry import lookup

    spec = lookup(metric)
    return spec is not None and spec.higher_is_better is None


class _Scan:
    """One streaming pass over records.jsonl."""

    def __init__(self, metrics: Sequence[str] | None, worst_n: int) -> None:
        self.fixed = metrics is not None
        self.metrics: list[str] = list(metrics or [])
        self.metric_set = set(self.metrics)
        self.worst_n = worst_n
        self.models: Counter[str] = Counter()
        self.model_errors: Counter[str] = Counter()
        self.dists: dict[str, dict[str, _Dist]] = defaultdict(dict)
        self.flags: set[str] = set()
        self.worst: dict[str, Lowest] = {}
        self.judges: dict[str, _JudgeIssues] = defaultdict(_JudgeIssues)
        self.detail_judges: set[str] = set()
        self.error_stages: Counter[str] = Counter()
        self.judge_failed = 0  # records without an error whose judge engine failed: failed records (summary.py)
        self.error_examples: list[dict] = []
        self.warnings = 0
        self.seq = 0
        self.unreadable = Unreadable()  # lines that are not a JSON object: whose model they are (summary's rule)
        self.settled = False

    def run(self, path: str, columns: dict[str, str] | None = None) -> None:
        from ragscale.io.output import iter_records

        try:
            for rec in iter_records(path, columns):
                if isinstance(rec, dict):
                    self.add(rec)
        except (OSError, ValueError) as exc:
            from ragscale.errors import UserError

            raise UserError(f"cannot read {path}: {exc}") from None

    def add(self, rec: dict) -> None:
        self.seq += 1
        model = str(rec.get("model_id"))
        held = self.unreadable.held(rec, model)  # an unreadable line: its model is settled at the end
        if not held:
            self.models[model] += 1
        rs = rec.get("ragscale") if isinstance(rec.get("ragscale"), dict) else {}
        key = str(rs.get("record_key") or f"line {self.seq}")
        self.warnings += len(rs.get("warnings") or [])
        engine_failed = False
        for err in rs.get("judge_errors") or []:
            if isinstance(err, dict):
                judge = str(err.get("judge")) + (f"@{err['tag']}" if err.get("tag") else "")
                self.judges[judge].add(err, model, key)
                engine_failed |= judge_error_kind(err) == "engine"
        if isinstance(rs.get("details"), dict):
            self.detail_judges.update(str(k) for k in rs["details"])
        err = rec.get("error")
        if err is not None:
            self.model_errors[model] += not held
            stage = str(err.get("stage")) if isinstance(err, dict) else "?"
            self.error_stages[stage] += 1
            if len(self.error_examples) < 5:
                msg = err.get("message") if isinstance(err, dict) else err
                self.error_examples.append({"record": key, "model": model, "stage": stage,
                                            "message": trunc(str(msg), 600)})
            return
        self.judge_failed += engine_failed
        metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
        info: list[dict] = []  # the record's card, built once for every list it is among the lowest of
        for name, value in metrics.items():
            if name not in self.metric_set:
                if self.fixed:
                    continue
                self.metrics.append(name)
                self.metric_set.add(name)
            if is_flag(value):
                self.flags.add(name)
            try:
                v = record_scalar(name, value)
            except (TypeError, ValueError):
                continue
            if v is None or not math.isfinite(v):
                continue
            dist = self.dists[name].get(model)
            if dist is None:
                dist = self.dists[name][model] = _Dist(seed=len(self.dists) * 7919 + len(self.dists[name]))
            dist.add(v)
            if name in self.flags or _descriptive(name):
                continue
            worst = self.worst.get(name)
            if worst is None:
                worst = self.worst[name] = Lowest(name, self.worst_n)
            if worst.wants(v):
                info = info or [record_info(rec, self.seq, model, key, self._values(metrics))]
                worst.push(v, self.seq, info[0])

    def settle(self) -> dict[str, int]:
        """After the pass: count each unreadable line under the model it belongs to (summary's rule,
        ragscale.report.summary.Unreadable); returns the lines of no model (input errors), whose
        examples show no model."""
        orphans = self.unreadable.orphans()
        if self.settled:
            return orphans
        self.settled = True
        for model, n in self.unreadable.owned().items():
            self.models[model] += n
            self.model_errors[model] += n
        for e in self.error_examples:
            if e["model"] in orphans:
                e["model"] = "— (no model: not a JSON object)"
        return orphans

    @staticmethod
    def _values(metrics: dict) -> dict[str, Any]:
        """One number (or flag) per metric of a record, as its card lists them."""
        values: dict[str, Any] = {}
        for name, value in metrics.items():
            if is_flag(value):
                values[name] = value if isinstance(value, bool) else next(v for v in value if v is not None)
                continue
            try:
                values[name] = record_scalar(name, value)
            except (TypeError, ValueError):
                values[name] = None
        return values


# ---------------------------------------------------------------- entry point

class HtmlSink:
    """report.html from one pass over the records (shared with the other report sinks) plus the
    run's summary and run.json, rendered when the pass is over."""

    def __init__(self, run_dir: str, metrics: Sequence[str] | None, worst_n: int = 5):
        from ragscale.errors import UserError

        if worst_n < 0:
            raise UserError(f"worst_n must be >= 0, got {worst_n}")
        self.run_dir, self.worst_n = run_dir, worst_n
        self.scan = _Scan(list(metrics) if metrics else None, worst_n)

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


def _render(run_dir: str, scan: _Scan, summary: dict | None, run: dict | None, worst_n: int,
            out_path: str | None) -> str:
    from ragscale import __version__ as version
    from ragscale.errors import UserError
    from ragscale.report.html_context import page_context

    context = page_context(run_dir, scan, summary, run, worst_n)
    doc = _environment().get_template("report.html.j2").render(
        context, reservoir=RESERVOIR, version=version, generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
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
