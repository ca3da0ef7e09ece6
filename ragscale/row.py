"""The pipeline row: the Record's typed columns plus what the stages add, as one Arrow schema.

A run's schema is built at plan time (``row_schema``): ``metrics`` is a struct with one typed
field per metric the run can produce (its type from the catalog: ``metric_type``), so metrics
travel between stages as Arrow values and are serialised once, by the writer. ``metric_keys``
keeps which metrics a record has, in the order the stages set them (a metric set to null
differs from one never computed). ``details`` maps a judge to the JSON text of its details and
``judge_errors`` is a list of JSON texts, each written once by the stage that adds it.

Inside a worker (ragscale/actors/, the CPU stages) a row is a plain dict: ``metrics`` a dict
of the metrics set so far, ``details`` a dict judge -> JSON text, ``judge_errors`` a list of
JSON texts; ragscale.pipeline.stage converts between the two and checks each metric's type.
"""

from __future__ import annotations

import json
import numbers
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

TURN = pa.struct([("speaker", pa.string()), ("text", pa.string())])
RECORD_FIELDS = [
    ("key", pa.string()),
    ("model_id", pa.string()),
    ("task_id", pa.string()),
    ("source_file", pa.string()),
    ("source_line", pa.int64()),
    ("input_json", pa.string()),  # the input object as the output keeps it (NaN as null, reserved keys out)
    ("input_metrics", pa.string()),  # the input's own metrics (JSON), merged under ours on output
    ("input_has_model_id", pa.bool_()),  # input_json already holds the record's model_id
    ("query", pa.string()),
    ("conversation", pa.list_(TURN)),
    ("prediction", pa.string()),
    ("targets", pa.list_(pa.string())),
    ("passages", pa.list_(pa.string())),
    ("passage_ids", pa.list_(pa.string())),
    ("answerability", pa.string()),
    ("answer_status", pa.string()),
    ("labels", pa.string()),  # the input's taxonomy labels (JSON), read by the taxonomy judges only
]
# What the stages add; ``metrics`` is the run's struct (row_schema), null in the record-only schema.
STAGE_FIELDS = [
    ("metric_keys", pa.list_(pa.string())),  # the metrics the record has, in the order they were set
    ("warnings", pa.list_(pa.string())),
    ("error", pa.string()),  # JSON {stage, message}
    ("judge_errors", pa.list_(pa.string())),  # JSON {judge, reason, raw?, undefined?, ...} each
    ("stats", pa.string()),  # JSON counters/seconds of a batch, on one row
    ("details", pa.map_(pa.string(), pa.string())),  # judge -> JSON of its details (rationales, labels)
]
STAGE_COLUMNS = ("metrics", *(name for name, _ in STAGE_FIELDS))  # the columns a stage may change

_ITEM = {"float": pa.float64(), "int": pa.int64(), "bool": pa.bool_()}


def metric_type(name: str) -> pa.DataType:
    """A metric's Arrow type, from the catalog: its dtype, as a list for MT-RAG's list shape and
    per-passage vectors. A panel member's ``<metric>@<tag>`` has its metric's type."""
    from ragscale.metrics.registry import lookup

    spec = lookup(name) or lookup(name.rsplit("@", 1)[0])
    if spec is None:
        raise ValueError(f"metric {name!r} is not in the catalog: its type is unknown")
    item = _ITEM[spec.dtype]
    return item if spec.scalar else pa.list_(item)


def row_schema(metrics: Sequence[str]) -> pa.Schema:
    """The schema of a run's rows: the record's fields, then ``metrics`` (one typed field per
    metric in ``metrics``), then the other stage columns."""
    struct = pa.struct([(m, metric_type(m)) for m in dict.fromkeys(metrics)])
    return pa.schema([*RECORD_FIELDS, ("metrics", struct), *STAGE_FIELDS])


def _is_number(v: Any) -> bool:  # numbers.Real holds numpy's numbers but not its bool
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer()


def _is_flag(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


# item type -> (its check, what a value must be, what a list's values must be)
_ACCEPTS: dict[pa.DataType, tuple[Callable[[Any], bool], str, str]] = {
    pa.float64(): (_is_number, "a number", "numbers"), pa.int64(): (_is_int, "an integer", "integers"),
    pa.bool_(): (_is_flag, "a bool", "bools")}


def metric_checks(schema: pa.Schema) -> dict[str, Callable[[Any], str | None]]:
    """metric -> a check of a value against the metric's type in ``schema``: None when it fits,
    else why not (a record whose metric does not fit its type fails, never a silent cast)."""
    out: dict[str, Callable[[Any], str | None]] = {}
    for f in schema.field("metrics").type:
        many = pa.types.is_list(f.type)
        ok, what, plural = _ACCEPTS[f.type.value_type if many else f.type]

        def check(v: Any, ok: Callable[[Any], bool] = ok, what: str = what, plural: str = plural,
                  many: bool = many) -> str | None:
            if v is None:
                return None
            if not many:
                return None if ok(v) else f"{v!r} is not {what}"
            if not isinstance(v, (list, tuple)):
                return f"{v!r} is not a list of {plural}"
            bad = next((x for x in v if x is not None and not ok(x)), None)
            return None if bad is None else f"{bad!r} in its list is not {what}"

        out[f.name] = check
    return out


def set_detail(row: dict, judge: str, value: Any) -> None:
    """Keep a judge's details of the record (serialised here, once)."""
    row["details"][judge] = json.dumps(value, ensure_ascii=False)


def detail(details: Mapping[str, str] | None, judge: str) -> Any:
    """A judge's details of a record (None when it has none)."""
    text = (details or {}).get(judge)
    return None if text is None else json.loads(text)


def judge_error_entries(row: dict) -> list[dict]:
    """The row's judge errors as dicts (parsed: for the rare stage that rewrites them)."""
    return [json.loads(e) for e in row.get("judge_errors") or ()]


def add_judge_errors(row: dict, entries: Iterable[dict]) -> None:
    """Append entries (``{judge, reason, raw?, undefined?, ...}``) to the row's ``judge_errors``."""
    row["judge_errors"] = [*(row.get("judge_errors") or ()), *(json.dumps(e, ensure_ascii=False) for e in entries)]
