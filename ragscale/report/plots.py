"""Comparison plots over run directories (``python -m ragscale.plot``).

One subplot per metric, one box per run (or per run x model): the box is the interquartile
range with the median (orange), whiskers at 1.5 IQR, the mean as a dashed line with a dot,
and the 95% confidence interval of the mean as an error bar (Student-t interval,
mean +- t(0.975, n-1) * s / sqrt(n); no interval for n < 2). ``answered`` (1.0 = the
question was answered) and boolean flags are drawn as "% of records" bars with 95% Wilson
score intervals instead of boxes. Per-record numbers come from
:func:`ragscale.report.summary.record_scalar`; errored records and nulls are left out, as
in summary.json. Modelled on open-rag-eval's ``TRECEvaluator.plot_metrics``.
"""

from __future__ import annotations

import json
import math
import os
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ragscale.errors import UserError, did_you_mean

RATE_TITLES = {"answered": "% questions answered"}
CONFIDENCE = 0.95


# ---------------------------------------------------------------- statistics (no scipy)

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 20000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t distribution with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def norm_ppf(p: float) -> float:
    """Quantile of the standard normal distribution (bisection on erf)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t distribution (bisection on :func:`t_cdf`)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError("t_ppf needs 0 < p < 1 and df > 0")
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    if df > 1e5:  # Cornish-Fisher: exact to ~1e-9 there
        z = norm_ppf(p)
        return z + (z**3 + z) / (4 * df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return (lo + hi) / 2


def mean_ci(n: int, mean: float, sd: float, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Student-t confidence interval of a mean from n, mean and sample sd (ddof=1)."""
    if n < 2 or not math.isfinite(sd):
        return None
    half = t_ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return (mean - half, mean + half)


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Student-t confidence interval of the mean of ``values``; ``None`` for n < 2."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return mean_ci(n, mean, sd, confidence)


def wilson_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson score interval of a proportion k/n; ``None`` for n == 0."""
    if n == 0:
        return None
    z = norm_ppf(0.5 + confidence / 2)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


# ---------------------------------------------------------------- loading

def is_flag(value: Any) -> bool:
    """A boolean metric value (or a list of booleans), e.g. RB_agg_zero_denominator."""
    if isinstance(value, bool):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, bool) for v in value if v is not None) \
        and any(v is not None for v in value)


def is_rate_metric(name: str) -> bool:
    """Metrics drawn as a "% of records" bar rather than a box."""
    return name in RATE_TITLES


def label_runs(run_dirs: Sequence[str]) -> list[str]:
    """Short, distinct labels for run dirs: the basename, or more trailing path parts when
    basenames collide, and a " (2)" suffix for the same dir given twice."""
    parts = [os.path.normpath(os.path.abspath(d)).split(os.sep) for d in run_dirs]
    labels = []
    for p in parts:
        k = 1
        while k < len(p):
            mine = os.sep.join(p[-k:])
            if sum(1 for q in parts if os.sep.join(q[-k:]) == mine and q != p) == 0:
                break
            k += 1
        labels.append(os.sep.join(p[-k:]) or os.sep)
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab} ({seen[lab]})")
    return out


def check_run_dir(run_dir: str) -> str:
    """The run dir's records.jsonl path, or a UserError saying what is missing."""
    if not os.path.isdir(run_dir):
        raise UserError(f"run dir {run_dir} does not exist")
    path = os.path.join(run_dir, "records.jsonl")
    if not os.path.isfile(path):
        raise UserError(f"{run_dir} has no records.jsonl (not a ragscale output_dir?)")
    return path


def read_json(path: str) -> dict | None:
    """A JSON object from ``path``, or None when it is absent or unreadable."""
    try:
        with open(path) as fh:
            obj = json.load(fh)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


@dataclass
class Group:
    """The per-record values of one box (a run, or a run x model)."""

    label: str
    values: dict[str, array] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, array("d")).append(value)


@dataclass
class PlotData:
    groups: list[Group]
    metrics: list[str]  # in plot order
    summary_metrics: list[str]
    seen: set[str]
    flags: set[str]


def load_runs(run_dirs: Sequence[str], *, by_model: bool = False, wanted: Iterable[str] | None = None) -> PlotData:
    """Stream each run's records.jsonl into per-group value arrays (only ``wanted``
    metrics when given, else all)."""
    from ragscale.io.output import iter_records
    from ragscale.report.summary import record_scalar

    paths = [check_run_dir(d) for d in run_dirs]
    want = set(wanted) if wanted is not None else None
    labels = label_runs(run_dirs)
    groups: list[Group] = []
    summary_metrics: list[str] = []
    seen: set[str] = set()
    flags: set[str] = set()
    for run_dir, path, label in zip(run_dirs, paths, labels):
        summ = read_json(os.path.join(run_dir, "summary.json")) or {}
        for m in summ.get("metrics") or []:
            if isinstance(m, str) and m not in summary_metrics:
                summary_metrics.append(m)
        per_model: dict[str, Group] = {}
        run_group = Group(label)
        try:
            for rec in iter_records(path):
                metrics = rec.get("metrics") if isinstance(rec, dict) else None
                if not isinstance(metrics, dict):
                    continue
                seen.update(metrics)
                if rec.get("error") is not None:
                    continue
                if by_model:
                    model = str(rec.get("model_id"))
                    grp = per_model.get(model)
                    if grp is None:
                        grp = per_model[model] = Group(f"{label}\n{model}" if len(run_dirs) > 1 else model)
                else:
                    grp = run_group
                for name, value in metrics.items():
                    if want is not None and name not in want:
                        continue
                    if is_flag(value):
                        flags.add(name)
                    try:
                        v = record_scalar(name, value)
                    except (TypeError, ValueError):
                        continue
                    if v is not None and math.isfinite(v):
                        grp.add(name, v)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read {path}: {exc}") from None
        groups.extend(sorted(per_model.values(), key=lambda g: g.label) if by_model else [run_group])
    return PlotData(groups, [], summary_metrics, seen, flags)


def select_metrics(data: PlotData, requested: Sequence[str] | None) -> list[str]:
    """The metrics to plot: ``requested`` (each must exist, with numeric values), else the
    summary's metrics (or all record metrics without a summary.json) that have numeric
    values, minus boolean flags; ``answered`` goes last (a bar chart)."""
    has_values = {m for g in data.groups for m, v in g.values.items() if len(v)}
    if requested:
        known = set(data.summary_metrics) | data.seen
        for m in requested:
            if m not in known:
                choices = sorted(known)
                raise UserError(f"unknown metric {m!r}{did_you_mean(m, choices)}; the runs have: {', '.join(choices) or 'none'}")
            if m not in has_values:
                raise UserError(f"metric {m!r} has no numeric values in these runs")
        chosen = list(dict.fromkeys(requested))
    else:
        base = data.summary_metrics or sorted(data.seen)
        chosen = [m for m in base if m in has_values and m not in data.flags]
        if "answered" in has_values and "answered" not in chosen:
            chosen.append("answered")
        if not chosen:
            raise UserError("no numeric metrics to plot in these runs")
        chosen = [m for m in chosen if not is_rate_metric(m)] + [m for m in chosen if is_rate_metric(m)]
    return chosen


# ---------------------------------------------------------------- drawing

@dataclass
class BoxStats:
    label: str
    n: int
    mean: float | None
    median: float | None
    ci: tuple[float, float] | None


def box_stats(label: str, values: Sequence[float]) -> BoxStats:
    """n, mean, median and the 95% t-interval of one box's values."""
    import numpy as np

    n = len(values)
    if n == 0:
        return BoxStats(label, 0, None, None, None)
    arr = np.asarray(values, dtype=float)
    return BoxStats(label, n, float(arr.mean()), float(np.median(arr)), t_interval(arr.tolist()))


def _fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}" if abs(v) >= 100 else f"{v:.3f}"


def plot_runs(run_dirs: Sequence[str], output: str, *, metrics: Sequence[str] | None = None,
              by_model: bool = False) -> dict[str, list[BoxStats]]:
    """Draw the comparison figure to ``output`` (format from its extension); return the
    statistics drawn, per metric and box."""
    data = load_runs(run_dirs, by_model=by_model, wanted=metrics or None)
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
    fig.suptitle("ragscale: metric comparison (error bars: 95% CI of the mean, Student-t; rates: Wilson)",
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
    stats = [box_stats(g.label, list(c)) for g, c in zip(groups, cols)]
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
            ax.errorbar([x + 0.36], [s.mean], yerr=[[s.mean - s.ci[0]], [s.ci[1] - s.mean]], fmt="none",
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
    stats, pcts, errs = [], [], [[], []]
    for g, c in zip(groups, cols):
        n = len(c)
        k = sum(1 for v in c if v >= 0.5)
        ci = wilson_interval(k, n)
        pct = 100.0 * k / n if n else 0.0
        stats.append(BoxStats(g.label, n, pct if n else None, None, None if ci is None else (100 * ci[0], 100 * ci[1])))
        pcts.append(pct)
        errs[0].append(pct - 100 * ci[0] if ci else 0)
        errs[1].append(100 * ci[1] - pct if ci else 0)
    ax.bar(positions, pcts, color=[(*c[:3], 0.6) for c in colors], edgecolor="black", width=0.6,
           yerr=errs, capsize=4)
    for x, s, up in zip(positions, stats, errs[1]):
        text = "n/a" if s.n == 0 else f"{s.mean:.1f}%"
        ax.text(x, (s.mean or 0) + up + 1.5, text, ha="center", va="bottom", fontsize=9)
    ax.set_ylim(0, 112)
    ax.set_xlim(0.4, len(groups) + 0.6)
    ax.set_title(RATE_TITLES.get(name, f"{name}: % true"), fontsize=13)
    ax.set_ylabel("% of records")
    handles = [Patch(facecolor=(*colors[i][:3], 0.6), edgecolor="black",
                     label=f"{s.label.replace(chr(10), ' / ')}: "
                           + ("n/a" if s.n == 0 else f"{s.mean:.1f}% ({round(s.mean * s.n / 100)}/{s.n})")
                           + (f" CI [{s.ci[0]:.1f}, {s.ci[1]:.1f}]" if s.ci else ""))
               for i, s in enumerate(stats)]
    handles.append(Line2D([], [], color="black", marker="_", markersize=10, linewidth=1.5,
                          label="95% Wilson interval"))
    return stats, handles
