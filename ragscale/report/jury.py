"""How much a judge panel (jury) agrees: summary.json's ``jury`` block, the report's "Jury" table and
its disagreements among the lowest records (docs/judges.md, "Judge panels"; docs/statistics.md, "Jury
agreement").

A panel member's score of a metric is the record's ``<metric>@<judge>`` (ragscale.plan.RunPlan
``panel_columns``). Per metric: Krippendorff's alpha across the panel at the metric's level of
measurement (``ragscale.metrics.registry.jury_level``: nominal for flags, ordinal for ratings and
grades, interval for shares), each judge's alpha against the rest of the panel, and the records where
the judges disagree most (ragscale.stats.jury). A per-passage metric (UMBRELA's grades) is judged per
passage: each passage is a unit. Errored records are left out.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

TOP = 5  # disagreements listed per metric


def panel_of(columns: Sequence[str]) -> dict[str, list[str]]:
    """``metric -> judges`` from the panel's columns (``<metric>@<judge>``)."""
    out: dict[str, list[str]] = {}
    for col in columns:
        metric, _, judge = col.rpartition("@")
        if metric and judge:
            out.setdefault(metric, []).append(judge)
    return out


class JuryValues:
    """The panel's scores of every panel metric, fed one record at a time (the report pass)."""

    def __init__(self, panel: dict[str, list[str]]):
        from ragscale.stats.jury import JuryCollector

        self.panel = {m: list(judges) for m, judges in panel.items() if len(judges) >= 2}
        self.collectors = {m: JuryCollector() for m in self.panel}
        self.seen = 0
        self.ids: set[str] = set()

    def add(self, rec: dict) -> None:
        """One output record (an errored one, or one without metrics, is left out)."""
        from ragscale.metrics.registry import lookup, record_scalar

        metrics = rec.get("metrics") if isinstance(rec, dict) else None
        if not isinstance(metrics, dict) or rec.get("error") is not None:
            return
        self.seen += 1
        rid = _record_id(rec, self.seen)
        rid = rid if rid not in self.ids else f"{rid} #{self.seen}"
        self.ids.add(rid)
        for metric, judges in self.panel.items():
            spec = lookup(metric)
            if spec is not None and spec.shape == "vector":
                _add_passages(self.collectors[metric], rid, {j: metrics.get(f"{metric}@{j}") for j in judges})
                continue
            scores = {j: _number(record_scalar(metric, metrics.get(f"{metric}@{j}"))) for j in judges}
            if sum(v is not None for v in scores.values()) >= 1:
                self.collectors[metric].add(rid, scores)

    def block(self) -> dict | None:
        """summary.json's ``jury``: per metric the judges, the level and ragscale.stats.jury's statistics."""
        from ragscale.metrics.registry import jury_level

        metrics = {}
        for metric, judges in self.panel.items():
            level = jury_level(metric)
            metrics[metric] = self.collectors[metric].finish(level, top=TOP)
        if not metrics:
            return None
        return {"method": "Krippendorff's alpha across the panel (judges as coders, records as units); each judge "
                          "against the verdict of the others (their median; majority for a flag)",
                "metrics": metrics}


def _record_id(rec: dict, seen: int) -> str:
    from ragscale.io.identity import task_key

    task = task_key(rec) or f"record {seen}"
    model = rec.get("model_id")
    run = rec.get("query_run")
    return f"{model} · {task}" + (f" · run {run}" if run is not None else "")


def _number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _add_passages(collector: Any, rid: str, vectors: dict[str, Any]) -> None:
    """A per-passage metric: each passage of the record is a unit of its own."""
    longest = max((len(v) for v in vectors.values() if isinstance(v, list)), default=0)
    for i in range(longest):
        scores = {j: _number(v[i]) if isinstance(v, list) and i < len(v) else None for j, v in vectors.items()}
        if any(s is not None for s in scores.values()):
            collector.add(f"{rid} · passage {i + 1}", scores)


def console_lines(summary: dict) -> list[str]:
    """One line per jury metric: alpha, level, judges and records (the end of a run)."""
    block = summary.get("jury") if isinstance(summary, dict) else None
    out = []
    for metric, b in ((block or {}).get("metrics") or {}).items() if isinstance(block, dict) else []:
        a = b.get("alpha")
        worst = min(((j, d.get("alpha_vs_rest")) for j, d in _judge_stats(b).items()
                     if d.get("alpha_vs_rest") is not None), key=lambda t: t[1], default=None)
        out.append(f"jury on {metric}: Krippendorff's alpha {'undefined' if a is None else f'{a:.2f}'} "
                   f"({b.get('level')}, {len(_judge_stats(b))} judges, {b.get('records')} records)"
                   + (f"; least in line with the rest: {worst[0]} ({worst[1]:.2f})" if worst else ""))
    return out


def markdown_lines(summary: dict) -> list[str]:
    """leaderboard.md's "Jury" section (empty without a jury block)."""
    block = summary.get("jury") if isinstance(summary, dict) else None
    if not isinstance(block, dict) or not isinstance(block.get("metrics"), dict):
        return []
    out = ["## Jury", "", "| metric | level | records | alpha | judge: alpha vs the rest |", "|---|---|---:|---:|---|"]
    for metric, b in block["metrics"].items():
        a = b.get("alpha")
        judges = ", ".join(f"{j}: {'–' if d.get('alpha_vs_rest') is None else format(d['alpha_vs_rest'], '.2f')}"
                           for j, d in _judge_stats(b).items())
        out.append(f"| {metric} | {b.get('level')} | {b.get('records')} | {'–' if a is None else format(a, '.3f')} "
                   f"| {judges} |")
    out += ["", f"{block.get('method')}. Where the judges disagree most: summary.json `jury`, report.html.", ""]
    return out


def _judge_stats(b: dict) -> dict:
    j = b.get("judges")
    return j if isinstance(j, dict) else {}


def jury_context(summary: dict) -> dict | None:
    """The report's jury tables (summary.json ``jury``): per metric the level, alpha and each judge's
    alpha against the rest; the records where the judges disagree most; None without the block."""
    block = summary.get("jury") if isinstance(summary, dict) else None
    if not isinstance(block, dict) or not isinstance(block.get("metrics"), dict):
        return None
    rows, worst = [], []
    for metric, b in block["metrics"].items():
        if not isinstance(b, dict):
            continue
        judges = _judge_stats(b)
        rows.append({"metric": str(metric), "level": b.get("level"), "records": b.get("records"),
                     "alpha": _fmt(b.get("alpha")),
                     "judges": [(str(j), _fmt(d.get("alpha_vs_rest") if isinstance(d, dict) else None), d.get("n"))
                                for j, d in judges.items()]})
        for d in b.get("disagreements") or []:
            if isinstance(d, dict):
                scores = d.get("scores") if isinstance(d.get("scores"), dict) else {}
                worst.append({"metric": str(metric), "record": str(d.get("record")), "range": _fmt(d.get("range")),
                              "scores": ", ".join(f"{j}: {_fmt(v)}" for j, v in scores.items())})
    return {"rows": rows, "worst": worst, "method": block.get("method")} if rows else None


def _fmt(v: Any) -> str:
    n = _number(v)
    return "–" if n is None else f"{n:.3f}"
