"""+scenario=taxonomy end to end through the CLI: the bundled sample plus a record with a bad
label, the packaged SmolLM2 judge (llama.cpp) for the labels the input lacks."""

from __future__ import annotations

import json
import os

import pytest

from conftest import ROOT, assert_parse_floors, run_on_records

pytestmark = pytest.mark.integration
pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")

METRICS = ("TopicalPrecision@K", "SufficiencyHit@K", "SufficiencyRate@K", "MisleadingContextRate@K",
           "MRR@K", "NDCG@K", "GroundingPresenceRate", "UnsupportedClaimRate", "ContradictionRate",
           "CitationPresenceRate", "ConditionalFabricationRate", "ProperActionRate", "OnTopicRate",
           "HelpfulnessRate", "IncompletenessRate", "UnsafeContentRate")
SAMPLE = os.path.join(ROOT, "ragscale", "data", "taxonomy_sample.jsonl")


def test_taxonomy_scenario(tmp_path):
    recs = [json.loads(line) for line in open(SAMPLE)]
    # quill lib-2: every label in the input; sable lib-2: none; sable lib-4: no chunks
    keep = [r for r in recs if (r["model_id"], r["task_id"]) in
            {("quill-2b", "lib-2"), ("sable-7b", "lib-2"), ("sable-7b", "lib-4")}]
    bad = {**keep[0], "task_id": "lib-bad", "labels": {"helpful": "very"}}
    assert keep[0]["model_id"] == "quill-2b" and len(keep) == 3 and "labels" not in keep[1]
    keep[1] = {**keep[1], "labels": {"source_cited": 1, "fabricated_source": 0}}  # a partial answer family
    got = run_on_records(tmp_path, "taxonomy", [*keep, bad], "taxonomy.k=1", code=3)  # the bad label: 1 record failed
    out = tmp_path / "out"
    keys = [r["ragscale"]["record_key"] for r in got]
    assert len(got) == 4 and len(set(keys)) == 4  # every record exactly once
    by = {(r["model_id"], r["task_id"]): r for r in got}
    for r in got:
        for name in METRICS:
            v = (r.get("metrics") or {}).get(name)
            assert v is None or 0.0 <= v <= 1.0, (r["task_id"], name, v)

    err = by[("quill-2b", "lib-bad")]["error"]
    assert err["stage"] == "input" and "labels.helpful must be 0 or 1" in err["message"]

    # quill-2b lib-2 carries every label: all from the input, none asked of the judge; K = 1
    q = by[("quill-2b", "lib-2")]
    d = q["ragscale"]["details"]
    assert d["taxonomy_retrieval"]["k"] == 1 and d["taxonomy_retrieval"]["sources"] == [
        dict.fromkeys(("topically_relevant", "evidence_sufficient", "misleading"), "input")]
    assert set(d["taxonomy_grounding"]["sources"].values()) == {"input"}
    assert q["metrics"]["TopicalPrecision@K"] == 1.0 and q["metrics"]["NDCG@K"] == 1.0
    assert q["metrics"]["ConditionalFabricationRate"] == 0.0 and q["metrics"]["HelpfulnessRate"] == 1.0

    # sable-7b lib-2 has two answer labels: they win over the judge, which gives the rest (0/1)
    s = by[("sable-7b", "lib-2")]
    sd = s["ragscale"]["details"]
    assert set(sd["taxonomy_generation"]["sources"].values()) == {"judge"}
    assert sd["taxonomy_grounding"]["sources"] == {
        "source_cited": "input", "fabricated_source": "input", "support_present": "judge",
        "unsupported_claim_present": "judge", "contradicted_claim_present": "judge"}
    assert s["metrics"]["CitationPresenceRate"] == 1.0 and s["metrics"]["ConditionalFabricationRate"] == 0.0
    for name in ("GroundingPresenceRate", "ProperActionRate", "TopicalPrecision@K"):
        assert s["metrics"][name] in (0.0, 1.0, None)
    # no chunks: retrieval metrics undefined (null) with the reason
    u = by[("sable-7b", "lib-4")]
    assert u["metrics"]["MRR@K"] is None and u["metrics"]["NDCG@K"] is None
    assert any(e.get("undefined") and "no retrieved chunks" in e["reason"] for e in u["ragscale"]["judge_errors"])

    summary = json.load(open(out / "summary.json"))
    assert set(summary["models"]) == {"quill-2b", "sable-7b"}
    assert summary["models"]["quill-2b"]["metrics"]["HelpfulnessRate"] is not None
    # the judge is asked only for missing labels: sable lib-2's one chunk (K = 1), and the answer
    # and generation families of the two records without labels
    assert_parse_floors(out, ["taxonomy_retrieval", "taxonomy_grounding", "taxonomy_generation"])
    by_judge = json.load(open(out / "run.json"))["judge_work"]["by_judge"]
    assert {j: w["prompts"] for j, w in by_judge.items()} == {
        "taxonomy_retrieval": 1, "taxonomy_grounding": 2, "taxonomy_generation": 2}
