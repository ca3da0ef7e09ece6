"""Judge-vs-human agreement files: reading human ratings, writing agreement.{json,csv,md} (the figure,
agreement.png, is ragscale.report.agreement_plot's).

Human ratings are read from MT-RAG's human-evaluation layout (``evaluations`` with per-annotator
``annotations``; several annotators are reduced by the metric's ``aggregator``, median by
default for categorical metrics, mean otherwise) or from plain per-record label columns (JSONL
or CSV with ``task_id`` and optional ``model_id``, or ``record_key``, or ``query_id`` and
``query_run``; several rows for one record are averaged).
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from ragscale.errors import UserError
from ragscale.stats.agreement import STATS
from ragscale.report.safe import csv_writer, md_cell, visible
from ragscale.report.wording import plural

ALL = "ALL"  # the group of every model's records together
HUMAN_FILE_HELP = ("human ratings or labels: MT-RAG human-evaluation JSON, or JSONL/CSV with task_id [model_id] "
                   "(or record_key, or query_id + query_run) and one column per human metric")
_ID_COLUMNS = ("task_id", "model_id", "record_key", "query_id", "query_run")
_ANNOTATOR_COLUMNS = ("annotator", "annotator_id", "rater", "rater_id")
_PSEUDO_ANNOTATORS = ("system", "composite")


# ---------------------------------------------------------------- reading


@dataclass
class HumanRatings:
    """Human values per record key and metric, plus each metric's declared scale (if any)."""

    source: str
    layout: str
    values: dict[tuple, dict[str, float]] = field(default_factory=dict)  # key -> metric -> value
    annotators: dict[tuple, dict[str, int]] = field(default_factory=dict)
    scales: dict[str, list[float]] = field(default_factory=dict)
    skipped: int = 0  # MT-RAG evaluations without task_id or annotations
    non_numeric: dict[str, int] = field(default_factory=dict)  # plain layout: column -> cells ignored

    def metrics(self) -> list[str]:
        return sorted({m for v in self.values.values() for m in v})


def human_value(value: Any) -> float | None:
    """A human label as a number: a finite number, yes/true 1, no/false 0, a numeric text; None otherwise."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        s = value.strip().lower()
        if s in ("yes", "true"):
            return 1.0
        if s in ("no", "false"):
            return 0.0
        try:
            f = float(s)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _key(row: dict) -> tuple:
    """The join key of a human row: record_key, else (query_id, query_run, model?), else (task_id, model?)."""
    if row.get("record_key") not in (None, ""):
        return ("record_key", str(row["record_key"]))
    model = str(row["model_id"]) if row.get("model_id") not in (None, "") else None
    if row.get("query_id") not in (None, ""):
        return ("query", str(row["query_id"]), str(row.get("query_run") or "1"), model)
    if row.get("task_id") not in (None, ""):
        return ("task", str(row["task_id"]), model)
    raise ValueError("no task_id, record_key or query_id")


def _aggregate(vals: list[float], aggregator: str) -> float:
    return float(statistics.median(vals) if aggregator == "median" else sum(vals) / len(vals))


def _read_mtrag(data: dict, path: str) -> HumanRatings:
    """MT-RAG's human-evaluation layout: the human metrics' annotators per (task_id, model_id),
    categorical values mapped to their ``numeric_value`` and reduced by the metric's aggregator."""
    out = HumanRatings(path, "mtrag-human-evaluation")
    declared = {m.get("name"): m for m in data.get("metrics") or [] if isinstance(m, dict)}
    human = {n for n, m in declared.items() if m.get("author") == "human"} if declared else None
    for m in declared.values():
        if m.get("values"):
            out.scales[m["name"]] = sorted(float(v["numeric_value"]) for v in m["values"]
                                           if isinstance(v, dict) and human_value(v.get("numeric_value")) is not None)
    collected: dict[tuple, dict[str, list[float]]] = {}
    for ev in data.get("evaluations") or []:
        if not isinstance(ev, dict) or not isinstance(ev.get("annotations"), dict) or ev.get("task_id") is None:
            out.skipped += 1
            continue
        key = ("task", str(ev["task_id"]), str(ev["model_id"]) if ev.get("model_id") not in (None, "") else None)
        for metric, by_annotator in ev["annotations"].items():
            if (human is not None and metric not in human) or not isinstance(by_annotator, dict):
                continue
            mapping = {str(v.get("value")): v.get("numeric_value") for v in declared.get(metric, {}).get("values") or []
                       if isinstance(v, dict)}
            for annotator, a in by_annotator.items():
                if annotator in _PSEUDO_ANNOTATORS:  # algorithmic values stored beside the humans'
                    continue
                raw = a.get("value") if isinstance(a, dict) else a
                v = human_value(mapping.get(str(raw), raw))
                if v is not None:
                    collected.setdefault(key, {}).setdefault(metric, []).append(v)
    for key, by_metric in collected.items():
        for metric, vals in by_metric.items():
            spec = declared.get(metric, {})
            agg = spec.get("aggregator") or ("median" if spec.get("type") == "categorical" else "average")
            out.values.setdefault(key, {})[metric] = _aggregate(vals, agg)
            out.annotators.setdefault(key, {})[metric] = len(vals)
    return out


def _read_rows(rows: Iterable[dict], path: str, layout: str) -> HumanRatings:
    """Plain label columns; several rows for one record (one per annotator) are averaged."""
    out = HumanRatings(path, layout)
    collected: dict[tuple, dict[str, list[float]]] = {}
    for i, row in enumerate(rows):
        try:
            key = _key(row)
        except ValueError as e:
            raise UserError(f"{path}: row {i + 1}: {e}") from None
        for col, raw in row.items():
            if col is None or col in _ID_COLUMNS or col in _ANNOTATOR_COLUMNS or raw in (None, ""):
                continue
            v = human_value(raw)
            if v is None:
                out.non_numeric[col] = out.non_numeric.get(col, 0) + 1
                continue
            collected.setdefault(key, {}).setdefault(col, []).append(v)
    for key, by_metric in collected.items():
        for col, vals in by_metric.items():
            out.values.setdefault(key, {})[col] = sum(vals) / len(vals)
            out.annotators.setdefault(key, {})[col] = len(vals)
    return out


def read_human(path: str) -> HumanRatings:
    """Human ratings from ``path``: MT-RAG human-evaluation JSON, a JSON list of row objects,
    JSONL rows, or CSV (by the ``.csv`` suffix) with label columns."""
    if not os.path.isfile(path):
        raise UserError(f"--human {path}: no such file")
    try:
        if path.lower().endswith(".csv"):
            with open(path, newline="", encoding="utf-8-sig") as fh:  # -sig: spreadsheets' byte-order mark
                rows = list(csv.DictReader(fh))
            return _read_rows(rows, path, "csv")
        with open(path, encoding="utf-8-sig") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UserError(f"--human {path}: cannot read: {e}") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and "evaluations" in data:
        return _read_mtrag(data, path)
    if isinstance(data, list):
        if not all(isinstance(r, dict) for r in data):
            raise UserError(f"--human {path}: a JSON list must hold one object per rated record")
        return _read_rows(data, path, "json")
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                obj = json.loads(line)
            except ValueError:
                raise UserError(f"--human {path}: line {n} is not JSON (expected MT-RAG's human-evaluation JSON, "
                                "JSONL or CSV)") from None
            if not isinstance(obj, dict):
                raise UserError(f"--human {path}: line {n} is not a JSON object")
            rows.append(obj)
    return _read_rows(rows, path, "jsonl")


# ---------------------------------------------------------------- writing


def resampling_unit(cluster_by: str | None, labels: list[str | None], noun: str = "record",
                    verb: str = "resampled") -> dict:
    """What an interval treats as independent, from each item's ``cluster_by`` label (None: the item
    alone): ``{"by", "name", "units", "count", "text"}``, e.g. "resampled by conversation: 110
    conversations (842 records)"; ``by`` None (every item its own unit) when ``cluster_by`` is None
    or no item has a label."""
    count = len(labels)
    if cluster_by is None or all(v is None for v in labels):
        why = "" if cluster_by is None else f" (no {noun} has {cluster_by})"
        return {"by": None, "name": noun, "units": count, "count": count,
                "text": f"{verb} by {noun}: {count} {plural(noun, count)}{why}"}
    name = "conversation" if cluster_by == "conversation_id" else cluster_by
    alone = sum(v is None for v in labels)
    units = len({v for v in labels if v is not None}) + alone
    text = f"{verb} by {name}: {units} {plural(name, units)} ({count} {plural(noun, count)})"
    if alone:
        text += f"; {alone} {plural(noun, alone)} without {cluster_by}, each on its own"
    return {"by": cluster_by, "name": name, "units": units, "count": count, "text": text}


def _fmt(entry: dict | None) -> str:
    if not entry:
        return "–"
    if entry["value"] is None:
        return "n/a"
    ci = entry.get("ci")
    return f"{entry['value']:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def to_markdown(result: dict) -> str:
    """The agreement table (one row per human metric, run metric and model; value [95% CI],
    "–" where a statistic does not apply), then why any "n/a" is undefined."""
    head = ["human", "metric", "model", "n", *STATS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for r in result["rows"]:
        lines.append("| " + " | ".join(md_cell(c) for c in [r["human"], r["metric"], r["model"], str(r["n"]),
                                                            *(_fmt(r.get(s)) for s in STATS)]) + " |")
        reasons = dict.fromkeys(r[s]["reason"] for s in STATS if r.get(s) and r[s].get("reason"))
        if reasons:
            notes.append(f"- n/a for {r['human']} vs {r['metric']}, {visible(str(r['model']))}: {'; '.join(reasons)}")
        excluded = [f"{r[k]} {what}" for k, what in (("excluded_error", "with an error"),
                                                      ("excluded_null", "with a null metric")) if r.get(k)]
        if excluded and r["model"] == ALL:
            notes.append(f"- {r['human']} vs {r['metric']}: rated records left out: {', '.join(excluded)}")
    boot = result.get("bootstrap") if isinstance(result.get("bootstrap"), dict) else {}
    if boot.get("text"):  # what the intervals resample
        conf = f"{100 * boot['confidence']:g}% " if isinstance(boot.get("confidence"), (int, float)) else ""
        notes.append(f"- intervals: {conf}bootstrap, {boot.get('replicates')} resamples, {boot['text']}")
    return "\n".join(lines + ([""] + notes if notes else []))


def write_tables(result: dict, out_dir: str) -> dict[str, str]:
    """agreement.json, agreement.csv and agreement.md in ``out_dir``; the paths, agreement.png's too
    (ragscale.report.agreement.write_outputs draws it)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"agreement.{k}") for k in ("json", "csv", "md", "png")}
    with open(paths["json"], "w") as fh:
        json.dump(result, fh, indent=2)
    with open(paths["csv"], "w", newline="") as fh:
        w = csv_writer(fh)
        w.writerow(["human", "metric", "model", "n", "excluded_error", "excluded_null", "annotators_mean",
                    *(f"{s}{x}" for s in STATS for x in ("", "_ci_low", "_ci_high"))])
        for r in result["rows"]:
            cells = []
            for s in STATS:
                e = r.get(s) or {}
                ci = e.get("ci") or [None, None]
                cells += [e.get("value"), ci[0], ci[1]]
            w.writerow([r["human"], r["metric"], r["model"], r["n"], r.get("excluded_error"), r.get("excluded_null"),
                        r.get("annotators_mean"), *cells])
    with open(paths["md"], "w") as fh:
        fh.write(to_markdown(result) + "\n")
    return paths
