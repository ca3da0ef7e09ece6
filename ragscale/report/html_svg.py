"""The geometry of the HTML report's inline SVG charts (package-private; see :mod:`ragscale.report.html`).

Per metric, one chart of all models: histogram and box for scores, "% of records" bars for
rates. This module only computes positions and labels (plain numbers and strings); the
markup is the ``dist_chart`` and ``rate_chart`` macros of ``templates/charts.html.j2``, so
that every text of the run (model names) goes through the templates' autoescaping.
"""

from __future__ import annotations

import math
from typing import Any

from ragscale.report.html_scan import BINS, Dist
from ragscale.report.text import fmt
from ragscale.report.plots import mean_interval, wilson_interval

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac"]  # a color per model, in model order
Row = tuple[str, str, Dist]  # (model, color, statistics)
# the distribution chart: width, left and right ends of the value axis, height of one model's band, top margin
W, L, R, RH, TOP = 860, 190, 830, 74, 8


def dist_chart(metric: str, rows: list[Row]) -> dict[str, Any]:
    """Per-model histogram and box (quartiles from the sample, whiskers min..max, mean with its 95% interval,
    ragscale.stats.intervals.mean_interval)."""
    lo = min(d.lo for _, _, d in rows)
    hi = max(d.hi for _, _, d in rows)
    unit = all(d.unit for _, _, d in rows)
    if unit:
        lo, hi, step = 0.0, 1.0, 0.2
    else:
        lo, hi, step = _nice_range(lo, hi)

    def x(v: float) -> float:
        return L + (R - L) * (v - lo) / (hi - lo)

    out = [_dist_row(metric, model, color, d, TOP + i * RH, x, lo, hi, unit) for i, (model, color, d) in enumerate(rows)]
    ya = TOP + RH * len(rows) + 4
    ticks = [(x(lo + step * k), _tick(lo + step * k)) for k in range(int(round((hi - lo) / step)) + 1)]
    return {"metric": metric, "W": W, "H": TOP + RH * len(rows) + 34, "L": L, "R": R, "rows": out,
            "axis_y": ya, "ticks": ticks}


def _dist_row(metric: str, model: str, color: str, d: Dist, y0: int, x: Any, lo: float, hi: float,
              unit: bool) -> dict:
    """One model's band of :func:`dist_chart`: histogram bars, whiskers, box, median, mean and its CI."""
    import numpy as np

    counts = d.hist if unit else np.histogram(d.sample, bins=BINS, range=(lo, hi))[0].tolist()
    top = max(counts) or 1
    bw = (R - L) / BINS
    bars = [{"x": L + b * bw + 0.5, "y": y0 + 44 - 40 * c / top, "w": bw - 1, "h": 40 * c / top, "count": c}
            for b, c in enumerate(counts) if c]
    q1, med, q3 = d.quantile(0.25), d.quantile(0.5), d.quantile(0.75)
    box = None
    if q1 is not None and q3 is not None and med is not None:
        box = {"x": x(q1), "w": max(1.0, x(q3) - x(q1)), "median": x(med)}
    ci = mean_interval(metric, d.n, d.mean, d.sd, (d.lo, d.hi))
    return {"model": model, "label": _label(model), "n": d.n, "color": color, "y0": y0, "yb": y0 + 58,
            "bars": bars, "lo": x(d.lo), "hi": x(d.hi), "box": box, "mean": x(d.mean), "mean_text": fmt(d.mean),
            "ci": None if ci is None else (x(max(lo, ci[0])), x(min(hi, ci[1])))}


def _nice_range(lo: float, hi: float) -> tuple[float, float, float]:
    """An axis range covering lo..hi on a 1/2/2.5/5 x 10^k grid of at most ~6 ticks, and its step."""
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    raw = (hi - lo) / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step, step


def rate_chart(metric: str, rows: list[Row]) -> dict[str, Any]:
    """Per-model "% of records = 1" bars with 95% Wilson intervals (for ``answered``)."""
    W, L, R, RH, TOP = 960, 190, 780, 34, 8  # its own geometry (the same meaning as above)

    def x(pct: float) -> float:
        return L + (R - L) * pct / 100

    out = []
    for i, (model, color, d) in enumerate(rows):
        k = sum(d.hist[BINS // 2:]) if d.unit else round(d.mean * d.n)
        pct = 100 * k / d.n
        ci = wilson_interval(k, d.n)
        out.append({"model": model, "label": _label(model), "color": color, "y0": TOP + i * RH, "w": x(pct) - L,
                    "k": k, "n": d.n, "pct": f"{pct:.1f}",
                    "ci": None if ci is None else (x(100 * ci[0]), x(100 * ci[1]))})
    return {"metric": metric, "W": W, "H": TOP + RH * len(rows) + 34, "L": L, "R": R, "rows": out,
            "axis_y": TOP + RH * len(rows) + 4, "ticks": [(x(v), f"{v}%") for v in range(0, 101, 20)]}


def _label(model: str) -> str:
    """A model's name as it fits left of the axis (L px): at most 24 characters (the whole name on hover)."""
    return model if len(model) <= 24 else model[:23] + "…"


def _tick(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
