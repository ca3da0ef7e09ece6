"""A self-contained HTML report of one run (``python -m ragscale.report RUN_DIR``).

One file, inline CSS and inline SVG charts, no scripts and nothing fetched: it opens from
disk. Sections: run provenance (run.json), per-model summary (summary.json, else computed
here), per-metric distributions, judge work (run.json ``judge_work`` and the records'
``judge_errors``), record errors, and the lowest-scoring records per metric with their
question, answer, metric values and judge details. Every text taken from the run is
HTML-escaped.

records.jsonl is read in one streaming pass with bounded memory: per metric and model a
running mean/variance, min/max, exact 20-bin histogram counts over [0, 1] and a uniform
reservoir sample (fixed seed) for quantiles; per metric a heap of the N lowest records.
"""

from __future__ import annotations

import heapq
import html
import json
import math
import os
import random
import time
from collections import Counter, defaultdict
from typing import Any, Iterable, Sequence

from ragscale.report.plots import check_run_dir, is_flag, is_rate_metric, mean_ci, read_json, wilson_interval

RESERVOIR = 2000
BINS = 20
WORST_SKIP = {"Length"}  # descriptive, not a score: no "worst" list
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:24px;margin:8px 0 4px}h2{font-size:19px;margin:30px 0 10px;border-bottom:2px solid #d8dde3;padding-bottom:4px}
h3{font-size:16px;margin:20px 0 6px}h4{font-size:14px;margin:10px 0 4px}
.sub{color:#5b6670}
table{border-collapse:collapse;margin:6px 0 12px;background:#fff}
th,td{border:1px solid #d8dde3;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr:nth-child(even) td{background:#fafbfc}
.kv th{width:170px}
.card{background:#fff;border:1px solid #d8dde3;border-radius:6px;padding:10px 14px;margin:10px 0}
.card .head{font-weight:600;margin-bottom:6px}
.score{display:inline-block;background:#e15759;color:#fff;border-radius:4px;padding:0 6px;margin-right:6px}
.text{white-space:pre-wrap;word-break:break-word;background:#f8f9fb;border-left:3px solid #c9d1d9;padding:4px 8px;margin:2px 0 8px}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f4f6;padding:6px 8px;margin:2px 0;font-size:12px;max-height:320px;overflow:auto}
.null{color:#8a949e;font-style:italic}.warn{color:#b3261e;font-weight:600}.ok{color:#2e7d32;font-weight:600}
nav a{margin-right:12px}
details>summary{cursor:pointer;color:#35577a}
svg{background:#fff;border:1px solid #d8dde3;border-radius:4px}
.small{font-size:12px}
.wide{overflow-x:auto;max-width:100%}
th.hl,td.hl{background:#fde8e8!important;font-weight:700}
td.name{white-space:nowrap}
"""


def esc(value: Any) -> str:
    """HTML-escape any value's text (quotes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def trunc(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a note of how much was left out."""
    return text if len(text) <= limit else text[:limit] + f"… [+{len(text) - limit} chars]"


def fmt(v: Any) -> str:
    """A metric value as the tables show it (4 decimals, 1 for values >= 100)."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.4f}"
    return str(v)


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


class _Worst:
    """The N lowest-valued records of one metric (ties: the earlier record is kept)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.heap: list[tuple[float, int, dict]] = []  # (-value, -seq, info): top = largest value

    def wants(self, v: float) -> bool:
        return self.n > 0 and (len(self.heap) < self.n or v < -self.heap[0][0])

    def push(self, v: float, seq: int, info: dict) -> None:
        item = (-v, -seq, info)
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, item)
        else:
            heapq.heapreplace(self.heap, item)

    def items(self) -> list[tuple[float, dict]]:
        return [(-nv, info) for nv, _, info in sorted(self.heap, key=lambda t: (-t[0], -t[1]))]


class _JudgeIssues:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.examples: list[dict] = []

    def add(self, err: dict, model: str, key: str) -> None:
        if err.get("undefined"):
            kind = "undefined"
        elif str(err.get("reason", "")).startswith("engine error"):
            kind = "engine errors"
        else:
            kind = "parse failures"
        self.counts[kind] += 1
        reason = trunc(str(err.get("reason", "")), 200)
        if reason in self.reasons or len(self.reasons) < 200:
            self.reasons[reason] += 1
        if len(self.examples) < 3 and err.get("raw") is not None:
            self.examples.append({"kind": kind, "model": model, "record": key, "reason": reason,
                                  "raw": trunc(str(err.get("raw")), 1500)})


def _trim(obj: Any, depth: int = 0) -> Any:
    """A bounded copy of a JSON value (strings <= 1500 chars, lists <= 40 items, depth <= 6)."""
    if isinstance(obj, str):
        return trunc(obj, 1500)
    if depth >= 6:
        return trunc(json.dumps(obj, ensure_ascii=False, default=str), 600)
    if isinstance(obj, dict):
        items = list(obj.items())
        out = {str(k): _trim(v, depth + 1) for k, v in items[:60]}
        if len(items) > 60:
            out["…"] = f"{len(items) - 60} more keys"
        return out
    if isinstance(obj, list):
        out_l = [_trim(v, depth + 1) for v in obj[:40]]
        if len(obj) > 40:
            out_l.append(f"… {len(obj) - 40} more items")
        return out_l
    return obj


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
        self.worst: dict[str, _Worst] = {}
        self.judges: dict[str, _JudgeIssues] = defaultdict(_JudgeIssues)
        self.detail_judges: set[str] = set()
        self.error_stages: Counter[str] = Counter()
        self.error_examples: list[dict] = []
        self.warnings = 0
        self.seq = 0

    def run(self, path: str) -> None:
        from ragscale.io.output import iter_records

        try:
            for rec in iter_records(path):
                if isinstance(rec, dict):
                    self.add(rec)
        except (OSError, ValueError) as exc:
            from ragscale.errors import UserError

            raise UserError(f"cannot read {path}: {exc}") from None

    def add(self, rec: dict) -> None:
        from ragscale.report.summary import record_scalar

        self.seq += 1
        model = str(rec.get("model_id"))
        self.models[model] += 1
        rs = rec.get("ragscale") if isinstance(rec.get("ragscale"), dict) else {}
        key = str(rs.get("record_key") or f"line {self.seq}")
        self.warnings += len(rs.get("warnings") or [])
        for err in rs.get("judge_errors") or []:
            if isinstance(err, dict):
                judge = str(err.get("judge")) + (f"@{err['tag']}" if err.get("tag") else "")
                self.judges[judge].add(err, model, key)
        if isinstance(rs.get("details"), dict):
            self.detail_judges.update(str(k) for k in rs["details"])
        err = rec.get("error")
        if err is not None:
            self.model_errors[model] += 1
            stage = str(err.get("stage")) if isinstance(err, dict) else "?"
            self.error_stages[stage] += 1
            if len(self.error_examples) < 5:
                msg = err.get("message") if isinstance(err, dict) else err
                self.error_examples.append({"record": key, "model": model, "stage": stage,
                                            "message": trunc(str(msg), 600)})
            return
        metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
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
            if name in self.flags or name in WORST_SKIP:
                continue
            worst = self.worst.get(name)
            if worst is None:
                worst = self.worst[name] = _Worst(self.worst_n)
            if worst.wants(v):
                worst.push(v, self.seq, self._info(rec, model, key, metrics))

    @staticmethod
    def _info(rec: dict, model: str, key: str, metrics: dict) -> dict:
        from ragscale.records import answer_of, query_of
        from ragscale.report.summary import record_scalar

        values: dict[str, Any] = {}
        for name, value in metrics.items():
            if is_flag(value):
                values[name] = value if isinstance(value, bool) else next(v for v in value if v is not None)
                continue
            try:
                values[name] = record_scalar(name, value)
            except (TypeError, ValueError):
                values[name] = None
        rs = rec.get("ragscale") if isinstance(rec.get("ragscale"), dict) else {}
        return {
            "record": key,
            "model": model,
            "query": trunc(query_of(rec), 3000),
            "answer": trunc(answer_of(rec) or "", 5000),
            "metrics": values,
            "details": _trim(rs.get("details") or {}),
            "judge_errors": _trim([e for e in rs.get("judge_errors") or [] if isinstance(e, dict)][:20]),
            "warnings": _trim(list(rs.get("warnings") or [])[:10]),
        }


# ---------------------------------------------------------------- rendering helpers

def _render(obj: Any, depth: int = 0, limit: int = 1500) -> str:
    """Any JSON value as escaped HTML: dicts as key/value tables, lists of dicts as tables."""
    if obj is None:
        return '<span class="null">null</span>'
    if isinstance(obj, (bool, int, float)):
        return esc(fmt(obj))
    if isinstance(obj, str):
        return f'<span class="text-inline">{esc(trunc(obj, limit))}</span>'
    if depth >= 4:
        return f"<pre>{esc(trunc(json.dumps(obj, ensure_ascii=False, default=str), limit))}</pre>"
    if isinstance(obj, dict):
        if not obj:
            return '<span class="null">{}</span>'
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{_render(v, depth + 1, limit)}</td></tr>" for k, v in obj.items())
        return f'<table class="kv small">{rows}</table>'
    if isinstance(obj, list):
        if not obj:
            return '<span class="null">[]</span>'
        if all(isinstance(x, dict) for x in obj):
            cols: list[str] = []
            for x in obj:
                cols.extend(k for k in x if k not in cols)
            cols = cols[:10]
            head = "".join(f"<th>{esc(c)}</th>" for c in cols)
            body = "".join("<tr>" + "".join(f"<td>{_render(x.get(c), depth + 1, limit)}</td>" for c in cols) + "</tr>"
                           for x in obj)
            return f'<table class="small"><tr>{head}</tr>{body}</table>'
        if all(not isinstance(x, (dict, list)) for x in obj):
            return esc(", ".join(fmt(x) if not isinstance(x, str) else trunc(x, 300) for x in obj))
        return "<ol>" + "".join(f"<li>{_render(x, depth + 1, limit)}</li>" for x in obj) + "</ol>"
    return esc(str(obj))


def _kv_table(rows: Iterable[tuple[str, str]]) -> str:
    """Rows of (escaped label, html value)."""
    return '<table class="kv">' + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dict items as ("a.b", value) pairs."""
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.extend(_flatten(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _svg_dist(metric: str, rows: list[tuple[str, str, _Dist]]) -> str:
    """Per-model histogram and box (quartiles from the sample, whiskers min..max, mean with 95% CI)."""
    import numpy as np

    lo = min(d.lo for _, _, d in rows)
    hi = max(d.hi for _, _, d in rows)
    unit = all(d.unit for _, _, d in rows)
    if unit:
        lo, hi, step = 0.0, 1.0, 0.2
    else:
        lo, hi, step = _nice_range(lo, hi)
    W, L, R, RH, TOP = 860, 190, 830, 74, 8
    H = TOP + RH * len(rows) + 34

    def x(v: float) -> float:
        return L + (R - L) * (v - lo) / (hi - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
             f'role="img" aria-label="{esc(metric)} distribution per model" font-family="sans-serif" font-size="12">']
    for i, (model, color, d) in enumerate(rows):
        y0 = TOP + i * RH
        parts.append(f'<text x="{L - 8}" y="{y0 + 34}" text-anchor="end">{esc(trunc(model, 26))}</text>')
        parts.append(f'<text x="{L - 8}" y="{y0 + 50}" text-anchor="end" fill="#5b6670">n={d.n}</text>')
        if unit:
            counts = d.hist
        else:
            counts = np.histogram(d.sample, bins=BINS, range=(lo, hi))[0].tolist()
        top = max(counts) or 1
        bw = (R - L) / BINS
        for b, c in enumerate(counts):
            if c:
                h = 40 * c / top
                parts.append(f'<rect x="{L + b * bw + 0.5:.1f}" y="{y0 + 44 - h:.1f}" width="{bw - 1:.1f}" '
                             f'height="{h:.1f}" fill="{color}" fill-opacity="0.55"><title>{c}</title></rect>')
        q1, med, q3 = d.quantile(0.25), d.quantile(0.5), d.quantile(0.75)
        yb = y0 + 58
        parts.append(f'<line x1="{x(d.lo):.1f}" x2="{x(d.hi):.1f}" y1="{yb}" y2="{yb}" stroke="#333"/>')
        for v in (d.lo, d.hi):
            parts.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{yb - 5}" y2="{yb + 5}" stroke="#333"/>')
        if q1 is not None and q3 is not None and med is not None:
            parts.append(f'<rect x="{x(q1):.1f}" y="{yb - 7}" width="{max(1.0, x(q3) - x(q1)):.1f}" height="14" '
                         f'fill="{color}" fill-opacity="0.35" stroke="#333"/>')
            parts.append(f'<line x1="{x(med):.1f}" x2="{x(med):.1f}" y1="{yb - 7}" y2="{yb + 7}" '
                         f'stroke="#e8710a" stroke-width="2.5"/>')
        ci = mean_ci(d.n, d.mean, d.sd)
        if ci is not None:
            a, b = max(lo, ci[0]), min(hi, ci[1])
            parts.append(f'<line x1="{x(a):.1f}" x2="{x(b):.1f}" y1="{yb + 11}" y2="{yb + 11}" stroke="#1a237e" '
                         f'stroke-width="2"/>')
        parts.append(f'<circle cx="{x(d.mean):.1f}" cy="{yb}" r="3.5" fill="#1a237e"><title>mean {fmt(d.mean)}</title>'
                     f'</circle>')
    ya = TOP + RH * len(rows) + 4
    parts.append(f'<line x1="{L}" x2="{R}" y1="{ya}" y2="{ya}" stroke="#333"/>')
    for k in range(int(round((hi - lo) / step)) + 1):
        v = lo + step * k
        parts.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{ya}" y2="{ya + 4}" stroke="#333"/>')
        parts.append(f'<text x="{x(v):.1f}" y="{ya + 17}" text-anchor="middle">{esc(_tick(v))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _nice_range(lo: float, hi: float) -> tuple[float, float, float]:
    """An axis range covering lo..hi on a 1/2/2.5/5 x 10^k grid of at most ~6 ticks, and its step."""
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    raw = (hi - lo) / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step, step


def _svg_rate(metric: str, rows: list[tuple[str, str, _Dist]]) -> str:
    """Per-model "% of records = 1" bars with 95% Wilson intervals (for ``answered``)."""
    W, L, R, RH, TOP = 960, 190, 780, 34, 8
    H = TOP + RH * len(rows) + 34

    def x(pct: float) -> float:
        return L + (R - L) * pct / 100

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
             f'role="img" aria-label="{esc(metric)} rate per model" font-family="sans-serif" font-size="12">']
    for i, (model, color, d) in enumerate(rows):
        y0 = TOP + i * RH
        k = sum(d.hist[BINS // 2:]) if d.unit else round(d.mean * d.n)
        pct = 100 * k / d.n
        ci = wilson_interval(k, d.n)
        parts.append(f'<text x="{L - 8}" y="{y0 + 20}" text-anchor="end">{esc(trunc(model, 26))}</text>')
        parts.append(f'<rect x="{L}" y="{y0 + 6}" width="{x(pct) - L:.1f}" height="20" fill="{color}" '
                     f'fill-opacity="0.6" stroke="#333"/>')
        if ci is not None:
            parts.append(f'<line x1="{x(100 * ci[0]):.1f}" x2="{x(100 * ci[1]):.1f}" y1="{y0 + 16}" y2="{y0 + 16}" '
                         f'stroke="#1a237e" stroke-width="2"/>')
        parts.append(f'<text x="{R + 10}" y="{y0 + 20}">{pct:.1f}% ({k}/{d.n})</text>')
    ya = TOP + RH * len(rows) + 4
    parts.append(f'<line x1="{L}" x2="{R}" y1="{ya}" y2="{ya}" stroke="#333"/>')
    for v in range(0, 101, 20):
        parts.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{ya}" y2="{ya + 4}" stroke="#333"/>')
        parts.append(f'<text x="{x(v):.1f}" y="{ya + 17}" text-anchor="middle">{v}%</text>')
    parts.append("</svg>")
    return "".join(parts)


def _tick(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


# ---------------------------------------------------------------- sections

def _header(run_dir: str, run: dict | None, scan: _Scan) -> str:
    name = os.path.basename(os.path.normpath(os.path.abspath(run_dir)))
    out = [f"<h1>ragscale report: {esc(name)}</h1>",
           f'<p class="sub">{esc(os.path.abspath(run_dir))}</p>']
    if run is None:
        out.append('<p class="warn">run.json is missing: no provenance (the run may still be going, or failed early).</p>')
        return "".join(out)
    cfg = run.get("config") if isinstance(run.get("config"), dict) else {}
    status = str(run.get("status"))
    status_html = f'<span class="{"ok" if status == "ok" else "warn"}">{esc(status)}</span>'
    if run.get("failure"):
        status_html += " — " + _render(run.get("failure"))
    rows: list[tuple[str, str]] = [
        ("status", status_html),
        ("scenario", esc(cfg.get("scenario_name") or cfg.get("scenario") or "—")),
        ("steps", esc(", ".join(map(str, cfg.get("steps") or [])) or "—")),
        ("started / finished", esc(f"{run.get('started', '—')}  →  {run.get('finished', '—')}")),
        ("ragscale version", esc(run.get("ragscale_version", "—"))),
    ]
    inputs = run.get("inputs")
    if isinstance(inputs, list) and inputs:
        rows.append(("inputs", _render(inputs)))
    elif cfg.get("input") or cfg.get("sample"):
        rows.append(("inputs", esc(cfg.get("input") or cfg.get("sample"))))
    rows.append(("models evaluated", esc(", ".join(f"{m} ({n})" for m, n in sorted(scan.models.items())) or "none")))
    models = run.get("models") if isinstance(run.get("models"), dict) else {}
    for role in ("encoder", "judge", "judge_panel"):
        v = models.get(role)
        if v:
            rows.append((esc(role), _render(v)))
    if not models.get("judge") and isinstance(cfg.get("judge"), dict) and (run.get("judge_work") or scan.judges):
        j = cfg["judge"]
        rows.append(("judge", esc(" / ".join(str(j.get(k)) for k in ("name", "engine", "model") if j.get(k)))))
    judges = set(scan.detail_judges) | set(scan.judges)
    jw = run.get("judge_work")
    if isinstance(jw, dict) and isinstance(jw.get("by_judge"), dict):
        judges |= set(map(str, jw["by_judge"]))
    if judges:
        rows.append(("judges run", esc(", ".join(sorted(judges)))))
    if isinstance(run.get("records"), dict):
        rows.append(("records", esc(", ".join(f"{k}: {v}" for k, v in run["records"].items()))))
    timings = run.get("timings_s")
    if isinstance(timings, dict):
        rows.append(("timings (s)", esc(", ".join(f"{k}: {fmt(v)}" for k, v in _flatten(timings)))))
    if scan.warnings:
        rows.append(("record warnings", esc(str(scan.warnings))))
    out.append(_kv_table(rows))
    if run.get("versions"):
        out.append("<details><summary>package versions</summary>" + _render(run.get("versions")) + "</details>")
    out.append("<details><summary>full run.json</summary><pre>"
               + esc(trunc(json.dumps(run, indent=1, ensure_ascii=False, default=str), 40000)) + "</pre></details>")
    return "".join(out)


def _summary_section(summary: dict | None, scan: _Scan, metrics: list[str]) -> str:
    out = ['<h2 id="summary">Summary per model</h2>']
    if summary is None:
        out.append('<p class="sub">summary.json is missing: means computed from records.jsonl.</p>')
    models_s = summary.get("models") if summary and isinstance(summary.get("models"), dict) else None
    has_acc = bool(models_s) and any(isinstance(d, dict) and d.get("answerability_accuracy") is not None
                                     for d in models_s.values())
    has_ans = "answered" in metrics
    cols = [m for m in metrics if not is_rate_metric(m)]
    head = ["model", "records", "errors"] + cols + (["% answered"] if has_ans else []) \
        + (["answerability accuracy"] if has_acc else [])

    def row(model: str, d: dict | None, dists: dict[str, _Dist | None], count: int, errors: int) -> str:
        cells = [f'<td class="name">{esc(model)}</td>', f'<td class="num">{count}</td>',
                 f'<td class="num">{errors}</td>']
        for m in cols:
            mean = (d.get("metrics") or {}).get(m) if d else (dists[m].mean if dists.get(m) else None)
            n = (d.get("n") or {}).get(m) if d else (dists[m].n if dists.get(m) else 0)
            cells.append(f'<td class="num" title="n={esc(n)}">{esc(fmt(mean))}</td>')
        if has_ans:
            a = (d.get("metrics") or {}).get("answered") if d else (dists["answered"].mean if dists.get("answered") else None)
            cells.append(f'<td class="num">{"—" if a is None else esc(f"{100 * a:.1f}%")}</td>')
        if has_acc:
            acc = d.get("answerability_accuracy") if d else None
            cells.append(f'<td class="num">{esc(fmt(acc))}'
                         + (f' <span class="sub">(n={esc(d.get("answerability_n"))})</span>' if d and acc is not None else "")
                         + "</td>")
        return "<tr>" + "".join(cells) + "</tr>"

    rows = []
    model_names = sorted(set(scan.models) | set(models_s or {}))
    for model in model_names:
        d = models_s.get(model) if models_s else None
        dists = {m: scan.dists.get(m, {}).get(model) for m in metrics}
        count = d.get("count", scan.models[model]) if d else scan.models[model]
        errors = d.get("errors", scan.model_errors[model]) if d else scan.model_errors[model]
        rows.append(row(model, d, dists, count, errors))
    overall = summary.get("overall") if summary else None
    if len(model_names) > 1 and isinstance(overall, dict):
        rows.append(row("ALL models", overall, {}, overall.get("count", 0), overall.get("errors", 0))
                    .replace("<tr>", '<tr style="font-weight:600">', 1))
    out.append('<div class="wide"><table><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>"
               + "".join(rows) + "</table></div>")
    if summary and summary.get("reduction"):
        out.append(f'<p class="sub small">Means over records without errors; {esc(summary["reduction"])}. '
                   "Hover a cell for its n.</p>")
    # per answerability class
    cls_rows = []
    for model in model_names:
        d = models_s.get(model) if models_s else None
        for cls, c in sorted(((d or {}).get("by_answerability") or {}).items()):
            if cls == "UNKNOWN" or not isinstance(c, dict):
                continue
            cells = [esc(model), esc(cls), str(c.get("count", ""))]
            cells += [esc(fmt(c.get("answerability_accuracy")))] if has_acc else []
            cells += [esc(fmt((c.get("metrics") or {}).get(m))) for m in metrics]
            cls_rows.append("<tr>" + "".join(f'<td class="{"num" if i > 1 else "name"}">{v}</td>'
                                             for i, v in enumerate(cells)) + "</tr>")
    if cls_rows:
        head2 = ["model", "answerability", "records"] + (["answerability accuracy"] if has_acc else []) + metrics
        out.append('<h3>By answerability class</h3><div class="wide"><table><tr>'
                   + "".join(f"<th>{esc(h)}</th>" for h in head2) + "</tr>" + "".join(cls_rows) + "</table></div>")
    return "".join(out)


def _dist_section(scan: _Scan, metrics: list[str], colors: dict[str, str]) -> str:
    out = ['<h2 id="distributions">Distributions per metric</h2>',
           '<p class="sub small">Bars: histogram of per-record values (20 bins). Box: quartiles with the median '
           "(orange), whiskers min to max, dot: mean, dark line under the box: 95% CI of the mean (Student-t). "
           f"Quartiles come from a uniform sample of at most {RESERVOIR} values per model (≈ when sampled).</p>"]
    for i, m in enumerate(metrics):
        per = scan.dists.get(m) or {}
        rows = [(model, colors.get(model, "#4e79a7"), per[model]) for model in sorted(per) if per[model].n]
        out.append(f'<h3 id="dist-{i}">{esc(m)}</h3>')
        if not rows:
            out.append('<p class="null">no values</p>')
            continue
        if is_rate_metric(m):
            out.append('<p class="sub small">% of records with the value 1; dark line: 95% Wilson interval.</p>')
            out.append(_svg_rate(m, rows))
            continue
        out.append(_svg_dist(m, rows))
        trs = []
        for model, _, d in rows:
            ci = mean_ci(d.n, d.mean, d.sd)
            approx = "" if d.exact else "≈"
            trs.append("<tr>" + "".join([
                f"<td>{esc(model)}</td>", f'<td class="num">{d.n}</td>', f'<td class="num">{esc(fmt(d.mean))}</td>',
                f'<td class="num">{"—" if ci is None else esc(f"[{fmt(ci[0])}, {fmt(ci[1])}]")}</td>',
                f'<td class="num">{esc(fmt(d.sd) if d.n > 1 else "—")}</td>',
                f'<td class="num">{approx}{esc(fmt(d.quantile(0.5)))}</td>',
                f'<td class="num">{esc(fmt(d.lo))}</td>', f'<td class="num">{esc(fmt(d.hi))}</td>']) + "</tr>")
        out.append('<table class="small"><tr><th>model</th><th>n</th><th>mean</th><th>95% CI (t)</th><th>sd</th>'
                   "<th>median</th><th>min</th><th>max</th></tr>" + "".join(trs) + "</table>")
    return "".join(out)


def _judge_section(run: dict | None, scan: _Scan) -> str:
    out = ['<h2 id="judges">Judge work</h2>']
    jw = run.get("judge_work") if run else None
    if isinstance(jw, dict) and jw:
        totals = [(esc(k), esc(fmt(v))) for k, v in jw.items() if k != "by_judge" and not isinstance(v, (dict, list))]
        if totals:
            out.append("<h3>Engine counters (run.json)</h3>" + _kv_table(totals))
        by = jw.get("by_judge")
        if isinstance(by, dict) and by:
            cols: list[str] = []
            for c in by.values():
                if isinstance(c, dict):
                    cols.extend(k for k in c if k not in cols)
            rows = "".join("<tr><td>" + esc(j) + "</td>" + "".join(
                f'<td class="num">{esc(fmt((c or {}).get(k, 0)))}</td>' for k in cols) + "</tr>"
                for j, c in sorted(by.items()))
            out.append("<h3>Per judge</h3><table><tr><th>judge</th>" + "".join(f"<th>{esc(c)}</th>" for c in cols)
                       + "</tr>" + rows + "</table>")
    elif run is not None:
        out.append('<p class="sub">No judge ran (run.json judge_work is empty).</p>')
    if scan.judges:
        kinds = ["parse failures", "engine errors", "undefined"]
        rows = []
        for judge, iss in sorted(scan.judges.items()):
            reasons = "; ".join(f"{r} ({n})" for r, n in iss.reasons.most_common(3))
            ex = "".join(f"<details><summary>raw output ({esc(e['kind'])}, {esc(e['model'])}, {esc(e['record'])})"
                         f"</summary><pre>{esc(e['raw'])}</pre></details>" for e in iss.examples)
            rows.append(f"<tr><td>{esc(judge)}</td>" + "".join(f'<td class="num">{iss.counts[k]}</td>' for k in kinds)
                        + f"<td>{esc(reasons)}{ex}</td></tr>")
        out.append("<h3>Judge errors in records</h3><table><tr><th>judge</th>"
                   + "".join(f"<th>{k}</th>" for k in kinds) + "<th>top reasons / examples</th></tr>"
                   + "".join(rows) + "</table>")
    else:
        out.append('<p class="sub">No judge errors in the records.</p>')
    return "".join(out)


def _errors_section(scan: _Scan) -> str:
    total = sum(scan.error_stages.values())
    out = ['<h2 id="errors">Record errors</h2>']
    if not total:
        return out[0] + '<p class="ok">No record errors.</p>'
    out.append(f"<p>{total} record{' has' if total == 1 else 's have'} an error (left out of the metrics): "
               + esc(", ".join(f"{s}: {n}" for s, n in scan.error_stages.most_common())) + "</p>")
    out.append("<table><tr><th>record</th><th>model</th><th>stage</th><th>message</th></tr>" + "".join(
        f"<tr><td>{esc(e['record'])}</td><td>{esc(e['model'])}</td><td>{esc(e['stage'])}</td>"
        f"<td>{esc(e['message'])}</td></tr>" for e in scan.error_examples) + "</table>")
    return "".join(out)


def _worst_section(scan: _Scan, metrics: list[str], n: int) -> str:
    out = ['<h2 id="worst">Lowest-scoring records per metric</h2>',
           f'<p class="sub small">The {n} records with the lowest value of each score (ties: file order), '
           "with the judges' details and errors. Texts are truncated.</p>"]
    for i, m in enumerate(metrics):
        w = scan.worst.get(m)
        if w is None or not w.heap:
            continue
        out.append(f'<h3 id="worst-{i}">{esc(m)}</h3>')
        for rank, (v, info) in enumerate(w.items(), 1):
            others = "".join(f'<td class="num{" hl" if k == m else ""}" title="{esc(k)}">{esc(fmt(val))}</td>'
                             for k, val in info["metrics"].items())
            heads = "".join(f'<th class="{"hl" if k == m else ""}">{esc(k)}</th>' for k in info["metrics"])
            parts = [
                '<div class="card">',
                f'<div class="head"><span class="score">{esc(fmt(v))}</span>#{rank} · model {esc(info["model"])} · '
                f'<span class="sub">{esc(info["record"])}</span></div>',
                "<h4>Question</h4>", f'<div class="text">{esc(info["query"]) or "<span class=null>none</span>"}</div>',
                "<h4>Answer</h4>", f'<div class="text">{esc(info["answer"]) or "<span class=null>none</span>"}</div>',
                "<h4>Metrics</h4>", f'<table class="small"><tr>{heads}</tr><tr>{others}</tr></table>',
            ]
            if info["details"]:
                parts.append("<h4>Judge details</h4>")
                rel = _relevant_judges(m, list(info["details"]))
                for judge, det in info["details"].items():
                    if judge in rel:
                        parts.append(f"<div><b>{esc(judge)}</b>{_render(det)}</div>")
                others = [j for j in info["details"] if j not in rel]
                if others:
                    parts.append(f"<details><summary>other judges: {esc(', '.join(others))}</summary>"
                                 + "".join(f"<div><b>{esc(j)}</b>{_render(info['details'][j])}</div>" for j in others)
                                 + "</details>")
            if info["judge_errors"]:
                parts.append("<h4>Judge errors</h4><table class=\"small\"><tr><th>judge</th><th>reason</th>"
                             "<th>raw output</th></tr>")
                for e in info["judge_errors"]:
                    judge = str(e.get("judge")) + (f"@{e['tag']}" if e.get("tag") else "")
                    reason = str(e.get("reason", "")) + (" (undefined)" if e.get("undefined") else "")
                    raw = e.get("raw")
                    parts.append(f"<tr><td>{esc(judge)}</td><td>{esc(trunc(reason, 400))}</td><td>"
                                 + ("" if raw is None else f"<pre>{esc(trunc(str(raw), 800))}</pre>") + "</td></tr>")
                parts.append("</table>")
            if info["warnings"]:
                parts.append("<h4>Warnings</h4>" + _render(info["warnings"]))
            parts.append("</div>")
            out.append("".join(parts))
    return "".join(out)


def _relevant_judges(metric: str, judges: list[str]) -> set[str]:
    """The judges whose details explain ``metric`` (judge name inside the metric name, or the
    reverse, ignoring case and ``_``/``@`` tags); all of them when none matches."""
    def norm(t: str) -> str:
        return t.split("@")[0].lower().replace("_", "").replace("-", "")

    m = norm(metric)
    rel = {j for j in judges if norm(j) and (norm(j) in m or m in norm(j))}
    return rel or set(judges)


# ---------------------------------------------------------------- entry point

def write_report(run_dir: str, out_path: str | None = None, *, worst_n: int = 5, run_info: dict | None = None) -> str:
    """Write the run's report (default ``<run_dir>/report.html``) and return its path."""
    from ragscale.errors import UserError

    path = check_run_dir(run_dir)
    if worst_n < 0:
        raise UserError(f"worst_n must be >= 0, got {worst_n}")
    run = run_info if run_info is not None else read_json(os.path.join(run_dir, "run.json"))
    summary = read_json(os.path.join(run_dir, "summary.json"))
    summ_metrics = [m for m in (summary or {}).get("metrics") or [] if isinstance(m, str)] or None
    scan = _Scan(summ_metrics, worst_n)
    scan.run(path)
    metrics = [m for m in scan.metrics if m in scan.dists and m not in scan.flags]
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(scan.models))}
    worst_metrics = [m for m in metrics if m in scan.worst]
    name = os.path.basename(os.path.normpath(os.path.abspath(run_dir)))
    nav = ('<nav><a href="#summary">summary</a><a href="#distributions">distributions</a>'
           '<a href="#judges">judge work</a><a href="#errors">errors</a><a href="#worst">lowest records</a></nav>')
    from ragscale import __version__ as version

    body = [
        _header(run_dir, run, scan), nav,
        _summary_section(summary, scan, metrics),
        _dist_section(scan, metrics, colors),
        _judge_section(run, scan),
        _errors_section(scan),
        _worst_section(scan, worst_metrics, worst_n),
        f'<p class="sub small">Generated by ragscale {esc(version)} at {esc(time.strftime("%Y-%m-%d %H:%M:%S %Z"))}'
        f" from {sum(scan.models.values())} records.</p>",
    ]
    doc = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           '<meta name="viewport" content="width=device-width, initial-scale=1">'
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:\">"
           f"<title>ragscale report: {esc(name)}</title><style>{_CSS}</style></head>"
           f"<body><main>{''.join(body)}</main></body></html>\n")
    out = out_path or os.path.join(run_dir, "report.html")
    tmp = out + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(doc)
        os.replace(tmp, out)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc}") from None
    return out
