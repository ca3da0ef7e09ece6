"""``ragscale prompts`` against one real run on the bundled MT-RAG sample (the packaged llama.cpp
SmolLM2 judge, a fresh judge cache): the prompts the dry run says a run sends are the ones the run
generated (cache keys, counts as run.json's judge_work counts them, prompt tokens as the engine
reported them), the estimated round (RL_F's verdicts) against the real one, and nothing left to send
after the run. Also the reference protocol's dry run, where the MT-RAG judges have one."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration
pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")

LIMIT = 6  # records of the sample (two tasks, three models): one real run of three judges, about 2 minutes on 2 cores
SINGLE_ROUND = ("idk", "radbench")
FAITH = "ragas_faithfulness"


def _prompts(tmp_path, name: str, *overrides: str) -> tuple[list[dict], list[str]]:
    out = tmp_path / f"{name}.jsonl"
    res = subprocess.run([sys.executable, "-m", "ragscale.dryrun", *overrides, "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    lines = res.stdout.strip().splitlines()
    assert lines[-1].startswith(f"[ragscale] open the prompts: {out}")  # the last line: what to open
    return [json.loads(line) for line in open(out)], lines


def test_dry_run_matches_the_real_run(tmp_path):
    from ragscale.judges import JUDGES
    from ragscale.judges.base import JudgeParseError
    from ragscale.judges.faithfulness import parse_statements
    from ragscale.plan import compose
    from ragscale.dryrun import dry_run

    cache = tmp_path / "cache.sqlite"
    common = ["+scenario=mtrag", f"limit={LIMIT}", f"judge.cache_path={cache}"]
    before, table = _prompts(tmp_path, "before", *common)
    assert not cache.exists()  # read, never made
    assert any("(estimate)" in line for line in table) and any(line.startswith("[ragscale] estimated:") for line in table)

    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "ragscale.run", *common, f"output_dir={out}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    work = json.load(open(out / "run.json"))["judge_work"]["by_judge"]
    db = sqlite3.connect(cache)
    meta = {k: json.loads(m) for k, m in db.execute("SELECT key, meta FROM generations")}
    text = dict(db.execute("SELECT key, text FROM generations"))
    db.close()

    # single-round judges: what the dry run listed is what the run generated
    for judge in SINGLE_ROUND:
        mine = [x for x in before if x["judge"] == judge]
        w = work[judge]
        sent = w["prompts"] + w.get("retries", 0) - w.get("cache_hits", 0) - w.get("dedup_hits", 0)
        assert sent == w.get("generations", 0) + w.get("engine_errors", 0)
        # re-asks after a parse failure of an output not generated yet cannot be foreseen: exact without them
        assert sent - w.get("retries", 0) <= len(mine) <= sent, (judge, len(mine), w)
        assert mine and not any(x["estimated"] for x in mine)
        assert {x["cache_key"] for x in mine} <= set(meta)
        assert [x["prompt_tokens"] for x in mine] == [meta[x["cache_key"]]["prompt_tokens"] for x in mine]

    # after the run: nothing to send, and every prompt asked is one the run generated
    after, table = _prompts(tmp_path, "after", *common)
    assert after == [] and any(line.startswith("total") and line.split()[1] == "0" for line in table)
    again = dry_run(compose(common), io.StringIO(), keep_lookups=True)
    assert again.prompts == 0
    assert {x["cache_key"] for x in again.lookups} == set(meta)
    for judge, w in work.items():  # the actor's own counts
        assert again.work["by_judge"][judge]["prompts"] == w["prompts"]
        assert again.work["by_judge"][judge].get("retries", 0) == w.get("retries", 0)
    first_asks = {(x["judge"], x["round"]): set() for x in again.lookups}
    for x in again.lookups:
        if x["attempt"] == 0:
            first_asks[(x["judge"], x["round"])].add(x["cache_key"])
    for judge in SINGLE_ROUND:
        assert first_asks[(judge, 1)] == {x["cache_key"] for x in before if x["judge"] == judge and x["attempt"] == 0}

    # RAGAS faithfulness: the statements round is rendered exactly, the verdicts estimated
    statements = {x["record"]["key"]: x for x in before if x["judge"] == FAITH and not x["estimated"]}
    estimated = {x["record"]["key"]: x for x in before if x["judge"] == FAITH and x["estimated"]}
    assert {x["round"] for x in statements.values()} == {1} and {x["round"] for x in estimated.values()} == {2}
    assert {x["cache_key"] for x in statements.values()} == first_asks[(FAITH, 1)]
    real = {x["record"]: meta[x["cache_key"]]["prompt_tokens"] for x in again.lookups
            if x["judge"] == FAITH and x["round"] == 2 and x["attempt"] == 0}
    assert set(real) <= set(estimated)
    for key in set(estimated) - set(real):  # no verdict round in the run: the judge model gave no statement
        try:
            assert parse_statements(text[statements[key]["cache_key"]]) == []
        except JudgeParseError:
            pass
    for key, tokens in real.items():
        assert abs(estimated[key]["prompt_tokens"] - tokens) <= 0.25 * tokens, (key, estimated[key]["prompt_tokens"], tokens)
    print(f"\nRL_F verdicts: {len(estimated)} estimated, {len(real)} real; tokens of the real ones: estimated "
          f"{sum(estimated[k]['prompt_tokens'] for k in real)}, real {sum(real.values())}; "
          f"single-round prompts: {[(j, sum(x['judge'] == j for x in before), work[j]) for j in SINGLE_ROUND]}")

    # the reference protocol (where the MT-RAG judges have one): its own prompts, none of them cached
    if JUDGES["radbench"].reference_version is None:
        return
    ref, _ = _prompts(tmp_path, "reference", *common, "judge.protocol=reference")
    for judge in (*SINGLE_ROUND, FAITH):
        spec = JUDGES[judge]
        mine = [x for x in ref if x["judge"] == judge and x["round"] == 1]
        assert {x["version"] for x in mine} == {spec.reference_version or spec.version}
        constrained = sum(x["judge"] == judge and x["round"] == 1 and x["attempt"] == 0 for x in before)
        # ragas (reference) also asks for the statements of a record without passages, which
        # constrained leaves out ("no passages")
        assert len(mine) == constrained if judge != FAITH else len(mine) >= constrained
        if spec.reference_version:
            assert not {x["cache_key"] for x in mine} & set(meta)
