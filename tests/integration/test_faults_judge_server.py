"""Faults of a judge endpoint, through ``python -m ragscale.run`` against the fake OpenAI-compatible
judge (tests/fake_judge.py; issue 33, items 5, 6 and 8; docs/fault-tolerance.md, "Judge calls"):

- a server that drips its answers one byte every 2 s: the run ends within the deadline
  (``timeout_s`` bounds each whole request), says that it retries, and the records carry the error;
- a server that answered text that is no judgement (HTTP 200), then fixed: a re-run with
  ``overwrite=true`` asks again for the cached outputs that did not parse, and scores them;
- a completion of a megabyte: the record and the judge cache keep 20,000 characters, the record
  warns, run.json counts what was dropped;
- a nested judge output (MTRAG-UN's underspecified judge, ``{"decision": [[[...]]]}``): a parse
  failure of that judge only (0.5 under the reference protocol, as MT-RAG scores it), IDK scored on
  every record;
- a judge that is down for the whole run exits 4 ("the judge engine failed on 2"), one down for
  part of it exits 3.

Each run judges the first two records of the bundled MT-RAG sample (MTRAG-UN's IDK and
underspecified judges: no model to load)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from fake_judge import FlakyJudgeServer

pytestmark = pytest.mark.integration
SAMPLE = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
NESTED = '{"decision": ' + "[" * 1000 + "]" * 1000 + "}"


def run(tmp_path, server: FlakyJudgeServer, *overrides: str, out: str = "out") -> tuple[subprocess.CompletedProcess,
                                                                                          list[dict], dict]:
    """``python -m ragscale.run`` of MTRAG-UN's judges on two sample records against ``server``:
    (the process, the output records, run.json)."""
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtragun", "steps=[idk]", f"input={SAMPLE}", "limit=2",
           f"output_dir={tmp_path / out}", "judge=openai", "judge.model=fake-judge",
           f"judge.options.base_url={server.url}", "judge.options.backoff_s=0.05", "judge.options.backoff_max_s=0.1",
           f"judge.cache_path={tmp_path / 'cache.sqlite'}", "significance.resamples=200", *overrides]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    path = tmp_path / out / "records.jsonl"
    recs = [json.loads(line) for line in open(path)] if path.exists() else []
    info = json.loads((tmp_path / out / "run.json").read_text()) if (tmp_path / out / "run.json").exists() else {}
    return res, recs, info


def said(res: subprocess.CompletedProcess) -> str:
    return res.stdout[-3000:] + res.stderr[-3000:]


def test_a_slow_drip_server_cannot_stall_the_run(tmp_path):
    """One byte every 2 s (a 300-byte answer: 10 minutes) with timeout_s=5, max_attempts=2: each
    prompt ends within its bound (2 x 5 s + 0.1 s), the run well within a minute of judging."""
    server = FlakyJudgeServer(failures=0, drip_s=2.0)
    t0 = time.monotonic()
    try:
        res, recs, info = run(tmp_path, server, "judge.options.timeout_s=5", "judge.options.max_attempts=2",
                              "judge.options.response_format=json_schema")
    finally:
        server.close()
    took = time.monotonic() - t0
    assert res.returncode == 4, said(res)  # every record's judges failed at the engine
    assert took < 120, took  # main: 2 records x 2 judges x 10 minutes of drip
    assert "retrying with backoff (up to 2 attempts per prompt, 10.1s at most)" in res.stdout + res.stderr
    assert len(recs) == 2
    for rec in recs:
        for err in rec["ragscale"]["judge_errors"]:
            assert "no complete answer within timeout_s=5s" in err["reason"] and err["reason"].endswith("(2 attempts)")
    assert info["records"]["judge_failed"] == 2 and info["status"] == "nothing_scored"


def test_a_poisoned_then_fixed_server_is_asked_again_with_overwrite(tmp_path):
    """HTTP 200 with text that is no judgement: the records' judges fail to parse (scored records,
    exit 0) and the cache keeps the outputs; fixed, the same command with overwrite=true asks again
    for each of them and scores every record; a third run replays the cache (no request)."""
    server = FlakyJudgeServer(failures=0, content=lambda judge, body: "Sorry, I can't help with that.")
    try:
        res, recs, _ = run(tmp_path, server, "judge.max_retries=0")
        assert res.returncode == 0, said(res)  # the judge answered: a parse failure is a scored record
        assert all(r["metrics"]["idk_eval"] is None and r["metrics"]["underspecified_eval"] is None for r in recs)
        asked = server.requests
        assert asked == 4
        server.content = None  # fixed
        res, recs, info = run(tmp_path, server, "judge.max_retries=0", "overwrite=true")
        assert res.returncode == 0, said(res)
        assert server.requests - asked == 4, "the unparsed cached outputs were replayed, not asked again"
        assert all(r["metrics"]["idk_eval"] is not None and r["metrics"]["underspecified_eval"] == [0.0] for r in recs)
        assert info["judge_work"]["cache_unparsed"] == 4
        asked = server.requests
        res, recs, _ = run(tmp_path, server, "judge.max_retries=0", "overwrite=true")
        assert res.returncode == 0 and server.requests == asked  # the judgements come from the cache now
    finally:
        server.close()


def test_a_megabyte_completion_is_cut_in_the_records_and_the_cache(tmp_path):
    huge = "no judgement here " * 58_255  # 1,048,590 characters
    server = FlakyJudgeServer(failures=0, content=lambda judge, body: huge if judge == "idk" else None)
    try:
        res, recs, info = run(tmp_path, server, "judge.max_retries=0")
    finally:
        server.close()
    assert res.returncode == 0, said(res)
    for rec in recs:
        [err] = rec["ragscale"]["judge_errors"]
        assert err["judge"] == "idk" and len(err["raw"]) == 20_000 and huge.startswith(err["raw"])
        assert any(f"an output of {len(huge):,} characters cut to judge.max_raw_chars=20,000" in w
                   for w in rec["ragscale"]["warnings"]), rec["ragscale"]["warnings"]
        assert rec["metrics"]["underspecified_eval"] == [0.0]
    assert max(len(line) for line in open(tmp_path / "out" / "records.jsonl")) < 60_000
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    assert db.execute("SELECT max(length(text)) FROM generations").fetchone()[0] == 20_000
    assert info["judge_work"]["raw_chars_dropped"] == 2 * (len(huge) - 20_000)


@pytest.mark.parametrize("protocol,expected", [("constrained", None), ("reference", [0.5])])
def test_a_nested_judge_output_fails_that_judge_only(tmp_path, protocol, expected):
    server = FlakyJudgeServer(failures=0, content=lambda judge, body: NESTED if judge == "underspecified" else
                              ("no" if protocol == "reference" else None))
    try:
        res, recs, _ = run(tmp_path, server, "judge.max_retries=0", f"judge.protocol={protocol}")
    finally:
        server.close()
    assert res.returncode == 0, said(res)
    assert len(recs) == 2
    for rec in recs:
        assert rec.get("error") is None
        assert rec["metrics"]["idk_eval"] is not None
        assert rec["metrics"]["underspecified_eval"] == expected
        errors = rec["ragscale"]["judge_errors"]
        if expected is None:
            [err] = errors
            assert err["judge"] == "underspecified" and "nested too deeply" in err["reason"]
        else:
            assert errors == []


def test_a_judge_down_for_the_whole_run_is_not_ok(tmp_path):
    """Every request an HTTP 500: exit 4 and the records' judges failed; one judge down: exit 3."""
    server = FlakyJudgeServer(failures=None)
    try:
        res, recs, info = run(tmp_path, server, "judge.options.max_attempts=2")
    finally:
        server.close()
    assert res.returncode == 4, said(res)
    last = res.stdout.rstrip().splitlines()
    assert last[-2].startswith("[ragscale] warning: nothing scored: all 2 records failed (the judge engine failed on "
                               "2) (exit code 4)"), last[-2]
    assert info["status"] == "nothing_scored" and info["records"]["errored"] == info["records"]["judge_failed"] == 2
    assert "#judges" in last[-2]
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'href="#judges">nothing scored: all 2 records failed (the judge engine failed on 2)</a>' in html

    server = FlakyJudgeServer(failures=0, fail_when=lambda judge, body: judge == "underspecified"
                              and "Free-tier organizations" in body["messages"][-1]["content"])
    try:
        res, recs, info = run(tmp_path, server, "judge.options.max_attempts=2", out="partly")
    finally:
        server.close()
    assert res.returncode == 3, said(res)
    assert "[ragscale] warning: 1 of 2 records failed (the judge engine failed on 1) (exit code 3)" in res.stdout
    assert info["status"] == "record_errors" and info["records"]["judge_failed"] == 1
