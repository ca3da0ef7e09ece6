"""benchmarks/retrieval.py runs and measures what it says: the same queries scored by the baseline,
the command's path and a run's report sink, with and without UMBRELA's fill (a small run: the
figures themselves are the benchmark's, not a test's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("pytrec_eval", reason="the retrieval extra")


def test_the_benchmark_scores_the_same_queries_every_way(tmp_path):
    out = tmp_path / "bench.json"
    res = subprocess.run([sys.executable, os.path.join("benchmarks", "retrieval.py"), "--records", "300",
                          "--repeat", "1", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["records"] == 300 and 0 < got["scored"] < 300  # 10% of the queries have no qrels
    assert got["holes_filled"] > 0
    for seconds, ratio in (("ragscale_s", "ratio_to_baseline"), ("in_run_s", "in_run_ratio_to_baseline"),
                           ("in_run_filled_s", "in_run_filled_ratio_to_baseline"),
                           ("per_record_s", "per_record_ratio_to_baseline")):
        assert got[seconds] > 0 and got[ratio] > 0
