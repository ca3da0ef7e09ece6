"""MT-RAG's retrieval task (task A) as a run (issue 36): records without answers through the Ray
pipeline, scored against human qrels per record (records.jsonl), per collection and weighted
(retrieval.json, retrieval.md, report.html); the figures equal MT-RAG's own run_retrieval_eval.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from conftest import MTRAG_COLLECTIONS, ROOT, run_mtrag_retrieval_eval

pytest.importorskip("pytrec_eval", reason="the retrieval extra")

BEIR = "query-id\tcorpus-id\tscore\n"


def run(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragscale.run", "+scenario=mtrag_retrieval", *overrides], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_the_mtrag_retrieval_scenario_on_its_bundled_sample(tmp_path):
    out = tmp_path / "out"
    res = run(f"output_dir={out}")
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"retrieval:   {out / 'retrieval.md'} (against qrels.file)" in res.stdout
    assert res.stdout.strip().splitlines()[-1] == f"[ragscale] open the report: {out / 'report.html'}"
    recs = [json.loads(x) for x in open(out / "records.jsonl")]
    blocks = json.load(open(out / "retrieval.json"))
    assert len(recs) == 20 and {r["model_id"] for r in recs} == set(blocks) == {"bm25", "dense"}
    for r in recs:  # each record: its query's figures in retrieval.json, or why it has none
        assert r["error"] is None and "predictions" not in r
        mine = r["ragscale"]["details"].get("qrels")
        assert mine == blocks[r["model_id"]]["queries"].get(r["task_id"])
        assert (mine is None) == bool(r["ragscale"]["warnings"])
    unscored = sorted({r["task_id"] for r in recs if "qrels" not in r["ragscale"]["details"]})
    assert unscored == ["conv-api::2", "conv-compost::3", "conv-lighthouse::2"]
    for block in blocks.values():
        assert block["all"]["count"] == 10 and block["all"]["scored"] == 7
        assert sorted(q for c in block["collections"].values() for q in c["without_qrels"]) == unscored
    assert blocks["dense"]["all"]["Recall@1"] > blocks["bm25"]["all"]["Recall@1"]
    html = open(out / "report.html", encoding="utf-8").read()
    assert 'id="retrieval"' in html and "3 task(s) without qrels, not scored" in html
    # resumed: nothing to redo; other qrels: not mixed into these records
    again = run(f"output_dir={out}", "resume=true")
    assert again.returncode == 0 and "already_done=20" in again.stdout, again.stderr[-2000:]
    other = tmp_path / "other.tsv"
    other.write_text(BEIR + "conv-api<::>1\tapi-002\t1\n")
    refused = run(f"output_dir={out}", "resume=true", f"qrels.file={other}")
    assert refused.returncode == 2 and "different configuration (qrels)" in refused.stderr, refused.stderr[-2000:]


def test_a_retrieval_run_equals_mtrags_run_retrieval_eval(tmp_path):
    """Two retrievers' records over MT-RAG's four collections, through a run with a qrels file per
    collection: each model's retrieval.json equals the script's per-collection and weighted figures."""
    rnd = random.Random(11)
    qrels_text, records = {}, {"bm25": [], "elser": []}
    for key, coll in MTRAG_COLLECTIONS.items():
        lines = []
        for conv in range(4):
            for turn in (1, 2):
                tid = f"{key}-{conv}::{turn}"
                docs = [f"{key}-doc{conv}{i}-{100 * i}-{100 * i + 99}" for i in range(6)]
                if rnd.random() < 0.8:  # some tasks have no qrels
                    lines += [f"{tid}\t{d}\t{rnd.choice([1, 1, 2])}\n" for d in rnd.sample(docs, rnd.randint(1, 3))]
                for model in records:
                    ranked = rnd.sample(docs, rnd.randint(0, 5))
                    records[model].append({"task_id": tid, "Collection": coll, "model_id": model,
                                           "contexts": [{"document_id": d, "score": rnd.uniform(0, 30)} for d in ranked]})
        qrels_text[key] = BEIR + "".join(lines)
    (tmp_path / "q").mkdir()
    for key, text in qrels_text.items():
        (tmp_path / "q" / f"{key}.tsv").write_text(text)
    inp = tmp_path / "runs.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for recs in records.values() for r in recs))
    mapping = ",".join(f"{k}:'{tmp_path / 'q' / k}.tsv'" for k in MTRAG_COLLECTIONS)
    out = tmp_path / "out"
    res = run(f"input={inp}", f"output_dir={out}", f"qrels.file={{{mapping}}}", "qrels.k=[1,3,5]")
    assert res.returncode == 0, res.stderr[-3000:]
    blocks = json.load(open(out / "retrieval.json"))
    for model, recs in records.items():
        theirs, rows = run_mtrag_retrieval_eval(tmp_path / model, recs, qrels_text)
        block = blocks[model]
        for q, figures in block["queries"].items():
            assert [figures[f"Recall@{k}"] for k in (1, 3, 5)] == pytest.approx(
                [theirs[q][f"recall_{k}"] for k in (1, 3, 5)], abs=1e-9)
        for name, row in rows.items():
            mine = block["all"] if name == "all" else block["collections"][name]
            assert int(row["count"]) == mine["count"]
            for figure in ("Recall", "nDCG"):
                assert [mine[f"{figure}@{k}"] for k in (1, 3, 5)] == pytest.approx(json.loads(row[figure]), abs=1e-9)
    assert os.path.exists(out / "retrieval.md")
