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


def _rec(qid, run, line, answer, **extra) -> dict:
    r = {"model_id": "m", "question": f"Q {qid}?", "answer": answer, "contexts": [], "metrics": {}, "error": None,
         "ragscale": {"record_key": f"k-{line}", "source_line": line}, **extra}
    if qid:
        r["query_id"] = qid
    if run is not None:
        r["query_run"] = run
    return r


def _cell(answer: str) -> str:
    return '"[{""text"": ""' + answer + '"", ""citations"": []}]"'


def test_the_csv_exactly_rows_by_first_line_runs_by_number(tmp_path):
    """open-rag-eval's results CSV for records fed in any order: a query's row sits where its
    earliest input line was, its runs ascend by query_run (a run without a number is run 1), a
    record without a query or task id is named by its record key, a missing cell is empty, lines
    end in \\n as pandas' to_csv writes them."""
    from ragscale.report.orag_export import export_orag_csv

    path = tmp_path / "m.csv"
    recs = [_rec("q2", 1, 20, "q2 first"), _rec("q3", None, 10, "q3 only"), _rec("q2", 2, 5, "q2 second"),
            _rec(None, None, 30, "keyed")]
    assert export_orag_csv(recs, str(path)) == 3
    assert path.read_bytes().decode() == (
        "query_id,query,run_1_retrieved_passages,run_1_generated_answer,run_2_retrieved_passages,"
        "run_2_generated_answer\n"
        f"q2,Q q2?,{{}},{_cell('q2 first')},{{}},{_cell('q2 second')}\n"
        f"q3,Q q3?,{{}},{_cell('q3 only')},,\n"
        f"k-30,Q None?,{{}},{_cell('keyed')},,\n")
    # two runs numbered alike keep their input order; the run numbers, not the lines, order runs
    assert export_orag_csv([_rec("q", 2, 1, "b"), _rec("q", 1, 2, "a"), _rec("q", 1, 3, "a2")], str(path)) == 1
    assert path.read_text().splitlines()[1] == f"q,Q q?,{{}},{_cell('a')},{{}},{_cell('a2')},{{}},{_cell('b')}"


def test_records_without_any_id_are_numbered_in_turn(tmp_path):
    from ragscale.report.orag_export import export_orag_csv

    path = tmp_path / "m.csv"
    bare = [dict(_rec(None, None, 0, a), ragscale=None) for a in ("x", "y")]
    assert export_orag_csv(bare, str(path)) == 2
    assert [line.split(",")[0] for line in path.read_text().splitlines()[1:]] == ["record-0", "record-1"]
