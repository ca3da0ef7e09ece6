"""Live progress, read as a user reads it: the CLI in a subprocess (stdout not a terminal, so
one line per ``progress_interval_s``), judging through a slow OpenAI-compatible endpoint.

- progress lines arrive while the run works, and their counts grow: the judge's prompts are
  counted inside its batch (the endpoint answers one prompt at a time, slowly, and the whole
  sample is one judge batch), not only when the batch returns;
- Ray's start-up noise (its token-auth notice, its C++ core's log lines) does not reach the
  user by default; the native lines are kept in the run's logs/ray-native.log.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from fake_judge import FlakyJudgeServer

pytestmark = pytest.mark.integration

pytest.importorskip("httpx", reason="the OpenAI-compatible engine needs httpx (a core dependency)")

# the OpenAI-compatible engine streams: the judge actor counts every prompt under "streamed"
PROMPTS = re.compile(r"streamed \(idk\) (\d+)/(\d+) prompts")
JUDGE = re.compile(r"· judge (\d+)/(\d+)")
RAY_NOISE = ("Token authentication", "core_worker", "object store", "RAY_AUTH_MODE")


def run_cli(args: list[str]) -> tuple[list[tuple[float, str]], str, int]:
    """Run the CLI; (stdout lines with the time each arrived, stderr, exit code)."""
    proc = subprocess.Popen([sys.executable, "-m", "ragscale.run", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = []
    assert proc.stdout is not None and proc.stderr is not None
    for line in proc.stdout:
        lines.append((time.monotonic(), line.rstrip("\n")))
    err = proc.stderr.read()
    return lines, err, proc.wait(timeout=600)


def test_progress_lines_grow_while_the_judge_works(tmp_path):
    server = FlakyJudgeServer(failures=0, delay_s=0.5)
    out = tmp_path / "out"
    try:
        lines, err, code = run_cli([
            "+scenario=mtrag", "steps=[algorithmic,idk]", "limit=12", f"output_dir={out}", "html_report=false",
            "judge=openai", "judge.model=fake-judge", f"judge.options.base_url={server.url}",
            "judge.options.concurrency=1", f"judge.cache_path={tmp_path / 'cache.sqlite'}", "progress_interval_s=1"])
    finally:
        server.close()
    text = "\n".join(line for _, line in lines)
    assert code == 0, text[-3000:] + err[-3000:]

    progress = [(t, line) for t, line in lines if line.startswith("[ragscale] ") and "· written " in line]
    end = next(t for t, line in lines if "records evaluated" in line)
    assert all(t <= end for t, _ in progress)
    # the judge's prompts, counted inside its one batch: at least three lines with growing counts
    # while no judged record has come back yet
    inside = []
    for t, line in progress:
        m, j = PROMPTS.search(line), JUDGE.search(line)
        if m and j and int(j.group(1)) == 0:
            inside.append((t, int(m.group(1)), int(m.group(2))))
    done = [d for _, d, _ in inside]
    assert len(set(done)) >= 3, text
    assert done == sorted(done) and max(d for _, d, total in inside if d <= total) > 0, text
    assert inside[-1][0] - inside[0][0] >= 1.0  # they arrived over time, not at once
    # every line says how far the run is and how fast it goes
    assert all(re.search(r"\[ragscale\] \d+(m\d\ds)?s? read \d+/12", line) for _, line in progress), text
    assert "12/12 records evaluated" in text

    # Ray's start-up noise is not shown; its native log lines are kept with the run
    assert not [line for line in err.splitlines() if any(n in line for n in RAY_NOISE)], err
    assert not [line for line in text.splitlines() if any(n in line for n in RAY_NOISE)], text
    assert (out / "logs" / "ray-native.log").exists()
