"""What each section of the HTML report shows (package-private; see :mod:`ragscale.report.html`).

Each builder turns the run's JSON files and the :class:`~ragscale.report.html_scan.Scan` of
records.jsonl into plain values (strings, numbers, lists, dicts) for one template of
``templates/``; the templates hold all the markup and escape every value. Numbers are
formatted here, so the templates do no arithmetic on the run's data. The leaderboard, the
tables of means and the breakdowns read summary.json through the leaderboard's helpers
(:mod:`ragscale.report.leaderboard`), so report.html ranks, groups and rounds as leaderboard.md does.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from ragscale.exitcodes import FAILED, INCOMPLETE, OK, STATUS, STOPPED, failed, finished, outcome
from ragscale.metrics.registry import label, lookup
from ragscale.report.html_scan import Dist, Scan
from ragscale.report.html_records import lowest_section
from ragscale.report.html_retrieval import retrieval_context
from ragscale.report.html_significance import number, better_than, calibration, calibration_rows, significance
from ragscale.report.jury import jury_context
from ragscale.report.slices import kept_interval, slices_context, unit_text
from ragscale.report.html_svg import PALETTE, dist_chart, rate_chart
from ragscale.report.headline import headline, higher_is_better
from ragscale.report.leaderboard import calibrated_comparisons, fallback_lines
from ragscale.report.ranking import ANS_ACC, breakdown_metrics, cell, cells, mean_n, ranking, standings
from ragscale.report.plots import is_rate_metric, mean_interval
from ragscale.stats.intervals import bounds_of
from ragscale.report.text import fmt, metric_value, trunc
from ragscale.report.wording import own_values

# A table of means fits a 1280 px screen: at most this many metric columns, and about this many
# characters of headers (12 px text) across, the models' column included.
MEAN_COLUMNS, MEAN_CHARS = 8, 170


def page_context(run_dir: str, scan: Scan, summary: dict | None, run: dict | None, worst_n: int) -> dict:
    """The whole context of ``templates/report.html.j2``."""
    orphans = scan.settle()
    metrics = [m for m in scan.metrics if m in scan.dists and m not in scan.flags]
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(scan.models))}
    board = _board(summary, scan, metrics)
    order = standings(board)
    return {
        "name": os.path.basename(os.path.normpath(os.path.abspath(run_dir))),
        "path": os.path.abspath(run_dir),
        "top": _top(run, board, scan),
        "leaderboard": _leaderboard(board, order, scan, summary),
        "means": _means(board, order, [m for m in metrics if lookup(m) is None or lookup(m).in_tables]),
        "significance": significance(board),
        "slices": slices_context(board), "jury": jury_context(board),
        "calibrated_significance": significance(calibrated_comparisons(board)),
        "calibration": calibration(board),
        "distributions": _distributions(scan, metrics, colors),
        "breakdowns": _breakdowns(board, order), "retrieval": retrieval_context(run_dir),
        "judges": _judges(run, scan),
        "errors": _errors(scan, sum(orphans.values())),
        "worst_n": worst_n,
        "worst": lowest_section({m: scan.worst[m] for m in metrics if m in scan.worst}, _seen_best(scan)),
        "records": scan.seq,
        "header": _header(run, scan),
    }


# ---------------------------------------------------------------- the summary as the leaderboard reads it

def _board(summary: dict | None, scan: Scan, metrics: list[str]) -> dict:
    """summary.json with every model block well-formed (numbers or None, counts as ints), so that the
    leaderboard's helpers (ragscale.report.leaderboard) read it as they read a summary they wrote; a
    summary built from the scan when summary.json is missing or has no models."""
    models = summary.get("models") if isinstance(summary, dict) else None
    if isinstance(models, dict) and models:
        listed = summary.get("metrics")
        names = [m for m in listed if isinstance(m, str)] if isinstance(listed, list) else list(metrics)
        overall = summary.get("overall")
        return {**summary, "metrics": names, "models": {str(k): _block(v) for k, v in models.items()},
                "overall": _block(overall) if isinstance(overall, dict) else None}
    out: dict[str, Any] = {"metrics": list(metrics), "overall": None, "models": {}}
    for model, count in sorted(scan.models.items()):
        dists = {m: scan.dists[m].get(model) for m in metrics}
        out["models"][model] = _block({"count": count, "errors": scan.model_errors[model],
                                       "metrics": {m: d.mean for m, d in dists.items() if d is not None},
                                       "n": {m: d.n for m, d in dists.items() if d is not None}})
    return out


def _block(d: Any, nested: bool = True) -> dict:
    """One model's (or one cell's) block of summary.json, well-formed."""
    d = d if isinstance(d, dict) else {}
    means = d.get("metrics") if isinstance(d.get("metrics"), dict) else {}
    ns = d.get("n") if isinstance(d.get("n"), dict) else {}
    out: dict[str, Any] = {"count": _int(d.get("count")), "errors": _int(d.get("errors")),
                           "judge_failed": _int(d.get("judge_failed")),
                           "metrics": {str(k): number(v) for k, v in means.items()},
                           "n": {str(k): _int(v) for k, v in ns.items()},
                           "answerability_accuracy": number(d.get("answerability_accuracy")),
                           "answerability_n": _int(d.get("answerability_n")),
                           **{k: _counts(d.get(k)) for k in ("judge_parse_failures", "judge_engine_errors")},
                           "judge_undefined_reasons": {str(j): _counts(r) for j, r in _dict(d.get("judge_undefined_reasons"))}}
    for key in ("by_answerability", "by_turn") if nested else ():
        if isinstance(d.get(key), dict):
            out[key] = {str(k): _block(v, nested=False) for k, v in d[key].items()}
    return out


def _dict(v: Any) -> list[tuple[Any, Any]]:
    return list(v.items()) if isinstance(v, dict) else []


def _counts(v: Any) -> dict[str, int]:
    """A {name: count} of summary.json (judge errors by judge, reasons), well-formed."""
    return {str(k): _int(n) for k, n in _dict(v)}


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _direction(metric: str | None) -> str:
    return "lower is better" if higher_is_better(metric) is False else "higher is better"


# ---------------------------------------------------------------- sections

def _top(run: dict | None, board: dict, scan: Scan) -> dict:
    """The line under the title: the outcome in the exit code's words (ragscale.exitcodes.outcome:
    "ok" only when every record was scored, else e.g. "4 of 6 records failed", linked to the errors;
    "failed" with the reason for a run that stopped), models, records, what ranks."""
    metric, calibrated = ranking(board)
    errored = sum(scan.error_stages.values()) + scan.judge_failed  # failed records, as the run counts them
    stopped = run is not None and run.get("status") in STOPPED  # failed, or interrupted by a signal
    code = FAILED if stopped else finished(scan.seq, errored)
    if not stopped and run is not None and run.get("status") == STATUS[INCOMPLETE]:  # an output failed before
        code = INCOMPLETE
    failure = None
    if stopped:
        records = run.get("records") if isinstance(run.get("records"), dict) else {}
        reason = run.get("failure") or "; ".join(f"{k}: {v}" for k, v in records.items()) or "no reason given"
        failure = trunc(str(reason), 300)
    status = str(run.get("status")) if stopped else outcome(code, scan.seq, errored, scan.judge_failed)
    n = len(board["models"])
    return {"status": status + (" (no run.json)" if run is None else ""), "ok": code == OK, "failure": failure,
            "errors_link": errored > 0, "errors_anchor": "errors" if errored > scan.judge_failed else "judges",
            "models": f"{n} model{'s' if n != 1 else ''}", "records": scan.seq,
            "ranking": None if metric is None else
            f"ranked by the {'calibrated ' if calibrated else ''}mean of {label(metric)} ({_direction(metric)})"}


def _leaderboard(board: dict, order: list, scan: Scan, summary: dict | None) -> dict:
    """One row per model in ranking order: rank, records, errors, the ranking metric's mean with its
    interval (calibrated, uncalibrated and human-only when the run was calibrated), and the models it
    is significantly better than; why the ranking passed over the first headline (fallback_lines)."""
    metric, calibrated = ranking(board)
    wins, basis = better_than(board, metric)
    cal = calibration_rows(board.get("calibration"), metric) if calibrated else {}
    rows = []
    for rank, model, d in order:
        row: dict[str, Any] = {"rank": "–" if rank is None else str(rank), "model": model,
                               "count": d["count"], "errors": failed(d),
                               "better": ", ".join(wins.get(model, [])) or "—", "estimates": []}
        if calibrated:
            c = cal.get(model) or {}
            row["estimates"] = [c.get("calibrated"), c.get("naive") or _estimate(d, metric, scan, model,
                                                                                  board.get("intervals")),
                                c.get("human_only")]
            row["labels"] = c.get("labels", "0")
            row["message"] = c.get("message")
        elif metric is not None:
            row["estimates"] = [_estimate(d, metric, scan, model, board.get("intervals"))]
        rows.append(row)
    conf = number(board["calibration"].get("confidence")) if calibrated else None  # calibrated: a dict
    bounds = bounds_of(metric)
    sig = board.get("significance") if isinstance(board.get("significance"), dict) else {}
    return {"metric": metric, "label": None if metric is None else label(metric), "calibrated": calibrated,
            "direction": _direction(metric), "rows": rows, "basis": basis, "own": own_values(metric),
            "fallback": [] if calibrated else fallback_lines(board), "correction": sig.get("correction"),
            "range": None if bounds is None else f"{bounds[0]:g} to {bounds[1]:g}",
            "interval": "95%" if conf is None else f"{100 * conf:g}%",
            "human": _human(board, metric) if calibrated else None,
            "missing": summary is None, "reduction": summary.get("reduction") if summary else None,
            "unit": unit_text(board.get("intervals"))}


def _estimate(d: dict, metric: str, scan: Scan, model: str, intervals: Any = None) -> dict | None:
    """The model's mean of ``metric`` (summary.json's) with its interval: summary.json's ``intervals``
    (resampling the run's unit, ragscale.report.slices) when it has this one, else the Student-t interval
    of the scan's values (clipped to the metric's bounds: ragscale.stats.intervals.mean_interval)."""
    mean = d["metrics"].get(metric)
    if mean is None:
        return None
    ci, dist = kept_interval(intervals, model, metric), (scan.dists.get(metric) or {}).get(model)
    if ci is None and dist is not None:
        ci = mean_interval(metric, dist.n, dist.mean, dist.sd, (dist.lo, dist.hi))
    if ci is None or not all(map(math.isfinite, ci)):
        return {"mean": metric_value(metric, mean), "ci": None}
    return {"mean": metric_value(metric, mean), "ci": f"[{metric_value(metric, ci[0])}, {metric_value(metric, ci[1])}]"}


def _human(board: dict, metric: str | None) -> str:
    """The human metric that calibrates ``metric`` (and how its labels are mapped); ``board`` has a
    calibration block (a dict)."""
    metrics = board["calibration"].get("metrics")
    b = metrics.get(metric) if isinstance(metrics, dict) else None
    b = b if isinstance(b, dict) else {}
    return str(b.get("human") or "?") + (f", labels mapped {b['mapping']}" if b.get("mapping") else "")


def _means(board: dict, order: list, metrics: list[str]) -> list[dict]:
    """Every metric's mean per model (ranking order, then all models together), grouped by metric
    family into tables that fit a 1280 px screen (see :func:`_pack`)."""
    families: dict[str, list[tuple[str, str]]] = {}
    for m in metrics:
        spec = lookup(m)
        kind = "rate" if is_rate_metric(m) else "mean"
        families.setdefault(spec.family if spec is not None else "other", []).append((m, kind))
    if any(d.get("answerability_n") for d in board["models"].values()):
        families.setdefault("answerability", []).append((ANS_ACC, "accuracy"))
    blocks = [(model, d, False) for _, model, d in order]
    if len(blocks) > 1 and board.get("overall"):
        blocks.append(("ALL models", board["overall"], True))
    out = []
    for groups in _pack(families, max((len(name) for name, _, _ in blocks), default=0)):
        cols = [c for _, cs in groups for c in cs]
        out.append({"groups": [(family, len(cs)) for family, cs in groups],
                    "head": [_mean_head(m, kind) for m, kind in cols],
                    "rows": [{"name": model, "bold": bold, "cells": [_mean_cell(d, m, kind) for m, kind in cols]}
                             for model, d, bold in blocks]})
    return out


def _pack(families: dict[str, list[tuple[str, str]]], name_chars: int) -> list[list[tuple[str, list]]]:
    """The families' columns in tables of at most MEAN_COLUMNS columns and about MEAN_CHARS characters of
    headers (the models' column included); a family too wide for one table is split evenly."""
    budget = MEAN_CHARS - min(name_chars, 30) - 3

    def fits(table: list[tuple[str, list]], cols: list) -> bool:
        cols = [c for _, cs in table for c in cs] + cols
        return len(cols) <= MEAN_COLUMNS and sum(max(len(_mean_head(*c)), 6) + 3 for c in cols) <= budget

    tables: list[list[tuple[str, list]]] = [[]]
    for family, cols in families.items():
        if fits(tables[-1], cols):
            tables[-1].append((family, cols))
            continue
        parts = next(p for p in range(1, len(cols) + 1)
                     if p == len(cols) or all(fits([], c) for c in _chunks(cols, math.ceil(len(cols) / p))))
        for part in _chunks(cols, math.ceil(len(cols) / parts)):
            if tables[-1]:
                tables.append([])
            tables[-1].append((family, part))
    return [t for t in tables if t]


def _chunks(cols: list, size: int) -> list[list]:
    return [cols[i:i + size] for i in range(0, len(cols), size)]


def _mean_head(metric: str, kind: str) -> str:
    return {"rate": f"% {metric}", "accuracy": "answerability accuracy"}.get(kind, metric)


def _mean_cell(d: dict, metric: str, kind: str) -> dict:
    """A mean as the tables show it: catalog decimals (hover: n), a rate in %, the accuracy with its n."""
    v, n = mean_n(d, metric)
    if kind == "rate":
        return {"text": "—" if v is None else f"{100 * v:.1f}%", "title": f"n={n}", "note": None}
    if kind == "accuracy":
        return {"text": metric_value(metric, v), "title": None, "note": None if v is None else f"(n={n})"}
    return {"text": metric_value(metric, v), "title": f"n={n}", "note": None}


def _breakdowns(board: dict, order: list) -> dict | None:
    """The leaderboard's breakdown metrics by answerability class and by turn: per metric, one row per
    model with "mean (n)" per cell; None when the summary has neither breakdown."""
    cols = cells(board)
    if len(cols) < 2:
        return None
    tables = []
    for m in breakdown_metrics(board, headline(board)):
        rows = []
        for rank, model, d in order:
            vals = [mean_n(cell(d, b, key), m) for b, key, _ in cols]
            rows.append({"rank": "–" if rank is None else str(rank), "model": model,
                         "cells": [(metric_value(m, v), n) for v, n in vals]})
        tables.append({"metric": m, "label": label(m), "rows": rows})
    return {"head": [text for _, _, text in cols], "tables": tables,
            "answerability": any(b == "answerability" for b, _, _ in cols),
            "turns": any(b == "turn" for b, _, _ in cols)}


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

def _header(run: dict | None, scan: Scan) -> dict | None:
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


def _distributions(scan: Scan, metrics: list[str], colors: dict[str, str]) -> list[dict]:
    """Per metric: a chart of every model and, for scores, a table of n, mean, CI, sd, median, min, max."""
    out = []
    for i, m in enumerate(metrics):
        per = scan.dists.get(m) or {}
        rows = [(model, colors.get(model, PALETTE[0]), per[model]) for model in sorted(per) if per[model].n]
        entry: dict[str, Any] = {"index": i, "metric": m, "kind": "empty", "chart": None, "table": []}
        if rows and is_rate_metric(m):
            entry.update(kind="rate", chart=rate_chart(m, rows))
        elif rows:
            entry.update(kind="dist", chart=dist_chart(m, rows), table=[_dist_cells(m, model, d) for model, _, d in rows])
        out.append(entry)
    return out


def _dist_cells(metric: str, model: str, d: Dist) -> list[Any]:
    ci = mean_interval(metric, d.n, d.mean, d.sd, (d.lo, d.hi))
    return [model, d.n, fmt(d.mean), "—" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]",
            fmt(d.sd) if d.n > 1 else "—", ("" if d.exact else "≈") + fmt(d.quantile(0.5)), fmt(d.lo), fmt(d.hi)]


def _judges(run: dict | None, scan: Scan) -> dict:
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


def _errors(scan: Scan, no_model: int) -> dict:
    """How many records have an error, by stage, the lines of no model, and the first few of them."""
    return {"total": sum(scan.error_stages.values()),
            "stages": ", ".join(f"{s}: {n}" for s, n in scan.error_stages.most_common()),
            "no_model": no_model, "examples": scan.error_examples}


def _seen_best(scan: Scan) -> dict[str, float]:
    """Per metric, the best value of the run (the highest, or the lowest for a lower-is-better one)."""
    return {m: (min(d.lo for d in per.values()) if higher_is_better(m) is False else max(d.hi for d in per.values()))
            for m, per in scan.dists.items() if per}
