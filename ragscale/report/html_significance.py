"""The HTML report's inference sections (package-private; see :mod:`ragscale.report.html`).

Reads summary.json's ``significance`` block (paired comparisons of models per metric: mean
difference, its confidence interval, a p-value adjusted for multiple comparisons, and
whether the difference is significant) and turns it into the rows of
``templates/significance.html.j2``: "A > B" with the difference and the adjusted p when it is
significant, "A vs B: not distinguishable on these N tasks" when it is not; the leaderboard's
"significantly better than" column comes from the same entries (the calibration's PPI++
comparisons first, when it has them). Also the ``calibration`` block (ragscale.report.calibration:
per metric and model the judge's, the human-only and the calibrated mean with their intervals)
as the cells of the leaderboard and of ``templates/calibration.html.j2``. Values use the
metric's catalog decimals, like the leaderboard. A malformed block is shown as far as it is
readable, never an error: the report must open even for a summary written by another version.
"""

from __future__ import annotations

import math
from typing import Any

from ragscale.metrics.registry import label
from ragscale.report.text import metric_value  # the catalog's decimals
from ragscale.report.wording import own_values, plural

_DESIGNS = {"all-pairs": "every pair of models compared", "vs-leader": "each model compared with the leader"}


def significance(summary: dict | None) -> dict | None:
    """The section's context, or None when summary.json has no (readable) significance block."""
    block = summary.get("significance") if isinstance(summary, dict) else None
    if not isinstance(block, dict) or not isinstance(block.get("metrics"), dict):
        return None
    metrics = []
    for metric, pairs in block["metrics"].items():
        unit = block.get("unit") if isinstance(block.get("unit"), dict) else {}
        rows = [_pair(str(metric), p, unit.get("name")) for p in pairs if isinstance(p, dict)] \
            if isinstance(pairs, list) else []
        if rows:
            metrics.append({"metric": str(metric), "label": label(str(metric)), "rows": rows,
                            "design_effect": _design_effect(pairs)})
    if not metrics:
        return None
    conf = number(block.get("confidence"))
    method = str(block["method"]).strip() if block.get("method") else None
    return {"metrics": metrics, "interval": "interval" if conf is None else f"{100 * conf:g}% interval",
            "method": f"Method: {method}" + ("" if method.endswith(".") else ".") if method else None,
            "settings": _settings(block, conf)}


def _pair(metric: str, p: dict, unit: Any = None) -> dict:
    """One comparison; a significant one names the better model first (its difference and interval turned
    around to match); ``units``: " (4 conversations)" after the task count when whole units were resampled."""
    first, second = str(p.get("a")), str(p.get("b"))
    diff, ci = number(p.get("diff")), _interval(p.get("ci"))
    significant = p.get("significant") is True
    if significant and p.get("better") is not None and str(p.get("better")) == second:
        first, second = second, first
        diff = None if diff is None else -diff
        ci = None if ci is None else (-ci[1], -ci[0])
    means = [(str(p.get(k)), number(p.get(f"mean_{k}"))) for k in ("a", "b")]
    n = p.get("n")
    return {
        "significant": significant,
        "relation": ">" if significant and p.get("better") is not None else "≠",
        "first": first, "second": second,
        "n": n if isinstance(n, int) and not isinstance(n, bool) else None,
        "units": _units(p.get("units"), unit),
        "means": ", ".join(f"{model}: {metric_value(metric, v)}" for model, v in means),
        "difference": "difference " + metric_value(metric, diff)
        + ("" if ci is None else f" [{metric_value(metric, ci[0])}, {metric_value(metric, ci[1])}]"),
        "p": p_text(p),
        "note": p.get("note") if isinstance(p.get("note"), str) else None,
    }


def _units(units: Any, unit: Any) -> str | None:
    """" (4 conversations)" after a comparison's task count when a unit other than the task was resampled."""
    if not isinstance(units, int) or isinstance(units, bool) or not isinstance(unit, str) or unit == "task":
        return None
    return f" ({units} {plural(unit, units)})"


def p_text(p: dict) -> str:
    """"adjusted p = 0.012" (the raw p when no adjusted one is given; "< 0.001" below 0.001)."""
    for key, name in (("p_adjusted", "adjusted p"), ("p", "p")):
        v = number(p.get(key))
        if v is not None:
            return f"{name} < 0.001" if v < 0.001 else f"{name} = {v:.3f}"
    return ""


def _design_effect(pairs: list) -> str | None:
    """"design effect 2.1" (the median over the metric's comparisons of the variance of the mean
    difference resampling whole units relative to independent tasks), None without one."""
    import statistics

    values = [v for p in pairs if isinstance(p, dict) for v in [number(p.get("design_effect"))] if v is not None]
    return f"design effect {statistics.median(values):.2f}" if values else None


def _settings(block: dict, conf: float | None) -> str:
    """The block's unit of resampling, confidence, alpha, correction and design as one line."""
    unit = block.get("unit")
    parts = [str(unit["text"])] if isinstance(unit, dict) and isinstance(unit.get("text"), str) else []
    parts += [] if conf is None else [f"{100 * conf:g}% confidence intervals"]
    alpha = number(block.get("alpha"))
    if alpha is not None:
        parts.append(f"significance level α = {alpha:g}")
    if block.get("correction"):
        parts.append(f"p-values adjusted for multiple comparisons ({block['correction']})")
    design = block.get("design")
    if design:
        parts.append(_DESIGNS.get(str(design), str(design)))
    return "; ".join(parts)


def better_than(summary: dict, metric: str | None) -> tuple[dict[str, list[str]], str | None]:
    """Per model, the models it is significantly better than on ``metric``, and what that rests on:
    "calibrated" (the calibration's comparisons of ``metric``; a pair they could not test keeps the
    uncalibrated result, marked with ragscale.report.wording.own_values: "(judge)" for a judge
    metric), "paired" (summary.json's significance block), or None when neither compares ``metric``."""
    judged = _entries(summary.get("significance"), metric)
    cal = summary.get("calibration")
    calibrated = _entries({"metrics": cal.get("comparisons")}, metric) if isinstance(cal, dict) else None
    out: dict[str, list[str]] = {}
    if calibrated is not None:
        by_pair = {frozenset((str(e.get("a")), str(e.get("b")))): e for e in judged or []}
        for e in calibrated:
            pair = frozenset((str(e.get("a")), str(e.get("b"))))
            if number(e.get("p")) is not None:
                _add_winner(out, e, "")
            elif pair in by_pair:
                _add_winner(out, by_pair[pair], f" ({own_values(metric)})")
        return out, "calibrated"
    if judged is None:
        return out, None
    for e in judged:
        _add_winner(out, e, "")
    return out, "paired"


def _entries(block: Any, metric: str | None) -> list[dict] | None:
    """The comparison entries of ``metric`` in a significance-shaped block (None: it has none)."""
    if not isinstance(block, dict) or not isinstance(block.get("metrics"), dict):
        return None
    entries = block["metrics"].get(metric)
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else None


def _add_winner(out: dict[str, list[str]], e: dict, suffix: str) -> None:
    a, b, better = str(e.get("a")), str(e.get("b")), e.get("better")
    if e.get("significant") is True and better is not None and str(better) in (a, b):
        out.setdefault(str(better), []).append((b if str(better) == a else a) + suffix)


def calibration(summary: dict) -> dict | None:
    """The calibration detail section's context (per calibrated metric, one row per model), or None
    when summary.json has no (readable) calibration block."""
    block = summary.get("calibration")
    if not isinstance(block, dict) or not isinstance(block.get("metrics"), dict):
        return None
    metrics = []
    for metric, b in block["metrics"].items():
        rows = calibration_rows(block, str(metric))
        if rows:
            b = b if isinstance(b, dict) else {}
            mapping = b.get("mapping")
            metrics.append({"metric": str(metric), "label": label(str(metric)), "own": own_values(str(metric)),
                            "human": "?" if b.get("human") is None else str(b["human"]),
                            "mapping": str(mapping) if mapping else None,
                            "rows": [{"model": model, **r} for model, r in rows.items()]})
    if not metrics:
        return None
    conf = number(block.get("confidence"))
    labels = block.get("min_labels")
    return {"metrics": metrics, "interval": "interval" if conf is None else f"{100 * conf:g}% interval",
            "method": str(block["method"]) if block.get("method") else None,
            "min_labels": labels if isinstance(labels, int) and not isinstance(labels, bool) else None,
            "human": str(block["human"]) if block.get("human") else None}


def calibration_rows(block: Any, metric: str | None) -> dict[str, dict]:
    """Per model, the calibration of ``metric`` as cells: labels, records, the judge's (naive), the
    human-only and the calibrated estimate ({"mean", "ci"} texts, None where absent), lambda and the
    message (e.g. too few labels); empty when the block does not calibrate ``metric``."""
    metrics = block.get("metrics") if isinstance(block, dict) else None
    b = metrics.get(metric) if isinstance(metrics, dict) else None
    models = b.get("models") if isinstance(b, dict) else None
    if not isinstance(models, dict):
        return {}
    out = {}
    for model, r in models.items():
        r = r if isinstance(r, dict) else {}
        cal = r.get("calibrated") if isinstance(r.get("calibrated"), dict) else {}
        lam = number(cal.get("lambda"))
        out[str(model)] = {"labels": _count(r.get("n_labeled")), "records": _count(r.get("n_records")),
                           **{k: _estimate(metric, r.get(k)) for k in ("naive", "human_only", "calibrated")},
                           "lambda": "–" if lam is None else f"{lam:.2f}",
                           "message": str(r["message"]) if r.get("message") else None}
    return out


def _estimate(metric: str, e: Any) -> dict | None:
    """A {"mean", "ci"} estimate as texts in the metric's decimals (None when it has no mean)."""
    mean = number(e.get("mean")) if isinstance(e, dict) else None
    if mean is None:
        return None
    ci = _interval(e.get("ci"))
    return {"mean": metric_value(metric, mean),
            "ci": None if ci is None else f"[{metric_value(metric, ci[0])}, {metric_value(metric, ci[1])}]"}


def _count(v: Any) -> str:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else "–"


def number(v: Any) -> float | None:
    """A finite number of a block read as a float; None for anything else (a bool, a text, NaN)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _interval(v: Any) -> tuple[float, float] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        lo, hi = number(v[0]), number(v[1])
        if lo is not None and hi is not None:
            return lo, hi
    return None
