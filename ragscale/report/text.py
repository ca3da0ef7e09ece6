"""How the reports write the run's values as text: a metric's value with its catalog decimals (the
leaderboard, the significance and calibration wording), truncated texts, the HTML tables' values, and
bounded copies of JSON values (judge details, errors)."""

from __future__ import annotations

import json
import math
from typing import Any

from ragscale.metrics.registry import lookup

NONE = "–"  # a missing value in the leaderboard's and the inference sections' cells


def metric_value(metric: str, v: float | None) -> str:
    """``v`` with ``metric``'s catalog decimals (4 for a metric the catalog does not know); NONE for None."""
    if v is None:
        return NONE
    spec = lookup(metric)
    return f"{v:.{spec.decimals if spec is not None else 4}f}"


def with_interval(metric: str, e: dict | None) -> str:
    """An estimate ``{"mean", "ci": [low, high]}`` as ``mean [low, high]`` in the metric's decimals; NONE
    for none."""
    if not e:
        return NONE
    lo, hi = e["ci"]
    return f"{metric_value(metric, e['mean'])} [{metric_value(metric, lo)}, {metric_value(metric, hi)}]"


def trunc(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a note of how much was left out."""
    return text if len(text) <= limit else text[:limit] + f"… [+{len(text) - limit} chars]"


def fmt(v: Any) -> str:
    """A metric value as the tables show it (4 decimals, 1 for values >= 100)."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.4f}"
    return str(v)


def trim(obj: Any, depth: int = 0) -> Any:
    """A bounded copy of a JSON value (strings <= 1500 chars, lists <= 40 items, depth <= 6)."""
    if isinstance(obj, str):
        return trunc(obj, 1500)
    if depth >= 6:
        return trunc(json.dumps(obj, ensure_ascii=False, default=str), 600)
    if isinstance(obj, dict):
        items = list(obj.items())
        out = {str(k): trim(v, depth + 1) for k, v in items[:60]}
        if len(items) > 60:
            out["…"] = f"{len(items) - 60} more keys"
        return out
    if isinstance(obj, list):
        out_l = [trim(v, depth + 1) for v in obj[:40]]
        if len(obj) > 40:
            out_l.append(f"… {len(obj) - 40} more items")
        return out_l
    return obj
