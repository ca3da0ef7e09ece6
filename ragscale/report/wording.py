"""How the reports name where a metric's values come from, read from the catalog (a metric's
``stage``), so that "judge" is said of judge metrics only: a judge metric's own values next to
calibrated ones are "judge" values; any other metric's are "uncalibrated"."""

from __future__ import annotations

from ragscale.metrics.registry import lookup


def is_judged(metric: str | None) -> bool:
    """Whether an LLM judge gives the metric its values (catalog stage ``judge``)."""
    spec = lookup(metric) if metric else None
    return spec is not None and spec.stage == "judge"


def own_values(metric: str | None) -> str:
    """What a metric's own (not human-calibrated) values are called: "judge" or "uncalibrated"."""
    return "judge" if is_judged(metric) else "uncalibrated"


def plural(name: str, n: int) -> str:
    """``name`` for a count of ``n``: itself for one, else its plural ("category" -> "categories",
    "weekday" -> "weekdays"): the units a report counts (conversations, a cluster field's values)."""
    if n == 1:
        return name
    return name[:-1] + "ies" if name.endswith("y") and name[-2:-1] not in "aeiou" else name + "s"
