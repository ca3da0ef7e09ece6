"""A shuffled input gives the same files (issue 37): records.jsonl is written in the order the pool
finishes records, which changes from run to run, so every file made from it (summary.json and
summary.csv, the leaderboard, significance.csv, the open-rag-eval CSVs and their names) must not
depend on that order. records.parquet mirrors records.jsonl row for row and is left out."""

from __future__ import annotations

import json
import os
import random
from types import SimpleNamespace

import pytest

from ragscale.config import SignificanceConf
from ragscale.report.sinks import Outputs, ReportSettings

# "Model" and "model" share a file name on a case-insensitive file system: which one gets the hash
# suffix must not depend on which came first
MODELS = ("Model", "model", "org/judge-7b")


def records() -> list[dict]:
    out, line = [], 0
    for m, model in enumerate(MODELS):
        for t in range(6):
            for run in (1, 2):
                line += 1
                answered = not (t == 5 and model == "org/judge-7b")
                out.append({
                    "task_id": f"t{t}", "query_id": f"q{t}", "query_run": run, "model_id": model,
                    "query": f"question {t}?", "answer": f"answer {t} by {model} [1]" if answered else "NO ANSWER",
                    "passages": [{"id": f"p{t}-{i}", "text": f"passage {i} of {t}"} for i in range(2)],
                    "metrics": {"umbrela_mean": (t + m) % 4 / 3, "umbrela_scores": [t % 4, (t + m) % 4],
                                "citation_f1": ((t * 7 + m + run) % 5) / 4, "answered": float(answered),
                                "hhem": ((t * 3 + m * 5 + run) % 7) / 6},
                    "error": {"stage": "judge", "message": "timeout"} if (t, run, m) == (2, 2, 1) else None,
                    "ragscale": {"record_key": f"{model}|q{t}|{run}", "source_file": "in.jsonl",
                                 "source_line": line, "warnings": [], "details": {}}})
    return out


def outputs(run_dir: str, recs: list[dict]) -> dict[str, bytes]:
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "records.jsonl"), "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    reports = ReportSettings(calibration=SimpleNamespace(human=None), significance=SignificanceConf(resamples=500),
                             agreement=SimpleNamespace(human=None), export_csv=True, html_report=False)
    plan = SimpleNamespace(metrics=["umbrela_mean", "citation_f1", "answered", "hhem"], panel_columns=lambda: [],
                           steps=["retrieval", "citation", "no_answer", "hallucination"], columns={}, reports=reports)
    out = Outputs(plan, run_dir, lambda _line: None)
    out.read()
    out.finish_reports(out.finish_summary(), {})
    assert not out.failed
    files = {}
    for root, _, names in os.walk(run_dir):
        for n in names:
            if n not in ("records.jsonl", "records.parquet"):
                path = os.path.join(root, n)
                files[os.path.relpath(path, run_dir)] = open(path, "rb").read()
    return files


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_shuffled_input_gives_the_same_files(tmp_path, seed):
    recs = records()
    first = outputs(str(tmp_path / "in-order"), recs)
    assert {"summary.json", "summary.csv", "leaderboard.md", "leaderboard.csv", "significance.csv"} <= set(first)
    assert len([f for f in first if f.startswith("open-rag-eval")]) == 3
    shuffled = recs[:]
    random.Random(seed).shuffle(shuffled)
    again = outputs(str(tmp_path / "shuffled"), shuffled)
    assert sorted(again) == sorted(first)
    for name in first:
        assert again[name] == first[name], f"{name} depends on the order of the records"
