"""run.json's fields are the run's own values (ragscale/provenance.py, issue 37): each model
entry's field is read from the plan, not a default that happens to match here (a device, a cache,
a baseline, a protocol's prompt versions, a panel member's engine), the versions are the installed
ones, and a counter's own name may hold the separator."""

from __future__ import annotations

import importlib.metadata as md
import platform
from dataclasses import replace
from types import SimpleNamespace

import pytest

from ragscale.judges import JUDGES
from ragscale.overrides import compose
from ragscale.plan import plan_run
from ragscale.provenance import judge_work, models_info, redact, relevancy_embeddings, run_info, versions

pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")

SHAPED = "sk-ragscale-planted-runjson-5d1e9a7c2b40"  # a key's shape: redacted wherever it is written


def test_the_encoder_and_hhem_fields_are_the_plans_values():
    plan = plan_run(compose(["+scenario=mtrag", "steps=[algorithmic,hallucination]", "metrics.hallucination=[hhem]"]))
    plan = replace(plan, baseline="/x/roberta-large.tsv", nli_kwargs={"hhem": {"device": "cuda:2"}},
                   encoder_kwargs={**plan.encoder_kwargs, "disk_cache_path": "/x/embeddings", "device": "cuda:1"})
    m = models_info(plan)
    assert m["encoder"]["bertscore_rescaled_with_baseline"] is True and m["encoder"]["baseline"] == "/x/roberta-large.tsv"
    assert (m["encoder"]["disk_cache_path"], m["encoder"]["device"]) == ("/x/embeddings", "cuda:1")
    assert m["hallucination"]["device"] == "cuda:2"
    assert models_info(replace(plan, baseline=None))["encoder"]["bertscore_rescaled_with_baseline"] is False


def test_prompt_versions_follow_the_protocol_the_judges_ran():
    plan = plan_run(compose(["+scenario=trec", "steps=[retrieval,citation]"]))
    judges = plan.judge_kwargs["judges"]
    assert models_info(plan)["judge"]["prompt_versions"] == {j: JUDGES[j].version_for("constrained") for j in judges}
    ref = replace(plan, judge_kwargs={**plan.judge_kwargs, "protocol": "reference"})
    versions_ref = models_info(ref)["judge"]["prompt_versions"]
    assert versions_ref == {j: JUDGES[j].reference_version for j in judges} and "open-rag-eval-umbrela-ref-v1" in \
        versions_ref.values()


def test_a_panel_members_entry_is_its_own_engine_model_protocol_and_redacted_options():
    plan = plan_run(compose(["+scenario=mtrag", "steps=[idk]", "+judge_panel=local-pair", "panel_metrics=[idk_eval]"]))
    kwargs = [{**k, "engine": {**k["engine"], "note": f"made with {SHAPED}"}} for k in plan.panel_kwargs]
    confs = [{**c, "engine": f"engine-{i}", "model": f"model-{i}"} for i, c in enumerate(plan.panel_confs)]
    members = models_info(replace(plan, panel_kwargs=kwargs, panel_confs=confs))["judge_panel"]
    for i, (p, k) in enumerate(zip(members, kwargs)):
        assert (p["engine"], p["model"]) == (f"engine-{i}", f"model-{i}")
        assert p["protocol"] == {"idk": "constrained"}
        assert p["engine_options"] == redact(k["engine"]) and SHAPED not in str(p["engine_options"])
        assert p["engine_options"]["note"] == "made with ***"


def test_answer_relevancys_embeddings_by_the_encoder_name_its_model_and_pooling():
    plan = plan_run(compose(["+scenario=ragas", "metrics.ragas=[answer_relevancy]"]))
    got = relevancy_embeddings(plan)
    assert got == {"source": "encoder", "name": plan.encoder_conf["name"], "model": plan.encoder_conf["model"],
                   "local_path": plan.encoder_kwargs.get("model_path"), "pooling": "mean, L2-normalised"}
    assert got["local_path"] and models_info(plan)["answer_relevancy_embeddings"] == got
    bare = SimpleNamespace(metrics=plan.metrics, encoder_conf=plan.encoder_conf, encoder_kwargs=plan.encoder_kwargs)
    assert relevancy_embeddings(bare) == got  # a plan-like object without relevancy settings
    assert relevancy_embeddings(SimpleNamespace(metrics=("RougeL_stemFalse",))) is None


def test_the_ray_block_has_the_cpu_scale_only_when_the_requests_were_scaled():
    plan = plan_run(compose(["+scenario=custom"]))
    common = dict(t_start=0.0, failure=None, timings={}, stats={}, records={"total": 0})
    scaled = run_info(plan, ray_info={"address": "a", "resources": {"CPU": 2.0}, "cpu_scale": 0.667}, **common)["ray"]
    assert scaled == {"address": "a", "resources": {"CPU": 2.0}, "cpu_scale": 0.667}
    assert run_info(plan, ray_info={"address": "a"}, **common)["ray"] == {"address": "a", "resources": None}


def test_versions_are_the_installed_ones_and_none_for_a_package_that_is_not(monkeypatch):
    from ragscale import provenance

    monkeypatch.setattr(provenance, "PACKAGES", ("pyarrow", "no-such-package-ragscale-test"))
    got = versions()
    assert got == {"pyarrow": md.version("pyarrow"), "no-such-package-ragscale-test": None,
                   "python": platform.python_version()}


def test_a_judges_counter_may_hold_the_separator_in_its_own_name():
    assert judge_work({"judgeby|umbrela|round|2": 4, "judge_calls": 5}) == \
        {"calls": 5, "by_judge": {"umbrela": {"round|2": 4}}}
