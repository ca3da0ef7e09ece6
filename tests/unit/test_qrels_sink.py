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


# ---------------------------------------------------------------- what the sink decides


def sink_of(tmp_path, qrels_text=BEIR + "t1\td2\t1\n", **conf):
    from ragscale.report.qrels_sink import QrelsSink

    q = tmp_path / "q.tsv"
    q.write_text(qrels_text)
    return QrelsSink(str(tmp_path), {"file": str(q), "k": [1, 2], "measures": ["Recall", "nDCG"], **conf})


def test_the_sink_opens_only_with_a_qrels_file_and_finishes_with_its_files(tmp_path):
    from types import SimpleNamespace

    from ragscale.report.qrels_sink import QrelsSink, open_sink
    from ragscale.report.sinks import Finished

    q = tmp_path / "q.tsv"
    q.write_text(BEIR + "t1\td1\t1\n")
    assert open_sink(SimpleNamespace(qrels=None), None, str(tmp_path)) is None
    assert open_sink(SimpleNamespace(qrels={"file": None}), None, str(tmp_path)) is None
    sink = open_sink(SimpleNamespace(qrels={"file": str(q), "k": [1], "measures": ["Recall"]}), None, str(tmp_path))
    assert isinstance(sink, QrelsSink) and sink.out_dir == str(tmp_path)
    sink.add(rec("m", "t1", ["d1"]))
    assert sink.finish(Finished({}, {}, str(tmp_path))) == {"retrieval": ["retrieval.json", "retrieval.md"]}
    assert json.load(open(tmp_path / "retrieval.json"))["m"]["all"]["Recall@1"] == 1.0


def test_passages_are_ranked_by_their_scores_and_a_score_that_is_no_number_ranks_by_position(tmp_path):
    sink = sink_of(tmp_path)
    docs = [{"document_id": "d1", "score": 1}, {"document_id": "d2", "score": 5}]
    sink.add({"model_id": "by-score", "task_id": "t1", "contexts": docs})  # d2 first: Recall@1 = 1
    for bad in (True, "high"):
        sink.add({"model_id": f"by-position-{bad}", "task_id": "t1",
                  "contexts": [{"document_id": "d1", "score": bad}, {"document_id": "d2", "score": 5}]})
    blocks = sink.blocks()
    assert blocks["by-score"]["all"]["Recall@1"] == 1.0
    assert blocks["by-position-True"]["all"]["Recall@1"] == blocks["by-position-high"]["all"]["Recall@1"] == 0.0


def test_records_without_passage_ids_are_counted_per_model(tmp_path):
    sink = sink_of(tmp_path)
    for r in ({"model_id": "m", "task_id": None, "contexts": [{"document_id": "d1"}]},
              {"model_id": "m", "task_id": "t1", "contexts": [{"document_id": ""}]},
              {"model_id": "m", "task_id": "t1", "contexts": "d1"},
              {"model_id": "other", "task_id": "t1", "contexts": [{"document_id": "d2"}]}):
        sink.add(r)
    blocks = sink.blocks()
    assert blocks["m"]["without_ids"] == 3 and blocks["m"]["all"]["scored"] == 0  # a model with nothing scored
    assert blocks["other"]["without_ids"] == 0 and blocks["other"]["all"]["Recall@1"] == 1.0


def test_mtrag_rounding_and_identical_ids_as_asked(tmp_path):
    text = BEIR + "t1\td2\t1\nt1\tt1\t1\n"
    recs = [{"model_id": "m", "task_id": "t1", "contexts": [{"document_id": "t1"}, {"document_id": "x"},
                                                            {"document_id": "d2"}]}]
    plain, rounded, kept = (sink_of(tmp_path, text, **c) for c in ({}, {"mtrag_rounding": True},
                                                                   {"keep_identical_ids": True}))
    for sink in (plain, rounded, kept):
        sink.conf["k"] = [3]
        for r in recs:
            sink.add(r)
    ndcg = plain.blocks()["m"]["collections"]["None"]["nDCG@3"]  # t1 itself dropped: d2 at rank 2
    assert ndcg == pytest.approx(0.38685280723454163) and ndcg != round(ndcg, 5)  # the ideal holds t1 too
    assert rounded.blocks()["m"]["collections"]["None"]["nDCG@3"] == round(ndcg, 5)
    assert kept.blocks()["m"]["all"]["Recall@3"] == 1.0 and plain.blocks()["m"]["all"]["Recall@3"] == 0.5


def test_the_files_are_written_in_the_run_folder_for_a_person_to_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    sink = sink_of(out, BEIR + "t0\td\t1\n")
    for t in range(1, 8):  # seven tasks without qrels: five named, the rest in retrieval.json
        sink.add({"model_id": "m", "task_id": f"t{t}", "contexts": [{"document_id": "d"}]})
    paths = sink.write()
    assert paths == [str(out / "retrieval.json"), str(out / "retrieval.md")]
    assert open(paths[0]).read().startswith('{\n  "m": {\n    "queries"')
    md = open(paths[1]).read()
    assert md.startswith("## m\n") and md.endswith("t5 and 2 more (retrieval.json)\n")


def test_check_names_the_extra_and_lets_a_run_without_fill_go(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from ragscale import extras
    from ragscale.report.qrels_sink import check

    q = tmp_path / "q.tsv"
    q.write_text(BEIR + "t\td\t1\n")
    settings = SimpleNamespace(qrels={"file": str(q), "k": [1], "measures": ["Recall"], "fill": None})
    check(settings, ["answered"])  # no fill: UMBRELA's grades are not needed
    check(SimpleNamespace(qrels={**settings.qrels, "fill": "umbrela"}), ["umbrela_scores", "answered"])
    check(SimpleNamespace(qrels=None), [])
    with pytest.raises(UserError) as e:
        check(SimpleNamespace(qrels={**settings.qrels, "fill": "umbrela"}), ["answered"])
    assert str(e.value) == ("qrels.fill=umbrela fills the qrels' holes with UMBRELA's grades: add the retrieval step "
                            "(e.g. +scenario=trec steps=[retrieval])")
    monkeypatch.setattr(extras, "missing", lambda name: "pytrec_eval" if name == "qrels" else None)
    with pytest.raises(UserError) as e:
        check(settings, ["answered"])
    assert str(e.value) == f"qrels.file needs pytrec_eval: {extras.install_hint('qrels')}"
