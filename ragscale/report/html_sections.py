"""The sections of the HTML report (package-private; see :mod:`ragscale.report.html`).

Each builder turns the run's JSON files and the :class:`~ragscale.report.html._Scan` of
records.jsonl into one escaped HTML fragment; :func:`~ragscale.report.html.write_report`
joins them in page order.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from ragscale.report.html import _Dist, _Scan, esc, fmt, trunc
from ragscale.report.html_svg import _svg_dist, _svg_rate
from ragscale.report.plots import is_rate_metric, mean_ci


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
    rates = [m for m in metrics if is_rate_metric(m)]
    cols = [m for m in metrics if not is_rate_metric(m)]
    head = ["model", "records", "errors"] + cols + [f"% {m}" for m in rates] \
        + (["answerability accuracy"] if has_acc else [])

    def row(model: str, d: dict | None, dists: dict[str, _Dist | None], count: int, errors: int) -> str:
        cells = [f'<td class="name">{esc(model)}</td>', f'<td class="num">{count}</td>',
                 f'<td class="num">{errors}</td>']
        for m in cols:
            mean = (d.get("metrics") or {}).get(m) if d else (dists[m].mean if dists.get(m) else None)
            n = (d.get("n") or {}).get(m) if d else (dists[m].n if dists.get(m) else 0)
            cells.append(f'<td class="num" title="n={esc(n)}">{esc(fmt(mean))}</td>')
        for m in rates:
            a = (d.get("metrics") or {}).get(m) if d else (dists[m].mean if dists.get(m) else None)
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
    out.append(_class_table(models_s, model_names, metrics, has_acc))
    return "".join(out)


def _class_table(models_s: dict | None, model_names: list[str], metrics: list[str], has_acc: bool) -> str:
    """The summary's table per answerability class ("" when summary.json has none)."""
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
    if not cls_rows:
        return ""
    head2 = ["model", "answerability", "records"] + (["answerability accuracy"] if has_acc else []) + metrics
    return ('<h3>By answerability class</h3><div class="wide"><table><tr>'
            + "".join(f"<th>{esc(h)}</th>" for h in head2) + "</tr>" + "".join(cls_rows) + "</table></div>")


def _dist_section(scan: _Scan, metrics: list[str], colors: dict[str, str], reservoir: int) -> str:
    out = ['<h2 id="distributions">Distributions per metric</h2>',
           '<p class="sub small">Bars: histogram of per-record values (20 bins). Box: quartiles with the median '
           "(orange), whiskers min to max, dot: mean, dark line under the box: 95% CI of the mean (Student-t). "
           f"Quartiles come from a uniform sample of at most {reservoir} values per model (≈ when sampled).</p>"]
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
