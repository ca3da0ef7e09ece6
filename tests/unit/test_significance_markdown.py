"""leaderboard.md's "Significance" section (docs/statistics.md, "Significance between models"): a heading
per metric (its short label, the name when it differs, the median design effect), "**A > B**" for a
significant difference, "A vs B: not distinguishable on these N tasks (U units)" otherwise, and the
method and settings in one closing line."""

from ragscale.report import significance as sig

UNIT = {"by": "conversation_id", "name": "conversation", "units": 4, "tasks": 12,
        "text": "resampled by conversation: 4 conversations (12 tasks)"}


def _pair(b, diff, ci, p, q, significant, **extra):
    return {"a": "m1", "b": b, "n": 12, "mean_a": 0.6, "mean_b": 0.6 - diff, "diff": diff, "ci": ci, "p": p,
            "p_adjusted": q, "significant": significant, "better": "m1" if significant else None, **extra}


def _summary(metrics, unit=UNIT):
    return {"significance": {"method": "paired bootstrap (BCa) + paired permutation test", "confidence": 0.95,
                             "alpha": 0.05, "correction": "holm", "design": "all-pairs", "resamples": 1000,
                             "unit": unit, "metrics": metrics}}


def test_conversations_resampled_the_section_exactly():
    summary = _summary({"BertscoreP": [
        _pair("m2", 0.2, [0.1, 0.3], 0.001, 0.002, True, units=4, design_effect=1.5),
        _pair("m3", 0.02, [-0.1, 0.13], 0.4, 0.8, False, units=4, design_effect=2.5)]})
    assert sig.markdown_lines(summary, title="Significance (run1)", numbers="run1/significance.csv") == [
        "## Significance (run1)",
        "",
        "### BertP (BertscoreP), design effect 2.00",
        "",
        "- **m1 > m2**, difference 0.2000 [0.1000, 0.3000], adjusted p = 0.002",
        "- m1 vs m3: not distinguishable on these 12 tasks (4 conversations) (difference 0.0200 "
        "[-0.1000, 0.1300], adjusted p = 0.800)",
        "",
        "Method: paired bootstrap (BCa) + paired permutation test. resampled by conversation: 4 conversations "
        "(12 tasks); 95% confidence intervals; significance level α = 0.05; p-values adjusted for multiple "
        "comparisons (holm); every pair of models compared. The interval is not adjusted for multiple "
        "comparisons; `significant` uses the adjusted p. run1/significance.csv has every number.",
    ]


def test_tasks_resampled_a_metric_named_by_its_label_alone_without_design_effect():
    task = {"by": None, "name": "task", "units": 12, "tasks": 12, "text": "resampled by task: 12 tasks"}
    lines = sig.markdown_lines(_summary({"RB_agg": [_pair("m2", 0.01, [-0.02, 0.04], 0.5, 0.5, False)]}, task))
    assert lines[2:5] == ["### RB_agg", "",
                          "- m1 vs m2: not distinguishable on these 12 tasks (difference 0.0100 [-0.0200, 0.0400], "
                          "adjusted p = 0.500)"]


def test_a_comparison_without_a_task_count_says_these_tasks_and_its_note():
    pair = _pair("m2", 0.01, None, None, None, False, note="no paired tasks") | {"n": None}
    lines = sig.markdown_lines(_summary({"RB_agg": [pair]}))
    assert lines[4] == "- m1 vs m2: not distinguishable on these tasks (difference 0.0100) — no paired tasks"


def test_no_readable_block_no_section():
    assert sig.markdown_lines({"metrics": ["RB_agg"]}) == []
    assert sig.markdown_lines({"significance": {"metrics": {"RB_agg": []}}}) == []
