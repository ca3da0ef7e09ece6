"""The input/output contract that mutation testing found unpinned (make mutate): input
discovery (formats, directories, recursive globs, duplicates, tags, exact error texts),
pointers (byte offsets, task ids of JSONL and Parquet, the numpy PointerArray and its sweep
order), raw record reads, the normalized JSONL of open-rag-eval CSVs (materialize_csv), the
CSV reader's header errors, groups and loose rows, and the output side: torn-tail repair,
the resume state file, RecordKeys and RecordWriter (counts, exact lines, non-UTF-8 locales).
Every file lives under pytest's tmp_path."""

from __future__ import annotations

import csv
import datetime
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ragscale
from ragscale.errors import UserError
from ragscale.io.inputs import (
    InputFile,
    Pointer,
    PointerArray,
    _fmt,
    materialize_csv,
    order_for_sweep,
    read_raw,
    resolve_inputs,
    scan,
)
from ragscale.io.orag_csv import _short, check_header, derived_query_id, read_records
from ragscale.io.output import RECORDS, STATE, RecordKeys, RecordWriter, _truncate_torn_tail, prepare

HEADER = "query_id,query,query_run,passage_id,passage,generated_answer\n"


def _write(path, data: str | bytes) -> str:
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", newline="")
    else:
        path.write_bytes(data)
    return str(path)


def _records(tmp_path, text: str) -> list[dict]:
    return list(read_records(_write(tmp_path / "in.csv", text)))


def _message(call) -> str:
    with pytest.raises(UserError) as e:
        call()
    return str(e.value)


# --- inputs: formats and discovery -------------------------------------------------------


@pytest.mark.parametrize("name, fmt", [("a.JSONL", "jsonl"), ("a.ndjson", "jsonl"), ("b.Parquet", "parquet"),
                                       ("b.pq", "parquet"), ("c.CSV", "csv"), ("c.csv", "csv"), ("d.txt", None)])
def test_fmt_names_each_format_by_suffix(name, fmt):
    """_fmt: the format name of each suffix, case-insensitively."""
    assert _fmt(name) == fmt


def test_directory_input_lists_supported_files_sorted(tmp_path):
    """A directory gives its .jsonl/.pq/.csv files (sorted) with their formats and stems; others are skipped."""
    d = tmp_path / "d"
    d.mkdir()
    _write(d / "c.txt", "x")
    _write(d / "b.pq", b"")
    _write(d / "a.jsonl", "{}\n")
    _write(d / "d.csv", HEADER)
    files = resolve_inputs(str(d))
    assert [(os.path.basename(f.path), f.fmt, f.stem) for f in files] == [
        ("a.jsonl", "jsonl", "a"), ("b.pq", "parquet", "b"), ("d.csv", "csv", "d")]


def test_directory_without_inputs_is_a_one_line_error(tmp_path):
    """A directory with no supported file: the exact message."""
    _write(tmp_path / "notes.txt", "x")
    assert _message(lambda: resolve_inputs(str(tmp_path))) == \
        f"input directory has no .jsonl, .parquet or .csv files: {tmp_path}"


def test_missing_file_is_not_taken_for_a_glob(tmp_path):
    """A missing path without glob characters (even with an X in it) is 'input file not found'."""
    p = str(tmp_path / "MISSING_X.jsonl")
    assert _message(lambda: resolve_inputs(p)) == f"input file not found: {p}"


def test_glob_double_star_is_recursive(tmp_path):
    """'**' in a glob matches files at any depth (and at the top)."""
    g = tmp_path / "g"
    (g / "a" / "b").mkdir(parents=True)
    _write(g / "x.jsonl", "{}\n")
    _write(g / "a" / "b" / "y.jsonl", "{}\n")
    files = resolve_inputs(str(g / "**" / "*.jsonl"))
    assert [f.stem for f in files] == ["y", "x"]


def test_the_same_file_twice_is_read_once(tmp_path):
    """A file named twice (directly or through a glob) appears once, and later files still come."""
    a = _write(tmp_path / "a.jsonl", "{}\n")
    b = _write(tmp_path / "b.jsonl", "{}\n")
    assert [f.stem for f in resolve_inputs([a, a, str(tmp_path / "*.jsonl"), b])] == ["a", "b"]


def test_csv_header_is_checked_when_inputs_are_resolved(tmp_path):
    """A .csv whose header is open-rag-eval's (it names passage_id or query_run) but lacks its
    required columns is refused by resolve_inputs already; another header is a table CSV."""
    p = _write(tmp_path / "bad.csv", "query_id,passage_id\n1,2\n")
    assert "not an open-rag-eval CSV: missing column(s)" in _message(lambda: resolve_inputs(p))
    (f,) = resolve_inputs(_write(tmp_path / "table.csv", "a,b\n1,2\n"))
    assert (f.fmt, f.read_fmt) == ("table", "jsonl")


def test_tag_is_stem_and_eight_hex_of_the_absolute_path(tmp_path):
    """Record keys use '<stem>-<8 hex of sha1(abs path)>' (stable across resumes)."""
    p = _write(tmp_path / "Model.v2.jsonl", "{}\n")
    (f,) = resolve_inputs(p)
    assert f.stem == "Model.v2"
    assert f.tag == "Model.v2-" + hashlib.sha1(os.path.abspath(p).encode()).hexdigest()[:8]


def test_no_inputs_at_all():
    """An empty list of inputs: 'no input files'."""
    assert _message(lambda: resolve_inputs([])) == "no input files"


# --- inputs: pointers and raw reads ------------------------------------------------------


def test_task_of_line(tmp_path):
    """The task id of a JSONL line: str of task_id, None when absent, null, not an object or not JSON."""
    lines = [b'{"task_id": 7}', b'{"x": 1}', b'{"task_id": null}', b"[1, 2]", b"not json"]
    files = resolve_inputs(_write(tmp_path / "t.jsonl", b"\n".join(lines) + b"\n"))
    assert [p.task for p in scan(files, with_tasks=True)] == ["7", None, None, None, None]


def test_jsonl_scan_offsets_are_bytes_and_tasks_optional(tmp_path):
    """JSONL pointers: 1-based lines, byte offsets (multi-byte text, CRLF), task only with with_tasks."""
    first = '{"task_id": "é"}\r\n'.encode()
    p = _write(tmp_path / "a.jsonl", first + b"\n" + b'{"task_id": 2}\n')
    files = resolve_inputs(p)
    assert list(scan(files, with_tasks=True)) == [Pointer(0, 1, 0, "é"), Pointer(0, 3, len(first) + 1, "2")]
    assert [q.task for q in scan(files, with_tasks=False)] == [None, None]


def _parquet(tmp_path, name="t.parquet"):
    table = pa.table({"x": [10, 20, 30], "task_id": ["t1", None, "t3"]})
    path = str(tmp_path / name)
    pq.write_table(table, path)
    return path


def test_parquet_scan_rows_offsets_and_task_column(tmp_path):
    """Parquet pointers: 0-based rows, offset -1, the task_id column (not the first one), null -> None."""
    files = resolve_inputs(_parquet(tmp_path))
    assert list(scan(files, with_tasks=True)) == [Pointer(0, 0, -1, "t1"), Pointer(0, 1, -1, None),
                                                  Pointer(0, 2, -1, "t3")]
    assert list(scan(files, with_tasks=False)) == [Pointer(0, 0, -1), Pointer(0, 1, -1), Pointer(0, 2, -1)]


def test_unreadable_parquet_is_a_user_error(tmp_path):
    """A corrupt Parquet file: 'cannot read Parquet file <path>: <pyarrow's reason>'."""
    p = _write(tmp_path / "bad.parquet", b"not parquet at all")
    files = resolve_inputs(p)
    assert _message(lambda: list(scan(files, with_tasks=True))).startswith(f"cannot read Parquet file {p}: ")


def test_order_for_sweep_keeps_taskless_pointers_in_place():
    """Pointers without a task keep their own slot; tasks are grouped at their first appearance."""
    ps = [Pointer(0, 1, 0, None), Pointer(0, 2, 10, "a"), Pointer(0, 3, 20, None), Pointer(0, 4, 30, "a")]
    assert [p.line for p in order_for_sweep(ps)] == [1, 2, 4, 3]


def test_read_raw_jsonl_keeps_the_line_text(tmp_path):
    """read_raw gives each pointer's line: trailing spaces and X kept, CR/LF cut, a line that is not UTF-8
    as its bytes (read_record makes it that record's error: issue 33, no longer replaced and scored)."""
    data = b'{"a": 1}   \n' + b'{"b": "\xff"}\n' + b"oops X\r\n" + b'{"c": 3}'
    files = resolve_inputs(_write(tmp_path / "a.jsonl", data))
    ps = list(scan(files, with_tasks=False))[::-1]
    assert read_raw(files, ps) == ['{"c": 3}', "oops X", b'{"b": "\xff"}', '{"a": 1}   ']


def test_read_raw_parquet_rows_as_json_with_dates(tmp_path):
    """A Parquet row is read as JSON; values JSON lacks (dates) are written as their str."""
    path = str(tmp_path / "d.parquet")
    pq.write_table(pa.table({"task_id": ["t1", "t2"], "when": [datetime.date(2024, 1, 2), None]}), path)
    files = resolve_inputs(path)
    ps = list(scan(files, with_tasks=True))
    assert read_raw(files, ps[::-1]) == ['{"task_id": "t2", "when": null}', '{"task_id": "t1", "when": "2024-01-02"}']


# --- inputs: PointerArray ----------------------------------------------------------------


def _tasks_jsonl(tmp_path, tasks) -> list[InputFile]:
    text = "".join(json.dumps({"task_id": t}) + "\n" if t is not None else "{}\n" for t in tasks)
    return resolve_inputs(_write(tmp_path / "t.jsonl", text))


def _strings_with_hash(pred, count):
    found = []
    for i in range(2_000_000):
        s = f"task-{i}"
        if pred(hash(s)):
            found.append(s)
            if len(found) == count:
                return found
    raise AssertionError("no such task id")  # pragma: no cover


def test_pointer_array_matches_scan_for_parquet(tmp_path):
    """PointerArray.scan holds the same pointers as scan (Parquet offsets -1 included)."""
    files = resolve_inputs(_parquet(tmp_path))
    arr = PointerArray.scan(files, with_tasks=True)
    assert arr.line.tolist() == [0, 1, 2] and arr.offset.tolist() == [-1, -1, -1]
    assert arr.has_task.tolist() == [True, False, True]


def test_sweep_groups_tasks_whatever_their_hash(tmp_path):
    """Tasks with negative hashes, or hashes that read as NaN as floats, group correctly (by task only)."""
    (neg,) = _strings_with_hash(lambda h: h < 0, 1)
    nan1, nan2 = _strings_with_hash(lambda h: -(2**52) < h < 0, 2)  # int64 bit patterns of float NaNs
    files = _tasks_jsonl(tmp_path, [neg, nan1, "m", nan2, neg, nan1, None])
    arr = PointerArray.scan(files, with_tasks=True)
    assert arr.ordered_for_sweep().line.tolist() == [1, 5, 2, 6, 3, 4, 7]


def test_pointer_array_slices_keep_task_columns(tmp_path):
    """Indexing a PointerArray keeps the task columns: a reversed slice still sweeps; has_task selects."""
    files = _tasks_jsonl(tmp_path, ["a", None, "b", "a"])
    arr = PointerArray.scan(files, with_tasks=True)
    assert arr[::-1].ordered_for_sweep().line.tolist() == [4, 1, 3, 2]
    assert arr[arr.has_task].line.tolist() == [1, 3, 4]


# --- inputs: materialize_csv -------------------------------------------------------------


def test_materialize_csv_writes_normalized_jsonl(tmp_path):
    """Each CSV becomes out/inputs/<tag>.jsonl (UTF-8 as is); JSONL inputs pass through; reruns and stale temp files are fine."""
    c1 = _write(tmp_path / "b.csv", HEADER + "q1,Qué es?,1,[1],Pasaje ñ,Respuesta é\n")
    j = _write(tmp_path / "a.jsonl", '{"task_id": "t"}\n')
    c2 = _write(tmp_path / "c.csv", HEADER + "q2,Other,1,[1],P,A\n")
    files = resolve_inputs([c1, j, c2])
    out = tmp_path / "out"
    (out / "inputs").mkdir(parents=True)
    _write(out / "inputs" / f"{files[0].tag}.jsonl.tmp", "stale")
    res = materialize_csv(files, str(out))
    assert res[1] is files[1]
    for f, r in ((files[0], res[0]), (files[2], res[2])):
        assert r == InputFile(f.path, "csv", f.stem, f.tag, os.path.join(str(out), "inputs", f"{f.tag}.jsonl"))
        assert r.read_path == r.data and r.read_fmt == "jsonl"
        with open(r.data, encoding="utf-8") as fh:
            text = fh.read()
        assert [json.loads(line) for line in text.splitlines()] == list(read_records(f.path))
        assert text.endswith("}\n") and text.count("\n") == 1
    with open(res[0].data, encoding="utf-8") as fh:
        assert '"generated_answer": "Respuesta é"' in fh.read()
    assert sorted(os.listdir(out / "inputs")) == sorted([f"{files[0].tag}.jsonl", f"{files[2].tag}.jsonl"])
    assert materialize_csv(files, str(out)) == res


_LOCALE_SCRIPT = """
import os, sys
# (for mutation testing: a mutant name holding non-ASCII arrives undecoded under the C locale)
if "MUTANT_UNDER_TEST" in os.environ:
    os.environ["MUTANT_UNDER_TEST"] = os.fsencode(os.environ["MUTANT_UNDER_TEST"]).decode("utf-8")
from ragscale.io.inputs import materialize_csv, resolve_inputs
from ragscale.io.output import RecordWriter
files = materialize_csv(resolve_inputs(sys.argv[1]), sys.argv[2])
w = RecordWriter(sys.argv[2], set())
w.write([{"ragscale": {"record_key": "k"}, "a": "\\u00e9"}])
w.close()
print(files[0].data)
"""


def test_outputs_are_utf8_under_an_ascii_locale(tmp_path):
    """Under a C (ASCII) locale the normalized CSV and records.jsonl are still written as UTF-8."""
    c = _write(tmp_path / "b.csv", HEADER + "q1,Qué,1,[1],p,Réponse\n")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_")}
    env.update(LC_ALL="C", LANG="C", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0", PYTHONIOENCODING="utf-8",
               PYTHONPATH=os.path.dirname(os.path.dirname(ragscale.__file__)))
    r = subprocess.run([sys.executable, "-c", _LOCALE_SCRIPT, c, str(out)], env=env, capture_output=True, text=True,
                       encoding="utf-8", timeout=60)
    assert r.returncode == 0, r.stderr
    with open(r.stdout.strip(), encoding="utf-8") as fh:
        assert '"generated_answer": "Réponse"' in fh.read()
    with open(out / RECORDS, encoding="utf-8") as fh:
        assert fh.read() == '{"ragscale": {"record_key": "k"}, "a": "é"}\n'


# --- output: torn tails, state, keys, writer ---------------------------------------------


@pytest.mark.timeout(10)
@pytest.mark.parametrize("data, removed, kept", [
    (b"", 0, b""),
    (b"x", 1, b""),
    (b"\n", 0, b"\n"),
    (b"xyz", 3, b""),
    (b"\nab", 2, b"\n"),
    (b"a\nb\n", 0, b"a\nb\n"),
    (b"a\nb\nc", 1, b"a\nb\n"),
    (b"x" * 70000, 70000, b""),
    (b"a" * 100000 + b"\n" + b"x" * 70000, 70000, b"a" * 100000 + b"\n"),
])
def test_truncate_torn_tail(tmp_path, data, removed, kept):
    """_truncate_torn_tail cuts everything after the last newline and returns the bytes removed."""
    p = _write(tmp_path / RECORDS, data)
    assert _truncate_torn_tail(p) == removed
    with open(p, "rb") as fh:
        assert fh.read() == kept


def test_resume_cuts_the_torn_line_of_the_output_dir(tmp_path, monkeypatch):
    """prepare(resume=True) repairs <out_dir>/records.jsonl, wherever the process runs."""
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "out")
    prepare(out, {"a": 1}, resume=True, overwrite=False)
    _write(tmp_path / "out" / RECORDS, b'{"a": 1}\n{"b"')
    prepare(out, {"a": 1}, resume=True, overwrite=False)
    assert (tmp_path / "out" / RECORDS).read_bytes() == b'{"a": 1}\n'


def test_state_file_is_indented_and_sorted(tmp_path):
    """The resume state file: the fingerprint as JSON, keys sorted, indent 1."""
    out = tmp_path / "out"
    prepare(str(out), {"b": 1, "a": [1, 2]}, resume=False, overwrite=False)
    assert (out / STATE).read_text() == '{\n "a": [\n  1,\n  2\n ],\n "b": 1\n}'


def test_changed_configuration_lists_every_changed_key(tmp_path):
    """Resuming with another configuration names changed, removed and added keys, comma-separated."""
    out = str(tmp_path / "out")
    prepare(out, {"a": 1, "b": 2, "c": 3}, resume=True, overwrite=False)
    msg = _message(lambda: prepare(out, {"a": 1, "b": 5, "d": 4}, resume=True, overwrite=False))
    assert msg == (f"output_dir {out} holds a run with a different configuration (b, c, d); "
                   "use another output_dir or overwrite=true")


def _two_files():
    files = [InputFile("/x/run:v1.jsonl", "jsonl", "run:v1", "run:v1-0000aaaa"),
             InputFile("/x/b.parquet", "parquet", "b", "b-0000bbbb")]
    arr = PointerArray(np.array([0, 0, 1], np.int32), np.array([1, 2, 0], np.int64), np.array([0, 5, -1], np.int64),
                       np.zeros(3, np.int64), np.zeros(3, bool))
    return files, arr


def test_record_keys_map_keys_to_their_own_record(tmp_path):
    """A key marks only its own file's line: tags with ':' work, file index matters, out-of-range or
    non-numeric lines go to ``other``; done_mask masks the run's pointers."""
    files, arr = _two_files()
    keys = RecordKeys(files, arr)
    assert keys.add("run:v1-0000aaaa:2") and not keys.add("run:v1-0000aaaa:2")
    assert keys.add(f"run:v1-0000aaaa:{2**40}")  # beyond the line range: would alias b's row 0
    assert keys.add("run:v1-0000aaaa:abc") and keys.add("gone-00000000:3")
    assert "b-0000bbbb:0" not in keys and "run:v1-0000aaaa:1" not in keys
    assert keys.other == {f"run:v1-0000aaaa:{2**40}", "run:v1-0000aaaa:abc", "gone-00000000:3"}
    assert keys.done_mask(arr).tolist() == [False, True, False] and keys.expected_done() == 1
    assert keys.add("b-0000bbbb:0") and "b-0000bbbb:0" in keys and "b-0000bbbb:0" not in keys.other
    assert arr[~keys.done_mask(arr)].line.tolist() == [1]


def test_record_keys_of_an_empty_run(tmp_path):
    """With no records, done_mask is an empty boolean mask."""
    files, arr = _two_files()
    empty = arr[np.zeros(3, bool)]
    keys = RecordKeys(files, empty)
    mask = keys.done_mask(empty)
    assert mask.shape == (0,) and mask.dtype == bool and len(empty[~mask]) == 0


def _rec(key, error=None, **extra):
    return {"ragscale": {"record_key": key}, "error": error, **extra}


def test_record_writer_counts_and_writes_exact_lines(tmp_path):
    """write: UTF-8 kept, one line per new key, duplicates counted, errors counted; NaN is refused."""
    w = RecordWriter(str(tmp_path), set())
    w.write([_rec("k1", text="é"), _rec("k2", "boom"), _rec("k1", "dup"), _rec("k3", "x"), _rec("k4", "y")])
    w.close()
    assert (w.written, w.errors, w.duplicates) == (4, 3, 1)
    assert (tmp_path / RECORDS).read_text(encoding="utf-8") == (
        '{"ragscale": {"record_key": "k1"}, "error": null, "text": "é"}\n'
        '{"ragscale": {"record_key": "k2"}, "error": "boom"}\n'
        '{"ragscale": {"record_key": "k3"}, "error": "x"}\n'
        '{"ragscale": {"record_key": "k4"}, "error": "y"}\n')
    w = RecordWriter(str(tmp_path), set())
    with pytest.raises(ValueError):
        w.write([_rec("k5", score=float("nan"))])
    w.close()


def test_record_writer_write_lines(tmp_path):
    """write_lines appends ready lines once per key and counts written, errored and duplicate lines."""
    w = RecordWriter(str(tmp_path), set())
    w.write_lines([("a", '{"a": 1}', True), ("a", "DUP", False), ("b", '{"b": 2}', False), ("b", "DUP", True)])
    w.write_lines([("c", '{"c": "é"}', False)])
    w.close()
    assert (w.written, w.errors, w.duplicates) == (3, 1, 2)
    assert (tmp_path / RECORDS).read_text(encoding="utf-8") == '{"a": 1}\n{"b": 2}\n{"c": "é"}\n'
    assert w.seen == {"a", "b", "c"}


# --- open-rag-eval CSV --------------------------------------------------------------------


@pytest.mark.parametrize("text, shown", [
    ("a" * 50, "a" * 50),
    ("a" * 51, "a" * 49 + "…"),
    ("x  y\n\tz", "x y z"),
])
def test_short_collapses_space_and_cuts_at_50(text, shown):
    """_short: whitespace collapsed, at most 50 characters (49 and an ellipsis), repr-quoted."""
    assert _short(text) == repr(shown)


def test_derived_query_id_is_twelve_hex_of_the_stripped_query():
    """derived_query_id: 'q_' and the first 12 hex of sha1 of the stripped query."""
    assert derived_query_id("  How? ") == "q_" + hashlib.sha1(b"How?").hexdigest()[:12]
    assert len(derived_query_id("x")) == 14


def test_missing_csv_message_uses_the_os_reason(tmp_path):
    """An unreadable CSV: '<path>: cannot read the open-rag-eval CSV (<strerror>)'."""
    p = str(tmp_path / "none.csv")
    assert _message(lambda: list(read_records(p))) == \
        f"{p}: cannot read the open-rag-eval CSV (No such file or directory)"


def test_duplicate_header_columns_are_listed(tmp_path):
    """Columns named twice in the header are listed, sorted and comma-separated."""
    p = _write(tmp_path / "h.csv", "query,query,passage_id,passage,passage,generated_answer\n")
    assert _message(lambda: check_header(p)) == \
        f"{p}: not an open-rag-eval CSV: column(s) passage, query appear twice in the header"


NEEDS = "needs query, passage_id, passage, generated_answer (optional: query_id, query_run)"


@pytest.mark.parametrize("header, shown, hint", [
    ("foo", "foo", ""),
    ("a|b,c", "a|b, c", ""),
    ("query;passage_id;passage;generated_answer", "query;passage_id;passage;generated_answer",
     " (the file must be comma-separated)"),
    ("query|passage_id|passage|generated_answer", "query|passage_id|passage|generated_answer",
     " (the file must be comma-separated)"),
    ("query\tpassage_id\tpassage\tgenerated_answer", repr("query\tpassage_id\tpassage\tgenerated_answer"),
     " (the file must be comma-separated)"),
])
def test_missing_columns_message_and_separator_hint(tmp_path, header, shown, hint):
    """Missing required columns: the exact message; the comma hint only for a one-column header with ; tab or |."""
    p = _write(tmp_path / "h.csv", header + "\n")
    missing = [c for c in ("query", "passage_id", "passage", "generated_answer") if c not in header.split(",")]
    assert _message(lambda: check_header(p)) == (
        f"{p}: not an open-rag-eval CSV: missing column(s) {', '.join(missing)} (header: {shown}){hint}; {NEEDS}")


@pytest.mark.parametrize("n, shown", [
    (8, "c1, c2, c3, c4, c5, c6, c7, query"),
    (9, "c1, c2, c3, c4, c5, c6, c7, c8, ..."),
])
def test_missing_columns_message_shows_at_most_eight_names(tmp_path, n, shown):
    """The header shown in the message is cut after 8 names, with ', ...'."""
    p = _write(tmp_path / "h.csv", ",".join([f"c{i}" for i in range(1, n)] + ["query"]) + "\n")
    assert f"(header: {shown}); needs" in _message(lambda: check_header(p))


def test_long_cells_are_read(tmp_path):
    """Cells longer than csv's default limit (131072) are read; the limit is raised to 2**31-1."""
    long = "w" * 200_000
    (rec,) = _records(tmp_path, HEADER + f"q1,Q,1,[1],{long},A\n")
    assert rec["passages"] == [{"id": "[1]", "text": long}]
    assert csv.field_size_limit() == 2**31 - 1


def test_rows_without_a_group_do_not_stop_the_reading(tmp_path):
    """Rows with neither query_id nor query, or a bad query_run, become records and reading goes on."""
    recs = _records(tmp_path, HEADER + ",,1,[1],p,a\nq1,Q,1,[1],p,A\nq2,Q2,x,[1],p,a\nq3,Q3,1,[1],p,a\n")
    assert [(r["query_id"], r["query"], r["input_error"]) for r in recs] == [
        ("line-2", "", "line 2: empty query_id and query"),
        ("q1", "Q", None),
        ("q2", "Q2", "line 4: query_run 'x' is not an integer"),
        ("q3", "Q3", None),
    ]


def test_misshapen_row_joins_the_group_of_its_derived_query_id(tmp_path):
    """Without a query_id column, a row with an extra field is an error of its query's group."""
    recs = _records(tmp_path, "query,passage_id,passage,generated_answer\nQ,[1],p,A\nQ,[2],p2,A,extra\n")
    assert len(recs) == 1
    assert recs[0]["query_id"] == derived_query_id("Q") and recs[0]["csv_lines"] == [2, 3]
    assert recs[0]["input_error"] == "line 3: 5 fields, the header has 4 (an unquoted comma?)"


def test_unparsable_row_of_no_group_is_an_anonymous_record(tmp_path):
    """An unparsable row naming no known group: a record 'line-N' with no query (its cells are not trusted)."""
    recs = _records(tmp_path, HEADER + "q1,Q,1,[1],p,A\n" + 'q9,"Q9"x,1,[1],p,a\n')
    assert [(r["query_id"], r["query"], r["input_error"]) for r in recs[1:]] == [
        ("line-3", "", "line 3: malformed CSV row (',' expected after '\"')")]


def test_group_with_only_empty_queries_has_an_empty_query(tmp_path):
    """A group whose rows have no query text: query '' and the 'empty query' error."""
    (rec,) = _records(tmp_path, HEADER + "q1,,1,[1],p,A\n")
    assert rec["query"] == "" and rec["input_error"] == "line 2: empty query"


def test_answer_text_is_kept_verbatim(tmp_path):
    """An ok generated_answer keeps its own spacing (only the status markers are stripped)."""
    (rec,) = _records(tmp_path, HEADER + 'q1,Q,1,[1],p,"  The answer. "\n')
    assert rec["generated_answer"] == "  The answer. " and rec["answer_status"] == "ok"


def test_errors_of_one_row_keep_their_order(tmp_path):
    """A group's errors are ordered by line, those of one line in the order found."""
    (rec,) = _records(tmp_path, HEADER + "q1,A,1,[1],p,ans\nq1,B,1,,text,\n")
    assert rec["input_error"] == "line 3: query 'B' differs from line 2's 'A'; line 3: empty passage_id"
