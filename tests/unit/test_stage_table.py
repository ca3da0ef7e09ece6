"""A stage over an Arrow batch (ragscale.pipeline.stage.process_table, issue 37): one output row per
input row, whatever the worker does to its list; a record the worker fails on gets its own error naming
the stage, the others go on; a metric the run did not plan fails its record naming the stage; the
worker's counters, the stage's seconds and the caller's extra counters land in the first row's stats;
the record's own fields come out as they went in."""

from __future__ import annotations

import json

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


class Hub:
    """What the progress hub actor receives (its ``add.remote``), recorded."""

    def __init__(self):
        self.got: list = []
        self.add = self

    def remote(self, stage, deltas, labels):
        self.got.append((stage, dict(deltas), dict(labels)))


class Reporting(Worker):
    progress = None  # the adapter puts its reporter's add here


def adapter(monkeypatch, restarted: bool, worker=Worker, counter: str | None = "lexical_restarts", hub=None,
            label=None):
    import types

    import ray

    from ragscale.pipeline.stage import actor_class
    from ragscale.stage_kinds import Stage

    monkeypatch.setattr(ray, "get_runtime_context",
                        lambda: types.SimpleNamespace(was_current_actor_reconstructed=restarted))
    cls = actor_class(Stage("lexical", worker, restart_counter=counter), hub, label)
    return cls()


def test_an_actor_restarted_by_ray_counts_once_in_its_first_batch(monkeypatch):
    a = adapter(monkeypatch, restarted=True)
    first, second = rows_of(a(batch("a", "b"))), rows_of(a(batch("c")))
    assert json.loads(first[0]["stats"])["lexical_restarts"] == 1 and first[1]["stats"] is None
    assert "lexical_restarts" not in json.loads(second[0]["stats"])
    fresh = adapter(monkeypatch, restarted=False)
    assert "lexical_restarts" not in json.loads(rows_of(fresh(batch("a")))[0]["stats"])
    uncounted = adapter(monkeypatch, restarted=True, counter=None)  # a pool whose restarts run.json does not count
    assert set(json.loads(rows_of(uncounted(batch("a")))[0]["stats"])) == {"prompts", "time_lexical_s"}
    assert type(a).__name__ == "Worker"  # Ray Data names the stage after the worker: MapBatches(Worker)


def test_an_empty_batch_of_a_restarted_actor_leaves_the_count_to_the_next(monkeypatch):
    a = adapter(monkeypatch, restarted=True)
    empty = table([], ["Recall"])
    assert a(empty).num_rows == 0
    assert json.loads(rows_of(a(batch("a")))[0]["stats"])["lexical_restarts"] == 1


def test_each_batch_is_reported_to_the_progress_hub_under_the_stages_label(monkeypatch):
    hub = Hub()
    a = adapter(monkeypatch, restarted=False, hub=hub)
    a(batch("a", "b"))
    a(batch("c"))
    assert [(s, d) for s, d, _ in hub.got] == [("lexical", {"records": (2, 0)}), ("lexical", {"records": (1, 0)})]
    tagged = adapter(monkeypatch, restarted=False, worker=Reporting, hub=hub, label="judge@b")
    assert tagged.worker.progress == tagged.reporter.add  # it can report inside a batch (the judges' prompts)
    tagged(batch("a"))
    assert hub.got[-1][:2] == ("judge@b", {"records": (1, 0)})
    assert adapter(monkeypatch, restarted=False, worker=Reporting).worker.progress is None  # no hub: untouched


def test_counters_add_to_what_earlier_stages_counted_in_the_row():
    rows = [worker_row(key="k0", prediction="ab", model_id="m", stats=json.dumps({"prompts": 5, "time_read_s": 0.5}))]
    (out,) = rows_of(process_table(Worker(), "judge", table(rows, ["Recall"]), prompts=2))
    stats = json.loads(out["stats"])
    assert stats["prompts"] == 5 + 1 + 2 and stats["time_read_s"] == 0.5 and "time_judge_s" in stats
