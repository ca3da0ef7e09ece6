"""What each section of the HTML report shows (package-private; see :mod:`ragscale.report.html`).

Each builder turns the run's JSON files and the :class:`~ragscale.report.html._Scan` of
records.jsonl into plain values (strings, numbers, lists, dicts) for one template of
``templates/``; the templates hold all the markup and escape every value. Numbers are
formatted here, so the templates do no arithmetic on the run's data.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ragscale.report.html import PALETTE, _Dist, _Scan, fmt, trunc
from ragscale.report.html_significance import significance
from ragscale.report.html_svg import dist_chart, rate_chart
from ragscale.report.plots import is_rate_metric, mean_ci


def page_context(run_dir: str, scan: _Scan, summary: dict | None, run: dict | None, worst_n: int) -> dict:
    """The whole context of ``templates/report.html.j2``."""
    metrics = [m for m in scan.metrics if m in scan.dists and m not in scan.flags]
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(scan.models))}
    return {
        "name": os.path.basename(os.path.normpath(os.path.abspath(run_dir))),
        "path": os.path.abspath(run_dir),
        "header": _header(run, scan),
        "summary": _summary(summary, scan, metrics),
        "significance": significance(summary),
        "distributions": _distributions(scan, metrics, colors),
        "judges": _judges(run, scan),
        "errors": _errors(scan),
        "worst_n": worst_n,
        "worst": _worst(scan, [m for m in metrics if m in scan.worst]),
        "records": sum(scan.models.values()),
    }


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

def _header(run: dict | None, scan: _Scan) -> dict | None:
    """run.json's provenance as (label, value, value is a JSON value) rows; None without run.json."""
    if run is None:
        return None
    cfg = run.get("config") if isinstance(run.get("config"), dict) else {}
    rows: list[tuple[str, Any, bool]] = [
        ("scenario", cfg.get("scenario_name") or cfg.get("scenario") or "—", False),
        ("steps", ", ".join(map(str, cfg.get("steps") or [])) or "—", False),
        ("started / finished", f"{run.get('started', '—')}  →  {run.get('finished', '—')}", False),
        ("ragscale version", run.get("ragscale_version", "—"), False),
    ]
    inputs = run.get("inputs")
    if isinstance(inputs, list) and inputs:
        rows.append(("inputs", inputs, True))
    elif cfg.get("input") or cfg.get("sample"):
        rows.append(("inputs", cfg.get("input") or cfg.get("sample"), False))
    rows.append(("models evaluated", ", ".join(f"{m} ({n})" for m, n in sorted(scan.models.items())) or "none", False))
    models = run.get("models") if isinstance(run.get("models"), dict) else {}
    rows.extend((role, models[role], True) for role in ("encoder", "judge", "judge_panel") if models.get(role))
    if not models.get("judge") and isinstance(cfg.get("judge"), dict) and (run.get("judge_work") or scan.judges):
        j = cfg["judge"]
        rows.append(("judge", " / ".join(str(j.get(k)) for k in ("name", "engine", "model") if j.get(k)), False))
    judges = set(scan.detail_judges) | set(scan.judges)
    jw = run.get("judge_work")
    if isinstance(jw, dict) and isinstance(jw.get("by_judge"), dict):
        judges |= set(map(str, jw["by_judge"]))
    if judges:
        rows.append(("judges run", ", ".join(sorted(judges)), False))
    if isinstance(run.get("records"), dict):
        rows.append(("records", ", ".join(f"{k}: {v}" for k, v in run["records"].items()), False))
    timings = run.get("timings_s")
    if isinstance(timings, dict):
        rows.append(("timings (s)", ", ".join(f"{k}: {fmt(v)}" for k, v in _flatten(timings)), False))
    if scan.warnings:
        rows.append(("record warnings", str(scan.warnings), False))
    return {"status": str(run.get("status")), "failure": run.get("failure"), "rows": rows,
            "versions": run.get("versions"),
            "run_json": trunc(json.dumps(run, indent=1, ensure_ascii=False, default=str), 40000)}


def _summary(summary: dict | None, scan: _Scan, metrics: list[str]) -> dict:
    """The per-model table of means and rates (summary.json's, else the scan's), and the table per
    answerability class."""
    models_s = summary.get("models") if summary and isinstance(summary.get("models"), dict) else None
    has_acc = bool(models_s) and any(isinstance(d, dict) and d.get("answerability_accuracy") is not None
                                     for d in models_s.values())
    rates = [m for m in metrics if is_rate_metric(m)]
    cols = [m for m in metrics if not is_rate_metric(m)]

    def row(model: str, d: dict | None, dists: dict[str, _Dist | None], count: Any, errors: Any) -> dict:
        cells = []
        for m in cols:
            mean = (d.get("metrics") or {}).get(m) if d else (dists[m].mean if dists.get(m) else None)
            n = (d.get("n") or {}).get(m) if d else (dists[m].n if dists.get(m) else 0)
            cells.append({"text": fmt(mean), "title": f"n={'' if n is None else n}", "note": None})
        for m in rates:
            a = (d.get("metrics") or {}).get(m) if d else (dists[m].mean if dists.get(m) else None)
            cells.append({"text": "—" if a is None else f"{100 * a:.1f}%", "title": None, "note": None})
        if has_acc:
            acc = d.get("answerability_accuracy") if d else None
            note = f"(n={d.get('answerability_n')})" if d and acc is not None else None
            cells.append({"text": fmt(acc), "title": None, "note": note})
        return {"name": model, "count": count, "errors": errors, "cells": cells, "bold": False}

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
        rows.append({**row("ALL models", overall, {}, overall.get("count", 0), overall.get("errors", 0)), "bold": True})
    head = ["model", "records", "errors", *cols, *(f"% {m}" for m in rates)] \
        + (["answerability accuracy"] if has_acc else [])
    classes = _class_rows(models_s, model_names, metrics, has_acc)
    return {"missing": summary is None, "head": head, "rows": rows,
            "reduction": summary.get("reduction") if summary else None,
            "class_head": ["model", "answerability", "records"] + (["answerability accuracy"] if has_acc else [])
            + metrics, "class_rows": classes}


def _class_rows(models_s: dict | None, model_names: list[str], metrics: list[str], has_acc: bool) -> list[list]:
    """The rows of the summary's table per answerability class (none when summary.json has none)."""
    rows = []
    for model in model_names:
        d = models_s.get(model) if models_s else None
        for cls, c in sorted(((d or {}).get("by_answerability") or {}).items()):
            if cls == "UNKNOWN" or not isinstance(c, dict):
                continue
            cells = [model, cls, str(c.get("count", ""))]
            cells += [fmt(c.get("answerability_accuracy"))] if has_acc else []
            cells += [fmt((c.get("metrics") or {}).get(m)) for m in metrics]
            rows.append(cells)
    return rows


def _distributions(scan: _Scan, metrics: list[str], colors: dict[str, str]) -> list[dict]:
    """Per metric: a chart of every model and, for scores, a table of n, mean, CI, sd, median, min, max."""
    out = []
    for i, m in enumerate(metrics):
        per = scan.dists.get(m) or {}
        rows = [(model, colors.get(model, PALETTE[0]), per[model]) for model in sorted(per) if per[model].n]
        entry: dict[str, Any] = {"index": i, "metric": m, "kind": "empty", "chart": None, "table": []}
        if rows and is_rate_metric(m):
            entry.update(kind="rate", chart=rate_chart(m, rows))
        elif rows:
            entry.update(kind="dist", chart=dist_chart(m, rows), table=[_dist_cells(model, d) for model, _, d in rows])
        out.append(entry)
    return out


def _dist_cells(model: str, d: _Dist) -> list[Any]:
    ci = mean_ci(d.n, d.mean, d.sd)
    return [model, d.n, fmt(d.mean), "—" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]",
            fmt(d.sd) if d.n > 1 else "—", ("" if d.exact else "≈") + fmt(d.quantile(0.5)), fmt(d.lo), fmt(d.hi)]


def _judges(run: dict | None, scan: _Scan) -> dict:
    """run.json's judge counters (totals and per judge) and the judge errors found in the records."""
    jw = run.get("judge_work") if run else None
    out: dict[str, Any] = {"work": False, "none_ran": run is not None, "totals": [], "cols": [], "by_judge": [],
                           "kinds": ["parse failures", "engine errors", "undefined"], "issues": []}
    if isinstance(jw, dict) and jw:
        out.update(work=True, none_ran=False)
        out["totals"] = [(k, fmt(v)) for k, v in jw.items() if k != "by_judge" and not isinstance(v, (dict, list))]
        by = jw.get("by_judge")
        if isinstance(by, dict) and by:
            counters = {j: c if isinstance(c, dict) else {} for j, c in by.items()}
            for c in counters.values():  # the columns in the order run.json gives them, the judges sorted
                out["cols"].extend(k for k in c if k not in out["cols"])
            out["by_judge"] = [(j, [fmt(c.get(k, 0)) for k in out["cols"]]) for j, c in sorted(counters.items())]
    for judge, iss in sorted(scan.judges.items()):
        out["issues"].append({"judge": judge, "counts": [iss.counts[k] for k in out["kinds"]],
                              "reasons": "; ".join(f"{r} ({n})" for r, n in iss.reasons.most_common(3)),
                              "examples": iss.examples})
    return out


def _errors(scan: _Scan) -> dict:
    """How many records have an error, by stage, and the first few of them."""
    return {"total": sum(scan.error_stages.values()),
            "stages": ", ".join(f"{s}: {n}" for s, n in scan.error_stages.most_common()),
            "examples": scan.error_examples}


def _worst(scan: _Scan, metrics: list[str]) -> list[dict]:
    """Per scored metric, the cards of its lowest-scoring records."""
    out = []
    for i, m in enumerate(metrics):
        w = scan.worst.get(m)
        if w is not None and w.heap:
            out.append({"index": i, "metric": m,
                        "cards": [_card(m, rank, v, info) for rank, (v, info) in enumerate(w.items(), 1)]})
    return out


def _card(metric: str, rank: int, value: float, info: dict) -> dict:
    """One low-scoring record: its texts, all its metric values, the judges' details and errors."""
    rel = _relevant_judges(metric, list(info["details"]))
    errors = []
    for e in info["judge_errors"]:
        reason = str(e.get("reason", "")) + (" (undefined)" if e.get("undefined") else "")
        errors.append({"judge": str(e.get("judge")) + (f"@{e['tag']}" if e.get("tag") else ""),
                       "reason": trunc(reason, 400), "raw": None if e.get("raw") is None else trunc(str(e["raw"]), 800)})
    return {"rank": rank, "value": fmt(value), "model": info["model"], "record": info["record"],
            "query": info["query"], "answer": info["answer"],
            "metrics": [(k, fmt(v), k == metric) for k, v in info["metrics"].items()],
            "details": [(j, d) for j, d in info["details"].items() if j in rel],
            "other_details": [(j, d) for j, d in info["details"].items() if j not in rel],
            "judge_errors": errors, "warnings": info["warnings"]}


def _relevant_judges(metric: str, judges: list[str]) -> set[str]:
    """The judges whose details explain ``metric`` (judge name inside the metric name, or the
    reverse, ignoring case and ``_``/``@`` tags); all of them when none matches."""
    def norm(t: str) -> str:
        return t.split("@")[0].lower().replace("_", "").replace("-", "")

    m = norm(metric)
    rel = {j for j in judges if norm(j) and (norm(j) in m or m in norm(j))}
    return rel or set(judges)
