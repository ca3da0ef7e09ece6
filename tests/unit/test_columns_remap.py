"""A record read through the user's column names (``column_map`` / ``columns.<field>``): each field
lands under the name its layout reads (ragas' when the answer is mapped, MT-RAG's otherwise), ids
as ids, passages as a list, a reference as MT-RAG's targets; an unknown field names every field."""

from __future__ import annotations

import pytest

from ragscale.columns import FIELDS, mapped, remap
from ragscale.errors import UserError

RAGAS_COLUMNS = {"model_id": "sys", "task_id": "qid", "answer": "gen", "reference": "gold", "contexts": "docs"}


def test_a_ragas_style_record_reads_each_field_under_ragas_name():
    rec = {"sys": "m1", "qid": 7, "gen": "A", "gold": '["R1", "R2"]', "docs": '["p1","p2"]', "response": "old", "x": 1}
    assert remap(rec, RAGAS_COLUMNS) == {
        "sys": "m1", "qid": 7, "gen": "A", "gold": '["R1", "R2"]', "docs": '["p1","p2"]', "x": 1,
        "model_id": "m1", "task_id": "7", "response": "A",
        "reference": '["R1", "R2"]',  # a ragas reference is one text, even one that looks like a list
        "retrieved_contexts": ["p1", "p2"]}


def test_a_model_given_as_a_number_is_read_as_its_id():
    assert remap({"predictions": [{"text": "A"}], "m": 2.0, "gold": None}, {"model_id": "m", "reference": "gold"}) == {
        "predictions": [{"text": "A"}], "m": 2.0, "gold": None, "model_id": "2.0"}


@pytest.mark.parametrize("gold, targets", [
    ("R", [{"text": "R"}]),
    ('["R1", "R2"]', [{"text": "R1"}, {"text": "R2"}]),  # a list written as text, as CSV exports write it
    (["R1", {"text": "R2"}], [{"text": "R1"}, {"text": "R2"}]),
])
def test_an_mtrag_record_reads_a_mapped_reference_as_its_targets(gold, targets):
    rec = {"predictions": [{"text": "A"}], "gold": gold, "task_id": "t", "q": "Q?"}
    assert remap(rec, {"reference": "gold", "question": "q"}) == {
        "predictions": [{"text": "A"}], "gold": gold, "task_id": "t", "q": "Q?", "targets": targets, "query": "Q?"}


def test_an_unknown_field_names_every_field():
    with pytest.raises(UserError) as e:
        mapped({"answr": "gen"})
    assert str(e.value).startswith("column_map: unknown field 'answr'")
    assert str(e.value).endswith(f"; the fields are {', '.join(FIELDS)}")


def test_a_mapped_answer_reads_the_record_as_ragas_even_beside_mtrag_predictions():
    rec = {"predictions": [{"text": "old"}], "gen": "A", "gold": "R"}
    assert remap(rec, {"answer": "gen", "reference": "gold"}) == {"gen": "A", "gold": "R", "response": "A",
                                                                  "reference": "R"}
