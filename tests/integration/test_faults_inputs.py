"""Inputs that never abort a run, and outputs safe to open (issue 33, items 6 to 8), end to end through
``python -m ragscale.run``: one malformed line (nested 1,000 levels, not UTF-8, a lone surrogate, a
model_id of the wrong type) is that line's error naming its file and line while the other records are
scored; a UTF-8 BOM is skipped; ``model_id: 123`` is model "123"; a (model, task) answered twice is
warned about and counted once everywhere; model ids with control, bidi and formula characters are
escaped in leaderboard.md and report.html and neutralised in every CSV; a 10,000-character model id
leaves no export unwritten; an output that cannot be written makes the run exit 5. The custom scenario
with one lexical metric, and the TREC scenario's export with the hallucination step and no HHEM model:
no judge, seconds each."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration
CUSTOM = ["+scenario=custom", "custom.expectations=null", "metrics.custom=[exact_match]", "significance.resamples=200"]
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")  # a cell that is a number stays one
FORMULA_IDS = ("=cmd|' /C calc'!A0", "+SUM(1,2)", "@SUM(1+1)", "-2+3")
HOSTILE_ID = "evil\nrow | x\u202egnp.exe\x00"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragscale.run", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def rec(model, task: str, answer: str = "Paris", **extra) -> dict:
    return {"task_id": task, "model_id": model, "user_input": f"Capital {task}?", "response": answer,
            "reference": "Paris", **extra}


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def records(out) -> list[dict]:
    return [json.loads(x) for x in open(out / "records.jsonl", encoding="utf-8")]


def csv_cells(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def unsafe_cells(path) -> list[str]:
    """The cells of a CSV that a spreadsheet would run as a formula (OWASP's characters, not a number)."""
    return [c for row in csv_cells(path) for c in row if c[:1] in ("=", "+", "-", "@", "\t", "\r")
            and not NUMBER.fullmatch(c)]


# ------------------------------------------------------------------ malformed lines


@pytest.fixture(scope="module")
def malformed(tmp_path_factory):
    """One file: a BOM before the first record, a line nested 1,000 levels, a line that is not UTF-8, a
    lone surrogate escape, model_id 123 and a model_id that is a list, between good records."""
    tmp = tmp_path_factory.mktemp("malformed")
    src = tmp / "answers.jsonl"
    deep = b'{"task_id": "t1", "model_id": "m1", "x": ' + b"[" * 1000 + b"]" * 1000 + b"}\n"
    src.write_bytes(b"\xef\xbb\xbf" + line(rec("m1", "t0"))  # line 1: a BOM, then a good record
                    + deep  # line 2
                    + line(rec("m2", "t0", "Lyon"))  # line 3
                    + line(rec("m2", "t1", "Paris")).replace(b"Paris", b"Par\xffis", 1)  # line 4: not UTF-8
                    + line(rec("m2", "t2")).replace(b"Paris", b"Par\\ud800is", 1)  # line 5: a lone surrogate
                    + line(rec(123, "t1"))  # line 6: a number as model_id
                    + line(rec(["m", 1], "t2"))  # line 7: a list as model_id
                    + line(rec("m1", "t2")))  # line 8
    out = tmp / "out"
    res = run_cli(*CUSTOM, f"input={src}", f"output_dir={out}")
    return src, out, res


def test_a_nested_line_is_its_own_error_naming_file_and_line(malformed):
    src, out, res = malformed
    assert res.returncode == 3, res.stdout[-3000:] + res.stderr[-3000:]  # some records failed, the run finished
    by_line = {r["ragscale"]["source_line"]: r for r in records(out)}
    assert sorted(by_line) == list(range(1, 9))  # every line accounted for, once
    err = by_line[2]["error"]
    assert err["stage"] == "input" and f"{src}: line 2:" in err["message"] and "nested deeper than" in err["message"]
    assert by_line[3]["error"] is None and by_line[3]["metrics"]["exact_match"] == 0.0


def test_a_bom_is_skipped(malformed):
    _src, out, _res = malformed
    first = next(r for r in records(out) if r["ragscale"]["source_line"] == 1)
    assert first["error"] is None and first["model_id"] == "m1" and first["metrics"]["exact_match"] == 1.0


def test_bytes_that_are_not_utf8_are_an_error_of_their_line(malformed):
    src, out, _res = malformed
    by_line = {r["ragscale"]["source_line"]: r for r in records(out)}
    err = by_line[4]["error"]
    assert err["stage"] == "input" and err["message"].startswith(f"{src}: line 4: not valid UTF-8")
    assert "metrics" not in by_line[4] or not by_line[4]["metrics"]
    surrogate = by_line[5]["error"]  # valid JSON, but not text any output can hold
    assert surrogate["stage"] == "input" and f"{src}: line 5:" in surrogate["message"] \
        and "surrogate" in surrogate["message"]


def test_a_number_as_model_id_is_kept_as_its_string_and_a_list_refused(malformed):
    src, out, _res = malformed
    by_line = {r["ragscale"]["source_line"]: r for r in records(out)}
    assert by_line[6]["model_id"] == "123" and by_line[6]["error"] is None
    err = by_line[7]["error"]
    assert err["stage"] == "input" and "model_id must be a string or a number, got list" in err["message"]
    summary = json.loads((out / "summary.json").read_text())
    assert "123" in summary["models"] and "answers" not in summary["models"]  # never the file's name


# ------------------------------------------------------------------ hostile model ids and duplicates


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Models whose ids carry formula, control and bidi characters, and m1 answering task t0 twice."""
    tmp = tmp_path_factory.mktemp("hostile")
    src = tmp / "ids.jsonl"
    models = ["m1", HOSTILE_ID, *FORMULA_IDS]
    rows = [rec(m, t, "Paris" if (i + j) % 2 == 0 else "Lyon") for i, m in enumerate(models) for j, t in
            enumerate(("t0", "t1", "t2"))]
    rows.append(rec("m1", "t1", "Paris"))  # line 19: m1 answers t1 again (line 2: "Lyon"), otherwise
    src.write_bytes(b"".join(line(r) for r in rows))
    out = tmp / "out"
    res = run_cli(*CUSTOM, f"input={src}", f"output_dir={out}")
    return src, out, res


def test_a_task_answered_twice_is_warned_about_and_counted_once(hostile):
    src, out, res = hostile
    assert res.returncode == 3, res.stdout[-3000:] + res.stderr[-3000:]  # the repeat is a failed record
    assert "[ragscale] warning: 1 record repeats an earlier answer of its model to its task: only the first answer is " \
           "scored" in res.stdout
    again = next(r for r in records(out) if r["ragscale"]["source_line"] == 19)
    assert again["error"]["stage"] == "input" and again["error"]["message"] == \
        f"{src}: line 19: model 'm1' answered task 't1' at line 2 of {src} already (a repeat: only the first answer is scored)"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["duplicates"]["records"] == 1
    m1 = summary["models"]["m1"]
    assert m1["metrics"]["exact_match"] == 2 / 3 and m1["n"]["exact_match"] == 3  # the first answer counts
    board = {row[1]: row for row in csv_cells(out / "leaderboard.csv")[1:] if row[2] == "all"}
    assert float(board["m1"][6]) == pytest.approx(2 / 3)
    sig = csv_cells(out / "significance.csv")
    head = sig[0]
    for row in sig[1:]:  # every comparison of m1 over its 3 tasks, with the leaderboard's mean
        d = dict(zip(head, row))
        if "m1" in (d["a"], d["b"]):
            assert d["n"] == "3"
            assert float(d["mean_a" if d["a"] == "m1" else "mean_b"]) == pytest.approx(2 / 3)


def test_formula_ids_are_neutralised_in_every_csv(hostile):
    _src, out, _res = hostile
    paths = [out / n for n in ("leaderboard.csv", "summary.csv", "significance.csv")]
    for path in paths:
        assert unsafe_cells(path) == [], path
    ids = {row[1] for row in csv_cells(out / "leaderboard.csv")[1:]}
    assert {"'=cmd|' /C calc'!A0", "'+SUM(1,2)", "'@SUM(1+1)", "'-2+3"} <= ids
    assert all(NUMBER.fullmatch(c) for row in csv_cells(out / "summary.csv")[1:] for c in row[2:] if c)  # numbers stay


def test_control_and_bidi_characters_are_escaped_in_text_outputs(hostile):
    _src, out, _res = hostile
    for name in ("leaderboard.md", "leaderboard.csv", "summary.csv", "significance.csv", "report.html"):
        text = (out / name).read_text(encoding="utf-8")
        assert "\x00" not in text and "\u202e" not in text, name
    md = (out / "leaderboard.md").read_text(encoding="utf-8")
    overall = md.split("## Overall", 1)[1].split("\n\n")[1].splitlines()
    assert len(overall) == 2 + 6 and all(r.startswith("|") and r.endswith("|") for r in overall)
    assert any("evil\\nrow \\| x\\u202egnp.exe\\x00" in r for r in overall)
    assert "row | x\\u202egnp.exe\\x00" in (out / "report.html").read_text(encoding="utf-8")


# ------------------------------------------------------------------ exports


def test_a_10000_character_model_id_leaves_no_export_unwritten(tmp_path):
    long_id = "x" * 10000
    models = [long_id, *FORMULA_IDS, *(f"m{i}" for i in range(7))]  # 12 models, the long id first
    src = tmp_path / "long.jsonl"
    src.write_bytes(b"".join(line(rec(m, t, "Paris [1]", retrieved_contexts=["Paris is the capital."]))
                             for t in ("t0", "t1") for m in models))
    out = tmp_path / "out"
    res = run_cli("+scenario=trec", "steps=[hallucination]", f"input={src}", f"output_dir={out}",
                  "significance.resamples=200")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "export failed" not in res.stdout
    files = sorted(os.listdir(out / "open-rag-eval"))
    assert len(files) == 12 and all(len(f) <= 100 for f in files)
    run = json.loads((out / "run.json").read_text())
    assert len(run["outputs"]["open_rag_eval_csv"]) == 12 and run["status"] == "ok"
    for f in files:
        assert unsafe_cells(out / "open-rag-eval" / f) == [], f
    formula = [f for f in files if "cmd" in f]
    assert len(formula) == 1 and re.fullmatch(r"cmd_C_calc_A0-[0-9a-f]{8}\.csv", formula[0])


def test_an_output_that_cannot_be_written_exits_5(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(line(rec(m, t)) for m in ("m1", "m2") for t in ("t0", "t1")))
    out = tmp_path / "out"
    (out / "leaderboard.md").mkdir(parents=True)  # the leaderboard's file cannot be written
    res = run_cli(*CUSTOM, f"input={src}", f"output_dir={out}")
    assert res.returncode == 5, res.stdout[-3000:] + res.stderr[-3000:]
    assert "[ragscale] warning: leaderboard failed: " in res.stdout
    assert "(exit code 5)" in res.stdout.rstrip().splitlines()[-2]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "outputs_incomplete" and run["outputs_failed"][0].startswith("leaderboard: ")
    assert all(r["error"] is None for r in records(out))  # every record scored
