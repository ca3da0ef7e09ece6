"""The calibration's settings and how human labels map onto a judged metric's scale: a one-line error
for a bad setting, the ``calibration.map`` items (linear ``1..4:0..1`` or a table
``yes:1,no:0``) parsed into :class:`ScaleMap`, and which human metric calibrates which run metric
(paired as ``ragscale agree`` pairs them). Checked at plan time (ragscale.plan), before any record
is read; never guessed: a label off the metric's scale without a map is an error
(:mod:`ragscale.report.calibration`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ragscale.errors import UserError


def check_settings(c: Any, prefix: str = "calibration.") -> None:
    """A one-line UserError for a bad setting (``c``: the config's calibration block)."""
    def bad(key: str, want: str) -> UserError:
        return UserError(f"{prefix}{key} must be {want}, got {getattr(c, key)!r}")

    if isinstance(c.min_labels, bool) or not isinstance(c.min_labels, int) or c.min_labels < 2:
        raise bad("min_labels", "an integer >= 2")
    v = c.confidence
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
        raise bad("confidence", "a number between 0 and 1 (exclusive)")
    parse_maps(list(c.map))


@dataclass(frozen=True)
class ScaleMap:
    """How one human metric's labels map onto the judged metric's scale: linear from
    ``[a, b]`` to ``[c, d]`` (``1..4:0..1``) or a table of values (``1:0,2:0.33,3:0.67,4:1``)."""

    human: str
    text: str
    linear: tuple[float, float, float, float] | None = None
    table: dict[float, float] = field(default_factory=dict)

    def __call__(self, v: float) -> float:
        if self.linear is not None:
            a, b, c, d = self.linear
            return c + (v - a) * (d - c) / (b - a)
        if v not in self.table:
            raise UserError(f"calibration.map {self.human}={self.text}: human value {v:g} is not mapped "
                            f"(mapped: {', '.join(f'{k:g}' for k in sorted(self.table))})")
        return self.table[v]


def _float(s: str, item: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise UserError(f"calibration.map {item!r}: {s.strip()!r} is not a number") from None
    if not math.isfinite(v):
        raise UserError(f"calibration.map {item!r}: {s.strip()!r} is not a finite number")
    return v


def parse_maps(items: Sequence[str]) -> dict[str, ScaleMap]:
    """``["faithfulness=1..4:0..1", "grade=yes:1,no:0"]`` -> {human metric: ScaleMap}."""
    from ragscale.report.agreement_io import human_value

    out: dict[str, ScaleMap] = {}
    for item in items:
        if "=" not in item or not all(s.strip() for s in item.split("=", 1)):
            raise UserError(f"calibration.map {item!r}: expected HUMAN=A..B:C..D (linear) or "
                            "HUMAN=v1:m1,v2:m2,... (a table), e.g. faithfulness=1..4:0..1")
        human, spec = (s.strip() for s in item.split("=", 1))
        if ".." in spec:
            parts = spec.split(":")
            ends = [p.split("..") for p in parts]
            if len(parts) != 2 or any(len(e) != 2 for e in ends):
                raise UserError(f"calibration.map {item!r}: a linear map is A..B:C..D, e.g. 1..4:0..1")
            (a, b), (c, d) = ([_float(x, item) for x in e] for e in ends)
            if a == b:
                raise UserError(f"calibration.map {item!r}: the human range {a:g}..{b:g} is empty")
            out[human] = ScaleMap(human, spec, linear=(a, b, c, d))
            continue
        table = {}
        for pair in spec.split(","):
            if ":" not in pair:
                raise UserError(f"calibration.map {item!r}: {pair.strip()!r} is not VALUE:MAPPED")
            k, v = pair.rsplit(":", 1)
            key = human_value(k.strip())
            if key is None:
                raise UserError(f"calibration.map {item!r}: {k.strip()!r} is not a human value (a number, yes/no "
                                "or true/false)")
            table[key] = _float(v, item)
        out[human] = ScaleMap(human, spec, table=table)
    return out


def resolve(human: Any, pairs: Sequence[str], maps: Sequence[str],
            run_metrics: Sequence[str]) -> tuple[dict[str, str], dict[str, ScaleMap]]:
    """({human metric: run metric}, {human metric: ScaleMap}) for labels ``human`` (a
    :class:`~ragscale.report.agreement_io.HumanRatings`): the pairs as agreement chooses them,
    and maps only for paired human metrics."""
    from ragscale.report.agreement import choose_pairs, parse_pairs

    chosen = choose_pairs(human.metrics(), set(run_metrics), parse_pairs(list(pairs)), human.source)
    parsed = parse_maps(list(maps))
    unknown = sorted(set(parsed) - set(chosen))
    if unknown:
        raise UserError(f"calibration.map: {', '.join(unknown)} is not a paired human metric "
                        f"(pairs: {', '.join(f'{h}={m}' for h, m in chosen.items())})")
    return chosen, parsed
