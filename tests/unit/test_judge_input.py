"""``JudgeInput``, the one input of a judge's ``start``, and ``judge_input``, which builds it from a
pipeline row: every field a judge reads, normalized and read-only; the metrics of a worker's row, a
dict (ragscale.row); the derived ``turns`` and ``user_input``."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ragscale.judges.judge_input import JudgeInput, judge_input
from ragscale.record import read_record

TURNS = [{"speaker": "user", "text": "Who wrote Hamlet?"}, {"speaker": "agent", "text": "Shakespeare."},
         {"speaker": "user", "text": "When?"}]


def test_a_full_row():
    """Every column a judge reads, as it is typed in the row; containers as tuples."""
    row = {"key": "f:1", "model_id": "m", "task_id": "t", "query": "When?", "conversation": TURNS,
           "prediction": "In 1600 [1].", "targets": ["About 1600."], "passages": ["p1", "p2"],
           "passage_ids": ["[7]", "9"], "answerability": "ANSWERABLE", "answer_status": "ok",
           "labels": '{"helpful": 1, "chunks": [{"misleading": 0}]}', "metrics": {"umbrela_scores": [2, None]},
           "warnings": [], "error": None}
    inp = judge_input(row)
    assert (inp.key, inp.model_id, inp.task_id, inp.query) == ("f:1", "m", "t", "When?")
    assert inp.conversation == tuple(TURNS) and inp.turns == inp.conversation
    assert (inp.prediction, inp.targets, inp.passages) == ("In 1600 [1].", ("About 1600.",), ("p1", "p2"))
    assert inp.passage_ids == ("[7]", "9")
    assert (inp.answerability, inp.answer_status) == ("ANSWERABLE", "ok")
    assert inp.labels == {"helpful": 1, "chunks": [{"misleading": 0}]}
    assert inp.metrics == {"umbrela_scores": [2, None]}
    assert inp.user_input == "user: Who wrote Hamlet?\nagent: Shakespeare.\nuser: When?"


def test_an_empty_row():
    """A column the row lacks or holds null reads as empty."""
    empty = judge_input({})
    assert empty == judge_input({"query": None, "conversation": None, "prediction": None, "targets": None,
                                 "passages": None, "passage_ids": None, "labels": None, "metrics": None})
    assert empty == JudgeInput()
    assert (empty.query, empty.conversation, empty.prediction, empty.targets, empty.passages) == ("", None, "", (), ())
    assert (empty.passage_ids, empty.labels, dict(empty.metrics)) == ((), None, {})
    assert empty.turns == () and empty.user_input == ""


def test_metrics_are_the_rows_dict_read_only():
    """A worker's row holds its metrics as a dict (ragscale.row): the judge reads a copy it cannot
    change (nor the row through it), and a metric the row gets later is not in it."""
    metrics = {"umbrela_scores": [3, 0], "RL_F": [0.5]}
    row = {"passages": ["a", "b"], "metrics": metrics}
    inp = judge_input(row)
    assert inp.metrics == {"umbrela_scores": [3, 0], "RL_F": [0.5]}
    with pytest.raises(TypeError):
        inp.metrics["RL_F"] = [1.0]  # type: ignore[index]
    assert row["metrics"] == {"umbrela_scores": [3, 0], "RL_F": [0.5]}
    metrics["later"] = 1.0
    assert "later" not in inp.metrics


@pytest.mark.parametrize("metrics", ["", "not json", "[1, 2]", "null", 5, '{"RL_F": [0.5]}'])
def test_metrics_that_are_no_dict_read_as_none(metrics):
    """Only a dict is read: JSON text (the rows' old form, even of an object) is no longer parsed."""
    assert dict(judge_input({"metrics": metrics}).metrics) == {}


def test_passage_ids_are_one_per_passage():
    """The row's ids when they match the passages one to one, else the bracketed ranks (what
    bracket citations refer to), as ragscale.record.passage_ids_of reads an input."""
    assert judge_input({"passages": ["a", "b"], "passage_ids": ["x", "y"]}).passage_ids == ("x", "y")
    assert judge_input({"passages": ["a", "b"], "passage_ids": ["x"]}).passage_ids == ("[1]", "[2]")
    assert judge_input({"passages": ["a", "b"]}).passage_ids == ("[1]", "[2]")
    assert JudgeInput(passages=("a",)).passage_ids == ("[1]",)


def test_turns_fall_back_to_the_question():
    """A record without MT-RAG turns shows its question as one user turn (none when it is blank);
    ragas' user_input is then the question itself."""
    inp = judge_input({"query": "Why?", "conversation": []})
    assert inp.turns == ({"speaker": "user", "text": "Why?"},) and inp.user_input == "Why?"
    assert judge_input({"query": "  "}).turns == ()


def test_labels_that_are_no_object_are_kept_for_the_taxonomy_judges():
    """A labels value that is not a JSON object is kept as it is: the taxonomy judges report it as
    the record's input error (tests/unit/test_taxonomy_judges.py)."""
    assert judge_input({"labels": '"yes"'}).labels == "yes"
    assert judge_input({"labels": "[1]"}).labels == [1]


def test_the_input_is_read_only():
    inp = judge_input({"conversation": TURNS, "labels": '{"helpful": 1}'})
    with pytest.raises(dataclasses.FrozenInstanceError):
        inp.query = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        inp.conversation[0]["text"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        inp.labels["helpful"] = 0  # type: ignore[index]


def test_a_read_record_row():
    """The row ``read_record`` makes of an open-rag-eval record: its question, passage ids and answer status."""
    rec = {"format": "open-rag-eval-csv", "query": "What is it?", "query_id": "q1", "task_id": "q1",
           "passages": [{"id": "[2]", "text": "P two."}, {"id": "[5]", "text": "P five."}],
           "generated_answer": "It is [2].", "answer_status": "ok"}
    row = read_record(json.dumps(rec), key="f:1", model_id="m", task_id="q1", source_file="f", source_line=1,
                      need_targets=False).to_row()
    inp = judge_input(row)
    assert (inp.query, inp.prediction, inp.passages) == ("What is it?", "It is [2].", ("P two.", "P five."))
    assert (inp.passage_ids, inp.answer_status, inp.conversation) == (("[2]", "[5]"), "ok", None)
