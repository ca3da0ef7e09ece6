"""A few of tests/unit/test_messages.py's command lines through the real ``ragscale`` command
(a fresh process: Hydra's own error handling and logging as a user meets them): the exact one
line on stderr, exit code 2, no traceback or Hydra text, nothing written, in a few seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

RAGSCALE = os.path.join(os.path.dirname(sys.executable), "ragscale")
JUDGES = "local, openai, vllm, vllm-cpu"

pytestmark = pytest.mark.integration

CASES = [
    (["run", "scenario=custom"], "ragscale run: error: use +scenario=custom (a scenario is added with +)"),
    (["run", "+scenario=custm"], "ragscale run: error: unknown scenario 'custm' (did you mean 'custom'?); "
                                 "available: custom, mtrag, mtrag_retrieval, mtragun, ragas, taxonomy, trec"),
    (["run", "+scenario=custom", "judge=locl"],
     f"ragscale run: error: unknown judge 'locl' (did you mean 'local'?); available: {JUDGES}"),
    (["run", "+scenario=custom", "limt=3"], "ragscale run: error: unknown key 'limt' (did you mean 'limit'?)"),
    (["run", "+scenario=custom", "limit=abc"], "ragscale run: error: limit must be an integer, got 'abc'"),
    (["run", "-m", "+scenario=custom", "judge=local,locl"],
     f"ragscale run: error: unknown judge 'locl' (did you mean 'local'?); available: {JUDGES}"),
    (["+scenario=custom", "limt=3"], "ragscale: error: unknown key 'limt' (did you mean 'limit'?)"),
    (["evaluate", "data.jsonl"], "ragscale: error: unknown command 'evaluate' (did you mean 'run'? ragscale run "
                                 "evaluates)"),
    (["prompts", "+scenario=custom", "judge.modle=x"],
     "ragscale prompts: error: unknown key 'judge.modle' (did you mean 'judge.model'?)"),
]


@pytest.mark.parametrize("args, line", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_the_real_command_says_one_line(args, line, tmp_path):
    start = time.perf_counter()
    res = subprocess.run([RAGSCALE, *args, f"output_dir={tmp_path / 'out'}"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    took = time.perf_counter() - start
    assert (res.returncode, res.stderr) == (2, line + "\n"), res.stdout + res.stderr
    assert not any(t in res.stdout + res.stderr for t in ("Traceback", "Error executing job", "HYDRA_FULL_ERROR"))
    assert "starting Ray" not in res.stdout and os.listdir(tmp_path) == []  # no output_dir, multirun.yaml, prompts
    assert took < 10, took  # a Python start, Hydra's import and one compose per value


def test_run_help_through_the_real_command(tmp_path):
    res = subprocess.run([RAGSCALE, "run", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stderr == ""
    assert "\n  mtrag " in res.stdout and "\n  openai " in res.stdout and "metrics=[a,b]" in res.stdout
    assert "_schema" not in res.stdout and "[]" not in res.stdout
