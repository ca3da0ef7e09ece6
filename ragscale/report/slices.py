"""Where a model loses: per-model means by slice of the tasks, the paired tests between models within
each slice, and the slices where a model is significantly worse than another (or than its own overall
mean) with the false discovery
rate controlled across every slice tested (summary.json ``slices``, leaderboard.md's "Where models
lose", the HTML report, ``ragscale compare``; docs/statistics.md, "Slices").

A slice is one value of a categorical field of the tasks (``slices.by``): an input column
(MT-RAG's ``Collection``), a label column of the user's, ``answerability`` (as the reader read it),
``turn``, or an MT-RAG enrichment of the question (``Question Type``, ``Multi-Turn``). A task's value
is its first record's. Within a slice the tests are the leaderboard's (ragscale.report.significance:
the pairs it compares, on the headline metric, whole units resampled), each slice with at least
``slices.min_n`` paired tasks; and each model's mean on a slice of at least ``min_n`` tasks against its
own overall mean (``stats.clustered.subset_vs_all``: a cluster-robust t test). Their p-values are
adjusted together by Benjamini-Hochberg, so that among the differences called significant the
expected share of false ones is at most alpha.

Also the unit of resampling (:func:`cluster_field`) and the per-model intervals of every metric that
resample it (:func:`intervals_block`, summary.json ``intervals``), which the reports show.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ragscale.errors import UserError
from ragscale.record_fields import field_label as slice_value  # noqa: F401 - a task's value of a field

FDR = "bh"  # ragscale.stats.paired.adjust's Benjamini-Hochberg
METHOD = ("paired bootstrap (BCa) + paired permutation test per slice, and each model's slice mean against its own "
          "overall mean (cluster-robust t test); p-values adjusted together across every test (Benjamini-Hochberg: "
          "false discovery rate at alpha)")


def cluster_field(value: Any) -> str | None:
    """The config's ``cluster_by``: a field name, or None for ``none``/null (every task on its own)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    if not isinstance(value, str):
        raise UserError(f"cluster_by must be a field name (e.g. conversation_id) or none, got {value!r}")
    return value.strip()


def check_slices(s: Any) -> Any:
    """The config's ``slices`` block, checked (a one-line UserError); returned as given."""
    if s is None:
        return s
    by = list(getattr(s, "by", None) or [])
    if not all(isinstance(f, str) and f.strip() for f in by):
        raise UserError(f"slices.by must be a list of field names (e.g. [Collection,turn]), got {by!r}")
    if len(set(by)) != len(by):
        raise UserError(f"slices.by names a field twice: {by}")
    n = getattr(s, "min_n", None)
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise UserError(f"slices.min_n must be an integer >= 2, got {n!r}")
    return s


def _unit_codes(values: Any) -> np.ndarray | None:
    return values.clusters()


def _interval(metric: str, vals: np.ndarray, codes: np.ndarray | None, confidence: float) -> dict | None:
    """The mean of ``vals`` with its interval resampling the units ``codes`` (None: each value alone),
    clipped to the metric's bounds."""
    from ragscale.stats.clustered import cluster_mean
    from ragscale.stats.intervals import bounds_of, clip

    if len(vals) == 0:
        return None
    est = cluster_mean(vals, np.arange(len(vals)) if codes is None else codes, confidence)
    if est is None:
        return {"mean": float(vals.mean()), "ci": None, "n": int(len(vals)), "units": int(len(vals)),
                "design_effect": None}
    ci = est.get("ci")
    if ci is not None and all(map(math.isfinite, ci)):
        ci = list(clip((ci[0], ci[1]), bounds_of(metric), (float(vals.min()), float(vals.max()))))
    else:
        ci = None
    return {"mean": float(est["mean"]), "ci": ci, "n": int(est["n"]), "units": int(est["clusters"]),
            "design_effect": None if codes is None else est.get("design_effect")}


def intervals_block(order: Sequence[str], values: Any, confidence: float) -> dict | None:
    """summary.json's ``intervals``: per model and metric the mean over its records with the interval
    that resamples the run's unit (whole conversations; each record alone without one), n, the units
    and the design effect (the variance of the mean relative to independent records)."""
    codes = _unit_codes(values)
    models: dict[str, dict] = {}
    for model in order:
        row = {}
        for metric in values.metrics:
            pos, vals = values.records(model, metric)
            est = _interval(metric, vals, None if codes is None else codes[pos], confidence)
            if est is not None:
                row[metric] = est
        if row:
            models[model] = row
    if not models:
        return None
    return {"unit": values.unit(), "confidence": confidence, "models": models}


def slices_block(order: Sequence[str], values: Any, settings: Any, metric: str | None, min_n: int,
                 overall: dict | None = None) -> dict | None:
    """summary.json's ``slices``: per field and value, per model the mean of ``metric`` with its
    interval and n, and the paired comparisons between the models (the significance block's pairs),
    tested where at least ``min_n`` tasks pair; every p adjusted together (Benjamini-Hochberg); and the
    ``findings``: each significant difference, a model that ranks above the other overall but loses
    on the slice first. ``overall``: the run's significance block (the overall verdicts)."""
    from itertools import combinations

    from ragscale.report.headline import higher_is_better
    from ragscale.report.significance import pair_entry, run_tests
    from ragscale.stats.clustered import subset_vs_all
    from ragscale.stats.paired import adjust

    if metric is None or not order or not values.slice_by:
        return None
    codes = _unit_codes(values)
    all_pairs = len(order) <= settings.all_pairs_max_models
    pairs = list(combinations(order, 2)) if all_pairs else [(order[0], m) for m in order[1:]]
    rows = {model: values.row(model, metric) for model in order}
    recs = {model: values.records(model, metric) for model in order}
    labels_by_pos = {f: np.array([values.task_slices[f][t] for t in values.task_order()], dtype=object)
                     for f in values.slice_by}
    fields: dict[str, dict] = {}
    queued: list[tuple[dict, np.ndarray, np.ndarray | None]] = []
    owns: list[tuple[str, str, dict, dict]] = []
    for f in values.slice_by:
        labels = labels_by_pos[f]
        levels = sorted({v for v in labels if v is not None}, key=_level_key)
        out_levels: dict[str, dict] = {}
        for level in levels:
            inside = labels == level
            means = {}
            for model in order:
                pos, vals = recs[model]
                keep = inside[pos]
                units = np.arange(len(pos)) if codes is None else codes[pos]
                est = _interval(metric, vals[keep], units[keep], settings.confidence)
                if est is None:
                    continue
                means[model] = est
                own = subset_vs_all(vals, keep, units, settings.confidence) if keep.sum() >= max(2, min_n) else None
                if own is not None:  # the slice against the model's own overall mean, in the BH family
                    est["vs_overall"] = own = {"model": model, "overall": float(vals.mean()), **own}
                    owns.append((f, level, est, own))
            entries = []
            for a, b in pairs:
                both = inside & ~np.isnan(rows[a]) & ~np.isnan(rows[b])
                entry = pair_entry(a, b, rows[a][both], rows[b][both])
                if entry["n"] >= max(2, min_n):
                    queued.append((entry, rows[a][both] - rows[b][both], None if codes is None else codes[both]))
                else:
                    entry["note"] = "; ".join(filter(None, [entry.get("note"), f"fewer than {min_n} paired tasks: "
                                                            "not tested"]))
                entries.append(entry)
            out_levels[level] = {"tasks": int(inside.sum()), "models": means, "comparisons": entries}
        fields[f] = {"levels": out_levels, "without": int(sum(v is None for v in labels))}
    run_tests(queued, settings)
    tested = [e for e, _, _ in queued] + [own for _, _, _, own in owns]
    up = higher_is_better(metric)
    for e, q in zip(tested, adjust([e["p"] for e in tested], FDR)):
        e["p_adjusted"] = q
        e["significant"] = bool(q <= settings.alpha)
        if e["significant"] and up is not None and e["diff"] != 0 and "a" in e:
            e["better"] = e["a"] if (e["diff"] > 0) == up else e["b"]
    rank = {model: i for i, model in enumerate(order)}
    findings = []
    for f, fb in fields.items():
        for level, lb in fb["levels"].items():
            for e in lb["comparisons"]:
                if not e.get("better"):
                    continue
                better = e["better"]
                worse = e["b"] if better == e["a"] else e["a"]
                sign = 1.0 if better == e["a"] else -1.0
                ci = e.get("ci")
                findings.append({
                    "field": f, "value": level, "metric": metric, "worse": worse, "better": better,
                    "difference": sign * e["diff"], "ci": None if ci is None else sorted([sign * ci[0], sign * ci[1]]),
                    "n": e["n"], "p": e["p"], "p_adjusted": e["p_adjusted"],
                    "reversal": rank[worse] < rank[better],
                    "overall": _overall(overall, metric, worse, better)})
    for f, level, est, own in owns:  # a slice significantly worse than the model's own overall mean
        if own["significant"] and up is not None and own["diff"] != 0 and (own["diff"] > 0) != up:
            sign = -1.0 if up else 1.0
            findings.append({
                "field": f, "value": level, "metric": metric, "worse": own["model"], "better": None,
                "mean": est["mean"], "overall_mean": own["overall"], "difference": sign * own["diff"],
                "ci": sorted([sign * own["ci"][0], sign * own["ci"][1]]), "n": own["n"], "p": own["p"],
                "p_adjusted": own["p_adjusted"], "reversal": False, "overall": "against its own overall mean"})
    findings.sort(key=lambda x: (not x["reversal"], x["p_adjusted"], x["field"], x["value"], x["worse"]))
    return {"by": list(values.slice_by), "metric": metric, "min_n": min_n, "alpha": settings.alpha,
            "correction": FDR, "method": METHOD, "tests": len(tested), "unit": values.unit(),
            "fields": fields, "findings": findings}


def summary_blocks(summary: dict, values: Any, jury: Any, settings: Any, printer: Any = print,
                   fail: Any = None) -> dict:
    """A run's ``intervals`` and ``slices`` blocks (``values``: its PairedValues, or None;
    ``settings``: its ReportSettings) for the models with a scored record in the leaderboard's order,
    and its ``jury`` block (``jury``: ragscale.report.jury.JuryValues, or None); prints what they
    found. A failing block is ``fail(label, exception)``, the others are still made."""
    from ragscale.report.headline import headline
    from ragscale.report.jury import console_lines
    from ragscale.report.ranking import standings

    out: dict = {}
    order = [model for _, model, d in standings(summary) if d["count"] > d["errors"]]
    s, sl = settings.significance, settings.slices
    try:
        block = intervals_block(order, values, s.confidence) if values is not None else None
        if block is not None:
            out["intervals"] = block
        block = slices_block(order, values, s, headline(summary), int(getattr(sl, "min_n", 10)),
                             summary.get("significance")) if values is not None and getattr(sl, "by", None) else None
        if block is not None:
            out["slices"] = block
            printer(f"[ragscale] slices: {block['tests']} slice test(s) of {block['metric']} by "
                    f"{', '.join(block['by'])}; {len(block['findings'])} where a model is significantly worse "
                    "(Benjamini-Hochberg)")
    except Exception as e:  # noqa: BLE001 - reported, never fatal
        (fail or _raise)("significance", e)
    try:
        block = jury.block() if jury is not None else None
    except Exception as e:  # noqa: BLE001 - reported, never fatal
        (fail or _raise)("jury", e)
        block = None
    if block is not None:
        out["jury"] = block
        for line in console_lines(out):
            printer(f"[ragscale] {line}")
    return out


def _raise(label: str, e: BaseException) -> None:
    raise e


def _level_key(v: str) -> tuple:
    return (0, int(v), "") if v.isdigit() else (1, 0, v)


def _overall(block: dict | None, metric: str, worse: str, better: str) -> str:
    """What the run's significance block says of the pair overall: "worse significantly better",
    "no significant difference", or "not compared"."""
    entries = ((block or {}).get("metrics") or {}).get(metric) or []
    for e in entries:
        if {e.get("a"), e.get("b")} == {worse, better}:
            if e.get("significant") and e.get("better"):
                return f"{e['better']} significantly better overall"
            return "no significant difference overall"
    return "not compared overall"


# ------------------------------------------------------------------ text


def finding_text(f: dict, value: Any = None) -> str:
    """One finding as a sentence: "m1 < m2 on Collection=FiQA (RB_agg): difference 0.120 [0.030, 0.210],
    adjusted p = 0.004 (BH), 24 tasks; m1 ranks above m2 overall"."""
    from ragscale.report.html_significance import p_text
    from ragscale.report.safe import visible
    from ragscale.report.text import metric_value

    metric = f["metric"]
    ci = f.get("ci")
    diff = metric_value(metric, f["difference"]) + ("" if not ci else
                                                     f" [{metric_value(metric, ci[0])}, {metric_value(metric, ci[1])}]")
    where = f"{visible(f['field'])}={visible(f['value'])}"
    if f.get("better") is None:  # against the model's own overall mean
        return (f"{visible(f['worse'])} worse on {where} than its own overall mean ({metric}): "
                f"{metric_value(metric, f['mean'])} vs {metric_value(metric, f['overall_mean'])}, difference {diff}, "
                f"{p_text(f)} (BH), {f['n']} tasks")
    line = (f"{visible(f['worse'])} worse than {visible(f['better'])} on {where} "
            f"({metric}): difference {diff}, {p_text(f)} (BH), {f['n']} tasks")
    if f.get("reversal"):
        line += f"; {visible(f['worse'])} ranks above {visible(f['better'])} overall"
    return line


def markdown_lines(summary: dict, limit: int = 30) -> list[str]:
    """leaderboard.md's "Where models lose" section (empty without a slices block)."""
    block = summary.get("slices") if isinstance(summary, dict) else None
    if not isinstance(block, dict) or not isinstance(block.get("fields"), dict):
        return []
    found = [f for f in block.get("findings") or [] if isinstance(f, dict)]
    out = ["## Where models lose", ""]
    fields = ", ".join(str(f) for f in block.get("by") or [])
    if found:
        out += [f"- {finding_text(f)}" for f in found[:limit]]
        if len(found) > limit:
            out.append(f"- ... and {len(found) - limit} more (summary.json slices.findings)")
    else:
        out.append(f"No slice where a model is significantly worse than another or than its own overall mean "
                   f"(slices by {fields}).")
    unit = (block.get("unit") or {}).get("text")
    out += ["", f"{block.get('tests', 0)} slice tests of {block.get('metric')} by {fields} (slices with at "
            f"least {block.get('min_n')} tasks), {block.get('method')}" + (f"; {unit}" if unit else "")
            + ". Every slice's means: summary.json `slices`.", ""]
    for f, fb in block["fields"].items():
        levels = fb.get("levels") or {}
        models = list(dict.fromkeys(m for lb in levels.values() for m in (lb.get("models") or {})))
        if not levels or not models:
            continue
        out += [f"### {f}", "", "| " + " | ".join([str(f), "tasks", *models]) + " |",
                "|---|---:|" + "---:|" * len(models)]
        from ragscale.report.text import metric_value

        for level, lb in levels.items():
            cells = []
            for m in models:
                e = (lb.get("models") or {}).get(m)
                cells.append("–" if not e else f"{metric_value(block['metric'], e['mean'])} ({e['n']})")
            out.append("| " + " | ".join([str(level), str(lb.get("tasks", "")), *cells]) + " |")
        out.append("")
    return out


def console_lines(summary: dict, limit: int = 5) -> list[str]:
    """The findings the console prints after the ranking: reversals first, at most ``limit``."""
    block = summary.get("slices") if isinstance(summary, dict) else None
    found = [f for f in (block or {}).get("findings") or [] if isinstance(f, dict)] if isinstance(block, dict) else []
    lines = [finding_text(f) for f in found[:limit]]
    if len(found) > limit:
        lines.append(f"... and {len(found) - limit} more in leaderboard.md (Where models lose)")
    return lines


def slices_context(board: dict) -> dict | None:
    """The "Where models lose" section (summary.json ``slices``): the findings as sentences and, per
    field, one row per value with each model's mean (n); None without the block."""
    from ragscale.metrics.registry import label

    block = board.get("slices")
    if not isinstance(block, dict) or not isinstance(block.get("fields"), dict):
        return None
    metric = str(block.get("metric"))
    findings = [f for f in block.get("findings") or [] if isinstance(f, dict)]
    tables = []
    for field, fb in block["fields"].items():
        levels = fb.get("levels") if isinstance(fb, dict) else None
        if not isinstance(levels, dict) or not levels:
            continue
        models = list(dict.fromkeys(m for lb in levels.values() if isinstance(lb, dict) for m in lb.get("models") or {}))
        rows = []
        for level, lb in levels.items():
            means = lb.get("models") or {}
            rows.append({"value": str(level), "tasks": lb.get("tasks"),
                         "cells": [_slice_cell(metric, means.get(m)) for m in models]})
        tables.append({"field": str(field), "models": models, "rows": rows})
    unit = block.get("unit") if isinstance(block.get("unit"), dict) else {}
    return {"metric": metric, "label": label(metric), "findings": [finding_text(f) for f in findings],
            "reversals": sum(bool(f.get("reversal")) for f in findings), "tables": tables,
            "by": ", ".join(map(str, block.get("by") or [])), "tests": block.get("tests"),
            "min_n": block.get("min_n"), "method": block.get("method"), "unit": unit.get("text")}


def _slice_cell(metric: str, e: Any) -> dict:
    from ragscale.report.text import metric_value

    if not isinstance(e, dict) or e.get("mean") is None:
        return {"text": "–", "title": None}
    ci = e.get("ci")
    title = f"n={e.get('n')}" + (f", [{metric_value(metric, ci[0])}, {metric_value(metric, ci[1])}]"
                                 if isinstance(ci, list) and len(ci) == 2 else "")
    return {"text": f"{metric_value(metric, e['mean'])} ({e.get('n')})", "title": title}


def unit_text(block: Any) -> str | None:
    """How the intervals of means resample (summary.json ``intervals.unit``), e.g. "resampled by
    conversation: 3 conversations (10 tasks)"; None without the block."""
    unit = block.get("unit") if isinstance(block, dict) else None
    return str(unit["text"]) if isinstance(unit, dict) and isinstance(unit.get("text"), str) else None


def kept_interval(block: Any, model: str, metric: str) -> tuple[float, float] | None:
    """The interval of a model's mean in summary.json's ``intervals`` (None when it has none)."""
    kept = ((block.get("models") or {}).get(model) or {}).get(metric) if isinstance(block, dict) else None
    ci = kept.get("ci") if isinstance(kept, dict) else None
    if isinstance(ci, list) and len(ci) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                      for v in ci):
        return float(ci[0]), float(ci[1])
    return None
