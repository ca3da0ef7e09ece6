"""The last stage, ``derive`` (ragscale.pipeline.cpu_stages, issue 37): a judge panel's median, RB_agg
and its zero-denominator flag, the retrieval scores from UMBRELA grades, only what the run asked
for, errored records untouched, and a failure of one record that fails that record alone (stage
``derive``) while the others are derived. tests/unit/test_pinned_edges.py pins the MT-RAG values."""

from __future__ import annotations

import json

import pytest
from rows import rows_of, table, worker_row  # tests/rows.py

from ragscale.pipeline.cpu_stages import derive


def row(error: str | None = None, answerability: str = "ANSWERABLE", **metrics) -> dict:
    return worker_row(answerability=answerability, error=error, metrics=metrics)


def run(rows: list[dict], metrics: list[str], panel: dict | None = None) -> list[dict]:
    return rows_of(derive(table(rows, metrics), metrics=metrics, panel=panel))


def metrics_of(r: dict) -> dict:
    return r["metrics"]


def test_a_panel_metric_is_the_median_of_its_judges_that_scored():
    out = run([row(**{"RB_llm@a": [0.2], "RB_llm@b": [0.6], "RB_llm@c": None}),
               row(**{"RB_llm@a": [0.2], "RB_llm@b": [0.6], "RB_llm@c": [0.5]}),
               row(**{"RB_llm@a": None, "RB_llm@b": None})], ["RB_llm"], panel={"RB_llm": ["a", "b", "c"]})
    assert [metrics_of(r)["RB_llm"] for r in out] == [[pytest.approx(0.4)], [0.5], None]
    assert metrics_of(out[0])["RB_llm@a"] == [0.2]  # the judges' own scores stay


def test_rb_agg_and_its_flag_only_when_asked():
    m = {"Recall": [1.0], "RougeL_stemFalse": [0.0], "BertscoreR": [-1.0], "BertKPrec": []}
    (asked,) = run([row(**m)], ["RB_agg", "RB_agg_zero_denominator"])
    assert metrics_of(asked)["RB_agg"] == [0.0] and metrics_of(asked)["RB_agg_zero_denominator"] == [True]
    (no_flag,) = run([row(**m)], ["RB_agg"])
    assert metrics_of(no_flag) == {**m, "RB_agg": [0.0]}
    (nothing,) = run([row(**m)], ["HMean"])
    assert "RB_agg" not in metrics_of(nothing)


def test_retrieval_scores_from_the_umbrela_grades():
    (r,) = run([row(umbrela_scores=[0, 3, 2, 1])], ["P@1", "P@3", "AP@3", "MRR", "P@5"])
    m = metrics_of(r)
    assert m["P@1"] == 0.0 and m["P@3"] == pytest.approx(2 / 3) and m["MRR"] == 0.5
    assert m["AP@3"] == pytest.approx((1 / 2 + 2 / 3) / 2) and m["P@5"] is None  # K beyond the passages
    (r,) = run([row(umbrela_scores=None)], ["P@1", "MRR"])
    assert metrics_of(r)["P@1"] is None and metrics_of(r)["MRR"] is None
    (r,) = run([row(umbrela_scores=[3])], ["RB_agg_zero_denominator"])
    assert set(metrics_of(r)) == {"umbrela_scores"}  # no retrieval metric asked: none added


def test_errored_records_are_left_and_a_failing_record_fails_alone():
    err = json.dumps({"stage": "judge", "message": "x"})
    bad = row(**{"RB_llm@a": [0.1, 0.2], "RB_llm@b": [0.5]})  # the members' lists differ in length
    good = row(**{"RB_llm@a": [0.1], "RB_llm@b": [0.3]})
    errored = row(error=err, **{"RB_llm@a": [0.1]})
    out = run([bad, good, errored], ["RB_llm"], panel={"RB_llm": ["a", "b"]})
    assert json.loads(out[0]["error"])["stage"] == "derive" and "ValueError" in json.loads(out[0]["error"])["message"]
    assert metrics_of(out[0]) == metrics_of(bad)  # nothing half-derived
    assert metrics_of(out[1])["RB_llm"] == [pytest.approx(0.2)] and out[1]["error"] is None
    assert out[2]["error"] == err and out[2]["metrics"] == errored["metrics"]
    # the batch's compute time, on its first row only (the driver sums the rows' stats)
    assert json.loads(out[0]["stats"])["time_derive_s"] > 0 and out[1]["stats"] is None is out[2]["stats"]
