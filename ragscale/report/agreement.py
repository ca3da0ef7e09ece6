"""Judge-vs-human agreement: how far a metric (often a cheap judge's) agrees with human ratings
or labels on the same records, per model and overall, with bootstrap confidence intervals.

This module pairs a run's records with the human ratings and builds the result; the statistics
(Spearman, Kendall tau-b, Cohen's kappa, accuracy, bootstrap CIs) live in
:mod:`ragscale.stats.agreement`, reading human files and writing agreement.{json,csv,md} in
:mod:`ragscale.report.agreement_io`, the figure (agreement.png) in :mod:`ragscale.report.agreement_plot`;
their public names are importable from here too.
Which statistics apply (kappa: both sides categorical; accuracy: both binary) is decided once
per metric pair, on all its records. A metric a judge panel scored (a jury) is followed by each of
its judges (``<metric>@<judge>``), so the jury's and every judge's agreement are side by side.
The bootstrap resamples the run's unit (``cluster_by``, default ``conversation_id``: the turns of
one conversation are resampled together, within a model's rows and in ``ALL`` across models; a
record without the field is a unit of its own; None: every record alone); the result's
``bootstrap.unit`` and each row's ``units`` say what was resampled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from ragscale.errors import UserError
from ragscale.report.agreement_io import (ALL, HumanRatings, read_human, resampling_unit, to_markdown,
                                          write_tables)
from ragscale.report.agreement_plot import plot
from ragscale.stats.agreement import (MAX_CATEGORIES, STATS, accuracy, cohen_kappa, is_binary,
                                             is_categorical, kendall_tau_b, spearman, statistics_for)

__all__ = ["ALL", "MAX_CATEGORIES", "STATS", "HumanRatings", "accuracy", "agreement", "cohen_kappa",
           "is_binary", "is_categorical", "kendall_tau_b", "parse_pairs", "plot", "read_human", "spearman",
           "statistics_for", "to_markdown", "write_outputs"]


def write_outputs(result: dict, out_dir: str) -> dict[str, str]:
    """agreement.json, agreement.csv, agreement.md and agreement.png in ``out_dir``; their paths."""
    paths = write_tables(result, out_dir)
    plot(result, paths["png"])
    return paths


def run_keys(rec: dict) -> list[tuple]:
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



@dataclass
class _Join:
    """Run records paired with human keys, and what the pass over records.jsonl counted."""

    run_metrics: set[str] = field(default_factory=set)
    matched: list[tuple[dict, tuple]] = field(default_factory=list)  # (run record, human key)
    used: set[tuple] = field(default_factory=set)
    total: int = 0
    errored: int = 0
    example_run: tuple | None = None


def _join_one(out: _Join, rec: Any, human: HumanRatings) -> None:
    """Pair one run record with the most specific human key that has ratings."""
    if not isinstance(rec, dict):
        raise ValueError("not an object")
    out.total += 1
    out.run_metrics |= set((rec.get("metrics") or {}).keys())
    keys = run_keys(rec)
    out.example_run = out.example_run or (keys[-1] if keys else None)
    key = next((k for k in keys if k in human.values), None)
    if key is None:
        return
    out.used.add(key)
    out.errored += bool(rec.get("error"))
    out.matched.append((rec, key))


def _join(records_path: str, human: HumanRatings) -> _Join:
    """Pair each run record with the most specific human key that has ratings."""
    from ragscale.report.runs import run_records

    out = _Join()
    try:
        for rec in run_records(records_path):
            _join_one(out, rec, human)
    except ValueError as e:
        raise UserError(f"{records_path}: line {out.total + 1} is not a JSON record: {e}") from None
    return out


def choose_pairs(hnames: list[str], run_metrics: set[str], explicit: dict[str, str],
                  human_path: str) -> dict[str, str]:
    """{human metric: run metric}: the explicit pairs, else the same names (case-insensitive)."""
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
    return chosen


def panel_members(metric: str, run_metrics: set[str]) -> list[str]:
    """A jury metric's members (``<metric>@<judge>`` columns of the run), so that each judge's
    agreement with the humans is beside the jury's; [] for a metric no panel scored."""
    return sorted(m for m in run_metrics if m.startswith(metric + "@"))


def _groups(h: str, m: str, matched: list[tuple[dict, tuple]], human: HumanRatings,
            cluster_by: str | None = None) -> dict[str, dict]:
    """The (human, metric) values of the records rated on ``h``, per model and ``ALL``, with each
    record's ``cluster_by`` label (``c``), the annotator count and the records left out for an error
    or a null metric."""
    from ragscale.record_fields import field_label
    from ragscale.report.summary import record_scalar

    groups: dict[str, dict] = {}
    for rec, key in matched:
        hval = human.values[key].get(h)
        if hval is None:  # not rated on this metric
            continue
        mval = None if rec.get("error") else record_scalar(m, (rec.get("metrics") or {}).get(m))
        for g in (rec.get("model_id") or "?", ALL):
            acc = groups.setdefault(g, {"h": [], "m": [], "c": [], "annotators": 0, "error": 0, "null": 0})
            if rec.get("error"):
                acc["error"] += 1
            elif mval is None:
                acc["null"] += 1
            else:
                acc["h"].append(hval)
                acc["m"].append(mval)
                acc["c"].append(None if cluster_by is None else field_label(rec, cluster_by))
                acc["annotators"] += human.annotators[key][h]
    return groups


def _codes(labels: list[str | None]) -> Any:
    """The records' cluster codes (a None label: a cluster of its own), None when no record has a label."""
    from ragscale.stats.clustered import cluster_codes

    return cluster_codes(labels) if any(v is not None for v in labels) else None


def _pair_rows(h: str, m: str, matched: list[tuple[dict, tuple]], human: HumanRatings, n_boot: int,
               seed: int, cluster_by: str | None = None) -> list[dict]:
    """One result row per model, then ``ALL``, for human metric ``h`` against run metric ``m``, the
    bootstrap resampling whole ``cluster_by`` units (``units``: how many)."""
    groups = _groups(h, m, matched, human, cluster_by)
    every = groups.get(ALL, {"h": [], "m": []})  # which statistics apply is decided once per pair, on all its records
    kinds = {"categorical": is_categorical(every["h"], every["m"], human.scales.get(h)),
             "binary": is_binary(every["h"], every["m"])}
    rows = []
    for g in sorted(groups, key=lambda g: (g == ALL, g)):
        acc = groups[g]
        n = len(acc["h"])
        row = {"human": h, "metric": m, "model": g, "n": n, "excluded_error": acc["error"],
               "excluded_null": acc["null"], "annotators_mean": acc["annotators"] / n if n else None}
        codes = _codes(acc["c"])
        row["units"] = n if codes is None else int(len(set(codes.tolist())))
        if n:
            row.update(statistics_for(acc["h"], acc["m"], scale=human.scales.get(h), n_boot=n_boot,
                                      seed=seed, clusters=codes, **kinds))
        else:
            row["spearman"] = {"value": None, "ci": None, "reason": "no rated record has a value of the metric"}
        rows.append(row)
    return rows


class AgreementSink:
    """Judge-vs-human agreement from one pass over the records (shared with the other report
    sinks): the human file is read first, each record is paired as it passes. ``cluster_by``: the
    run's unit of resampling (ragscale.report.sinks.ReportSettings.cluster_by)."""

    def __init__(self, run_dir: str, human_path: str, pairs: Sequence[str] = (), *, n_boot: int = 1000,
                 seed: int = 0, cluster_by: str | None = "conversation_id"):
        self.run_dir, self.human_path, self.n_boot, self.seed = run_dir, human_path, n_boot, seed
        self.cluster_by = cluster_by
        self.human = read_human(human_path)
        if not self.human.values:
            raise UserError(f"--human {human_path}: no human ratings found")
        self.explicit = parse_pairs(pairs)
        self.join = _Join()

    def add(self, rec: Any) -> None:
        _join_one(self.join, rec, self.human)

    def finish(self) -> dict:
        """The agreement result (see ``agreement``)."""
        return _result(self.run_dir, self.human_path, self.human, self.explicit, self.join, self.n_boot, self.seed,
                       self.cluster_by)


def agreement(run_dir: str, human_path: str, pairs: Sequence[str] = (), *, n_boot: int = 1000,
              seed: int = 0, cluster_by: str | None = "conversation_id") -> dict:
    """Agreement between a run's per-record metrics and human ratings (see the module docstring):
    ``{"rows": [{"human", "metric", "model", "n", "units", "excluded_error", "excluded_null",
    "annotators_mean", "spearman": {...}, ...}], "records": {...}, "bootstrap": {..., "unit"}, ...}``;
    the bootstrap resamples whole ``cluster_by`` units (None: every record alone)."""
    from ragscale.report.runs import records_source

    records_path = records_source(run_dir)  # a run directory's records.jsonl, or an open-rag-eval results CSV
    human = read_human(human_path)
    if not human.values:
        raise UserError(f"--human {human_path}: no human ratings found")
    explicit = parse_pairs(pairs)
    return _result(run_dir, human_path, human, explicit, _join(records_path, human), n_boot, seed, cluster_by)


def _result(run_dir: str, human_path: str, human: HumanRatings, explicit: dict[str, str], join: _Join, n_boot: int,
            seed: int, cluster_by: str | None = None) -> dict:
    chosen = choose_pairs(human.metrics(), join.run_metrics, explicit, human_path)
    if not join.matched:
        hint = f"; e.g. human {_describe(next(iter(human.values)))}"
        hint += f" vs run {_describe(join.example_run)}" if join.example_run else ""
        raise UserError(f"no record of {run_dir} has human ratings in {human_path} ({join.total} run records; match "
                        f"on task_id [+ model_id], record_key or query_id/query_run{hint})")
    rows = [row for h, m in chosen.items() for metric in (m, *panel_members(m, join.run_metrics))
            for row in _pair_rows(h, metric, join.matched, human, n_boot, seed, cluster_by)]
    return {"run_dir": os.path.abspath(run_dir),
            "human": {"path": os.path.abspath(human_path), "layout": human.layout, "records": len(human.values),
                      "unmatched": len(human.values) - len(join.used), "skipped": human.skipped,
                      "non_numeric": human.non_numeric},
            "records": {"run": join.total, "matched": len(join.matched), "errored_excluded": join.errored},
            "bootstrap": {"replicates": n_boot, "seed": seed, "confidence": 0.95,
                          "method": "BCa (percentile where BCa is undefined)", **_unit(join, cluster_by)},
            "pairs": chosen, "rows": rows}


def _unit(join: _Join, cluster_by: str | None) -> dict:
    """The bootstrap's unit over the matched records: ``{"unit", "by", "units", "records", "text"}``."""
    from ragscale.record_fields import field_label

    labels = [None if cluster_by is None else field_label(rec, cluster_by) for rec, _ in join.matched]
    unit = resampling_unit(cluster_by, labels, "record")
    return {"unit": unit["name"], "by": unit["by"], "units": unit["units"], "records": unit["count"],
            "text": unit["text"]}
