"""Retrieval against qrels inside a run (``qrels.*``; ragscale/report/qrels_sink.py): the sink's
figures are `ragscale retrieval`'s on each model's records, records without passage ids are
counted, and bad settings are one line at plan time."""

from __future__ import annotations

import json
import re

import pytest

from ragscale.errors import UserError

pytest.importorskip("pytrec_eval", reason="the retrieval extra")

BEIR = "query-id\tcorpus-id\tscore\n"


def rec(model, task, docs, grades=None, **more):
    return {"model_id": model, "task_id": task, "Collection": "c",
            "contexts": [{"document_id": d, "text": d, "score": 10 - i} for i, d in enumerate(docs)],
            "metrics": {"umbrela_scores": grades}, **more}


def test_each_models_figures_are_the_commands_on_its_records(tmp_path, capsys):
    from ragscale.commands.retrieval import main
    from ragscale.report.qrels_sink import QrelsSink

    qrels = tmp_path / "q.tsv"
    qrels.write_text(BEIR + "t1\td2\t1\nt2\td3\t1\nt2\td4\t0\n")
    records = [rec("m1", "t1", ["d1", "d2"], [3, 0]), rec("m1", "t2", ["d3", "d4"], [2, 0]),
               rec("m2", "t1", ["d2", "d9"], [2, 2]), rec("m2", "t3", ["d5"], [1]),
               {"model_id": "m2", "task_id": "t2", "contexts": ["a passage as a string"], "metrics": {}}]
    conf = {"file": str(qrels), "k": [1, 3], "measures": ["Recall", "nDCG", "MRR"], "fill": "umbrela",
            "mtrag_rounding": False, "keep_identical_ids": False}
    sink = QrelsSink(str(tmp_path), conf)
    for r in records:
        sink.add(r)
    paths = sink.write()
    blocks = json.load(open(paths[0]))
    assert set(blocks) == {"m1", "m2"} and blocks["m1"]["without_ids"] == 0 and blocks["m2"]["without_ids"] == 1
    for model in ("m1", "m2"):
        own = tmp_path / f"{model}.jsonl"
        own.write_text("".join(json.dumps(r) + "\n" for r in records if r["model_id"] == model and r["metrics"]))
        assert main([str(own), "--qrels", str(qrels), "--k", "1,3", "--measures", "Recall,nDCG,MRR", "--fill",
                     "umbrela", "--json"]) == 0
        command = json.loads(capsys.readouterr().out)[str(own)]
        assert {k: v for k, v in blocks[model].items() if k != "without_ids"} == command
    md = open(paths[1]).read()
    assert "## m1" in md and "## m2, qrels filled by UMBRELA" in md
    assert "1 record(s) without passage ids (contexts[].document_id): not scored" in md
    assert "1 task(s) without qrels, not scored: t3" in md


def test_a_run_without_umbrela_grades_says_the_qrels_were_not_filled(tmp_path):
    from ragscale.report.qrels_sink import QrelsSink

    qrels = tmp_path / "q.tsv"
    qrels.write_text(BEIR + "t1\td1\t1\n")
    sink = QrelsSink(str(tmp_path), {"file": str(qrels), "k": [1], "measures": ["Recall"], "fill": "umbrela"})
    sink.add(rec("m", "t1", ["d1"]))
    json_path, md_path = sink.write()
    assert json.load(open(json_path))["m"]["filled"] is None
    assert "no UMBRELA grades in the records (step retrieval): the qrels were not filled" in open(md_path).read()


def plan_of(*overrides):
    from ragscale.plan import compose, plan_run

    return plan_run(compose(["+scenario=trec", "steps=[retrieval]", *overrides]))


@pytest.mark.parametrize("overrides, message", [
    (["qrels.file=/nonexistent/q.tsv"], "/nonexistent/q.tsv"),
    (["qrels.file=Q", "qrels.measures=[Recall,ERR]"], "unknown retrieval measure(s) 'ERR'"),
    (["qrels.file=Q", "qrels.k=[0]"], "retrieval cut-offs must be positive integers"),
    (["qrels.file=Q", "qrels.fill=bm25"], "qrels.fill must be umbrela or null, got 'bm25'"),
    (["qrels.file=Q", "qrels.fill=umbrela", "steps=[no_answer]"], "qrels.fill=umbrela fills the qrels' holes with "
                                                                  "UMBRELA's grades: add the retrieval step"),
])
def test_bad_qrels_settings_are_one_line_before_ray(tmp_path, overrides, message):
    pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")
    q = tmp_path / "q.tsv"
    q.write_text(BEIR + "t\td\t1\n")
    with pytest.raises(UserError, match=re.escape(message)):
        plan_of(*[o.replace("=Q", f"={q}") for o in overrides])


def test_the_plan_makes_the_qrels_paths_absolute(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")
    (tmp_path / "q.tsv").write_text(BEIR + "t\td\t1\n")
    monkeypatch.chdir(tmp_path)
    assert plan_of("qrels.file=q.tsv").reports.qrels["file"] == str(tmp_path / "q.tsv")
    assert plan_of("qrels.file={clapnq: q.tsv}").reports.qrels["file"] == {"clapnq": str(tmp_path / "q.tsv")}
    assert plan_of().reports.qrels["file"] is None
