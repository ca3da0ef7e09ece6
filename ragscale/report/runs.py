"""Reading runs for the comparison plots: each run's records (a run directory's records.jsonl, or an
open-rag-eval results CSV) streamed into
per-group (run, or run x model) value arrays, and the choice of metrics to draw. Per-record
numbers come from :func:`ragscale.report.summary.record_scalar`; errored records and nulls are
left out, as in summary.json."""

from __future__ import annotations

import json
import math
import os
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

from ragscale.errors import UserError, did_you_mean



def is_flag(value: Any) -> bool:
    """A boolean metric value (or a list of booleans), e.g. RB_agg_zero_denominator."""
    if isinstance(value, bool):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, bool) for v in value if v is not None) \
        and any(v is not None for v in value)


def is_rate_metric(name: str) -> bool:
    """Metrics drawn as a "% of records" bar rather than a box."""
    return rate_title(name) is not None


def rate_title(name: str) -> str | None:
    """The bar chart's title of a rate metric (the catalog's ``rate_title``), else None."""
    from ragscale.metrics.registry import lookup

    spec = lookup(name)
    return spec.rate_title if spec is not None else None


def label_runs(run_dirs: Sequence[str]) -> list[str]:
    """Short, distinct labels for run dirs: the basename, or more trailing path parts when
    basenames collide, and a " (2)" suffix for the same dir given twice."""
    parts = [os.path.normpath(os.path.abspath(d)).split(os.sep) for d in run_dirs]
    labels = []
    for p in parts:
        k = 1
        while k < len(p):
            mine = os.sep.join(p[-k:])
            if sum(1 for q in parts if os.sep.join(q[-k:]) == mine and q != p) == 0:
                break
            k += 1
        labels.append(os.sep.join(p[-k:]) or os.sep)
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab} ({seen[lab]})")
    return out


def check_run_dir(run_dir: str) -> str:
    """The run dir's records.jsonl path, or a UserError saying what is missing."""
    if not os.path.isdir(run_dir):
        raise UserError(f"run dir {run_dir} does not exist")
    path = os.path.join(run_dir, "records.jsonl")
    if not os.path.isfile(path):
        raise UserError(f"{run_dir} has no records.jsonl (not a ragscale output_dir?)")
    return path


def records_source(run: str) -> str:
    """Where a run's records are: a ragscale output_dir's records.jsonl, or an open-rag-eval results
    CSV itself (ragscale.io.orag_results); a UserError for anything else."""
    from ragscale.io.orag_results import is_results_csv

    if is_results_csv(run):
        return run
    if os.path.isfile(run):
        raise UserError(f"{run} is neither a ragscale output_dir nor an open-rag-eval results CSV (a header of "
                        "query_id, query and run_1_... score columns)")
    return check_run_dir(run)


def run_records(source: str) -> Iterator[dict]:
    """The records at ``source`` (:func:`records_source`): records.jsonl's, or a results CSV's."""
    from ragscale.io.orag_results import results_records
    from ragscale.io.output import iter_records

    return results_records(source) if source.lower().endswith(".csv") else iter_records(source)


def read_json(path: str) -> dict | None:
    """A JSON object from ``path``, or None when it is absent or unreadable."""
    try:
        with open(path) as fh:
            obj = json.load(fh)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


@dataclass
class Group:
    """The per-record values of one box (a run, or a run x model)."""

    label: str
    values: dict[str, array] = field(default_factory=dict)
    units: dict[str, list] = field(default_factory=dict)  # per value, its record's unit of resampling (or None)

    def add(self, name: str, value: float, unit: str | None = None) -> None:
        self.values.setdefault(name, array("d")).append(value)
        self.units.setdefault(name, []).append(unit)


@dataclass
class PlotData:
    """The loaded runs: their groups, the summaries' metric order, every metric seen, and boolean flags."""

    groups: list[Group]
    metrics: list[str]  # in plot order
    summary_metrics: list[str]
    seen: set[str]
    flags: set[str]


def load_runs(run_dirs: Sequence[str], *, by_model: bool = False, wanted: Iterable[str] | None = None,
              cluster_by: str | None = None) -> PlotData:
    """Stream each run's records.jsonl into per-group value arrays (only ``wanted``
    metrics when given, else all), each value with its record's ``cluster_by`` label (the unit its
    interval resamples; ragscale.record_fields.field_label)."""
    from ragscale.record_fields import field_label
    from ragscale.report.summary import record_scalar

    paths = [records_source(d) for d in run_dirs]
    want = set(wanted) if wanted is not None else None
    labels = label_runs(run_dirs)
    groups: list[Group] = []
    summary_metrics: list[str] = []
    seen: set[str] = set()
    flags: set[str] = set()
    for run_dir, path, label in zip(run_dirs, paths, labels):
        summ = (read_json(os.path.join(run_dir, "summary.json")) or {}) if os.path.isdir(run_dir) else {}
        for m in summ.get("metrics") or []:
            if isinstance(m, str) and m not in summary_metrics:
                summary_metrics.append(m)
        per_model: dict[str, Group] = {}
        run_group = Group(label)
        try:
            for rec in run_records(path):
                metrics = rec.get("metrics") if isinstance(rec, dict) else None
                if not isinstance(metrics, dict):
                    continue
                seen.update(metrics)
                if rec.get("error") is not None:
                    continue
                if by_model:
                    model = str(rec.get("model_id"))
                    grp = per_model.get(model)
                    if grp is None:
                        grp = per_model[model] = Group(f"{label}\n{model}" if len(run_dirs) > 1 else model)
                else:
                    grp = run_group
                unit = None if cluster_by is None else field_label(rec, cluster_by)
                for name, value in metrics.items():
                    if want is not None and name not in want:
                        continue
                    if is_flag(value):
                        flags.add(name)
                    try:
                        v = record_scalar(name, value)
                    except (TypeError, ValueError):
                        continue
                    if v is not None and math.isfinite(v):
                        grp.add(name, v, unit)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read {path}: {exc}") from None
        groups.extend(sorted(per_model.values(), key=lambda g: g.label) if by_model else [run_group])
    return PlotData(groups, [], summary_metrics, seen, flags)


def select_metrics(data: PlotData, requested: Sequence[str] | None) -> list[str]:
    """The metrics to plot: ``requested`` (each must exist, with numeric values), else the
    summary's metrics (or all record metrics without a summary.json) that have numeric
    values, minus boolean flags; ``answered`` goes last (a bar chart)."""
    has_values = {m for g in data.groups for m, v in g.values.items() if len(v)}
    if requested:
        known = set(data.summary_metrics) | data.seen
        for m in requested:
            if m not in known:
                choices = sorted(known)
                raise UserError(f"unknown metric {m!r}{did_you_mean(m, choices)}; the runs have: {', '.join(choices) or 'none'}")
            if m not in has_values:
                raise UserError(f"metric {m!r} has no numeric values in these runs")
        chosen = list(dict.fromkeys(requested))
    else:
        base = data.summary_metrics or sorted(data.seen)
        chosen = [m for m in base if m in has_values and m not in data.flags]
        chosen += [m for m in sorted(has_values) if is_rate_metric(m) and m not in chosen]
        if not chosen:
            raise UserError("no numeric metrics to plot in these runs")
        chosen = [m for m in chosen if not is_rate_metric(m)] + [m for m in chosen if is_rate_metric(m)]
    return chosen
