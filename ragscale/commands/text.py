"""Console layout shared by the commands' help and listings."""

from __future__ import annotations

from typing import Sequence


def table(rows: Sequence[tuple[str, str]], indent: str = "  ") -> list[str]:
    """Two aligned columns; a description's further lines are indented under its first."""
    width = max(len(a) for a, _ in rows) + 2
    return [f"{indent}{a.ljust(width)}{b}".replace("\n", "\n" + " " * (len(indent) + width)) for a, b in rows]
