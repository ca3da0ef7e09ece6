"""A run killed with SIGKILL mid-way and re-run ends with every record exactly once."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, sample_copies

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.own_ray]  # a killed driver


def _lines(path):
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as fh:
        return fh.read().count(b"\n")


def test_sigkill_then_resume_every_record_exactly_once(tmp_path):
    inp = tmp_path / "many.jsonl"
    n = sample_copies(inp, 14)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", f"input={inp}", f"output_dir={out}",
           "steps=[algorithmic]", "cluster.chunk_size=8", "cluster.encoder.batch_size=8", "progress_interval_s=1"]
    records = out / "records.jsonl"
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while _lines(records) < 40 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    done_before = _lines(records)
    assert 0 < done_before < n
    with open(records, "rb") as fh:
        before = {json.loads(l)["ragscale"]["record_key"]: json.loads(l)["metrics"] for l in fh.read().splitlines()[:done_before]}

    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"already_done={len(before)}" in res.stdout
    with open(records) as fh:
        recs = [json.loads(l) for l in fh]
    keys = [r["ragscale"]["record_key"] for r in recs]
    assert len(keys) == n and len(set(keys)) == n
    for r in recs:  # finished work was kept, not redone
        if r["ragscale"]["record_key"] in before:
            assert r["metrics"] == before[r["ragscale"]["record_key"]]
    run = json.load(open(out / "run.json"))
    assert run["records"]["resumed"] == len(before) and run["records"]["written_this_run"] == n - len(before)
