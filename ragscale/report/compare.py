"""Two separate runs over the same tasks compared (``ragscale compare``, ragscale.commands.compare):
their records paired by task, the same paired tests as a sweep's significance block
(ragscale.report.significance), per compared metric (the leaderboard's: the headline, an H-Mean's
components, AnsAcc; or the metrics asked for). A run with one model is named by its directory, one
with several as ``DIR/model``.
"""

from __future__ import annotations

import os
from typing import Sequence

from ragscale.errors import UserError


def _run_metrics(run_dir: str, records_path: str) -> list[str]:
    """The run's metrics: summary.json's list, else every metric name its records have."""
    from ragscale.report.runs import read_json, run_records

    listed = (read_json(os.path.join(run_dir, "summary.json")) or {}).get("metrics") if os.path.isdir(run_dir) else None
    if isinstance(listed, list):
        return [m for m in listed if isinstance(m, str)]
    seen: dict[str, None] = {}
    for rec in run_records(records_path):
        if isinstance(rec, dict) and isinstance(rec.get("metrics"), dict):
            seen.update(dict.fromkeys(rec["metrics"]))
    return list(seen)


def compare_runs(run_a: str, run_b: str, *, metrics: Sequence[str] | None = None, settings=None,  # noqa: ANN001
                 cluster_by: str | None = "conversation_id", slices=None) -> dict:  # noqa: ANN001
    """The significance block of RUN_A's and RUN_B's models (``settings``: a SignificanceConf, default
    the config's defaults), resampling whole ``cluster_by`` units (None: each task alone); with
    ``slices`` (a SlicesConf naming fields) its ``slices`` sub-block on the first compared metric
    (ragscale.report.slices). A UserError when a path is not a run, a metric is unknown or no task is
    shared."""
    from ragscale.config import SignificanceConf
    from ragscale.errors import did_you_mean
    from ragscale.report.runs import label_runs, records_source, run_records
    from ragscale.report.significance import PairedValues, compare, compared_metrics

    settings = settings or SignificanceConf()
    dirs = [run_a, run_b]
    paths = [records_source(d) for d in dirs]
    known = list(dict.fromkeys(m for d, p in zip(dirs, paths) for m in _run_metrics(d, p)))
    if metrics:
        for m in metrics:
            if m not in known:
                raise UserError(f"unknown metric {m!r}{did_you_mean(m, known)}; the runs have: {', '.join(known) or 'none'}")
    values = PairedValues(list(metrics) if metrics else compared_metrics(known), cluster_by=cluster_by,
                          slice_by=list(getattr(slices, "by", None) or []))
    rename: dict[str, str] = {}
    for i, (label, path) in enumerate(zip(label_runs(dirs), paths)):
        models: dict[str, str] = {}  # model id -> its provisional name in values
        keyless, count = values.keyless, 0
        try:
            for rec in run_records(path):
                if isinstance(rec, dict):
                    model = str(rec.get("model_id"))
                    values.add(rec, models.setdefault(model, f"{i}:{model}"))
                    count += 1
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read {path}: {exc}") from None
        if count and values.keyless - keyless == count:
            raise UserError(f"{dirs[i]}: no record has a task_id, query_id or conversation_id + turn to pair by")
        rename.update({tmp: label if len(models) == 1 else f"{label}/{m}" for m, tmp in models.items()})
    values.rename(rename)
    names = list(rename.values())
    if len(names) < 2:
        raise UserError(f"nothing to compare: {run_a} and {run_b} hold {len(names)} model(s) with records")
    if len(names) > settings.all_pairs_max_models:  # each against the leader
        names = _leader_first(names, values)
    block = compare(names, values, settings)
    if block is None:
        raise UserError(f"no values of {', '.join(values.metrics)} in these runs")
    if all(e["n"] == 0 for entries in block["metrics"].values() for e in entries):
        raise UserError(f"{run_a} and {run_b} have no task in common (records are paired by task_id, else "
                        "query_id, else conversation_id + turn)")
    if values.slice_by:
        from ragscale.report.slices import slices_block

        found = slices_block(names, values, settings, values.metrics[0], slices.min_n, block)
        if found is not None:
            block["slices"] = found
    return block


def _leader_first(names: list[str], values) -> list[str]:  # noqa: ANN001
    """The models by their mean headline (the first compared metric) over their tasks, best first."""
    import numpy as np

    from ragscale.report.headline import higher_is_better

    up = higher_is_better(values.metrics[0]) is not False

    def key(name: str) -> tuple[bool, float]:
        row = values.row(name, values.metrics[0])
        row = row[~np.isnan(row)]
        return (True, 0.0) if not len(row) else (False, -float(row.mean()) if up else float(row.mean()))

    return sorted(names, key=key)
