"""The jury block of a run (ragscale.report.jury): the panel members' scores read from the records'
``<metric>@<judge>`` columns, Krippendorff's alpha at the metric's level, each judge against the rest,
the disagreements; per-passage grades judged per passage; errored records left out; the report's
and leaderboard.md's figures read back from the block."""

import numpy as np
import pytest

from ragscale.report.agreement import panel_members
from ragscale.report.jury import JuryValues, console_lines, jury_context, markdown_lines, panel_of
from ragscale.stats.krippendorff import alpha


def rec(task, a, b, c=None, model="m1", **extra):
    metrics = {"RB_llm@a": None if a is None else [a], "RB_llm@b": None if b is None else [b]}
    if c is not None:
        metrics["RB_llm@c"] = [c]
    return {"task_id": task, "model_id": model, "metrics": metrics, **extra}


def test_panel_of_the_columns():
    assert panel_of(["RB_llm@a", "RB_llm@b", "idk_eval@a", "plain", "x@"]) == {"RB_llm": ["a", "b"],
                                                                              "idk_eval": ["a"]}
    assert panel_members("RB_llm", {"RB_llm", "RB_llm@b", "RB_llm@a", "RB_llm_idk"}) == ["RB_llm@a", "RB_llm@b"]


def test_alpha_and_disagreements_of_a_two_judge_panel():
    rng = np.random.default_rng(0)
    a = rng.integers(1, 11, 40) / 10
    b = np.clip(a + rng.choice([-0.1, 0, 0.1], 40), 0.1, 1.0)
    b[7] = 1.0 if a[7] < 0.5 else 0.1  # one planted disagreement
    jury = JuryValues({"RB_llm": ["a", "b"], "idk_eval": ["a"]})  # a one-judge "panel" has no agreement
    for i in range(40):
        jury.add(rec(f"t{i}", float(a[i]), float(b[i])))
    jury.add({**rec("t99", 0.1, 1.0), "error": {"stage": "judge", "reason": "x"}})  # errored: left out
    block = jury.block()
    m = block["metrics"]["RB_llm"]
    assert list(block["metrics"]) == ["RB_llm"] and m["level"] == "ordinal" and m["records"] == 40
    assert m["alpha"] == pytest.approx(alpha(np.vstack([a, b]), "ordinal"))
    assert m["judges"]["a"]["alpha_vs_rest"] == pytest.approx(m["alpha"]) and m["judges"]["b"]["n"] == 40
    assert m["disagreements"][0]["record"] == "m1 · task_id=t7"
    assert m["disagreements"][0]["range"] == pytest.approx(abs(a[7] - b[7]))
    summary = {"jury": block}
    line = console_lines(summary)[0]
    assert line.startswith(f"jury on RB_llm: Krippendorff's alpha {m['alpha']:.2f} (ordinal, 2 judges, 40 records)")
    md = "\n".join(markdown_lines(summary))
    assert f"| RB_llm | ordinal | 40 | {m['alpha']:.3f} | a: {m['judges']['a']['alpha_vs_rest']:.2f}" in md
    ctx = jury_context(summary)
    assert ctx["rows"][0]["alpha"] == f"{m['alpha']:.3f}" and ctx["worst"][0]["record"] == "m1 · task_id=t7"


def test_flags_are_nominal_and_grades_per_passage():
    jury = JuryValues({"idk_eval": ["a", "b", "c"], "umbrela_scores": ["a", "b"]})
    for i, (x, y, z) in enumerate([(1, 1, 0), (0, 0, 0), (1, 1, 1), (0, 1, 0)]):
        jury.add({"task_id": f"t{i}", "model_id": "m", "metrics": {
            "idk_eval@a": [x], "idk_eval@b": [y], "idk_eval@c": [z],
            "umbrela_scores@a": [3, 2, 0], "umbrela_scores@b": [3, 1, None]}})
    block = jury.block()["metrics"]
    assert block["idk_eval"]["level"] == "nominal"
    assert block["idk_eval"]["alpha"] == pytest.approx(alpha(np.array([[1, 0, 1, 0], [1, 0, 1, 1], [0, 0, 1, 0]]),
                                                             "nominal"))
    grades = block["umbrela_scores"]
    assert grades["level"] == "ordinal" and grades["records"] == 8  # 4 records x 2 passages both judges graded
    assert grades["disagreements"][0]["record"].endswith("· passage 2")


def test_a_judge_that_never_scored_is_counted_not_fatal():
    jury = JuryValues({"RB_llm": ["a", "b"]})
    for i in range(5):
        jury.add(rec(f"t{i}", 0.1 * i, None))
    m = jury.block()["metrics"]["RB_llm"]
    assert m["alpha"] is None and m["records"] == 0 and m["judges"]["b"]["n"] == 0
    assert "alpha undefined" in console_lines({"jury": {"metrics": {"RB_llm": m}}})[0]


def ids_of(jury, metric="RB_llm"):
    return [d["record"] for d in jury.block()["metrics"][metric]["disagreements"]]


def test_each_unit_is_named_once_by_model_task_and_run():
    jury = JuryValues({"RB_llm": ["a", "b"]})
    jury.add({**rec("t1", 0.1, 0.9), "error": {"stage": "judge"}})  # left out, and not counted
    jury.add("not a record")
    jury.add({"model_id": "m1", "metrics": "none"})
    jury.add(rec("t1", 0.1, 0.9))
    jury.add(rec("t1", 0.2, 0.7))  # the same task again: numbered by its place among the records kept
    jury.add({"model_id": "m2", "metrics": {"RB_llm@a": [0.3], "RB_llm@b": [0.6]}})  # no task: its place
    jury.add(rec(None, 0.4, 0.5, query_id="q7", query_run=2))
    jury.add(rec(None, 0.45, 0.5, query_id="q7", query_run=0))
    assert sorted(ids_of(jury)) == sorted(["m1 · task_id=t1", "m1 · task_id=t1 #2", "m2 · record 3",
                                           "m1 · query_id=q7 · run 2", "m1 · query_id=q7 · run 0"])
    assert jury.block()["metrics"]["RB_llm"]["records"] == 5


def test_per_passage_grades_of_unequal_lengths_and_a_panel_of_both_kinds():
    jury = JuryValues({"umbrela_scores": ["a", "b"], "RB_llm": ["a", "b"]})
    jury.add({"task_id": "t1", "model_id": "m", "metrics": {
        "umbrela_scores@a": [3, 2, 1], "umbrela_scores@b": [0, 2], "RB_llm@a": [0.2], "RB_llm@b": [0.9]}})
    jury.add({"task_id": "t2", "model_id": "m", "metrics": {
        "umbrela_scores@a": None, "umbrela_scores@b": [None, "x"], "RB_llm@a": [0.5], "RB_llm@b": [0.5]}})
    jury.add({"task_id": "t3", "model_id": "m", "metrics": {"umbrela_scores@b": [float("nan"), 1],
                                                            "RB_llm@a": [0.5], "RB_llm@b": [0.4]}})
    block = jury.block()["metrics"]
    # t1's third passage has a's grade only, t2 has no grade at all, t3's first passage is NaN: not a grade;
    # the units both judges graded are t1's first two passages
    grades = block["umbrela_scores"]
    assert grades["records"] == 2 and (grades["judges"]["a"]["n"], grades["judges"]["b"]["n"]) == (3, 3)
    assert ids_of(jury, "umbrela_scores") == ["m · task_id=t1 · passage 1"]  # 3 against 0; passage 2: 2 and 2
    assert block["RB_llm"]["records"] == 3  # the scalar metric after the per-passage one is read too


def test_the_console_names_the_judge_least_in_line_with_the_rest():
    summary = {"jury": {"metrics": {
        "RB_llm": {"alpha": 0.5, "level": "ordinal", "records": 9,
                   "judges": {"a": {"alpha_vs_rest": 0.7}, "b": {"alpha_vs_rest": 0.25}, "c": {"alpha_vs_rest": None}}},
        "idk_eval": {"alpha": None, "level": "nominal", "records": 0, "judges": {"a": {"alpha_vs_rest": None}}},
        "RL_F": {"alpha": 0.9, "level": "interval", "records": 3, "judges": "?"}}}}
    assert console_lines(summary) == [
        "jury on RB_llm: Krippendorff's alpha 0.50 (ordinal, 3 judges, 9 records); least in line with the rest: "
        "b (0.25)",
        "jury on idk_eval: Krippendorff's alpha undefined (nominal, 1 judges, 0 records)",
        "jury on RL_F: Krippendorff's alpha 0.90 (interval, 0 judges, 3 records)"]
    assert console_lines({"jury": "?"}) == console_lines({}) == console_lines("?") == []


def test_the_block_says_how_it_was_computed_and_the_report_shows_numbers_only():
    jury = JuryValues({"RB_llm": ["a", "b"]})
    for i in range(4):
        jury.add(rec(f"t{i}", 0.25 * i, 0.25 * i + 0.1))
    block = jury.block()
    assert block["method"] == ("Krippendorff's alpha across the panel (judges as coders, records as units); each "
                               "judge against the verdict of the others (their median; majority for a flag)")
    assert JuryValues({"RB_llm": ["a"]}).block() is None  # no panel of two
    block["metrics"]["RB_llm"]["disagreements"][0]["scores"] = {"a": float("inf"), "b": "nan", "c": 0.5}
    block["metrics"]["RB_llm"]["alpha"] = "n/a"
    ctx = jury_context({"jury": block})
    assert ctx["rows"][0]["alpha"] == "–" and ctx["worst"][0]["scores"] == "a: –, b: –, c: 0.500"


def test_a_judge_name_may_hold_the_separator_of_the_metric():
    assert panel_of(["RB_llm@org@model", "RB_llm@b"]) == {"RB_llm@org": ["model"], "RB_llm": ["b"]}
