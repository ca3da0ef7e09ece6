"""The values the comparison plots draw (ragscale.report.runs.load_runs, issue 37): per run, or per run
and model, each record's number of each metric with its unit of resampling; errored records, values
that are no number and metrics not asked for left out; flags noticed; the summaries' metric order; a
records file with a cut line is one line; an unknown metric names what the runs have."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import UserError
from ragscale.report.runs import load_runs, select_metrics


def write_run(path, records, metrics=None):
    path.mkdir(parents=True)
    (path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if metrics is not None:
        (path / "summary.json").write_text(json.dumps({"metrics": metrics}))
    return str(path)


RECORDS = [
    {"model_id": "m1", "conversation_id": "c1", "metrics": {"RB_agg": [0.5], "Length": [10], "answered": 1,
                                                            "RB_agg_zero_denominator": [False]}},
    {"model_id": "m1", "conversation_id": "c1", "metrics": {"RB_agg": [0.7], "Length": [12], "answered": 0}},
    {"model_id": "m2", "conversation_id": "c2", "metrics": {"RB_agg": [0.2], "Length": [9], "answered": 1}},
    {"model_id": "m2", "metrics": {"RB_agg": [float("nan")], "Length": ["x"], "answered": 1}},  # no unit, no numbers
    {"model_id": "m2", "error": {"stage": "judge"}, "metrics": {"RB_agg": [0.9], "zz_only_errored": [1.0]}},
    {"model_id": "m3", "metrics": None},
    "not a record",
]


def test_per_run_and_per_model_with_their_units(tmp_path):
    a = write_run(tmp_path / "a", RECORDS, metrics=["Length", "RB_agg"])
    data = load_runs([a], cluster_by="conversation_id")
    (run,) = data.groups
    assert run.label == "a" and list(run.values["RB_agg"]) == [0.5, 0.7, 0.2]
    assert run.units["RB_agg"] == ["c1", "c1", "c2"] and run.units["answered"] == ["c1", "c1", "c2", None]
    assert list(run.values["Length"]) == [10, 12, 9]
    assert data.summary_metrics == ["Length", "RB_agg"] and data.flags == {"RB_agg_zero_denominator"}
    # an errored record's metrics exist
    assert data.seen == {"RB_agg", "Length", "answered", "RB_agg_zero_denominator", "zz_only_errored"}
    assert data.metrics == []
    by_model = load_runs([a], by_model=True, wanted=["RB_agg"])
    assert [g.label for g in by_model.groups] == ["m1", "m2"]
    assert [list(g.values) for g in by_model.groups] == [["RB_agg"], ["RB_agg"]]
    assert by_model.groups[0].units["RB_agg"] == [None, None]  # no cluster_by: every record alone
    assert load_runs([a], wanted=[]).groups[0].values == {}


def test_two_runs_by_model_are_labelled_run_and_model(tmp_path):
    a = write_run(tmp_path / "x" / "run", RECORDS[:2])
    b = write_run(tmp_path / "y" / "run", RECORDS[2:3])
    data = load_runs([a, b], by_model=True)
    assert [g.label for g in data.groups] == ["x/run\nm1", "y/run\nm2"]
    assert data.summary_metrics == []  # no summary.json


def test_a_records_file_with_a_cut_line_is_one_line(tmp_path):
    a = write_run(tmp_path / "a", RECORDS[:1])
    with open(tmp_path / "a" / "records.jsonl", "a") as fh:
        fh.write("{broken\n")
    with pytest.raises(UserError) as e:
        load_runs([a])
    assert str(e.value) == (f"{tmp_path / 'a' / 'records.jsonl'} line 2 is not a complete JSON record (a write was "
                            "cut?): remove that line, or re-run with overwrite=true")


def test_the_metrics_to_plot(tmp_path):
    data = load_runs([write_run(tmp_path / "a", RECORDS, metrics=["RB_agg", "answered", "Length",
                                                                   "RB_agg_zero_denominator"])])
    assert select_metrics(data, None) == ["RB_agg", "Length", "answered"]  # the rate last, as a bar chart; no flag
    assert select_metrics(data, ["Length", "Length"]) == ["Length"]
    with pytest.raises(UserError) as e:
        select_metrics(data, ["RB_ag"])
    assert str(e.value) == ("unknown metric 'RB_ag' (did you mean 'RB_agg'?); the runs have: Length, RB_agg, "
                            "RB_agg_zero_denominator, answered, zz_only_errored")
    with pytest.raises(UserError) as e:
        select_metrics(data, ["zz_only_errored"])
    assert str(e.value) == "metric 'zz_only_errored' has no numeric values in these runs"
