"""Per-model summaries (overall and per answerability class), records.parquet, tables.

One streaming pass over records.jsonl, so summaries are right after a resume too.
Per-record scalars: a per-target metric uses its first target (MT-RAG's RB_agg does the
same; MT-RAG tasks have one target), a per-passage metric its best passage (max, as
RB_agg uses BertKPrec), flags count as 0/1. ``null`` values are left out of means.

Answerability accuracy (from the IDK judge; MT-RAG's answerability classes): a record is
handled correctly when an unanswerable or conversational question gets a full IDK
(``idk_eval == 1``), an answerable or partially answerable one gets anything else, and
(MTRAG-UN) an underspecified one gets a clarification request (``underspecified_eval
== 1``). Records whose needed judge failed are left out.

Failed records: ``errors`` counts the records that failed outright (an ``error``, no metrics),
``judge_failed`` those whose judge engine gave no output after its retries (an ``engine error``
in ``judge_errors``; their other metrics count in the means). Both are failed records for the
exit code (docs/exit-codes.md); a judge that answered without a usable judgement is not.

Turns (MT-RAG's ``turn``, 1-based): when any record has one, each block also has
``by_turn`` with the first turn (``"1"``) and the later turns (``">1"``), the split that
MT-RAG reports (later turns are harder); records without a usable turn are in neither.
The same pass feeds the per-model leaderboard (ragscale.report.leaderboard). A record's question,
answer and answerability are its fields as the reader read them (ragscale.record_fields).
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from typing import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ragscale.exitcodes import failed
from ragscale.io.identity import REPEAT
from ragscale.io.output import iter_records
from ragscale.metrics.registry import label, lookup, record_scalar  # noqa: F401 - record_scalar: re-exported
from ragscale.row import metric_type
from ragscale.record import is_unreadable, judge_error_kind
from ragscale.record_fields import RecordFields, record_fields, record_texts
from ragscale.report.safe import console_name, csv_writer
from ragscale.stats.intervals import ExactSum

ALL = "ALL"
UNKNOWN = "UNKNOWN"  # the answerability class of a record without one
INPUT_ERRORS = ("lines that are not a JSON object, in files whose records name their own model_id: input errors "
                "of no model (left out of the models, counted among the failed records)")
MAX_REASONS = 20  # distinct undefined reasons counted per judge (summary.json keeps the 3 most common)
TURN_BUCKETS = ("1", ">1")  # MT-RAG: the first turn vs. the later turns of a conversation
DUPLICATES = ("records whose model answered their task (and query_run) earlier in the inputs: only the first answer "
              "is scored, each repeat is an input error of its model (docs/inputs.md)")


def turn_bucket(rec: dict) -> str | None:
    """``"1"`` for a record's first turn, ``">1"`` for a later one, ``None`` without a usable
    ``turn`` (an int, or a string of digits; 1-based as in MT-RAG)."""
    t = rec.get("turn")
    if isinstance(t, bool):
        return None
    if isinstance(t, float) and t.is_integer():
        t = int(t)
    elif isinstance(t, str) and t.strip().isdigit():
        t = int(t.strip())
    if not isinstance(t, int) or t < 1:
        return None
    return "1" if t == 1 else ">1"


class _Acc:
    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.judge_failed = 0  # records without an error whose judge engine failed (docs/exit-codes.md: failed)
        self.sums: dict[str, ExactSum] = defaultdict(ExactSum)  # the same mean in any record order
        self.ns: dict[str, int] = defaultdict(int)
        self.parse_failures: dict[str, int] = defaultdict(int)
        self.engine_errors: dict[str, int] = defaultdict(int)
        self.undefined: dict[str, int] = defaultdict(int)
        self.undefined_reasons: dict[str, Counter[str]] = defaultdict(Counter)
        self.ans_correct = 0
        self.ans_n = 0

    def add(self, rec: dict, metrics: Sequence[str], cls: str | None = None) -> None:
        """One record (``cls``: its answerability class, default read from it)."""
        self.count += 1
        engine_failed = False
        for err in (rec.get("ragscale") or {}).get("judge_errors") or []:
            judge = str(err.get("judge")) + (f"@{err['tag']}" if err.get("tag") else "")
            kind = judge_error_kind(err)
            if kind == "undefined":
                self.undefined[judge] += 1
                reasons, reason = self.undefined_reasons[judge], str(err.get("reason") or "no reason given")
                if reason in reasons or len(reasons) < MAX_REASONS:
                    reasons[reason] += 1
            elif kind == "engine":
                self.engine_errors[judge] += 1
                engine_failed = True
            else:
                self.parse_failures[judge] += 1
        if rec.get("error") is not None:
            self.errors += 1
            return
        self.judge_failed += engine_failed
        correct = answerability_correct(cls or _answerability(record_fields(rec)), rec.get("metrics") or {})
        if correct is not None:
            self.ans_n += 1
            self.ans_correct += int(correct)
        for name in metrics:
            v = record_scalar(name, (rec.get("metrics") or {}).get(name))
            if v is not None:
                self.sums[name].add(v)
                self.ns[name] += 1

    def add_unreadable(self, n: int) -> None:
        """``n`` lines of this model that are not a JSON object (see :class:`Unreadable`): failed records."""
        self.count += n
        self.errors += n

    def to_dict(self, metrics: Sequence[str]) -> dict:
        return {
            "count": self.count,
            "errors": self.errors,
            "judge_failed": self.judge_failed,
            "metrics": {m: (self.sums[m].value() / self.ns[m] if self.ns[m] else None) for m in metrics},
            "n": {m: self.ns[m] for m in metrics},
            "judge_parse_failures": dict(self.parse_failures),
            "judge_engine_errors": dict(self.engine_errors),
            "judge_undefined": dict(self.undefined),
            "judge_undefined_reasons": {j: dict(r.most_common(3)) for j, r in self.undefined_reasons.items()},
            "answerability_accuracy": self.ans_correct / self.ans_n if self.ans_n else None,
            "answerability_n": self.ans_n,
        }


def answerability_correct(answerability: str, metrics: dict) -> bool | None:
    """Whether the response handled the question's answerability right (module docstring);
    ``None`` when the class is unknown or the judge it needs has no value."""
    def first(name: str) -> float | None:
        v = metrics.get(name)
        return v[0] if isinstance(v, list) and v and v[0] is not None else None

    if answerability == "UNDERSPECIFIED":
        u = first("underspecified_eval")
        return None if u is None else u == 1
    idk = first("idk_eval")
    if idk is None:
        return None
    if answerability in ("UNANSWERABLE", "CONVERSATIONAL"):
        return idk == 1
    if answerability in ("ANSWERABLE", "PARTIAL"):
        return idk != 1
    return None


def _parquet_schema(metrics: Sequence[str]) -> pa.Schema:
    def mtype(name: str) -> pa.DataType:  # the pipeline's type of the metric (ragscale.row)
        try:
            return metric_type(name)
        except ValueError:  # a name outside the catalog: MT-RAG's [value] shape
            return pa.list_(pa.float64())

    return pa.schema(
        [
            ("record_key", pa.string()),
            ("model_id", pa.string()),
            ("task_id", pa.string()),
            ("conversation_id", pa.string()),
            ("turn", pa.string()),
            ("question", pa.string()),  # the inputs as the reader read them (ragscale.record_fields)
            ("contexts", pa.list_(pa.string())),
            ("reference", pa.list_(pa.string())),
            ("answerability", pa.string()),
            ("prediction", pa.string()),
            # Parquet has no empty struct: a run without per-record metrics (steps=[consistency]) has no column
            *([("metrics", pa.struct([(m, mtype(m)) for m in metrics]))] if metrics else []),
            ("error_stage", pa.string()),
            ("error_message", pa.string()),
            ("warnings", pa.list_(pa.string())),
            ("record_json", pa.string()),
        ]
    )


def _answerability(fields: RecordFields) -> str:
    return fields.answerability or UNKNOWN


def _parquet_row(rec: dict, metrics: Sequence[str], fields: RecordFields) -> dict:
    """A records.parquet row: the question, answer and answerability from the record's fields
    (``fields``: ragscale.record_fields), the passage and reference texts from its input part
    (``record_texts``: the reader's ``extract_fields``; the fields keep no texts)."""
    err = rec.get("error") or {}
    m = rec.get("metrics") or {}
    texts = record_texts(rec, fields)
    return {
        "question": fields.query,
        "contexts": texts.contexts,
        "reference": texts.references,
        "record_key": rec["ragscale"]["record_key"],
        "model_id": rec.get("model_id"),
        "task_id": None if rec.get("task_id") is None else str(rec.get("task_id")),
        "conversation_id": None if rec.get("conversation_id") is None else str(rec.get("conversation_id")),
        "turn": None if rec.get("turn") is None else str(rec.get("turn")),
        "answerability": _answerability(fields),
        "prediction": fields.answer,
        "metrics": {k: m.get(k) for k in metrics},
        "error_stage": err.get("stage"),
        "error_message": err.get("message"),
        "warnings": rec["ragscale"].get("warnings") or [],
        "record_json": json.dumps(rec, ensure_ascii=False),
    }


def is_repeat(rec: dict) -> bool:
    """Whether an output record repeats an earlier answer of its model to its task (its input error
    says so: ragscale.io.identity.REPEAT)."""
    err = rec.get("error")
    return isinstance(err, dict) and err.get("stage") == "input" and str(err.get("message", "")).endswith(REPEAT)


class Unreadable:
    """Input lines that are not a JSON object (ragscale.record.is_unreadable) name no model: the
    reader gave each its file's default model id (the file's stem). Such a line belongs to that
    model when a readable record has it too (a sweep file whose records carry no model_id: the stem
    IS the model, and its bad lines are its failed records). Otherwise (a file whose records name
    their own models) it is an input error of no model: left out of the per-model tables, the
    leaderboard and significance, and counted among the run's failed records."""

    def __init__(self) -> None:
        self.lines: Counter[str] = Counter()
        self.readable: set[str] = set()

    def held(self, rec: dict, model: str) -> bool:
        """Note a record of ``model``; True for an unreadable line (its model decided at the end)."""
        if is_unreadable(rec):
            self.lines[model] += 1
            return True
        self.readable.add(model)
        return False

    def owned(self) -> dict[str, int]:
        """The unreadable lines of each model they belong to."""
        return {m: n for m, n in self.lines.items() if m in self.readable}

    def orphans(self) -> dict[str, int]:
        """The unreadable lines per default model id that no readable record has: no model's."""
        return {m: n for m, n in self.lines.items() if m not in self.readable}


class SummarySink:
    """The per-model summary and records.parquet, fed one record at a time (one pass over
    records.jsonl shared with the other report sinks); memory: a few numbers per (model, cell, metric)."""

    def __init__(self, out_dir: str, metrics: Sequence[str], *, rows_per_group: int = 2000):
        self.out_dir, self.metrics, self.rows_per_group = out_dir, list(metrics), rows_per_group
        self.by_model: dict[str, dict[str, _Acc]] = defaultdict(lambda: defaultdict(_Acc))
        self.overall: dict[str, _Acc] = defaultdict(_Acc)
        self.by_turn: dict[str, dict[str, _Acc]] = defaultdict(lambda: defaultdict(_Acc))  # model -> bucket
        self.overall_turn: dict[str, _Acc] = defaultdict(_Acc)
        self.unreadable = Unreadable()
        self.repeats = 0  # records that repeat an earlier (model, task, run): input errors (ragscale.io.identity)
        self.schema = _parquet_schema(self.metrics)
        self.writer = pq.ParquetWriter(os.path.join(out_dir, "records.parquet"), self.schema)
        self.buf: list[dict] = []

    def add(self, rec: dict) -> None:
        model, metrics = str(rec.get("model_id")), self.metrics
        self.repeats += is_repeat(rec)
        fields = record_fields(rec)
        cls = _answerability(fields)
        mine = () if self.unreadable.held(rec, model) else (self.by_model[model][ALL], self.by_model[model][cls])
        for acc in (*mine, self.overall[ALL], self.overall[cls]):
            acc.add(rec, metrics, cls)
        turn = turn_bucket(rec)
        if turn is not None:
            for acc in (self.by_turn[model][turn], self.overall_turn[turn]):
                acc.add(rec, metrics, cls)
        self.buf.append(_parquet_row(rec, metrics, fields))
        if len(self.buf) >= self.rows_per_group:
            self._flush()

    def _flush(self) -> None:
        if self.buf:
            self.writer.write_table(pa.Table.from_pylist(self.buf, schema=self.schema))
            self.buf = []

    def close(self) -> None:
        """Finish records.parquet (also when the pass failed)."""
        if self.writer is not None:
            try:
                self._flush()
            finally:
                self.writer.close()
                self.writer = None

    def finish(self, consistency: dict | None = None,
               significance: Callable[[dict], dict | None] | None = None,
               calibration: Callable[[dict], dict | None] | None = None,
               inference: Callable[[dict], dict] | None = None) -> dict:
        """Write summary.json and summary.csv (records.parquet closed); return the summary.
        ``calibration(summary)`` gives its ``calibration`` block (ragscale.report.calibration),
        then ``significance(summary)`` its ``significance`` block (ragscale.report.significance),
        then ``inference(summary)`` its ``intervals`` and ``slices`` blocks (ragscale.report.slices)."""
        self.close()
        metrics, overall_turn = self.metrics, self.overall_turn
        for model, n in self.unreadable.owned().items():
            for cls in (ALL, UNKNOWN):
                self.by_model[model][cls].add_unreadable(n)

        def block(accs: dict[str, _Acc], turns: dict[str, _Acc]) -> dict:
            d = accs[ALL].to_dict(metrics)
            d["by_answerability"] = {k: a.to_dict(metrics) for k, a in sorted(accs.items()) if k != ALL}
            if overall_turn:  # some record of the run has a turn
                d["by_turn"] = {k: turns[k].to_dict(metrics) for k in TURN_BUCKETS if k in turns}
            return d

        by_model, overall, by_turn, out_dir = self.by_model, self.overall, self.by_turn, self.out_dir
        summary = {
            "reduction": "per-target metrics: first target; per-passage metrics: max over passages; nulls left out",
            "metrics": list(metrics),
            "models": {m: block(accs, by_turn.get(m, {})) for m, accs in sorted(by_model.items())},
            "overall": block(overall, overall_turn) if overall else None,
        }
        orphans = self.unreadable.orphans()
        if orphans:
            summary["input_errors"] = {"records": sum(orphans.values()), "reason": INPUT_ERRORS}
        if self.repeats:
            summary["duplicates"] = {"records": self.repeats, "reason": DUPLICATES}
        if overall_turn:
            summary["turns"] = "by_turn: '1' = first turn, '>1' = later turns (MT-RAG's split)"
        if consistency is not None:
            summary["consistency"] = consistency
        cal = calibration(summary) if calibration is not None else None
        if cal is not None:
            summary["calibration"] = cal
        block = significance(summary) if significance is not None else None
        if block is not None:
            summary["significance"] = block
        if inference is not None:
            summary.update(inference(summary))
        with open(os.path.join(out_dir, "summary.json"), "w") as fh:
            json.dump(summary, fh, indent=2)
        with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as fh:
            w = csv_writer(fh)
            w.writerow(["model_id", "answerability", "count", "errors", *metrics, "answerability_accuracy"])
            for model, accs in sorted(by_model.items()):
                for cls in [ALL] + sorted(k for k in accs if k != ALL):
                    d = accs[cls].to_dict(metrics)
                    w.writerow([model, cls, d["count"], d["errors"], *[_fmt(d["metrics"][m]) for m in metrics],
                                _fmt(d["answerability_accuracy"])])
        return summary


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def format_table(summary: dict) -> str:
    """A fixed-width per-model table of means (what the CLI prints at the end)."""
    metrics = [m for m in summary["metrics"] if lookup(m) is None or lookup(m).in_tables]
    acc = any(d.get("answerability_n") for d in summary["models"].values())
    head = ["model_id", "n", "err"] + [label(m) for m in metrics] + (["AnsAcc"] if acc else [])
    places = {m: lookup(m).decimals if lookup(m) is not None else 4 for m in metrics}
    rows = []
    for model, d in summary["models"].items():
        vals = ["-" if d["metrics"][m] is None else f"{d['metrics'][m]:.{places[m]}f}" for m in metrics]
        if acc:
            a = d.get("answerability_accuracy")
            vals.append("-" if a is None else f"{a:.4f}")
        rows.append([console_name(model), str(d["count"]), str(failed(d)), *vals])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in [head] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def finalize(out_dir: str, metrics: Sequence[str], *, rows_per_group: int = 2000,
             consistency: dict | None = None) -> dict:
    """Write records.parquet, summary.json and summary.csv from records.jsonl; return the summary."""
    sink = SummarySink(out_dir, metrics, rows_per_group=rows_per_group)
    try:
        for rec in iter_records(os.path.join(out_dir, "records.jsonl")):
            sink.add(rec)
    finally:
        sink.close()
    return sink.finish(consistency)
