"""What every judge shares (ragscale.judges.base, issue 37): the parse failures a judge's output
gives (their reason and raw text, as judge_errors shows them), ``drive``'s fan-out rounds, and a
JudgeSpec's default metrics."""

from __future__ import annotations

import pytest

from ragscale.judges.base import (Failed, JudgeParseError, JudgePrompt, JudgeSpec, NestedTooDeep, drive,
                                  load_json_object, loads_json)

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_json_text_nested_too_deep():
    with pytest.raises(NestedTooDeep, match="^JSON nested deeper than Python's recursion limit$"):
        loads_json(DEEP)
    with pytest.raises(JudgeParseError) as e:
        load_json_object("idk", DEEP)
    assert (e.value.judge, e.value.raw, e.value.reason) == ("idk", DEEP, "output is not JSON (nested too deeply)")
    assert str(e.value) == "idk: output is not JSON (nested too deeply)"


@pytest.mark.parametrize("raw, reason", [("{", "output is not JSON"), ("[1]", "output is not a JSON object")])
def test_outputs_that_are_not_a_json_object(raw, reason):
    with pytest.raises(JudgeParseError) as e:
        load_json_object("radbench", raw)
    assert (e.value.judge, e.value.raw, e.value.reason) == ("radbench", raw, reason)


def test_a_raw_newline_inside_a_string_is_read():
    assert load_json_object("idk", '{"why": "a\nb", "score": 1}') == {"why": "a\nb", "score": 1}


def _prompt(text: str) -> JudgePrompt:
    return JudgePrompt("j", "v1", ({"role": "user", "content": text},), None)


def test_a_fan_out_round_delivers_each_failure_with_its_raw_text():
    def parse(raw: str) -> int:
        if not raw.isdigit():
            raise JudgeParseError("j", raw, "not a number")
        return int(raw)

    def judge():
        answers = yield [(_prompt("a"), parse), (_prompt("b"), parse)]
        return answers

    got = drive(judge(), lambda p: {"a": "7", "b": "seven"}[p.messages[0]["content"]])
    assert got == [7, Failed("not a number", "seven")]


def test_a_judge_spec_fills_its_metric_unless_it_names_several():
    def start(inp):
        yield from ()

    assert JudgeSpec("j", "m", "v1", start).metrics == ("m",)
    assert JudgeSpec("j", "m", "v1", start, metrics=("m", "n")).metrics == ("m", "n")
