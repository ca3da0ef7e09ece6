"""The lines that replace Hydra's override errors (ragscale.overrides, issue 37), rule by rule:
which key a value belongs to whatever its prefix, a group given twice (with the sweep that runs
each), a group left without a name, a sweep without -m. tests/unit/test_messages.py runs them
through Hydra end to end."""

from __future__ import annotations

import re

import pytest

from ragscale import overrides as ov


def match(pattern: str, text: str) -> re.Match:
    m = re.search(pattern, text)
    assert m is not None
    return m


def test_pairs_and_the_last_value_given():
    assert ov._pairs(["+scenario=mtrag", "~judge@x=a=b", "limit", "judge.model=m"]) == [
        ("scenario", "mtrag"), ("judge", "a=b"), ("judge.model", "m")]
    assert ov._given("judge", ["judge=a", "+judge=b", "judge.model=c"]) == ("+judge=b", "b")
    assert ov._given("judge", ["limit=3"]) == ("judge=...", "...")


def test_a_group_given_twice():
    m = match(r"Multiple values for (\w+)\.", "Multiple values for scenario. To override a value use 'override scenario'")
    assert ov._twice(m, Exception(), ["+scenario=mtrag", "+scenario=trec", "+scenario=mtrag"]) == (
        "scenario given twice: use one +scenario=NAME (-m +scenario=mtrag,trec runs each)")
    assert ov._twice(m, Exception(), ["+scenario=mtrag"]) == "scenario given twice: use one +scenario=NAME"
    m = match(r"(\w+) appears more than once", "judge appears more than once in the final defaults list")
    assert ov._twice(m, Exception(), ["+judge=openai"]) == (
        "use judge=openai (judge has a default: + adds only a scenario or a judge panel)")


def test_a_group_without_a_name():
    m = match(r"(.*)", "x")
    line = ov._no_name(m, Exception(), ["limit=3", "judge= "])
    assert line is not None and line.startswith("judge needs a name; available: ")
    assert all(name in line for name in ov.group_options("judge"))
    assert ov._no_name(m, Exception(), ["cluster=null"]).startswith("cluster needs a name; available: ")
    assert ov._no_name(m, Exception(), ["limit=", "judge=openai"]) is None


def test_a_sweep_needs_multirun():
    m = match(r"Sweep parameters '(.+?)' requires --multirun", "Sweep parameters 'limit=1,2' requires --multirun")
    assert ov._sweep(m, Exception(), []) == "limit=1,2 is a sweep: add -m to run one job per value"
    m = match(r"Ambiguous value for argument '(.+?)'", "Ambiguous value for argument 'metrics=a,b'")
    assert ov._sweep(m, Exception(), []) == ("metrics=a,b is a sweep: add -m to run one job per value "
                                             "(a list is written metrics=[a,b])")


@pytest.mark.parametrize("key, overrides, given", [
    ("limit", ["limit='a=b'"], ("limit='a=b'", "'a=b'")),
    ("judge", ["+judge@foo=bar"], ("+judge@foo=bar", "bar")),
    ("judge", ["judge=a", "~judge@x=b=c"], ("~judge@x=b=c", "b=c")),
    ("Xlimit", ["Xlimit=3", "limit=4"], ("Xlimit=3", "3")),
    ("limit", ["Xlimit=3"], ("limit=...", "...")),
])
def test_the_value_given_is_split_at_the_first_equals_sign_whatever_the_package(key, overrides, given):
    assert ov._given(key, overrides) == given
