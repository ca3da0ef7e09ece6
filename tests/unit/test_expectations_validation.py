"""Expectations files (ragscale.io.expectations): what a valid file loads to, the exact one-line
message each mistake gets (naming the file, the question and the fact), and the fact rules that the
messages and defaults decide."""

from __future__ import annotations

import hashlib

import pytest

from ragscale.errors import UserError
from ragscale.io.expectations import (DEFAULT_CANNOT_CALCULATE, Expectation, Expectations, Fact, check,
                                      load_expectations, numbers, parse_expectations)

KINDS = "['any', 'pattern', 'number', 'range']"
STRINGS = "must be a non-empty list of non-empty strings"


def _one(fact, **question):
    return {"questions": [{"id": "a", "facts": [fact], **question}]}


def _error(data) -> str:
    with pytest.raises(UserError) as err:
        parse_expectations(data, "x.yaml")
    return str(err.value)


def test_a_file_loads_to_its_questions_by_id_and_by_text():
    data = {"cannot_calculate": ["no idea"], "questions": [
        {"id": 7, "facts": [{"name": " n ", "number": 3, "tolerance": 0.5}], "correct": ["n"],
         "cannot_calculate": "cannot say"},
        {"question": "What  is THE rate?", "list_items": "Rule C-1",
         "facts": [{"name": "p", "pattern": "rate", "within": None}, {"name": "r", "range": [None, 2]},
                   {"name": "y", "any": "yes"}]},
    ]}
    by_text = Expectation("What  is THE rate?", (Fact("p", "pattern", "rate"), Fact("r", "range", (None, 2.0)),
                                                 Fact("y", "any", ("yes",))), ("Rule C-1",), None, ("no idea",))
    assert parse_expectations(data, "x.yaml") == Expectations("x.yaml", "", by_id={
        "7": Expectation("7", (Fact("n", "number", 3.0, 0.5),), (), ("n",), ("cannot say",))},
        by_question={"what is the rate?": by_text})


def test_without_cannot_calculate_phrases_the_defaults_apply():
    exps = parse_expectations(_one({"name": "x", "number": 1}), "x.yaml")
    assert exps.find("a", None).cannot_calculate == DEFAULT_CANNOT_CALCULATE


def test_load_reads_the_file_and_keeps_its_path_and_hash(tmp_path):
    p = tmp_path / "exp.yaml"
    p.write_text("questions:\n  - id: q1\n    list_items: [Paris]\n")
    exps = load_expectations(str(p))
    assert exps == Expectations(str(p), hashlib.sha256(p.read_bytes()).hexdigest(),
                                by_id={"q1": Expectation("q1", list_items=("Paris",))})


def test_load_errors_are_one_line_and_name_the_file(tmp_path):
    missing = tmp_path / "missing.yaml"
    with pytest.raises(UserError) as err:
        load_expectations(str(missing))
    assert str(err.value) == f"custom.expectations: cannot read {missing}: No such file or directory"
    bad = tmp_path / "bad.yaml"
    bad.write_text("questions: [\n")
    with pytest.raises(UserError) as err:
        load_expectations(str(bad))
    assert str(err.value) == f"{bad}: not valid YAML: while parsing a flow node"
    bad.write_text("questions: 1\n")
    with pytest.raises(UserError) as err:
        load_expectations(str(bad))
    assert str(err.value) == f"{bad}: 'questions' must be a non-empty list"


def test_a_yaml_error_without_a_message_still_gets_one(tmp_path, monkeypatch):
    import yaml

    def fail(_blob):
        raise yaml.YAMLError()

    monkeypatch.setattr(yaml, "safe_load", fail)
    p = tmp_path / "e.yaml"
    p.write_text("x")
    with pytest.raises(UserError) as err:
        load_expectations(str(p))
    assert str(err.value) == f"{p}: not valid YAML: invalid YAML"


@pytest.mark.parametrize("data, message", [
    ([], "x.yaml: expected a mapping with 'questions'"),
    ({"cannot_calculate": [], "questions": [{"id": "a", "list_items": ["b"]}]}, f"x.yaml: cannot_calculate {STRINGS}"),
    ({"questions": ["a"]}, "x.yaml: questions[0] must be a mapping"),
    ({"questions": [{"list_items": ["b"]}]},
     "x.yaml: questions[0] needs an id (the records' task_id) or a question text"),
    ({"questions": [{"id": "a", "facts": {"name": "x"}}]}, "x.yaml: question a: facts must be a list"),
    ({"questions": [{"id": "a", "facts": [{"name": "x", "number": 1}, {"name": "x", "any": ["y"]}]}]},
     "x.yaml: question a: fact names must be unique, got ['x', 'x']"),
    ({"questions": [{"id": "a", "list_items": ["b", " "]}]}, f"x.yaml: question a: list_items {STRINGS}"),
    ({"questions": [{"id": "a", "list_items": ["b", 3]}]}, f"x.yaml: question a: list_items {STRINGS}"),
    ({"questions": [{"id": "a", "list_items": ["b"], "correct": []}]}, f"x.yaml: question a: correct {STRINGS}"),
    ({"questions": [{"id": "a", "list_items": ["b"], "cannot_calculate": []}]},
     f"x.yaml: question a: cannot_calculate {STRINGS}"),
])
def test_file_and_question_errors(data, message):
    assert _error(data) == message


@pytest.mark.parametrize("fact, message", [
    ("has_604", "must be a mapping like {name: has_604, number: 604}"),
    ({"name": "x", "numbr": 1}, f": unknown key(s) ['numbr']; a fact has name, one of {KINDS}, "
                                "optionally tolerance (number) and within (number, range)"),
    ({"number": 1}, "needs a name"),
    ({"name": "  ", "number": 1}, "needs a name"),
    ({"name": "x"}, f"(x) needs exactly one of {KINDS}, got none"),
    ({"name": "x", "number": 1, "pattern": "y"}, f"(x) needs exactly one of {KINDS}, got ['pattern', 'number']"),
    ({"name": "x", "number": 1, "tolerance": "0.1"}, "(x).tolerance must be a number, got '0.1'"),
    ({"name": "x", "number": 1, "tolerance": -1}, "(x).tolerance must be >= 0, got -1"),
    ({"name": "x", "number": "604"}, "(x).number must be a number, got '604'"),
    ({"name": "x", "number": None}, "(x).number must be a number, got None"),
    ({"name": "x", "number": True}, "(x).number must be a number, got True"),
    ({"name": "x", "pattern": ""}, "(x).pattern must be a non-empty string (a regular expression)"),
    ({"name": "x", "pattern": 5}, "(x).pattern must be a non-empty string (a regular expression)"),
    ({"name": "x", "pattern": "("},
     "(x).pattern is not a valid regular expression: missing ), unterminated subpattern at position 0"),
    ({"name": "x", "number": 1, "within": 5}, "(x).within must be a non-empty string (a regular expression)"),
    ({"name": "x", "range": 30}, "(x).range must be [low, high] (null for an open end)"),
    ({"name": "x", "range": "30"}, "(x).range must be [low, high] (null for an open end)"),
    ({"name": "x", "range": [1, 2, 3]}, "(x).range must be [low, high] (null for an open end)"),
    ({"name": "x", "range": ["a", 1]}, "(x).range[0] must be a number, got 'a'"),
    ({"name": "x", "range": [1, "b"]}, "(x).range[1] must be a number, got 'b'"),
    ({"name": "x", "range": [None, None]}, "(x).range needs at least one bound"),
    ({"name": "x", "range": [5, 1.5]}, "(x).range is empty: 5 > 1.5"),
    ({"name": "x", "any": []}, f"(x).any {STRINGS}"),
])
def test_fact_errors_name_the_question_the_fact_and_the_field(fact, message):
    got = _error(_one(fact))
    sep = "" if message.startswith(":") else " "
    assert got == f"x.yaml: question a: facts[0]{sep}{message}"


def test_a_range_of_one_value_is_allowed():
    fact = parse_expectations(_one({"name": "x", "range": [5, 5]}), "x.yaml").find("a", None).facts[0]
    assert fact == Fact("x", "range", (5.0, 5.0))
    assert fact.holds("it is 5", [5.0]) and not fact.holds("it is 6", [6.0])


def holds(fact: Fact, answer: str) -> bool:
    return fact.holds(answer, numbers(answer))


def test_within_a_group_only_the_groups_numbers_count():
    answer = "Revenue was 12 million in 2023."
    assert not holds(Fact("n", "range", (2000.0, 2100.0), within=r"(\d+) million in \d+"), answer)
    assert holds(Fact("n", "range", (2000.0, 2100.0), within=r"\d+ million in \d+"), answer)


def test_within_an_optional_group_that_did_not_match_the_whole_match_counts():
    fact = Fact("n", "number", 12.0, within=r"(\d+) units|\d+ items")
    assert holds(fact, "12 units, 3 items") and holds(fact, "3 units, 12 items")
    assert not holds(fact, "3 units, 4 items, 12 boxes")


def test_a_number_fact_has_no_relative_tolerance():
    assert holds(Fact("n", "number", 1e12), "1000000000000 units")
    assert not holds(Fact("n", "number", 1e12), "1000000000500 units")
    assert holds(Fact("n", "number", 1e12, tolerance=500.0), "1000000000500 units")


def test_check_details_with_list_items():
    exp = Expectation("q", (Fact("f", "any", ("Paris",)),), ("Louvre", "Orsay", "Rule C-1"), ("f",), ("no idea",))
    scores, details = check(exp, "Paris: the Louvre, no idea about Rule C-1.")
    assert scores == {"fact_score": 1.0, "rules_coverage": 2 / 3, "is_correct": 0.0}
    assert details == {"question": "q", "facts": {"f": True}, "cannot_calculate": ["no idea"],
                       "rules_found": 2, "total_rules": 3, "missing_items": ["Orsay"]}
