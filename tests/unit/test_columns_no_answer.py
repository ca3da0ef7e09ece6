"""The message of a record with no answer (ragscale.columns.no_answer): the names ragscale reads,
the record's first 12 fields ("..." after them), and the mapping that would read it: the likely
column when one is there, else a placeholder."""

from __future__ import annotations

import pytest

from ragscale.columns import no_answer

HEAD = ("no answer: the record has none of response, answer (ragas), predictions (MT-RAG), generated_answer "
        "(open-rag-eval); its fields: ")
PLACEHOLDER = "name the answer's column with columns.answer=NAME (column_map={'answer': NAME} in Python)"


@pytest.mark.parametrize("n, listed", [
    (11, ", ".join(f"f{i}" for i in range(11))),
    (12, ", ".join(f"f{i}" for i in range(12))),
    (13, ", ".join(f"f{i}" for i in range(12)) + ", ..."),
    (20, ", ".join(f"f{i}" for i in range(12)) + ", ..."),
])
def test_the_first_12_fields_are_listed_then_an_ellipsis(n, listed):
    assert no_answer({f"f{i}": i for i in range(n)}) == f"{HEAD}{listed}; {PLACEHOLDER}"


def test_a_record_without_fields_says_none():
    assert no_answer({}) == f"{HEAD}none; {PLACEHOLDER}"


def test_a_record_without_a_likely_column_gets_a_placeholder():
    assert no_answer({"query": "q", "docs": []}) == f"{HEAD}query, docs; {PLACEHOLDER}"


def test_a_likely_column_is_named_in_both_forms():
    assert no_answer({"query": "q", "Generated": "a", 7: "x"}) == (
        f"{HEAD}query, Generated, 7; name the answer's column with columns.answer=Generated "
        "(column_map={'answer': 'Generated'} in Python)")
