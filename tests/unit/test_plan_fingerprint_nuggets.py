"""A nugget bank read from a file (``nuggets.bank_file``) is part of a run's resume key
(ragscale.plan.RunPlan.fingerprint) whatever the bank mode, the default ``auto`` included: a
resumption must score against the same nuggets. Only the default bank (auto, no file) adds no key."""

from __future__ import annotations

import json

import pytest

from ragscale.plan import RunPlan, plan_nugget_bank

ENCODER = {"name": "e", "model": "/m", "num_layers": 6, "rescale_with_baseline": False, "baseline": None,
           "max_length": None, "dtype": "fp32"}


def fingerprint(nugget_bank):
    return RunPlan(scenario="trec", steps=("nuggets",), metrics=(), stages=frozenset(), files=(),
                   encoder_conf=ENCODER, nugget_bank=nugget_bank).fingerprint()


@pytest.mark.parametrize("bank", ["auto", "per_query"])
def test_a_bank_file_is_in_the_resume_key_whatever_the_mode(tmp_path, monkeypatch, bank):
    (tmp_path / "nuggets.jsonl").write_text(json.dumps(
        {"task_id": "t1", "nuggets": [{"id": "n1", "text": "It is blue", "importance": "vital"}]}) + "\n")
    monkeypatch.chdir(tmp_path)
    conf = plan_nugget_bank({"bank": bank, "bank_file": "nuggets.jsonl", "window": 10})
    assert fingerprint(conf)["nuggets"] == {"bank": bank, "bank_file": str(tmp_path / "nuggets.jsonl")}


def test_the_default_bank_adds_no_key():
    assert "nuggets" not in fingerprint(plan_nugget_bank({"bank": "auto", "bank_file": None, "window": 10}))
