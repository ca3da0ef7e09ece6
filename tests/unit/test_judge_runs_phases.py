"""The judge actor's bookkeeping (ragscale.actors.judge_runs): how one phase starts, answers and
ends each (record, judge) run, what a fan-out round's failed items become, how cut outputs are
counted, how a parser's own exception reads, and the HTTP counters and warnings added to a batch."""

from __future__ import annotations

import pytest

from ragscale.actors.judge_runs import JudgeStats, Phase, add_warnings, cut, http_counters, parse_step
from ragscale.errors import RecordError
from ragscale.judges.base import Failed, JudgeParseError

KEY = (0, "j")


def fan_out():
    return (yield [("p1", float), ("p2", float)])


def test_a_fan_out_round_gets_its_failed_items_as_failed_and_lists_them():
    phase = Phase()
    phase.start(KEY, fan_out)
    assert phase.current[KEY] == [("p1", float), ("p2", float)]
    phase.resume(KEY, [(True, 1.0, "1", 0), (False, "not a number", "one", 0)])
    assert phase.final == {KEY: ([1.0, Failed("not a number", "one")], None)}
    assert phase.item_errors == {KEY: [{"judge": "j", "item": 1, "reason": "not a number", "raw": "one"}]}
    assert phase.cuts == {}


def test_cut_outputs_are_counted_with_the_characters_dropped():
    phase = Phase()
    phase.start(KEY, fan_out)
    phase.resume(KEY, [(True, 1.0, "1", 5), (True, 0.0, "0", 7)])
    assert phase.cuts == {KEY: [2, 12]} and phase.final[KEY] == ([1.0, 0.0], None)


def test_an_empty_fan_out_round_is_answered_at_once_with_no_answers():
    def run():
        nothing = yield []
        score = yield ("p", float)
        return nothing, score

    phase = Phase()
    phase.start(KEY, run)
    assert phase.current == {KEY: ("p", float)}
    phase.resume(KEY, (True, 0.5, "0.5", 0))
    assert phase.final == {KEY: (([], 0.5), None)}


def test_a_failed_single_step_ends_the_run_with_its_reason_and_raw_text():
    phase = Phase()
    phase.start(KEY, lambda: (yield ("p", float)))
    phase.resume(KEY, (False, "not a number", "abc", 3))
    assert phase.final == {KEY: (None, {"judge": "j", "reason": "not a number", "raw": "abc"})}
    assert phase.cuts == {KEY: [1, 3]}


def test_a_judge_that_raises_at_its_start_fails_on_that_record_only():
    def broken():
        raise ValueError("no turns")

    def malformed():
        raise RecordError("input", "labels.helpful must be 0 or 1")

    phase = Phase()
    phase.start(KEY, broken)
    phase.start((1, "taxonomy"), malformed)
    phase.start((2, "j"), fan_out)
    assert phase.final == {KEY: (None, {"judge": "j", "reason": "the judge raised ValueError: no turns"}),
                           (1, "taxonomy"): (None, {"judge": "taxonomy",
                                                    "reason": "input error: labels.helpful must be 0 or 1"})}
    assert list(phase.record_errors) == [1] and list(phase.current) == [(2, "j")]


def test_a_parser_that_raises_fails_that_output_with_the_exception_named():
    def parser(text):
        raise KeyError("x" * 300)

    def refuses(text):
        raise JudgeParseError("j", text, "label 'maybe' is not one of yes, no")

    assert parse_step(("p", float), "0.25") == (True, 0.25)
    assert parse_step(("p", refuses), "maybe") == (False, "label 'maybe' is not one of yes, no")
    assert parse_step(("p", parser), "odd") == (False, "the parser raised KeyError: '" + "x" * 199)


@pytest.mark.parametrize("text, limit, expected", [
    ("abcdef", 3, ("abc", 3)), ("abc", 3, ("abc", 0)), ("ab", 3, ("ab", 0)), ("abcdef", None, ("abcdef", 0)),
])
def test_cut(text, limit, expected):
    assert cut(text, limit) == expected


def test_http_counters_add_up_over_calls_and_skip_zeros_and_non_numbers():
    stats = JudgeStats()
    http_counters(stats, {"requests": 3, "http_retries": 1, "errors": 0, "model": "m", "latency_s": 0.5})
    http_counters(stats, {"requests": 2, "http_retries": 2, "base_url": None})
    assert stats.d == {"judge_http_requests": 5, "judge_http_retries": 3, "judge_http_latency_s": 0.5}


@pytest.mark.parametrize("row, warnings, expected", [
    ({"warnings": ["earlier"]}, ["a", "b"], {"warnings": ["earlier", "a", "b"]}),
    ({"warnings": None}, ["a"], {"warnings": ["a"]}),
    ({}, ["a"], {"warnings": ["a"]}),
    ({}, [], {}),
    ({"warnings": ["earlier"]}, [], {"warnings": ["earlier"]}),
])
def test_add_warnings_appends_to_the_rows_warnings(row, warnings, expected):
    add_warnings(row, warnings)
    assert row == expected
