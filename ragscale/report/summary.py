"""Per-model summaries (overall and per answerability class), records.parquet, tables.

One streaming pass over records.jsonl, so summaries are right after a resume too.
Per-record scalars: a per-target metric uses its first target (MT-RAG's RB_agg does the
same; MT-RAG tasks have one target), a per-passage metric its best passage (max, as
RB_agg uses BertKPrec), flags count as 0/1. ``null`` values are left out of means.
"""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ragscale.io.output import iter_records
from ragscale.metrics.registry import METRICS
from ragscale.records import answerability_of

ALL = "ALL"


def record_scalar(name: str, value: Any) -> float | None:
    """The per-record number a metric contributes to means (see module docstring)."""
    if value is None:
        return None
    if isinstance(value, list):
        vals = [float(v) for v in value if v is not None]
        if not vals:
            return None
        spec = METRICS.get(name)
        return max(vals) if spec is not None and spec.per == "passage" else vals[0]
    return float(value)


class _Acc:
    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.sums: dict[str, float] = defaultdict(float)
        self.ns: dict[str, int] = defaultdict(int)
        self.parse_failures: dict[str, int] = defaultdict(int)

    def add(self, rec: dict, metrics: Sequence[str]) -> None:
        self.count += 1
        for err in (rec.get("ragscale") or {}).get("judge_errors") or []:
            self.parse_failures[err.get("judge")] += 1
        if rec.get("error") is not None:
            self.errors += 1
            return
        for name in metrics:
            v = record_scalar(name, (rec.get("metrics") or {}).get(name))
            if v is not None:
                self.sums[name] += v
                self.ns[name] += 1

    def to_dict(self, metrics: Sequence[str]) -> dict:
        return {
            "count": self.count,
            "errors": self.errors,
            "metrics": {m: (self.sums[m] / self.ns[m] if self.ns[m] else None) for m in metrics},
            "n": {m: self.ns[m] for m in metrics},
            "judge_parse_failures": dict(self.parse_failures),
        }


def _parquet_schema(metrics: Sequence[str]) -> pa.Schema:
    def mtype(name: str) -> pa.DataType:
        if name == "RB_agg_zero_denominator":
            return pa.list_(pa.bool_())
        if name == "Length":
            return pa.list_(pa.int64())
        return pa.list_(pa.float64())

    return pa.schema(
        [
            ("record_key", pa.string()),
            ("model_id", pa.string()),
            ("task_id", pa.string()),
            ("conversation_id", pa.string()),
            ("turn", pa.string()),
            ("answerability", pa.string()),
            ("prediction", pa.string()),
            ("metrics", pa.struct([(m, mtype(m)) for m in metrics])),
            ("error_stage", pa.string()),
            ("error_message", pa.string()),
            ("warnings", pa.list_(pa.string())),
            ("record_json", pa.string()),
        ]
    )


def _answerability(rec: dict) -> str:
    return answerability_of(rec) or "UNKNOWN"


def _parquet_row(rec: dict, metrics: Sequence[str]) -> dict:
    preds = rec.get("predictions")
    pred = preds[0].get("text") if isinstance(preds, list) and preds and isinstance(preds[0], dict) else None
    err = rec.get("error") or {}
    m = rec.get("metrics") or {}
    return {
        "record_key": rec["ragscale"]["record_key"],
        "model_id": rec.get("model_id"),
        "task_id": None if rec.get("task_id") is None else str(rec.get("task_id")),
        "conversation_id": None if rec.get("conversation_id") is None else str(rec.get("conversation_id")),
        "turn": None if rec.get("turn") is None else str(rec.get("turn")),
        "answerability": _answerability(rec),
        "prediction": pred if isinstance(pred, str) else None,
        "metrics": {k: m.get(k) for k in metrics},
        "error_stage": err.get("stage"),
        "error_message": err.get("message"),
        "warnings": rec["ragscale"].get("warnings") or [],
        "record_json": json.dumps(rec, ensure_ascii=False),
    }


def finalize(out_dir: str, metrics: Sequence[str], *, rows_per_group: int = 2000) -> dict:
    """Write records.parquet, summary.json and summary.csv from records.jsonl; return the summary."""
    by_model: dict[str, dict[str, _Acc]] = defaultdict(lambda: defaultdict(_Acc))
    overall: dict[str, _Acc] = defaultdict(_Acc)
    schema = _parquet_schema(metrics)
    writer = pq.ParquetWriter(os.path.join(out_dir, "records.parquet"), schema)
    buf: list[dict] = []
    try:
        for rec in iter_records(os.path.join(out_dir, "records.jsonl")):
            model = str(rec.get("model_id"))
            cls = _answerability(rec)
            for acc in (by_model[model][ALL], by_model[model][cls], overall[ALL], overall[cls]):
                acc.add(rec, metrics)
            buf.append(_parquet_row(rec, metrics))
            if len(buf) >= rows_per_group:
                writer.write_table(pa.Table.from_pylist(buf, schema=schema))
                buf = []
        if buf:
            writer.write_table(pa.Table.from_pylist(buf, schema=schema))
    finally:
        writer.close()

    def block(accs: dict[str, _Acc]) -> dict:
        d = accs[ALL].to_dict(metrics)
        d["by_answerability"] = {k: a.to_dict(metrics) for k, a in sorted(accs.items()) if k != ALL}
        return d

    summary = {
        "reduction": "per-target metrics: first target; per-passage metrics: max over passages; nulls left out",
        "metrics": list(metrics),
        "models": {m: block(accs) for m, accs in sorted(by_model.items())},
        "overall": block(overall) if overall else None,
    }
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=2)
    with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model_id", "answerability", "count", "errors", *metrics])
        for model, accs in sorted(by_model.items()):
            for cls in [ALL] + sorted(k for k in accs if k != ALL):
                d = accs[cls].to_dict(metrics)
                w.writerow([model, cls, d["count"], d["errors"], *[_fmt(d["metrics"][m]) for m in metrics]])
    return summary


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


SHORT = {
    "RougeL_stemFalse": "RougeL",
    "BertscoreP": "BertP",
    "BertscoreR": "BertR",
    "Extractiveness_RougeL": "Extract",
    "RB_agg_zero_denominator": "RB0",
    "idk_eval": "IDK",
}


def format_table(summary: dict) -> str:
    """A fixed-width per-model table of means (what the CLI prints at the end)."""
    metrics = [m for m in summary["metrics"] if m != "RB_agg_zero_denominator"]
    head = ["model_id", "n", "err"] + [SHORT.get(m, m) for m in metrics]
    rows = []
    for model, d in summary["models"].items():
        vals = [("-" if d["metrics"][m] is None else f"{d['metrics'][m]:.1f}" if m == "Length" else f"{d['metrics'][m]:.4f}") for m in metrics]
        rows.append([model, str(d["count"]), str(d["errors"]), *vals])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in [head] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
