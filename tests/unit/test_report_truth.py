"""The report and the console tell the truth (issue 32): "ok" only when every record was scored
(ragscale.exitcodes), the exit codes of a run and of a sweep, the console's closing lines, and an
input line that is not JSON is an input error of no model, not a phantom model in the
leaderboard or in significance. Bounded intervals, the lowest records, the fallback ranking and
the significant pairs: tests/unit/test_report_ranking.py."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from ragscale import exitcodes
from ragscale.report.html import HtmlSink, write_report
from ragscale.report.significance import PairedValues, for_summary
from ragscale.report.summary import finalize
from ragscale.driver import _print_end

SETTINGS = SimpleNamespace(resamples=200, confidence=0.95, alpha=0.05, correction="holm", all_pairs_max_models=8,
                           seed=0)


# ---------------------------------------------------------------- exit codes, defined once


@pytest.mark.parametrize("records_in, errored, code", [(6, 0, exitcodes.OK), (6, 4, exitcodes.RECORD_ERRORS),
                                                       (6, 6, exitcodes.NOTHING_SCORED),
                                                       (0, 0, exitcodes.NOTHING_SCORED)])
def test_a_finished_run_exits_ok_only_when_every_record_was_scored(records_in, errored, code):
    assert exitcodes.finished(records_in, errored) == code
    assert exitcodes.of_run(None, {"in": records_in, "errored": errored, "missing": 0}) == code
    assert exitcodes.of_run("interrupted", {"in": records_in, "errored": errored, "missing": 0}) == exitcodes.FAILED
    assert exitcodes.of_run(None, {"in": records_in, "errored": errored, "missing": 1}) == exitcodes.FAILED
    assert exitcodes.STATUS[code] == {0: "ok", 3: "record_errors", 4: "nothing_scored"}[code]


def test_outcome_words_the_code():
    assert exitcodes.outcome(exitcodes.OK, 6, 0) == "ok"
    assert exitcodes.outcome(exitcodes.RECORD_ERRORS, 6, 4) == "4 of 6 records failed"
    assert exitcodes.outcome(exitcodes.NOTHING_SCORED, 0, 0) == "nothing scored: the input held no record"
    assert exitcodes.outcome(exitcodes.NOTHING_SCORED, 5, 5) == "nothing scored: all 5 records failed"


@pytest.mark.parametrize("codes, worst", [([], 0), ([0, 0], 0), ([0, 3], 3), ([3, 4, 0], 4), ([4, 1, 3], 1),
                                          ([1, 2, 0], 2), ([0, 9], 1)])
def test_a_sweep_exits_with_its_worst_job(codes, worst):
    """USAGE > FAILED > NOTHING_SCORED > RECORD_ERRORS > OK; an unknown code counts as FAILED."""
    assert exitcodes.worst(codes) == worst


# ---------------------------------------------------------------- the report's status line


def write_records(run_dir, recs: list[dict]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def rec(model: str, task: str, value: float | None, error: str | None = None, **extra) -> dict:
    return {"task_id": task, "model_id": model, "query": f"question {task}",
            "metrics": {} if error else {"exact_match": value}, "error": {"stage": "input", "message": error} if error else None,
            "ragscale": {"record_key": f"{model}:{task}", "warnings": [], "judge_errors": [], "details": {}}, **extra}


def status_line(html: str) -> str:
    return re.search(r'<p class="sub">(<span class="(?:ok|warn)">.*?</span>)', html, re.S).group(1)


def test_failed_records_are_never_ok_in_the_report(tmp_path):
    """4 of 6 records failed: the status says so in the warning colour, linked to the errors table, even
    when run.json (as an older runner wrote it) says "ok"."""
    recs = [rec("m1", "t1", 1.0), rec("m1", "t2", 0.0)] + [rec("m1", f"t{i}", None, "no response") for i in range(3, 7)]
    write_records(tmp_path / "run", recs)
    (tmp_path / "run" / "run.json").write_text(json.dumps({"status": "ok", "records": {"in": 6, "errored": 4}}))
    html = open(write_report(str(tmp_path / "run"))).read()
    assert status_line(html) == '<span class="warn"><a href="#errors">4 of 6 records failed</a></span>'
    assert 'id="errors"' in html and '<span class="ok">' not in html


def test_an_empty_input_is_nothing_scored_in_the_report(tmp_path):
    write_records(tmp_path / "run", [])
    (tmp_path / "run" / "run.json").write_text(json.dumps({"status": "nothing_scored", "records": {"in": 0}}))
    html = open(write_report(str(tmp_path / "run"))).read()
    assert status_line(html) == '<span class="warn">nothing scored: the input held no record</span>'


def test_every_record_scored_is_ok(tmp_path):
    write_records(tmp_path / "run", [rec("m1", "t1", 1.0), rec("m1", "t2", 0.5)])
    (tmp_path / "run" / "run.json").write_text(json.dumps({"status": "ok", "records": {"in": 2, "errored": 0}}))
    assert status_line(open(write_report(str(tmp_path / "run"))).read()) == '<span class="ok">ok</span>'


# ---------------------------------------------------------------- the console's last lines


def end_lines(summary: dict, records: dict, failure: str | None = None, report: bool = True) -> list[str]:
    lines: list[str] = []
    info = {"records": {"out": records["in"], "missing": 0, **records}, "timings_s": {"total": 1.0},
            "failure": failure, "outputs": {"html_report": "report.html"} if report else {}}
    _print_end(SimpleNamespace(print_summary=False), "/runs/r", summary, info, lines.append)
    return lines


EMPTY = {"metrics": [], "models": {}, "overall": None}


def test_the_console_ends_with_the_failed_records_and_the_errors_link():
    lines = end_lines(EMPTY, {"in": 6, "errored": 4})
    assert lines[-2] == ("[ragscale] warning: 4 of 6 records failed (exit code 3); their errors: "
                         "/runs/r/report.html#errors")
    assert lines[-1] == "[ragscale] open the report: /runs/r/report.html"
    assert not any(" ok" in line for line in lines)


def test_the_console_says_ok_only_when_every_record_was_scored():
    assert end_lines(EMPTY, {"in": 6, "errored": 0})[-2] == "[ragscale] ok: every record was scored"
    lines = end_lines(EMPTY, {"in": 0, "errored": 0}, report=False)
    assert lines[-2] == "[ragscale] warning: nothing scored: the input held no record (exit code 4)"
    assert lines[-1] == "[ragscale] summary: /runs/r/summary.json"
    lines = end_lines(EMPTY, {"in": 6, "errored": 0}, failure="interrupted")
    assert lines[-1] == "[ragscale] run failed: interrupted; re-run the same command to resume"


# ---------------------------------------------------------------- unreadable lines are not models


UNREADABLE = {"input_line": "{this is not json", "model_id": "broken", "metrics": {},
              "error": {"stage": "input", "message": "line is not valid JSON: Expecting property name"},
              "ragscale": {"record_key": "broken.jsonl:3", "source_file": "broken.jsonl", "source_line": 3,
                           "warnings": [], "judge_errors": [], "details": {}}}


def broken_run(tmp_path):
    """broken.jsonl: two models' records (each with its own model_id) and a line that is not JSON, which
    the reader gave the file's stem as model_id."""
    recs = [rec(m, f"t{i}", v) for i in range(6) for m, v in (("m1", 0.9 if i % 3 else 0.0), ("m2", 0.1 * i))]
    write_records(tmp_path / "run", recs[:3] + [UNREADABLE] + recs[3:])
    return tmp_path / "run"


def test_an_unreadable_line_is_an_input_error_of_no_model(tmp_path):
    run = broken_run(tmp_path)
    summary = finalize(str(run), ["exact_match"])
    assert sorted(summary["models"]) == ["m1", "m2"]  # no phantom "broken"
    assert summary["input_errors"]["records"] == 1 and "no model" in summary["input_errors"]["reason"]
    assert summary["overall"]["count"] == 13 and summary["overall"]["errors"] == 1  # counted among the failed
    (run / "run.json").write_text(json.dumps({"status": "record_errors", "records": {"in": 13, "errored": 1}}))
    html = open(write_report(str(run))).read()
    board = html[html.index('<table class="board">'):html.index("</table>", html.index('<table class="board">'))]
    assert "broken" not in board and "m1" in board and "m2" in board
    assert status_line(html) == '<span class="warn"><a href="#errors">1 of 13 records failed</a></span>'
    assert "— (no model: not a JSON object)" in html and "input errors of no model" in html


def test_in_a_sweep_file_without_model_ids_the_bad_line_belongs_to_the_stem_model(tmp_path):
    """m3.jsonl's records carry no model_id: its stem is the model, and its bad line is m3's failed record."""
    recs = [rec("m3", "t1", 1.0), dict(UNREADABLE, model_id="m3"), rec("m3", "t2", 0.0)]
    write_records(tmp_path / "run", recs)
    summary = finalize(str(tmp_path / "run"), ["exact_match"])
    assert list(summary["models"]) == ["m3"] and "input_errors" not in summary
    m3 = summary["models"]["m3"]
    assert (m3["count"], m3["errors"], m3["n"]["exact_match"]) == (3, 1, 2)
    assert m3["by_answerability"]["UNKNOWN"]["count"] == 3


def test_models_without_a_scored_record_are_left_out_of_significance(tmp_path):
    recs = [rec(m, f"t{i}", v) for i in range(12) for m, v in (("m1", 1.0), ("m2", 0.0))]
    recs += [rec("m3", f"t{i}", None, "no response") for i in range(12)]  # every record of m3 failed
    write_records(tmp_path / "run", recs)
    summary = finalize(str(tmp_path / "run"), ["exact_match"])
    values = PairedValues(["exact_match"])
    for r in recs:
        values.add(r)
    block = for_summary(summary, values, SETTINGS)
    pairs = {(e["a"], e["b"]) for entries in block["metrics"].values() for e in entries}
    assert pairs == {("m1", "m2")}  # no "m1 vs m3: not distinguishable on these 0 tasks"


def test_an_html_sink_counts_an_unreadable_line_once_however_often_it_renders(tmp_path):
    sink = HtmlSink(str(tmp_path), ["exact_match"])
    for r in [rec("m3", "t1", 1.0), dict(UNREADABLE, model_id="m3")]:
        sink.add(r)
    for _ in range(2):
        html = open(sink.finish(None, None, str(tmp_path / "r.html"))).read()
    assert sink.scan.models["m3"] == 2 and sink.scan.model_errors["m3"] == 1
    assert "1 of 2 records failed" in html
