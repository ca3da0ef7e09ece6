"""A comparison's verdict (docs/statistics.md, "The test" and "The correction"): significant when the
adjusted p is at most alpha, ``better`` the model the metric's direction favours (none for equal
means or a metric without a direction), and the entry before its test with its notes."""

from dataclasses import replace

import numpy as np
import pytest

from ragscale.config import SignificanceConf
from ragscale.report import significance as sig

NONE = replace(SignificanceConf(), correction="none", alpha=0.05)


def _entry(diff, p):
    return {"a": "x", "b": "y", "n": 30, "mean_a": 0.5 + diff, "mean_b": 0.5, "diff": diff, "ci": [0.0, 0.0],
            "p": p, "p_adjusted": None, "significant": False, "better": None}


def _tested(metric, diff, p):
    entry = _entry(diff, p)
    sig.decide(metric, [entry], NONE)
    return entry


@pytest.mark.parametrize("p, significant", [(0.05, True), (0.0500001, False), (0.01, True)])
def test_significant_when_the_adjusted_p_is_at_most_alpha(p, significant):
    e = _tested("RB_agg", 0.1, p)
    assert e["p_adjusted"] == p and e["significant"] is significant
    assert e["better"] == ("x" if significant else None)


@pytest.mark.parametrize("metric, diff, better", [
    ("RB_agg", 0.1, "x"),
    ("RB_agg", 1.0, "x"),
    ("RB_agg", -0.1, "y"),
    ("UnsupportedClaimRate", 0.1, "y"),
    ("UnsupportedClaimRate", -0.1, "x"),
    ("RB_agg", 0.0, None),
    ("Length", 0.1, None),
])
def test_better_is_the_model_the_metrics_direction_favours(metric, diff, better):
    e = _tested(metric, diff, 0.001)
    assert e["significant"] and e["better"] == better


def test_untested_entries_keep_no_verdict_and_the_others_are_adjusted_together():
    entries = [sig.pair_entry("x", "y", np.array([0.5]), np.array([0.1])),
               _entry(0.1, 0.02), _entry(-0.1, 0.03)]
    sig.decide("RB_agg", entries, replace(NONE, correction="holm"))
    assert [(e["p_adjusted"], e["significant"], e["better"]) for e in entries] == [
        (None, False, None), (pytest.approx(0.04), True, "x"), (pytest.approx(0.04), True, "y")]


def test_an_entry_before_its_test_exactly():
    assert sig.pair_entry("x", "y", np.array([0.5]), np.array([0.25])) == {
        "a": "x", "b": "y", "n": 1, "mean_a": 0.5, "mean_b": 0.25, "diff": 0.25, "ci": None, "p": None,
        "p_adjusted": None, "significant": False, "better": None, "note": "only 1 paired task: not tested"}
    assert sig.pair_entry("x", "y", np.array([]), np.array([])) == {
        "a": "x", "b": "y", "n": 0, "mean_a": None, "mean_b": None, "diff": None, "ci": None, "p": None,
        "p_adjusted": None, "significant": False, "better": None, "note": "no paired tasks"}


@pytest.mark.parametrize("n, note", [
    (2, "fewer than 10 paired tasks"),
    (9, "fewer than 10 paired tasks"),
    (10, None),
    (11, None),
])
def test_fewer_than_ten_paired_tasks_carry_a_note(n, note):
    va = np.linspace(0.1, 0.9, n)
    e = sig.pair_entry("x", "y", va, va - 0.05)
    assert e.get("note") == note and e["n"] == n and e["diff"] == pytest.approx(0.05)


def test_identical_values_on_few_tasks_carry_both_notes():
    va = np.array([0.2, 0.4, 0.4])
    assert sig.pair_entry("x", "y", va, va.copy())["note"] == "fewer than 10 paired tasks; all differences zero"
