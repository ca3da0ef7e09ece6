"""Why Hydra cannot parse an override, in one line (ragscale.overrides.malformed): no key, a key
that is no dotted name, brackets or quotes left open (a bracket inside quotes is text), a list or
mapping written another way, and otherwise the quoting that fixes it. A well-formed override,
whatever its key's name, is not malformed."""

from __future__ import annotations

import pytest

from ragscale import overrides as ov


@pytest.mark.parametrize("override", ["limit=3", "X=1", "+X=1", "~X", "~limit", "~X-1", "+judge.options.X=1",
                                      "judge.model='a b'", "input=[a.csv,b.csv]"])
def test_a_well_formed_override_is_not_malformed(override):
    assert ov.malformed(override) is None


@pytest.mark.parametrize("override, why", [
    ("limit", "expected key=value (e.g. limit=3)"),
    ("=3", "expected key=value (e.g. limit=3)"),
    ("+=3", "expected key=value (e.g. limit=3)"),
    ("~=3", "expected key=value (e.g. limit=3)"),
    ("+~=1", "expected key=value (e.g. limit=3)"),
    ("~1x", "expected key=value (e.g. limit=3)"),
    ("1x=[1", "a key is names joined by dots (e.g. judge.model=...)"),
    ("X=[1", "unbalanced brackets"),
    ("+limit=[1", "unbalanced brackets"),
    ("~limit=[1", "unbalanced brackets"),
    ("limit=a]", "unbalanced brackets"),
    ("limit=[a)", "unbalanced brackets"),
    ("limit='a'(", "unbalanced brackets"),
    ("input=[Xa.csv", "unbalanced brackets"),
    ("limit='a", "unbalanced quotes"),
    ("limit=\"a'(", "unbalanced quotes"),
    ("limit=[a=b]", "a list is written [a,b], a mapping {x: 1}"),
    ("limit={a=b}", "a list is written [a,b], a mapping {x: 1}"),
    ("limit= [a=b]", "a list is written [a,b], a mapping {x: 1}"),
    ("limit= {a=b}", "a list is written [a,b], a mapping {x: 1}"),
    ("judge.model=a=b c", "quote a value with special characters (judge.model='a=b c')"),
])
def test_a_malformed_override_says_why_in_one_line(override, why):
    assert ov.malformed(override) == f"malformed override {override!r}: {why}"
