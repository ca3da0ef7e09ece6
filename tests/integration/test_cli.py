"""The ``ragscale`` command: subcommands, Hydra multirun (every job runs, each in its own
output dir; the exit code says whether any failed) and secrets refused with ``-m`` too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAGSCALE = os.path.join(os.path.dirname(sys.executable), "ragscale")
KEY = "sk-ragscaleplantedmultirunkey0123456789"

pytestmark = pytest.mark.integration


def ragscale(*args: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSCALE, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_help_lists_the_subcommands(tmp_path):
    res = ragscale("--help", cwd=str(tmp_path))
    assert res.returncode == 0
    for cmd in ("run", "plot", "report", "agree"):
        assert f"\n  {cmd} " in res.stdout
    bad = ragscale("rnu", cwd=str(tmp_path))
    assert bad.returncode == 2 and "did you mean" in bad.stderr and "run" in bad.stderr


def test_multirun_runs_every_job_in_its_own_dir_and_reports_a_failed_one(tmp_path):
    out = tmp_path / "sweep"
    res = ragscale("run", "+scenario=custom", "-m", f"output_dir={out}", "limit=2,3", cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    counts = [sum(1 for _ in open(out / str(i) / "records.jsonl")) for i in (0, 1)]
    assert counts == [2, 3]
    assert json.loads((out / "1" / "run.json").read_text())["config"]["output_dir"] == str(out / "1")
    assert "2 jobs, 0 failed" in res.stdout

    # the second job fails (fact checks without their expectations file): the first still ran
    bad = tmp_path / "bad"
    res = ragscale("run", "-m", "+scenario=custom", f"output_dir={bad}", "limit=2",
                   "custom.expectations=custom_expectations.yaml,null", cwd=str(tmp_path))
    assert res.returncode != 0
    assert sum(1 for _ in open(bad / "0" / "records.jsonl")) == 2
    assert "need custom.expectations" in res.stderr and "2 jobs, 1 failed" in res.stdout

    # the subcommands read a job's output dir
    rep = ragscale("report", str(out / "0"), cwd=str(tmp_path))
    assert rep.returncode == 0 and (out / "0" / "report.html").is_file()


@pytest.mark.parametrize("override", [
    f"+judge.options.api_key={KEY}",
    f"+judge.options.api_key=placeholder,{KEY}",
    f"judge.seed=choice(1,{KEY})",
    f"judge.options.api_key_env={KEY}",
])
def test_a_secret_given_with_multirun_reaches_no_file(tmp_path, override):
    out = tmp_path / "sweep"
    res = ragscale("run", "-m", "+scenario=custom", f"output_dir={out}", override, cwd=str(tmp_path))
    assert res.returncode == 2 and "looks like a secret" in res.stderr
    assert KEY not in res.stdout + res.stderr
    for d, _, files in os.walk(tmp_path):
        for f in files:
            assert KEY not in open(os.path.join(d, f), errors="replace").read(), os.path.join(d, f)
    assert not out.exists()
