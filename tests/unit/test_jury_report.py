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
