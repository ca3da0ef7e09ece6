"""The read stage (ragscale.pipeline.cpu_stages.load_and_lexical) as the pipeline runs it: which
record each row is (key, model, task), which stage an error names, what the lexical functions
are given, when a record needs a reference, an answer or passage texts, which custom metrics and
fact checks run, and the batch's counters. Issue 37: behaviour the mutation run found unstated."""

from __future__ import annotations

import json

import pytest

from ragscale.io.inputs import PointerArray, resolve_inputs, scan
from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
from ragscale.pipeline.stage import to_rows
from ragscale.row import detail, row_schema


def mtrag(model, task, answer="Paris is the capital.", targets=("Paris",), contexts=("Paris is in France.",), **more):
    rec = {"model_id": model, "task_id": task, "input": [{"speaker": "user", "text": "Capital of France?"}],
           "predictions": [{"text": answer}], "targets": [{"text": t} for t in targets],
           "contexts": [{"document_id": f"d{i}", "text": c} for i, c in enumerate(contexts)]}
    rec.update(more)
    return rec


def jsonl(path, *records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def read(path, metrics, with_tasks=False, **kw) -> list[dict]:
    files = resolve_inputs(path)
    pointers = PointerArray.scan(files, with_tasks=True) if with_tasks else list(scan(files, with_tasks=False))
    return to_rows(load_and_lexical(pointer_table(pointers), files=files, metrics=metrics, **kw))


def error(row) -> dict | None:
    return None if row["error"] is None else json.loads(row["error"])


def test_each_row_is_its_record_key_model_and_task(tmp_path):
    p = jsonl(tmp_path / "sys-a.jsonl", mtrag("m1", "t1"), {k: v for k, v in mtrag(None, None).items()
                                                          if k not in ("model_id", "task_id")})
    rows = read(p, ["exact_match"], with_tasks=True)
    tag = resolve_inputs(p)[0].tag
    assert [(r["key"], r["model_id"], r["task_id"], r["source_line"]) for r in rows] == \
        [(f"{tag}:1", "m1", "t1", 1), (f"{tag}:2", "sys-a", None, 2)]  # no model id: the file's name


def test_a_repeated_model_and_task_is_an_input_error(tmp_path):
    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1"), mtrag("m1", "t1", answer="again"))
    rows = read(p, ["exact_match"], with_tasks=True)
    assert rows[0]["error"] is None and error(rows[1])["stage"] == "input"
    assert rows[1]["metrics"] == {}


def test_a_lexical_function_that_raises_fails_its_record_at_the_lexical_stage(tmp_path):
    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1", answer="fine"), mtrag("m1", "t2", answer="boom"))

    def fragile(prediction, targets, passages):
        if prediction == "boom":
            raise ValueError("cannot score boom")
        return [len(passages)]

    rows = read(p, ["Length"], lexical={"Length": fragile}, schema=row_schema(["Length"]))
    assert rows[0]["error"] is None and rows[0]["metrics"] == {"Length": [1]}  # the passages are given
    assert error(rows[1]) == {"stage": "lexical", "message": "ValueError: cannot score boom"}
    assert rows[1]["metrics"] == {}


def test_a_lexical_value_of_the_wrong_type_fails_its_record_naming_the_stage(tmp_path):
    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1"))
    rows = read(p, ["Length"], lexical={"Length": lambda a, t, c: "long"}, schema=row_schema(["Length"]))
    assert error(rows[0])["stage"] == "lexical" and "'Length'" in error(rows[0])["message"]


def test_the_functions_given_are_the_ones_computed(tmp_path):
    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1"))
    rows = read(p, ["Length", "Recall"], lexical={"Length": lambda a, t, c: [7]}, schema=row_schema(["Length", "Recall"]))
    assert rows[0]["metrics"] == {"Length": [7]}
    default = read(p, ["Length", "Recall"])  # no functions given: the catalog's
    assert set(default[0]["metrics"]) == {"Length", "Recall"} and default[0]["metrics"]["Length"] != [7]


def test_a_reference_is_needed_only_by_the_metrics_that_read_it(tmp_path):
    p = jsonl(tmp_path / "a.jsonl", {k: v for k, v in mtrag("m1", "t1").items() if k != "targets"})
    assert error(read(p, ["RougeL_stemFalse"])[0])["message"] == \
        "record has no 'targets' (a non-empty list of {'text': ...})"
    assert read(p, ["RougeL_stemFalse"], need_targets=False)[0]["error"] is None  # the driver's say wins
    rows = read(p, ["exact_match"])  # a custom metric: null, with a warning
    assert rows[0]["error"] is None and rows[0]["metrics"]["exact_match"] is None
    assert rows[0]["warnings"] == ["no reference answer: the reference-based custom metrics are null"]


def test_an_answer_and_passage_texts_are_needed_unless_the_run_says_otherwise(tmp_path):
    rec = {"task_id": "t1", "contexts": [{"document_id": "d1", "score": 1.0}]}
    p = jsonl(tmp_path / "a.jsonl", rec)
    assert error(read(p, [], need_targets=False)[0])["message"].startswith("no answer: the record has none of")
    assert error(read(p, [], need_targets=False, need_answer=False)[0])["message"] == "no contexts[0].text"
    row = read(p, [], need_targets=False, need_answer=False, need_passages=False)[0]
    assert row["error"] is None and row["prediction"] == "" and row["passages"] == [""]


def test_custom_metrics_run_only_when_chosen_with_the_expectations_given(tmp_path):
    from ragscale.io.expectations import load_expectations

    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1"))
    exp = tmp_path / "exp.yaml"
    exp.write_text("version: 1\nquestions:\n  - id: t1\n    facts:\n      - {name: says_paris, any: [Paris]}\n")
    rows = read(p, ["Length"])
    assert set(rows[0]["metrics"]) == {"Length"}
    checked = read(p, ["exact_match", "fact_score"], expectations=load_expectations(str(exp)))
    assert checked[0]["metrics"]["exact_match"] in (0.0, 1.0) and checked[0]["metrics"]["fact_score"] == 1.0
    assert checked[0]["warnings"] == []  # it has a reference
    assert detail(checked[0]["details"], "fact_checks") == {"question": "t1", "facts": {"says_paris": True},
                                                          "cannot_calculate": []}
    assert set(checked[0]["details"]) == {"fact_checks"}
    none = read(p, ["fact_score"])[0]  # no expectations: no fact checks
    assert none["metrics"]["fact_score"] is None and none["details"] == {}


def test_fact_checks_find_a_question_by_its_text_when_its_id_is_unknown(tmp_path):
    from ragscale.io.expectations import load_expectations

    exp = tmp_path / "exp.yaml"
    exp.write_text("version: 1\nquestions:\n  - question: Capital of France?\n    facts:\n"
                   "      - {name: says_lyon, any: [Lyon]}\n")
    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t-unknown"))
    row = read(p, ["fact_score"], expectations=load_expectations(str(exp)))[0]
    assert row["metrics"]["fact_score"] == 0.0 and detail(row["details"], "fact_checks") is not None


def test_without_a_reference_only_the_reference_based_custom_metrics_warn(tmp_path):
    p = jsonl(tmp_path / "a.jsonl", {k: v for k, v in mtrag("m1", "t1", answer="See [1].").items() if k != "targets"})
    rows = read(p, ["source_citation", "fact_score"])
    assert rows[0]["error"] is None and rows[0]["warnings"] == []
    assert rows[0]["metrics"]["source_citation"] is not None


def test_the_batch_counts_its_read_time_once_on_its_first_row(tmp_path):
    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1"), mtrag("m1", "t2"))
    rows = read(p, ["Length"])
    stats = json.loads(rows[0]["stats"])
    assert set(stats) == {"time_lexical_s"} and 0 < stats["time_lexical_s"] < 60 and rows[1]["stats"] is None


def test_identical_ids_are_kept_when_the_qrels_settings_say_so(tmp_path):
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    q = tmp_path / "q.tsv"
    q.write_text("query-id\tcorpus-id\tscore\nt1\td1\t1\n")
    rec = {"task_id": "t1", "contexts": [{"document_id": "t1", "score": 2.0}, {"document_id": "d1", "score": 1.0}]}
    p = jsonl(tmp_path / "a.jsonl", rec)
    kw = dict(need_targets=False, need_answer=False, need_passages=False)
    conf = {"file": str(q), "k": [1], "measures": ["Recall"]}
    assert detail(read(p, [], qrels=conf, **kw)[0]["details"], "qrels") == {"Recall@1": 1.0}  # t1 dropped
    kept = read(p, [], qrels={**conf, "keep_identical_ids": True}, **kw)
    assert detail(kept[0]["details"], "qrels") == {"Recall@1": 0.0}


def test_a_metric_nulled_for_a_missing_model_says_why_on_every_live_record(tmp_path):
    from ragscale.pipeline.cpu_stages import null_metric

    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1"), mtrag("m1", "t1"), mtrag("m1", "t2"))
    files = resolve_inputs(p)
    batch = load_and_lexical(pointer_table(PointerArray.scan(files, with_tasks=True)), files=files, metrics=["hhem"],
                             schema=row_schema(["hhem"]))
    rows = to_rows(null_metric(batch, metric="hhem", judge="hhem", reason="no HHEM weights here"))
    assert [r["error"] is None for r in rows] == [True, False, True]  # the repeat (second) failed at input
    for r in (rows[0], rows[2]):
        assert r["metrics"] == {"hhem": None}
        assert [json.loads(e) for e in r["judge_errors"]] == [{"judge": "hhem", "reason": "no HHEM weights here",
                                                               "undefined": True}]
    assert rows[1]["metrics"] == {} and not rows[1]["judge_errors"]
    assert [r["key"] for r in rows] == [r["key"] for r in to_rows(batch)]


def test_the_stages_tables_have_their_declared_schemas(tmp_path):
    from ragscale.pipeline.cpu_stages import LINE_SCHEMA, POINTER_SCHEMA, output_lines

    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1"), mtrag("m1", "t1"))
    files = resolve_inputs(p)
    pointers = pointer_table(PointerArray.scan(files, with_tasks=True))
    assert pointers.schema == POINTER_SCHEMA and pointer_table(list(scan(files, with_tasks=False))).schema == POINTER_SCHEMA
    lines = output_lines(load_and_lexical(pointers, files=files, metrics=["Length"]))
    assert lines.schema == LINE_SCHEMA
    assert lines.column("errored").to_pylist() == [False, True]  # the repeat
    assert [json.loads(x)["task_id"] for x in lines.column("line").to_pylist()] == ["t1", "t1"]


def test_the_lines_schema_holds_when_no_row_of_the_batch_has_counters(tmp_path):
    import pyarrow as pa

    from ragscale.pipeline.cpu_stages import LINE_SCHEMA, output_lines

    p = jsonl(tmp_path / "a.jsonl", mtrag("m1", "t1"))
    files = resolve_inputs(p)
    batch = load_and_lexical(pointer_table(list(scan(files, with_tasks=False))), files=files, metrics=["Length"])
    bare = batch.set_column(batch.schema.get_field_index("stats"), "stats", pa.nulls(len(batch), pa.string()))
    assert output_lines(bare).schema == LINE_SCHEMA


def test_derive_skips_a_failed_record_and_derives_the_ones_after_it(tmp_path):
    from ragscale.pipeline.cpu_stages import derive
    from ragscale.pipeline.stage import to_table

    metrics = ["umbrela_scores", "MRR"]
    (tmp_path / "a.jsonl").write_text("{not json\n" + json.dumps(mtrag("m1", "t1")) + "\n")
    files = resolve_inputs(str(tmp_path / "a.jsonl"))
    schema = row_schema(metrics)
    rows = to_rows(load_and_lexical(pointer_table(list(scan(files, with_tasks=False))), files=files, metrics=metrics,
                                    schema=schema, need_targets=False))
    assert rows[0]["error"] is not None and rows[1]["error"] is None
    rows[1]["metrics"]["umbrela_scores"] = [0, 3]
    rows[0]["stats"] = rows[1]["stats"] = None
    out = to_rows(derive(to_table(rows, schema, "judge"), metrics=metrics))
    assert out[1]["metrics"] == {"umbrela_scores": [0, 3], "MRR": 0.5} and out[0]["metrics"] == {}
    stats = json.loads(out[0]["stats"])
    assert 0 < stats["time_derive_s"] < 60


def test_a_panel_judge_without_details_from_any_member_has_none():
    from ragscale.pipeline.cpu_stages import panel_details

    details = {"umbrela@a": '{"1": 2}', "other": "{}"}
    assert panel_details(details, {"idk": ["a", "b"], "umbrela": ["b", "a"]}) == {**details, "umbrela": '{"1": 2}'}
    assert panel_details(details, {}) is details and panel_details(None, {"idk": ["a"]}) is None
