"""benchmarks/driver.py: the replicated rows, and the arithmetic of the driver's ceiling (no Ray)."""

from __future__ import annotations

import argparse
import json

import pytest

from conftest import load_benchmark

bench = load_benchmark("driver")


@pytest.fixture(scope="module")
def base():
    return bench.prepare_base(bench.base_rows())


def test_base_rows_are_the_sample_with_its_golden_metrics(base):
    rows = bench.base_rows()
    assert len(rows) == 30 and all(r["error"] is None for r in rows)
    assert {r["model_id"] for r in rows} == {"acme-7b", "borealis-13b", "cobalt-70b"}
    assert set(rows[0]["metrics"]) >= {"Recall", "RB_llm", "HMean_idk", "idk_eval"}
    # grouped by task, each task's three models in input order
    assert len(base) == 10 and all(len(t) == 3 for t in base)
    assert [r["model_id"] for r in base[0]] == ["acme-7b", "borealis-13b", "cobalt-70b"]


def test_template_and_fill():
    template = bench.input_template(json.dumps({"task_id": "t1", "model_id": "m", "text": "ü \"q\""}))
    out = json.loads(bench.fill(template, 'task "2"', "model-01"))
    assert out == {"task_id": 'task "2"', "model_id": "model-01", "text": "ü \"q\""}
    # an input without a model id keeps none
    assert json.loads(bench.fill(bench.input_template('{"task_id": "t"}'), "x", "m")) == {"task_id": "x"}


def test_nudge_moves_scores_only():
    assert bench.nudge(0.5, 0, 0, 0) != 0.5 and 0.0 <= bench.nudge(0.5, 7, 3, 9) <= 1.0
    for v in (0.0, 1.0, 63, False, None):
        assert bench.nudge(v, 5, 2, 3) == v and type(bench.nudge(v, 5, 2, 3)) is type(v)
    assert bench.nudge(0.5, 11, 4, 2) == bench.nudge(0.5, 11, 4, 2)  # deterministic
    assert bench.nudge(0.5, 11, 4, 0) > bench.nudge(0.5, 11, 4, 5)  # a later model scores lower
    assert bench.nudged({"a": [0.5, 1.0], "b": None}, 3, 1) == {"a": [bench.nudge(0.5, 3, 0, 1), 1.0], "b": None}


def test_replicated_records_are_distinct_and_well_formed(base):
    from ragscale.record import output_line

    rows = [bench.replicate(base, i, 10, "/in.jsonl") for i in range(40)]
    assert len({r["key"] for r in rows}) == 40 and rows[7]["key"] == "bench:7" and rows[7]["source_line"] == 7
    assert {r["model_id"] for r in rows} == {f"model-{m:02d}" for m in range(10)}
    assert len({r["task_id"] for r in rows}) == 4 and rows[0]["task_id"] == rows[9]["task_id"] != rows[10]["task_id"]
    # more tasks than the sample's ten: a new suffix
    assert bench.replicate(base, 100, 10, "/in.jsonl")["task_id"] == base[0][0]["task_id"] + "#1"
    line = json.loads(output_line(rows[13]))
    assert line["task_id"] == rows[13]["task_id"] and line["model_id"] == "model-03"
    assert line["ragscale"]["record_key"] == "bench:13" and line["error"] is None
    assert set(line["metrics"]) == set(base[0][0]["metrics"])


def test_make_block_and_spans(base):
    from ragscale.row import row_schema

    assert bench.spans(300, 128) == [(0, 128), (128, 128), (256, 44)] and bench.spans(0, 128) == []
    t = bench.make_block(base, 256, 44, 10, "/in.jsonl")
    assert t.schema == row_schema([m for task in base for r in task for m in r["metrics"]]) and t.num_rows == 44
    assert t.column("error").null_count == 44  # every metric fits its type
    stats = t.column("stats").to_pylist()
    assert json.loads(stats[0])["records_in"] == 44 and stats[1:] == [None] * 43  # the batch's counters on one row
    assert t.column("key").to_pylist()[0] == "bench:256"


def test_summarize():
    s = {"pool_to_driver": 2.0, "write": 0.5, "report_read": 4.0, "report_finish_summary": 3.0,
         "report_finish_reports": 0.5, "baseline_json_loads": 1.0}
    out = bench.summarize(1000, s)
    assert out["components_s"] == 10.0 and out["driver_ceiling_records_per_s"] == 100.0
    assert out["records_per_s"]["write"] == 2000.0 and out["records_per_s"]["baseline_json_loads"] == 1000.0
    assert out["ratio_to_baseline"] == {"pool_to_driver": 2.0, "write": 0.5, "report_read": 4.0,
                                        "report_finish_summary": 3.0, "report_finish_reports": 0.5}
    assert out["dominant"] == "report_read" and out["dominant_share"] == 0.4
    assert "baseline_json_loads" not in out["ratio_to_baseline"]


def test_console_and_proc_parsing():
    lines = ["[ragscale] other",
             "[ragscale] significance: 45 paired comparisons (vs-leader, 5 metric(s), 10000 resamples) in 13.8s"]
    assert bench.significance_seconds(lines) == 13.8 and bench.significance_seconds(["x"]) is None
    text = "Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\nRssAnon:\t  512 kB\nRssShmem:\t 256 kB\n"
    assert bench.status_kib(text) == {"VmHWM": 2048, "RssAnon": 512, "RssShmem": 256}
    with bench.MemorySampler(every=0.01) as m:
        pass
    assert set(m.mib()) == {"peak_rss_private_mib", "peak_rss_shared_mib"} and bench.peak_rss_mib() > 0


def test_cli_defaults():
    ap = argparse.ArgumentParser()
    bench.add_cli_args(ap)
    args = ap.parse_args([])
    assert args.records == [100_000, 1_000_000] and args.models == 10 and args.block_rows == 128 and not args.quick
    assert ap.parse_args(["--quick", "--records", "5"]).quick
