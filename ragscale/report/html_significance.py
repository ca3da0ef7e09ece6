"""The HTML report's "differences between models" section (package-private; see :mod:`ragscale.report.html`).

Reads summary.json's ``significance`` block (paired comparisons of models per metric: mean
difference, its confidence interval, a p-value adjusted for multiple comparisons, and
whether the difference is significant) and turns it into the rows of
``templates/significance.html.j2``: "A > B" with the difference and the adjusted p when it is
significant, "A vs B: not distinguishable on these N tasks" when it is not. Values use the
metric's catalog decimals, like the leaderboard. A malformed block is shown as far as it is
readable, never an error: the report must open even for a summary written by another version.
"""

from __future__ import annotations

import math
from typing import Any

from ragscale.metrics.registry import label
from ragscale.report.leaderboard import _fmt as metric_value  # the catalog's decimals

_DESIGNS = {"all-pairs": "every pair of models compared", "vs-leader": "each model compared with the leader"}


def significance(summary: dict | None) -> dict | None:
    """The section's context, or None when summary.json has no (readable) significance block."""
    block = summary.get("significance") if isinstance(summary, dict) else None
    if not isinstance(block, dict) or not isinstance(block.get("metrics"), dict):
        return None
    metrics = []
    for metric, pairs in block["metrics"].items():
        rows = [_pair(str(metric), p) for p in pairs if isinstance(p, dict)] if isinstance(pairs, list) else []
        if rows:
            metrics.append({"metric": str(metric), "label": label(str(metric)), "rows": rows})
    if not metrics:
        return None
    conf = _number(block.get("confidence"))
    method = str(block["method"]).strip() if block.get("method") else None
    return {"metrics": metrics, "interval": "interval" if conf is None else f"{100 * conf:g}% interval",
            "method": f"Method: {method}" + ("" if method.endswith(".") else ".") if method else None,
            "settings": _settings(block, conf)}


def _pair(metric: str, p: dict) -> dict:
    """One comparison; a significant one names the better model first (its difference and interval turned
    around to match)."""
    first, second = str(p.get("a")), str(p.get("b"))
    diff, ci = _number(p.get("diff")), _interval(p.get("ci"))
    significant = p.get("significant") is True
    if significant and p.get("better") is not None and str(p.get("better")) == second:
        first, second = second, first
        diff = None if diff is None else -diff
        ci = None if ci is None else (-ci[1], -ci[0])
    means = [(str(p.get(k)), _number(p.get(f"mean_{k}"))) for k in ("a", "b")]
    n = p.get("n")
    return {
        "significant": significant,
        "relation": ">" if significant and p.get("better") is not None else "≠",
        "first": first, "second": second,
        "n": n if isinstance(n, int) and not isinstance(n, bool) else None,
        "means": ", ".join(f"{model}: {metric_value(metric, v)}" for model, v in means),
        "difference": "difference " + metric_value(metric, diff)
        + ("" if ci is None else f" [{metric_value(metric, ci[0])}, {metric_value(metric, ci[1])}]"),
        "p": _p_text(p),
        "note": p.get("note") if isinstance(p.get("note"), str) else None,
    }


def _p_text(p: dict) -> str:
    """"adjusted p = 0.012" (the raw p when no adjusted one is given; "< 0.001" below 0.001)."""
    for key, name in (("p_adjusted", "adjusted p"), ("p", "p")):
        v = _number(p.get(key))
        if v is not None:
            return f"{name} < 0.001" if v < 0.001 else f"{name} = {v:.3f}"
    return ""


def _settings(block: dict, conf: float | None) -> str:
    """The block's confidence, alpha, correction and design as one line."""
    parts = [] if conf is None else [f"{100 * conf:g}% confidence intervals"]
    alpha = _number(block.get("alpha"))
    if alpha is not None:
        parts.append(f"significance level α = {alpha:g}")
    if block.get("correction"):
        parts.append(f"p-values adjusted for multiple comparisons ({block['correction']})")
    design = block.get("design")
    if design:
        parts.append(_DESIGNS.get(str(design), str(design)))
    return "; ".join(parts)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _interval(v: Any) -> tuple[float, float] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        lo, hi = _number(v[0]), _number(v[1])
        if lo is not None and hi is not None:
            return lo, hi
    return None
