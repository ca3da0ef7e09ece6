"""Human calibration end to end (real Ray, packaged encoder, no judge): a sweep of the bundled
sample with ``calibration.human=FILE`` ranks the leaderboard by the PPI++ estimates, which here
reverse the judge's order; then ``ragscale calibrate`` on the finished run, and its errors."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from readback import check_report_summary

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("needs_ppi")]

SAMPLE = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
LABELLED = 7  # tasks labelled per model (of 10)


def labels(path, scale=1.0, offset=0.0):
    """Human ``quality`` labels for the first LABELLED tasks of each model: borealis-13b rated far
    above the others (whatever RB_agg says), so that calibration changes the ranking."""
    rows = []
    seen: dict[str, int] = {}
    with open(SAMPLE) as fh:
        for line in fh:
            r = json.loads(line)
            k = seen[r["model_id"]] = seen.get(r["model_id"], 0) + 1
            if k <= LABELLED:
                good = 0.95 if r["model_id"] == "borealis-13b" else 0.1 + 0.05 * (k % 3)
                rows.append({"task_id": r["task_id"], "model_id": r["model_id"], "quality": offset + scale * good})
    with open(path, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def run(*args, module="ragscale.run"):
    pre = ["+scenario=mtrag"] if module == "ragscale.run" else []
    return subprocess.run([sys.executable, "-m", module, *pre, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=600)


def test_calibrated_run_and_calibrate_command(tmp_path):
    human = labels(tmp_path / "human.jsonl")
    out = tmp_path / "out"
    res = run(f"output_dir={out}", "steps=[algorithmic]", f"calibration.human={human}",
              "calibration.pairs=['quality=RB_agg']", "calibration.min_labels=5")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "calibration: 21 record(s) with human labels, 1 metric(s) calibrated; the leaderboard ranks by " \
           "calibrated RB_agg" in res.stdout
    summary = json.load(open(out / "summary.json"))
    cal = summary["calibration"]
    assert cal["ranked_by"] == "RB_agg" and cal["method"].startswith("PPI++")
    models = cal["metrics"]["RB_agg"]["models"]
    assert set(models) == {"acme-7b", "borealis-13b", "cobalt-70b"}
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    for model, r in models.items():
        mine = [x["metrics"]["RB_agg"][0] for x in recs if x["model_id"] == model]
        assert r["n_labeled"] == LABELLED and r["n_records"] == len(mine) == 10
        assert r["naive"]["mean"] == pytest.approx(np.mean(mine)) == summary["models"][model]["metrics"]["RB_agg"]
        lo, hi = r["calibrated"]["ci"]
        assert lo <= r["calibrated"]["mean"] <= hi
    # the judge's order and the calibrated one differ; the leaderboard follows the calibrated one
    naive_first = max(models, key=lambda m: models[m]["naive"]["mean"])
    assert naive_first != "borealis-13b"
    assert max(models, key=lambda m: models[m]["calibrated"]["mean"]) == "borealis-13b"
    rows = list(csv.DictReader(open(out / "leaderboard.csv", newline="")))
    first = next(r for r in rows if r["breakdown"] == "all" and r["rank"] == "1")
    assert first["model_id"] == "borealis-13b"
    assert float(first["calibrated_RB_agg"]) == pytest.approx(models["borealis-13b"]["calibrated"]["mean"], abs=1e-9)
    md = open(out / "leaderboard.md").read()
    assert "ranked by the **calibrated** mean of **RB_agg**" in md and "## Significance, calibrated" in md
    ranking = [line for line in res.stdout.splitlines() if "calibrated" in line and "labels)" in line]
    assert "borealis-13b" in ranking[0]
    assert sorted(os.listdir(out / "calibration")) == ["calibration.csv", "calibration.json", "calibration.md"]
    assert json.load(open(out / "run.json"))["outputs"]["calibration"] == [
        "calibration/calibration.csv", "calibration/calibration.json", "calibration/calibration.md"]
    assert "RB_agg" in check_report_summary(out)

    # ragscale calibrate on the finished run, labels on a 1..5 scale: refused until the map is stated
    human5 = labels(tmp_path / "human5.jsonl", scale=4.0, offset=1.0)
    bad = run(str(out), "--human", str(human5), "--pair", "quality=RB_agg", "--min-labels", "5",
              module="ragscale.calibrate")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "calibration.map=[quality=" in bad.stderr and "Traceback" not in bad.stderr
    good = run(str(out), "--human", str(human5), "--pair", "quality=RB_agg", "--min-labels", "5",
               "--map", "quality=1..5:0..1", module="ragscale.calibrate")
    assert good.returncode == 0, good.stderr[-3000:]
    again = json.load(open(out / "summary.json"))["calibration"]["metrics"]["RB_agg"]
    assert again["mapping"] == "1..5:0..1 (linear)"
    for model, r in models.items():  # the same labels, mapped back: the same estimates
        assert again["models"][model]["calibrated"]["mean"] == pytest.approx(r["calibrated"]["mean"], abs=1e-9)
    assert good.stdout.rstrip().splitlines()[-1] == f"[ragscale] open the report: {out / 'report.html'}"

    # too few labels: a message per model, not a number
    few = run(str(out), "--human", str(human), "--pair", "quality=RB_agg", "--no-update", module="ragscale.calibrate")
    assert few.returncode == 0, few.stderr[-3000:]
    block = json.load(open(out / "calibration" / "calibration.json"))
    for r in block["metrics"]["RB_agg"]["models"].values():
        assert r["calibrated"] is None and "at least 20 are needed (calibration.min_labels)" in r["message"]
    assert "at least 20 are needed" in few.stdout
