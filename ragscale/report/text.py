"""How the HTML report writes the run's values as text (package-private helpers of
:mod:`ragscale.report.html` and its section builders): truncated texts, metric values, and
bounded copies of JSON values (judge details, errors)."""

from __future__ import annotations

import json
import math
from typing import Any


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
