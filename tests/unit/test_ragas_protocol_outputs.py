"""ragas' reference protocol: how a judge's free-text output is read (extract_json, LangChain's
partial JSON, pydantic's lax validation) and what a failure says, judge and raw output included."""

from __future__ import annotations

import pytest

from ragscale.judges import faithfulness as fa
from ragscale.judges import ragas_protocol as rp
from ragscale.judges.base import JudgeParseError, JudgePrompt, drive

JUDGE = fa.NAME
DEEP = "[" * 5000 + "]" * 5000


def _prompt(text="the prompt"):
    return rp.reference_prompt(JUDGE, fa.REFERENCE_VERSION, text)


def test_a_reference_prompt_is_one_user_message_with_ragas_sampling():
    assert rp.reference_prompt(JUDGE, "v1", "hello", sample=2, temperature=0.3) == JudgePrompt(
        JUDGE, "v1", ({"role": "user", "content": "hello"},), None, max_tokens=2048, sampling=(0.3, 2))
    assert _prompt().sampling == (0.01, 0)


def test_a_fix_prompt_belongs_to_the_judge_and_version_of_the_prompt_it_fixes():
    fix = rp.fix_prompt(_prompt(), "not json")
    assert (fix.judge, fix.version, fix.schema, fix.sampling) == (JUDGE, fa.REFERENCE_VERSION, None, (0.01, 0))
    assert '"output_string": "not json"' in fix.messages[0]["content"]


# --- extract_json ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, out", [
    ("Output: [1, [2]] and [3]", "[1, [2]]"),
    ('Output: ["a", {"b": 1}] then {"c": 2}', '["a", {"b": 1}]'),
    ('x {"a": {"b": []}} y', '{"a": {"b": []}}'),
    ("[1, 2", "[1, 2"),
    ("no brackets", "no brackets"),
])
def test_extract_json_takes_the_first_balanced_bracket(text, out):
    assert rp.extract_json(text) == out


def test_extract_json_starts_at_the_first_json_code_mark():
    text = 'see {"x": 0}\n```json\n{"a": 1}\n```\nand\n```json\n{"b": 2}\n```'
    assert rp.extract_json(text) == '{"a": 1}'


# --- parse_json_markdown (LangChain) --------------------------------------------------------------

@pytest.mark.parametrize("text, out", [
    ('["", "x"', ["", "x"]),
    ('{"a": "", "b": "\\\\", "c": "y', {"a": "", "b": "\\", "c": "y"}),
    ('{"verdict": 1} Xtra note', {"verdict": 1}),
    ('[1, 2] (eXplained above)', [1, 2]),
])
def test_an_unfinished_or_trailing_output_is_completed_or_cut(text, out):
    assert rp.parse_json_markdown(text) == out


def test_a_bracket_closing_the_other_kind_reads_as_nothing():
    assert rp.parse_json_markdown('{"a": [1}') is None


def test_backticks_around_the_json_are_stripped_before_a_later_code_fence_is_looked_for():
    assert rp.parse_json_markdown('`{"a": 1}` and ```{"b": 2}```') == {"a": 1}


def test_a_four_backtick_fence_after_prose_is_read():
    assert rp.parse_json_markdown('Here it is: ````{"a": 1}````') == {"a": 1}


def test_when_nothing_parses_the_error_is_json_s_own_with_control_characters_allowed():
    with pytest.raises(ValueError) as e:
        rp.parse_json_markdown('"a\tb\\x"')
    assert str(e.value) == "Invalid \\escape: line 1 column 5 (char 4)"


# --- validate (pydantic's lax mode) ---------------------------------------------------------------

@pytest.mark.parametrize("shape, value, message", [
    (str, 1, "output: int, not a string"),
    ([str], "x", "output: str, not a list"),
    ([int], [1, "x"], "output[1]: a string that is not an integer"),
    ({"text": str}, [1], "output: list, not an object"),
    ({"a": str, "b": str, "c": str}, {"b": "x"}, "output: lacks a, c"),
    (fa.NLI_MODEL, {"statements": [{"statement": "s", "reason": "r", "verdict": 1}, {"statement": 3}]},
     "output.statements[1]: lacks reason, verdict"),
    (fa.NLI_MODEL, {"statements": [{"statement": "s", "reason": 2, "verdict": 1}]},
     "output.statements[0].reason: int, not a string"),
    (int, [1], "output: list, not an integer"),
    (int, "X1", "output: a string that is not an integer"),
])
def test_a_value_that_does_not_fit_names_the_field_and_why(shape, value, message):
    with pytest.raises(ValueError) as e:
        rp.validate(shape, value)
    assert str(e.value) == message


def test_a_fitting_value_is_coerced_and_extra_keys_dropped():
    value = {"statements": [{"statement": "s", "reason": "r", "verdict": "1", "extra": 0}], "more": 1}
    assert rp.validate(fa.NLI_MODEL, value) == {"statements": [{"statement": "s", "reason": "r", "verdict": 1}]}


# --- ask: the generation loop and its failures ----------------------------------------------------

def _script(*outputs):
    sent = []

    def respond(prompt):
        sent.append(prompt)
        return outputs[len(sent) - 1]

    return respond, sent


def test_an_output_nested_too_deeply_fails_at_once_naming_the_judge_and_keeping_the_output():
    respond, sent = _script(DEEP)
    with pytest.raises(JudgeParseError) as e:
        drive(rp.ask(_prompt(), fa.STATEMENTS_MODEL), respond)
    assert len(sent) == 1
    assert (e.value.judge, e.value.raw) == (JUDGE, DEEP)
    assert str(e.value) == f"{JUDGE}: not ragas' output model (JSON nested too deeply)"


def test_an_output_still_unreadable_after_three_fixes_fails_with_the_last_output():
    respond, sent = _script("no json", "still none", "nope", "last")
    with pytest.raises(JudgeParseError) as e:
        drive(rp.ask(_prompt(), fa.STATEMENTS_MODEL), respond)
    assert len(sent) == 4 and all(p.judge == JUDGE for p in sent)
    assert (e.value.judge, e.value.raw) == (JUDGE, "last")
    assert str(e.value) == f"{JUDGE}: not ragas' output model (Expecting value: line 1 column 1 (char 0))"


def test_a_fixed_output_whose_text_does_not_fit_fails_naming_the_fix():
    raw = '{"text": "{\\"statements\\": 1}"}'
    respond, _ = _script("no json", raw)
    with pytest.raises(JudgeParseError) as e:
        drive(rp.ask(_prompt(), fa.STATEMENTS_MODEL), respond)
    assert (e.value.judge, e.value.raw) == (JUDGE, raw)
    assert e.value.reason == "the fixed output is not ragas' output model (output.statements: int, not a list)"


def test_a_fixed_output_is_read_as_the_original_model():
    respond, sent = _script("no json", '{"text": "{\\"statements\\": [\\"a\\"]}"}')
    assert drive(rp.ask(_prompt(), fa.STATEMENTS_MODEL), respond) == {"statements": ["a"]}
    assert sent[1] == rp.fix_prompt(sent[0], "no json")


def test_ask_all_parsers_name_each_prompt_s_judge():
    prompts = [_prompt("one"), rp.reference_prompt("ragas_answer_relevancy", "v", "two")]
    steps = next(rp.ask_all(prompts, fa.STATEMENTS_MODEL))
    assert [p for p, _ in steps] == prompts
    for (prompt, parse), judge in zip(steps, (JUDGE, "ragas_answer_relevancy")):
        with pytest.raises(JudgeParseError) as e:
            parse(DEEP)
        assert e.value.judge == judge and str(e.value).startswith(f"{judge}: ")
