"""Human-calibrated estimates of each model's mean: prediction-powered inference (PPI++).

A cheap judge scores every record; humans label a subset. For each paired metric (human label
-> judged metric, paired as :mod:`ragscale.report.agreement` pairs them) and model this computes

- the **naive** judge mean over every judged record, with its CLT interval (biased when the
  judge is: the interval is around the wrong number);
- the **human-only** mean over the labelled records, with its CLT interval (unbiased, wide);
- the **calibrated** estimate: PPI++ (Angelopoulos, Duchi and Zrnic, 2023) with power tuning,
  ``lambda * mean(judge on unlabelled) + mean(human - lambda * judge on labelled)``, from
  ``ppi-python``'s ``ppi_mean_pointestimate``/``ppi_mean_ci``: unbiased for the human mean, its
  interval valid, and (lambda tuned, clipped to [0, 1]) asymptotically never wider than
  human-only's.

Labels on another scale than the metric are mapped as the user states (``calibration.map``),
never guessed: a human value outside the metric's range without a map is an error. A model with
fewer than ``min_labels`` labelled records gets a message, not a number. Differences between
models use PPI++ on the per-task paired difference where enough tasks are labelled for both
(docs/calibration.md). The intervals are cluster-robust over the run's unit (``cluster_by``, default
``conversation_id``: a task's unit is its first record's value, a task without one is its own unit;
None: every record alone, ppi-python's intervals as they are): a cluster-robust variance where
ppi-python has none, :mod:`ragscale.stats.ppi` documents it; the block's ``unit`` says what it is.
"""

from __future__ import annotations

import json
import math
import os
from array import array
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from ragscale.errors import UserError
from ragscale.report.calibration_settings import check_settings, resolve
from ragscale.report.headline import headline, higher_is_better
from ragscale.report.ranking import standings
from ragscale.report.safe import csv_writer, md_cell, visible
from ragscale.report.text import with_interval
from ragscale.report.wording import own_values
from ragscale.stats.ppi import classical, difference, estimate, ppi

METHOD = "PPI++ (power-tuned prediction-powered inference, ppi-python)"
DIFF_METHOD = "PPI++ on the per-task paired difference"
CSV_HEADER = ["metric", "human", "model", "n_labeled", "n_records", "naive_mean", "naive_ci_low", "naive_ci_high",
              "human_mean", "human_ci_low", "human_ci_high", "calibrated_mean", "calibrated_ci_low",
              "calibrated_ci_high", "lambda", "message"]


# ---------------------------------------------------------------- collecting a run's values


class _Column:
    """One (metric pair, model)'s records: task index, judged value, human value (NaN: none)."""

    def __init__(self) -> None:
        self.task, self.yhat, self.y = array("q"), array("d"), array("d")
        self.labeled_without_judge = 0

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.frombuffer(self.task, dtype=np.int64), np.frombuffer(self.yhat, dtype=float),
                np.frombuffer(self.y, dtype=float))


class CalibrationSink:
    """Calibration from one pass over a run's records (shared with the other report sinks): the
    human file is read and the pairs chosen first, each record is kept as (task, judged, human)."""

    def __init__(self, human_path: str, pairs: Sequence[str], maps: Sequence[str], run_metrics: Sequence[str],
                 settings: Any, cluster_by: str | None = "conversation_id"):
        from ragscale.report.agreement import read_human

        ppi()  # fail before the pass, not after it
        check_settings(settings)
        self.settings, self.human_path = settings, human_path
        self.human = read_human(human_path)
        if not self.human.values:
            raise UserError(f"calibration.human {human_path}: no human ratings found")
        self.pairs, self.maps = resolve(self.human, pairs, maps, run_metrics)
        self.tasks: dict[str, int] = {}
        self.cluster_by = cluster_by
        self.task_unit: list[str | None] = []  # per task index: its cluster_by label (None: the task alone)
        self.cols: dict[tuple[str, str], _Column] = {}  # (human metric, model) -> column
        self.matched = 0
        self.records = 0

    def add(self, rec: Any) -> None:
        from ragscale.metrics.registry import record_scalar
        from ragscale.report.agreement import run_keys
        from ragscale.report.significance import task_key

        if not isinstance(rec, dict):
            return
        self.records += 1
        key = next((k for k in run_keys(rec) if k in self.human.values), None)
        labels = self.human.values[key] if key is not None else {}
        self.matched += key is not None
        tkey = task_key(rec) or f"record={(rec.get('ragscale') or {}).get('record_key') or self.records}"
        task = self.tasks.setdefault(tkey, len(self.tasks))
        if task == len(self.task_unit):  # a new task: its unit is its first record's
            from ragscale.record_fields import field_label

            self.task_unit.append(None if self.cluster_by is None else field_label(rec, self.cluster_by))
        model = str(rec.get("model_id"))
        metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
        for h, m in self.pairs.items():
            try:
                v = None if rec.get("error") is not None else record_scalar(m, metrics.get(m))
            except (TypeError, ValueError):
                v = None
            hv = labels.get(h)
            col = self.cols.setdefault((h, model), _Column())
            if v is None or not math.isfinite(v):
                col.labeled_without_judge += hv is not None
                continue
            col.task.append(task)
            col.yhat.append(v)
            col.y.append(math.nan if hv is None else self.maps[h](hv) if h in self.maps else hv)

    def finish(self, summary: dict | None = None, significance: Any = None) -> dict:
        """The calibration block (summary.json's ``calibration``, see docs/calibration.md);
        ``summary`` gives the models' order for the comparisons and the headline to rank by,
        ``significance`` the comparison settings (design, alpha, correction)."""
        if not self.matched:
            raise UserError(f"calibration: no record of the run has a human label in {self.human_path} "
                            "(match on task_id [+ model_id], record_key or query_id/query_run)")
        conf = float(self.settings.confidence)
        block: dict[str, Any] = {"method": METHOD, "confidence": conf, "human": os.path.abspath(self.human_path),
                                 "layout": self.human.layout, "min_labels": self.settings.min_labels,
                                 "records": self.records, "matched": self.matched, "unit": self._unit(),
                                 "metrics": {}}
        for h, m in self.pairs.items():
            self._check_scale(h, m)
            models = {}
            for (hh, model), col in sorted(self.cols.items()):
                if hh == h:
                    models[model] = _within(self._model(col, conf), m)
            block["metrics"][m] = {"human": h, "mapping": self._mapping(h), "models": models}
        block["ranked_by"] = self._ranked_by(block, summary)
        if summary is not None and significance is not None:
            block.update(self._comparisons(block, summary, significance))
        return block

    def _codes(self) -> np.ndarray | None:
        """Each task's unit as an int code (by task index), None when no task has a ``cluster_by`` label."""
        from ragscale.stats.clustered import cluster_codes

        return cluster_codes(self.task_unit) if any(v is not None for v in self.task_unit) else None

    def _unit(self) -> dict:
        """What the intervals treat as independent, e.g. "clustered by conversation: 110 conversations (842 tasks)"."""
        from ragscale.report.agreement_io import resampling_unit

        unit = resampling_unit(self.cluster_by, self.task_unit, "task", "clustered")
        if unit["by"] is None:  # ppi-python's intervals: every record independent
            why = "" if self.cluster_by is None else f" (no record has {self.cluster_by})"
            unit.update(name="record", units=self.records, count=self.records,
                        text=f"every record on its own: {self.records} record{'s' if self.records != 1 else ''}{why}")
        return unit

    def _mapping(self, h: str) -> str | None:
        sm = self.maps.get(h)
        if sm is None:
            return None
        return f"{sm.text} (linear)" if sm.linear is not None else f"{sm.text} (table)"

    def _check_scale(self, h: str, m: str) -> None:
        """A human value outside the metric's range (0..1 when every judged value lies there,
        else the judged values' range) without a map is an error: scales are stated, never guessed."""
        ys = np.concatenate([c.arrays()[2] for (hh, _), c in self.cols.items() if hh == h] or [np.empty(0)])
        yh = np.concatenate([c.arrays()[1] for (hh, _), c in self.cols.items() if hh == h] or [np.empty(0)])
        ys = ys[~np.isnan(ys)]
        if not len(ys) or not len(yh):
            return
        lo, hi = (0.0, 1.0) if yh.min() >= 0 and yh.max() <= 1 else (float(yh.min()), float(yh.max()))
        if ys.min() >= lo - 1e-9 and ys.max() <= hi + 1e-9:
            return
        if h in self.maps:
            raise UserError(f"calibration.map {h}={self.maps[h].text}: mapped human values span "
                            f"{ys.min():g}..{ys.max():g}, outside {m}'s range {lo:g}..{hi:g}")
        raw = sorted({v for vals in self.human.values.values() for k, v in vals.items() if k == h})
        raise UserError(f"calibration: human {h} takes values {raw[0]:g}..{raw[-1]:g}, outside {m}'s range "
                        f"{lo:g}..{hi:g}; state how its labels map onto {m}, e.g. "
                        f"calibration.map=[{h}={raw[0]:g}..{raw[-1]:g}:{lo:g}..{hi:g}]")

    def _model(self, col: _Column, conf: float) -> dict:
        task, yhat, y = col.arrays()
        lab = ~np.isnan(y)
        n = int(lab.sum())
        codes = self._codes()
        c = None if codes is None else codes[task]
        out: dict[str, Any] = {"n_labeled": n, "n_records": len(yhat), "naive": classical(yhat, conf, c),
                               "human_only": None, "calibrated": None, "message": None}
        if col.labeled_without_judge:
            out["labeled_without_judge"] = col.labeled_without_judge
        need = self.settings.min_labels
        if n < need:
            out["message"] = (f"{n} human label{'s' if n != 1 else ''} with a judged value; at least {need} are "
                              "needed (calibration.min_labels)")
            return out
        est = estimate(y[lab], yhat[lab], yhat[~lab], conf, *((None, None) if c is None else (c[lab], c[~lab])))
        out["human_only"], out["calibrated"] = est["human_only"], est["calibrated"]
        if n == len(yhat):
            out["message"] = "every judged record is labelled: the calibrated estimate is the human mean"
        return out

    @staticmethod
    def _ranked_by(block: dict, summary: dict | None) -> str | None:
        """The headline when it is calibrated, else the first calibrated metric with a direction."""
        usable = [m for m, b in block["metrics"].items()
                  if higher_is_better(m) is not None and any(v["calibrated"] for v in b["models"].values())]
        head = headline(summary) if summary is not None else None
        return head if head in usable else (usable[0] if usable else None)

    def _per_task(self, h: str, model: str) -> tuple[np.ndarray, np.ndarray]:
        """The model's mean judged and mean human value of each task (NaN where none)."""
        nt = len(self.tasks)
        col = self.cols.get((h, model))
        if col is None:
            return np.full(nt, np.nan), np.full(nt, np.nan)
        task, yhat, y = col.arrays()
        out = []
        for vals in (yhat, y):
            ok = ~np.isnan(vals)
            counts = np.bincount(task[ok], minlength=nt)
            sums = np.bincount(task[ok], weights=vals[ok], minlength=nt)
            mean = np.full(nt, np.nan)
            mean[counts > 0] = sums[counts > 0] / counts[counts > 0]
            out.append(mean)
        return out[0], out[1]

    def _comparisons(self, block: dict, summary: dict, s: Any) -> dict:
        """Calibrated differences between models (the significance design and correction): PPI++
        on the per-task difference over the tasks both models have judged, labelled where both are."""
        from ragscale.report.significance import decide

        order = [model for _, model, _ in standings(dict(summary, calibration=block))]
        if len(order) < 2:
            return {}
        all_pairs = len(order) <= s.all_pairs_max_models
        pairs = list(combinations(order, 2)) if all_pairs else [(order[0], m) for m in order[1:]]
        out: dict[str, list] = {}
        codes = self._codes()
        for metric, b in block["metrics"].items():
            h = b["human"]
            per = {model: self._per_task(h, model) for model in order}
            entries = []
            for a, c in pairs:
                (ja, ha), (jc, hc) = per[a], per[c]
                judged = ~np.isnan(ja) & ~np.isnan(jc)
                lab = judged & ~np.isnan(ha) & ~np.isnan(hc)
                n = int(lab.sum())
                entry: dict[str, Any] = {"a": a, "b": c, "n": n, "mean_a": _cal_mean(b, a), "mean_b": _cal_mean(b, c),
                                         "diff": None, "ci": None, "p": None, "p_adjusted": None, "significant": False,
                                         "better": None, "method": DIFF_METHOD}
                if n < self.settings.min_labels:
                    entry["note"] = (f"{n} task(s) labelled for both; at least {self.settings.min_labels} needed: "
                                     f"the {own_values(metric)} comparison stands")
                else:
                    units = (None, None) if codes is None else (codes[lab], codes[judged & ~lab])
                    entry["diff"], entry["ci"], entry["p"] = difference(
                        (ha - hc)[lab], (ja - jc)[lab], (ja - jc)[judged & ~lab], float(self.settings.confidence),
                        *units)
                entries.append(entry)
            decide(metric, entries, s)
            out[metric] = entries
        return {"comparisons": out, "alpha": s.alpha, "correction": s.correction,
                "design": "all-pairs" if all_pairs else "vs-leader"}


def _within(row: dict, metric: str) -> dict:
    """A model's estimates with their intervals inside ``metric``'s catalog bounds (an interval of a
    0..1 metric never reaches past 0 or 1; ragscale.stats.intervals.clip)."""
    from ragscale.stats.intervals import bounds_of, clip

    for key in ("naive", "human_only", "calibrated"):
        e = row.get(key)
        if isinstance(e, dict) and e.get("ci") is not None:
            e["ci"] = list(clip((e["ci"][0], e["ci"][1]), bounds_of(metric)))
    return row


def _cal_mean(b: dict, model: str) -> float | None:
    cal = (b["models"].get(model) or {}).get("calibrated")
    return cal["mean"] if cal else None


def calibrate(run_dir: str, human_path: str, pairs: Sequence[str] = (), maps: Sequence[str] = (),
              settings: Any = None, significance: Any = None, summary: dict | None = None,
              cluster_by: str | None = "conversation_id") -> dict:
    """The calibration block of a finished run (``ragscale calibrate``): one pass over its
    records.jsonl; ``summary`` (default: its summary.json) orders the models; ``cluster_by`` the unit."""
    from ragscale.config import CalibrationConf, SignificanceConf
    from ragscale.io.output import iter_records

    records = os.path.join(run_dir, "records.jsonl")
    if not os.path.isfile(records):
        raise UserError(f"{run_dir}: no records.jsonl (not a ragscale run directory)")
    if summary is None:
        summary = read_summary(run_dir)
    settings = settings or CalibrationConf(human=human_path)
    sink = CalibrationSink(human_path, pairs, maps, summary.get("metrics") or [], settings, cluster_by)
    n = 0
    try:
        for rec in iter_records(records):
            n += 1
            sink.add(rec)
    except ValueError as e:
        raise UserError(f"{records}: line {n + 1} is not a JSON record: {e}") from None
    return sink.finish(summary, significance or SignificanceConf())


def read_summary(run_dir: str) -> dict:
    path = os.path.join(run_dir, "summary.json")
    try:
        with open(path) as fh:
            summary = json.load(fh)
    except FileNotFoundError:
        raise UserError(f"{run_dir}: no summary.json (the run has not finished)") from None
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read: {e}") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("models"), dict):
        raise UserError(f"{path}: not a ragscale summary")
    return summary


# ---------------------------------------------------------------- text and files


def to_markdown(block: dict) -> str:
    """Per calibrated metric and model: labels, naive, human-only and calibrated estimates."""
    conf = f"{100 * block['confidence']:g}%"
    unit = (block.get("unit") or {}).get("text")
    lines = [f"Method: {block['method']}; {conf} intervals{f' ({unit})' if unit else ''}; at least "
             f"{block['min_labels']} labels per model.", ""]
    for metric, b in block["metrics"].items():
        mapping = f", labels mapped {b['mapping']}" if b.get("mapping") else ""
        lines += [f"### {metric} (human {b['human']}{mapping})", "",
                  f"| model | labels | records | naive ({own_values(metric)}) | human only | calibrated (PPI++) | lambda |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for model, r in b["models"].items():
            cal = with_interval(metric, r["calibrated"]) if r["calibrated"] else (r["message"] or "–")
            lam = (r["calibrated"] or {}).get("lambda")
            lines.append(f"| {md_cell(model)} | {r['n_labeled']} | {r['n_records']} | {with_interval(metric, r['naive'])} | "
                         f"{with_interval(metric, r['human_only'])} | {cal} | {'–' if lam is None else f'{lam:.2f}'} |")
        notes = [f"- {visible(model)}: {r['message']}" for model, r in b["models"].items() if r["message"] and r["calibrated"]]
        lines += ([""] + notes if notes else []) + [""]
    return "\n".join(lines).rstrip() + "\n"


def csv_rows(block: dict) -> list[list]:
    """calibration.csv's rows (header CSV_HEADER)."""
    def num(v: Any) -> str:
        return "" if v is None else f"{v:.6g}"

    rows = []
    for metric, b in block["metrics"].items():
        for model, r in b["models"].items():
            cells = []
            for key in ("naive", "human_only", "calibrated"):
                e = r.get(key) or {}
                ci = e.get("ci") or [None, None]
                cells += [num(e.get("mean")), num(ci[0]), num(ci[1])]
            rows.append([metric, b["human"], model, r["n_labeled"], r["n_records"], *cells,
                         num((r.get("calibrated") or {}).get("lambda")), r.get("message") or ""])
    return rows


def write_outputs(block: dict, out_dir: str) -> dict[str, str]:
    """calibration.json, calibration.csv and calibration.md in ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"calibration.{k}") for k in ("json", "csv", "md")}
    with open(paths["json"], "w") as fh:
        json.dump(block, fh, indent=2)
    with open(paths["csv"], "w", newline="") as fh:
        w = csv_writer(fh)
        w.writerow(CSV_HEADER)
        w.writerows(csv_rows(block))
    with open(paths["md"], "w") as fh:
        fh.write("# Calibrated estimates\n\n" + to_markdown(block))
    return paths

