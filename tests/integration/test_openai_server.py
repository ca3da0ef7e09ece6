"""judge=openai against a real OpenAI-compatible server: llama-cpp-python's
``python -m llama_cpp.server`` with the packaged SmolLM2 GGUF (requantized to Q8_0, as the local
judge's default), started with an API key.

(a) the engine through the server: constrained output (the server's json_object+schema,
found by response_format=auto) parses for every IDK and RADBench prompt, several in flight;
(b) the CLI with judge=openai: the key reaches the judge actors only through the environment
variable named by judge.options.api_key_env and appears in no output file.
"""

import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration
for _mod in ("llama_cpp", "httpx", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
    pytest.importorskip(_mod, reason="judge=openai tests need `pip install ragscale[judge-local,judge-server]`")

KEY = f"sk-ragscale-planted-{uuid.uuid4().hex}"
KEY_ENV = "RAGSCALE_IT_JUDGE_KEY"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    import httpx

    from ragscale.errors import UserError
    from ragscale.config import JudgeConf
    from ragscale.weights import requantized_gguf, resolve_gguf, split_gguf_spec

    spec, requantize = split_gguf_spec(JudgeConf.model)  # the local judge's default model
    try:
        gguf = resolve_gguf(spec)
        gguf = requantized_gguf(gguf, requantize) if requantize else gguf
    except UserError as e:
        pytest.skip(str(e))
    port = _free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    # The server picks the GGUF's own chat template (ChatML for SmolLM2): no --chat_format.
    # One thread: llama.cpp's threads spin-wait for each other, and on a busy small machine
    # (Ray, the test runner) 2 threads measured 5-50x slower than 1.
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "8192", "--n_threads", "1", "--n_threads_batch", "1", "--api_key", KEY, "--verbose", "False"]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(url + "/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.time() > deadline:
                pytest.fail(f"llama_cpp.server did not answer in 90 s: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _records(n: int) -> list[dict]:
    with open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")) as fh:
        return [json.loads(line) for line in fh][:n]


def test_engine_constrained_output_through_llama_cpp_server(llama_server, monkeypatch):
    from ragscale.actors.engines.openai_compat import Engine
    from ragscale.judges import idk, radbench

    monkeypatch.setenv(KEY_ENV, KEY)
    recs = _records(2)
    # two IDK prompts (they share the few-shot prefix: the server reuses its KV cache) and a RADBench one
    prompts = [idk.render(r["input"], r["predictions"][0]["text"]) for r in recs]
    r = recs[0]
    prompts.append(radbench.render(r["input"], r["targets"][0]["text"], [c["text"] for c in r["contexts"]],
                                   r["predictions"][0]["text"]))
    parsers = [idk.parse, idk.parse, radbench.parse]
    e = Engine(model="smollm2", base_url=llama_server, api_key_env=KEY_ENV, concurrency=3, timeout_s=300,
               max_attempts=3, backoff_s=0.2)
    gens = e.generate(prompts)
    assert [g.error for g in gens] == [None] * len(prompts)
    for g, parse in zip(gens, parsers):
        parse(g.text)  # constrained decoding through the server: every output parses
        assert g.prompt_tokens > 100 and g.completion_tokens > 0
    # auto: json_schema was rejected by this server once, then json_object + schema for good
    assert e.response_format_used == "json_object_schema"
    assert e.last_stats["http_errors"] == 0 and e.last_stats["http_retries"] == 0

    # the server really checks the key: without it, a 401 at once (not retried), key-free error
    monkeypatch.delenv(KEY_ENV)
    [g] = e.generate(prompts[:1])
    assert g.text == "" and "HTTP 401" in g.error and "(1 attempt)" in g.error and "not set" in g.error
    monkeypatch.setenv(KEY_ENV, "sk-wrong-" + KEY[::-1])
    [g] = e.generate(prompts[:1])
    assert "HTTP 401" in g.error and KEY[::-1] not in g.error and KEY not in repr(e)


@pytest.mark.own_ray  # the key reaches the judge actors from the driver's environment, as on a local start
def test_cli_judge_openai_keeps_the_key_out_of_outputs(llama_server, tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", "judge=openai", "judge.model=smollm2",
           f"judge.options.base_url={llama_server}", f"judge.options.api_key_env={KEY_ENV}",
           "judge.options.concurrency=4", "judge.options.timeout_s=300", "steps=[idk,radbench]", "limit=2",
           f"output_dir={out}", f"judge.cache_path={cache}"]
    env = {**os.environ, KEY_ENV: KEY}
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    assert len(recs) == 2
    for r in recs:
        errs = r["ragscale"]["judge_errors"]
        for metric, judge in (("idk_eval", "idk"), ("RB_llm", "radbench")):
            assert (r["metrics"][metric] is not None and len(r["metrics"][metric]) == 1) or any(
                e["judge"] == judge for e in errs), (metric, r["metrics"], errs)
        assert not any("HTTP" in str(e.get("reason")) for e in errs), errs  # the endpoint answered every prompt
    run = json.load(open(out / "run.json"))
    judge = run["models"]["judge"]
    assert judge["engine"] == "openai" and judge["model"] == "smollm2"
    assert judge["engine_options"]["api_key_env"] == KEY_ENV and judge["engine_options"]["base_url"] == llama_server
    assert run["judge_work"]["prompts"] == 4 and not run["judge_work"].get("engine_errors")
    # the key is in no file of the run (records, run.json, summary, Hydra's config copy), nor the cache or the logs
    files = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs] + [str(cache)]
    assert len(files) >= 4
    for path in files:
        with open(path, "rb") as fh:
            assert KEY.encode() not in fh.read(), path
    assert KEY not in res.stdout and KEY not in res.stderr
