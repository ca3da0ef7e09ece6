"""Retrieval records in a run (MT-RAG's task A, issue 36): a record without ``predictions`` is
read when no chosen metric reads the answer (a ``qrels.file`` run, UMBRELA's grades), each record
gets its own figures against the qrels (``ragscale.details.qrels`` in records.jsonl, the figures
retrieval.json gives its query), and ``+scenario=mtrag_retrieval`` plans on the bundled sample."""

from __future__ import annotations

import json
import os

import pytest

from ragscale.errors import UserError
from ragscale.io.check import check_fields
from ragscale.io.inputs import resolve_inputs, scan
from ragscale.metrics.registry import field_needs, needs_field
from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
from ragscale.pipeline.stage import to_rows
from ragscale.record import RecordError, extract_fields, read_record
from ragscale.row import detail

BEIR = "query-id\tcorpus-id\tscore\n"


def task_a(task, docs, collection="c", model=None, **more):
    """An MT-RAG retrieval record: no predictions, no targets."""
    return {**({"model_id": model} if model else {}), "task_id": task, "Collection": collection,
            "input": [{"speaker": "user", "text": f"question of {task}"}],
            "contexts": [{"document_id": d, "text": f"passage {d}", "score": 10.0 - i} for i, d in enumerate(docs)],
            **more}


def jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


# ---------------------------------------------------------------- which metrics read the answer


def test_umbrelas_grades_and_what_they_derive_read_no_answer_and_the_others_do():
    assert not needs_field(["umbrela_scores", "umbrela_mean", "P@5", "AP@10", "MRR"], "answer")
    assert not needs_field([], "answer")  # a qrels-only run
    for m in ("RougeL_stemFalse", "exact_match", "RL_F", "nuggets_all", "citation_f1", "answered"):
        assert needs_field(["umbrela_scores", m], "answer"), m


# ---------------------------------------------------------------- reading a record without an answer


def test_a_record_without_predictions_is_read_when_no_answer_is_needed():
    rec = task_a("conv::1", ["d1", "d2"])
    fields = extract_fields(rec, need_targets=False, need_answer=False)
    assert fields["prediction"] == "" and fields["passages"] == ["passage d1", "passage d2"]
    with pytest.raises(RecordError, match="record has no 'predictions'"):
        extract_fields(rec, need_targets=False)


def test_a_record_with_an_answer_reads_it_whether_or_not_it_is_needed():
    rec = {**task_a("t", ["d1"]), "predictions": [{"text": "an answer"}]}
    assert extract_fields(rec, need_targets=False, need_answer=False)["prediction"] == "an answer"
    with pytest.raises(RecordError, match=r"predictions\[0\]\.text is empty"):  # an empty answer is still bad
        extract_fields({**rec, "predictions": [{"text": ""}]}, need_targets=False, need_answer=False)


def test_passages_without_texts_are_read_only_when_no_metric_reads_them():
    rec = {"task_id": "t", "contexts": [{"document_id": "d1", "score": 3.0}, {"document_id": "d2", "text": "kept"}]}
    fields = extract_fields(rec, need_targets=False, need_answer=False, need_passages=False)
    assert fields["passages"] == ["", "kept"]
    # a passage that is no object (a bare id, a number) is a passage without text too
    bare = {**rec, "contexts": [7, None, {"document_id": "d3", "text": "   "}, {"text": "kept"}]}
    assert extract_fields(bare, need_targets=False, need_answer=False, need_passages=False)["passages"] == \
        ["", "", "", "kept"]
    with pytest.raises(RecordError, match=r"no contexts\[0\]\.text"):  # UMBRELA reads them: still an error
        extract_fields(rec, need_targets=False, need_answer=False)
    with pytest.raises(RecordError, match="no answer: the record has none of"):  # a generation run reads the answer
        extract_fields(rec, need_targets=False, need_passages=False)


def test_read_record_keeps_the_input_and_passages_of_a_retrieval_record():
    raw = json.dumps(task_a("conv::2", ["d1"]))
    kw = dict(key="k:1", model_id="bm25", task_id=None, source_file="/d/a.jsonl", source_line=1, need_targets=False)
    rec = read_record(raw, need_answer=False, **kw)
    assert rec.error is None and rec.prediction == "" and rec.task_id == "conv::2" and rec.passages == ["passage d1"]
    assert json.loads(read_record(raw, **kw).error)["message"].startswith("record has no 'predictions'")
    columns = {"answer": "generated"}  # a named answer column that is absent: no error when no answer is read
    assert read_record(raw, need_answer=False, columns=columns, **kw).error is None
    assert "no answer" in json.loads(read_record(raw, columns=columns, **kw).error)["message"]


def test_the_input_check_passes_a_retrieval_file_only_when_no_answer_is_needed(tmp_path):
    files = resolve_inputs(jsonl(tmp_path / "bm25.jsonl", [task_a("t1", ["d1"]), task_a("t2", ["d2"])]))
    retrieval = ["umbrela_scores", "P@5"]
    check_fields(files, field_needs(retrieval), needs_field(retrieval, "answer"))  # the passages are seen
    check_fields(files, {}, False)
    with pytest.raises(UserError, match="no record has an answer"):
        check_fields(files, field_needs(["RougeL_stemFalse"]), needs_field(["RougeL_stemFalse"], "answer"))


# ---------------------------------------------------------------- each record's figures


def test_record_figures_are_the_per_query_figures_of_score_collections():
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    from ragscale.metrics.qrels_retrieval import record_figures, run_of, score_collections

    qrels = {"a": {"t1": {"d1": 1, "d2": 2}, "t2": {"d3": 1}}, "b": {"t3": {"d5": 1, "d6": 0}}}
    runs = {"m1": [task_a("t1", ["d2", "d9", "d1"], "coll-a"), task_a("t2", ["d4"], "coll-a"),
                   task_a("t3", ["d6", "d5"], "coll-b"), task_a("t4", ["d1"], "coll-b")],
            "m2": [task_a("t1", ["d1"], "coll-a"), task_a("t2", [], "coll-a"), task_a("t3", ["d5"], "coll-b"),
                   task_a("t9", ["d1"], "other")]}
    mixed = [r for pair in zip(runs["m1"], runs["m2"]) for r in pair]  # one query twice in a batch
    got = record_figures(qrels, mixed, [1, 3], ["Recall", "nDCG", "MAP", "P", "MRR"])
    for model, recs in runs.items():
        run, coll = run_of(recs)
        per_query = score_collections(qrels, run, coll, [1, 3], ["Recall", "nDCG", "MAP", "P", "MRR"])["queries"]
        mine = [g for r, g in zip(mixed, got) if r in recs]
        assert mine == [per_query.get(r["task_id"]) for r in recs]
    assert got[0]["nDCG@1"] == 1.0 and got[1]["nDCG@1"] == 0.5  # t1: m1 ranks d2 (grade 2) first, m2 d1 (grade 1)
    assert [g is None for g in got] == [False, False, False, False, False, False, True, True]  # t4, t9: no qrels


def test_record_figures_drop_a_passage_whose_id_is_its_querys_unless_asked_to_keep_it():
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    from ragscale.metrics.qrels_retrieval import record_figures

    qrels = {None: {"t1": {"d1": 1}}}  # MT-RAG's script: ignore_identical_ids
    rec = [{"task_id": "t1", "contexts": [{"document_id": "t1", "score": 2}, {"document_id": "d1", "score": 1}]}]
    assert record_figures(qrels, rec, [1], ["Recall"]) == [{"Recall@1": 1.0}]  # t1 dropped: d1 first
    assert record_figures(qrels, rec, [1], ["Recall"], True) == [{"Recall@1": 1.0}]
    assert record_figures(qrels, rec, [1], ["Recall"], False) == [{"Recall@1": 0.0}]  # t1 first, not relevant


def test_record_figures_score_every_record_after_one_without_qrels_in_one_evaluation_per_round(monkeypatch):
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    from ragscale.metrics import qrels_retrieval

    calls = []
    real = qrels_retrieval.evaluate
    monkeypatch.setattr(qrels_retrieval, "evaluate", lambda q, run, *a: calls.append(sorted(run)) or real(q, run, *a))
    qrels = {None: {f"t{i}": {"d": 1} for i in range(3)}}
    recs = [task_a("none", ["d"])] + [task_a(f"t{i}", ["d"] if m == "a" else ["x", "d"]) for m in "ab" for i in range(3)]
    got = qrels_retrieval.record_figures(qrels, recs, [1], ["Recall"])
    assert got == [None] + [{"Recall@1": 1.0}] * 3 + [{"Recall@1": 0.0}] * 3
    assert calls == [["t0", "t1", "t2"], ["t0", "t1", "t2"]]  # a round per model here: a query once in each


def test_a_record_that_cannot_be_scored():
    from ragscale.metrics.qrels_retrieval import retrieval_record

    assert retrieval_record(task_a("t", ["d1"]), None) is None
    assert retrieval_record({"contexts": "d1"}, "t") is None
    assert retrieval_record({"contexts": [{"document_id": ""}]}, "t") is None
    assert retrieval_record({"contexts": ["text"]}, "t") is None
    assert retrieval_record({"contexts": [{"document_id": 7, "score": True}], "Collection": "c"}, "t") == \
        {"task_id": "t", "Collection": "c", "contexts": [{"document_id": 7, "score": None}]}


def test_the_users_column_for_the_passages_is_read(tmp_path):
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    from ragscale.metrics.qrels_retrieval import retrieval_record
    from ragscale.report.qrels_sink import QrelsSink

    rec = {"model_id": "m", "task_id": "t1", "docs": [{"document_id": "d2", "score": 1.0}], "contexts": "not these"}
    assert retrieval_record(rec, "t1", {"contexts": "docs"})["contexts"] == [{"document_id": "d2", "score": 1.0}]
    assert retrieval_record(rec, "t1") is None
    q = tmp_path / "q.tsv"
    q.write_text(BEIR + "t1\td2\t1\n")
    sink = QrelsSink(str(tmp_path), {"file": str(q), "k": [1], "measures": ["Recall"]}, {"contexts": "docs"})
    sink.add(rec)
    assert sink.blocks()["m"]["all"]["Recall@1"] == 1.0 and sink.blocks()["m"]["without_ids"] == 0
    files = resolve_inputs(jsonl(tmp_path / "run.jsonl", [rec]), {"contexts": "docs"})
    rows = to_rows(load_and_lexical(pointer_table(list(scan(files, with_tasks=False))), files=files, metrics=[],
                                    need_targets=False, need_answer=False, need_passages=False,
                                    qrels={"file": str(q), "k": [1], "measures": ["Recall"]}))
    assert detail(rows[0]["details"], "qrels") == {"Recall@1": 1.0}


def test_the_read_stage_gives_each_record_its_figures_or_says_why_not(tmp_path):
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    q = tmp_path / "q.tsv"
    q.write_text(BEIR + "t1\td1\t1\nt1\td2\t1\nt2\td3\t1\n")
    records = [task_a("t1", ["d1", "d9"], model="m"), task_a("t2", ["d4", "d3"], model="m"),
               task_a("t3", ["d1"], model="m"), {**task_a("t1", []), "model_id": "n", "contexts": ["a text"]},
               {"model_id": "m", "task_id": "t5", "predictions": []}]
    files = resolve_inputs(jsonl(tmp_path / "run.jsonl", records))
    conf = {"file": str(q), "k": [1, 2], "measures": ["Recall", "MRR"], "keep_identical_ids": False}
    rows = to_rows(load_and_lexical(pointer_table(list(scan(files, with_tasks=False))), files=files, metrics=[],
                                    need_targets=False, need_answer=False, qrels=conf))
    figures = [detail(r["details"], "qrels") for r in rows]
    assert figures[:2] == [{"Recall@1": 0.5, "Recall@2": 0.5, "MRR": 1.0}, {"Recall@1": 0.0, "Recall@2": 1.0, "MRR": 0.5}]
    assert figures[2:] == [None, None, None]
    assert rows[2]["warnings"] == ["its retrieval is not scored against the qrels (its query has no qrels): "
                                   "retrieval.json counts it"]
    assert rows[3]["warnings"] == ["its retrieval is not scored against the qrels (its contexts are not passages "
                                   "with a document_id each): retrieval.json counts it"]
    assert rows[4]["error"] is None and rows[4]["warnings"] == rows[3]["warnings"]  # no contexts at all
    assert all(not r["warnings"] for r in rows[:2])
    plain = to_rows(load_and_lexical(pointer_table(list(scan(files, with_tasks=False))), files=files, metrics=[],
                                     need_targets=False, need_answer=False))
    assert all(detail(r["details"], "qrels") is None and not r["warnings"] for r in plain)


def test_the_qrels_are_read_once_per_process_until_the_file_changes(tmp_path):
    from ragscale.io.qrels import qrels_once, qrels_sha256

    q = tmp_path / "q.tsv"
    q.write_text(BEIR + "t1\td1\t1\n")
    first = qrels_once(str(q))
    assert qrels_once(str(q)) is first and first == {None: {"t1": {"d1": 1}}}
    sha = qrels_sha256(str(q))
    q.write_text(BEIR + "t1\td1\t1\nt2\td2\t2\n")
    assert qrels_once(str(q)) == {None: {"t1": {"d1": 1}, "t2": {"d2": 2}}}
    assert qrels_sha256(str(q)) != sha and qrels_sha256({"c": str(q)}) == {"c": qrels_sha256(str(q))}
    assert qrels_once({"c": str(q)}) == {"c": {"t1": {"d1": 1}, "t2": {"d2": 2}}}
    q.write_text(BEIR + "t3\td3\t1\n")  # a collection's file changed: read again
    assert qrels_once({"c": str(q)}) == {"c": {"t3": {"d3": 1}}}


def test_a_run_scores_against_qrels_only_with_a_qrels_file():
    from types import SimpleNamespace

    from ragscale.io.qrels import run_qrels

    assert run_qrels(None) is None and run_qrels(object()) is None  # settings without qrels
    assert run_qrels(SimpleNamespace(qrels=None)) is None and run_qrels(SimpleNamespace(qrels={"file": None})) is None
    assert run_qrels(SimpleNamespace(qrels={"file": "q.tsv", "k": [1]})) == {"file": "q.tsv", "k": [1]}


# ---------------------------------------------------------------- the scenario and the plan


def test_the_mtrag_retrieval_scenario_plans_on_its_bundled_sample_and_qrels():
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    from ragscale.plan import DATA_DIR, compose, plan_run

    plan = plan_run(compose(["+scenario=mtrag_retrieval"]))
    assert plan.metrics == () and plan.steps == () and plan.stages == frozenset({"lexical"})
    assert plan.reports.qrels["file"] == os.path.join(DATA_DIR, "mtrag_retrieval_qrels.tsv")
    assert plan.files[0].path == os.path.join(DATA_DIR, "mtrag_retrieval_sample.jsonl")
    fp = plan.fingerprint()
    assert fp["qrels"]["k"] == [1, 3, 5, 10] and fp["qrels"]["measures"] == ["Recall", "nDCG"]
    assert len(fp["qrels"]["sha256"]) == 64


def test_the_fingerprint_changes_with_the_qrels_and_is_absent_without_them(tmp_path):
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    from ragscale.plan import compose, plan_run

    q = tmp_path / "q.tsv"
    q.write_text(BEIR + "conv-api<::>1\tapi-001\t1\n")
    fp = [plan_run(compose(["+scenario=mtrag_retrieval", f"qrels.file={q}", *o])).fingerprint()["qrels"]
          for o in ([], ["qrels.k=[1]"], ["qrels.keep_identical_ids=true"])]
    assert fp[0]["k"] != fp[1]["k"] and fp[0]["keep_identical_ids"] is False and fp[2]["keep_identical_ids"] is True
    q.write_text(BEIR + "conv-api<::>1\tapi-002\t1\n")
    assert plan_run(compose(["+scenario=mtrag_retrieval", f"qrels.file={q}"])).fingerprint()["qrels"]["sha256"] != \
        fp[0]["sha256"]
    assert "qrels" not in plan_run(compose(["+scenario=custom", "limit=1"])).fingerprint()


def test_a_run_with_neither_metrics_nor_qrels_is_refused():
    from ragscale.plan import compose, plan_run

    with pytest.raises(UserError, match="no metrics enabled for the chosen steps"):
        plan_run(compose(["+scenario=mtrag_retrieval", "qrels.file=null"]))


def test_generation_metrics_on_retrieval_records_are_refused_in_one_line():
    from ragscale.plan import compose, plan_run

    with pytest.raises(UserError, match="no record has an answer"):
        plan_run(compose(["+scenario=custom", "input=" + os.path.join(
            os.path.dirname(__import__("ragscale").__file__), "data", "mtrag_retrieval_sample.jsonl")]))
