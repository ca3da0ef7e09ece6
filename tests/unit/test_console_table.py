"""The per-model table a run prints at its end (ragscale.report.summary.format_table, issue 37):
one row per model under a header and a rule, the model id first (left-aligned, made safe), then the
records and the failed records (errors and failed judge engines: exitcodes.failed), then each metric
shown in tables under its label, with the catalog's decimals, ``-`` for none; the answerability
accuracy only when a model has one."""

from __future__ import annotations

from ragscale.report.summary import format_table


def summary(**models: dict) -> dict:
    return {"metrics": ["RB_agg", "Length", "RB_agg_zero_denominator", "umbrela_mean", "custom_x"], "models": models}


def test_the_table_exactly():
    s = summary(**{
        "model-a": {"count": 12, "errors": 1, "judge_failed": 2, "answerability_n": 0,
                    "metrics": {"RB_agg": 0.51234, "Length": 123.456, "RB_agg_zero_denominator": 0.0,
                                "umbrela_mean": None, "custom_x": 0.5}},
        "b\u202e": {"count": 3, "errors": 0, "judge_failed": 0,
                    "metrics": {"RB_agg": 1.0, "Length": 7.0, "RB_agg_zero_denominator": 1.0,
                                "umbrela_mean": 2.25, "custom_x": None}},
    })
    assert format_table(s).splitlines() == [
        "model_id   n  err  RB_agg  Length  UMBRELA  custom_x",
        "--------  --  ---  ------  ------  -------  --------",
        "model-a   12    3  0.5123   123.5        -    0.5000",
        "b\\u202e    3    0  1.0000     7.0   2.2500         -",
    ]


def test_answerability_accuracy_only_when_there_is_one():
    s = summary(a={"count": 2, "errors": 0, "judge_failed": 0, "answerability_n": 2, "answerability_accuracy": 0.5,
                   "metrics": dict.fromkeys(summary()["metrics"])},
                b={"count": 1, "errors": 1, "judge_failed": 0, "answerability_n": 0, "answerability_accuracy": None,
                   "metrics": dict.fromkeys(summary()["metrics"])})
    lines = format_table(s).splitlines()
    assert lines[0].split()[-1] == "AnsAcc" and lines[2].split()[-1] == "0.5000" and lines[3].split()[-1] == "-"
    assert lines[3].split()[:3] == ["b", "1", "1"]
