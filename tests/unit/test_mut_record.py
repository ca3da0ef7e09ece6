"""The record contract that mutation testing found unpinned (make mutate): what ``read_record``
keeps of an input line (verbatim or re-serialized, reserved keys, model/task ids, conversation,
labels, input metrics, error texts), the field extraction of MT-RAG, RAGAS and open-rag-eval
records (values and exact error messages), the helpers
(``answer_of``, ``query_of``, ``answerability_of``, ``passage_ids_of``, ``add_judge_errors``,
``error_json``) and the exact text of the output line ``output_line`` writes (non-ASCII kept
as is, metrics merged, provenance, model_id once). Everything is built in memory."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import RecordError
from ragscale.io.output_line import _finite
from ragscale.record import (
    ORAG_FORMAT,
    ROW_SCHEMA,
    _turns,
    add_judge_errors,
    answer_of,
    answerability_of,
    error_json,
    extract_fields,
    output_line,
    passage_ids_of,
    query_of,
    read_record,
)

MTRAG = {"predictions": [{"text": "the answer"}], "targets": [{"text": "ref"}], "contexts": [{"text": "p1"}]}


def read(raw, *, model_id="m", task_id="t0", need_targets=True):
    """read_record with fixed provenance."""
    if not isinstance(raw, str):
        raw = json.dumps(raw, ensure_ascii=False)
    return read_record(raw, key="k:1", model_id=model_id, task_id=task_id, source_file="f.jsonl", source_line=3,
                       need_targets=need_targets)


def raises(obj, **kw):
    """The RecordError extract_fields raises for obj."""
    with pytest.raises(RecordError) as e:
        extract_fields(obj, **kw)
    return e.value


# --- _finite --------------------------------------------------------------------------------------


def test_finite_keeps_clean_text_verbatim():
    """Text without NaN/Infinity comes back byte for byte (not re-serialized)."""
    assert _finite('{"a":1,"b":[2]}', "{}") == '{"a":1,"b":[2]}'
    assert _finite(None, "[]") == "[]" and _finite("", "{}") == "{}"


def test_finite_replaces_infinity_and_keeps_non_ascii():
    """Infinity and NaN become null; non-ASCII text stays unescaped."""
    assert _finite('{"a": Infinity, "b": -Infinity}', "{}") == '{"a": null, "b": null}'
    assert _finite('{"a": NaN, "é": "ü"}', "{}") == '{"a": null, "é": "ü"}'


# --- error_json / add_judge_errors ----------------------------------------------------------------


def test_error_json_exact_text():
    """The error object is {stage, message} with non-ASCII kept."""
    assert error_json("judge", "café") == '{"stage": "judge", "message": "café"}'


def test_add_judge_errors_appends_to_existing():
    """New entries extend the existing list, each serialised once with non-ASCII kept."""
    row = {"judge_errors": [json.dumps({"judge": "a", "reason": "x"})]}
    add_judge_errors(row, [{"judge": "b", "reason": "é"}])
    assert row["judge_errors"] == ['{"judge": "a", "reason": "x"}', '{"judge": "b", "reason": "é"}']


def test_add_judge_errors_starts_a_list_and_ignores_empty():
    """No errors yet: a new list; no entries: the list stays empty."""
    row = {"judge_errors": None}
    add_judge_errors(row, iter([]))
    assert row == {"judge_errors": []}
    add_judge_errors(row, iter([{"judge": "b", "reason": "r"}]))
    assert [json.loads(e) for e in row["judge_errors"]] == [{"judge": "b", "reason": "r"}]


# --- extract_fields: MT-RAG -----------------------------------------------------------------------


def test_extract_fields_rejects_non_object():
    """A non-object record: stage input and the type name in the message."""
    e = raises([1, 2])
    assert (e.stage, e.message) == ("input", "record must be a JSON object, got list")


def test_extract_fields_missing_predictions_and_targets_messages():
    """The exact messages for missing predictions and (empty or non-list) targets."""
    e = raises({"targets": [{"text": "r"}]})
    assert (e.stage, e.message) == ("input", "record has no 'predictions' (a non-empty list of {'text': ...})")
    for targets in ([], "r"):
        e = raises({"predictions": [{"text": "a"}], "targets": targets})
        assert e.message == "record has no 'targets' (a non-empty list of {'text': ...})"


def test_extract_fields_targets_optional():
    """Without need_targets, missing or non-list targets give an empty list."""
    for targets in (None, "r"):
        out = extract_fields({"predictions": [{"text": "a"}], "targets": targets}, need_targets=False)
        assert out == {"prediction": "a", "targets": [], "passages": [], "answerability": None}


def test_extract_fields_messages_name_the_bad_item():
    """A bad target or contexts value is named in the message."""
    assert raises({**MTRAG, "targets": [{"text": "ok"}, {"text": " "}]}).message == "targets[1].text is empty"
    assert raises({**MTRAG, "contexts": "p"}).message == "'contexts' must be a list, got str"


def test_extract_fields_mtrag_values():
    """Prediction, targets, passages and answerability of an MT-RAG record."""
    out = extract_fields({**MTRAG, "answerability": ["UNANSWERABLE"]})
    assert out == {"prediction": "the answer", "targets": ["ref"], "passages": ["p1"],
                   "answerability": "UNANSWERABLE"}


# --- extract_fields: RAGAS ------------------------------------------------------------------------


def test_ragas_contexts_must_be_a_list():
    """A non-list contexts value: stage input, the key and the type in the message."""
    e = raises({"response": "a", "retrieved_contexts": "p"})
    assert (e.stage, e.message) == ("input", "'retrieved_contexts' must be a list of strings, got str")


def test_ragas_messages_name_the_bad_item():
    """Empty reference, empty context and a null response name their key."""
    assert raises({"response": "a", "reference": " "}).message == "reference is empty"
    assert raises({"answer": "a", "contexts": ["p", ""]}).message == "contexts[1] is empty"
    assert raises({"response": None}).message == "no response"
    assert raises({"response": 7}).message == "response must be a string, got int"


# --- extract_fields: open-rag-eval ----------------------------------------------------------------


def test_orag_input_error_is_the_record_error():
    """The normalizer's input_error is raised as is, at stage input."""
    e = raises({"format": ORAG_FORMAT, "input_error": "row 3: bad passage id"})
    assert (e.stage, e.message) == ("input", "row 3: bad passage id")


def test_orag_answered_record():
    """An answered query run: its answer, passages (strings or {text}) and input warnings."""
    out = extract_fields({"format": ORAG_FORMAT, "generated_answer": "ans", "answer_status": "ok",
                          "passages": [{"id": "[1]", "text": "p1"}, "p2"], "warnings": ["w1"]})
    assert out == {"prediction": "ans", "targets": [], "passages": ["p1", "p2"], "answerability": None,
                   "warnings": ["w1"]}


def test_orag_unanswered_status_keeps_record_with_warning():
    """A NO_ANSWER run is kept with an empty prediction and the exact warning, even with an answer text."""
    out = extract_fields({"format": ORAG_FORMAT, "generated_answer": "text", "answer_status": "NO_ANSWER",
                          "warnings": ["w1"]})
    assert out == {"prediction": "", "targets": [], "passages": [], "answerability": None,
                   "warnings": ["w1", "no generated answer (NO_ANSWER): open-rag-eval skips this query run; "
                                      "ragscale keeps it and its answer metrics are null"]}


def test_orag_blank_answer_with_ok_status_is_unanswered():
    """A blank answer under status ok (the default) is no answer."""
    out = extract_fields({"format": ORAG_FORMAT, "generated_answer": "   "})
    assert out["prediction"] == "" and out["warnings"] == [
        "no generated answer (ok): open-rag-eval skips this query run; ragscale keeps it and its answer metrics are null"]


def test_orag_bad_passage_message():
    """An empty passage is named passages[i].text."""
    assert raises({"format": ORAG_FORMAT, "generated_answer": "a",
                   "passages": [{"text": "p"}, {"text": ""}]}).message == "passages[1].text is empty"


# --- answer_of / query_of / answerability_of / passage_ids_of -------------------------------------


def test_answer_of_orag_format_without_answer_is_none():
    """An open-rag-eval record without generated_answer has no answer, whatever else it holds."""
    assert answer_of({"format": ORAG_FORMAT, "response": "x", "predictions": [{"text": "y"}]}) is None


def test_answer_of_odd_predictions():
    """Non-list, empty or non-string predictions give None; a plain string item is the answer."""
    assert answer_of({"predictions": "abc"}) is None
    assert answer_of({"predictions": []}) is None
    assert answer_of({"predictions": [{"text": 5}]}) is None
    assert answer_of({"predictions": ["plain"]}) == "plain"
    assert answer_of({"answer": "legacy"}) == "legacy"
    assert answer_of({"response": None, "RESPONSE": "x"}) is None  # keys are case-sensitive


def test_query_of_last_user_turn_and_default():
    """The last *user* turn's text, never an agent's; nothing gives ''."""
    turns = [{"speaker": "user", "text": "q1"}, {"speaker": "agent", "text": "a1"}, "junk",
             {"speaker": "user", "text": 3}]
    assert query_of({"input": turns}) == "q1"
    assert query_of({}) == ""


def test_answerability_of_skips_empty_and_odd_candidates():
    """An empty string or a list of non-strings is skipped; no turns at all is fine."""
    assert answerability_of({"answerability": "", "enrichments": {"answerability": "ANSWERABLE"}}) == "ANSWERABLE"
    assert answerability_of({"answerability": [1], "input": []}) is None
    assert answerability_of({"input": ["not a dict"]}) is None


def test_passage_ids_of_uses_ids_only_when_they_match():
    """Passage ids come from {id} passages of the right count, else bracketed ranks."""
    obj = {"passages": [{"id": "[7]"}, {"id": 9}]}
    assert passage_ids_of(obj, 2) == ["[7]", "9"]
    assert passage_ids_of(obj, 3) == ["[1]", "[2]", "[3]"]
    assert passage_ids_of({}, 2) == ["[1]", "[2]"]


# --- _turns ---------------------------------------------------------------------------------------


def test_turns_as_strings_or_none():
    """Turns become {speaker, text} strings, a missing field None; non-object turns give None."""
    assert _turns([{"speaker": "user", "text": 5, "extra": 1}, {"text": "t"}]) == [
        {"speaker": "user", "text": "5"}, {"speaker": None, "text": "t"}]
    assert _turns([{"speaker": "user"}, "x"]) is None
    assert _turns("x") is None


# --- read_record ----------------------------------------------------------------------------------


def test_read_record_invalid_json_keeps_the_line():
    """A non-JSON line: its text under input_line (non-ASCII kept) and an input-stage error."""
    rec = read("not json é")
    assert rec.input_json == '{"input_line": "not json é"}'
    err = json.loads(rec.error)
    # issue 33: the message names the file and line (it said "line is not valid JSON: Expecting value: line 1 ...")
    assert err["stage"] == "input" and err["message"] == "f.jsonl: line 3: not valid JSON (Expecting value at column 1)"
    assert (rec.model_id, rec.task_id) == ("m", "t0")


def test_read_record_non_object_json():
    """A JSON non-object: the line under input_line and the extract_fields error."""
    rec = read("[1]")
    assert rec.input_json == '{"input_line": "[1]"}'
    assert json.loads(rec.error) == {"stage": "input", "message": "record must be a JSON object, got list"}


def test_read_record_clean_line_is_kept_verbatim():
    """A clean line is kept as written (stripped), with the passed model and task ids."""
    raw = '  {"predictions":[{"text":"a"}],  "targets":[{"text":"r"}], "contexts":["p1", {"text": "p2"}]}\n'
    rec = read(raw)
    assert rec.input_json == raw.strip() and rec.error is None
    assert (rec.model_id, rec.task_id, rec.input_has_model_id) == ("m", "t0", False)
    assert (rec.prediction, rec.targets, rec.passages, rec.passage_ids) == ("a", ["r"], ["p1", "p2"], ["[1]", "[2]"])
    assert rec.warnings == [] and rec.conversation is None and rec.input_metrics is None


def test_read_record_own_model_id_verbatim():
    """The input's own model_id wins and, verbatim, is flagged as already in input_json."""
    raw = '{"model_id":"mine", "task_id": 7, ' + json.dumps(MTRAG)[1:]
    rec = read(raw)
    assert rec.input_json == raw and rec.input_has_model_id is True
    assert (rec.model_id, rec.task_id) == ("mine", "7")


def test_read_record_own_model_id_not_verbatim():
    """With NaN in the line, the own model_id still wins but input_json is rebuilt without it."""
    raw = '{"model_id": "mine", "x": NaN, "n": "é", ' + json.dumps(MTRAG)[1:]
    rec = read(raw)
    assert rec.input_has_model_id is False and rec.model_id == "mine"
    assert rec.input_json == json.dumps({"x": None, "n": "é", **MTRAG}, ensure_ascii=False)
    assert '"n": "é"' in rec.input_json


def test_read_record_infinity_is_cleaned():
    """An Infinity token makes the input re-serialized with null."""
    rec = read('{"x": Infinity, ' + json.dumps(MTRAG)[1:])
    assert json.loads(rec.input_json)["x"] is None and "Infinity" not in rec.input_json


def test_read_record_blank_model_id_is_dropped():
    """A blank model_id in the input is not ours: the passed one is used and the key is dropped."""
    rec = read({"model_id": " ", **MTRAG})
    assert rec.model_id == "m" and rec.input_has_model_id is False
    assert rec.input_json == json.dumps(MTRAG)


def test_read_record_input_metrics_and_reserved_keys():
    """The input's metrics move to input_metrics (non-ASCII kept); reserved keys leave input_json."""
    rec = read({**MTRAG, "metrics": {"é": 1}, "error": None, "ragscale": {}})
    assert rec.input_metrics == '{"é": 1}'
    assert rec.input_json == json.dumps(MTRAG)
    assert read({**MTRAG, "metrics": {}}).input_metrics is None


def test_read_record_metrics_key_alone_is_not_verbatim():
    """A clean line whose only reserved key is metrics is rebuilt without it."""
    rec = read('{"metrics":{"R":1},' + json.dumps(MTRAG)[1:])
    assert rec.input_json == json.dumps(MTRAG) and rec.input_metrics == '{"R": 1}'


def test_read_record_task_id_from_input():
    """A task_id in the input (any type) replaces the passed one, as a string."""
    assert read({**MTRAG, "task_id": 12}).task_id == "12"
    assert read({**MTRAG, "task_id": None}).task_id == "t0"


def test_read_record_conversation_status_labels():
    """Conversation turns, query, answer_status and labels (JSON, NaN as null) are extracted."""
    turns = [{"speaker": "user", "text": "q?"}, {"speaker": "agent", "text": "a"}]
    rec = read('{"input": ' + json.dumps(turns) + ', "answer_status": "ok", "labels": {"d": NaN, "e": "x"}, '
               + json.dumps(MTRAG)[1:])
    assert rec.conversation == turns and rec.query == "q?"
    assert rec.answer_status == "ok" and rec.labels == '{"d": null, "e": "x"}'
    assert read({**MTRAG, "answer_status": 3}).answer_status is None


def test_read_record_need_targets():
    """need_targets decides whether a record without targets is an error."""
    obj = {"predictions": [{"text": "a"}]}
    assert read(obj, need_targets=False).error is None
    rec = read(obj, need_targets=True)
    assert json.loads(rec.error) == {"stage": "input",
                                     "message": "record has no 'targets' (a non-empty list of {'text': ...})"}


def test_read_record_orag_warnings_and_ids():
    """An open-rag-eval record: its warnings, answer status and passage ids land on the Record."""
    rec = read({"format": ORAG_FORMAT, "query": "q", "generated_answer": "ans", "answer_status": "ok",
                "passages": [{"id": "[4]", "text": "p"}], "warnings": ["w"]})
    assert (rec.prediction, rec.query, rec.warnings, rec.passage_ids) == ("ans", "q", ["w"], ["[4]"])


def test_to_row_has_exactly_the_schema_columns():
    """A Record's row has every column of the row schema as a worker sees it (``metric_keys`` is
    the order of ``metrics``' keys), stage columns empty."""
    row = read(MTRAG).to_row()
    assert set(row) == set(ROW_SCHEMA.names) - {"metric_keys"}
    assert (row["metrics"], row["judge_errors"], row["stats"], row["details"]) == ({}, [], None, {})


# --- output_line ----------------------------------------------------------------------------------


def base_row(**kw):
    row = {"key": "k:1", "model_id": "m", "source_file": "f", "source_line": 2, "input_json": '{"a": 1}'}
    row.update(kw)
    return row


RECORD_EMPTY = '"record": {"task_id": null, "query": null, "answer": null, "answerability": null, ' \
               '"answer_status": null, "passage_ids": null}'
PROV_EMPTY = '"ragscale": {"record_key": "k:1", "source_file": "f", "source_line": 2, ' + RECORD_EMPTY + ', ' \
             '"warnings": [], "judge_errors": [], "details": {}}}'


def test_output_line_minimal_exact():
    """No metrics/error/provenance columns: defaults written, model_id added after the input."""
    assert output_line(base_row()) == '{"a": 1, "model_id": "m", "metrics": {}, "error": null, ' + PROV_EMPTY


def test_output_line_empty_input_object():
    """An empty input object gets no leading comma; a missing input_json is an empty object."""
    expect = '{"model_id": "m", "metrics": {}, "error": null, ' + PROV_EMPTY
    assert output_line(base_row(input_json="{}")) == expect
    assert output_line(base_row(input_json=None)) == expect


def test_output_line_own_model_id_not_repeated():
    """An input that already holds its model_id gets no second one."""
    line = output_line(base_row(input_json='{"model_id": "x"}', input_has_model_id=True, model_id="x"))
    assert line == '{"model_id": "x", "metrics": {}, "error": null, ' + PROV_EMPTY


def test_output_line_metrics_merged_over_input_metrics():
    """Our metrics override the input's, the input's others are kept; non-ASCII unescaped."""
    line = output_line(base_row(input_metrics='{"é": 1, "R": 0}', metrics={"R": 0.5}))
    assert '"metrics": {"é": 1, "R": 0.5}, "error": null' in line
    assert json.loads(line)["metrics"] == {"é": 1, "R": 0.5}


def test_output_line_non_ascii_and_all_columns():
    """Key, source file, model id, the record's fields, warnings, judge errors, details and error written as is."""
    row = base_row(key="ké", source_file="fé", model_id="mé", warnings=["wé"], error='{"stage": "s", "message": "x"}',
                   judge_errors=['{"judge": "j", "v": NaN}'], details={"j": '{"r": "é"}'}, metrics={"M": 1})
    row.update(task_id="té", query="qé", prediction="pé", answerability="ANSWERABLE", answer_status="ok",
               passage_ids=["[1]"])
    assert output_line(row) == (
        '{"a": 1, "model_id": "mé", "metrics": {"M": 1}, "error": {"stage": "s", "message": "x"}, '
        '"ragscale": {"record_key": "ké", "source_file": "fé", "source_line": 2, "record": {"task_id": "té", '
        '"query": "qé", "answer": "pé", "answerability": "ANSWERABLE", "answer_status": "ok", "passage_ids": ["[1]"]}, '
        '"warnings": ["wé"], '
        '"judge_errors": [{"judge": "j", "v": null}], "details": {"j": {"r": "é"}}}}')
