"""What plan_run decides from the config beyond checking it: the judge fallback for HHEM
(``hallucination.judge_fallback``: ``factual_consistency_judge`` right after ``hhem``, only where the
hallucination step runs, once), the NLI model planned only where an ``nli``-stage metric runs, and
the judge and hallucination settings kept resolved for run.json."""

from __future__ import annotations

import os

from ragscale import plan
from ragscale.overrides import compose

SAMPLE = os.path.join(plan.DATA_DIR, "custom_sample.jsonl")


def planned(*overrides):
    return plan.plan_run(compose([f"input={SAMPLE}", *overrides]))


def test_the_judge_fallback_follows_hhem_where_the_hallucination_step_runs():
    base = planned("+scenario=trec", "steps=[hallucination,no_answer]")
    fallback = planned("+scenario=trec", "steps=[hallucination,no_answer]", "hallucination.judge_fallback=true")
    assert "factual_consistency_judge" not in base.metrics
    assert list(fallback.metrics) == [*list(base.metrics)[:1], "factual_consistency_judge", *list(base.metrics)[1:]]
    assert base.metrics[0] == "hhem"


def test_the_judge_fallback_is_not_added_without_the_hallucination_step_nor_twice():
    assert "factual_consistency_judge" not in planned(
        "+scenario=trec", "steps=[no_answer]", "hallucination.judge_fallback=true").metrics
    named = planned("metrics=[hhem,factual_consistency_judge]", "hallucination.judge_fallback=true").metrics
    assert list(named).count("factual_consistency_judge") == 1


def test_the_nli_model_is_planned_only_for_a_run_with_an_nli_metric():
    with_hhem = planned("metrics=[hhem]")
    without = planned("metrics=[exact_match]")
    assert "nli" in with_hhem.stages and (with_hhem.nli_kwargs or with_hhem.nli_unavailable)
    assert "nli" not in without.stages and (without.nli_kwargs, without.nli_unavailable) == ({}, None)


def test_the_judge_and_hallucination_settings_are_kept_resolved():
    run = planned("metrics=[exact_match]", "judge.model=some-judge", "+judge.options.tag=${judge.model}",
                  "hallucination.tokenizer=${hallucination.model}")
    assert run.judge_conf["options"]["tag"] == "some-judge"
    assert run.hallucination_conf["tokenizer"] == run.hallucination_conf["model"]


def test_a_judge_panel_adds_the_derive_stage_for_its_median():
    single = planned("metrics=[RB_llm]")
    panel = planned("metrics=[RB_llm]", "+judge_panel=local-pair")
    assert "derive" in panel.stages and "derive" not in single.stages
