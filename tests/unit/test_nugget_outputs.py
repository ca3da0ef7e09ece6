"""What the nugget judge accepts from its engine (ragscale.judges.nugget_prompts, issue 37): the schemas ask
for exactly n labels of the allowed values; the parsers take labels in any case and spacing, refuse
a wrong count or an unknown label with the reason, and keep at most MAX_NUGGETS non-blank nuggets.
And how the judge actor records a judge that raised (ragscale.actors.judge_runs)."""

from __future__ import annotations

import json

import pytest

from ragscale.actors.judge_runs import Phase, cut_warning
from ragscale.errors import RecordError
from ragscale.judges import nugget_prompts as ng
from ragscale.judges.base import JudgeParseError


def test_schemas_ask_for_exactly_n_labels():
    assert ng.importance_schema(3) == {"type": "object", "required": ["importance"], "properties": {"importance": {
        "type": "array", "items": {"type": "string", "enum": ["vital", "okay"]}, "minItems": 3, "maxItems": 3}}}
    a = ng.assignment_schema(2)["properties"]["assignment"]
    assert a["items"]["enum"] == ["support", "partial_support", "not_support"] and a["minItems"] == a["maxItems"] == 2


def test_label_parsers():
    assert ng.parse_importance('{"importance": [" Vital", "OKAY "]}', 2) == ["vital", "okay"]
    assert ng.parse_assignment('{"assignment": ["support", "Partial_Support", "not_support"]}', 3) == [
        "support", "partial_support", "not_support"]
    for raw, n, why in (('{"importance": ["vital"]}', 2, "importance is not a list of 2 labels"),
                        ('{"importance": "vital"}', 1, "importance is not a list of 1 labels"),
                        ('{"importance": ["vital", "key"]}', 2, "importance label 'key' is not one of vital, okay"),
                        ('{"importance": ["vital", 1]}', 2, "importance label 1 is not one of vital, okay")):
        with pytest.raises(JudgeParseError) as e:
            ng.parse_importance(raw, n)
        assert e.value.reason == why and e.value.judge == ng.NAME
    with pytest.raises(JudgeParseError, match="assignment label 'yes' is not one of support, partial_support, "
                                              "not_support"):
        ng.parse_assignment('{"assignment": ["yes"]}', 1)


def test_nugget_lists():
    many = [f"n{i}" for i in range(ng.MAX_NUGGETS + 5)]
    assert ng.parse_nuggets(json.dumps({"nuggets": ["a", " ", "", "b", *many]})) == ["a", "b", *many[:ng.MAX_NUGGETS - 2]]
    assert ng.parse_nuggets('{"nuggets": []}') == []
    for raw in ('{"nuggets": "a"}', '{"nuggets": ["a", 1]}', '{"other": []}'):
        with pytest.raises(JudgeParseError, match="nuggets is not a list of strings"):
            ng.parse_nuggets(raw)


def test_a_judge_that_raised():
    phase = Phase()
    phase._raised((0, "umbrela"), ValueError("x" * 400))
    result, error = phase.final[(0, "umbrela")]
    assert result is None and error == {"judge": "umbrela", "reason": "the judge raised ValueError: " + "x" * 300}
    phase._raised((1, "taxonomy_generation"), RecordError("input", "labels.helpful must be 0 or 1"))
    phase._raised((1, "taxonomy_grounding"), RecordError("input", "second"))
    assert phase.final[(1, "taxonomy_generation")] == (None, {"judge": "taxonomy_generation",
                                                              "reason": "input error: labels.helpful must be 0 or 1"})
    assert str(phase.record_errors[1]) == str(RecordError("input", "labels.helpful must be 0 or 1"))  # the first kept
    assert 0 not in phase.record_errors


def test_cut_warnings():
    assert cut_warning("idk", 1, 500, 20000) == (
        "judge idk: an output of 20,500 characters cut to judge.max_raw_chars=20,000 (500 dropped; the judge read the "
        "cut text; the record and the judge cache keep it)")
    assert cut_warning("umbrela", 3, 1500, 1000) == (
        "judge umbrela: 3 outputs longer than judge.max_raw_chars=1,000 characters cut to it (1,500 characters dropped "
        "in all; the judge read the cut text; the record and the judge cache keep it)")
