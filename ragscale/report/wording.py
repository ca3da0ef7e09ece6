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
