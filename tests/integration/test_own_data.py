"""A user's own data in the first minutes (issue 32): other column names read through
column_map / columns.<field>, metrics chosen by name, a table CSV, to_pandas() with the inputs,
and data that no metric could read refused before Ray starts. Real Ray, no judge, no model."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration

# two models answering two questions, in a team's own vocabulary (also scripts/check_wheel.sh's notebook check)
OWN = os.path.join(ROOT, "tests", "unit", "data", "own_answers.jsonl")
ROWS = [{**r, "docs": json.dumps(r["docs"])} for r in map(json.loads, open(OWN))]  # as a CSV holds a list
MAP = {"question": "query", "answer": "generated", "reference": "gold", "contexts": "docs", "model_id": "system",
       "task_id": "qid"}


def _csv(path) -> str:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ROWS[0]))
        w.writeheader()
        w.writerows(ROWS)
    return str(path)


def _ragscale(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ragscale"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_a_table_csv_with_own_columns_through_the_command(tmp_path):
    src, out = _csv(tmp_path / "answers.csv"), tmp_path / "out"
    res = _ragscale("run", f"input={src}", f"output_dir={out}", "metrics=[exact_match,RougeL]",
                    *(f"columns.{f}={c}" for f, c in MAP.items() if f != "task_id"), "input.columns.task_id=qid")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    assert len(recs) == 4 and all(r["error"] is None for r in recs)
    assert {(r["model_id"], r["task_id"]) for r in recs} == {(m, q) for m in ("m1", "m2") for q in ("q1", "q2")}
    assert all(r["generated"] == next(x["generated"] for x in ROWS if (x["system"], x["qid"]) == (r["model_id"], r["task_id"]))
               for r in recs)  # the output keeps the user's own columns
    summary = json.load(open(out / "summary.json"))
    assert summary["models"]["m1"]["metrics"]["exact_match"] == 1.0 and summary["models"]["m2"]["metrics"]["exact_match"] == 0.0
    assert set(summary["metrics"]) == {"exact_match", "RougeL_stemFalse"}
    run_info = json.load(open(out / "run.json"))
    assert run_info["config"]["select"] == ["exact_match", "RougeL"] and run_info["config"]["columns"]["answer"] == "generated"


def test_own_columns_without_a_map_are_refused_before_ray(tmp_path):
    src, out = _csv(tmp_path / "answers.csv"), tmp_path / "out"
    res = _ragscale("run", f"input={src}", f"output_dir={out}", "metrics=[exact_match]")
    assert res.returncode == 2 and res.stdout == "", res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"ragscale run: error: {src}: no record has an answer (4 checked); its columns: "
                                 "system, qid, query, generated, gold, docs;")
    assert ("column_map={'model_id': 'system', 'task_id': 'qid', 'answer': 'generated', 'contexts': 'docs', "
            "'reference': 'gold'}") in res.stderr
    assert ("columns.model_id=system columns.task_id=qid columns.answer=generated columns.contexts=docs "
            "columns.reference=gold on the command line") in res.stderr
    assert not out.exists() or os.listdir(out) == [".hydra"]  # no work: only Hydra's record of the command line


@pytest.mark.own_ray  # ragscale.evaluate in the test process (tests/conftest.py)
def test_a_dataframe_with_own_columns_in_python(tmp_path):
    import ragscale

    df = pd.read_json(OWN, lines=True)
    lines: list[str] = []
    run = ragscale.evaluate(df, metrics=["exact_match", "rougel", "Recall"], column_map=MAP,
                            output_dir=str(tmp_path / "nb"), printer=lines.append)
    assert run.ok, lines
    out = run.to_pandas()
    assert list(out.columns[:9]) == ["record_key", "model_id", "task_id", "conversation_id", "turn", "question",
                                     "contexts", "answer", "reference"]
    assert out["question"].tolist() == df["query"].tolist() and out["answer"].tolist() == df["generated"].tolist()
    assert out["contexts"].tolist() == df["docs"].tolist() and out["reference"].tolist() == df["gold"].tolist()
    assert out["task_id"].tolist() == df["qid"].tolist() and out["model_id"].tolist() == df["system"].tolist()
    assert {"exact_match", "RougeL_stemFalse", "Recall"} <= set(out.columns)
    plain = run.to_pandas(inputs=False)
    assert "question" not in plain.columns and "prediction" in plain.columns
    assert list(run.leaderboard["model_id"]) == ["m1", "m2"]
    assert os.path.basename(run.path) == "nb"
