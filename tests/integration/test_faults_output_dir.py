"""Faults around one output_dir, through ``python -m ragscale.run`` (issue 33, items 1, 2, 4 and the
torn line of item 6; docs/fault-tolerance.md):

- two runs started at once on one output_dir: one is refused in one line naming the holder (exit 2,
  nothing written: ``.hydra/`` is the other's), every record once, the summary's counts right;
- a lock left by a dead process is taken over, with a line saying so;
- a record inserted into an input between a run and its resumption: refused in one line, nothing mixed;
  a record appended: resumed, only the new record scored;
- SIGTERM or SIGHUP mid-run: the finished records, run.json ``interrupted``, exit 128 + the signal, the
  lock released; the same command then resumes with every record exactly once;
- a torn middle line of records.jsonl: one line naming the file, the line and the fix.

The quick runs use the custom scenario with one lexical metric (no model); the slow ones judge through
the fake OpenAI-compatible judge (tests/fake_judge.py) answering slowly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, records_by_key
from fake_judge import FlakyJudgeServer

pytestmark = pytest.mark.integration
CUSTOM = ["+scenario=custom", "custom.expectations=null", "metrics.custom=[exact_match]", "significance.resamples=200",
          "html_report=false"]
LOCK = ".ragscale-lock"


def records(n: int, start: int = 0) -> list[str]:
    """``n`` JSONL lines of two models' answers (the custom scenario's fields)."""
    return [json.dumps({"task_id": f"t{i // 2}", "model_id": f"m{i % 2}", "user_input": f"Capital {i}?",
                        "response": "Paris" if i % 3 else "Lyon", "reference": "Paris"}) + "\n"
            for i in range(start, start + n)]


def run_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragscale.run", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def judged(tmp_path, server: FlakyJudgeServer, inp, out) -> list[str]:
    """A run slow enough to be caught mid-way: the IDK judge of every record through the slow fake
    judge, one prompt at a time, records written two at a time."""
    return ["+scenario=mtrag", "steps=[idk]", f"input={inp}", f"output_dir={out}", "html_report=false",
            "judge=openai", "judge.model=fake-judge", f"judge.options.base_url={server.url}",
            "judge.options.concurrency=1", f"judge.cache_path={tmp_path / 'cache.sqlite'}", "cluster.chunk_size=2",
            "cluster.judge.batch_size=2", "cluster.judge.batches_in_flight=1"]


def judge_input(path, n: int) -> int:
    """``n`` records of the bundled MT-RAG sample (task ids made unique) in ``path``."""
    with open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")) as fh:
        base = [json.loads(line) for line in fh]
    with open(path, "w") as fh:
        for i in range(n):
            rec = base[i % len(base)]
            fh.write(json.dumps(dict(rec, task_id=f"{rec['task_id']}#{i}")) + "\n")
    return n


def lines_in(path) -> int:
    try:
        with open(path, "rb") as fh:
            return fh.read().count(b"\n")
    except FileNotFoundError:
        return 0


# ---------------------------------------------------------------- 1. the output_dir lock

def test_two_runs_on_one_output_dir_one_is_refused_and_records_are_written_once(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out"
    n = judge_input(inp, 16)
    server = FlakyJudgeServer(failures=0, delay_s=0.15)
    try:
        base = judged(tmp_path, server, inp, out)
        runs = [subprocess.Popen([sys.executable, "-m", "ragscale.run", *base, f"progress_interval_s={i}"], cwd=ROOT,
                                 text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in (1, 2)]
        results = [(p, *p.communicate(timeout=600)) for p in runs]
    finally:
        server.close()
    codes = sorted(p.returncode for p, _, _ in results)
    assert codes == [0, 2], [(p.returncode, e[-2000:]) for p, _, e in results]
    winner = next(i for i, (p, _, _) in enumerate(results) if p.returncode == 0)
    refused = results[1 - winner]
    err = refused[2].strip().splitlines()
    assert len(err) == 1, refused[2]
    assert re.fullmatch(rf"python -m ragscale\.run: error: output_dir {re.escape(str(out))} is in use by the run "
                        rf"started \d{{4}}-\d\d-\d\d \d\d:\d\d on host {re.escape(socket.gethostname())}, "
                        rf"pid {runs[winner].pid}; wait for it, or use another output_dir", err[0]), err[0]
    # nothing written by the refused run: .hydra/ holds the winner's overrides
    assert f"progress_interval_s={winner + 1}" in (out / ".hydra" / "overrides.yaml").read_text()
    recs = records_by_key(out)  # fails on a key written twice
    assert len(recs) == n
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "ok" and run["records"]["out"] == n and run["records"]["duplicates_dropped"] == 0
    summary = json.loads((out / "summary.json").read_text())
    assert sum(m["count"] for m in summary["models"].values()) == n
    assert not (out / LOCK).exists()


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out"
    inp.write_text("".join(records(4)))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out.mkdir()
    (out / LOCK).write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid,
                                        "started": "2026-01-02T03:04:05+00:00"}))
    res = run_cli(*CUSTOM, f"input={inp}", f"output_dir={out}")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert (f"[ragscale] taking over the lock of output_dir {out}: its run (started 2026-01-02 03:04 on host "
            f"{socket.gethostname()}, pid {dead.pid}) is no longer running") in res.stdout
    assert len(records_by_key(out)) == 4 and not (out / LOCK).exists()


# ---------------------------------------------------------------- 2. resume checks the inputs' content

def test_a_record_inserted_into_an_input_is_refused_and_an_appended_one_resumed(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out"
    first = records(4)
    inp.write_text("".join(first))
    args = (*CUSTOM, f"input={inp}", f"output_dir={out}")
    res = run_cli(*args)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    before = (out / "records.jsonl").read_bytes()

    inp.write_text("".join(records(1, start=10) + first))  # a record inserted at line 1
    res = run_cli(*args)
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stderr.strip() == (f"python -m ragscale.run: error: input {inp} changed since this output_dir's run "
                                  "(size/hash differ): re-run with overwrite=true, or use another output_dir")
    assert (out / "records.jsonl").read_bytes() == before  # nothing mixed in

    inp.write_text("".join(first + records(2, start=4)))  # two records appended: resumed, only they are scored
    res = run_cli(*args)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "records=6 already_done=4" in res.stdout
    assert f"[ragscale] input {inp} grew since this output_dir's run (lines appended): only its new records" in res.stdout
    recs = records_by_key(out)
    assert len(recs) == 6 and (out / "records.jsonl").read_bytes().startswith(before)
    assert sorted(int(k.rsplit(":", 1)[1]) for k in recs) == [1, 2, 3, 4, 5, 6]
    run = json.loads((out / "run.json").read_text())
    assert run["records"]["resumed"] == 4 and run["records"]["written_this_run"] == 2


# ---------------------------------------------------------------- 3. SIGTERM and SIGHUP like Ctrl-C

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_mid_run_writes_what_is_finished_and_the_run_resumes(tmp_path, sig):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out"
    n = judge_input(inp, 16)
    server = FlakyJudgeServer(failures=0, delay_s=0.3)
    try:
        args = judged(tmp_path, server, inp, out)
        proc = subprocess.Popen([sys.executable, "-m", "ragscale.run", *args], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 300
            while lines_in(out / "records.jsonl") < 4 and time.time() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert proc.poll() is None, "the run finished before the signal"
            proc.send_signal(sig)
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 128 + sig, stdout[-3000:] + stderr[-3000:]
        name = signal.Signals(sig).name
        run = json.loads((out / "run.json").read_text())
        assert run["status"] == "interrupted" and run["failure"] == f"interrupted by {name}"
        done = run["records"]["out"]
        assert 0 < done < n and lines_in(out / "records.jsonl") == done
        assert f"[ragscale] run interrupted by {name}: {done} of {n} records written; re-run the same command to " \
               f"resume (exit code {128 + sig})" in stdout
        assert (out / "summary.json").exists() and not (out / LOCK).exists()

        server.delay_s = 0.0  # the resumption need not be slow
        res = run_cli(*args)
    finally:
        server.close()
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"already_done={done}" in res.stdout
    assert len(records_by_key(out)) == n
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "ok" and run["records"]["resumed"] == done and run["records"]["written_this_run"] == n - done


# ---------------------------------------------------------------- 6. a torn middle line of records.jsonl

def test_a_torn_middle_line_of_records_is_named_with_the_fix(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out"
    inp.write_text("".join(records(4)))
    args = (*CUSTOM, f"input={inp}", f"output_dir={out}")
    assert run_cli(*args).returncode == 0
    lines = (out / "records.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][:100] + b"\n"  # a write cut in the middle of the file
    (out / "records.jsonl").write_bytes(b"".join(lines[:3]))
    res = run_cli(*args)
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stderr.strip() == (f"python -m ragscale.run: error: {out / 'records.jsonl'} line 2 is not a complete "
                                  "JSON record (a write was cut?): remove that line, or re-run with overwrite=true")
