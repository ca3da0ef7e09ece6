"""A judged sweep of six records of the bundled sample (three tasks, two models) with a two-judge
panel on every judge metric of MT-RAG's pipeline (IDK, RL_F, RB_llm), end to end: the jury's
agreement in summary.json (Krippendorff's alpha recomputed from the records' per-judge scores), the
unit of resampling, and the figures that leaderboard.md, report.html and the console show read back
against summary.json."""

import html
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration

JUDGES = ("smollm2-a", "smollm2-b")
PANEL = {"idk_eval": "nominal", "RL_F": "interval", "RB_llm": "ordinal"}
TASKS = ("conv-api::1", "conv-api::2", "conv-compost::3")
MODELS = ("acme-7b", "borealis-13b")


def scalar(v):
    return None if v is None else float(v[0] if isinstance(v, list) else v)


def test_a_two_judge_jury_on_every_judge_metric(tmp_path):
    from ragscale.report.slices import kept_interval
    from ragscale.report.text import metric_value
    from ragscale.stats.krippendorff import alpha

    # three tasks of two conversations (conv-api's two turns; conv-compost's third, conversational:
    # no passages, RL_F undefined), two models: the judges' time is per record and per passage
    # (2 members x 3 judges), so 6 records rather than the sample's first 9
    sample = [json.loads(line) for line in open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl"))]
    picked = [r for r in sample if r["task_id"] in TASKS and r["model_id"] in MODELS]
    assert len(picked) == len(TASKS) * len(MODELS)
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in picked))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", "+judge_panel=local-pair",
           f"panel_metrics=[{','.join(PANEL)}]", "steps=[algorithmic,idk,ragas,radbench,idk_condition,hmean]",
           f"input={inp}", f"output_dir={out}", "progress=off", f"judge.cache_path={tmp_path / 'c.sqlite'}",
           f"judge_panel.0.cache_path={tmp_path / 'a.sqlite'}", f"judge_panel.1.cache_path={tmp_path / 'b.sqlite'}"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    assert len(recs) == 6 and not any(r.get("error") for r in recs)

    # the jury: every panel metric, its level, alpha as recomputed from the records
    jury = summary["jury"]["metrics"]
    assert set(jury) == set(PANEL)
    for metric, level in PANEL.items():
        scores = np.array([[np.nan if (v := scalar(r["metrics"].get(f"{metric}@{j}"))) is None else v for r in recs]
                           for j in JUDGES], dtype=float)
        assert jury[metric]["level"] == level and set(jury[metric]["judges"]) == set(JUDGES)
        want = alpha(scores, level)
        assert jury[metric]["alpha"] == (None if want is None else pytest.approx(want, abs=1e-12))
        assert jury[metric]["records"] == int(((~np.isnan(scores)).sum(axis=0) >= 2).sum())
    assert any(line.startswith("[ragscale] jury on RB_llm: Krippendorff's alpha") for line in res.stdout.splitlines())

    # the unit: 3 tasks of 2 conversations
    unit = summary["significance"]["unit"]
    assert unit == {"by": "conversation_id", "name": "conversation", "units": 2, "tasks": 3,
                    "text": "resampled by conversation: 2 conversations (3 tasks)"}
    assert summary["intervals"]["unit"] == unit and summary["slices"]["unit"] == unit
    lb = (out / "leaderboard.md").read_text()
    page = html.unescape((out / "report.html").read_text())
    assert unit["text"] in lb and unit["text"] in page and "Jury agreement" in page and "## Jury" in lb

    # read back: the report's leaderboard intervals and the jury's alphas are summary.json's
    head = summary["slices"]["metric"]
    for model in summary["models"]:
        ci = kept_interval(summary["intervals"], model, head)
        if ci is not None:
            assert f"[{metric_value(head, ci[0])}, {metric_value(head, ci[1])}]" in page
    for metric, b in jury.items():
        shown = "–" if b["alpha"] is None else f"{b['alpha']:.3f}"
        assert re.search(rf"\| {re.escape(metric)} \| {b['level']} \| {b['records']} \| {re.escape(shown)} \|", lb)
    csv_rows = (out / "significance.csv").read_text().splitlines()
    assert len(csv_rows) > 1 and csv_rows[0].endswith(",unit,units,design_effect")
    assert all(",conversation,2," in r for r in csv_rows[1:])


@pytest.mark.own_ray  # a Ray of 2 CPUs on any machine (cluster.num_cpus applies to a local start only)
def test_a_trec_jury_on_every_judge_metric_runs_on_two_cpus(tmp_path):
    """Two judge actors (and HHEM's, where its weights are here) and the read task ask for more
    CPUs than Ray has: the requests are scaled to fit and said, where on main the read task was
    never placed and the run made no progress (docs/clusters.md, "CPU requests")."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=trec", "+judge_panel=local-pair", "panel_metrics=[all]",
           "limit=3", "cluster.num_cpus=2", f"output_dir={out}", "progress=off",
           f"judge.cache_path={tmp_path / 'c.sqlite'}", f"judge_panel.0.cache_path={tmp_path / 'a.sqlite'}",
           f"judge_panel.1.cache_path={tmp_path / 'b.sqlite'}"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    fitted = re.search(r"^\[ragscale\] the stages ask for (\d+) CPUs \((nli 1, )?judge@smollm2-a 1, judge@smollm2-b 1, "
                       r"and 1 for a task\) and Ray has 2: every stage's CPU request is scaled by ([0-9.]+)",
                       res.stdout, re.M)
    assert fitted, res.stdout[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["ray"]["cpu_scale"] == pytest.approx(2 / int(fitted.group(1))) == pytest.approx(float(fitted.group(3)), abs=1e-3)
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    assert len(recs) == 3 and not any(r.get("error") for r in recs)
    jury = json.loads((out / "summary.json").read_text())["jury"]["metrics"]
    assert {"umbrela_mean", "nuggets_all", "citation_f1", "answered"} <= set(jury)
    assert all(set(b["judges"]) == set(JUDGES) and b["records"] >= 3 for b in jury.values())
