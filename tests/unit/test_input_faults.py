"""Inputs that never abort a run (issue 33, item 6): a line nested too deep, not UTF-8, with a lone
surrogate escape or a model_id that is no id is that record's input error naming its file and line,
in the scan, the input check and the reader alike; a BOM before a JSONL file's first line is skipped;
a number as model_id is its string; a (model, task, run) answered twice is marked on its repeat
(ragscale.io.lines, ragscale.io.identity, ragscale.io.inputs, ragscale.record)."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragscale.columns import as_list, remap
from ragscale.errors import UserError
from ragscale.io.check import check_fields, sample
from ragscale.io.frames import write_jsonl
from ragscale.io.identity import REPEAT, ident
from ragscale.io.inputs import PointerArray, key_code, read_raw, resolve_inputs, scan
from ragscale.io.lines import MAX_DEPTH, LineError, clean_nan, depth, parse
from ragscale.metrics.registry import field_needs
from ragscale.pipeline.stage import to_rows
from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
from ragscale.record import read_record

DEEP = b'{"task_id": "deep", "response": "a", "x": ' + b"[" * 1000 + b"]" * 1000 + b"}"


def good(model: object = "m1", task: str = "t0", answer: str = "Paris", **extra) -> bytes:
    return json.dumps({"task_id": task, "model_id": model, "user_input": "Capital?", "response": answer,
                       "reference": "Paris", **extra}).encode()


def jsonl(path, *lines: bytes) -> str:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return str(path)


def read(raw, line: int = 4):
    return read_record(raw, key="k:4", model_id="stem", task_id=None, source_file="/d/a.jsonl", source_line=line,
                       need_targets=False)


def message(rec) -> str:
    return json.loads(rec.error)["message"]


def stage_rows(files, pointers):
    """Stage 1 (read + lexical) on the pointers, as the pipeline runs it."""
    return to_rows(load_and_lexical(pointer_table(pointers), files=files, metrics=["exact_match"]))


# ------------------------------------------------------------------ one line


@pytest.mark.parametrize("raw, why", [
    (DEEP, f"nested deeper than {MAX_DEPTH} levels"),
    (b'{"x": ' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"}", f"nested deeper than {MAX_DEPTH} levels"),
    (b'{"response": "Par\xffis"}', "not valid UTF-8 (byte 0xff at column 18"),
    (b'{"response": "a\\ud800"}', "holds a lone surrogate escape"),
    (b'{"response": "a", "model_id": ["m", 1]}', "model_id must be a string or a number, got list"),
    (b'{"response": "a", "model_id": true}', "model_id must be a string or a number, got bool"),
    (b'{"response": "a", "model_id": {"name": "m"}}', "model_id must be a string or a number, got dict"),
    (b"{not json", "not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
])
def test_a_line_that_cannot_be_read_is_its_own_error_naming_file_and_line(raw, why):
    rec = read(raw)
    assert json.loads(rec.error)["stage"] == "input"
    assert message(rec).startswith(f"/d/a.jsonl: line 4: {why}")
    kept = json.loads(rec.input_json)  # the line kept whole (as text), so the output still re-reads
    assert list(kept) == ["input_line"] and kept["input_line"] == raw.decode("utf-8", "replace")
    assert rec.model_id == "stem"


def test_the_nesting_limit_is_inclusive_and_paired_surrogates_are_text():
    at_limit = '{"response": "a", "x": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    assert read(at_limit).error is None and depth(json.loads(at_limit)) == MAX_DEPTH
    assert read('{"response": "\\ud83d\\ude00"}').prediction == "\U0001F600"
    with pytest.raises(LineError):
        parse(DEEP)


def test_a_number_as_model_id_is_kept_as_its_string():
    assert read(good(123)).model_id == "123" and read(good(1.5)).model_id == "1.5"
    for blank in ("", "  ", None):
        assert read(good(blank)).model_id == "stem"  # no id: the file's name, as documented
    assert ident(7) == "7" and ident("x") == "x" and ident(None) is None
    for bad in (True, [1], {"a": 1}, float("nan")):
        with pytest.raises(ValueError):
            ident(bad)
    # through a column map, the same rule
    assert read_record(json.dumps({"system": 42, "answer": "a"}), key="k", model_id="stem", task_id=None,
                       source_file="f", source_line=1, need_targets=False, columns={"model_id": "system"}).model_id \
        == "42"
    mapped = read_record(json.dumps({"system": [4], "answer": "a"}), key="k", model_id="stem", task_id=None,
                         source_file="f", source_line=1, need_targets=False, columns={"model_id": "system"})
    assert message(mapped) == "f: line 1: model_id must be a string or a number, got list"


def test_deep_values_are_walked_without_recursion():
    deep: list = []
    for _ in range(20000):
        deep = [deep, float("nan")]
    assert depth(deep) > MAX_DEPTH  # stops early, no RecursionError
    cleaned = clean_nan(deep)
    for _ in range(20000):
        assert cleaned[1] is None
        cleaned = cleaned[0]
    cell = "[" * 2000 + "]" * 2000
    assert as_list(cell) == [cell]  # too deep for a list cell: kept as the text it is
    assert remap({"m": [[1]], "a": "x"}, {"model_id": "m", "answer": "a"})["model_id"] == [[1]]


# ------------------------------------------------------------------ a file


def test_the_scan_and_the_reader_account_for_every_line(tmp_path):
    not_utf8 = good("m2", "t0", "PARIS").replace(b"PARIS", b"Par\xffis")
    p = jsonl(tmp_path / "in.jsonl", b"\xef\xbb\xbf" + good("m1", "t0"), DEEP, not_utf8, good(123, "t1"))
    files = resolve_inputs(p)
    pointers = list(scan(files, with_tasks=True))
    assert [q.line for q in pointers] == [1, 2, 3, 4] and pointers[0].offset == 3  # past the BOM
    assert [q.task for q in pointers] == ["t0", None, None, "t1"]  # unreadable lines have no task
    raw = read_raw(files, pointers)
    assert isinstance(raw[2], bytes) and raw[0].startswith("{")
    rows = stage_rows(files, pointers)
    assert [r["source_line"] for r in rows] == [1, 2, 3, 4]
    errors = {r["source_line"]: json.loads(r["error"])["message"] for r in rows if r["error"]}
    assert sorted(errors) == [2, 3]
    assert errors[2].startswith(f"{p}: line 2: nested deeper") and errors[3].startswith(f"{p}: line 3: not valid UTF-8")
    assert [(r["model_id"], r["metrics"].get("exact_match")) for r in rows if not r["error"]] == \
        [("m1", 1.0), ("123", 1.0)]


def test_the_input_check_reads_past_bad_lines(tmp_path):
    p = jsonl(tmp_path / "in.jsonl", b"\xef\xbb\xbf" + good(), DEEP, b'{"response": "\xff"}', b'{"r": "a\\ud800"}')
    files = resolve_inputs(p)
    assert [r["model_id"] for r in sample(files[0])] == ["m1"]
    check_fields(files, field_needs(["exact_match"]))  # no RecursionError, and not refused


def test_in_memory_data_too_deep_is_that_records_error(tmp_path):
    deep: list = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    rows = [{"response": "a", "user_input": "q"}, {"response": "b", "user_input": "q", "x": deep},
            {"response": "c", "user_input": "q", "x": "a\ud800"}]
    path = write_jsonl(pd.DataFrame(rows), str(tmp_path))
    recs = [read(line.rstrip("\n"), i) for i, line in enumerate(open(path, encoding="utf-8"), start=1)]
    assert recs[0].error is None
    assert message(recs[1]) == f"data record 1: nested deeper than {MAX_DEPTH} levels of arrays and objects (the " \
        "most ragscale reads)"
    assert message(recs[2]).startswith("data record 2: holds a lone surrogate")


# ------------------------------------------------------------------ answered twice


def test_a_repeat_of_a_model_task_and_run_is_marked_with_the_first(tmp_path):
    a = jsonl(tmp_path / "a.jsonl", good("m1", "t0"), good("m1", "t1"), good("m2", "t0"), good("m1", "t0", "Lyon"),
              good("m1", "t0", query_run=2), good("m1", "t0", query_run=2), b"{not json", good("m1", "t0"))
    b = jsonl(tmp_path / "b.jsonl", good("m1", "t1"))
    files = resolve_inputs([a, b])
    arr = PointerArray.scan(files, with_tasks=True)
    first = dict(zip(zip(arr.file_idx.tolist(), arr.line.tolist()), arr.first.tolist()))
    assert first == {(0, 1): -1, (0, 2): -1, (0, 3): -1, (0, 4): key_code(0, 1), (0, 5): -1, (0, 6): key_code(0, 5),
                     (0, 7): -1, (0, 8): key_code(0, 1), (1, 1): key_code(0, 2)}
    ordered = arr.ordered_for_sweep()[:5]  # the mark travels with its pointer
    assert {(f, ln): c for f, ln, c in zip(ordered.file_idx.tolist(), ordered.line.tolist(), ordered.first.tolist())} \
        == {k: first[k] for k in zip(ordered.file_idx.tolist(), ordered.line.tolist())}
    rows = stage_rows(files, arr)
    repeats = {(r["source_file"], r["source_line"]): json.loads(r["error"])["message"]
               for r in rows if r["error"] and json.loads(r["error"])["message"].endswith(REPEAT)}
    assert repeats[(a, 4)] == f"{a}: line 4: model 'm1' answered task 't0' at line 1 of {a} already {REPEAT}"
    assert sorted(repeats) == [(a, 4), (a, 6), (a, 8), (b, 1)]


def test_repeats_through_a_column_map_and_in_parquet(tmp_path):
    rows = [{"system": "m1", "qid": 1, "answer": "a"}, {"system": "m1", "qid": 1, "answer": "b"},
            {"system": "m2", "qid": 1, "answer": "c"}]
    path = str(tmp_path / "own.parquet")
    pq.write_table(pa.Table.from_pylist(rows), path)
    files = resolve_inputs(path, {"model_id": "system", "task_id": "qid", "answer": "answer"})
    assert PointerArray.scan(files, with_tasks=True).first.tolist() == [-1, key_code(0, 0), -1]
    out = stage_rows(files, PointerArray.scan(files, with_tasks=True))
    assert [r["error"] is None for r in out] == [True, False, True]
    assert json.loads(out[1]["error"])["message"] == f"{path}: row 1: model 'm1' answered task '1' at row 0 of " \
        f"{path} already {REPEAT}"  # (Parquet: 0-based rows)


def test_a_parquet_file_that_cannot_be_read_is_one_line_in_the_input_check(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(UserError) as e:  # it was pyarrow's ArrowInvalid, a traceback
        check_fields(resolve_inputs(str(bad)), field_needs(["exact_match"]))
    assert str(e.value).startswith(f"cannot read Parquet file {bad}: ")
