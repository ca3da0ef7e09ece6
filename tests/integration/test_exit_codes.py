"""Exit codes end to end through ``python -m ragscale.run`` (docs/exit-codes.md, ragscale.exitcodes):
a run with a line that is not JSON finishes with 3 ("1 of 5 records failed" in its last lines, run.json
``record_errors``, the report's status linked to its errors, no phantom model), an empty input with 4
("the input held no record"), and a ``-m`` sweep of both exits with the worse of the two. The custom
scenario with one lexical metric: no judge, no model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration
CUSTOM = ["+scenario=custom", "custom.expectations=null", "metrics.custom=[exact_match]", "significance.resamples=200"]


def run_cli(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragscale.run", *CUSTOM, *overrides], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def broken_file(path) -> str:
    """broken.jsonl: two models' answers (each record names its model) and a line that is not JSON."""
    recs = [{"task_id": f"t{i}", "model_id": m, "user_input": f"Capital {i}?", "response": ans,
             "reference": "Paris"} for i in range(2) for m, ans in (("m1", "Paris"), ("m2", "Lyon"))]
    lines = [json.dumps(r) for r in recs]
    lines.insert(2, "{this line is not json")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return str(path)


def test_failed_records_exit_3_and_say_so(tmp_path):
    out = tmp_path / "out"
    res = run_cli(f"input={broken_file(tmp_path / 'broken.jsonl')}", f"output_dir={out}")
    assert res.returncode == 3, res.stdout[-3000:] + res.stderr[-3000:]
    last = res.stdout.rstrip().splitlines()
    assert last[-2] == (f"[ragscale] warning: 1 of 5 records failed (exit code 3); their errors: "
                        f"{out / 'report.html'}#errors")
    assert last[-1] == f"[ragscale] open the report: {out / 'report.html'}"
    assert "1 of them: lines that are not a JSON object" in res.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "record_errors" and run["records"]["errored"] == 1 and run["records"]["in"] == 5
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["models"]) == ["m1", "m2"] and summary["input_errors"]["records"] == 1
    assert all(m in ("m1", "m2") for e in summary.get("significance", {}).get("metrics", {}).values()
               for p in e for m in (p["a"], p["b"]))
    html = (out / "report.html").read_text()
    assert re.search(r'<span class="warn"><a href="#errors">1 of 5 records failed</a></span>', html)
    board = html[html.index('<table class="board">'):]
    assert "broken" not in board[:board.index("</table>")]  # no phantom model in the leaderboard


def test_an_empty_input_exits_4_and_a_sweep_exits_with_its_worst_job(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "empty-out"
    res = run_cli(f"input={empty}", f"output_dir={out}")
    assert res.returncode == 4, res.stdout[-3000:] + res.stderr[-3000:]
    assert "[ragscale] warning: nothing scored: the input held no record (exit code 4)" in res.stdout
    assert json.loads((out / "run.json").read_text())["status"] == "nothing_scored"
    assert "nothing scored: the input held no record" in (out / "report.html").read_text()

    sweep = tmp_path / "sweep"
    res = run_cli("-m", f"input={broken_file(tmp_path / 'broken.jsonl')},{empty}", f"output_dir={sweep}")
    assert res.returncode == 4, res.stdout[-3000:] + res.stderr[-3000:]  # NOTHING_SCORED outranks RECORD_ERRORS
    status = [json.loads((sweep / str(i) / "run.json").read_text())["status"] for i in (0, 1)]
    assert status == ["record_errors", "nothing_scored"]
    assert os.path.isfile(sweep / "0" / "report.html")
