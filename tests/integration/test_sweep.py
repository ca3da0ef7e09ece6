"""A model sweep end to end (real Ray, packaged encoder): ``input=`` a directory of prediction
files, then a list of them; one run, a per-model leaderboard with the significance of the
differences between models, shared texts encoded once."""

import csv
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from readback import check_report_summary, check_summary_csv

pytestmark = pytest.mark.integration
SAMPLE = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
ALGO = "steps=[algorithmic]"  # no judge: the leaderboard and the sweep's sharing need no LLM


def cli(*args):
    return subprocess.run([sys.executable, "-m", "ragscale.run", "+scenario=mtrag", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=600)


def split_sample(folder):
    """One file per model of the bundled sample, plus ``echo-1b.jsonl``: acme-7b's answers under
    another model (no ``model_id`` in the records: the file name is the model), and a stray file."""
    folder.mkdir()
    by_model = {}
    with open(SAMPLE) as fh:
        for line in fh:
            r = json.loads(line)
            by_model.setdefault(r["model_id"], []).append(r)
    by_model["echo-1b"] = [{k: v for k, v in r.items() if k != "model_id"} for r in by_model["acme-7b"]]
    for model, recs in by_model.items():
        with open(folder / f"{model}.jsonl", "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in recs)
    (folder / "notes.txt").write_text("not a prediction file\n")
    return by_model


def test_directory_sweep_leaderboard_and_shared_encoding(tmp_path):
    by_model = split_sample(tmp_path / "preds")
    out = tmp_path / "out"
    res = cli(f"input={tmp_path / 'preds'}", f"output_dir={out}", ALGO)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "files=4 records=40" in res.stdout
    assert f"leaderboard: {out / 'leaderboard.md'}" in res.stdout
    # the end of the run names each model with its headline score, best first, and what to open
    summary = json.load(open(out / "summary.json"))
    head = "RB_agg" if "RB_agg" in summary["metrics"] else None
    assert "4 model(s), ranked by" in res.stdout
    ranking = [line for line in res.stdout.splitlines() if line.startswith("[ragscale]  ") and "(n=" in line]
    assert len(ranking) == 4
    if head:
        order = sorted(summary["models"], key=lambda m: (-summary["models"][m]["metrics"][head], m))
        assert [next(m for m in order if f" {m} " in line) for line in ranking] == order
    assert res.stdout.rstrip().splitlines()[-1] == f"[ragscale] open the report: {out / 'report.html'}"

    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    assert len(recs) == 40 and all(r["error"] is None for r in recs)
    assert {r["model_id"] for r in recs} == {"acme-7b", "borealis-13b", "cobalt-70b", "echo-1b"}

    # Work that repeats is done once: every task's reference and passages, and echo-1b's copies
    # of acme-7b's answers, are encoded once for the whole sweep.
    texts = set()
    for model_recs in by_model.values():
        for r in model_recs:
            texts |= {r["predictions"][0]["text"].strip(), *(t["text"].strip() for t in r["targets"]),
                      *(c["text"].strip() for c in r["contexts"])}
    per_record = sum(1 + len(r["targets"]) + len(r["contexts"]) for rs in by_model.values() for r in rs)
    run = json.load(open(out / "run.json"))
    assert run["encoder_work"]["texts_encoded"] == len(texts) < per_record / 2  # 51 of 144
    assert run["outputs"]["leaderboard"] == ["leaderboard.md", "leaderboard.csv"]

    # The leaderboard agrees with the records, cell by cell (RB_agg is the headline of a run
    # without judges; Recall is checked too).
    def bucket(r):
        return "1" if int(r["turn"]) == 1 else ">1"

    def mean(rs, metric):
        return sum(r["metrics"][metric][0] for r in rs) / len(rs)

    rows = list(csv.DictReader(open(out / "leaderboard.csv", newline="")))
    overall = [r for r in rows if r["breakdown"] == "all"]
    assert [float(r["RB_agg"]) for r in overall] == sorted((float(r["RB_agg"]) for r in overall), reverse=True)
    ranks = {r["model_id"]: r["rank"] for r in overall}
    assert ranks["acme-7b"] == ranks["echo-1b"]  # identical answers: a tie
    cells = {(r["model_id"], r["breakdown"], r["cell"]): r for r in rows}
    for model, metric in ((m, x) for m in ranks for x in ("RB_agg", "Recall")):
        mine = [r for r in recs if r["model_id"] == model]
        assert float(cells[(model, "all", "ALL")][metric]) == pytest.approx(mean(mine, metric), abs=1e-5)
        for turn in ("1", ">1"):
            part = [r for r in mine if bucket(r) == turn]
            cell = cells[(model, "turn", turn)]
            assert int(cell["count"]) == len(part) == int(cell[f"n_{metric}"])
            assert float(cell[metric]) == pytest.approx(mean(part, metric), abs=1e-5)
        for cls in {r["answerability"][0] for r in mine}:
            part = [r for r in mine if r["answerability"][0] == cls]
            cell = cells[(model, "answerability", cls)]
            assert int(cell["count"]) == len(part)
            assert float(cell[metric]) == pytest.approx(mean(part, metric), abs=1e-5)
    assert int(cells[("acme-7b", "turn", "1")]["count"]) == 4  # the sample: 4 conversations, 10 tasks each model

    md = open(out / "leaderboard.md").read()
    assert "ranked by mean **RB_agg**" in md and "| Turn 1 | Turn >1 |" in md and "UNANSWERABLE" in md
    first = next(r for r in overall if r["rank"] == "1")
    assert f"| 1 | {first['model_id']} | 10 | 0 |" in md

    # Significance between the 4 models, paired by task: every pair (4 <= all_pairs_max_models), on the
    # headline; echo-1b repeats acme-7b's answers, so that pair differs nowhere.
    block = summary["significance"]
    assert block["design"] == "all-pairs" and block["correction"] == "holm" and block["resamples"] == 10000
    assert list(block["metrics"]) == ["RB_agg"] and len(block["metrics"]["RB_agg"]) == 6
    same = next(e for e in block["metrics"]["RB_agg"] if {e["a"], e["b"]} == {"acme-7b", "echo-1b"})
    assert same["n"] == 10 and same["p"] == 1.0 and not same["significant"] and same["note"] == "all differences zero"
    assert "[ragscale] significance: 6 paired comparisons (all-pairs, 1 metric(s), 10000 resamples)" in res.stdout
    assert "## Significance" in md and "acme-7b vs echo-1b: not distinguishable on these 10 tasks" in md
    assert run["outputs"]["significance"] == ["significance.csv"]
    sig_rows = list(csv.DictReader(open(out / "significance.csv", newline="")))
    assert len(sig_rows) == 6 and {r["metric"] for r in sig_rows} == {"RB_agg"}
    html = open(out / "report.html", encoding="utf-8").read()
    assert "RB_agg" in check_report_summary(out)  # 4 models and ALL models: summary.json's numbers
    check_summary_csv(out)
    assert 'id="significance"' in html and "acme-7b vs echo-1b — not distinguishable on these 10 tasks" in html

    # The same sweep as a list of files: same inputs, so the run resumes (nothing to redo) and
    # the leaderboard is written again from records.jsonl.
    os.remove(out / "leaderboard.md")
    files = ",".join(str(tmp_path / "preds" / f"{m}.jsonl") for m in sorted(by_model))
    again = cli(f"input=[{files}]", f"output_dir={out}", ALGO)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already_done=40" in again.stdout
    assert open(out / "leaderboard.md").read() == md
