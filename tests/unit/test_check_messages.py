"""The input check's refusal line (ragscale.io.check, issue 37): which metrics need the missing
field, how many records were checked, the columns found (at most 12), and the column_map that
would read them, in the user's own names; "the data" for in-memory data."""

from __future__ import annotations

import pytest

from ragscale.errors import UserError
from ragscale.io import check
from ragscale.io.inputs import InputFile


def test_which_metrics_need_it():
    assert check._need(["exact_match"], "reference") == "exact_match needs a reference answer"
    assert check._need(["a", "b"], "contexts") == "a, b need retrieved passages"
    assert check._need(list("abcde"), "question") == "a, b, c, d ... need a question"
    assert check._need(list("abcd"), "answer") == "a, b, c, d need an answer"


def test_the_refusal_line(tmp_path):
    f = InputFile(str(tmp_path / "in.jsonl"), "jsonl", "in", "t0")
    records = [{"prompt": "q", "output": "a"}, {"prompt": "q2", "gold": "r", "extra": 1}, "not an object"]
    with pytest.raises(UserError) as e:
        check._refuse(f, records, ["reference"], ["exact_match"])
    assert str(e.value) == (f"{f.path}: exact_match needs a reference answer, and no record has one (3 checked); its "
                            "columns: prompt, output, gold, extra; name your columns with column_map={'reference': 'gold'} "
                            "in Python, columns.reference=gold on the command line")  # gold: a synonym of reference
    with pytest.raises(UserError) as e:
        check._refuse(f, ["x"] * check.SAMPLE, ["answer"], [])
    assert str(e.value).startswith(f"{f.path}: no record has an answer (the first {check.SAMPLE} checked); its columns: "
                                   "none (no JSON objects); name its column with column_map={'answer': NAME}")
    many = [{f"c{i}": 1 for i in range(14)}]
    with pytest.raises(UserError, match=r"its columns: c0, c1, .*, c11, \.\.\.; "):
        check._refuse(f, many, ["answer"], [])
    written = InputFile(str(tmp_path / "inputs" / "0123456789ab" / "data.jsonl"), "jsonl", "data", "t1")
    with pytest.raises(UserError, match=r"^the data: no record has an answer \(1 checked\)"):
        check._refuse(written, [{"q": 1}], ["answer"], [])


def test_the_suggestion_in_the_users_names():
    found = ["user_input", "response", "retrieved_contexts", "model"]
    line = check.suggestion(found, ["answer", "question", "contexts"], {})
    assert line.startswith("name your columns with column_map={") and line.endswith(" on the command line")
    assert "'answer': 'response'" in line and "columns.answer=response" in line
    assert "'question': 'user_input'" in line and "'contexts': 'retrieved_contexts'" in line
    # a column already mapped to another field is not suggested again
    assert "response" not in check.suggestion(found, ["answer"], {"question": "response"}).split("column_map=")[1][:30]
    assert check.suggestion(["zzz"], ["reference"], {}) == (
        "name its column with column_map={'reference': NAME} in Python, columns.reference=NAME on the command line")
