"""Cluster-aware inference on MT-RAG's human-rated subset (scripts/mtrag_clusters.py): the paired tests
and the intervals of the means resampling tasks, then whole conversations, on the authors' values.
Skips (a conformance skip, listed at the end) where no copy of IBM's mt-rag-benchmark is present."""

import math

import pytest
from conftest import load_script, reference_source

pytestmark = [pytest.mark.integration]

HUMAN = "mtrag-human/evaluations/reference_subset_with_human_evaluations.json"
MODELS = {"reference", "gpt-4o", "llama-3.1-405b-instruct"}


def test_conversation_aware_inference_on_mtrag_human_subset(tmp_path):
    path = tmp_path / "human.json"
    path.write_text(reference_source("mt-rag-benchmark", HUMAN))
    mod = load_script("mtrag_clusters")
    res = mod.study(str(path), resamples=2000)
    assert res["records"] == 477 and set(res["models"]) == MODELS
    assert res["conversations"] == 20 and res["tasks"] == 159
    assert res["unit_conversation"] == "resampled by conversation: 20 conversations (159 tasks)"
    assert res["unit_naive"] == "resampled by task: 159 tasks"

    rows = [r for rs in res["pairs"].values() for r in rs]
    assert set(res["pairs"]) == set(mod.METRICS) and len(rows) == 15  # 5 metrics x 3 pairs
    for r in rows:
        assert r["n"] == 159 and r["units"] == 20
        de = r["design_effect"]
        assert de is not None and math.isfinite(de)
        # the CR1 design effect is the squared ratio of the SEs: z shrinks by exactly its square root
        assert r["design_effect_cr1"] == pytest.approx(de)
        assert abs(r["z_conversation"]) == pytest.approx(abs(r["z_naive"]) / math.sqrt(de))
        lo, hi = r["ci_conversation"]
        assert lo <= r["diff"] <= hi
    des = sorted(r["design_effect"] for r in rows)
    assert sum(d > 1 for d in des) >= 0.8 * len(des) and des[len(des) // 2] > 1.3  # mostly > 1, typically 1.5-2.5
    for r in rows:
        if r["design_effect"] > 1:
            # the cluster bootstrap's interval is wider by about sqrt(design effect) (within its noise at 2000
            # resamples: a pair with a design effect near 1 can come out a hair narrower)
            assert r["width_conversation"] >= r["width_naive"] * (1 if r["design_effect"] > 1.2 else 0.95)
            assert abs(r["width_ratio"] - math.sqrt(r["design_effect"])) < 0.25
            assert abs(r["z_conversation"]) < abs(r["z_naive"])
    changed = [r for r in rows if r["verdict_changes"]]
    if changed:
        for r in changed:  # a change is a significant naive verdict that the conversations no longer support
            assert r["significant_naive"] and not r["significant_conversation"]
            assert r["p_adjusted_conversation"] > r["p_adjusted_naive"]
    else:
        assert all(abs(r["z_conversation"]) < abs(r["z_naive"]) for r in rows if r["design_effect"] > 1)
    assert res["verdict_changes"] == len(changed)

    # the figures: RougeL reference vs gpt-4o the largest design effect (~2.9); RB_agg gpt-4o vs llama a
    # small negative difference whose z shrinks by conversation
    rouge = {(r["a"], r["b"]): r for r in res["pairs"]["RougeL_stemFalse"]}
    assert rouge[("reference", "gpt-4o")]["design_effect"] == pytest.approx(2.9, abs=0.05)
    assert rouge[("reference", "gpt-4o")]["design_effect"] == pytest.approx(res["design_effect_range"][1])
    agg = {(r["a"], r["b"]): r for r in res["pairs"]["RB_agg"]}[("gpt-4o", "llama-3.1-405b-instruct")]
    assert -0.04 < agg["diff"] < -0.01 and agg["z_naive"] < agg["z_conversation"] < 0

    for by in res["means"].values():
        assert set(by) == MODELS
        for r in by.values():
            assert r["n"] == 159 and r["units"] == 20
            if r["design_effect"] is not None and r["design_effect"] > 1:  # CR1 t interval: wider, deterministically
                assert r["width_conversation"] > r["width_naive"]

    md = mod.to_markdown(res)
    assert "| RougeL_stemFalse | reference − gpt-4o |" in md and "20 conversations" in md
    assert "| RB_agg | llama-3.1-405b |" in md
