"""The metric catalog as a table: ``ragscale.metrics()`` (a pandas DataFrame) and the rows and text
table that ``ragscale metrics [--family F]`` prints (ragscale.commands.metrics). One row per metric, read from the catalog
(ragscale.metrics.registry): its name, the aliases it is also known by, its family (the step
that computes it), its stage, whether a judge computes it, what it needs besides the answer,
its direction, range and short label, and the reference it follows.
"""

from __future__ import annotations

from typing import Any, Sequence

COLUMNS = ("name", "aliases", "family", "stage", "judge", "needs", "higher_is_better", "range", "label", "reference")


def rows(family: str | None = None) -> list[dict]:
    """The catalog's metrics as rows (``COLUMNS``), in declaration order; ``family`` keeps one family.
    ``P@k``/``AP@k`` stand for their cut-offs (``P@5``...)."""
    from ragscale.errors import UserError, did_you_mean
    from ragscale.metrics.registry import STEPS, accepted_names, catalog

    specs = catalog()
    if family is not None and family not in STEPS:
        raise UserError(f"unknown family {family!r}{did_you_mean(family, STEPS)}; families are {', '.join(STEPS)}")
    aliases: dict[str, list[str]] = {}
    for alias, name in accepted_names().items():
        if alias != name:
            aliases.setdefault(name, []).append(alias)
    out = []
    for spec in specs.values():
        if family is not None and spec.family != family:
            continue
        out.append({
            "name": spec.name, "aliases": sorted(aliases.get(spec.name, []), key=str.casefold),
            "family": spec.family, "stage": spec.stage, "judge": spec.stage == "judge",
            "needs": ["answer", *spec.needs] if spec.reads_answer else list(spec.needs),
            "higher_is_better": spec.higher_is_better, "range": getattr(spec, "bounds", None),
            "label": spec.label, "reference": spec.reference,
        })
    return out


def metrics_table(family: str | None = None) -> Any:
    """``ragscale.metrics()``: the catalog as a pandas DataFrame (``COLUMNS``)."""
    import pandas as pd

    return pd.DataFrame(rows(family), columns=list(COLUMNS))


def _cell(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) if not all(isinstance(v, (int, float)) for v in value) or not value \
            else f"{value[0]:g}..{value[1]:g}"
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def format_rows(items: Sequence[dict]) -> str:
    """The rows as an aligned text table (name, aliases, family, judge, needs, direction, range)."""
    shown = ("name", "aliases", "family", "judge", "needs", "higher_is_better", "range")
    heads = {"higher_is_better": "higher is better"}
    table = [[heads.get(c, c) for c in shown]] + [[_cell(r[c]) for c in shown] for r in items]
    widths = [min(max(len(row[i]) for row in table), 48) for i in range(len(shown))]
    lines = ["  ".join(cell[:w].ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])
