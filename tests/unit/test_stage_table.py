"""A stage over an Arrow batch (ragscale.pipeline.stage.process_table, issue 37): one output row per
input row, whatever the worker does to its list; a record the worker fails on gets its own error naming
the stage, the others go on; a metric the run did not plan fails its record naming the stage; the
worker's counters, the stage's seconds and the caller's extra counters land in the first row's stats;
the record's own fields come out as they went in."""

from __future__ import annotations

import json

import pytest
from rows import rows_of, table, worker_row

from ragscale.pipeline.stage import process_table


class Worker:
    """Scores each record's Recall as its length of text; fails a record whose text is "boom",
    reports ``prompts`` per record, and writes what ``extra`` holds too."""

    def __init__(self, drop: bool = False, extra: dict | None = None):
        self.drop, self.extra = drop, extra or {}

    def process(self, rows: list[dict]) -> dict:
        if any(r["prediction"] == "boom" for r in rows):
            raise ValueError("boom")
        for r in rows:
            r["metrics"]["Recall"] = [float(len(r["prediction"]))]
            r["metrics"].update(self.extra)
        if self.drop:
            del rows[-1]
        return {"prompts": len(rows)}


def batch(*texts: str):
    return table([worker_row(key=f"k{i}", prediction=t, model_id="m") for i, t in enumerate(texts)],
                 ["Recall"])


def test_each_record_is_scored_and_a_failing_one_fails_alone_naming_the_stage():
    out = rows_of(process_table(Worker(), "lexical", batch("ab", "boom", "abcd"), wait_s=1.5))
    assert [r["metrics"].get("Recall") for r in out] == [[2.0], None, [4.0]]
    assert [r["key"] for r in out] == ["k0", "k1", "k2"] and out[2]["model_id"] == "m"
    assert out[0]["error"] is None and json.loads(out[1]["error"]) == {"stage": "lexical", "message": "ValueError: boom"}
    stats = json.loads(out[0]["stats"])
    # the batch failed, then each record alone: only the records that succeeded are counted
    assert stats["prompts"] == 2 and stats["wait_s"] == 1.5 and stats["time_lexical_s"] >= 0
    assert [r["stats"] for r in out[1:]] == [None, None]


def test_without_extra_counters_the_stats_hold_the_workers_and_the_time():
    out = rows_of(process_table(Worker(), "judge", batch("a", "b")))
    assert set(json.loads(out[0]["stats"])) == {"prompts", "time_judge_s"}


def test_a_metric_the_run_did_not_plan_fails_its_record_naming_the_stage():
    out = rows_of(process_table(Worker(extra={"zz_unplanned": [1.0]}), "judge", batch("a")))
    assert out[0]["metrics"] == {"Recall": [1.0]}
    assert json.loads(out[0]["error"]) == {
        "stage": "judge", "message": "metric 'zz_unplanned' is not a metric the run planned (declare it: "
                                     "ragscale.metrics.registry)"}


def test_a_worker_that_drops_rows_from_its_batch_loses_no_record():
    out = rows_of(process_table(Worker(drop=True), "nli", batch("a", "b")))
    assert [r["key"] for r in out] == ["k0", "k1"] and [r["metrics"]["Recall"] for r in out] == [[1.0], [1.0]]
