"""Judge-vs-human agreement: how far a metric (often a cheap judge's) agrees with human ratings
or labels on the same records, per model and overall, with bootstrap confidence intervals.

Statistics (numpy only; tested against scipy):
- Spearman's rho: Pearson correlation of average ranks (scipy.stats.spearmanr);
- Kendall's tau-b with tie correction (scipy.stats.kendalltau's default), by merge sort;
- Cohen's kappa, unweighted and quadratic-weighted ((a - b)² of the values), when both sides
  are categorical: at most ``MAX_CATEGORIES`` distinct values each, and the metric's values
  among the human scale's (the human file's declared categories, else the values the humans
  used); decided once per metric pair;
- accuracy when both sides are binary (0/1).
An undefined statistic (fewer than 2 records, a constant side, chance agreement of 1) is
``null`` with the reason, never 0. Confidence intervals: percentile bootstrap over records
(resampled with replacement, ``n_boot`` replicates, fixed seed); replicates where the statistic
is undefined are skipped and counted.

Human ratings are read from MT-RAG's human-evaluation layout (``evaluations`` with per-annotator
``annotations``; several annotators are reduced by the metric's ``aggregator``, median by
default for categorical metrics, mean otherwise) or from plain per-record label columns (JSONL
or CSV with ``task_id`` and optional ``model_id``, or ``record_key``, or ``query_id`` and
``query_run``; several rows for one record are averaged).
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
_ANNOTATOR_COLUMNS = ("annotator", "annotator_id", "rater", "rater_id")
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


def _inversions(r: np.ndarray) -> int:
    """Pairs i < j with r[i] > r[j] of non-negative integers: a bottom-up merge sort in numpy
    (each level counts the inversions between neighbouring sorted blocks with one searchsorted)."""
    n = len(r)
    if n < 2:
        return 0
    size = 1 << (n - 1).bit_length()
    k = int(r.max()) + 2  # values of a block live in [b*k, b*k + k - 1]; padding k - 1 sorts last
    a = np.full(size, k - 1, dtype=np.int64)
    a[:n] = r
    inv, w = 0, 1
    while w < size:
        nb = size // (2 * w)
        blocks = a.reshape(nb, 2, w)  # each half-block is sorted
        off = (np.arange(nb, dtype=np.int64) * k)[:, None]
        pos = np.searchsorted((blocks[:, 0, :] + off).ravel(), (blocks[:, 1, :] + off).ravel(), side="right")
        inv += int(nb * w * w - (pos - np.repeat(np.arange(nb) * w, w)).sum())  # left elements > each right one
        a = np.sort(blocks.reshape(nb, 2 * w), axis=1).ravel()
        w *= 2
    return inv


def _tied_pairs(change: np.ndarray) -> int:
    """Pairs within runs of equal values, given ``change[i]``: sorted item i+1 differs from item i."""
    bounds = np.r_[0, np.nonzero(change)[0] + 1, len(change) + 1]
    t = np.diff(bounds)
    return int((t * (t - 1) // 2).sum())


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (tie-corrected, as scipy.stats.kendalltau's default), in O(n log² n):
    (concordant - discordant) / sqrt((n0 - ties in x) · (n0 - ties in y)); ``None`` when undefined."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < 2:
        return None
    n0 = n * (n - 1) // 2
    order = np.lexsort((y, x))  # by x, ties in x by y: pairs tied in x are never inversions
    xs, ys = x[order], y[order]
    xchange = xs[1:] != xs[:-1]
    xtie, ntie = _tied_pairs(xchange), _tied_pairs(xchange | (ys[1:] != ys[:-1]))
    ysorted = np.sort(y)
    ytie = _tied_pairs(ysorted[1:] != ysorted[:-1])
    if xtie == n0 or ytie == n0:
        return None
    dis = _inversions(np.searchsorted(ysorted, ys))  # y as integer ranks
    return float(n0 - xtie - ytie + ntie - 2 * dis) / math.sqrt(float(n0 - xtie) * float(n0 - ytie))


def cohen_kappa(x: Sequence[float], y: Sequence[float], weights: str | None = None) -> float | None:
    """Cohen's kappa of two raters' categories (values compared exactly): 1 - Σ w·observed /
    Σ w·expected-by-chance over the confusion table. Unweighted: w = 1 off the diagonal;
    ``weights="quadratic"`` (ordinal labels): w = (a - b)², the squared distance of the values
    (equal to sklearn's quadratic weights on an evenly spaced scale, and unchanged by categories
    nobody used, so bootstrap replicates stay comparable). ``None`` when chance agreement is total."""
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
        c = np.asarray(cats)
        w = (c[:, None] - c[None, :]) ** 2
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
    if len(set(x.tolist())) < 2 and len(set(y.tolist())) < 2:
        return "both sides are constant"
    if len(set(x.tolist())) < 2:
        return "the human ratings are constant"
    if len(set(y.tolist())) < 2:
        return "the metric is constant"
    return "undefined"


STATS = ("spearman", "kendall", "kappa", "kappa_quadratic", "accuracy")


def is_categorical(human: Sequence[float], metric: Sequence[float], scale: Iterable[float] | None = None) -> bool:
    """Both sides take at most MAX_CATEGORIES values and the metric's values are on the human scale
    (``scale``, else the values the humans used)."""
    hs, ms = set(human), set(metric)
    allowed = set(scale) if scale else hs
    return len(hs) <= MAX_CATEGORIES and len(ms) <= MAX_CATEGORIES and ms <= allowed | hs


def is_binary(human: Sequence[float], metric: Sequence[float]) -> bool:
    """Both sides are 0/1 labels."""
    return set(human) <= {0.0, 1.0} and set(metric) <= {0.0, 1.0}


def statistics_for(human: Sequence[float], metric: Sequence[float], *, scale: Iterable[float] | None = None,
                   categorical: bool | None = None, binary: bool | None = None, n_boot: int = 1000,
                   seed: int = 0, confidence: float = 0.95) -> dict:
    """Every applicable statistic of paired (human, metric) values, each as
    ``{"value", "ci": [lo, hi] | None, "reason"?, "boot_undefined"?}``; inapplicable ones absent.
    ``categorical`` / ``binary`` (kappa / accuracy apply) are decided from the data when ``None``."""
    h, m = np.asarray(human, float), np.asarray(metric, float)
    n = len(h)
    fns: dict[str, Any] = {"spearman": spearman, "kendall": kendall_tau_b}
    if categorical if categorical is not None else is_categorical(h.tolist(), m.tolist(), scale):
        fns["kappa"] = cohen_kappa
        fns["kappa_quadratic"] = lambda a, b: cohen_kappa(a, b, "quadratic")
    if binary if binary is not None else is_binary(h.tolist(), m.tolist()):
        fns["accuracy"] = accuracy
    out: dict[str, dict] = {}
    for name, fn in fns.items():
        value = fn(h, m) if n >= 2 else None
        out[name] = {"value": value, "ci": None}
        if value is None:
            out[name]["reason"] = _why_undefined(h, m)
    live = [name for name in fns if out[name]["value"] is not None]
    if live and n_boot > 0:
        reps: dict[str, list[float]] = {name: [] for name in live}
        rng = np.random.default_rng(seed)
        for _ in range(n_boot):  # the same resampled records for every statistic
            idx = rng.integers(0, n, n)
            hb, mb = h[idx], m[idx]
            for name in live:
                r = fns[name](hb, mb)
                if r is not None:
                    reps[name].append(r)
        alpha = (1 - confidence) / 2
        for name in live:
            if reps[name]:
                out[name]["ci"] = [float(np.quantile(reps[name], alpha)), float(np.quantile(reps[name], 1 - alpha))]
            out[name]["boot_undefined"] = n_boot - len(reps[name])
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
    skipped: int = 0  # MT-RAG evaluations without task_id or annotations
    non_numeric: dict[str, int] = field(default_factory=dict)  # plain layout: column -> cells ignored

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


def _aggregate(vals: list[float], aggregator: str) -> float:
    return float(statistics.median(vals) if aggregator == "median" else sum(vals) / len(vals))


def _read_mtrag(data: dict, path: str) -> HumanRatings:
    """MT-RAG's human-evaluation layout: the human metrics' annotators per (task_id, model_id),
    categorical values mapped to their ``numeric_value`` and reduced by the metric's aggregator."""
    out = HumanRatings(path, "mtrag-human-evaluation")
    declared = {m.get("name"): m for m in data.get("metrics") or [] if isinstance(m, dict)}
    human = {n for n, m in declared.items() if m.get("author") == "human"} if declared else None
    for m in declared.values():
        if m.get("values"):
            out.scales[m["name"]] = sorted(float(v["numeric_value"]) for v in m["values"]
                                           if isinstance(v, dict) and _num(v.get("numeric_value")) is not None)
    collected: dict[tuple, dict[str, list[float]]] = {}
    for ev in data.get("evaluations") or []:
        if not isinstance(ev, dict) or not isinstance(ev.get("annotations"), dict) or ev.get("task_id") is None:
            out.skipped += 1
            continue
        key = ("task", str(ev["task_id"]), str(ev["model_id"]) if ev.get("model_id") not in (None, "") else None)
        for metric, by_annotator in ev["annotations"].items():
            if (human is not None and metric not in human) or not isinstance(by_annotator, dict):
                continue
            mapping = {str(v.get("value")): v.get("numeric_value") for v in declared.get(metric, {}).get("values") or []
                       if isinstance(v, dict)}
            for annotator, a in by_annotator.items():
                if annotator in _PSEUDO_ANNOTATORS:  # algorithmic values stored beside the humans'
                    continue
                raw = a.get("value") if isinstance(a, dict) else a
                v = _num(mapping.get(str(raw), raw))
                if v is not None:
                    collected.setdefault(key, {}).setdefault(metric, []).append(v)
    for key, by_metric in collected.items():
        for metric, vals in by_metric.items():
            spec = declared.get(metric, {})
            agg = spec.get("aggregator") or ("median" if spec.get("type") == "categorical" else "average")
            out.values.setdefault(key, {})[metric] = _aggregate(vals, agg)
            out.annotators.setdefault(key, {})[metric] = len(vals)
    return out


def _read_rows(rows: Iterable[dict], path: str, layout: str) -> HumanRatings:
    """Plain label columns; several rows for one record (one per annotator) are averaged."""
    out = HumanRatings(path, layout)
    collected: dict[tuple, dict[str, list[float]]] = {}
    for i, row in enumerate(rows):
        try:
            key = _key(row)
        except ValueError as e:
            raise UserError(f"{path}: row {i + 1}: {e}") from None
        for col, raw in row.items():
            if col is None or col in _ID_COLUMNS or col in _ANNOTATOR_COLUMNS or raw in (None, ""):
                continue
            v = _num(raw)
            if v is None:
                out.non_numeric[col] = out.non_numeric.get(col, 0) + 1
                continue
            collected.setdefault(key, {}).setdefault(col, []).append(v)
    for key, by_metric in collected.items():
        for col, vals in by_metric.items():
            out.values.setdefault(key, {})[col] = sum(vals) / len(vals)
            out.annotators.setdefault(key, {})[col] = len(vals)
    return out


def read_human(path: str) -> HumanRatings:
    """Human ratings from ``path``: MT-RAG human-evaluation JSON, a JSON list of row objects,
    JSONL rows, or CSV (by the ``.csv`` suffix) with label columns."""
    if not os.path.isfile(path):
        raise UserError(f"--human {path}: no such file")
    try:
        if path.lower().endswith(".csv"):
            with open(path, newline="", encoding="utf-8-sig") as fh:  # -sig: spreadsheets' byte-order mark
                rows = list(csv.DictReader(fh))
            return _read_rows(rows, path, "csv")
        with open(path, encoding="utf-8-sig") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UserError(f"--human {path}: cannot read: {e}") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and "evaluations" in data:
        return _read_mtrag(data, path)
    if isinstance(data, list):
        if not all(isinstance(r, dict) for r in data):
            raise UserError(f"--human {path}: a JSON list must hold one object per rated record")
        return _read_rows(data, path, "json")
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


def _describe(key: tuple) -> str:
    if key[0] == "record_key":
        return f"record_key={key[1]}"
    names = ("query_id", "query_run", "model_id") if key[0] == "query" else ("task_id", "model_id")
    return ", ".join(f"{n}={v}" for n, v in zip(names, key[1:]) if v is not None)


def agreement(run_dir: str, human_path: str, pairs: Sequence[str] = (), *, n_boot: int = 1000,
              seed: int = 0) -> dict:
    """Agreement between a run's per-record metrics and human ratings (see the module docstring):
    ``{"rows": [{"human", "metric", "model", "n", "excluded_error", "excluded_null",
    "annotators_mean", "spearman": {...}, ...}], "records": {...}, ...}``."""
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
    matched: list[tuple[dict, tuple]] = []  # (run record, human key)
    used: set[tuple] = set()
    total = errored = 0
    example_run: tuple | None = None
    try:
        for rec in iter_records(records_path):
            if not isinstance(rec, dict):
                raise ValueError("not an object")
            total += 1
            run_metrics |= set((rec.get("metrics") or {}).keys())
            keys = _run_keys(rec)
            example_run = example_run or (keys[-1] if keys else None)
            key = next((k for k in keys if k in human.values), None)
            if key is None:
                continue
            used.add(key)
            errored += bool(rec.get("error"))
            matched.append((rec, key))
    except ValueError as e:
        raise UserError(f"{records_path}: line {total + 1} is not a JSON record: {e}") from None
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
        hint = f"; e.g. human {_describe(next(iter(human.values)))}"
        hint += f" vs run {_describe(example_run)}" if example_run else ""
        raise UserError(f"no record of {run_dir} has human ratings in {human_path} ({total} run records; match on "
                        f"task_id [+ model_id], record_key or query_id/query_run{hint})")
    rows = []
    for h, m in chosen.items():  # which statistics apply is decided once per pair, on all its records
        groups: dict[str, dict] = {}
        for rec, key in matched:
            hval = human.values[key].get(h)
            if hval is None:  # not rated on this metric
                continue
            mval = None if rec.get("error") else record_scalar(m, (rec.get("metrics") or {}).get(m))
            for g in (rec.get("model_id") or "?", ALL):
                acc = groups.setdefault(g, {"h": [], "m": [], "annotators": 0, "error": 0, "null": 0})
                if rec.get("error"):
                    acc["error"] += 1
                elif mval is None:
                    acc["null"] += 1
                else:
                    acc["h"].append(hval)
                    acc["m"].append(mval)
                    acc["annotators"] += human.annotators[key][h]
        every = groups.get(ALL, {"h": [], "m": []})
        kinds = {"categorical": is_categorical(every["h"], every["m"], human.scales.get(h)),
                 "binary": is_binary(every["h"], every["m"])}
        for g in sorted(groups, key=lambda g: (g == ALL, g)):
            acc = groups[g]
            n = len(acc["h"])
            row = {"human": h, "metric": m, "model": g, "n": n, "excluded_error": acc["error"],
                   "excluded_null": acc["null"], "annotators_mean": acc["annotators"] / n if n else None}
            if n:
                row.update(statistics_for(acc["h"], acc["m"], scale=human.scales.get(h), n_boot=n_boot,
                                          seed=seed, **kinds))
            else:
                row["spearman"] = {"value": None, "ci": None, "reason": "no rated record has a value of the metric"}
            rows.append(row)
    return {"run_dir": os.path.abspath(run_dir),
            "human": {"path": os.path.abspath(human_path), "layout": human.layout, "records": len(human.values),
                      "unmatched": len(human.values) - len(used), "skipped": human.skipped,
                      "non_numeric": human.non_numeric},
            "records": {"run": total, "matched": len(matched), "errored_excluded": errored},
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
    """The agreement table (one row per human metric, run metric and model; value [95% CI],
    "–" where a statistic does not apply), then why any "n/a" is undefined."""
    head = ["human", "metric", "model", "n", *STATS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for r in result["rows"]:
        lines.append("| " + " | ".join([r["human"], r["metric"], r["model"], str(r["n"]),
                                        *(_fmt(r.get(s)) for s in STATS)]) + " |")
        reasons = dict.fromkeys(r[s]["reason"] for s in STATS if r.get(s) and r[s].get("reason"))
        if reasons:
            notes.append(f"- n/a for {r['human']} vs {r['metric']}, {r['model']}: {'; '.join(reasons)}")
        excluded = [f"{r[k]} {what}" for k, what in (("excluded_error", "with an error"),
                                                      ("excluded_null", "with a null metric")) if r.get(k)]
        if excluded and r["model"] == ALL:
            notes.append(f"- {r['human']} vs {r['metric']}: rated records left out: {', '.join(excluded)}")
    return "\n".join(lines + ([""] + notes if notes else []))


def write_outputs(result: dict, out_dir: str) -> dict[str, str]:
    """agreement.json, agreement.csv, agreement.md and agreement.png in ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"agreement.{k}") for k in ("json", "csv", "md", "png")}
    with open(paths["json"], "w") as fh:
        json.dump(result, fh, indent=2)
    with open(paths["csv"], "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["human", "metric", "model", "n", "excluded_error", "excluded_null", "annotators_mean",
                    *(f"{s}{x}" for s in STATS for x in ("", "_ci_low", "_ci_high"))])
        for r in result["rows"]:
            cells = []
            for s in STATS:
                e = r.get(s) or {}
                ci = e.get("ci") or [None, None]
                cells += [e.get("value"), ci[0], ci[1]]
            w.writerow([r["human"], r["metric"], r["model"], r["n"], r.get("excluded_error"), r.get("excluded_null"),
                        r.get("annotators_mean"), *cells])
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
            ax.annotate(f"{e['value']:.2f}", (e["value"], y), textcoords="offset points", xytext=(0, 5),
                        ha="center", fontsize=7)
        ax.set_yticks(range(len(rows)), [f"{r['model']} (n={r['n']})" for r in rows])
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.axvline(0, color="grey", lw=0.8, ls=":")
        ax.set_xlim(-1.05, 1.05)
        ax.set_title(f"{h} (human) vs {m}: Spearman rho, 95% bootstrap CI", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
