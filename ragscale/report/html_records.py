"""The HTML report's "Lowest-scoring records" (package-private; see :mod:`ragscale.report.html`).

Per score (a metric with a direction), the N records furthest from its best value: the lowest
values of a higher-is-better score, the highest of a lower-is-better one (the taxonomy's error
rates). A record at the score's best value is never listed: the catalog's bound on the good
side (``bounds``, ``higher_is_better``), else, for an unbounded score, the best value seen in
the run. Each record is shown once, as one card with every score it is among the lowest on:
its question and answer (the record's fields, :mod:`ragscale.record_fields`), its references and
passages (texts the fields do not keep: read from the record's input part with the reader's
``extract_fields``, through ``record_texts``), all its metric values, the judges' details and errors.
"""

from __future__ import annotations

import heapq
from typing import Any

from ragscale.record_fields import record_fields, record_texts
from ragscale.report.headline import higher_is_better
from ragscale.stats.intervals import bounds_of
from ragscale.report.text import fmt, trim, trunc

PASSAGES = 10  # passages shown on a card (the rest counted)


def best_value(metric: str) -> float | None:
    """A score's best value from the catalog: its upper bound when higher is better, its lower bound
    when lower is better; None when the catalog states no bounds."""
    bounds = bounds_of(metric)
    if bounds is None:
        return None
    return bounds[0] if higher_is_better(metric) is False else bounds[1]


class Lowest:
    """The N records of one score furthest from its best value (ties: the earlier record is kept)."""

    def __init__(self, metric: str, n: int) -> None:
        self.n = n
        self.sign = -1.0 if higher_is_better(metric) is False else 1.0  # the order of "worse": lower values
        self.best = best_value(metric)
        self.heap: list[tuple[float, int, dict]] = []  # (-sign * value, -seq, info): top = the least bad

    def wants(self, v: float) -> bool:
        if self.n <= 0 or v == self.best:
            return False
        return len(self.heap) < self.n or self.sign * v < -self.heap[0][0]

    def push(self, v: float, seq: int, info: dict) -> None:
        item = (-self.sign * v, -seq, info)
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, item)
        else:
            heapq.heapreplace(self.heap, item)

    def items(self) -> list[tuple[float, dict]]:
        """(value, record info), the worst first."""
        return [(-key * self.sign, info) for key, _, info in sorted(self.heap, key=lambda t: (-t[0], -t[1]))]


def record_info(rec: dict, seq: int, model: str, key: str, values: dict[str, Any]) -> dict:
    """What a card shows of one record: its texts (question, references, passages with their ids,
    answer), its metric values (``values``: one number per metric) and the judges' details, errors
    and warnings, bounded."""
    fields = record_fields(rec)
    texts = record_texts(rec, fields)
    refs, passages = texts.references or [], texts.passages
    rs = rec.get("ragscale") if isinstance(rec.get("ragscale"), dict) else {}
    return {
        "seq": seq, "record": key, "model": model,
        "query": trunc(fields.query or "", 3000),
        "references": [trunc(t, 3000) for t in refs[:3]],
        "passages": [(pid, trunc(p, 1500)) for pid, p in passages[:PASSAGES]],
        "more_passages": max(0, len(passages) - PASSAGES),
        "answer": trunc(fields.answer or "", 5000),
        "metrics": values,
        "details": trim(rs.get("details") or {}),
        "judge_errors": trim([e for e in rs.get("judge_errors") or [] if isinstance(e, dict)][:20]),
        "warnings": trim(list(rs.get("warnings") or [])[:10]),
    }


def lowest_section(lowest: dict[str, Lowest], seen_best: dict[str, float]) -> dict:
    """The section's context: per score, its lowest records (links to their cards), and one card
    per record with every score it is among the lowest on. ``seen_best``: per score, the best value
    of the run (the catalog's best where it states one)."""
    from ragscale.metrics.registry import label

    index, cards = [], {}
    for metric, low in lowest.items():
        best = low.best if low.best is not None else seen_best.get(metric)
        entries = [(v, info) for v, info in low.items() if v != best]
        if not entries:
            continue
        links = []
        for rank, (v, info) in enumerate(entries, 1):
            card = cards.setdefault(info["seq"], {"info": info, "low": []})
            card["low"].append((metric, label(metric), fmt(v), rank))
            links.append(info["seq"])
        index.append({"metric": metric, "label": label(metric), "links": links})
    order = sorted(cards, key=lambda s: (-len(cards[s]["low"]), min(r for *_, r in cards[s]["low"]), s))
    anchors = {seq: f"low-{i}" for i, seq in enumerate(order, 1)}
    for row in index:
        row["links"] = [(anchors[s], cards[s]["info"]["model"], cards[s]["info"]["record"],
                         next(v for m, _, v, _ in cards[s]["low"] if m == row["metric"])) for s in row["links"]]
    return {"index": index, "cards": [_card(anchors[s], cards[s]["info"], cards[s]["low"]) for s in order]}


def _card(anchor: str, info: dict, low: list[tuple[str, str, str, int]]) -> dict:
    """One record's card: its texts, the scores it is low on, all its metric values, the judges'
    details (those explaining a low score first) and errors."""
    lows = {m for m, *_ in low}
    rel = set().union(*(_relevant_judges(m, list(info["details"])) for m in lows)) or set(info["details"])
    errors = []
    for e in info["judge_errors"]:
        reason = str(e.get("reason", "")) + (" (undefined)" if e.get("undefined") else "")
        errors.append({"judge": str(e.get("judge")) + (f"@{e['tag']}" if e.get("tag") else ""),
                       "reason": trunc(reason, 400), "raw": None if e.get("raw") is None else trunc(str(e["raw"]), 800)})
    return {"id": anchor, "model": info["model"], "record": info["record"],
            "low": [{"metric": m, "label": lab, "value": v, "rank": r} for m, lab, v, r in low],
            "query": info["query"], "references": info["references"], "passages": info["passages"],
            "more_passages": info["more_passages"], "answer": info["answer"],
            "metrics": [(k, fmt(v), k in lows) for k, v in info["metrics"].items()],
            "details": [(j, d) for j, d in info["details"].items() if j in rel],
            "other_details": [(j, d) for j, d in info["details"].items() if j not in rel],
            "judge_errors": errors, "warnings": info["warnings"]}


def _relevant_judges(metric: str, judges: list[str]) -> set[str]:
    """The judges whose details explain ``metric`` (judge name inside the metric name, or the
    reverse, ignoring case and ``_``/``@`` tags)."""
    def norm(t: str) -> str:
        return t.split("@")[0].lower().replace("_", "").replace("-", "")

    m = norm(metric)
    return {j for j in judges if norm(j) and (norm(j) in m or m in norm(j))}
