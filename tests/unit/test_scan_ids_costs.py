"""What the fast input scan (ragscale.io.scan_ids) gives to the full parse and what pyarrow.json reads:
the screens send exactly the lines on which RapidJSON and json may disagree to the full parse (and
no other), a full-parsed record sets the id columns' types, a refused block is halved until the
halving costs too much, a file is read a chunk of whole lines at a time; and the ids are always the
full parse's (docs/performance.md, "The input scan")."""

from __future__ import annotations

import json
import sys

import pyarrow.json as pj
import pytest

from ragscale.io import scan_ids

STEM = "s"


def rec(i, **extra) -> bytes:
    return json.dumps({"task_id": f"t{i}", "model_id": "m", "text": f"answer {i}", **extra}).encode()


def write(tmp_path, lines, *, end=b"\n", name="x.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + end)
    return str(path)


class Calls(list):
    """pyarrow.json.read_json's calls: (lines in the block, ok, {key: column type}, block bytes, options)."""

    @property
    def blocks(self):
        return [(n, ok) for n, ok, *_ in self]


def scan(monkeypatch, path, columns=None, reference=None, **kwargs):
    """(the fast scan's rows, the lines it fully parsed, pyarrow.json's calls); the rows are checked
    against the full parse of every line (``reference``, when given)."""
    columns = columns or {}
    scan_ids._refuses_lone_surrogates()  # probed once per process, not part of a scan
    if reference is None:
        reference = list(scan_ids.line_ids(path, columns, STEM, fast=False))
    parsed, calls = [], Calls()
    real_parse, real_read = scan_ids.parse, pj.read_json

    def parse(line):
        parsed.append(line.rstrip(b"\r\n"))
        return real_parse(line)

    def read_json(source, read_options=None, parse_options=None):
        block = bytes(source.read())
        source.seek(0)
        n = sum(1 for part in block.split(b"\n") if part.strip())
        types = {f.name: str(f.type) for f in parse_options.explicit_schema}
        try:
            table = real_read(source, read_options=read_options, parse_options=parse_options)
        except Exception:
            calls.append((n, False, types, block, (read_options, parse_options)))
            raise
        calls.append((n, True, types, block, (read_options, parse_options)))
        return table

    with monkeypatch.context() as m:
        m.setattr(scan_ids, "parse", parse)
        m.setattr(pj, "read_json", read_json)
        rows = list(scan_ids.line_ids(path, columns, STEM, **kwargs))
    assert rows == reference
    return rows, parsed, calls


# --- a clean file ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [scan_ids.MIN_BLOCK, 50])
def test_a_clean_file_is_read_by_pyarrow_in_one_call_without_a_full_parse(monkeypatch, tmp_path, n):
    rows, parsed, calls = scan(monkeypatch, write(tmp_path, [rec(i) for i in range(n)]))
    assert parsed == [] and calls.blocks == [(n, True)]
    assert [r[2] for r in rows] == [f"t{i}" for i in range(n)]
    assert rows[1][:2] == (2, len(rec(0)) + 1) and all(r[3] is not None for r in rows)


def test_pyarrow_parses_each_block_on_the_calling_thread_in_one_piece(monkeypatch, tmp_path):
    lines = [rec(i) for i in range(30)]
    _, _, calls = scan(monkeypatch, write(tmp_path, lines[:10] + [b"   " + lines[10]] + lines[11:]))
    for _, ok, _, block, (read_options, parse_options) in calls:
        assert ok and read_options.use_threads is False and read_options.block_size > len(block)
        assert parse_options.unexpected_field_behavior == "ignore"


def test_a_line_longer_than_pyarrows_default_block_is_read_by_pyarrow(monkeypatch, tmp_path):
    lines = [rec(i) for i in range(10)] + [rec(10, text="z" * (3 << 19))] + [rec(i) for i in range(11, 20)]
    rows, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == [] and calls.blocks == [(20, True)] and rows[10][2] == "t10"
    read_options = calls[0][4][0]  # in one piece, on the calling thread
    assert read_options.block_size > len(calls[0][3]) and read_options.use_threads is False


def test_fields_other_than_the_ids_are_ignored_whatever_their_types(monkeypatch, tmp_path):
    values = [1, "a", [1, 2], {"b": None}, 2.5, None, True]
    lines = [rec(i, x=values[i % len(values)], y={"n": values[(i + 1) % len(values)]}) for i in range(30)]
    _, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == [] and calls.blocks == [(30, True)]


def test_records_without_a_task_have_no_ids(tmp_path):
    path = write(tmp_path, [b'{"model_id": "m"}', b'{"task_id": "t"}', b"[1]"])
    rows = list(scan_ids.line_ids(path, {}, STEM))
    assert rows[0] == (1, 0, None, None) and rows[2] == (3, 35, None, None)
    assert rows[1][2] == "t" and isinstance(rows[1][3], int)
    assert scan_ids.ids_of({"model_id": "m"}, {}, STEM) == (None, None)
    assert scan_ids.ids_of([1], {}, STEM) == (None, None)


# --- the screens: exactly the doubtful lines take the full parse ----------------------------------

DEPTH = scan_ids.MAX_DEPTH
SCREENED = {
    "a CR inside the line": b'{"task_id": "cr",\r"model_id": "m"}',
    "a CR between two records": b'{"task_id": "p"}\r{"task_id": "q"}',
    "too many nested arrays": b'{"task_id": "deep", "x": ' + b"[" * DEPTH + b"]" * DEPTH + b"}",
    "too many nested objects": b'{"task_id": "deep", "x": ' + b'{"a": ' * DEPTH + b"1" + b"}" * DEPTH + b"}",
    "Inf": b'{"task_id": "inf", "x": Inf}',
    "Inf before a comma": b'{"task_id": "inf", "x": [Inf,1]}',
    "-NaN": b'{"task_id": "nan", "x": -NaN}',
    "-NaN in a string": b'{"task_id": "nan", "x": "-NaN"}',
    "bytes that are not UTF-8": b'{"task_id": "bad\xff"}',
    "an int longer than the digit limit": b'{"task_id": "d", "x": ' + b"7" * 5000 + b"}",
    "a truncated record": b'{"task_id": "x"',
    "text after the record": b'{"task_id": "x"} trailing',
    "a form feed before the record": b'\x0c{"task_id": "ff"}',
    "a byte before the record": b'|{"task_id": "x"}',
    "a bracket after the record": b'{"task_id": "x"}]',
    "a byte after the record": b'{"task_id": "x"}~',
}


@pytest.mark.parametrize("line", SCREENED.values(), ids=SCREENED.keys())
def test_a_doubtful_line_alone_takes_the_full_parse(monkeypatch, tmp_path, line):
    lines = [rec(i) for i in range(20)] + [line] + [rec(i) for i in range(20, 40)]
    _, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == [line] and calls.blocks == [(40, True)]


LOOKALIKES = {
    "as many brackets as allowed": b'{"task_id": "deep", "x": ' + b"[" * (DEPTH - 1) + b"]" * (DEPTH - 1) + b"}",
    "words that start like Inf": b'{"task_id": "w", "x": "Information Infx Inf_ Ina Iaf I nf Index"}',
    "NaN without a minus": b'{"task_id": "n", "x": "NaN Na-N N-aN -Na N"}',
    "UTF-8 text": '{"task_id": "caf\u00e9 \u2019", "x": "\U0001f600"}'.encode(),
    "spaces around the record": b'   {"task_id": "ws"}  ',
    "tabs around the record": b'\t{"task_id": "tab"}\t',
    "a CR before the newline": b'{"task_id": "crlf"}\r',
}


@pytest.mark.parametrize("line", LOOKALIKES.values(), ids=LOOKALIKES.keys())
def test_a_line_json_and_pyarrow_read_alike_takes_no_full_parse(monkeypatch, tmp_path, line):
    lines = [rec(i) for i in range(10)] + [line] + [rec(i) for i in range(10, 20)]
    rows, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == [] and calls.blocks == [(21, True)] and rows[10][2] is not None


def test_a_crlf_file_takes_no_full_parse(monkeypatch, tmp_path):
    path = write(tmp_path, [rec(i) + b"\r" for i in range(30)])
    rows, parsed, calls = scan(monkeypatch, path)
    assert parsed == [] and calls.blocks == [(30, True)] and len(rows) == 30


def test_a_cr_as_the_first_byte_of_the_file_sends_its_line_to_the_full_parse(monkeypatch, tmp_path):
    first = b'\r{"task_id": "t0", "model_id": "m"}'
    rows, parsed, calls = scan(monkeypatch, write(tmp_path, [first] + [rec(i) for i in range(1, 20)]))
    assert parsed == [first] and calls.blocks == [(19, True)] and rows[0][2] == "t0"


@pytest.mark.parametrize("last", [b"I", b"In", b"Inf", b"N", b"Na", b"-N", b"-Na", b"-NaN", b"x -NaN",
                                  b'{"task_id": "t", "x": Inf}', b'{"task_id": "t", "x": -NaN}',
                                  b'{"task_id": "t", "x": "In"}', b'{"task_id": "t", "x": "Na"}'])
def test_a_file_may_end_in_any_part_of_inf_or_nan(monkeypatch, tmp_path, last):
    lines = [rec(i) for i in range(20)] + [last]
    _, parsed, _ = scan(monkeypatch, write(tmp_path, lines, end=b""))
    assert parsed in ([], [last])


# --- lone surrogates ------------------------------------------------------------------------------

def test_a_surrogate_pair_is_screened_only_where_pyarrow_reads_a_lone_one(monkeypatch, tmp_path):
    pair = b'{"task_id": "emoji \\ud83d\\ude00"}'
    lines = [rec(i) for i in range(10)] + [pair] + [rec(i) for i in range(10, 20)]
    rows, parsed, _ = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == ([] if scan_ids._refuses_lone_surrogates() else [pair])
    assert rows[10][2] == "emoji \U0001f600"


@pytest.mark.parametrize("line", [b'{"task_id": "s", "x": "\\ud800"}', b'{"task_id": "e \\uD83D\\uDE00"}'])
def test_with_the_surrogate_screen_a_surrogate_escape_alone_takes_the_full_parse(monkeypatch, tmp_path, line):
    monkeypatch.setattr(scan_ids, "_refuses_lone_surrogates", lambda: False)
    lines = [rec(i) for i in range(20)] + [line] + [rec(i) for i in range(20, 40)]
    _, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == [line] and calls.blocks == [(40, True)]


def test_the_surrogate_screen_looks_at_the_chunks_whole_lines_only(monkeypatch, tmp_path):
    monkeypatch.setattr(scan_ids, "_refuses_lone_surrogates", lambda: False)
    monkeypatch.setattr(scan_ids, "CHUNK_BYTES", 300)
    lines = [b'{"task_id": "t%d", "x": "%s"}' % (i, b"\\ud800" if i % 4 == 0 else b"\\ud83d\\ude00") for i in range(40)]
    rows, _, _ = scan(monkeypatch, write(tmp_path, lines))
    assert len(rows) == 40 and [r[2] is None for r in rows] == [i % 4 == 0 for i in range(40)]


# --- digit runs: Python's int digit limit ---------------------------------------------------------

@pytest.mark.parametrize("limit, stride", [(0, 0), (640, 320), (4300, 2150), (4301, 2151)])
def test_the_digit_sample_is_half_the_int_limit_rounded_up(limit, stride):
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        assert scan_ids._digit_stride() == stride
    finally:
        sys.set_int_max_str_digits(old)


def test_a_python_without_an_int_digit_limit_has_no_digit_screen(monkeypatch):
    monkeypatch.delattr(sys, "get_int_max_str_digits")
    assert scan_ids._digit_stride() == 0


def test_without_an_int_digit_limit_a_long_int_takes_no_full_parse(monkeypatch, tmp_path):
    long_int = b'{"task_id": "d", "x": ' + b"7" * 5000 + b"}"
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        rows, parsed, calls = scan(monkeypatch, write(tmp_path, [rec(i) for i in range(10)] + [long_int]))
    finally:
        sys.set_int_max_str_digits(old)
    assert parsed == [] and calls.blocks == [(11, True)] and rows[10][2] == "d"


def runs_file(tmp_path, runs) -> tuple[str, list[bytes]]:
    """A file of records, each ``(run, align, shift)`` in one (after a plain record) as the value of
    "x", starting at the first file offset past its line's start that is ``shift`` modulo ``align``."""
    lines, offset = [], 0
    for i, (run, align, shift) in enumerate(runs):
        lines.append(rec(i))
        offset += len(lines[-1]) + 1
        head = b'{"task_id": "d%d", "p": "' % i
        tail = b'", "x": '
        at = offset + len(head) + len(tail)
        at += (shift - at) % align
        lines.append(head + b"a" * (at - offset - len(head) - len(tail)) + tail + run + b"}")
        offset += len(lines[-1]) + 1
    lines += [rec(i) for i in range(len(runs), len(runs) + 10)]
    return write(tmp_path, lines), lines


def test_an_int_one_digit_over_the_limit_is_refused_wherever_it_lies(monkeypatch, tmp_path):
    limit = sys.get_int_max_str_digits()
    stride = scan_ids._digit_stride()
    run = b"7" * (limit + 1)
    runs = [(run, stride, shift) for shift in range(0, stride, 151)] + [(run, stride + 1, 1), (run, stride + 2, 2)]
    path, lines = runs_file(tmp_path, runs)
    rows, parsed, _ = scan(monkeypatch, path)
    assert not [r for r in rows if r[2] and r[2].startswith("d")]
    assert parsed == [line for line in lines if run in line]


def test_digit_runs_that_never_span_two_sampled_bytes_are_not_screened(monkeypatch, tmp_path):
    stride = scan_ids._digit_stride()
    longest = b"7" * stride  # no run this long holds two bytes ``stride`` apart
    split = b"[" + b"7" * (stride - 1) + b",2]"  # two runs: the bytes ``stride`` apart are in different ones
    runs = [(longest, align, 0) for align in (stride - 1, stride, stride * 2 // 3)]
    runs += [(split, stride, stride - 1), (split, stride, 0)]
    path, lines = runs_file(tmp_path, runs)
    _, parsed, calls = scan(monkeypatch, path)
    assert parsed == [] and calls.blocks == [(len(lines), True)]


def test_a_digit_run_over_two_sampled_bytes_sends_its_line_to_the_full_parse(monkeypatch, tmp_path):
    stride = scan_ids._digit_stride()
    path, lines = runs_file(tmp_path, [(b"7" * (stride + 1), stride, 0)])
    _, parsed, calls = scan(monkeypatch, path)
    assert parsed == [lines[1]] and calls.blocks == [(len(lines) - 1, True)]


# --- the id columns' types ------------------------------------------------------------------------

def screened(i, **ids) -> bytes:
    """A record the screens send to the full parse (text that mentions -NaN), with these ids."""
    return json.dumps({"task_id": f"s{i}", "model_id": "m", "note": "-NaN", **ids}).encode()


def turns(start, values) -> list[bytes]:
    return [rec(start + i, turn=v) for i, v in enumerate(values)]


@pytest.mark.parametrize("first, then, column", [
    ([screened(0, turn=1)], [3] * 20, "int64"),  # an int id: its column reads ints
    ([screened(0, turn=1), screened(1, turn="1")], ["x"] * 20, "string"),  # the last record's type
    ([screened(0, turn=1), screened(1)], [3] * 20, "int64"),  # a record without it keeps the type
    ([screened(0, turn=1), screened(1, turn=None)], [3] * 20, "int64"),
    ([screened(0, turn="1")], ["x"] * 20, "string"),
])
def test_a_full_parsed_record_sets_the_id_columns_for_the_next_block(monkeypatch, tmp_path, first, then, column):
    _, parsed, calls = scan(monkeypatch, write(tmp_path, first + turns(10, then)))
    assert parsed == first and calls.blocks == [(20, True)]
    assert calls[0][2] == {"model_id": "string", "task_id": "string", "query_id": "string",
                           "conversation_id": "string", "turn": column, "query_run": "string"}


@pytest.mark.parametrize("first, then, columns", [
    ([], [3] * 20, ["string", "int64"]),
    ([screened(0, turn=1)], ["x"] * 20, ["int64", "string"]),
])
def test_a_refusal_naming_an_id_switches_its_column_once(monkeypatch, tmp_path, first, then, columns):
    _, parsed, calls = scan(monkeypatch, write(tmp_path, first + turns(10, then)))
    assert parsed == first and calls.blocks == [(20, False), (20, True)]
    assert [c[2]["turn"] for c in calls] == columns


def test_ids_no_column_reads_take_the_full_parse_until_a_record_with_readable_ids(monkeypatch, tmp_path):
    floats = [screened(0, model_id=1.5)] + [rec(i, model_id=2.5) for i in range(1, 10)]
    lists = [rec(i, turn=[1]) for i in range(10, 14)] + [rec(14, turn=True)] + [rec(15, query_id={"a": 1})]
    lines = floats + lists + [rec(16, turn=4)] + [rec(i, turn=4) for i in range(17, 40)]
    _, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == lines[:17] and calls.blocks == [(23, True)] and calls[0][2]["turn"] == "int64"


# --- the halving and when it gives up -------------------------------------------------------------

TWICE = b'{"task_id": "a", "task_id": "b"}'  # json keeps the last; pyarrow.json refuses a key given twice


def test_a_refused_block_is_halved_down_to_the_refused_line(monkeypatch, tmp_path):
    monkeypatch.setattr(scan_ids, "MIN_BLOCK", 1)
    lines = [rec(i) for i in range(16)]
    lines[5] = TWICE
    _, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == [TWICE]
    assert calls.blocks == [(16, False), (8, False), (4, True), (4, False), (2, False), (1, True), (1, False),
                            (2, True), (8, True)]


def test_a_refused_block_smaller_than_min_block_takes_the_full_parse(monkeypatch, tmp_path):
    lines = [rec(i) for i in range(2 * scan_ids.MIN_BLOCK)]
    lines[1] = TWICE
    _, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert parsed == lines[:scan_ids.MIN_BLOCK] and calls.blocks == [(16, False), (8, False), (8, True)]


def test_the_halving_stops_once_it_cost_three_times_the_lines_read_plus_give_up(monkeypatch, tmp_path):
    """pyarrow.json is asked only while the lines it refused are at most 3x those it read plus GIVE_UP;
    within that, a refused block is halved; after it, every line takes the full parse."""
    monkeypatch.setattr(scan_ids, "MIN_BLOCK", 1)
    monkeypatch.setattr(scan_ids, "CHUNK_BYTES", 300)
    lines = [TWICE if 15 <= i < 30 or (30 <= i < 45 and i % 2) else rec(i) for i in range(60)]
    path = write(tmp_path, lines)
    reference = list(scan_ids.line_ids(path, {}, STEM, fast=False))
    for give_up in range(48):
        monkeypatch.setattr(scan_ids, "GIVE_UP", give_up)
        _, parsed, calls = scan(monkeypatch, path, reference=reference)
        tried = read = 0
        for k, (n, ok) in enumerate(calls.blocks):
            assert tried - read <= 3 * read + give_up, (give_up, k, calls.blocks)
            tried, read = tried + n, read + (n if ok else 0)
            if not ok and n > 1 and tried - read <= 3 * read + give_up:
                assert calls.blocks[k + 1][0] == n // 2, (give_up, k, calls.blocks)
        gave_up = tried - read > 3 * read + give_up
        assert gave_up == (give_up < 43), give_up  # this file makes it give up below that
        assert len(parsed) > lines.count(TWICE) if gave_up else parsed == [line for line in lines if line == TWICE]


# --- chunks ---------------------------------------------------------------------------------------

def test_a_file_is_read_a_chunk_of_whole_lines_at_a_time(monkeypatch, tmp_path):
    monkeypatch.setattr(scan_ids, "CHUNK_BYTES", 1000)
    lines = [rec(i) for i in range(40)] + [rec(40, text="y" * 3000)] + [rec(i) for i in range(41, 200)]
    rows, parsed, calls = scan(monkeypatch, write(tmp_path, lines))
    assert all(ok for _, ok in calls.blocks) and sum(n for n, _ in calls.blocks) + len(parsed) == 200
    assert len(parsed) < 2 * scan_ids.MIN_BLOCK  # chunks of fewer than MIN_BLOCK lines (before the long one)
    assert all(block.endswith(b"\n") and len(block) <= 1000 for *_, block, _ in calls if b"y" * 100 not in block)
    assert max(len(c[3]) for c in calls) <= 3000 + 2 * 1000 and len(rows) == 200
