"""benchmarks/encoder.py on the bundled MT-RAG sample (the packaged MiniLM, CPU): the settings
it compares really differ in the way they should (batch size: float rounding only; bf16: a
visible but small deviation), and every record's metrics are counted."""

from __future__ import annotations

import argparse
import os

from conftest import ROOT, load_benchmark

bench = load_benchmark("encoder")


def test_settings_are_compared_with_the_first(tmp_path):
    args = argparse.Namespace(input=os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl"), tasks=4,
                              models="target,truncated,passage", model=None, batch_records=5,
                              settings=["cpu:fp32:4096", "cpu:fp32:256", "cpu:bf16:4096"],
                              out=str(tmp_path / "encoder.json"))
    result = bench.main(args)
    assert result["records"] == 12 and os.path.isfile(args.out)
    ref, small, bf16 = result["settings"]
    assert "diff_from_reference" not in ref and ref["tokens"] == small["tokens"] == bf16["tokens"] > 0
    assert small["diff_from_reference"]["RB_agg"]["values"] == 12  # one per record
    for metric, d in small["diff_from_reference"].items():
        assert d["values"] > 0 and d["max_abs"] < 1e-6, metric  # padding changes the sums' order, no more
    for metric in ("BertscoreP", "BertscoreR", "BertKPrec"):
        assert 1e-5 < bf16["diff_from_reference"][metric]["max_abs"] < 2e-2, metric
