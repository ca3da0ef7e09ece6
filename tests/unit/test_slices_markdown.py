"""What the reports print of summary.json's ``slices`` block (ragscale.report.slices,
docs/statistics.md "Slices"): leaderboard.md's "Where models lose" section line by line (the
findings, the sentence on what was tested, one table per field with each model's mean (n)), and the
HTML report's context of the same section."""

import pytest

from ragscale.report.slices import finding_text, markdown_lines, slices_context

TAIL = ". Every slice's means: summary.json `slices`."


def finding(**kw):
    base = {"metric": "RB_agg", "field": "Collection", "value": "Govt", "worse": "m1", "better": "m2",
            "difference": 0.125, "ci": [0.0625, 0.1875], "p_adjusted": 0.004, "n": 24, "reversal": False}
    return {**base, **kw}


def block(**kw):
    levels = {"FiQA": {"tasks": 5, "models": {"m1": {"mean": 0.5, "n": 5}, "m2": {"mean": 0.25, "n": 4}}},
              "Govt": {"tasks": 4, "models": {"m2": {"mean": 0.125, "n": 4}}}}
    base = {"by": ["Collection", "Multi-Turn", "turn"], "metric": "RB_agg", "min_n": 10, "tests": 3,
            "method": "paired tests", "unit": {"text": "resampled by conversation: 3 conversations (9 tasks)"},
            "findings": [finding()],
            "fields": {"Collection": {"levels": levels},
                       "Multi-Turn": {"levels": {"Follow-up": {"tasks": 2, "models": {}}}},
                       "turn": {"levels": {"1": {"models": {"m1": {"mean": 1.0, "n": 1}}}}}}}
    return {**base, **kw}


def test_the_where_models_lose_section_line_by_line():
    assert markdown_lines({"slices": block()}) == [
        "## Where models lose",
        "",
        f"- {finding_text(finding())}",
        "",
        "3 slice tests of RB_agg by Collection, Multi-Turn, turn (slices with at least 10 tasks), paired tests; "
        "resampled by conversation: 3 conversations (9 tasks)" + TAIL,
        "",
        "### Collection",
        "",
        "| Collection | tasks | m1 | m2 |",
        "|---|---:|---:|---:|",
        "| FiQA | 5 | 0.5000 (5) | 0.2500 (4) |",
        "| Govt | 4 | – | 0.1250 (4) |",
        "",
        "### turn",
        "",
        "| turn | tasks | m1 |",
        "|---|---:|---:|",
        "| 1 |  | 1.0000 (1) |",
        "",
    ]


def test_without_findings_the_section_says_so_and_without_a_unit_or_count_still_prints():
    b = {k: v for k, v in block(findings=["?"], fields={}, by=["Collection"]).items() if k not in ("tests", "unit")}
    assert markdown_lines({"slices": b}) == [
        "## Where models lose",
        "",
        ("No slice where a model is significantly worse than another or than its own overall mean "
         "(slices by Collection)."),
        "",
        "0 slice tests of RB_agg by Collection (slices with at least 10 tasks), paired tests" + TAIL,
        "",
    ]


@pytest.mark.parametrize("count, limit, listed, more", [
    (30, 30, 30, None),
    (31, 30, 30, "- ... and 1 more (summary.json slices.findings)"),
    (5, 2, 2, "- ... and 3 more (summary.json slices.findings)"),
])
def test_the_section_lists_at_most_limit_findings_then_a_count(count, limit, listed, more):
    found = [finding(n=i) for i in range(count)]
    kw = {} if limit == 30 else {"limit": limit}
    lines = markdown_lines({"slices": block(findings=found, fields={})}, **kw)
    shown = [line for line in lines if line.startswith("- ")]
    want = [f"- {finding_text(f)}" for f in found[:listed]] + ([more] if more else [])
    assert shown == want and lines[2:2 + len(want)] == want and lines[2 + len(want)] == ""


@pytest.mark.parametrize("summary", ["?", None, {}, {"slices": "?"}, {"slices": {"fields": "?"}}, {"slices": {}}])
def test_no_section_without_a_slices_block(summary):
    assert markdown_lines(summary) == []


def test_the_report_context_of_the_section():
    b = block(fields={"Multi-Turn": "?", "Empty": {"levels": {}},
                      "Collection": {"levels": {"FiQA": {"tasks": 5, "models": {"m1": {"mean": 0.5, "n": 5}}}}}},
              unit="resampled by conversation", findings=[finding(reversal=True), finding(), 3])
    assert slices_context({"slices": b}) == {
        "metric": "RB_agg", "label": "RB_agg", "findings": [finding_text(finding(reversal=True)),
                                                            finding_text(finding())],
        "reversals": 1, "tables": [{"field": "Collection", "models": ["m1"],
                                    "rows": [{"value": "FiQA", "tasks": 5,
                                              "cells": [{"text": "0.5000 (5)", "title": "n=5"}]}]}],
        "by": "Collection, Multi-Turn, turn", "tests": 3, "min_n": 10, "method": "paired tests", "unit": None}


def test_the_report_context_names_the_metric_by_its_catalog_label():
    from ragscale.metrics.registry import label

    ctx = slices_context({"slices": block(metric="RL_F", fields={})})
    assert ctx["label"] == label("RL_F") and ctx["unit"] == "resampled by conversation: 3 conversations (9 tasks)"
