"""Answer relevancy with ``relevancy.embeddings=openai``, end to end: one run of the bundled ragas
sample (``+scenario=ragas``, answer relevancy only) through the CLI and Ray, with a local
OpenAI-compatible server (tests/fake_embeddings.py) as the judge (deterministic ragas question
generation) and as the embeddings endpoint, serving the packaged MiniLM through ragscale's own
Encoder. The endpoint fails every request that holds a text about "Harlow Bay" (HTTP 503, after
the retries). Checked: every record comes out once; the records whose texts were embedded have
the offline path's values (the RelevancyActor over the packaged encoder, on the same generated
questions); the others are null with the stage and reason, failed records (exit 3: the engine
failed on them, docs/exit-codes.md); the requests are well-formed and
batched; run.json names the endpoint and model and no encoder was loaded. Another served model
gives other values."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration
pytest.importorskip("httpx")

from fake_embeddings import EmbeddingsServer, encoder_vectors  # noqa: E402

TRIGGER = "Harlow Bay"


def relevancy_rows(records: list[dict]) -> list[dict]:
    """The RelevancyActor's input rows rebuilt from output records (their judge details)."""
    return [{"error": None, "metrics": {}, "judge_errors": [], "stats": None,
             "details": {"ragas_answer_relevancy": json.dumps(r["ragscale"]["details"]["ragas_answer_relevancy"])}}
            for r in records]


def scores(rows: list[dict]) -> list[float | None]:
    return [r["metrics"].get("answer_relevancy") for r in rows]


def test_endpoint_run_equals_the_offline_path_and_failures_are_null_with_their_reason(tmp_path):
    from ragscale.actors.encoder import RelevancyActor
    from ragscale.plan import compose, plan_run

    def outage(body, headers):
        return (503, "simulated outage") if any(TRIGGER in t for t in body["input"]) else None

    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # no real key near a test server
    with EmbeddingsServer(encoder_vectors(6), fail=outage, judge=True) as srv:
        cmd = [sys.executable, "-m", "ragscale.run", "+scenario=ragas", f"output_dir={out}",
               "metrics.ragas=[answer_relevancy]", "html_report=false",
               "judge=openai", "judge.model=fake-ragas-judge", f"judge.options.base_url={srv.url}",
               f"judge.cache_path={tmp_path / 'cache.sqlite'}",
               "relevancy.embeddings=openai", f"relevancy.base_url={srv.url}", "relevancy.model=minilm-served",
               "relevancy.batch_size=3", "relevancy.max_attempts=2", "relevancy.backoff_s=0"]
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
        # the records whose texts the endpoint never embedded failed (an engine error): exit 3
        assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-3000:]
        bodies = srv.embedding_bodies()
        failed = {t for inputs in srv.failed for t in inputs}

    records = [json.loads(line) for line in open(out / "records.jsonl")]
    sample = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
    assert len(records) == sum(1 for _ in open(sample)) and not any(r["error"] for r in records)  # nothing lost
    # (a) well-formed, batched requests: the model and a list of at most batch_size texts
    assert bodies and all(set(b) == {"model", "input"} and b["model"] == "minilm-served" for b in bodies)
    assert all(isinstance(b["input"], list) and 1 <= len(b["input"]) <= 3 for b in bodies)
    assert max(len(b["input"]) for b in bodies) == 3

    # (b) the offline path: the RelevancyActor with the run's packaged encoder, on the same questions
    offline_plan = plan_run(compose(["+scenario=ragas"]))
    offline = relevancy_rows(records)
    RelevancyActor(encoder={**offline_plan.encoder_kwargs, "torch_threads": 1}).process(offline)
    want = scores(offline)
    ok = bad = 0
    for r, w in zip(records, want):
        d = r["ragscale"]["details"]["ragas_answer_relevancy"]
        got = r["metrics"]["answer_relevancy"]
        if {d["question"], *d["generated"]} & failed:  # (c) a text the endpoint never embedded
            bad += 1
            errs = [e for e in r["ragscale"]["judge_errors"] if e.get("stage") == "relevancy"]
            assert got is None and len(errs) == 1 and errs[0]["judge"] == "ragas_answer_relevancy", r["task_id"]
            assert errs[0]["reason"].startswith(f"engine error: openai engine: {srv.url}/embeddings: HTTP 503")
            assert "simulated outage" in errs[0]["reason"] and errs[0]["reason"].endswith("(2 attempts)")
        else:
            ok += 1
            assert w is not None and got == pytest.approx(w, abs=1e-6), r["task_id"]
    assert bad >= 1 and ok >= 10 and sum(1 for w in want if w) >= 10  # non-trivial values on both sides

    info = json.load(open(out / "run.json"))
    assert info["models"]["answer_relevancy_embeddings"] == {
        "source": "openai", "url": f"{srv.url}/embeddings", "model": "minilm-served", "api_key_env": "OPENAI_API_KEY"}
    assert info["models"]["encoder"] is None  # no encoder stage, no encoder loaded for relevancy
    work = info["encoder_work"]
    assert work["relevancy_requests"] == len(bodies) and work["relevancy_http_errors"] == len(srv.failed) // 2
    summary = json.load(open(out / "summary.json"))
    assert sum(m["judge_engine_errors"].get("ragas_answer_relevancy", 0) for m in summary["models"].values()) == bad
    assert info["status"] == "record_errors" and info["records"]["errored"] == info["records"]["judge_failed"] == bad

    # another model behind the endpoint (MiniLM cut to 3 layers): other values
    with EmbeddingsServer(encoder_vectors(3)) as other:
        rows = relevancy_rows(records)
        RelevancyActor(endpoint={"model": "other", "base_url": other.url}).process(rows)
    diff = [abs(a - b) for a, b in zip(scores(rows), want) if a is not None and b]
    assert len(diff) >= 10 and np.mean(diff) > 0.01
