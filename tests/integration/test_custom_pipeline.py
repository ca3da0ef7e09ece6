"""+scenario=custom end to end through the CLI on the bundled sample (RAGAS-style JSONL) with
the bundled fact checks: real Ray pipeline, no judge, no model."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration


def run_cli(*overrides: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=custom", *overrides]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_custom_scenario_on_bundled_sample(tmp_path):
    human = tmp_path / "human.jsonl"  # plain label columns: agreement.human runs at the end of the run
    human.write_text("".join(json.dumps({"task_id": f"HCW_{t}", "model_id": m, "correct": int(m == "atlas-7b" or t == 1)}) + "\n"
                             for t in (1, 3, 4) for m in ("atlas-7b", "breeze-3b")))
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"task_id": "HCW_1", "model_id": "gamma", "user_input": "q", "response": "$18.40"})
                     + "\n" + "not json\n")
    res = run_cli(f"input=[{os.path.join(ROOT, 'ragscale', 'data', 'custom_sample.jsonl')},{extra}]",
                  f"output_dir={tmp_path / 'out'}", f"agreement.human={human}", "agreement.pairs=['correct=is_correct']")
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-3000:]  # a record failed: ragscale.exitcodes
    recs = [json.loads(line) for line in open(tmp_path / "out" / "records.jsonl")]
    keys = [r["ragscale"]["record_key"] for r in recs]
    assert len(recs) == 10 and len(set(keys)) == 10  # every record exactly once, the bad line included
    bad = [r for r in recs if r["error"]]
    assert len(bad) == 1 and bad[0]["error"]["stage"] == "input"
    by = {(r["model_id"], r.get("task_id")): r for r in recs if not r["error"]}
    m = by[("breeze-3b", "HCW_3")]["metrics"]
    assert m["is_correct"] == 0.0 and m["fact_score"] == 0.0  # "I cannot calculate ..."
    assert by[("breeze-3b", "HCW_3")]["ragscale"]["details"]["fact_checks"]["cannot_calculate"] == ["cannot calculate"]
    m = by[("atlas-7b", "HCW_2")]["metrics"]
    assert m["rules_coverage"] == 1.0 and m["is_correct"] is None
    assert by[("atlas-7b", "HCW_1")]["metrics"]["exact_match"] == 1.0
    # no reference: reference-based metrics null with a warning; the fact checks still run
    g = by[("gamma", "HCW_1")]
    assert g["metrics"]["exact_match"] is None and g["metrics"]["fact_score"] == 0.5
    assert any("no reference answer" in w for w in g["ragscale"]["warnings"])
    summary = json.load(open(tmp_path / "out" / "summary.json"))
    # the line that is not JSON names no model (extra.jsonl's record names its own): no model "extra"
    assert sorted(summary["models"]) == ["atlas-7b", "breeze-3b", "gamma"] and summary["input_errors"]["records"] == 1
    assert json.load(open(tmp_path / "out" / "run.json"))["status"] == "record_errors"
    assert "[ragscale] warning: 1 of 10 records failed (exit code 3)" in res.stdout
    assert summary["models"]["atlas-7b"]["metrics"]["is_correct"] == 1.0
    assert summary["models"]["breeze-3b"]["metrics"]["rules_coverage"] == pytest.approx(1 / 3)
    # the fact checks' is_correct agrees perfectly with these human labels on the 6 rated records
    agree = json.load(open(tmp_path / "out" / "agreement" / "agreement.json"))
    overall = [r for r in agree["rows"] if r["model"] == "ALL"][0]
    assert overall["n"] == 6 and overall["accuracy"]["value"] == 1.0 and overall["kappa"]["value"] == 1.0
    assert "agreement/agreement.md" in json.load(open(tmp_path / "out" / "run.json"))["outputs"]["agreement"]


def test_bad_expectations_is_a_one_line_error(tmp_path):
    bad = tmp_path / "exp.yaml"
    bad.write_text("questions:\n  - id: q1\n    facts:\n      - {name: x, pattern: '('}\n")
    res = run_cli(f"custom.expectations={bad}", f"output_dir={tmp_path / 'out'}")
    assert res.returncode == 2
    assert "question q1: facts[0] (x).pattern is not a valid regular expression" in res.stderr + res.stdout
    assert "Traceback" not in res.stderr
    res = run_cli("custom.expectations=null", f"output_dir={tmp_path / 'out2'}")
    assert res.returncode == 2 and "need custom.expectations" in res.stderr + res.stdout
