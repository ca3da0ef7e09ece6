"""The order of the leaderboard and the cells it breaks down into, from summary.json: which model ranks
where (by the headline's mean, or its calibrated mean when the run was calibrated; ties share a rank,
models without a value last), the breakdown cells (All, answerability classes, turns), each cell's
mean and n, and the metrics the breakdowns and the significance comparisons show. Decisions only:
leaderboard.py, html_context.py, significance.py and calibration.py render or test what this orders.
"""

from __future__ import annotations

from ragscale.metrics.registry import lookup
from ragscale.report.headline import headline, higher_is_better, table_metrics

ALL = "ALL"
ANSWERABILITY_ORDER = ("ANSWERABLE", "PARTIAL", "UNANSWERABLE", "CONVERSATIONAL", "UNDERSPECIFIED")
TURN_CELLS = (("1", "Turn 1"), (">1", "Turn >1"))
ANS_ACC = "AnsAcc"  # answerability accuracy (summary's answerability_accuracy)


def ranked(summary: dict, head: str | None) -> list[tuple[int | None, str, dict]]:
    """(rank, model, block) best first by the mean of ``head``; ``rank`` None for a model without
    a value."""
    return _rank(summary, head, lambda model, d: None if head is None else d["metrics"].get(head))


def calibrated_mean(summary: dict, metric: str, model: str) -> float | None:
    """The model's calibrated (prediction-powered) mean of ``metric`` from summary.json's
    ``calibration`` block (ragscale.report.calibration), None where there is none."""
    cal = summary.get("calibration") if isinstance(summary, dict) else None
    try:
        v = cal["metrics"][metric]["models"][model]["calibrated"]["mean"]
    except (KeyError, TypeError):
        return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def ranking(summary: dict) -> tuple[str | None, bool]:
    """What the leaderboard ranks by: (metric, calibrated). The calibrated mean of the calibration
    block's ``ranked_by`` metric when the run was calibrated, else the headline's mean."""
    cal = summary.get("calibration") if isinstance(summary, dict) else None
    metric = cal.get("ranked_by") if isinstance(cal, dict) else None
    if isinstance(metric, str) and metric:
        return metric, True
    return headline(summary), False


def standings(summary: dict) -> list[tuple[int | None, str, dict]]:
    """(rank, model, block) best first as the leaderboard ranks them (see :func:`ranking`)."""
    metric, calibrated = ranking(summary)
    if not calibrated:
        return ranked(summary, metric)
    return _rank(summary, metric, lambda model, d: calibrated_mean(summary, metric, model))


def _rank(summary: dict, metric: str | None, value) -> list[tuple[int | None, str, dict]]:
    """Models sorted by ``value(model, block)`` in the metric's direction; ties share a rank
    (competition ranking), models without a value last and unranked."""
    models = list((summary.get("models") or {}).items())
    sign = 1.0 if higher_is_better(metric) is False else -1.0
    vals = {model: value(model, d) for model, d in models}
    models.sort(key=lambda md: (vals[md[0]] is None, sign * (vals[md[0]] or 0.0), md[0]))
    out: list[tuple[int | None, str, dict]] = []
    prev, rank = None, 0
    for i, (model, d) in enumerate(models):
        v = vals[model]
        if v is None:
            out.append((None, model, d))
            continue
        if v != prev:
            rank, prev = i + 1, v
        out.append((rank, model, d))
    return out


def _answerability_classes(summary: dict) -> list[str]:
    found = {c for d in summary["models"].values() for c in (d.get("by_answerability") or {})}
    if not found - {"UNKNOWN"}:
        return []
    rest = sorted(found - set(ANSWERABILITY_ORDER) - {"UNKNOWN"})
    return [c for c in ANSWERABILITY_ORDER if c in found] + rest + (["UNKNOWN"] if "UNKNOWN" in found else [])


def cells(summary: dict) -> list[tuple[str, str, str]]:
    """(breakdown, cell key, column label) of the columns: All, answerability classes, turns."""
    out = [("all", ALL, "All")]
    out += [("answerability", c, c) for c in _answerability_classes(summary)]
    turns = {t for d in summary["models"].values() for t in (d.get("by_turn") or {})}
    out += [("turn", k, label) for k, label in TURN_CELLS if k in turns]
    return out


def cell(d: dict, breakdown: str, key: str) -> dict | None:
    """A model's block for one cell (``breakdown`` all, answerability or turn); None where it has none."""
    if breakdown == "all":
        return d
    return (d.get("by_answerability" if breakdown == "answerability" else "by_turn") or {}).get(key)


def mean_n(block: dict | None, metric: str) -> tuple[float | None, int]:
    """(mean, n records with a value) of ``metric`` in a block (AnsAcc: the answerability accuracy)."""
    if block is None:
        return None, 0
    if metric == ANS_ACC:
        return block.get("answerability_accuracy"), int(block.get("answerability_n") or 0)
    return block["metrics"].get(metric), int(block["n"].get(metric) or 0)


def breakdown_metrics(summary: dict, head: str | None) -> list[str]:
    """The headline, an H-Mean's components, and the answerability accuracy when present."""
    metrics = table_metrics(summary)
    out = [head] if head else []
    if head in ("HMean_idk", "HMean"):  # RL_F, RB_llm, RB_agg (or their IDK-conditioned versions)
        out += [m for m in lookup(head).requires if m in metrics]
    if any(d.get("answerability_n") for d in summary["models"].values()):
        out.append(ANS_ACC)
    return out
