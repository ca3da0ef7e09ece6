"""Reading runs for the comparison plots (ragscale.report.runs): a record without metrics or with an
error is skipped without ending the run; a boolean metric is a flag; a summary.json that is no object
is no summary; what is neither a run dir nor a results CSV, a results CSV that cannot be read, and
runs with nothing to plot are one-line errors."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import UserError
from ragscale.report.runs import is_flag, load_runs, read_json, records_source, select_metrics


def write_run(path, lines, summary=None):
    path.mkdir(parents=True)
    (path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    if summary is not None:
        (path / "summary.json").write_text(json.dumps(summary))
    return str(path)


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, True), ([False, None, True], True), ([None], False), ([], False),
    ([1, True], False), (1, False), (0.5, False), ("true", False),
])
def test_a_boolean_or_a_list_of_booleans_is_a_flag(value, expected):
    assert is_flag(value) is expected


def test_records_after_one_without_metrics_or_with_an_error_are_still_read(tmp_path):
    run = write_run(tmp_path / "a", [
        {"metrics": {"Length": [1]}},
        {"metrics": None},
        "not a record",
        {"error": {"stage": "judge"}, "metrics": {"Length": [50], "zero": True}},
        {"metrics": {"Length": [3], "zero": False}},
    ])
    data = load_runs([run])
    assert list(data.groups[0].values["Length"]) == [1, 3]
    assert data.flags == {"zero"} and data.seen == {"Length", "zero"}


@pytest.mark.parametrize("content", ["[\"Length\"]", "\"Length\"", "3", "null", "{not json", ""])
def test_a_summary_json_that_is_no_object_is_no_summary(tmp_path, content):
    run = write_run(tmp_path / "a", [{"metrics": {"Length": [2]}}])
    (tmp_path / "a" / "summary.json").write_text(content)
    assert read_json(str(tmp_path / "a" / "summary.json")) is None
    assert load_runs([run]).summary_metrics == []


def test_read_json_returns_an_object_and_none_for_a_missing_file(tmp_path):
    (tmp_path / "s.json").write_text('{"metrics": ["a"]}')
    assert read_json(str(tmp_path / "s.json")) == {"metrics": ["a"]}
    assert read_json(str(tmp_path / "missing.json")) is None


def test_a_file_that_is_no_results_csv_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(UserError) as e:
        records_source(str(path))
    assert str(e.value) == (f"{path} is neither a ragscale output_dir nor an open-rag-eval results CSV (a header "
                            "of query_id, query and run_1_... score columns)")


def test_a_results_csv_that_is_not_utf8_after_its_header_is_a_one_line_error(tmp_path):
    path = tmp_path / "m.csv"
    row = b'q1,"' + b"x" * 20000 + b'",\n'
    path.write_bytes(b"query_id,query,run_1_generated_answer\n" + row + b'q2,"\xff",\n')
    with pytest.raises(UserError) as e:
        load_runs([str(path)])
    assert str(e.value).startswith(f"cannot read {path}: 'utf-8' codec can't decode byte 0xff")
    assert "\n" not in str(e.value)


def test_an_unknown_metric_when_the_runs_have_none_says_none(tmp_path):
    data = load_runs([write_run(tmp_path / "a", [{"metrics": {}}])])
    with pytest.raises(UserError) as e:
        select_metrics(data, ["Length"])
    assert str(e.value) == "unknown metric 'Length'; the runs have: none"


def test_runs_without_a_numeric_metric_have_nothing_to_plot(tmp_path):
    data = load_runs([write_run(tmp_path / "a", [{"metrics": {"zero": True, "note": ["x"]}}])])
    with pytest.raises(UserError) as e:
        select_metrics(data, None)
    assert str(e.value) == "no numeric metrics to plot in these runs"
