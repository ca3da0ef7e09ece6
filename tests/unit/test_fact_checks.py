"""Fact checks of the custom metrics (ragscale.io.expectations, issue 37): a number within its
tolerance, a range with open ends, numbers only inside a ``within`` pattern (its first group when it
has one), a pattern in any case, any of several phrases; and what ``check`` scores from them."""

from __future__ import annotations

import pytest

from ragscale.io.expectations import Expectation, Fact, check, numbers


def holds(fact: Fact, answer: str) -> bool:
    return fact.holds(answer, numbers(answer))


def test_a_number_within_its_tolerance():
    assert holds(Fact("f", "number", 42.0), "about 42 units")
    assert not holds(Fact("f", "number", 42.0), "about 42.5 units")
    assert holds(Fact("f", "number", 42.0, tolerance=0.5), "about 42.5 units")
    assert not holds(Fact("f", "number", 42.0, tolerance=0.49), "about 42.5 units")
    assert not holds(Fact("f", "number", 42.0), "no number")


def test_a_range_with_open_ends():
    assert holds(Fact("r", "range", (1.0, 2.0)), "it is 1") and holds(Fact("r", "range", (1.0, 2.0)), "it is 2")
    assert not holds(Fact("r", "range", (1.0, 2.0)), "it is 2.01 or 0.99")
    assert holds(Fact("r", "range", (None, 0.0)), "-3 degrees") and not holds(Fact("r", "range", (None, 0.0)), "3")
    assert holds(Fact("r", "range", (10.0, None)), "10") and not holds(Fact("r", "range", (10.0, None)), "9.9")


def test_numbers_only_within_a_pattern():
    answer = "Revenue was 12 million in 2023 and costs were 7 million."
    assert holds(Fact("n", "number", 7.0, within=r"costs were ([\d.]+)"), answer)
    assert not holds(Fact("n", "number", 12.0, within=r"costs were ([\d.]+)"), answer)
    assert holds(Fact("n", "number", 12.0, within=r"REVENUE WAS \d+"), answer)  # no group: the whole match; any case
    assert holds(Fact("n", "range", (2000.0, 2100.0), within=r"in (\d+)"), answer)
    assert not holds(Fact("n", "range", (2000.0, 2100.0), within=r"costs were (\d+)"), answer)
    assert not holds(Fact("n", "number", 12.0, within=r"profit was (\d+)"), answer)


def test_patterns_and_phrases():
    assert holds(Fact("p", "pattern", r"\bparis\b"), "The capital is PARIS.")
    assert not holds(Fact("p", "pattern", r"\bparis\b"), "Parisian")
    assert holds(Fact("a", "any", ["Lyon", "Paris"]), "paris, of course")
    assert not holds(Fact("a", "any", ["Lyon", "Paris"]), "Marseille")


@pytest.mark.parametrize("answer, scores", [
    ("Paris has 2 million people.", {"fact_score": 1.0, "rules_coverage": 0.5, "is_correct": 1.0}),
    ("Paris, population unknown; I cannot calculate it.", {"fact_score": 0.5, "rules_coverage": 0.5, "is_correct": 0.0}),
    ("Lyon has 2 million people; cannot calculate more.", {"fact_score": 0.5, "rules_coverage": 0.0, "is_correct": 0.0}),
])
def test_check_scores(answer, scores):
    exp = Expectation("q1", facts=(Fact("city", "any", ["Paris"]), Fact("pop", "number", 2.0)),
                      list_items=("Paris", "Louvre"), correct=("city",), cannot_calculate=("cannot calculate",))
    got, details = check(exp, answer)
    assert got == scores
    assert details["question"] == "q1" and details["total_rules"] == 2
    assert details["missing_items"] == [i for i in ("Paris", "Louvre") if i.lower() not in answer.lower()]
    assert details["cannot_calculate"] == (["cannot calculate"] if "cannot calculate" in answer else [])


def test_check_without_facts_items_or_a_correct_rule():
    got, details = check(Expectation("q2", cannot_calculate=()), "anything")
    assert got == {"fact_score": None, "rules_coverage": None, "is_correct": None}
    assert details == {"question": "q2", "facts": {}, "cannot_calculate": []}
