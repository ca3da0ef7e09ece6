"""Safe outputs (issue 33, items 6 to 8): CSV cells neutralised as OWASP recommends against formula
injection (numbers stay numbers), control and bidi characters escaped in markdown, CSV, the console
and the HTML report, file names from ids bounded and collision-free so that no export is skipped, and
a failed output exiting 5 (ragscale.report.safe, ragscale.report.orag_export, ragscale.exitcodes)."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from ragscale.exitcodes import INCOMPLETE, NOTHING_SCORED, OK, RECORD_ERRORS, STATUS, of_run, worst
from ragscale.report.html import _environment
from ragscale.report.leaderboard import model_lines, write_leaderboard
from ragscale.report.orag_export import OragSink
from ragscale.report.safe import MAX_STEM, csv_cell, csv_writer, file_name, md_cell, visible
from ragscale.report.summary import finalize

FORMULAS = ["=cmd|' /C calc'!A0", "+SUM(1,2)", "@SUM(1+1)", "-2+3", "\t=1", "\r=1", "\uff1dSUM(1)"]


@pytest.mark.parametrize("cell", FORMULAS)
def test_a_text_cell_that_would_start_a_formula_gets_a_quote(cell):
    out = csv_cell(cell)
    assert out.startswith("'") and out[1:] == visible(cell, "\t\n\r")


@pytest.mark.parametrize("cell", ["-0.5", "+1", "1e-3", "-.25", "7", "0.6667", "model", "", "a=b", "'x"])
def test_numbers_and_plain_text_stay_as_they_are(cell):
    assert csv_cell(cell) == cell


def test_non_text_cells_and_escapes():
    assert [csv_cell(v) for v in (-0.5, 3, None, True)] == [-0.5, 3, None, True]
    assert csv_cell("a\x00b\u202ec\nd\te") == "a\\x00b\\u202ec\nd\te"  # line breaks kept: the CSV quotes them
    assert csv_cell("\x00=1") == "\\x00=1"  # escaped first, so no formula is left at the start
    assert visible("a\u2066b\x7fc\u2028") == "a\\u2066b\\x7fc\\u2028" and visible("plain é") == "plain é"
    assert md_cell("evil\nrow | x\u202e") == "evil\\nrow \\| x\\u202e"


def test_the_writer_round_trips_every_cell_as_written():
    rows = [["model_id", "x"], [FORMULAS[0], -0.25], ["a\nb", "c\x00"]]
    buf = io.StringIO()
    csv_writer(buf).writerows(rows)
    back = list(csv.reader(io.StringIO(buf.getvalue())))
    assert back == [["model_id", "x"], ["'" + FORMULAS[0], "-0.25"], ["a\nb", "c\\x00"]]


def test_file_names_are_bounded_and_collision_free():
    taken: set[str] = set()
    names = [file_name(i, taken) for i in ("m1", "x" * 10000, "a/b", "a_b", "A_B", "a b", "..", "")]
    assert names[0] == "m1.csv" and names[3] == "a_b.csv"
    assert len(set(n.casefold() for n in names)) == len(names)  # distinct, also without case
    assert all(len(n) <= MAX_STEM + len("-12345678.csv") for n in names)
    assert file_name("a/b", set()) == names[2]  # a function of the id, not of the order
    assert names[6].startswith("model-") and names[7].startswith("model-")


def _records(models: list[str]) -> list[dict]:
    return [{"task_id": f"t{t}", "model_id": m, "user_input": "q", "response": "a", "metrics": {"exact_match": 1.0},
             "error": None, "ragscale": {"record_key": f"k{i}-{t}", "source_file": "f", "source_line": 2 * i + t}}
            for i, m in enumerate(models) for t in range(2)]


def test_no_export_is_skipped_and_a_file_that_fails_is_reported(tmp_path):
    models = ["x" * 10000, *FORMULAS, *(f"m{i}" for i in range(5))]
    sink = OragSink(str(tmp_path))
    for rec in _records(models):
        sink.add(rec)
    (tmp_path / "open-rag-eval" / "m3.csv").mkdir(parents=True)  # this one file cannot be written
    paths = sink.finish()
    assert len(paths) == len(models) - 1 and all(os.path.isfile(p) for p in paths)
    assert sink.failures == ["open-rag-eval/m3.csv of model 'm3' not written (Is a directory)"]
    for p in paths:
        cells = [c for row in csv.reader(open(p, newline="", encoding="utf-8")) for c in row]
        assert not [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))], p


def test_leaderboard_and_summary_write_hostile_ids_safely(tmp_path):
    hostile = "evil\nrow | x\u202egnp.exe\x00"
    with open(tmp_path / "records.jsonl", "w", encoding="utf-8") as fh:
        for rec in _records(["m1", hostile, *FORMULAS[:3]]):
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    summary = finalize(str(tmp_path), ["exact_match"])
    paths = write_leaderboard(summary, str(tmp_path))
    for name in ("leaderboard.csv", "summary.csv"):
        cells = [c for row in csv.reader(open(tmp_path / name, newline="", encoding="utf-8")) for c in row]
        assert not [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))] and "'" + FORMULAS[0] in cells
        assert not any("\x00" in c or "\u202e" in c for c in cells)
    md = open(paths["markdown"], encoding="utf-8").read()
    assert "\x00" not in md and "\u202e" not in md and "| evil\\nrow \\| x\\u202egnp.exe\\x00 |" in md
    assert all("\n" not in line and "\u202e" not in line for line in model_lines(summary))


def test_the_html_report_escapes_control_and_bidi_characters():
    env = _environment()
    assert env.from_string("{{ x }}").render(x="a\u202eb\x00<c>\nd") == "a\\u202eb\\x00&lt;c&gt;\nd"


def test_a_failed_output_exits_5_unless_nothing_was_scored():
    assert of_run(None, {"in": 4, "errored": 0}, ["leaderboard: OSError: x"]) == INCOMPLETE
    assert of_run(None, {"in": 4, "errored": 1}, ["leaderboard: OSError: x"]) == INCOMPLETE
    assert of_run(None, {"in": 4, "errored": 4}, ["leaderboard: OSError: x"]) == NOTHING_SCORED
    assert of_run(None, {"in": 4, "errored": 1}, []) == RECORD_ERRORS and of_run(None, {"in": 4}, None) == OK
    assert STATUS[INCOMPLETE] == "outputs_incomplete" and worst([OK, INCOMPLETE, RECORD_ERRORS]) == INCOMPLETE
