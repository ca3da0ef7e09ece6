"""What a resumed run decides from its inputs and a finished run's settings (ragscale.io.output,
issue 37): a JSONL or table CSV (any case of suffix) that only grew by appended records is resumed
with a note; an open-rag-eval CSV or a Parquet file that grew is a change (a row may join an earlier
query's record; a footer moves); a state without a usable size compares as changed; the column_map
a finished run read its inputs with, for the report of that run."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragscale.errors import UserError
from ragscale.io.output import check_inputs, run_columns


def grown(tmp_path, name: str, first: str, more: str) -> tuple[list, str]:
    path = tmp_path / name
    path.write_text(first)
    before, _ = check_inputs([], [str(path)])
    with open(path, "a") as fh:
        fh.write(more)
    return before, str(path)


@pytest.mark.parametrize("name, first, more", [
    ("in.jsonl", '{"a": 1}\n', '{"a": 2}\n'),
    ("table.csv", "question,answer\nq,a\n", "q2,a2\n"),
    ("TABLE.CSV", "question,answer\nq,a\n", "q2,a2\n"),
])
def test_an_input_that_only_grew_is_resumed_with_a_note(tmp_path, name, first, more):
    before, path = grown(tmp_path, name, first, more)
    now, notes = check_inputs(before, [path])
    assert notes == [f"[ragscale] input {path} grew since this output_dir's run (lines appended): only its new "
                     "records are scored"]
    assert now[0]["size"] == len(first) + len(more) and now[0]["path"] == path


def test_an_open_rag_eval_csv_that_grew_is_a_change(tmp_path):
    header = "query_id,query,query_run,passage_id,passage,generated_answer\n"
    before, path = grown(tmp_path, "results.csv", header + "q1,Q,1,p1,P,A\n", "q1,Q,1,p2,P2,\n")
    with pytest.raises(UserError) as e:
        check_inputs(before, [path])
    assert str(e.value) == (f"input {path} changed since this output_dir's run (size/hash differ): re-run with "
                            "overwrite=true, or use another output_dir")


def test_a_parquet_file_that_grew_is_a_change(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"a": [1]}), path)
    before, _ = check_inputs([], [str(path)])
    pq.write_table(pa.table({"a": [1, 2]}), path)
    with pytest.raises(UserError, match="changed since this output_dir's run"):
        check_inputs(before, [str(path)])


def test_a_state_without_a_usable_size_compares_as_changed(tmp_path):
    before, path = grown(tmp_path, "in.jsonl", '{"a": 1}\n', '{"a": 2}\n')
    with pytest.raises(UserError, match="changed since"):
        check_inputs([{**before[0], "size": "9"}], [path])
    now, notes = check_inputs([{**before[0], "path": "elsewhere.jsonl"}], [path])  # not this input's state
    assert notes == [] and now[0]["path"] == path


def test_a_finished_runs_column_map(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"config": {"columns": {"answer": "generated", "question": None,
                                                                          "contexts": 3}}}))
    assert run_columns(str(tmp_path)) == {"answer": "generated"}
    for text in ('{"config": {"columns": ["answer"]}}', '{"config": null}', "{}", "{broken"):
        (tmp_path / "run.json").write_text(text)
        assert run_columns(str(tmp_path)) == {}, text
    assert run_columns(str(tmp_path / "none")) == {}
