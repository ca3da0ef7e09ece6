"""The input scan without a json.loads per line (ragscale.io.scan_ids): the same pointers (line,
byte offset, task id, (model, task, run) slot) as the full parse of every line, on the shared data,
the bundled samples and hostile files, across chunk boundaries and with the user's column names;
and json.loads is called about once per file, not once per line."""

from __future__ import annotations

import glob
import json
import os
import random

import numpy as np
import pytest
from conftest import ROOT, SHARED, load_benchmark

from ragscale.io import scan_ids
from ragscale.io.inputs import InputFile, PointerArray, resolve_inputs, scan


def pointers(files, fast: bool) -> list[tuple]:
    return [(p.file_idx, p.line, p.offset, p.task, p.slot) for p in scan(files, with_tasks=True, fast=fast)]


def assert_same(files) -> list[tuple]:
    """The fast scan's pointers are the full parse's, and so are PointerArray's columns (repeats included)."""
    full, fast = pointers(files, False), pointers(files, True)
    assert fast == full
    a, b = PointerArray.scan(files, with_tasks=True, fast=False), PointerArray.scan(files, with_tasks=True)
    for col in ("file_idx", "line", "offset", "task_hash", "has_task", "first"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    return full


def good(i: int, **extra) -> bytes:
    rec = {"conversation_id": f"c{i // 5}", "task_id": f"c{i // 5}::{i % 5}", "turn": i % 5,
           "contexts": [{"document_id": f"d{i}-{j}", "text": f"passage {j} of {i}: Information \u2019 [1] {{x}}",
                         "score": j * 1.5} for j in range(3)],
           "predictions": [{"text": f"answer {i}"}], "Multi-Turn": float("nan"), "model_id": f"m{i % 3}", **extra}
    return json.dumps(rec).encode()


DEEP_OK = b'{"task_id": "deep128", "x": ' + b"[" * 127 + b"]" * 127 + b"}"
DEEP_BAD = b'{"task_id": "deep129", "x": ' + b"[" * 128 + b"]" * 128 + b"}"
HOSTILE = [
    # the key nested, or in strings (escaped quotes, backslashes)
    b'{"x": {"task_id": "nested"}, "model_id": "m"}',
    b'{"x": {"task_id": "nested"}, "task_id": "top", "y": [{"task_id": 5}]}',
    b'{"text": "the \\"task_id\\": \\"fake\\"", "task_id": "real"}',
    b'{"text": "\\\\\\"task_id\\\\\\": 1 \\\\", "model_id": "bs"}',
    b'{"a": "\\\\", "task_id": "t\\\\x\\"y"}',
    b'{"model_id": "task_id", "task_id": "model_id"}',
    # repeated keys (json: the last wins), also through an escaped key name
    b'{"task_id": "a", "task_id": "b"}',
    b'{"model_id": "m1", "x": 1, "model_id": "m2", "task_id": "t"}',
    b'{"task_id": "plain", "task\\u005fid": "escaped"}',
    b'{"task\\u005fid": "escaped only", "model\\u005Fid": "mm"}',
    b'{"\\u0074ask_id": "t2", "turn": 1}',
    b'{"task_id\\u0000": "not the key", "task_id": "nul"}',
    # ids of every JSON type
    b'{"task_id": 7}', b'{"task_id": 7.5}', b'{"task_id": null}', b'{"task_id": [1, 2]}', b'{"task_id": {"a": 1}}',
    b'{"task_id": true}', b'{"task_id": 1e2}', b'{"task_id": -0}', b'{"task_id": 12345678901234567890123}',
    b'{"task_id": 1E400}', b'{"task_id": ""}', b'{"task_id": "\\u0000"}',
    b'{"model_id": 5, "task_id": "t"}', b'{"model_id": true, "task_id": "t"}', b'{"model_id": "  ", "task_id": "t"}',
    b'{"model_id": 1.5, "task_id": "t"}', b'{"model_id": NaN, "task_id": "t"}', b'{"model_id": [1], "task_id": "t"}',
    # open-rag-eval's and MT-RAG's other task keys, runs
    b'{"query_id": "q1", "query_run": 1, "model_id": "m"}', b'{"query_id": "q1", "query_run": 2}',
    b'{"query_id": "q1", "query_run": "2"}', b'{"conversation_id": "c", "turn": 3}',
    b'{"conversation_id": "c", "turn": "3"}',
    b'{"conversation_id": "c", "turn": null}', b'{"query_id": 4, "task_id": null, "query_run": null}',
    # NaN and the infinities (json reads NaN, Infinity, -Infinity; RapidJSON Inf, -Inf, -NaN too)
    b'{"task_id": "n", "x": NaN}', b'{"task_id": NaN}', b'{"x": -NaN, "task_id": "neg-nan"}',
    b'{"x": Infinity, "task_id": "inf"}', b'{"x": -Infinity, "task_id": "-inf"}', b'{"x": Inf, "task_id": "Inf"}',
    b'{"x": -Inf, "task_id": "-Inf"}', b'{"x": [1, Inf], "task_id": "Inf2"}',
    b'{"text": "Information Inf -NaN", "task_id": "s"}',
    b'{"x": Infx, "task_id": "t"}', b'{"x": Inf_, "task_id": "t"}', b'{"x": - NaN, "task_id": "t"}',
    b'{"x": NaNa, "task_id": "t"}',
    b'{"x": +1, "task_id": "t"}', b'{"x": .5, "task_id": "t"}',
    b'{"TASK_ID": "upper", "Task_id": "mixed", "task_id": "lower"}',
    # blank and whitespace lines
    b"", b"   ", b"\t", b" \x0b ", b"\x0c", b"\r", b"\r\r",
    # not JSON
    b'{"task_id": "x"', b'{"task_id": "x",}', b"{'task_id': 'x'}", b'{"task_id": "x"} {"task_id": "y"}',
    b'{"task_id": "x"}{"task_id": "y"}', b'{"task_id": "x"} trailing', b"not json", b'{"a": "tab\tin", "task_id": "t"}',
    b'{"task_id": "x", "a": 01}', b'{"a": "\\x", "task_id": "t"}', b'{"task_id": "x"}\x00', b'{"task_id": "x" /* c */}',
    b'{"task_id": "cr"}\r{"task_id": "x"}', b'{"task_id": "x", "a": tru}', b'{"task_id": "x", "a": [1,]}',
    # not an object
    b"[1, 2]", b'"string"', b"42", b"null", b'[{"task_id": "x"}]', b"{}",
    # depth
    DEEP_OK, DEEP_BAD, b'{"task_id": "brackets in a string", "x": "' + b"[{" * 200 + b'"}',
    # not UTF-8, lone surrogates, a pair
    b'{"task_id": "bad\xff"}', b'{"x": "\xed\xa0\x80", "task_id": "utf8 surrogate"}', b'{"x": "\xc3", "task_id": "t"}',
    b'{"task_id": "caf\xc3\xa9", "x": "\xe2\x80\x99"}', b'{"task_id": "s", "x": "\\ud800"}', b'{"task_id": "\\udc00"}',
    b'{"task_id": "emoji \\ud83d\\ude00"}', b'{"task_id": "e", "x": "\\ud83d\\ude00\\udc00"}',
    b'{"task_id": "\\uD83D\\uDE00"}',
    # whitespace json skips, and what it does not
    b'   {"task_id": "ws"}   ', b'\t{"task_id": "tab"}', b'{"task_id": "crlf"}\r', b'\x0c{"task_id": "ff"}',
    b'\xef\xbb\xbf{"task_id": "bom, not first"}',
    # digit runs: json's int() reads 4300 digits at most
    b'{"task_id": "d", "x": ' + b"1" * 5000 + b"}", b'{"task_id": "d4300", "x": ' + b"1" * 4300 + b"}",
    b'{"task_id": "d-str", "x": "' + b"1" * 5000 + b'"}', b'{"task_id": "d-float", "x": ' + b"1" * 5000 + b".5}",
]
MAPPED = [
    b'{"qid": 5, "system": "s1", "task_id": "ignored"}', b'{"qid": "q", "system": 3}',
    b'{"qid": null, "task_id": "kept?"}',
    b'{"qid": [1], "system": "s"}', b'{"system": "s", "model_id": "dropped", "query_id": "q9"}',
    b'{"q\\u0069d": "escaped mapped", "system": "s"}', b'{"qid": "a", "qid": "b"}', b'{"x": {"qid": "nested"}}',
    b'{"id/x": "slash", "qid": "q"}', b'{"\xc3\xa9t\xc3\xa9": "accent", "qid": "q"}',
]


def hostile_file(path, extra: list[bytes] = (), *, seed: int = 0, end_newline: bool = False) -> str:
    """A BOM, then each hostile line between runs of good ones (so that pyarrow.json reads blocks around
    it), a few exact repeats; the last line without its newline unless ``end_newline``."""
    rng = random.Random(seed)
    lines = [b"\xef\xbb\xbf" + good(0)]
    n = 1
    for bad in [*HOSTILE, *extra]:
        for _ in range(rng.randint(0, 12)):
            lines.append(good(n))
            n += 1
        lines.append(bad)
    lines += [good(3), good(3), good(n)]
    path.write_bytes(b"\n".join(lines) + (b"\n" if end_newline else b""))
    return str(path)


@pytest.fixture(params=["plain", "crlf"])
def hostile(request, tmp_path) -> str:
    path = hostile_file(tmp_path / "hostile.jsonl", MAPPED)
    if request.param == "crlf":
        (tmp_path / "hostile.jsonl").write_bytes((tmp_path / "hostile.jsonl").read_bytes().replace(b"\n", b"\r\n"))
    return path


def test_the_shared_data_scans_the_same():
    found = sorted(p for ext in ("jsonl", "json", "ndjson")
                   for p in glob.glob(os.path.join(SHARED, "data", "**", f"*.{ext}"), recursive=True))
    if not found:
        pytest.skip(f"needs JSONL files under {SHARED}/data (not present in a user's clone)")
    for path in found:
        full = assert_same(resolve_inputs(path))
        assert any(p[3] is not None for p in full), path
    assert_same(resolve_inputs(found))  # all at once: file indexes, repeats across files


def test_the_bundled_samples_scan_the_same():
    samples = sorted(glob.glob(os.path.join(ROOT, "ragscale", "data", "*.jsonl")))
    assert any(p.endswith("mtrag_sample.jsonl") for p in samples)  # the default run's input
    for path in samples:
        assert all(p[3] is not None for p in assert_same(resolve_inputs(path)))
    assert_same(resolve_inputs(samples))


def test_a_hostile_file_scans_the_same(hostile):
    full = assert_same(resolve_inputs(hostile))
    tasks = [p[3] for p in full]
    assert "nested" not in tasks and "fake" not in tasks and "real" in tasks  # the top level only
    assert "b" in tasks and "escaped" in tasks and "t2" in tasks  # the last of a repeated key; escaped names
    assert "7" in tasks and "7.5" in tasks and "[1, 2]" in tasks and "100.0" in tasks
    for refused in ("neg-nan", "Inf", "-Inf", "Inf2", "x", "deep129", "utf8 surrogate", "ff", "d", "cr"):
        assert refused not in tasks, refused
    for read in ("inf", "-inf", "deep128", "brackets in a string", "caf\xe9", "emoji \U0001f600", "ws", "crlf", "d4300",
                 "d-str", "d-float", "s"):
        assert read in tasks, read
    # what the first line's BOM shifts, and the repeats
    assert full[0][1:3] == (1, 3)
    arr = PointerArray.scan(resolve_inputs(hostile), with_tasks=True)
    assert (arr.first >= 0).sum() >= 2


def test_the_user_columns_scan_the_same(hostile, tmp_path):
    for columns in ({"task_id": "qid", "model_id": "system"}, {"task_id": "id/x"}, {"model_id": "task_id"},
                    {"task_id": "\xe9t\xe9", "answer": "text"}, {"task_id": "query_id", "model_id": "turn"}):
        files = resolve_inputs(hostile, columns=columns)
        assert_same(files)
    files = resolve_inputs(hostile, columns={"task_id": "qid", "model_id": "system"})
    assert "escaped mapped" in [p.task for p in scan(files, with_tasks=True)]


@pytest.mark.parametrize("chunk", [1, 37, 3000, 20000])
def test_chunk_boundaries_and_lines_longer_than_a_chunk(hostile, monkeypatch, chunk):
    monkeypatch.setattr(scan_ids, "CHUNK_BYTES", chunk)
    assert_same(resolve_inputs(hostile))


def test_every_line_pyarrow_reads_alone_has_the_full_parse_ids(hostile, monkeypatch):
    """Halving down to single lines (no full parse for small blocks): each hostile line that passes the
    screens is read by pyarrow.json alone, and must give exactly what json gives, or be refused."""
    monkeypatch.setattr(scan_ids, "MIN_BLOCK", 1)
    monkeypatch.setattr(scan_ids, "GIVE_UP", 10**9)
    for columns in ({}, {"task_id": "qid", "model_id": "system"}):
        assert_same(resolve_inputs(hostile, columns=columns))


def test_files_that_end_with_a_newline_blank_lines_or_nothing(tmp_path):
    assert_same(resolve_inputs(hostile_file(tmp_path / "a.jsonl", end_newline=True)))
    cases = [b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf\n", b"\n \n\t\n", good(1), good(1) + b"\n",
             b"\n\n" + good(1) + b"\n\n  ",
             b"\xef\xbb\xbf" + b"\n".join(good(i) for i in range(20))]
    for k, data in enumerate(cases):
        path = tmp_path / f"case{k}.jsonl"
        path.write_bytes(data)
        assert_same(resolve_inputs(str(path)))


def test_without_the_surrogate_probe_the_screen_finds_them(hostile, monkeypatch):
    monkeypatch.setattr(scan_ids, "_refuses_lone_surrogates", lambda: False)
    assert_same(resolve_inputs(hostile))


def test_types_that_change_and_many_refused_lines(tmp_path):
    """Ids that switch between int and string (the column types follow the full-parsed records), ids no
    column reads (floats), and a file where most lines are refused (the halving gives up)."""
    rng = random.Random(1)
    mixed = [json.dumps({"task_id": rng.choice([i, str(i), i * 1.0, None]), "turn": rng.choice([1, "1", None]),
                         "model_id": rng.choice(["m", 7, None]), "text": "x" * rng.randint(0, 50)}).encode()
             for i in range(3000)]
    floats = [json.dumps({"task_id": f"t{i}", "model_id": 1.5}).encode() for i in range(100)]
    runs = [json.dumps({"task_id": f"t{i // 100}", "turn": i // 100}).encode() for i in range(1000)]
    refused = [b'{"task_id": "a", "task_id": "b"}' if i % 3 else good(i) for i in range(6000)]
    for name, lines in {"mixed": mixed, "floats": floats + runs, "runs": runs, "refused": refused}.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        assert_same(resolve_inputs(str(path)))


def test_a_sweep_of_files_in_other_formats(tmp_path):
    """JSONL beside Parquet: the file indexes and the repeats across files are the full parse's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = tmp_path / "a.jsonl"
    a.write_bytes(b"\n".join(good(i) for i in range(50)) + b"\n")
    pq.write_table(pa.table({"task_id": ["c0::1", "zz"], "model_id": ["m1", "m9"]}), tmp_path / "b.parquet")
    assert_same(resolve_inputs([str(a), str(tmp_path / "b.parquet"), str(a).replace("a.jsonl", "*.jsonl")]))


def test_json_loads_runs_once_per_file_not_once_per_line(tmp_path):
    """Counted on the scanning thread only (benchmarks/scan.py ``loads_calls``): in the full suite
    another thread's json.loads (an earlier test's leftover loop) once made the count 4, not 0; a
    thread that keeps calling json.loads during the scans stands for it here."""
    import threading

    n = 3000
    path = tmp_path / "mtrag.jsonl"
    path.write_bytes(b"".join(good(i) + b"\n" for i in range(n)))
    files = resolve_inputs(str(path))
    loads_calls = load_benchmark("scan").loads_calls
    stop, started = threading.Event(), threading.Event()

    def noise() -> None:
        while not stop.is_set():
            json.loads("[1]")
            started.set()

    thread = threading.Thread(target=noise, daemon=True)
    thread.start()
    started.wait(5)
    try:
        assert loads_calls(files, fast=False) == n
        assert loads_calls(files, fast=True) == 0  # a clean file: pyarrow.json reads every line
    finally:
        stop.set()
        thread.join(5)
    full = PointerArray.scan(files, with_tasks=True, fast=False)
    fast = PointerArray.scan(files, with_tasks=True)
    assert np.array_equal(full.task_hash, fast.task_hash) and fast.has_task.all()


def test_the_scan_reads_a_file_given_as_an_input_file(tmp_path):
    """``line_ids`` on a path, as the reader's InputFile names it (the CSVs' normalized JSONL too)."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(good(1) + b"\n\n" + good(2) + b"\n")
    f = InputFile(str(path), "jsonl", "x", "x-0")
    rows = list(scan_ids.line_ids(f.read_path, f.column_map, f.stem))
    assert [r[:2] for r in rows] == [(1, 0), (3, len(good(1)) + 2)]
    assert rows == list(scan_ids.line_ids(f.read_path, f.column_map, f.stem, fast=False))
    assert [r[2:] for r in scan_ids.line_ids(f.read_path, {}, "x", with_tasks=False)] == [(None, None)] * 2


def test_the_benchmark_runs_and_checks_the_pointers(capsys):
    import argparse

    res = load_benchmark("scan").main(argparse.Namespace(records=300, quick=False, rounds=1, input=None, out=None))
    assert res["same_pointers"] and res["ways"]["fast"]["json_loads_per_record"] == 0
    assert res["ways"]["full_parse"]["json_loads_per_record"] == 1 and '"benchmark": "scan"' in capsys.readouterr().out
