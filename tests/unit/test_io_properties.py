"""Property-based tests of the readers and writers (issue 33): random JSONL lines (any JSON value,
nesting to 1,500 levels, control and bidi characters, lone surrogate escapes, BOMs, bytes that are not
UTF-8, garbage), random table and open-rag-eval CSVs and random model ids go through the scan, the
input check, the reader (``read_record``, as the pipeline's first stage runs it), the output line and
the CSV and markdown writers. Properties: no exception escapes; every line is accounted for (one record
per non-blank JSONL line, one per CSV row); every output re-reads (the output line parses as JSON, a
CSV gives back the cells written, modulo ragscale.report.safe's documented neutralisation; a markdown
table keeps one line per row). Deterministic (``derandomize``) and a few seconds in all."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragscale.io.check import sample
from ragscale.io.csv_rows import BOM
from ragscale.io.inputs import PointerArray, resolve_inputs
from ragscale.io.orag_csv import read_records
from ragscale.io.table_csv import read_rows
from ragscale.pipeline.stage import writer_rows
from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
from ragscale.record import output_line, read_record
from ragscale.report.leaderboard import write_leaderboard
from ragscale.report.orag_export import OragSink
from ragscale.report.safe import csv_cell, csv_writer
from ragscale.report.summary import finalize

FAST = settings(max_examples=40, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(FAST, max_examples=12)

HOSTILE = st.sampled_from(["\x00", "\u202e", "\u2066", "\n", "\r", "\t", "=", "+", "-", "@", "\ufeff", "|", '"', ",",
                           "\ud800", "é", "\u2028", "\x1b[31m", "=cmd|' /C calc'!A0", "-0.5"])
TEXT = st.lists(st.one_of(st.text(max_size=6), HOSTILE), max_size=5).map("".join)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(), TEXT)
VALUES = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3), max_leaves=8)
MODEL_IDS = st.one_of(TEXT, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(),
                      st.lists(st.integers(), max_size=2), st.text(min_size=300, max_size=400))


@st.composite
def records(draw) -> dict:
    """A record in one of the layouts, with random extra fields and a random model id."""
    rec = {"task_id": draw(st.one_of(st.sampled_from(["t0", "t1"]), VALUES)), "model_id": draw(MODEL_IDS)}
    rec.update(draw(st.sampled_from([
        {"user_input": "q", "response": draw(TEXT), "reference": draw(TEXT), "retrieved_contexts": [draw(TEXT)]},
        {"predictions": [{"text": draw(TEXT)}], "targets": [{"text": "r"}], "contexts": draw(VALUES)},
        {"answer": draw(VALUES)},
    ])))
    rec.update(draw(st.dictionaries(TEXT, VALUES, max_size=2)))
    return rec


@st.composite
def lines(draw) -> bytes:
    """One JSONL line's bytes: a record, any JSON value, garbage, nested deep, with bytes that are not UTF-8."""
    kind = draw(st.sampled_from(["record", "value", "deep", "garbage"]))
    if kind == "garbage":
        return draw(st.binary(max_size=30)).replace(b"\n", b" ")
    value = draw(records()) if kind != "value" else draw(VALUES)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    if kind == "deep":
        n = draw(st.integers(100, 1500))
        text = '{"response": "a", "x": ' + "[" * n + text + "]" * n + "}"
    data = text.encode("utf-8", "surrogatepass")  # a raw lone surrogate: not UTF-8 either
    if draw(st.booleans()) and data:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[at:]
    return data.replace(b"\n", b" ")


def _accounted(raw_lines: list[bytes]) -> list[int]:
    """The line numbers a JSONL file's records come from: its non-blank lines (a first line's BOM aside)."""
    return [i for i, line in enumerate(raw_lines, start=1)
            if (line[len(BOM):] if i == 1 and line.startswith(BOM) else line).strip()]


@FAST
@given(st.lists(lines(), min_size=1, max_size=6), st.booleans())
def test_every_jsonl_line_is_one_record_whose_output_line_parses(raw_lines, bom):
    if bom:
        raw_lines = [BOM + raw_lines[0], *raw_lines[1:]]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.jsonl")
        with open(path, "wb") as fh:
            fh.write(b"\n".join(raw_lines) + b"\n")
        files = resolve_inputs(path)
        list(sample(files[0]))  # the input check's reader: no exception
        pointers = PointerArray.scan(files, with_tasks=True).ordered_for_sweep()
        rows = writer_rows(load_and_lexical(pointer_table(pointers), files=files, metrics=["exact_match"]))
    assert sorted(r["source_line"] for r in rows) == _accounted(raw_lines)
    for row in rows:
        out = json.loads(output_line(row))
        assert out["model_id"] == row["model_id"] and isinstance(out["model_id"], str)
        assert out["ragscale"]["source_line"] == row["source_line"]
        assert (out["error"] is None) == (row["error"] is None)
        if out["error"] is not None:
            assert out["error"]["stage"] == "input" and out["error"]["message"]


@FAST
@given(MODEL_IDS, VALUES)
def test_any_model_id_is_a_string_or_that_records_error(model, extra):
    raw = json.dumps({"model_id": model, "response": "a", "x": extra})
    rec = read_record(raw, key="k", model_id="stem", task_id=None, source_file="f", source_line=1, need_targets=False)
    assert isinstance(rec.model_id, str) and rec.model_id
    ok = model is None or isinstance(model, str) or (isinstance(model, (int, float)) and not isinstance(model, bool))
    try:  # a lone surrogate anywhere is that record's error too
        json.dumps([model, extra], ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        ok = False
    assert (rec.error is None) == ok, (model, rec.error)
    json.loads(output_line(rec.to_row()))


def _csv_bytes(rows: list[list[str]], bom: bool, bad: bool) -> bytes:
    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)
    data = buf.getvalue().encode("utf-8", "surrogatepass")
    data = (BOM if bom else b"") + data
    return data.replace("¤".encode(), b"\xff", 1) if bad else data


CELLS = st.one_of(TEXT, st.just("¤")).map(lambda t: t.replace("\ud800", "?"))


@FAST
@given(st.lists(st.lists(CELLS, min_size=3, max_size=3), max_size=5), st.booleans(), st.booleans())
def test_a_table_csv_gives_one_record_per_row(body, bom, bad):
    rows = [["user_input", "response", "model_id"], *body]
    data = _csv_bytes(rows, bom, bad)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.csv")
        with open(path, "wb") as fh:
            fh.write(data)
        recs = list(read_rows(path))
    kept = [r for r in body if any(c.strip() for c in r)]
    broken = bad and "¤".encode() in b"".join(c.encode("utf-8", "surrogatepass") for r in rows for c in r)
    assert len(recs) == len(kept) or broken
    if not broken:  # the cells come back as written (an empty cell is null)
        assert [[r.get(n) for n in rows[0]] for r in recs] == [[c if c != "" else None for c in row] for row in kept]
    for i, rec in enumerate(recs):
        out = read_record(json.dumps(rec), key=f"k{i}", model_id="t", task_id=None, source_file=path, source_line=i + 2,
                          need_targets=False)
        json.loads(output_line(out.to_row()))


@FAST
@given(st.lists(st.tuples(st.sampled_from(["q1", "q2", "", "-1"]), TEXT, st.sampled_from(["1", "2", "", "x"]),
                          st.sampled_from(["[1]", "[2]", ""]), TEXT, TEXT), max_size=6), st.booleans())
def test_every_open_rag_eval_row_is_in_a_record(body, bom):
    rows = [["query_id", "query", "query_run", "passage_id", "passage", "generated_answer"],
            *[[c.replace("\ud800", "?") for c in r] for r in body]]
    data = _csv_bytes(rows, bom, False)
    first_lines, n = [], 1 + len(_csv_bytes(rows[:1], False, False).splitlines())
    for row in rows[1:]:
        physical = len(_csv_bytes([row], False, False).splitlines())
        if any(c.strip() for c in row):
            first_lines.append(n)
        n += physical
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "o.csv")
        with open(path, "wb") as fh:
            fh.write(data)
        recs = list(read_records(path))
    covered = {line for r in recs for line in r["csv_lines"]}
    assert set(first_lines) <= covered
    for i, rec in enumerate(recs):
        json.loads(output_line(read_record(json.dumps(rec), key=f"k{i}", model_id="o", task_id=None, source_file=path,
                                           source_line=i + 1, need_targets=False).to_row()))


@FAST
@given(st.lists(st.one_of(TEXT, st.integers(), st.floats(allow_nan=False), st.none()), max_size=6))
def test_the_csv_writer_round_trips_to_the_neutralised_cells(cells):
    cells = [c.replace("\ud800", "?") if isinstance(c, str) else c for c in cells]
    buf = io.StringIO(newline="")
    csv_writer(buf).writerow(cells)
    back = next(csv.reader(io.StringIO(buf.getvalue(), newline="")), [])
    assert back == ["" if c is None else str(csv_cell(c)) for c in cells]
    assert not [c for c in back if c.startswith(("=", "+", "-", "@", "\t", "\r"))
                and csv_cell(c) != c]  # nothing left that a spreadsheet would run


@SLOW
@given(st.lists(TEXT.map(lambda t: t.replace("\ud800", "?")), min_size=1, max_size=4, unique=True))
def test_leaderboard_summary_and_exports_re_read_for_any_model_ids(models):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "records.jsonl"), "w", encoding="utf-8") as fh:
            for i, m in enumerate(models):
                for t in range(2):
                    fh.write(json.dumps({"task_id": f"t{t}", "model_id": m, "response": "a", "user_input": "q",
                                         "metrics": {"exact_match": float(t)}, "error": None,
                                         "ragscale": {"record_key": f"k{i}-{t}", "source_file": "f",
                                                      "source_line": 2 * i + t + 1}}, ensure_ascii=False) + "\n")
        summary = finalize(tmp, ["exact_match"])
        paths = write_leaderboard(summary, tmp)
        board = list(csv.reader(open(paths["csv"], newline="", encoding="utf-8")))
        assert sorted(r[1] for r in board[1:]) == sorted(csv_cell(m) for m in models)
        table = open(paths["markdown"], encoding="utf-8").read().split("## Overall\n\n", 1)[1].split("\n\n")[0]
        assert len(table.splitlines()) == 2 + len(models)
        sink = OragSink(tmp)
        for line in open(os.path.join(tmp, "records.jsonl"), encoding="utf-8"):
            sink.add(json.loads(line))
        written = sink.finish()
        assert len(written) == len(models) and not sink.failures
        for p in written:
            assert list(csv.reader(open(p, newline="", encoding="utf-8")))[0][:2] == ["query_id", "query"]
