"""open-rag-eval's structured outputs as ragscale reads and declares them (``OragOutput``):
the reasons a user sees for an unreadable judge output, the lone-surrogate rule, the JSON schema
pydantic gives such a model, and UMBRELA's reference protocol for a record without passages.

open-rag-eval (vectara/open-rag-eval, ``open_rag_eval/models/llm_judges.py``, ``OpenAIModel.parse``)
sends ``response_format=<pydantic model>`` and returns ``message.parsed``; the metric reads
``int(response.score.value)`` (``open_rag_eval/metrics/umbrela_metric.py``).
"""

from __future__ import annotations

from enum import Enum

import pytest

from ragscale.judges.base import JudgeParseError, Undefined, drive
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.umbrela import REFERENCE_OUTPUT, OragOutput, parse_reference, start

LABELS = OragOutput("Verdict", "verdict", ("yes", "no", "maybe"), "VerdictValues")
LABEL_LIST = OragOutput("Verdicts", "verdict", ("yes", "no"), "VerdictValues", many=True)
TEXTS = OragOutput("Texts", "text", many=True)


def _error(output: OragOutput, raw: str) -> JudgeParseError:
    with pytest.raises(JudgeParseError) as caught:
        output.parse("judge-x", raw)
    return caught.value


@pytest.mark.parametrize("output, raw, reason", [
    (LABELS, "not json", "output is not JSON"),
    (LABELS, '{"verdict": "yes"} and more', "output is not JSON"),
    (LABELS, '{"verdict": "yes", "x": "\\ud800"}', "output is not JSON (a lone surrogate escape)"),
    (LABELS, '["yes"]', "output is not a JSON object"),
    (LABELS, '"yes"', "output is not a JSON object"),
    (LABELS, '{"answer": "yes"}', "no 'verdict' in the output"),
    (LABELS, '{"verdict": "Yes"}', "verdict value 'Yes' is not yes, no, maybe"),
    (LABELS, '{"verdict": 1}', "verdict value 1 is not yes, no, maybe"),
    (LABEL_LIST, '{"verdict": "yes"}', "verdict 'yes' is not a list"),
    (LABEL_LIST, '{"verdict": ["yes", "no", "no "]}', "verdict value 'no ' is not yes, no"),
    (TEXTS, '{"text": ["a", 2]}', "text value 2 is not a string"),
    (TEXTS, '{"text": [null]}', "text value None is not a string"),
])
def test_an_unreadable_output_names_the_judge_keeps_the_raw_text_and_says_why(output, raw, reason):
    err = _error(output, raw)
    assert (err.judge, err.raw, err.reason) == ("judge-x", raw, reason)
    assert str(err) == f"judge-x: {reason}"


def test_umbrela_reference_reading_failures_are_the_umbrela_judge_s():
    raw = '{"score": "4"}'
    with pytest.raises(JudgeParseError) as caught:
        parse_reference(raw)
    assert (caught.value.judge, caught.value.raw, caught.value.reason) == (
        "umbrela", raw, "score value '4' is not 0, 1, 2, 3")


@pytest.mark.parametrize("escape", ["\\ud800", "\\udbff", "\\udc00", "\\udfff"])
def test_a_lone_surrogate_anywhere_fails_the_reading(escape):
    """Python's json decodes a lone surrogate escape; pydantic's JSON parser (what the OpenAI
    client's ``message.parsed`` uses) rejects it: the whole surrogate range U+D800..U+DFFF."""
    for raw in (f'{{"score": "2", "x": "{escape}"}}', f'{{"score": "2", "x": ["a", {{"{escape}": 1}}]}}'):
        assert _error(REFERENCE_OUTPUT, raw).reason == "output is not JSON (a lone surrogate escape)"


@pytest.mark.parametrize("text", ["\\ud7ff", "\\ue000", "\\uffff", "\\ud83d\\ude00", "\ue000"])
def test_characters_next_to_the_surrogate_range_and_surrogate_pairs_are_read(text):
    assert parse_reference(f'{{"score": "3", "note": "{text}"}}') == 3


def _pydantic_schema(output: OragOutput) -> dict:
    pydantic = pytest.importorskip("pydantic")
    if output.labels:
        values = Enum(output.enum, {v: v for v in output.labels}, type=str)
        kind = list[values] if output.many else values
    else:
        kind = list[str]
    return pydantic.create_model(output.model, **{output.field: (kind, ...)}).model_json_schema()


@pytest.mark.parametrize("output", [
    OragOutput("NuggetTexts", "nugget_texts", many=True),
    OragOutput("LabelList", "passage_labels", ("a_b", "c"), "LabelValues", many=True),
    OragOutput("OneLabel", "support_level", ("full_support", "no_support"), "SupportValues"),
    REFERENCE_OUTPUT,
])
def test_schema_is_what_pydantic_gives_the_model(output):
    """A multi-word field's title is pydantic's: its words capitalized, "_" a space."""
    assert output.schema() == _pydantic_schema(output)


def test_a_list_field_s_title_spells_its_words():
    schema = OragOutput("NuggetTexts", "nugget_texts", many=True).schema()
    assert schema["properties"]["nugget_texts"] == {"items": {"type": "string"}, "title": "Nugget Texts", "type": "array"}


def test_reference_protocol_record_without_passages_is_undefined_with_the_reason():
    inp = JudgeInput(query="q", prediction="an answer")
    assert drive(start(inp, "reference", "gpt-4o"), lambda p: '{"score": "1"}') == Undefined("no passages")
