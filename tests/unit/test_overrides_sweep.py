"""What ``ragscale run -m`` checks before Hydra writes multirun.yaml (ragscale.overrides.check_sweep):
each value of each swept key composed with the other keys at their first value, the keys that
are not swept as given, glob sweeps left to Hydra's sweeper, at most 32 compositions."""

from __future__ import annotations

import pytest

from ragscale import overrides as ov
from ragscale.errors import UserError


@pytest.fixture
def composed(monkeypatch):
    calls = []
    monkeypatch.setattr(ov, "check_overrides", lambda variant: calls.append(list(variant)))
    return calls


def test_each_value_of_each_swept_key_is_composed_with_the_others_at_their_first(composed):
    ov.check_sweep(["+scenario=custom", "limit=1,2", "judge=local,openai", "html_report=true"])
    assert composed == [
        ["+scenario=custom", "limit=1", "judge=local", "html_report=true"],
        ["+scenario=custom", "limit=2", "judge=local", "html_report=true"],
        ["+scenario=custom", "limit=1", "judge=openai", "html_report=true"],
    ]


def test_a_glob_sweep_is_left_to_hydra_and_the_rest_still_checked(composed):
    ov.check_sweep(["+scenario=glob(*)", "limit=1,2", "html_report=true"])
    assert composed == [["limit=1", "html_report=true"], ["limit=2", "html_report=true"]]


def test_a_long_sweep_is_checked_up_to_32_compositions(composed):
    ov.check_sweep(["limit=" + ",".join(str(i) for i in range(40))])
    assert composed == [[f"limit={i}"] for i in range(32)]


def test_a_key_that_is_not_swept_is_checked_too():
    with pytest.raises(UserError) as e:
        ov.check_sweep(["+scenario=custom", "limit=abc"])
    assert str(e.value) == "limit must be an integer, got 'abc'"
