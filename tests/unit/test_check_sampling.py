"""The input check's reading of each file (ragscale.io.check): the first ``n`` records in every
format, the fields a record holds, and how several files of a run are checked together."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragscale.errors import UserError
from ragscale.io import check
from ragscale.io.inputs import InputFile, resolve_inputs
from ragscale.metrics.registry import field_needs

ORAG_CSV = ("query_id,query,query_run,passage_id,passage,generated_answer\n"
            "q1,Who wrote it?,1,[1],Ada wrote it.,Ada wrote it [1]\n")


def _jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_a_jsonl_sample_counts_unreadable_lines_as_records_and_skips_blank_ones(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text('{"a": 1}\n\n   \nnot json\n{"a": 2}\n{"a": 3}\n{"a": 4}\n')
    (f,) = resolve_inputs(str(p))
    assert list(check.sample(f, n=3)) == [{"a": 1}, {"a": 2}]
    assert list(check.sample(f, n=4)) == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert list(check.sample(f)) == [{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}]


def test_a_table_csv_sample_is_its_first_rows(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("response,reference\na1,r1\na2,r2\na3,r3\n")
    (f,) = resolve_inputs(str(p))
    assert list(check.sample(f, n=2)) == [{"response": "a1", "reference": "r1"}, {"response": "a2", "reference": "r2"}]


def test_a_parquet_sample_is_its_first_rows(tmp_path):
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"response": ["a1", "a2", "a3"]}), p)
    (f,) = resolve_inputs(str(p))
    assert list(check.sample(f, n=2)) == [{"response": "a1"}, {"response": "a2"}]


@pytest.mark.parametrize("obj", [["a list"], "a string", 3, None])
def test_a_record_that_is_not_an_object_holds_no_field(obj):
    assert check.present(obj, {}) == set()


def test_a_record_that_carries_an_input_error_holds_no_field():
    obj = {"input_error": "t.csv: line 3: 2 fields, the header has 3", "user_input": "q", "response": "a",
           "model_id": "m", "task_id": "t"}
    assert check.present(obj, {}) == set()


@pytest.mark.parametrize("obj, fields", [
    ({"response": "a"}, {"answer"}),
    ({"user_input": "  ", "response": "a"}, {"answer"}),
    ({"user_input": "q", "response": "a", "model_id": "m", "task_id": "t"}, {"question", "answer", "model_id", "task_id"}),
    ({"response": "a", "model_id": "m"}, {"answer", "model_id"}),
    ({"user_input": "q", "response": "a", "reference": "r", "retrieved_contexts": ["p"]},
     {"question", "answer", "reference", "contexts"}),
])
def test_the_fields_a_record_holds(obj, fields):
    assert check.present(obj, {}) == fields


def test_the_fields_a_record_holds_under_the_users_names():
    obj = {"prompt": "q", "output": "a", "model": "m", "qid": "t"}
    columns = {"question": "prompt", "answer": "output", "model_id": "model", "task_id": "qid"}
    assert check.present(obj, columns) == {"question", "answer", "model_id", "task_id"}


@pytest.mark.parametrize("count, shown", [
    (12, "c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11; "),
    (13, "c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, ...; "),
])
def test_the_refusal_shows_twelve_columns_and_marks_more(tmp_path, count, shown):
    f = InputFile(str(tmp_path / "in.jsonl"), "jsonl", "in", "t0")
    with pytest.raises(UserError) as e:
        check._refuse(f, [{f"c{i}": 1 for i in range(count)}], ["answer"], [])
    assert f"its columns: {shown}" in str(e.value)


def _refusal(files, metrics) -> str:
    with pytest.raises(UserError) as e:
        check.check_fields(files, field_needs(metrics))
    return str(e.value)


def test_a_file_without_answers_after_an_open_rag_eval_csv_is_refused(tmp_path):
    orag = tmp_path / "results.csv"
    orag.write_text(ORAG_CSV)
    own = _jsonl(tmp_path / "own.jsonl", [{"query": "q", "generated": "a"}])
    msg = _refusal(resolve_inputs([str(orag), own]), ["hhem"])
    assert msg.startswith(f"{own}: no record has an answer (1 checked)")


def test_a_file_without_answers_after_an_empty_file_is_refused(tmp_path):
    empty = tmp_path / "a_empty.jsonl"
    empty.write_text("")
    own = _jsonl(tmp_path / "b_own.jsonl", [{"query": "q", "generated": "a"}])
    msg = _refusal(resolve_inputs([str(empty), own]), ["exact_match"])
    assert msg.startswith(f"{own}: no record has an answer (1 checked)")


def test_a_reference_held_by_one_file_serves_a_run_with_an_open_rag_eval_csv(tmp_path):
    own = _jsonl(tmp_path / "a_own.jsonl", [{"response": "a", "reference": "r"}])
    orag = tmp_path / "b_results.csv"
    orag.write_text(ORAG_CSV)
    files = resolve_inputs([own, str(orag)])
    assert [f.fmt for f in files] == ["jsonl", "csv"]
    check.check_fields(files, field_needs(["exact_match"]))
