"""Agreement statistics of a judge panel (jury) on one metric: several judges score the same
records and the metric is their median. Input: the judges' names and a (judges × records) array,
NaN where a judge has no value for a record. Krippendorff's alpha (:mod:`~ragscale.stats.krippendorff`,
Krippendorff 2011) over the panel, each judge against the others' verdict (leave-one-out),
and the records where the judges disagree most. Undefined statistics are ``None``, never 0.
"""

from __future__ import annotations

import math
from array import array
from typing import Mapping, Sequence

import numpy as np

from ragscale.stats.krippendorff import alpha


def _rest(scores: np.ndarray, j: int, level: str) -> np.ndarray:
    """Per record, the verdict of the judges other than ``j`` (NaN where none): at the nominal level
    their majority value (NaN on a tie: the rest has no verdict), else their median."""
    rest = np.delete(scores, j, axis=0)
    out = np.full(scores.shape[1], np.nan)
    some = (~np.isnan(rest)).any(axis=0)
    if not (rest.shape[0] and some.any()):
        return out
    if level != "nominal":
        out[some] = np.nanmedian(rest[:, some], axis=0)
        return out
    for i in np.nonzero(some)[0]:
        values, counts = np.unique(rest[~np.isnan(rest[:, i]), i], return_counts=True)
        if (counts == counts.max()).sum() == 1:
            out[i] = values[counts.argmax()]
    return out


def jury_agreement(names: Sequence[str], scores: np.ndarray, level: str, *, top: int = 5,
                   record_ids: Sequence[str] | None = None) -> dict:
    """Agreement of a panel: ``names[j]``'s scores are ``scores[j]`` (NaN = no value); ``level``
    is Krippendorff's level of measurement ("nominal", "ordinal", "interval", "ratio").

    Returns ``{"alpha", "level", "judges", "records", "disagreements"}``:

    - ``alpha``: Krippendorff's alpha of the panel (judges as coders, records as units; records
      with fewer than 2 values left out);
    - ``judges``: per name ``{"n", "alpha_vs_rest", "mean"}``: the number of records the judge
      scored; the alpha between the judge and the verdict of the other judges per record (their
      median; at the nominal level their majority, a record where the rest is split left out; with
      2 judges, the alpha of the two); the mean of its scores;
    - ``records``: the number of records with at least 2 judges' values;
    - ``disagreements``: at most ``top`` records with at least 2 values whose range (max - min of the
      judges' values) is above 0, largest range first, ties broken by the larger population standard
      deviation of the values, then by record order; each ``{"record": record_ids[i] (else the
      index i), "scores": {name: value} of the judges with a value, "range"}``.

    ``None`` where a statistic is undefined (alpha: see :func:`~ragscale.stats.krippendorff.alpha`;
    ``mean`` of a judge without values)."""
    x = np.asarray(scores, dtype=float)
    names = list(names)
    if x.ndim != 2 or x.shape[0] != len(names):
        raise ValueError(f"scores must be a (judges × records) array with {len(names)} rows, got shape {x.shape}")
    if len(set(names)) != len(names):
        raise ValueError(f"judge names must be unique, got {names}")
    if record_ids is not None and len(record_ids) != x.shape[1]:
        raise ValueError(f"{len(record_ids)} record ids for {x.shape[1]} records")
    if top < 0:
        raise ValueError(f"top must be >= 0, got {top}")
    present = ~np.isnan(x)
    judges: dict[str, dict] = {}
    for j, name in enumerate(names):
        n = int(present[j].sum())
        vs_rest = alpha(np.vstack([x[j], _rest(x, j, level)]), level) if len(names) >= 2 else None
        judges[name] = {"n": n, "alpha_vs_rest": vs_rest, "mean": float(x[j, present[j]].mean()) if n else None}
    panel = alpha(x, level)
    multi = np.nonzero(present.sum(axis=0) >= 2)[0]
    disagreements: list[dict] = []
    if len(multi) and top:
        sub = x[:, multi]
        spread = np.nanmax(sub, axis=0) - np.nanmin(sub, axis=0)
        sd = np.nanstd(sub, axis=0)
        live = spread > 0
        cand, spread, sd = multi[live], spread[live], sd[live]
        for k in np.lexsort((cand, -sd, -spread))[:top]:
            i = int(cand[k])
            disagreements.append({
                "record": record_ids[i] if record_ids is not None else i,
                "scores": {name: float(x[j, i]) for j, name in enumerate(names) if present[j, i]},
                "range": float(spread[k]),
            })
    return {"alpha": panel, "level": level, "judges": judges, "records": int(len(multi)),
            "disagreements": disagreements}


class JuryCollector:
    """Collects a panel's scores one record at a time (:meth:`add`), then :meth:`finish` computes
    :func:`jury_agreement`. Holds one float per (record, judge) and the record ids. Judges are
    ordered as first seen; a judge first seen late has no value (NaN) for the earlier records."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._seen: set[str] = set()
        self._columns: dict[str, array] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, record_id: str, scores: Mapping[str, float | None]) -> None:
        """One record's scores by judge; ``None`` or NaN = no value. A record id is added once."""
        if record_id in self._seen:
            raise ValueError(f"record {record_id!r} was already added")
        values = {name: math.nan if v is None else float(v) for name, v in scores.items()}
        bad = [name for name, v in values.items() if math.isinf(v)]
        if bad:
            raise ValueError(f"record {record_id!r}: infinite score from {', '.join(map(str, bad))}")
        k = len(self._ids)
        for name in values:
            if name not in self._columns:
                self._columns[name] = array("d", [math.nan]) * k
        for name, column in self._columns.items():
            column.append(values.get(name, math.nan))
        self._ids.append(record_id)
        self._seen.add(record_id)

    def finish(self, level: str, *, top: int = 5) -> dict:
        """:func:`jury_agreement` of the records added so far, at ``level``."""
        names = list(self._columns)
        scores = (np.vstack([np.frombuffer(c, dtype=float) for c in self._columns.values()]) if names
                  else np.empty((0, len(self._ids))))
        return jury_agreement(names, scores, level, top=top, record_ids=self._ids)
