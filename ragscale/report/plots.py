"""Comparison plots over run directories (``python -m ragscale.plot``).

One subplot per metric, one box per run (or per run x model): the box is the interquartile
range with the median (orange), whiskers at 1.5 IQR, the mean as a dashed line with a dot,
and the 95% confidence interval of the mean as an error bar (Student-t interval,
mean +- t(0.975, n-1) * s / sqrt(n), clipped to the metric's catalog bounds; no interval for n < 2). ``answered`` (1.0 = the
question was answered) and boolean flags are drawn as "% of records" bars with 95% Wilson
score intervals instead of boxes. Per-record numbers come from
:func:`ragscale.report.summary.record_scalar`; errored records and nulls are left out, as
in summary.json. Modelled on open-rag-eval's ``TRECEvaluator.plot_metrics``.

Reading the run dirs lives in :mod:`ragscale.report.runs`, the statistics in
:mod:`ragscale.stats.intervals`; their public names are importable from here too.
"""

from __future__ import annotations

import math
import os
from array import array
from dataclasses import dataclass
from typing import Sequence

from ragscale.errors import UserError
from ragscale.report.runs import (Group, PlotData, check_run_dir, is_flag, is_rate_metric, label_runs, rate_title,
                                  load_runs, read_json, select_metrics)
from ragscale.stats.intervals import (CONFIDENCE, bounds_of, clip, mean_ci, mean_interval, norm_ppf, t_cdf, t_interval,
                                   t_ppf, wilson_interval)

__all__ = ["CONFIDENCE", "BoxStats", "Group", "PlotData", "box_stats", "check_run_dir", "is_flag",
           "is_rate_metric", "label_runs", "load_runs", "mean_ci", "mean_interval", "norm_ppf", "plot_runs",
           "read_json", "select_metrics", "t_cdf", "t_interval", "t_ppf", "wilson_interval"]


@dataclass
class BoxStats:
    """What one box (or rate bar) shows: n, mean, median and the 95% interval."""

    label: str
    n: int
    mean: float | None
    median: float | None
    ci: tuple[float, float] | None


def box_stats(label: str, values: Sequence[float], metric: str | None = None,
              units: Sequence[str | None] | None = None) -> BoxStats:
    """n, mean, median and the 95% t-interval of one box's values, clipped to ``metric``'s catalog
    bounds (ragscale.stats.intervals.mean_interval); resampling whole units (the cluster-robust
    interval, ragscale.stats.clustered.cluster_mean) when ``units`` labels some of the values."""
    import numpy as np

    n = len(values)
    if n == 0:
        return BoxStats(label, 0, None, None, None)
    arr = np.asarray(values, dtype=float)
    if units is not None and any(u is not None for u in units):
        from ragscale.stats.clustered import cluster_codes, cluster_mean

        est = cluster_mean(arr, cluster_codes(list(units)))
        ci = None if est is None or est["ci"] is None else tuple(est["ci"])
    else:
        ci = t_interval(arr.tolist())
    ci = None if ci is None else clip(ci, bounds_of(metric), (float(arr.min()), float(arr.max())))
    return BoxStats(label, n, float(arr.mean()), float(np.median(arr)), ci)


def _fmt(v: float | None) -> str:
    """A legend number: 1 decimal from 100 up, else 3."""
    if v is None:
        return "n/a"
    return f"{v:.1f}" if abs(v) >= 100 else f"{v:.3f}"


def plot_runs(run_dirs: Sequence[str], output: str, *, metrics: Sequence[str] | None = None,
              by_model: bool = False, cluster_by: str | None = "conversation_id") -> dict[str, list[BoxStats]]:
    """Draw the comparison figure to ``output`` (format from its extension); return the
    statistics drawn, per metric and box (intervals resampling whole ``cluster_by`` units where the
    records carry one)."""
    data = load_runs(run_dirs, by_model=by_model, wanted=metrics or None, cluster_by=cluster_by)
    chosen = select_metrics(data, metrics)
    out_dir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(out_dir):
        raise UserError(f"output folder {out_dir} does not exist")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    groups = data.groups
    colors = [plt.get_cmap("tab10")(i % 10) for i in range(len(groups))]
    ncols = min(3, len(chosen))
    nrows = math.ceil(len(chosen) / ncols)
    width = max(6.0, 1.1 * len(groups) + 3.5)
    fig, axs = plt.subplots(nrows, ncols, figsize=(width * ncols, 6.2 * nrows), squeeze=False)
    stats: dict[str, list[BoxStats]] = {}
    positions = list(range(1, len(groups) + 1))
    tick_lines = 1 + max(g.label.count("\n") + 1 for g in groups)
    for idx, name in enumerate(chosen):
        ax = axs[idx // ncols][idx % ncols]
        cols = [g.values.get(name, array("d")) for g in groups]
        ax.grid(axis="y", linestyle="--", alpha=0.6)
        if is_rate_metric(name) or name in data.flags:
            stats[name], handles = _draw_rate(ax, name, groups, cols, colors, positions, Line2D, Patch)
        else:
            stats[name], handles = _draw_box(ax, name, groups, cols, colors, positions, Line2D, Patch)
        ax.legend(handles=handles, fontsize=8, loc="upper center",
                  bbox_to_anchor=(0.5, -(0.08 + 0.04 * tick_lines)), frameon=False)
        ax.set_xticks(positions)
        ax.set_xticklabels([f"{g.label}\nn={s.n}" for g, s in zip(groups, stats[name])], fontsize=9)
    for idx in range(len(chosen), nrows * ncols):
        axs[idx // ncols][idx % ncols].set_visible(False)
    fig.suptitle("ragscale: metric comparison (error bars: 95% CI of the mean, Student-t within the metric's "
                 "range, whole conversations resampled where records carry one, unadjusted; rates: Wilson)",
                 fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    try:
        fig.savefig(output, dpi=100)
    except (ValueError, OSError) as exc:
        raise UserError(f"cannot write {output}: {exc}") from None
    finally:
        plt.close(fig)
    return stats


def _draw_box(ax, name, groups, cols, colors, positions, Line2D, Patch) -> tuple[list[BoxStats], list]:  # noqa: ANN001
    """Boxes, means and t-intervals of one metric on ``ax``; returns the stats and legend handles."""
    stats = [box_stats(g.label, list(c), name, g.units.get(name)) for g, c in zip(groups, cols)]
    present = [i for i, s in enumerate(stats) if s.n]
    bp = ax.boxplot([list(cols[i]) for i in present], positions=[positions[i] for i in present],
                    widths=0.6, patch_artist=True, showfliers=True,
                    medianprops={"color": "darkorange", "linewidth": 2},
                    flierprops={"marker": "o", "markersize": 3, "alpha": 0.5})
    for box, i in zip(bp["boxes"], present):
        box.set_facecolor((*colors[i][:3], 0.35))
        box.set_edgecolor("black")
    handles = []
    for i in present:
        s, x = stats[i], positions[i]
        ax.hlines(s.mean, x - 0.3, x + 0.3, colors="navy", linestyles="--", linewidth=1.8, zorder=4)
        ax.scatter([x], [s.mean], color="navy", s=30, zorder=5)
        if s.ci is not None:
            # never below 0: equal values' float mean can sit a last bit outside their clipped interval
            below, above = max(0.0, s.mean - s.ci[0]), max(0.0, s.ci[1] - s.mean)
            ax.errorbar([x + 0.36], [s.mean], yerr=[[below], [above]], fmt="none",
                        ecolor="black", elinewidth=1.5, capsize=4, zorder=5)
        ci = f"[{_fmt(s.ci[0])}, {_fmt(s.ci[1])}]" if s.ci else "n/a"
        handles.append(Patch(facecolor=(*colors[i][:3], 0.35), edgecolor="black",
                             label=f"{s.label.replace(chr(10), ' / ')}: mean {_fmt(s.mean)} CI {ci}, "
                                   f"median {_fmt(s.median)}, n={s.n}"))
    handles += [
        Line2D([], [], color="navy", linestyle="--", marker="o", markersize=5, label="mean"),
        Line2D([], [], color="darkorange", linewidth=2, label="median"),
        Line2D([], [], color="black", marker="_", markersize=10, linewidth=1.5, label="95% CI of mean (t)"),
    ]
    allv = [v for i in present for v in cols[i]]
    if allv and min(allv) >= 0 and max(allv) <= 1:
        ax.set_ylim(-0.05, 1.05)
    ax.set_xlim(0.4, len(groups) + 0.75)
    ax.set_title(name, fontsize=13)
    ax.set_ylabel("per-record value")
    return stats, handles


def _draw_rate(ax, name, groups, cols, colors, positions, Line2D, Patch) -> tuple[list[BoxStats], list]:  # noqa: ANN001
    """Bars of "% of records" with Wilson intervals for one rate metric or flag; returns the stats and handles."""
    stats, pcts, errs = [], [], [[], []]
    for g, c in zip(groups, cols):
        n = len(c)
        k = sum(1 for v in c if v >= 0.5)
        ci = wilson_interval(k, n)
        pct = 100.0 * k / n if n else 0.0
        stats.append(BoxStats(g.label, n, pct if n else None, None, None if ci is None else (100 * ci[0], 100 * ci[1])))
        pcts.append(pct)
        errs[0].append(max(0.0, pct - 100 * ci[0]) if ci else 0)  # as in _draw_box: never a last-bit negative
        errs[1].append(max(0.0, 100 * ci[1] - pct) if ci else 0)
    ax.bar(positions, pcts, color=[(*c[:3], 0.6) for c in colors], edgecolor="black", width=0.6,
           yerr=errs, capsize=4)
    for x, s, up in zip(positions, stats, errs[1]):
        text = "n/a" if s.n == 0 else f"{s.mean:.1f}%"
        ax.text(x, (s.mean or 0) + up + 1.5, text, ha="center", va="bottom", fontsize=9)
    ax.set_ylim(0, 112)
    ax.set_xlim(0.4, len(groups) + 0.6)
    ax.set_title(rate_title(name) or f"{name}: % true", fontsize=13)
    ax.set_ylabel("% of records")
    handles = [Patch(facecolor=(*colors[i][:3], 0.6), edgecolor="black",
                     label=f"{s.label.replace(chr(10), ' / ')}: "
                           + ("n/a" if s.n == 0 else f"{s.mean:.1f}% ({round(s.mean * s.n / 100)}/{s.n})")
                           + (f" CI [{s.ci[0]:.1f}, {s.ci[1]:.1f}]" if s.ci else ""))
               for i, s in enumerate(stats)]
    handles.append(Line2D([], [], color="black", marker="_", markersize=10, linewidth=1.5,
                          label="95% Wilson interval"))
    return stats, handles
