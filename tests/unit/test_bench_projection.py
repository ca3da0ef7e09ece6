"""benchmarks/projection.py: shared prefixes, cached tokens and the projection's arithmetic
(from a hand-made prompts file, no model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, load_benchmark

bench = load_benchmark("projection")


def _row(judge: str, content: str, tokens: int, completion: int = 10, key: str = "k", rnd: int = 1) -> dict:
    return {"judge": judge, "version": f"{judge}-v1", "round": rnd, "record": {"key": key},
            "messages": [{"role": "user", "content": content}], "prompt_tokens": tokens,
            "expected_completion_tokens": completion, "estimated": rnd > 1}


def test_common_prefix_and_cached_tokens():
    assert bench.common_prefix("abcdef", "abcxyz") == 3
    assert bench.common_prefix("abc", "abc") == 3 and bench.common_prefix("", "abc") == 0
    # 60 of 100 characters shared of a 100-token prompt: 60 tokens, rounded down to 16-token blocks
    assert bench.cached_tokens(100, 60, 100, 16) == 48
    assert bench.cached_tokens(100, 60, 100, 1) == 60
    # an identical prompt still computes its last token (then its last whole block)
    assert bench.cached_tokens(100, 100, 100, 1) == 99 and bench.cached_tokens(100, 100, 100, 16) == 96
    assert bench.cached_tokens(100, 0, 100, 16) == 0 and bench.cached_tokens(100, 5, 0, 16) == 0


def test_measure_template_and_ideal_prefixes():
    head = "x" * 80  # the judge's instructions: every prompt of (judge, version, round) starts with them
    rows = [_row("idk", head + "AAAAAAAAAAAAAAAAAAAA", 100, key="a"),
            _row("idk", head + "AAAAAAAAAABBBBBBBBBB", 100, key="b"),
            _row("idk", head + "CCCCCCCCCCCCCCCCCCCC", 100, key="c"),
            _row("idk", "z" * 100, 100, key="d", rnd=2)]  # another round: not in the template group
    m = bench.measure(rows, block=1)["idk"]
    assert m["prompts"] == 4 and m["estimated"] == 1 and m["prompt_tokens"] == 400 and m["completion_tokens"] == 40
    chars = len("<user>") + 100
    share = lambda n: int(100 * (len("<user>") + n) / chars)  # noqa: E731
    assert m["template_cached_tokens"] == 3 * share(80)  # round 2's lone prompt shares nothing
    # ideal: a and b share 90 characters, c its 80 with them, d only the role tag with c
    assert m["ideal_cached_tokens"] == 2 * share(90) + share(80) + share(0)


def test_project_arithmetic():
    per_judge = {"j": {"prompts": 20, "prompt_tokens": 10_000, "completion_tokens": 1_000,
                       "template_cached_tokens": 4_000, "ideal_cached_tokens": 9_000}}
    out = bench.project(per_judge, sample_records=10, records=1_000, gpus=4, prefill_tok_s=1_000.0,
                        decode_tok_s=100.0, start_s=0.0)
    assert out["per_record"] == {"prompts": 2.0, "prompt_tokens": 1000.0, "completion_tokens": 100.0,
                                 "template_cached_tokens": 400.0, "ideal_cached_tokens": 900.0}
    none, tmpl, ideal = (out["plans"][k] for k in ("none", "template", "ideal"))
    # 1M prompt tokens at 1k/s: 1000 GPU-s; 100k completion tokens at 100/s: 1000 GPU-s; 4 GPUs
    assert none["prefill_gpu_s"] == 1000 and none["decode_gpu_s"] == 1000
    assert none["wall_h"] == round(500 / 3600, 2) and none["gpu_hours"] == round(2000 / 3600, 1)
    assert tmpl["prefill_tokens"] == 600_000 and tmpl["cached_share"] == 0.4
    assert ideal["prefill_gpu_s"] == 100 and ideal["records_per_s"] == round(1_000 / (1100 / 4), 1)
    billed = bench.project(per_judge, 10, 1_000, 4, 1_000.0, 100.0, 0.0, billed_gpus=8)["plans"]["none"]
    assert billed["wall_h"] == none["wall_h"] and billed["gpu_hours"] == round(500 * 8 / 3600, 1)
    scaled = bench.project(per_judge, 10, 1_000, 4, 1_000.0, 100.0, 0.0, token_scale=0.5)
    assert scaled["plans"]["none"]["prefill_gpu_s"] == 500 and scaled["per_record"]["prompts"] == 2.0


def test_cli_emits_json(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps(_row("idk", "same prefix " + c * 40, 50, key=c)) + "\n" for c in "abc"))
    out = tmp_path / "proj.json"
    res = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "projection.py"), str(f),
                          "--records", "300", "--gpus", "2", "--billed-gpus", "3", "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    sc = doc["scenarios"]["p.jsonl"]
    assert sc["sample_records"] == 3 and sc["judges"]["idk"]["prompts"] == 3
    assert doc["assumptions"]["gpus"] == 2 and doc["assumptions"]["billed_gpus"] == 3 and set(sc["plans"]) == {"none", "template", "ideal"}
    bad = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "projection.py"), str(f),
                          "--sample-records", "1", "2"], capture_output=True, text=True)
    assert bad.returncode == 2 and "one count per prompts file" in bad.stderr


@pytest.mark.parametrize("a,b", [("", ""), ("a", "b"), ("ab", "abc")])
def test_common_prefix_is_symmetric(a, b):
    assert bench.common_prefix(a, b) == bench.common_prefix(b, a)
