"""Versioned prompt templates shipped in ragscale/judges/templates/ (leading '# ' lines are comments)."""

from __future__ import annotations

import functools
import os

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


@functools.lru_cache(maxsize=None)
def load_template(name: str) -> str:
    """The text of ``templates/<name>.txt`` without its leading comment lines."""
    with open(os.path.join(_DIR, f"{name}.txt"), encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    while lines and lines[0].startswith("# "):
        lines.pop(0)
    return "\n".join(lines)
