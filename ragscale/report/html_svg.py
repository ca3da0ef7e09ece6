"""Inline SVG charts of the HTML report (package-private; see :mod:`ragscale.report.html`).

Per metric, one chart of all models: histogram and box for scores, "% of records" bars for
rates. Plain strings, no plotting library, so the report stays one self-contained file.
"""

from __future__ import annotations

import math

from ragscale.report.html import BINS, _Dist, esc, fmt, trunc
from ragscale.report.plots import mean_ci, wilson_interval


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
