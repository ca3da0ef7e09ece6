"""ragscale.report.significance's rules: which metrics the report pass collects (the compared metrics
of the first 4 headline candidates), which ones a run's block compares (those of the headline it
ranks by, after a fallback too), renaming models, and the console's limit of 20 lines."""

from dataclasses import replace

import numpy as np
import pytest

from ragscale.config import SignificanceConf
from ragscale.report import significance as sig

MTRAG = ["RB_agg", "RL_F", "RB_llm", "RB_agg_idk", "RL_F_idk", "RB_llm_idk", "HMean_idk", "Length"]


@pytest.mark.parametrize("metrics, want", [
    # candidates HMean_idk, RB_agg_idk, RB_agg, RL_F (then RB_llm, ..., left out); the H-Mean's parts with it
    (MTRAG, ["HMean_idk", "RL_F_idk", "RB_llm_idk", "RB_agg_idk", "AnsAcc", "RB_agg", "RL_F"]),
    (["Recall", "RB_agg"], ["RB_agg", "AnsAcc", "Recall"]),
    ([], ["AnsAcc"]),
])
def test_collected_metrics_are_those_of_the_first_four_headline_candidates(metrics, want):
    assert sig.collected_metrics(metrics) == want


def _values(metrics, scores):
    pv = sig.PairedValues(metrics)
    for model, per_metric in scores.items():
        for t in range(12):
            pv.add({"task_id": f"t{t}", "model_id": model, "error": None,
                    "metrics": {m: [v + 0.01 * t] for m, v in per_metric.items()}})
    return pv


def _summary(metrics, defined):
    return {"metrics": metrics, "overall": None,
            "models": {m: {"count": 12, "errors": 0, "metrics": dict(per),
                           "n": {k: 12 for k in per}} for m, per in defined.items()}}


SETTINGS = replace(SignificanceConf(), resamples=200)


def test_a_runs_block_compares_only_the_headlines_metrics():
    scores = {"m1": {"RB_agg": 0.6, "Recall": 0.5}, "m2": {"RB_agg": 0.4, "Recall": 0.3}}
    summary = _summary(["RB_agg", "Recall"], {m: {k: v + 0.055 for k, v in s.items()} for m, s in scores.items()})
    block = sig.for_summary(summary, _values(["RB_agg", "Recall"], scores), SETTINGS)
    assert list(block["metrics"]) == ["RB_agg"]
    assert [(e["a"], e["b"], e["n"]) for e in block["metrics"]["RB_agg"]] == [("m1", "m2", 12)]


def test_a_runs_block_follows_the_ranking_when_its_first_headline_has_no_value():
    scores = {"m1": {"Recall": 0.5}, "m2": {"Recall": 0.3}}  # no record has RB_agg: ranked by Recall
    summary = _summary(["RB_agg", "Recall"], {m: {k: v + 0.055 for k, v in s.items()} for m, s in scores.items()})
    block = sig.for_summary(summary, _values(["RB_agg", "Recall"], scores), SETTINGS)
    assert list(block["metrics"]) == ["Recall"]
    assert block["metrics"]["Recall"][0]["diff"] == pytest.approx(0.2)


def test_renaming_some_models_keeps_the_others_names_and_values():
    pv = _values(["RB_agg"], {"a": {"RB_agg": 0.6}, "b": {"RB_agg": 0.4}})
    before_a, before_b = pv.row("a", "RB_agg"), pv.row("b", "RB_agg")
    pv.rename({"a": "run1/a"})
    assert sorted(model for model, _ in pv.cols) == ["b", "run1/a"]
    np.testing.assert_array_equal(pv.row("run1/a", "RB_agg"), before_a)
    np.testing.assert_array_equal(pv.row("b", "RB_agg"), before_b)


def _significant(k):
    entries = [{"a": f"m{i}", "b": f"m{i + 1}", "n": 30, "mean_a": 0.5, "mean_b": 0.4, "diff": 0.1, "ci": [0.05, 0.15],
                "p": 0.001, "p_adjusted": 0.002, "significant": True, "better": f"m{i}"} for i in range(k)]
    return {"metrics": ["RB_agg"], "models": {},
            "significance": {"method": "paired bootstrap", "confidence": 0.95, "alpha": 0.05, "correction": "holm",
                             "metrics": {"RB_agg": entries}}}


def test_the_console_prints_at_most_20_significant_pairs():
    line = "m{} > m{} on RB_agg: difference 0.1000 [0.0500, 0.1500], adjusted p = 0.002 (holm)"
    assert sig.significant_lines(_significant(20)) == [line.format(i, i + 1) for i in range(20)]
    assert sig.significant_lines(_significant(22)) == [line.format(i, i + 1) for i in range(20)] + [
        "... and 2 more significant difference(s) in leaderboard.md"]
