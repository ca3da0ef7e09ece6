"""What ``read_record`` keeps of a line read through the user's columns, how another package's
reader is used (answers, warnings), RAGAS references given as a list, and the passages a run
without an answer still needs (ragscale.record)."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import RecordError
from ragscale.record import Reader, answer_of, extract_fields, output_line, read_record
from ragscale.registry import REGISTRY


def read(line, **kw):
    kw.setdefault("need_targets", True)
    return read_record(line, key="k", model_id="file-model", task_id=None, source_file="in.jsonl", source_line=2, **kw)


def test_a_mapped_model_column_wins_over_a_stale_model_id_key_in_the_output():
    line = '{"system":"m1","model_id":"old","predictions":[{"text":"a"}],"targets":[{"text":"b"}]}'
    rec = read(line, columns={"model_id": "system"})
    assert rec.error is None and rec.model_id == "m1" and not rec.input_has_model_id
    assert rec.input_json == '{"system": "m1", "predictions": [{"text": "a"}], "targets": [{"text": "b"}]}'
    out = json.loads(output_line(rec.to_row()))
    assert out["model_id"] == "m1" and out["system"] == "m1"


def test_a_line_read_through_other_columns_is_kept_as_written():
    line = '{"task_id":7,"question":"q?","output":"an answer","reference":"ref"}'
    rec = read(line, columns={"answer": "output"})
    assert rec.error is None and rec.prediction == "an answer" and rec.task_id == "7"
    assert rec.input_json == line
    assert output_line(rec.to_row()).startswith(line[:-1] + ', "model_id": "file-model", ')


def test_a_ragas_reference_list_gives_one_target_per_item():
    assert extract_fields({"response": "a", "reference": ["r1", "r2"]})["targets"] == ["r1", "r2"]
    assert extract_fields({"answer": "a", "ground_truth": ["g"]})["targets"] == ["g"]


@pytest.mark.parametrize("obj, message", [
    ({"response": "a", "reference": ["r1", " "]}, "reference[1] is empty"),
    ({"answer": "a", "ground_truth": ["g", 3]}, "ground_truth[1] must be a string, got int"),
    ({"response": "a", "reference": [None]}, "no reference[0]"),
])
def test_a_bad_item_of_a_ragas_reference_list_is_named(obj, message):
    with pytest.raises(RecordError) as e:
        extract_fields(obj)
    assert e.value.stage == "input" and e.value.message == message


def test_a_passage_without_text_fails_a_run_without_answers_that_reads_passages():
    line = '{"task_id":"t","contexts":[{"document_id":"d1"}]}'
    assert json.loads(read(line, need_targets=False, need_answer=False).error) == {
        "stage": "input", "message": "no contexts[0].text"}
    rec = read(line, need_targets=False, need_answer=False, need_passages=False)
    assert rec.error is None and rec.passages == [""] and rec.prediction == ""


@pytest.fixture
def said_reader(monkeypatch):
    """Another package's layout: ``said`` is the answer; ``refs`` required when targets are."""

    def fields(obj, need_targets=True):
        if not isinstance(obj.get("said"), str):
            raise RecordError("input", "no 'said'")
        if need_targets and not obj.get("refs"):
            raise RecordError("input", "no 'refs'")
        return {"prediction": obj["said"], "targets": list(obj.get("refs") or []), "passages": [],
                "answerability": None, "warnings": tuple(obj.get("notes") or ())}

    reader = Reader("zz_said", lambda o: "said" in o or "notes" in o, fields)
    monkeypatch.setitem(REGISTRY.table("reader"), "zz_said", reader)
    return reader


def test_the_answer_of_another_layout_is_read_without_needing_targets(said_reader):
    assert answer_of({"said": "hello"}) == "hello"
    assert answer_of({"said": "hello", "refs": ["r"]}) == "hello"


def test_another_layout_that_refuses_the_record_has_no_answer(said_reader):
    assert answer_of({"notes": ["n"]}) is None


def test_a_readers_warnings_become_the_records_list_of_warnings(said_reader):
    rec = read('{"said": "hi", "refs": ["r"], "notes": ["short answer", "no passages"]}')
    assert rec.error is None and rec.prediction == "hi" and rec.targets == ["r"]
    assert rec.warnings == ["short answer", "no passages"]
    assert rec.to_row()["warnings"] == ["short answer", "no passages"]
