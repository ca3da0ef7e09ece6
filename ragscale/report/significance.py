"""Significance of the differences between models: summary.json's ``significance`` block,
significance.csv and the leaderboard's "Significance" section (docs/statistics.md).

For every pair of models (each model against the leader when there are more than
``all_pairs_max_models``), per compared metric (the leaderboard's: the headline, an H-Mean's
components, AnsAcc), over the tasks both models answered: the mean difference with its BCa
bootstrap interval and a sign-flip permutation p-value (:mod:`ragscale.stats.paired`),
the p-values of a metric adjusted together (Holm by default). Records are paired by task
(:func:`task_key`); a model's records of one task (repeated runs) are averaged first; errored
records, nulls and records without a task key are left out.
"""

from __future__ import annotations

import math
from array import array
from itertools import combinations
from typing import Any, Iterable, Sequence

import numpy as np

from ragscale.errors import UserError
from ragscale.io.identity import task_key
from ragscale.report.headline import candidates, headline, higher_is_better
from ragscale.report.ranking import ANS_ACC, breakdown_metrics, standings
from ragscale.report.safe import console_name, visible
from ragscale.report.wording import plural
from ragscale.stats.paired import CORRECTIONS, adjust, paired_tests

METHOD = "paired bootstrap (BCa) + paired permutation test"
FEW_TASKS = 10  # below this many paired tasks a comparison carries a note
CSV_HEADER = ["metric", "a", "b", "n", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "p", "p_adjusted",
              "correction", "significant", "better", "note", "unit", "units", "design_effect"]


def check_settings(s: Any, prefix: str = "significance.") -> None:
    """A one-line UserError for a bad setting (``s``: the config's significance block or
    :class:`ragscale.config.SignificanceConf`; ``prefix`` names the settings in the message)."""
    def bad(key: str, want: str) -> UserError:
        return UserError(f"{prefix}{key} must be {want}, got {getattr(s, key)!r}")

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not isinstance(s.enabled, bool):
        raise bad("enabled", "true or false")
    if not is_int(s.resamples) or s.resamples < 100:
        raise bad("resamples", "an integer >= 100")
    for key in ("confidence", "alpha"):
        v = getattr(s, key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
            raise bad(key, "a number between 0 and 1 (exclusive)")
    if s.correction not in CORRECTIONS:
        raise bad("correction", "one of " + ", ".join(CORRECTIONS))
    if not is_int(s.all_pairs_max_models) or s.all_pairs_max_models < 2:
        raise bad("all_pairs_max_models", "an integer >= 2")
    if not is_int(s.seed) or s.seed < 0:
        raise bad("seed", "an integer >= 0")


def compared_metrics(run_metrics: Sequence[str], head: str | None = None) -> list[str]:
    """The leaderboard's breakdown metrics of a run with these metrics and this headline (default: its
    first headline; headline first), and AnsAcc (left out later when no record has it)."""
    summary = {"metrics": list(run_metrics), "models": {}}
    return breakdown_metrics(summary, head or headline(summary)) + [ANS_ACC]


def collected_metrics(run_metrics: Sequence[str]) -> list[str]:
    """What the report pass collects for significance: the compared metrics of the first 4 headline
    candidates (ragscale.report.headline: MT-RAG's four headlines), so that the comparisons follow
    the ranking when it falls back; memory stays a few numbers per record."""
    heads = candidates({"metrics": list(run_metrics)})[:4] or [None]
    return list(dict.fromkeys(m for head in heads for m in compared_metrics(run_metrics, head)))


class PairedValues:
    """Per (model, metric) the value of each task, fed one record at a time (the report pass); memory:
    one task index and one number per (record, metric). ``cluster_by``: the field whose value groups
    tasks into the unit of resampling (a task's first record's value; None: every task its own unit);
    ``slice_by``: the fields whose value (per task, its first record's) defines the slices
    (ragscale.report.slices)."""

    def __init__(self, metrics: Iterable[str], cluster_by: str | None = None, slice_by: Sequence[str] = ()):
        self.metrics = list(metrics)
        self.tasks: dict[str, int] = {}
        self.cols: dict[tuple[str, str], tuple[array, array]] = {}
        self.keyless = 0
        self._order: np.ndarray | None = None
        self.cluster_by = cluster_by
        self.slice_by = list(slice_by)
        self.task_cluster: list[str | None] = []  # per task index: its unit's label (None: the task alone)
        self.task_slices: dict[str, list[str | None]] = {f: [] for f in self.slice_by}

    def add(self, rec: dict, model: str | None = None) -> None:
        """One record (``model``: its name here, default its model_id)."""
        from ragscale.metrics.registry import record_scalar
        from ragscale.report.summary import answerability_correct
        from ragscale.record_fields import record_fields

        if not isinstance(rec, dict) or rec.get("error") is not None:
            return
        key = task_key(rec)
        if key is None:
            self.keyless += 1
            return
        task = self.tasks.setdefault(key, len(self.tasks))
        if task == len(self.task_cluster):  # a new task: its unit and slices are its first record's
            self._label(rec)
        model = str(rec.get("model_id")) if model is None else model
        metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
        for name in self.metrics:
            try:
                if name == ANS_ACC:
                    ok = answerability_correct(record_fields(rec).answerability or "UNKNOWN", metrics)
                    v = None if ok is None else float(ok)
                else:
                    v = record_scalar(name, metrics.get(name))
            except (TypeError, ValueError):
                continue
            if v is not None and math.isfinite(v):
                idx, vals = self.cols.setdefault((model, name), (array("q"), array("d")))
                idx.append(task)
                vals.append(v)

    def _label(self, rec: dict) -> None:
        from ragscale.record_fields import field_label

        self.task_cluster.append(None if self.cluster_by is None else field_label(rec, self.cluster_by))
        for f in self.slice_by:
            self.task_slices[f].append(field_label(rec, f))

    def clusters(self) -> np.ndarray | None:
        """Each task's unit of resampling as an int code, in :meth:`task_order`; None when no task has a
        value of ``cluster_by`` (every task is then its own unit, as without it)."""
        from ragscale.stats.clustered import cluster_codes

        labels = [self.task_cluster[t] for t in self.task_order()]
        if not any(v is not None for v in labels):
            return None
        return cluster_codes(labels)

    def unit(self) -> dict:
        """What the tests resample (summary.json, significance.csv, the report): the field, the unit's
        name, how many units and tasks, and a sentence saying so."""
        codes = self.clusters()
        tasks = len(self.tasks)
        if codes is None:
            why = "" if self.cluster_by is None else f" (no record has {self.cluster_by})"
            return {"by": None, "name": "task", "units": tasks, "tasks": tasks,
                    "text": f"resampled by task: {tasks} task{'s' if tasks != 1 else ''}{why}"}
        name = "conversation" if self.cluster_by == "conversation_id" else self.cluster_by
        units = int(len(np.unique(codes)))
        alone = sum(v is None for v in self.task_cluster)
        text = f"resampled by {name}: {units} {plural(name, units)} ({tasks} tasks)"
        if alone:
            text += f"; {alone} task{'s' if alone != 1 else ''} without {self.cluster_by}, each on its own"
        return {"by": self.cluster_by, "name": name, "units": units, "tasks": tasks, "text": text}

    def records(self, model: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """The model's values of ``metric``, one per record, and each one's task as its position in
        :meth:`task_order` (empty arrays when it has none), ordered by task and value."""
        if (model, metric) not in self.cols:
            return np.empty(0, dtype=np.int64), np.empty(0)
        idx, vals = (np.frombuffer(c, dtype=t) for c, t in zip(self.cols[(model, metric)], (np.int64, float)))
        pos = np.empty(len(self.tasks), dtype=np.int64)
        pos[self.task_order()] = np.arange(len(self.tasks))
        at = pos[idx]
        order = np.lexsort((vals, at))  # by task, then value: the same arrays whatever order the records came in
        return at[order], vals[order]

    def rename(self, names: dict[str, str]) -> None:
        """Rename models (``{old: new}``)."""
        self.cols = {(names.get(model, model), metric): col for (model, metric), col in self.cols.items()}

    def task_order(self) -> np.ndarray:
        """The tasks' indexes in the order of their keys: rows are in this order, not in the order
        the records came in, so the resampling draws the same tasks whatever that order was."""
        if self._order is None or len(self._order) != len(self.tasks):
            keys = list(self.tasks)
            self._order = np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)
        return self._order

    def row(self, model: str, metric: str) -> np.ndarray:
        """The model's value of each task (its records' mean), NaN where it has none, in
        :meth:`task_order`."""
        out = np.full(len(self.tasks), np.nan)
        if (model, metric) in self.cols:
            idx, vals = (np.frombuffer(c, dtype=t) for c, t in zip(self.cols[(model, metric)], (np.int64, float)))
            counts = np.bincount(idx, minlength=len(self.tasks))
            sums = np.bincount(idx, weights=vals, minlength=len(self.tasks))
            has = counts > 0
            out[has] = sums[has] / counts[has]
        return out[self.task_order()]


def compare(order: Sequence[str], values: PairedValues, settings: Any,
            metrics: Sequence[str] | None = None) -> dict | None:
    """The significance block for the models in ``order`` (best first: the leaderboard's ranking) on
    ``metrics`` (default: every metric of ``values``), or None with fewer than 2 models or nothing to
    compare."""
    if len(order) < 2:
        return None
    wanted = values.metrics if metrics is None else [m for m in values.metrics if m in metrics]
    metrics = [m for m in wanted if any((model, m) in values.cols for model in order)]
    if not metrics:
        return None
    all_pairs = len(order) <= settings.all_pairs_max_models
    pairs = list(combinations(order, 2)) if all_pairs else [(order[0], m) for m in order[1:]]
    block: dict[str, Any] = {"method": METHOD, "confidence": settings.confidence, "alpha": settings.alpha,
                             "correction": settings.correction, "design": "all-pairs" if all_pairs else "vs-leader",
                             "resamples": settings.resamples, "unit": values.unit(), "metrics": {}}
    codes = values.clusters()
    queued: list[tuple[dict, np.ndarray, np.ndarray | None]] = []
    for metric in metrics:
        rows = {model: values.row(model, metric) for model in order}
        entries = []
        for a, b in pairs:
            both = ~np.isnan(rows[a]) & ~np.isnan(rows[b])
            entry = pair_entry(a, b, rows[a][both], rows[b][both])
            if entry["n"] >= 2:
                queued.append((entry, rows[a][both] - rows[b][both], None if codes is None else codes[both]))
            entries.append(entry)
        block["metrics"][metric] = entries
    run_tests(queued, settings)
    for metric, entries in block["metrics"].items():
        decide(metric, entries, settings)
    return block


def run_tests(queued: Sequence[tuple[dict, np.ndarray, np.ndarray | None]], settings: Any) -> None:
    """Fill each queued entry's ``ci`` and ``p`` from its per-task differences: whole units resampled
    when its clusters are given (ragscale.stats.clustered, with ``units`` and ``design_effect``: the
    variance of the mean difference relative to independent tasks), else tasks
    (ragscale.stats.paired)."""
    from ragscale.stats.clustered import cluster_paired_tests, design_effect

    plain = [(e, d) for e, d, c in queued if c is None]
    grouped = [(e, d, c) for e, d, c in queued if c is not None]
    kw = {"resamples": settings.resamples, "confidence": settings.confidence, "seed": settings.seed}
    for (entry, _), (lo, hi, p) in zip(plain, paired_tests([d for _, d in plain], **kw)):
        entry["ci"], entry["p"] = [lo, hi], p
    results = cluster_paired_tests([d for _, d, _ in grouped], [c for _, _, c in grouped], **kw) if grouped else []
    for (entry, d, c), (lo, hi, p) in zip(grouped, results):
        entry["ci"], entry["p"] = [lo, hi], p
        entry["units"] = int(len(np.unique(c)))
        entry["design_effect"] = design_effect(d, c)


def decide(metric: str, entries: list[dict], settings: Any) -> None:
    """Adjust the tested entries' p-values of one metric together (``settings.correction``) and set
    ``p_adjusted``, ``significant`` (adjusted p <= ``settings.alpha``) and ``better`` (the model the
    metric's direction favours)."""
    tested = [e for e in entries if e["p"] is not None]
    up = higher_is_better(metric)
    for e, q in zip(tested, adjust([e["p"] for e in tested], settings.correction)):
        e["p_adjusted"] = q
        e["significant"] = bool(q <= settings.alpha)
        if e["significant"] and up is not None and e["diff"] != 0:
            e["better"] = e["a"] if (e["diff"] > 0) == up else e["b"]


def pair_entry(a: str, b: str, va: np.ndarray, vb: np.ndarray) -> dict:
    """One comparison before its test: the models, n, the means over the paired tasks and a note."""
    n = len(va)
    mean_a, mean_b = (float(v.mean()) if n else None for v in (va, vb))
    entry = {"a": a, "b": b, "n": n, "mean_a": mean_a, "mean_b": mean_b,
             "diff": None if n == 0 else float((va - vb).mean()), "ci": None, "p": None, "p_adjusted": None,
             "significant": False, "better": None}
    notes = []
    if n == 0:
        notes.append("no paired tasks")
    elif n < 2:
        notes.append("only 1 paired task: not tested")
    elif n < FEW_TASKS:
        notes.append(f"fewer than {FEW_TASKS} paired tasks")
    if n and np.array_equal(va, vb):
        notes.append("all differences zero")
    if notes:
        entry["note"] = "; ".join(notes)
    return entry


def for_summary(summary: dict, values: PairedValues, settings: Any) -> dict | None:
    """The block for a run's summary: the models with a scored record, in the leaderboard's order, on
    the compared metrics of the headline it ranks by (a model with no scored record has nothing to
    compare)."""
    order = [model for _, model, d in standings(summary) if d["count"] > d["errors"]]
    return compare(order, values, settings, compared_metrics(summary["metrics"], headline(summary)))


# ------------------------------------------------------------------ text and CSV


def markdown_lines(summary: dict, title: str = "Significance", numbers: str = "significance.csv") -> list[str]:
    """The leaderboard's "Significance" section (empty without a readable block); the wording is the
    HTML report's (:mod:`ragscale.report.html_significance`)."""
    from ragscale.report.html_significance import significance

    ctx = significance(summary)
    if ctx is None:
        return []
    out = [f"## {title}", ""]
    for m in ctx["metrics"]:
        out += [f"### {m['label']}" + (f" ({m['metric']})" if m["label"] != m["metric"] else "")
                + (f", {m['design_effect']}" if m.get("design_effect") else ""), ""]
        for r in m["rows"]:
            first, second = visible(r["first"]), visible(r["second"])
            if r["significant"]:
                line = f"- **{first} {r['relation']} {second}**, {r['difference']}"
            else:
                tasks = "" if r["n"] is None else f"{r['n']} "
                line = (f"- {first} vs {second}: not distinguishable on these {tasks}tasks{r.get('units') or ''} "
                        f"({r['difference']}")
            line += (f", {r['p']}" if r["p"] else "") + ("" if r["significant"] else ")")
            out.append(line + (f" — {r['note']}" if r["note"] else ""))
        out.append("")
    out.append(" ".join(s for s in (ctx["method"], ctx["settings"]) if s) + ". The interval is not adjusted "
               "for multiple comparisons; `significant` uses the adjusted p. " + f"{numbers} has every number.")
    return out


def significant_lines(summary: dict, limit: int = 20) -> list[str]:
    """The significant differences, one line each (what the console prints after the ranking), e.g.
    "m1 > m2 on RB_agg: difference 0.0420 [0.0110, 0.0730], adjusted p = 0.003 (holm)"; at most
    ``limit`` lines, then how many more leaderboard.md lists."""
    from ragscale.report.html_significance import significance

    ctx = significance(summary)
    if ctx is None:
        return []
    correction = (summary.get("significance") or {}).get("correction")
    lines = [f"{console_name(r['first'])} {r['relation']} {console_name(r['second'])} on {m['label']}: {r['difference']}"
             + (f", {r['p']}" if r["p"] else "") + (f" ({correction})" if correction and r["p"] else "")
             for m in ctx["metrics"] for r in m["rows"] if r["significant"]]
    more = len(lines) - limit
    return lines[:limit] + ([f"... and {more} more significant difference(s) in leaderboard.md"] if more > 0 else [])


def csv_rows(block: dict) -> list[list]:
    """significance.csv's rows (header: CSV_HEADER), one per metric and pair."""
    rows = []
    unit = (block.get("unit") or {}).get("name") or "task"
    for metric, entries in block["metrics"].items():
        for e in entries:
            ci = e.get("ci") or [None, None]
            rows.append([metric, e["a"], e["b"], e["n"], *(_num(e.get(k)) for k in ("mean_a", "mean_b", "diff")),
                         _num(ci[0]), _num(ci[1]), _num(e.get("p")), _num(e.get("p_adjusted")), block["correction"],
                         e["significant"], e.get("better") or "", e.get("note") or "", unit,
                         e.get("units", e["n"] if e.get("p") is not None else ""), _num(e.get("design_effect"))])
    return rows


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"
