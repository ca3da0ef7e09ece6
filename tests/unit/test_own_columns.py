"""A user's own column names (column_map / columns.<field>): how a record is read through them,
how list cells from CSV are read, and the mapping a refused input is told to use."""

from __future__ import annotations

import json

import pytest

from ragscale.columns import FIELDS, as_list, guess, mapped, remap
from ragscale.errors import UserError
from ragscale.record import read_record

MAP = {"question": "query", "answer": "generated", "reference": "gold", "contexts": "docs", "model_id": "model",
       "task_id": "qid"}
OWN = {"qid": 7, "model": "m1", "query": "Capital of France?", "generated": "Paris", "gold": "Paris",
       "docs": "['Paris is the capital of France.', 'Lyon is a city.']", "answer": "not the answer"}


def _read(obj: dict, columns: dict | None = None, need_targets: bool = False):
    return read_record(json.dumps(obj), key="k", model_id="stem", task_id=None, source_file="f", source_line=1,
                       need_targets=need_targets, columns=columns)


def test_a_mapped_record_is_read_through_the_users_columns():
    rec = _read(OWN, MAP)
    assert rec.error is None
    assert (rec.query, rec.prediction, rec.targets) == ("Capital of France?", "Paris", ["Paris"])
    assert rec.passages == ["Paris is the capital of France.", "Lyon is a city."]
    assert (rec.model_id, rec.task_id) == ("m1", "7")  # ids as strings


def test_the_output_keeps_the_users_fields_and_adds_the_ids_ragscale_reads():
    """The output line keeps the user's columns; model_id and a mapped task_id are added, so the
    tools that pair runs by task (compare, agree, calibrate) read them."""
    out = json.loads(_read(OWN, MAP).input_json)
    assert out["query"] == "Capital of France?" and out["generated"] == "Paris" and out["answer"] == "not the answer"
    assert out["task_id"] == "7" and "model_id" not in out  # model_id is written by the writer (input_has_model_id)
    assert _read(OWN, MAP).input_has_model_id is False


def test_a_mapped_answer_wins_over_a_column_named_like_a_layouts_answer():
    """``answer`` is one of ragas' names, but the user said the answer is ``generated``."""
    assert _read(OWN, {"answer": "generated"}).prediction == "Paris"


def test_a_missing_mapped_answer_names_the_users_column():
    rec = _read({"query": "q"}, {"answer": "generated"})
    assert json.loads(rec.error) == {"stage": "input", "message": "no answer: the record has no 'generated' (columns.answer)"}


def test_mtrag_records_keep_their_layout_when_only_other_fields_are_mapped():
    obj = {"predictions": [{"text": "a"}], "input": [{"speaker": "user", "text": "q?"}], "docs": ["p1"], "gold": "r"}
    rec = _read(obj, {"contexts": "docs", "reference": "gold"}, need_targets=True)
    assert (rec.prediction, rec.passages, rec.targets, rec.query) == ("a", ["p1"], ["r"], "q?")


def test_unmapped_records_are_read_as_before():
    obj = {"user_input": "q", "response": "a", "retrieved_contexts": ["p"], "reference": "r"}
    assert remap(obj, {}) is obj
    rec = _read(obj)
    assert (rec.query, rec.prediction, rec.passages, rec.targets) == ("q", "a", ["p"], ["r"])


@pytest.mark.parametrize("cell, expected", [
    (["a", "b"], ["a", "b"]),
    ('["a", "b"]', ["a", "b"]),  # JSON
    ("['a', \"b's\"]", ["a", "b's"]),  # Python repr, as ragas' to_pandas().to_csv() writes it
    ("one passage", ["one passage"]),
    ("[not a list", ["[not a list"]),
    ("[1, 2]", [1, 2]),  # a list, whatever its items (the reader then says which item is not text)
    ("['a'] # a note", ["['a'] # a note"]),  # more than a list literal: one item
    ("[1], [2]", ["[1], [2]"]),  # two lists (a Python tuple): one item
    ("[" * 128 + "]" * 128, json.loads("[" * 128 + "]" * 128)),  # as deep as a record may be: a list
    ("[" * 129 + "]" * 129, ["[" * 129 + "]" * 129]),  # deeper: kept as the text it is
])
def test_list_cells(cell, expected):
    assert as_list(cell) == expected


def test_mapped_rejects_unknown_fields_and_bad_names():
    assert mapped({"answer": "generated", "question": None}) == {"answer": "generated"}
    with pytest.raises(UserError, match=r"unknown field 'anser' \(did you mean 'answer'\?\); the fields are question"):
        mapped({"anser": "x"})
    with pytest.raises(UserError, match="must be a column name"):
        mapped({"answer": 3})
    assert set(FIELDS) >= {"question", "answer", "contexts", "reference", "model_id", "task_id"}


def test_guess_finds_common_names_case_insensitively():
    assert guess(["Query", "generated", "gold", "docs"], "answer") == "generated"
    assert guess(["Query", "generated", "gold", "docs"], "question") == "Query"
    assert guess(["Query", "generated", "gold", "docs"], "reference") == "gold"
    assert guess(["x"], "contexts") is None


def test_a_record_in_no_known_layout_is_told_which_column_to_map():
    rec = _read({"query": "q", "generated": "a"})
    assert json.loads(rec.error)["message"] == (
        "no answer: the record has none of response, answer (ragas), predictions (MT-RAG), generated_answer "
        "(open-rag-eval); its fields: query, generated; name the answer's column with columns.answer=generated "
        "(column_map={'answer': 'generated'} in Python)")
    assert json.loads(_read({"user_input": "q", "response": None}).error)["message"] == "no response"
