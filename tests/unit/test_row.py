"""The pipeline row (ragscale.row, ragscale.pipeline.stage): metrics travel as a typed Arrow struct
built from the catalog; a metric set to null stays apart from one never computed, the order the
stages set them is kept, a value that does not fit its metric's type fails its record (never a
silent cast), and a stage converts back only the columns it may change."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from rows import rows_of, table, worker_row  # tests/rows.py

from ragscale.pipeline.stage import to_table
from ragscale.metrics.registry import MetricSpec
from ragscale.row import (STAGE_COLUMNS, add_judge_errors, detail, judge_error_entries, metric_type, row_schema,
                          set_detail)


def test_metric_types_come_from_the_catalog():
    assert metric_type("exact_match") == pa.float64()  # a scalar score
    assert metric_type("Recall") == pa.list_(pa.float64())  # MT-RAG's list shape
    assert metric_type("Length") == pa.list_(pa.int64())
    assert metric_type("RB_agg_zero_denominator") == pa.list_(pa.bool_())
    assert metric_type("umbrela_scores") == pa.list_(pa.int64())  # a per-passage vector of grades
    assert metric_type("nuggets_count") == pa.int64()
    assert metric_type("P@5") == pa.float64()  # a cut-off of P@k
    assert metric_type("RB_llm@judge-a") == metric_type("RB_llm")  # a panel member's
    assert metric_type("P@5@judge-a") == metric_type("P@5") == pa.float64()  # the tag after the last @
    with pytest.raises(ValueError, match="not in the catalog"):
        metric_type("no_such_metric")
    with pytest.raises(ValueError, match="never scalar"):  # so a vector's type is always a list
        MetricSpec("v", "judge", "f", shape="vector", scalar=True)


def test_null_and_absent_metrics_and_their_order_survive_the_round_trip():
    r = worker_row(key="k", metrics={"exact_match": None, "Recall": [0.5, 1.0], "Length": [3]})
    (back,) = rows_of(table([r], ["nuggets_count"]))
    assert list(back["metrics"].items()) == [("exact_match", None), ("Recall", [0.5, 1.0]), ("Length", [3])]
    assert "nuggets_count" not in back["metrics"]  # planned, never computed: absent, not null


@pytest.mark.parametrize("name, value, why", [
    ("exact_match", "0.5", "'0.5' is not a number"),
    ("exact_match", True, "True is not a number"),
    ("nuggets_count", 2.5, "2.5 is not an integer"),
    ("Recall", 0.5, "0.5 is not a list of numbers"),
    ("umbrela_scores", (1, 2.5), "2.5 in its list is not an integer"),
    ("RB_agg_zero_denominator", True, "True is not a list of bools"),
    ("umbrela_scores", "12", "'12' is not a list of integers"),
    ("Recall", [0.5, "x"], "'x' in its list is not a number"),
    ("RB_agg_zero_denominator", [1], "1 in its list is not a bool"),
])
def test_a_value_that_does_not_fit_its_type_fails_its_record_only(name, value, why):
    bad = worker_row(key="bad", metrics={"Length": [1], name: value})
    good = worker_row(key="good", metrics={name: None, "Length": [2]})
    schema = row_schema(["Length", name])
    out = rows_of(to_table([bad, good], schema, "lexical"))
    err = json.loads(out[0]["error"])
    assert err["stage"] == "lexical" and err["message"].startswith(f"metric {name!r}: ") and why in err["message"]
    assert out[0]["metrics"] == {"Length": [1]}  # the value that did not fit is not kept
    assert out[1]["error"] is None and out[1]["metrics"] == {name: None, "Length": [2]}


def test_numpy_values_fit_and_integral_floats_fit_a_count():
    r = worker_row(metrics={"exact_match": np.float32(0.25), "nuggets_count": 3.0, "Length": [np.int64(4)],
                            "RB_agg_zero_denominator": [np.bool_(True)]})
    (back,) = rows_of(table([r]))
    assert back["error"] is None
    assert back["metrics"] == {"exact_match": 0.25, "nuggets_count": 3, "Length": [4], "RB_agg_zero_denominator": [True]}


def test_a_metric_the_run_did_not_plan_fails_its_record():
    r = worker_row(metrics={"Length": [1], "surprise": 0.5})
    (back,) = rows_of(to_table([r], row_schema(["Length"]), "judge"))
    assert json.loads(back["error"]) == {"stage": "judge", "message": "metric 'surprise' is not a metric the run "
                                         "planned (declare it: ragscale.metrics.registry)"}
    assert back["metrics"] == {"Length": [1]}


def test_a_stage_converts_back_only_the_columns_it_may_change():
    base = table([worker_row(key="k", passages=["p1", "p2"], metrics={"Length": [1]})], ["exact_match"])
    (r,) = rows_of(base)
    r["metrics"]["exact_match"] = 1.0
    r["passages"] = ["changed"]  # a record field: not a stage's to change, so not converted back
    out = to_table([r], base.schema, "lexical", base=base)
    assert out.schema == base.schema and out.column("passages").to_pylist() == [["p1", "p2"]]
    assert rows_of(out)[0]["metrics"] == {"Length": [1], "exact_match": 1.0}
    assert set(STAGE_COLUMNS) < set(base.schema.names)


def test_details_and_judge_errors_are_serialised_once_each():
    r = worker_row()
    set_detail(r, "idk", {"label": "é"})
    add_judge_errors(r, [{"judge": "idk", "reason": "ü"}])
    add_judge_errors(r, [])
    assert r["details"] == {"idk": '{"label": "é"}'} and r["judge_errors"] == ['{"judge": "idk", "reason": "ü"}']
    assert judge_error_entries(r) == [{"judge": "idk", "reason": "ü"}] and judge_error_entries(worker_row()) == []
    (back,) = rows_of(table([r]))
    assert detail(back["details"], "idk") == {"label": "é"} and detail(back["details"], "other") is None
    assert back["judge_errors"] == r["judge_errors"]
