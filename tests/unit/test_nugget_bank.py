"""One nugget bank per query (``nuggets.bank=per_query``; ragscale/io/nugget_bank.py and the nuggets
judge's ``build_bank``/``bank`` options): the pooling, the mode, the bank's key, nuggets.jsonl, and
the rounds driven with a scripted LLM that makes one nugget per passage, so that which passages a
bank saw is visible in its nuggets."""

from __future__ import annotations

import ast
import os
import json
import random
import re

import pytest

from ragscale.errors import UserError
from ragscale.io import nugget_bank as nb
from ragscale.judges import nuggets
from ragscale.judges.base import JudgePrompt, JudgeResult, Undefined, drive
from ragscale.judges.judge_input import judge_input
from ragscale.metrics.nuggets import nugget_scores


def rec(model: str, task: str, passages: list[str], key: str | None = None, ids: list[str] | None = None,
        answer: str = "", error: str | None = None, query: str = "what is it?") -> dict:
    return {"key": key or f"{model}:{task}", "model_id": model, "task_id": task, "query": query,
            "passages": passages, "passage_ids": ids or [f"[{i + 1}]" for i in range(len(passages))],
            "prediction": answer, "error": error, "metrics": {}, "judge_errors": [], "details": {}}


# ---------------------------------------------------------------- pooling


def test_pool_interleaves_ranks_across_models_and_drops_repeated_passages():
    rows = [rec("m2", "q1", ["b1", "shared", "b3"]), rec("m1", "q1", ["a1", "shared"]),
            rec("m1", "q2", ["c1"])]
    q1, q2 = nb.pool(rows)
    assert q1["task_id"] == "q1" and q2["task_id"] == "q2"
    # depth pooling: every model's rank 1 (models in name order), then rank 2, ...; "shared" once
    assert q1["passages"] == ["a1", "b1", "shared", "b3"]
    assert q1["passage_ids"] == ["m1[1]", "m2[1]", "m1[2]", "m2[3]"]  # rank ids are the model's
    assert q1["models"] == ["m1", "m2"] and q1["records"] == 2 and q1["queries"] == 1
    assert q2["passages"] == ["c1"] and q2["models"] == ["m1"]


def test_pool_keeps_the_records_own_passage_ids_and_leaves_out_failed_records():
    rows = [rec("m1", "q1", ["a", "b"], ids=["doc-7", "doc-2"]), rec("m2", "q1", ["z"], error="bad input"),
            rec("m3", None, ["y"])]
    [q1] = nb.pool(rows)
    assert q1["passage_ids"] == ["doc-7", "doc-2"] and q1["models"] == ["m1"]


def test_pool_does_not_depend_on_the_input_order():
    rows = [rec(m, t, [f"{m}-{t}-{i}" for i in range(3)] + ["common"]) for m in ("a", "b", "c") for t in ("t1", "t2")]
    expected = nb.pool(rows)
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert nb.pool(shuffled) == expected


def test_pool_counts_records_that_ask_different_questions():
    [q] = nb.pool([rec("m1", "q", ["a"], query="one?"), rec("m2", "q", ["b"], query="two?")])
    assert q["query"] == "one?" and q["queries"] == 2
    assert "queries" in nb.entry(q, "k", None, "x")


def test_mode_auto_is_per_query_for_a_sweep_only():
    assert nb.mode("auto", 1) == "per_record" and nb.mode("auto", 2) == "per_query"
    assert nb.mode("per_query", 1) == "per_query" and nb.mode("per_record", 3) == "per_record"
    with pytest.raises(UserError, match="nuggets.bank must be one of auto, per_query, per_record"):
        nb.mode("pooled", 2)


def test_bank_key_changes_with_what_the_bank_depends_on_and_nothing_else():
    [row] = nb.pool([rec("m1", "q", ["a", "b"])])
    judge = {"engine": "llamacpp", "model": "m", "protocol": "constrained", "window": 10, "version": "v"}
    k = nb.bank_key(row, judge)
    assert k == nb.bank_key(dict(row, records=9, models=["x"]), dict(judge))
    changed = [dict(row, query="other?"), dict(row, passages=["a", "c"]), dict(row, passage_ids=["x", "y"])]
    assert all(nb.bank_key(r, judge) != k for r in changed)
    assert all(nb.bank_key(row, {**judge, f: "other"}) != k for f in judge)


# ---------------------------------------------------------------- nuggets.jsonl


def test_nuggets_jsonl_round_trip_in_task_order(tmp_path):
    [b, a] = nb.pool([rec("m", "t2", ["x"]), rec("m", "t1", ["y"])])  # in task order: t1, t2
    good = {"nuggets": [{"id": "n1", "text": "It is blue", "importance": "vital"}], "created": 3, "windows": 1,
            "passages_used": ["m[1]"], "passages_ungraded": []}
    entries = [nb.entry(a, "ka", good, None), nb.entry(b, "kb", None, "umbrela: no passages")]
    path = str(tmp_path / nb.FILE)
    nb.write(path, entries)
    assert [json.loads(line)["task_id"] for line in open(path)] == ["t1", "t2"]
    back = nb.read(path)
    assert back["t2"]["nuggets"] == good["nuggets"] and back["t1"]["failed"] == "umbrela: no passages"
    assert nb.banks(back.values()) == {"t2": {"key": "ka", "nuggets": good["nuggets"]},
                                       "t1": {"key": "kb", "failed": "umbrela: no passages"}}


@pytest.mark.parametrize("line, why", [
    ('{"nuggets": []}', "not an object with a task_id"),
    ('{"task_id": "t", "nuggets": [{"text": "x", "importance": "high"}]}', "nugget 1 needs a text and an importance"),
    ('{"task_id": "t", "nuggets": [{"text": " ", "importance": "vital"}]}', "nugget 1 needs a text"),
    ('{"task_id": "t"}', "no nuggets and no failure"),
    ("[1, 2", "Expecting"),
])
def test_a_bank_file_that_is_no_bank_is_one_line_naming_the_line(tmp_path, line, why):
    path = tmp_path / "bank.jsonl"
    path.write_text('{"task_id": "ok", "nuggets": [{"text": "a", "importance": "okay"}]}\n\n' + line + "\n")
    with pytest.raises(UserError, match=f"line 3 is not a nugget bank: {why}"):
        nb.read(str(path))
    with pytest.raises(UserError, match="cannot read"):
        nb.read(str(tmp_path / "absent.jsonl"))


def test_a_hand_written_bank_gets_ids_in_order(tmp_path):
    path = tmp_path / "bank.jsonl"
    path.write_text(json.dumps({"task_id": 7, "nuggets": [{"text": "a", "importance": "okay"},
                                                         {"text": "b", "importance": "vital", "id": "mine"}]}))
    bank = nb.read(str(path))["7"]
    assert [n["id"] for n in bank["nuggets"]] == ["n1", "mine"] and bank["key"] == "file"


# ---------------------------------------------------------------- the rounds, scripted


def scripted(prompt: JudgePrompt) -> str:
    """One nugget per context passage ("about <passage>"), added to the list so far; every nugget
    vital; a nugget is supported when its passage's text is in the answer."""
    text = prompt.messages[-1]["content"]
    last = lambda label: ast.literal_eval(re.findall(label + r": (\[.*\])", text)[-1])  # noqa: E731
    if "Updated Nugget List:" in text:
        passages = re.findall(r"^\[\d+\] (.*)$", text, re.M)
        made = [f"about {p}" for p in passages] or ["Not enough information, no answer found"]
        return json.dumps({"nuggets": last("Initial Nugget List") + made})
    if "<passage>" in text:
        answer = text.split("<passage>")[-1].split("</passage>")[0]
        return json.dumps({"assignment": ["support" if n[len("about "):] in answer else "not_support"
                                          for n in last("Nugget List")]})
    return json.dumps({"importance": ["vital"] * len(last("Nugget List"))})


def bank_of(row: dict, grades: list[int], window: int = 10, log: list | None = None) -> dict:
    row = dict(row, metrics={"umbrela_scores": grades})
    result = drive(nuggets.start(judge_input(row), build_bank=True, window=window),
                   lambda p: (log.append(p) if log is not None else None) or scripted(p))
    assert isinstance(result, JudgeResult) and result.metrics == {}
    return result.details


def test_a_bank_is_made_window_by_window_from_the_passages_graded_1_or_more():
    [row] = nb.pool([rec("m1", "q", ["p1", "p2", "p3"]), rec("m2", "q", ["p4", "p5"])])
    asked: list = []
    bank = bank_of(row, [3, 0, 1, 2, None], window=2, log=asked)
    # pooled: p1 p4 p2 p5 p3; graded >= 1: p1 p2 p5 -> windows [p1 p2] [p5]: two creation steps
    creations = [p for p in asked if "Updated Nugget List:" in p.messages[-1]["content"]]
    assert len(creations) == 2 and bank["windows"] == 2 and bank["created"] == 3
    assert [n["text"] for n in bank["nuggets"]] == ["about p1", "about p2", "about p5"]
    assert [n["id"] for n in bank["nuggets"]] == ["n1", "n2", "n3"]
    assert bank["passages_used"] == ["m1[1]", "m1[2]", "m2[2]"] and bank["passages_ungraded"] == ["m1[3]"]


def test_the_bank_of_a_query_without_question_or_grades_is_undefined():
    [row] = nb.pool([rec("m1", "q", ["p1"], query=" ")])
    assert drive(nuggets.start(judge_input(row), build_bank=True), scripted) == Undefined("no query")
    [row] = nb.pool([rec("m1", "q", ["p1"])])
    assert drive(nuggets.start(judge_input(row), build_bank=True), scripted) == Undefined("needs umbrela_scores")


def test_per_query_grades_two_models_against_one_bank_and_per_record_against_their_own():
    """The issue's proof: two models whose retrievers returned different passages for one query."""
    a = rec("m1", "q", ["Paris is the capital", "It has 2 million people"], answer="Paris is the capital")
    b = rec("m2", "q", ["The Seine crosses it", "Paris is the capital"], answer="The Seine crosses it")
    [row] = nb.pool([a, b])
    bank = {"q": {"key": "k1", **bank_of(row, [1, 1, 1])}}
    graded = {}
    for r in (a, b):
        out = drive(nuggets.start(judge_input(r), bank=bank), scripted)
        graded[r["model_id"]] = out
        assert out.details["bank"] == "k1"
    ids = {m: [(n["id"], n["text"]) for n in g.details["nuggets"]] for m, g in graded.items()}
    assert ids["m1"] == ids["m2"] == [("n1", "about Paris is the capital"), ("n2", "about The Seine crosses it"),
                                      ("n3", "about It has 2 million people")]
    assert graded["m1"].metrics == nugget_scores(["vital"] * 3, ["support", "not_support", "not_support"])
    assert graded["m2"].metrics == nugget_scores(["vital"] * 3, ["not_support", "support", "not_support"])
    own = {r["model_id"]: drive(nuggets.start(judge_input(dict(r, metrics={"umbrela_scores": [1, 1]}))), scripted)
           for r in (a, b)}
    assert [n["text"] for n in own["m1"].details["nuggets"]] != [n["text"] for n in own["m2"].details["nuggets"]]
    assert "bank" not in own["m1"].details


def test_a_record_without_a_bank_or_with_a_failed_one_is_null_with_the_reason():
    r = rec("m1", "q", ["p"], answer="an answer")
    assert drive(nuggets.start(judge_input(r), bank={}), scripted) == Undefined("no nugget bank for task 'q'")
    failed = {"q": {"key": "k", "failed": "umbrela: no passages"}}
    assert drive(nuggets.start(judge_input(r), bank=failed), scripted) == Undefined(
        "no nugget bank for task 'q': umbrela: no passages")
    ref = drive(nuggets.start(judge_input(r), bank=failed, protocol="reference"), scripted)
    assert ref.metrics["nuggets_vital"] == nuggets.NEUTRAL and ref.metrics["nuggets_all"] is None
    no_answer = rec("m1", "q", ["p"], answer="")
    assert drive(nuggets.start(judge_input(no_answer), bank=failed), scripted) == Undefined("no generated answer")


def test_reuse_takes_the_bank_file_then_an_earlier_bank_with_the_same_key_that_did_not_fail():
    rows = nb.pool([rec("m", t, ["p"]) for t in ("a", "b", "c", "d")])
    keys = ["ka", "kb", "kc", "kd"]
    given = {"a": {"task_id": "a", "key": "file", "nuggets": [{"id": "n1", "text": "x", "importance": "vital"}]}}
    earlier = {"a": {"task_id": "a", "key": "ka", "nuggets": []}, "b": {"task_id": "b", "key": "kb", "nuggets": [1]},
               "c": {"task_id": "c", "key": "old", "nuggets": [1]}, "d": {"task_id": "d", "key": "kd", "failed": "x"}}
    entries, todo = nb.reuse(rows, keys, given, earlier)
    assert entries == [given["a"], earlier["b"]]
    assert [(r["task_id"], k) for r, k in todo] == [("c", "kc"), ("d", "kd")]  # a changed key, a failed bank
    assert nb.reuse(rows, keys, {}, {}) == ([], list(zip(rows, keys)))


# ---------------------------------------------------------------- the plan


def plan_of(*overrides: str):
    from ragscale.plan import compose, plan_run

    return plan_run(compose(["+scenario=trec", "steps=[retrieval,nuggets]", *overrides]))


def test_the_plan_carries_the_bank_settings_only_with_the_nuggets_judge():
    pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")
    plan = plan_of()
    assert plan.nugget_bank == {"bank": "auto", "bank_file": None, "window": 10}
    assert "nuggets" not in plan.fingerprint()  # the default: fingerprints of earlier runs hold
    assert plan_of("nuggets.bank=per_query").fingerprint()["nuggets"] == {"bank": "per_query", "bank_file": None}
    assert plan_of("steps=[retrieval]").nugget_bank == {}


@pytest.mark.parametrize("override, message", [
    ("nuggets.bank=pooled", "nuggets.bank must be one of auto, per_query, per_record, got 'pooled'"),
    ("nuggets.window=0", "nuggets.window must be a positive integer, got 0"),
    ("nuggets.bank_file=/nonexistent/nuggets.jsonl", "nuggets.bank_file: cannot read /nonexistent/nuggets.jsonl"),
])
def test_bad_bank_settings_are_one_line_before_ray(override, message):
    pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")
    with pytest.raises(UserError, match=re.escape(message)):
        plan_of(override)


def test_a_bank_file_with_per_record_is_refused(tmp_path):
    pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")
    path = tmp_path / "b.jsonl"
    path.write_text('{"task_id": "t", "nuggets": [{"text": "a", "importance": "vital"}]}\n')
    with pytest.raises(UserError, match="nuggets.bank_file needs nuggets.bank=per_query or auto"):
        plan_of(f"nuggets.bank_file={path}", "nuggets.bank=per_record")
    assert plan_of(f"nuggets.bank_file={path}").nugget_bank["bank_file"] == str(path)


# ---------------------------------------------------------------- what a bank row and a bank line hold


def test_a_bank_row_is_what_the_judge_actor_reads():
    """The pooled row as the judge actor reads and writes it: its own key, no model, the
    placeholder answer UMBRELA's reference protocol needs, empty metrics, errors and details."""
    from ragscale.row import set_detail

    [row] = nb.pool([rec("m1", "q", ["a"], key="m1:1", ids=["d-a"]), rec("m1", "q", ["b", "a"], key="m1:2", query=None)])
    assert row == {"key": "bank:q", "task_id": "q", "model_id": "", "query": "what is it?", "prediction": nb.NO_ANSWER,
                   "passages": ["a", "b"], "passage_ids": ["d-a", "m1[1]"], "metrics": {}, "judge_errors": [],
                   "details": {}, "models": ["m1"], "records": 2, "queries": 2}
    set_detail(row, "nuggets", {"x": 1})  # the actor writes its details there
    inp = judge_input(row)
    assert (inp.key, inp.model_id, inp.prediction, dict(inp.metrics)) == ("bank:q", "", nb.NO_ANSWER, {})


def test_records_are_pooled_in_model_then_key_order_and_the_first_question_asked_is_the_querys():
    rows = [rec("b-model", "q", ["b1"], key="1"), rec("a-model", "q", ["a2"], key="2"),
            rec("a-model", "q", ["a1"], key="1", query=None)]
    [row] = nb.pool(rows)
    assert row["passages"] == ["a1", "a2", "b1"] and row["query"] == "what is it?" and row["queries"] == 2


def test_a_query_that_no_record_states_is_empty():
    [row] = nb.pool([rec("m", "q", ["a"], query=None), rec("n", "q", ["b"], query=" ")])
    assert row["query"] == "" and row["queries"] == 2


def test_a_record_with_fewer_ids_than_passages_names_the_rest_by_rank():
    [row] = nb.pool([rec("m", "q", ["a", "b"], ids=["d-a"])])
    assert row["passage_ids"] == ["d-a", "m[2]"]


def test_a_bank_line_holds_what_it_was_built_from_and_the_bank_or_why_not():
    [row] = nb.pool([rec("m1", "q", ["a", "b"]), rec("m2", "q", ["c"])])
    bank = {"nuggets": [{"id": "n1", "text": "t", "importance": "vital"}], "created": 4, "windows": 1,
            "passages_used": ["m1[1]"], "passages_ungraded": ["m2[1]"]}
    head = {"task_id": "q", "query": "what is it?", "key": "k", "models": ["m1", "m2"], "records": 2, "passages": 3}
    assert nb.entry(row, "k", bank, None) == {**head, **bank}
    assert nb.entry(row, "k", {"nuggets": bank["nuggets"], "created": 1, "windows": 1}, None) == {
        **head, "nuggets": bank["nuggets"], "created": 1, "windows": 1, "passages_used": [], "passages_ungraded": []}
    assert nb.entry(row, "k", None, "umbrela: no passages") == {**head, "failed": "umbrela: no passages"}
    assert nb.entry(row, "k", bank, "a failure wins") == {**head, "failed": "a failure wins"}
    assert nb.entry(row, "k", None, None) == {**head, "failed": "no bank"}
    [two] = nb.pool([rec("m1", "q", ["a"], query="one?"), rec("m2", "q", ["b"], query="two?")])
    assert nb.entry(two, "k", None, "x")["queries"] == 2
    del row["queries"]  # a row from before the count: one question
    assert "queries" not in nb.entry(row, "k", None, "x")


def test_the_bank_key_is_stable_across_releases_and_the_judges_key_order():
    """An earlier run's nuggets.jsonl is reused by its key: the key of a given bank must not change."""
    row = {"query": "Où est la gare ?", "passages": ["À gauche."], "passage_ids": ["p1"]}
    judge = {"engine": "llama.cpp", "model": "m", "seed": 0, "protocol": "constrained", "window": 10, "version": "v1"}
    key = nb.bank_key(row, judge)
    assert key == nb.bank_key(row, dict(reversed(list(judge.items()))))
    assert key == "09a2ae744f4633dc", key


def test_nuggets_jsonl_is_readable_by_a_person(tmp_path):
    """A bank is written to be reviewed: its text as written, not escaped."""
    [row] = nb.pool([rec("m", "q", ["a"])])
    path = str(tmp_path / nb.FILE)
    nb.write(path, [nb.entry(row, "k", {"nuggets": [{"id": "n1", "text": "Zürich – 1848", "importance": "vital"}],
                                         "created": 1, "windows": 1}, None)])
    assert "Zürich – 1848" in open(path, encoding="utf-8").read()
    assert os.listdir(tmp_path) == [nb.FILE]


def test_a_nugget_without_text_is_refused(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text('{"task_id": "t", "nuggets": [{"importance": "vital"}]}\n')
    with pytest.raises(UserError, match="line 1 is not a nugget bank: nugget 1 needs a text"):
        nb.read(str(path))


# ---------------------------------------------------------------- the judge's reasons, exactly


def failing(kind: str):
    """``scripted``, except that every ``kind`` prompt is answered with something unparseable."""
    marks = {"create": "Updated Nugget List:", "importance": "importance", "assign": "<passage>"}

    def respond(p: JudgePrompt) -> str:
        text = p.messages[-1]["content"]
        if kind == "create-empty" and "Updated Nugget List:" in text:
            return json.dumps({"nuggets": []})
        if kind == "importance-empty" and "Updated Nugget List:" not in text and "<passage>" not in text:
            return json.dumps({"importance": []})
        if kind in marks and marks[kind] in text and (kind != "importance" or "<passage>" not in text) \
                and (kind == "create" or "Updated Nugget List:" not in text):
            return "not json"
        return scripted(p)
    return respond


def test_a_bank_that_fails_says_why_under_both_protocols():
    [row] = nb.pool([rec("m", "q", ["a", "b"])])
    row = dict(row, metrics={"umbrela_scores": [1, 2]})
    got = drive(nuggets.start(judge_input(row), build_bank=True), failing("create-empty"))
    assert got == Undefined("the query's nugget bank failed: nugget creation returned no nuggets (window 1 of 1)")
    got = drive(nuggets.start(judge_input(row), build_bank=True, protocol="reference"), failing("create"))
    assert isinstance(got, Undefined) and got.reason.startswith(
        "the query's nugget bank failed: nugget creation failed (window 1 of 1): ")
    got = drive(nuggets.start(judge_input(row), build_bank=True, protocol="reference"), failing("importance"))
    assert isinstance(got, Undefined) and got.reason.startswith(
        "the query's nugget bank failed: importance batch 1 of 1 failed: ")
    got = drive(nuggets.start(judge_input(row), build_bank=True, protocol="reference"), failing("importance-empty"))
    assert got == Undefined("the query's nugget bank failed: importance batch 1 of 1 returned no labels")


def test_windows_of_one_passage_and_no_passage_at_all():
    [row] = nb.pool([rec("m", "q", ["a", "b", "c"])])
    asked: list = []
    bank = bank_of(row, [1, 1, 1], window=1, log=asked)
    assert bank["windows"] == 3 and [n["text"] for n in bank["nuggets"]] == ["about a", "about b", "about c"]
    [row] = nb.pool([rec("m", "q", ["a"])])
    asked = []
    bank = bank_of(row, [0], window=1, log=asked)  # nothing graded >= 1: one step with an empty context
    assert bank["windows"] == 1 and bank["passages_used"] == [] and len(asked) == 2  # creation, importance


def test_an_assignment_against_a_bank_says_why_it_failed():
    bank = {"q": {"key": "k", "nuggets": [{"id": "n1", "text": "about x", "importance": "vital"}]}}
    r = rec("m", "q", ["x"], answer="x")
    got = drive(nuggets.start(judge_input(r), bank=bank), failing("assign"))
    assert isinstance(got, Undefined) and got.reason.startswith("assignment batch 1 of 1 failed")
    ok = drive(nuggets.start(judge_input(r), bank=bank), scripted)
    assert ok.details == {"nuggets": [{"id": "n1", "text": "about x", "importance": "vital", "assignment": "support"}],
                          "bank": "k"}
    assert drive(nuggets.start(judge_input(dict(r, query=" ")), bank=bank), scripted) == Undefined("no query")
    ref = drive(nuggets.start(judge_input(dict(r, query=" ")), bank=bank, protocol="reference"), scripted)
    assert ref.details == {"failed": "no query"}
    ref = drive(nuggets.start(judge_input(dict(r, prediction="[1]")), bank=bank, protocol="reference"), scripted)
    assert ref.details == {"failed": "Generated passage cannot be empty."}
    assert drive(nuggets.start(judge_input(dict(r, task_id=None)), bank=bank), scripted) == Undefined(
        "no nugget bank for task None")


def test_a_record_without_a_bank_of_its_own_keeps_open_rag_eval_reasons_word_for_word():
    r = dict(rec("m", "q", ["x"], answer="x"), metrics={"umbrela_scores": [1]})
    got = drive(nuggets.start(judge_input(dict(r, query=" ")), protocol="reference"), scripted)
    assert got.details["failed"] == "Query cannot be empty."
    got = drive(nuggets.start(judge_input(dict(r, prediction="[1]")), protocol="reference"), scripted)
    assert got.details["failed"] == "Generated passage cannot be empty."
    assert drive(nuggets.start(judge_input(dict(r, metrics={"umbrela_scores": [None]}))), scripted) == Undefined(
        "no passage has a UMBRELA grade")
    assert drive(nuggets.start(judge_input(dict(r, metrics={"umbrela_scores": [True]}))), scripted) == Undefined(
        "umbrela_scores holds True, not a grade 0-3 or null")
