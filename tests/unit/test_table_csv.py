"""A CSV of one record per row (ragscale.io.table_csv): what DataFrame.to_csv and spreadsheets
write. Cells stay text, empty cells are null, a row that cannot be read is a record of its own
whose input_error names its lines, and the header is checked in one line."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import UserError
from ragscale.io.table_csv import header, is_orag_header, read_rows
from ragscale.record import read_record


def _csv(tmp_path, text: str, name: str = "t.csv") -> str:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(p)


def test_rows_are_records_of_text_cells(tmp_path):
    p = _csv(tmp_path, '\ufeffqid,question,answer,contexts\n007,"Q, one?",A,"[\'p1\', \'p2\']"\n8,Q2,,\n')
    assert header(p) == ["qid", "question", "answer", "contexts"]
    assert list(read_rows(p)) == [
        {"qid": "007", "question": "Q, one?", "answer": "A", "contexts": "['p1', 'p2']"},
        {"qid": "8", "question": "Q2", "answer": None, "contexts": None},
    ]
    assert list(read_rows(p, limit=1)) == [{"qid": "007", "question": "Q, one?", "answer": "A", "contexts": "['p1', 'p2']"}]


def test_a_row_that_cannot_be_read_is_a_record_with_its_lines(tmp_path):
    p = _csv(tmp_path, 'a,b\n1,2,3\n"unterminated,4\n')
    rows = list(read_rows(p))
    assert rows[0]["input_error"] == f"{p}: line 2: 3 fields, the header has 2"
    assert rows[1]["input_error"].startswith(f"{p}: line") and "malformed CSV row" in rows[1]["input_error"]
    rec = read_record(json.dumps(rows[0]), key="k", model_id="m", task_id=None, source_file=p, source_line=1,
                      need_targets=False)
    assert json.loads(rec.error) == {"stage": "input", "message": rows[0]["input_error"]}


@pytest.mark.parametrize("text, message", [
    ("", "the CSV is empty (no header row)"),
    ("a,a\n1,2\n", "column(s) a appear twice in the header"),
    (",\n", "the CSV is empty (no header row)"),  # a row of empty cells is skipped, as a blank line
])
def test_header_errors_are_one_line(tmp_path, text, message):
    p = _csv(tmp_path, text)
    with pytest.raises(UserError) as e:
        header(p)
    assert str(e.value) == f"{p}: {message}"


def test_open_rag_evals_header_is_told_apart(tmp_path):
    assert is_orag_header(_csv(tmp_path, "query_id,query,query_run,passage_id,passage,generated_answer\n", "o.csv"))
    assert not is_orag_header(_csv(tmp_path, "question,answer\nq,a\n", "t.csv"))


def test_rows_past_the_first_are_counted_for_the_limit_and_spans_name_their_lines(tmp_path):
    p = _csv(tmp_path, 'a,b\n1,2\n3,"multi\nline",5\n6,7\n"unterminated,8\n9,10\n')
    rows = list(read_rows(p))
    assert rows[0] == {"a": "1", "b": "2"}
    assert rows[1] == {"format": "csv-table", "input_error": f"{p}: lines 3-4: 3 fields, the header has 2"}
    assert rows[2] == {"a": "6", "b": "7"}
    assert rows[3]["format"] == "csv-table" and rows[3]["input_error"].startswith(f"{p}: line")
    assert "malformed CSV row" in rows[3]["input_error"]
    assert [list(read_rows(p, limit=k)) for k in (0, 2, 3)] == [[], rows[:2], rows[:3]]


def test_a_header_row_that_cannot_be_read_is_one_line(tmp_path):
    p = _csv(tmp_path, '"a\x00,b\n1,2\n')
    with pytest.raises(UserError) as e:
        header(p)
    assert str(e.value).startswith(f"{p}: line 1: the header row is unreadable (")


def test_a_csv_is_written_once_as_jsonl_under_the_runs_inputs(tmp_path):
    """ragscale.io.inputs.materialize_csv: one JSON line per row in output_dir/inputs/<tag>.jsonl (the
    folder made if needed); a file name too long for the file system keeps 60 characters of its stem and
    its tag's hash; other formats pass through."""
    import hashlib

    from ragscale.io.inputs import materialize_csv, resolve_inputs

    short = _csv(tmp_path, "question,answer\nq1,a1\nq2,é\n", "t.csv")
    long = _csv(tmp_path, "question,answer\nq,a\n", "x" * 240 + ".csv")
    other = tmp_path / "in.jsonl"
    other.write_text('{"question": "q"}\n')
    files = resolve_inputs([short, long, str(other)])
    out = materialize_csv(files, str(tmp_path / "run"))
    digest = hashlib.sha1(long.encode()).hexdigest()[:8]
    assert [f.data for f in out] == [str(tmp_path / "run" / "inputs" / f"{files[0].tag}.jsonl"),
                                     str(tmp_path / "run" / "inputs" / f"{'x' * 60}-{digest}.jsonl"), None]
    assert out[2] == files[2]
    assert (tmp_path / "run" / "inputs" / f"{files[0].tag}.jsonl").read_text(encoding="utf-8") == (
        '{"question": "q1", "answer": "a1"}\n{"question": "q2", "answer": "é"}\n')
    assert sorted(p.name for p in (tmp_path / "run" / "inputs").iterdir()) == sorted(
        [f"{files[0].tag}.jsonl", f"{'x' * 60}-{digest}.jsonl"])  # no temporary file left
