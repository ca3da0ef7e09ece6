"""Judge-vs-human agreement: how far a metric (often a cheap judge's) agrees with human ratings
or labels on the same records, per model and overall, with bootstrap confidence intervals.

Statistics (numpy only; tested against scipy):
- Spearman's rho: Pearson correlation of average ranks (scipy.stats.spearmanr);
- Kendall's tau-b with tie correction (scipy.stats.kendalltau's default);
- Cohen's kappa, unweighted and quadratic-weighted, when both sides are categorical: at most
  ``MAX_CATEGORIES`` distinct values each, and the metric's values among the human scale's
  (the human file's declared categories, else the values the humans used);
- accuracy when both sides are binary (0/1).
An undefined statistic (fewer than 2 records, a constant side, chance agreement of 1) is
``null`` with the reason, never 0. Confidence intervals: percentile bootstrap over records
(resampled with replacement, ``n_boot`` replicates, fixed seed); replicates where the statistic
is undefined are skipped and counted.

Human ratings are read from MT-RAG's human-evaluation layout (``evaluations`` with per-annotator
``annotations``; several annotators are reduced by the metric's ``aggregator``, median by
default for categorical metrics, mean otherwise) or from plain per-record label columns (JSONL
or CSV with ``task_id`` and optional ``model_id``, or ``record_key``, or ``query_id`` and
``query_run``).
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ragscale.errors import UserError

MAX_CATEGORIES = 10
ALL = "ALL"
_ID_COLUMNS = ("task_id", "model_id", "record_key", "query_id", "query_run")
_PSEUDO_ANNOTATORS = ("system", "composite")


# ---------------------------------------------------------------- statistics


def _rank(a: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), tied values sharing the mean of their ranks."""
    order = np.argsort(a, kind="mergesort")
    s = a[order]
    first = np.r_[True, s[1:] != s[:-1]]  # start of each run of equal values
    group = np.cumsum(first) - 1  # run index of each sorted position
    starts = np.r_[np.nonzero(first)[0], len(s)]  # run boundaries
    avg = (starts[:-1] + starts[1:] - 1) / 2 + 1  # mean 1-based rank of each run
    ranks = np.empty(len(a))
    ranks[order] = avg[group]
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return None if den == 0 else float(dx @ dy) / den


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); ``None`` when undefined."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2:
        return None
    return _pearson(_rank(x), _rank(y))


def kendall_tau_b(x: Sequence[float], y: Sequence[float], block: int = 2048) -> float | None:
    """Kendall's tau-b: Σ sign(dx)·sign(dy) / sqrt(pairs untied in x · pairs untied in y),
    over all pairs (computed in blocks, O(n²)); ``None`` when undefined."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < 2:
        return None
    s = nx = ny = 0.0
    for i in range(0, n, block):
        sx = np.sign(x[i:i + block, None] - x[None, :])
        sy = np.sign(y[i:i + block, None] - y[None, :])
        s += float((sx * sy).sum())
        nx += float(np.abs(sx).sum())
        ny += float(np.abs(sy).sum())
    return None if nx == 0 or ny == 0 else s / math.sqrt(nx * ny)


def cohen_kappa(x: Sequence[float], y: Sequence[float], weights: str | None = None) -> float | None:
    """Cohen's kappa of two raters' categories (values compared exactly); ``weights="quadratic"``
    weights disagreements by the squared distance of the categories' positions in sorted order."""
    x, y = [float(v) for v in x], [float(v) for v in y]
    n = len(x)
    if n < 1:
        return None
    cats = sorted(set(x) | set(y))
    idx = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    obs = np.zeros((k, k))
    for a, b in zip(x, y):
        obs[idx[a], idx[b]] += 1
    obs /= n
    exp = np.outer(obs.sum(1), obs.sum(0))
    if weights is None:
        w = 1.0 - np.eye(k)
    elif weights == "quadratic":
        if k < 2:
            return None
        i = np.arange(k)
        w = (i[:, None] - i[None, :]) ** 2 / (k - 1) ** 2
    else:
        raise ValueError(f"weights must be None or 'quadratic', got {weights!r}")
    den = float((w * exp).sum())
    return None if den == 0 else 1.0 - float((w * obs).sum()) / den


def accuracy(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Share of records where both sides give the same label."""
    return sum(1 for a, b in zip(x, y) if a == b) / len(x) if len(x) else None


def _why_undefined(x: np.ndarray, y: np.ndarray) -> str:
    if len(x) < 2:
        return f"{len(x)} paired record(s); need at least 2"
    if len(set(x.tolist())) < 2:
        return "the human ratings are constant"
    if len(set(y.tolist())) < 2:
        return "the metric is constant"
    return "undefined"


STATS = ("spearman", "kendall", "kappa", "kappa_quadratic", "accuracy")


def is_categorical(human: Sequence[float], metric: Sequence[float], scale: Iterable[float] | None = None) -> bool:
    """Both sides take at most MAX_CATEGORIES values and the metric's values are on the human scale."""
    hs, ms = set(human), set(metric)
    allowed = set(scale) if scale else hs
    return len(hs) <= MAX_CATEGORIES and len(ms) <= MAX_CATEGORIES and ms <= allowed | hs


def is_binary(human: Sequence[float], metric: Sequence[float]) -> bool:
    return set(human) <= {0.0, 1.0} and set(metric) <= {0.0, 1.0}


def statistics_for(human: Sequence[float], metric: Sequence[float], *, scale: Iterable[float] | None = None,
                   n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict:
    """Every applicable statistic of paired (human, metric) values, each as
    ``{"value", "ci": [lo, hi] | None, "reason"?, "boot_undefined"?}``; inapplicable ones absent."""
    h, m = np.asarray(human, float), np.asarray(metric, float)
    fns: dict[str, Any] = {"spearman": spearman, "kendall": kendall_tau_b}
    if is_categorical(h.tolist(), m.tolist(), scale):
        fns["kappa"] = cohen_kappa
        fns["kappa_quadratic"] = lambda a, b: cohen_kappa(a, b, "quadratic")
    if is_binary(h.tolist(), m.tolist()):
        fns["accuracy"] = accuracy
    out: dict[str, dict] = {}
    rng = np.random.default_rng(seed)
    samples = [rng.integers(0, len(h), len(h)) for _ in range(n_boot)] if len(h) >= 2 else []
    alpha = (1 - confidence) / 2
    for name, fn in fns.items():
        value = fn(h, m)
        entry: dict[str, Any] = {"value": value, "ci": None}
        if value is None:
            entry["reason"] = _why_undefined(h, m)
        elif samples:
            reps, bad = [], 0
            for idx in samples:
                r = fn(h[idx], m[idx])
                if r is None:
                    bad += 1
                else:
                    reps.append(r)
            if reps:
                entry["ci"] = [float(np.quantile(reps, alpha)), float(np.quantile(reps, 1 - alpha))]
            entry["boot_undefined"] = bad
        out[name] = entry
    return out


# ---------------------------------------------------------------- reading


@dataclass
class HumanRatings:
    """Human values per record key and metric, plus each metric's declared scale (if any)."""

    source: str
    layout: str
    values: dict[tuple, dict[str, float]] = field(default_factory=dict)  # key -> metric -> value
    annotators: dict[tuple, dict[str, int]] = field(default_factory=dict)
    scales: dict[str, list[float]] = field(default_factory=dict)
    skipped: int = 0

    def metrics(self) -> list[str]:
        return sorted({m for v in self.values.values() for m in v})


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        s = value.strip().lower()
        if s in ("yes", "true"):
            return 1.0
        if s in ("no", "false"):
            return 0.0
        try:
            f = float(s)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _key(row: dict) -> tuple:
    """The join key of a human row: record_key, else (query_id, query_run, model?), else (task_id, model?)."""
    if row.get("record_key") not in (None, ""):
        return ("record_key", str(row["record_key"]))
    model = str(row["model_id"]) if row.get("model_id") not in (None, "") else None
    if row.get("query_id") not in (None, ""):
        return ("query", str(row["query_id"]), str(row.get("query_run") or "1"), model)
    if row.get("task_id") not in (None, ""):
        return ("task", str(row["task_id"]), model)
    raise ValueError("no task_id, record_key or query_id")


def _read_mtrag(data: dict, path: str) -> HumanRatings:
    out = HumanRatings(path, "mtrag-human-evaluation")
    declared = {m.get("name"): m for m in data.get("metrics") or [] if isinstance(m, dict)}
    human = {n for n, m in declared.items() if m.get("author") == "human"} if declared else None
    for m in declared.values():
        if m.get("values"):
            out.scales[m["name"]] = sorted(v["numeric_value"] for v in m["values"] if "numeric_value" in v)
    for i, ev in enumerate(data.get("evaluations") or []):
        if not isinstance(ev, dict) or not isinstance(ev.get("annotations"), dict) or ev.get("task_id") is None:
            out.skipped += 1
            continue
        key = ("task", str(ev["task_id"]), str(ev["model_id"]) if ev.get("model_id") else None)
        for metric, by_annotator in ev["annotations"].items():
            if human is not None and metric not in human:
                continue
            if not isinstance(by_annotator, dict):
                continue
            spec = declared.get(metric, {})
            mapping = {str(v.get("value")): v.get("numeric_value") for v in spec.get("values") or []}
            vals = []
            for annotator, a in by_annotator.items():
                if human is None and annotator in _PSEUDO_ANNOTATORS:
                    continue
                raw = a.get("value") if isinstance(a, dict) else a
                v = _num(mapping.get(str(raw), raw))
                if v is not None:
                    vals.append(v)
            if not vals:
                continue
            agg = spec.get("aggregator") or ("median" if spec.get("type") == "categorical" else "average")
            value = statistics.median(vals) if agg == "median" else sum(vals) / len(vals)
            out.values.setdefault(key, {})[metric] = float(value)
            out.annotators.setdefault(key, {})[metric] = len(vals)
    return out


def _read_rows(rows: Iterable[dict], path: str, layout: str) -> HumanRatings:
    out = HumanRatings(path, layout)
    for i, row in enumerate(rows):
        try:
            key = _key(row)
        except ValueError as e:
            raise UserError(f"{path}: row {i + 1}: {e}") from None
        for col, raw in row.items():
            if col in _ID_COLUMNS or raw in (None, ""):
                continue
            v = _num(raw)
            if v is None:
                out.skipped += 1
                continue
            out.values.setdefault(key, {})[col] = v
            out.annotators.setdefault(key, {})[col] = 1
    return out


def read_human(path: str) -> HumanRatings:
    """Human ratings from ``path`` (MT-RAG human-evaluation JSON, JSONL or CSV label columns)."""
    if not os.path.isfile(path):
        raise UserError(f"--human {path}: no such file")
    try:
        if path.endswith(".csv"):
            with open(path, newline="", encoding="utf-8") as fh:
                return _read_rows(list(csv.DictReader(fh)), path, "csv")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UserError(f"--human {path}: cannot read: {e}") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and "evaluations" in data:
        return _read_mtrag(data, path)
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                obj = json.loads(line)
            except ValueError:
                raise UserError(f"--human {path}: line {n} is not JSON (expected MT-RAG's human-evaluation JSON, "
                                "JSONL or CSV)") from None
            if not isinstance(obj, dict):
                raise UserError(f"--human {path}: line {n} is not a JSON object")
            rows.append(obj)
    if isinstance(data, list):
        rows = [r for r in data if isinstance(r, dict)]
    return _read_rows(rows, path, "jsonl")


# ---------------------------------------------------------------- joining and reporting


def _run_keys(rec: dict) -> list[tuple]:
    """The keys a human row may use for this run record (most specific first)."""
    model = rec.get("model_id")
    keys: list[tuple] = []
    rk = (rec.get("ragscale") or {}).get("record_key")
    if rk:
        keys.append(("record_key", rk))
    if rec.get("query_id") is not None:
        qid, run = str(rec["query_id"]), str(rec.get("query_run") or "1")
        keys += [("query", qid, run, model), ("query", qid, run, None)]
    if rec.get("task_id") is not None:
        keys += [("task", str(rec["task_id"]), model), ("task", str(rec["task_id"]), None)]
    return keys


def parse_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``["faithfulness=RL_F", ...]`` -> {human metric: run metric}."""
    out = {}
    for p in pairs:
        if "=" not in p or not all(s.strip() for s in p.split("=", 1)):
            raise UserError(f"--pair {p!r}: expected HUMAN=METRIC, e.g. faithfulness=RL_F")
        h, m = (s.strip() for s in p.split("=", 1))
        out[h] = m
    return out


def agreement(run_dir: str, human_path: str, pairs: Sequence[str] = (), *, n_boot: int = 1000,
              seed: int = 0) -> dict:
    """Agreement between a run's per-record metrics and human ratings (see the module docstring)."""
    from ragscale.io.output import iter_records
    from ragscale.report.summary import record_scalar

    records_path = os.path.join(run_dir, "records.jsonl")
    if not os.path.isfile(records_path):
        raise UserError(f"{run_dir}: no records.jsonl (not a ragscale run directory)")
    human = read_human(human_path)
    if not human.values:
        raise UserError(f"--human {human_path}: no human ratings found")
    explicit = parse_pairs(pairs)
    run_metrics: set[str] = set()
    matched: list[tuple[dict, dict]] = []  # (run record, human values)
    total = errored = 0
    for rec in iter_records(records_path):
        total += 1
        run_metrics |= set((rec.get("metrics") or {}).keys())
        hv = next((human.values[k] for k in _run_keys(rec) if k in human.values), None)
        if hv is None:
            continue
        if rec.get("error"):
            errored += 1
            continue
        matched.append((rec, hv))
    hnames = human.metrics()
    chosen: dict[str, str] = {}
    lower = {m.lower(): m for m in run_metrics}
    for h in hnames:
        if h in explicit:
            chosen[h] = explicit[h]
        elif h.lower() in lower and not explicit:
            chosen[h] = lower[h.lower()]
    for h, m in explicit.items():
        if h not in hnames:
            raise UserError(f"--pair {h}={m}: {h!r} is not a human metric in {human_path}; "
                            f"human metrics: {', '.join(hnames)}")
        if m not in run_metrics:
            raise UserError(f"--pair {h}={m}: {m!r} is not a metric of the run; run metrics: "
                            f"{', '.join(sorted(run_metrics))}")
    if not chosen:
        raise UserError(f"no metric pairs: the human metrics ({', '.join(hnames)}) share no name with the run's "
                        f"({', '.join(sorted(run_metrics))}); map them with --pair HUMAN=METRIC")
    if not matched:
        raise UserError(f"no record of {run_dir} has human ratings in {human_path} "
                        f"({total} run records; match on task_id [+ model_id], record_key or query_id/query_run)")
    rows = []
    for h, m in chosen.items():
        groups: dict[str, tuple[list, list]] = {}
        excluded = 0
        for rec, hv in matched:
            hval = hv.get(h)
            mval = record_scalar(m, (rec.get("metrics") or {}).get(m))
            if hval is None or mval is None:
                excluded += 1
                continue
            for g in (rec.get("model_id") or "?", ALL):
                groups.setdefault(g, ([], []))
                groups[g][0].append(hval)
                groups[g][1].append(mval)
        for g in sorted(groups, key=lambda g: (g == ALL, g)):
            hs, ms = groups[g]
            rows.append({"human": h, "metric": m, "model": g, "n": len(hs), "excluded_null": excluded,
                         **statistics_for(hs, ms, scale=human.scales.get(h), n_boot=n_boot, seed=seed)})
        if not groups:
            rows.append({"human": h, "metric": m, "model": ALL, "n": 0, "excluded_null": excluded,
                         "spearman": {"value": None, "ci": None, "reason": "no record has both values"}})
    return {"run_dir": os.path.abspath(run_dir), "human": {"path": os.path.abspath(human_path), "layout": human.layout,
                                                             "records": len(human.values), "skipped": human.skipped},
            "records": {"run": total, "matched": len(matched) + errored, "errored_excluded": errored},
            "bootstrap": {"replicates": n_boot, "seed": seed, "confidence": 0.95, "method": "percentile"},
            "pairs": chosen, "rows": rows}


def _fmt(entry: dict | None) -> str:
    if not entry:
        return "–"
    if entry["value"] is None:
        return "n/a"
    ci = entry.get("ci")
    return f"{entry['value']:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def to_markdown(result: dict) -> str:
    """The agreement table: one row per (human metric, run metric, model)."""
    head = ["human", "metric", "model", "n", *STATS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result["rows"]:
        lines.append("| " + " | ".join([r["human"], r["metric"], r["model"], str(r["n"]),
                                        *(_fmt(r.get(s)) for s in STATS)]) + " |")
    return "\n".join(lines)


def write_outputs(result: dict, out_dir: str) -> dict[str, str]:
    """agreement.json, agreement.csv, agreement.md and agreement.png in ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"agreement.{k}") for k in ("json", "csv", "md", "png")}
    with open(paths["json"], "w") as fh:
        json.dump(result, fh, indent=2)
    with open(paths["csv"], "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["human", "metric", "model", "n", *(f"{s}{x}" for s in STATS for x in ("", "_ci_low", "_ci_high"))])
        for r in result["rows"]:
            cells = []
            for s in STATS:
                e = r.get(s) or {}
                ci = e.get("ci") or [None, None]
                cells += [e.get("value"), ci[0], ci[1]]
            w.writerow([r["human"], r["metric"], r["model"], r["n"], *cells])
    with open(paths["md"], "w") as fh:
        fh.write(to_markdown(result) + "\n")
    plot(result, paths["png"])
    return paths


def plot(result: dict, path: str) -> None:
    """Spearman's rho with its CI per model and overall, one panel per metric pair."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = list(dict.fromkeys((r["human"], r["metric"]) for r in result["rows"]))
    fig, axes = plt.subplots(len(pairs), 1, figsize=(7, 0.6 + 0.45 * max(2, len(result["rows"]))), squeeze=False)
    for ax, (h, m) in zip(axes[:, 0], pairs):
        rows = [r for r in result["rows"] if (r["human"], r["metric"]) == (h, m)]
        for y, r in enumerate(rows):
            e = r.get("spearman") or {}
            if e.get("value") is None:
                ax.text(0, y, "undefined", va="center", ha="center", fontsize=8, color="grey")
                continue
            lo, hi = e["ci"] or (e["value"], e["value"])
            ax.errorbar(e["value"], y, xerr=[[e["value"] - lo], [hi - e["value"]]], fmt="o",
                        color="black" if r["model"] == ALL else "tab:blue", capsize=3)
        ax.set_yticks(range(len(rows)), [f"{r['model']} (n={r['n']})" for r in rows])
        ax.axvline(0, color="grey", lw=0.8, ls=":")
        ax.set_xlim(-1.05, 1.05)
        ax.set_title(f"{h} (human) vs {m}: Spearman rho, 95% bootstrap CI", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
