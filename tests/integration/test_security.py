"""Security, end to end (docs/security.md):

1. An API key planted in OPENAI_API_KEY never leaves the process that uses it: the CLI runs
   judge=openai against a local HTTP server that echoes the request's Authorization header
   back in its error bodies (401, 500, a 200 that is not JSON, a 400 whose echo the engine's
   excerpt would cut through the key) and answers the other prompts; then every file under the
   output directory (records, run.json, summary, report, leaderboard, Hydra's config copy, the
   judge cache) and the Ray session's logs, plus the run's stdout/stderr, are searched for the
   key and for every 8-character piece of its random part.
2. A key given where the NAME of its variable belongs (judge.options.api_key_env=sk-...) is
   refused with a one-line error that does not show it.
3. A local run keeps Ray's token authentication on (ragscale never sets RAY_AUTH_MODE).
4. Injection-style responses (tests/unit/data/injection_responses.json) through the pipeline
   with the local llama.cpp judge: every record comes out exactly once, each judged metric in
   its range or null with a judge error that says why.
5. (unit, no Ray) the helpers behind 1-2: redaction of every form of a key, the secret-shape
   and variable-name checks, and the refusal of key-like judge config values for every engine.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import ROOT


SECRET = uuid.uuid4().hex
KEY = f"sk-ragscale-planted-{SECRET}"
ANSWER = json.dumps({"label": "no", "explanation": "The response answers the question.", "rating": "7"})


def _pieces() -> list[str]:
    """The key, and every 8-character piece of its random part (a cut-off echo leaks a prefix)."""
    return [KEY] + [SECRET[i:i + 8] for i in range(len(SECRET) - 7)]


def _leaks(data: bytes) -> list[str]:
    return [p for p in _pieces() if p.encode() in data]


class EchoServer:
    """An OpenAI-compatible endpoint that answers each distinct prompt with one behaviour, in
    turn: echo the Authorization header in a 401, in a 500 (retried), in a 200 that is not JSON
    (retried), in a 400 where the key straddles the engine's 300-character excerpt, or answer."""

    KINDS = ("401", "500", "200-not-json", "400-cut", "ok", "ok")

    def __init__(self):
        self.kind_of: dict[str, str] = {}
        self.cycle = itertools.cycle(self.KINDS)
        self.seen: list[str] = []
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                text = json.dumps(body.get("messages"), sort_keys=True)
                h = hashlib.sha256(text.encode()).hexdigest()
                auth = self.headers.get("Authorization", "")
                with srv.lock:
                    kind = srv.kind_of.setdefault(h, next(srv.cycle))
                    srv.seen.append(kind)
                if kind == "401":
                    status, payload = 401, json.dumps({"error": {"message": f"Incorrect API key provided: {auth}",
                                                                 "headers": dict(self.headers)}})
                elif kind == "500":
                    status, payload = 500, f"Internal error while handling Authorization: {auth} (request {h[:8]})"
                elif kind == "200-not-json":
                    status, payload = 200, f"<html>proxy error; you sent {auth}</html>"
                elif kind == "400-cut":
                    status, payload = 400, "x" * 230 + f" bad request with {auth} and more text after it"
                else:
                    status, payload = 200, json.dumps({
                        "id": "c", "object": "chat.completion",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
                data = payload.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def ray_tmp():
    """A short Ray temp dir (Unix socket paths are limited to ~107 bytes) whose logs are searched."""
    d = tempfile.mkdtemp(prefix="rs-sec-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _files(*roots) -> list[str]:
    return [os.path.join(d, f) for root in roots for d, _, fs in os.walk(root) for f in fs
            if os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f))]


@pytest.mark.integration
@pytest.mark.own_ray  # Ray's own logs (under RAY_TMPDIR) are searched too
def test_planted_api_key_is_in_no_output_log_or_message(tmp_path, ray_tmp):
    pytest.importorskip("httpx")
    srv = EchoServer()
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", "judge=openai", "judge.model=echo-judge",
           f"judge.options.base_url={srv.url}", "judge.options.max_attempts=2", "judge.options.backoff_s=0",
           "judge.options.concurrency=4", "judge.max_retries=0", "steps=[idk,radbench]", "limit=6",
           f"output_dir={out}", f"judge.cache_path={out / 'judge_cache.sqlite'}"]
    env = {**os.environ, "OPENAI_API_KEY": KEY, "RAY_TMPDIR": ray_tmp}
    try:
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    finally:
        srv.close()
    # the server fails some prompts on purpose: a record whose judge engine gave no output counts as
    # failed (docs/exit-codes.md), so the run ends with 3, or 4 when every record met a failing prompt
    assert res.returncode in (3, 4), res.stdout[-2000:] + res.stderr[-3000:]
    assert json.load(open(out / "run.json"))["status"] == {3: "record_errors", 4: "nothing_scored"}[res.returncode]
    assert set(srv.seen) == set(EchoServer.KINDS), srv.seen  # every behaviour was exercised

    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    assert len(recs) == 6
    errors = [e for r in recs for e in r["ragscale"]["judge_errors"]]
    reasons = " | ".join(str(e.get("reason")) for e in errors)
    for status in ("HTTP 401", "HTTP 500", "HTTP 200 with a non-JSON body", "HTTP 400"):
        assert status in reasons, reasons  # the failures are reported ...
    assert "Bearer ***" in reasons  # ... with the echoed credential redacted
    scored = [r for r in recs if r["metrics"].get("idk_eval") or r["metrics"].get("RB_llm")]
    assert scored, "some prompts were answered"
    run = json.load(open(out / "run.json"))
    assert run["models"]["judge"]["engine_options"]["api_key_env"] == "OPENAI_API_KEY"

    files = _files(out, ray_tmp)
    assert any(f.endswith("run.json") for f in files) and any(f.endswith("judge_cache.sqlite") for f in files)
    assert any(f.endswith(".hydra/config.yaml") for f in files) and any("/logs/" in f for f in files)
    leaked = {}
    for path in files:
        with open(path, "rb") as fh:
            found = _leaks(fh.read())
        if found:
            leaked[os.path.relpath(path, tmp_path) if path.startswith(str(tmp_path)) else path] = found
    assert not leaked, leaked
    assert not _leaks(res.stdout.encode()) and not _leaks(res.stderr.encode())


@pytest.mark.integration
def test_a_key_in_place_of_the_variable_name_is_refused_without_showing_it(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", "judge=openai", "judge.model=echo-judge",
           "judge.options.base_url=http://127.0.0.1:9/v1", f"judge.options.api_key_env={KEY}", "steps=[idk]",
           f"output_dir={out}"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    err = res.stderr.strip().splitlines()
    assert err and "api_key_env" in err[-1] and "not shown" in err[-1], err
    assert not _leaks(res.stdout.encode()) and not _leaks(res.stderr.encode())


@pytest.mark.integration
def test_a_key_given_on_the_command_line_is_never_written(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", "judge=openai", "judge.model=echo-judge",
           "judge.options.base_url=http://127.0.0.1:9/v1", f"judge.options.api_key_env={KEY}", "steps=[idk]",
           f"output_dir={out}"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    leaked = {p: _leaks(open(p, "rb").read()) for p in _files(out)}
    assert not any(leaked.values()), leaked


@pytest.mark.integration
@pytest.mark.own_ray  # a local start's token authentication
def test_local_runs_keep_ray_token_authentication_on(tmp_path, ray_tmp):
    """With RAY_AUTH_MODE unset, ragscale's init_ray starts Ray with token authentication (Ray
    2.52+ default for a new local cluster) and leaves the mode alone."""
    code = (
        "import os\n"
        "from ragscale.pipeline.dataset import init_ray\n"
        "init_ray({'address': None, 'num_cpus': 1})\n"
        "from ray._raylet import AuthenticationMode, get_authentication_mode\n"
        "import ray\n"
        "print('MODE', get_authentication_mode() == AuthenticationMode.TOKEN, os.environ.get('RAY_AUTH_MODE'))\n"
        "ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(HOME=str(tmp_path), RAY_TMPDIR=ray_tmp)
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "MODE True token" in res.stdout, res.stdout + res.stderr[-2000:]
    assert (tmp_path / ".ray" / "auth_token").is_file()  # Ray generated the cluster's token


@pytest.mark.integration
def test_injection_responses_through_the_pipeline_with_the_local_judge(tmp_path, ray_tmp):
    pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")
    with open(os.path.join(ROOT, "tests", "unit", "data", "injection_responses.json")) as fh:
        injections = {i["id"]: i["text"] for i in json.load(fh)["texts"]}
    with open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")) as fh:
        base = next(r for r in map(json.loads, fh) if r["task_id"] == "conv-api::2")  # short passages
    picked = ["fake-closing-tags", "json-blob", "mtrag-sections", "radbench-sections", "chat-control-tokens"]
    records = []
    for name in picked:
        r = json.loads(json.dumps(base))
        r["model_id"] = f"inj-{name}"
        r["predictions"] = [{"text": injections[name]}]
        records.append(r)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out"
    inp.write_text("".join(json.dumps(r) + "\n" for r in records))
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", f"input={inp}", f"output_dir={out}",
           "steps=[idk,radbench]", f"judge.cache_path={tmp_path / 'cache.sqlite'}", "judge.options.n_ctx=4096"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "RAY_TMPDIR": ray_tmp})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    keys = sorted((r["task_id"], r["model_id"]) for r in recs)
    assert keys == sorted(("conv-api::2", f"inj-{n}") for n in picked)  # every record exactly once
    for r in recs:
        m, errs = r["metrics"], r["ragscale"]["judge_errors"]
        for metric, judge, allowed in (("idk_eval", "idk", {0.0, 0.5, 1.0}),
                                       ("RB_llm", "radbench", {i / 10 for i in range(1, 11)})):
            if m.get(metric) is not None:
                assert len(m[metric]) == 1 and m[metric][0] in allowed, (r["model_id"], metric, m[metric])
            else:  # a clear judge error: which judge, why, and the raw output
                assert any(e["judge"] == judge and e.get("reason") for e in errs), (r["model_id"], metric, errs)
    run = json.load(open(out / "run.json"))
    assert run["records"]["out"] == len(picked) and run["records"]["missing"] == 0
    assert run["judge_work"]["by_judge"]["idk"]["prompts"] == len(picked)


# -- the helpers, without Ray -------------------------------------------------------------


def test_redact_every_form_of_the_key_and_any_credential():
    from urllib.parse import quote

    from ragscale.actors.engines.openai_compat import redact, secret_variants

    key = KEY + "\n"  # as read from a file
    forms = secret_variants(key)
    assert KEY in forms and json.dumps(key)[1:-1] in forms
    text = (f"Authorization: Bearer {KEY} | json {json.dumps({'h': 'Bearer ' + key})} | repr {key!r} | "
            f"url ?key={quote(key, safe='')} | other Bearer eyJ0eXAi0iJKV1QiLCJhbGciOiJIUzI1NiJ9.e30.x1 | "
            "sk-another-0123456789abcdefghij")
    out = redact(text, [key])
    assert not _leaks(out.encode()) and "eyJ0eXAi" not in out and "sk-another" not in out, out
    assert "Basic authentication failed" == redact("Basic authentication failed", [key])  # words stay
    assert redact(f"the model said {KEY}", [key], shapes=False) == "the model said ***"


def test_secret_shapes_and_variable_names():
    from ragscale.secrets import looks_like_env_name, looks_like_secret, secret_paths

    for v in (KEY, "hf_" + "a1" * 12, "ghp_" + "b2" * 12, "AKIA" + "ABCDEFGHIJKLMNOP", "Bearer " + SECRET):
        assert looks_like_secret(v) and not looks_like_env_name(v), v
    for v in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "MY_KEY_2", "Qwen/Qwen2.5-7B-Instruct", "gpt-4o-mini",
              "http://127.0.0.1:8000/v1", "max_completion_tokens"):
        assert not looks_like_secret(v), v
    assert looks_like_env_name("OPENAI_API_KEY") and not looks_like_env_name(SECRET)  # a hex (Azure-like) key
    conf = {"model": "m", "options": {"api_key_env": "OPENAI_API_KEY", "api_key": "x", "extra_body": {"t": [KEY]},
                                      "max_tokens_param": "max_tokens", "batch_tokens": 4096}}
    assert secret_paths(conf) == ["options.api_key", "options.extra_body.t[0]"]


@pytest.mark.parametrize("engine, options", [
    ("openai", {"base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY}),
    ("openai", {"base_url": "http://127.0.0.1:9/v1", "api_key_env": SECRET}),  # 32 hex characters
    ("openai", {"base_url": "http://127.0.0.1:9/v1", "extra_body": {"user": KEY}}),
    ("openai", {"base_url": "http://127.0.0.1:9/v1", "extra_headers": {"X-Gateway": "Bearer " + SECRET}}),
    ("llama.cpp", {"api_key": KEY}),
    ("vllm", {"engine_kwargs": {"hf_token": "hf_" + SECRET}}),
])
def test_key_like_judge_config_values_are_refused_without_being_shown(engine, options):
    from ragscale.actors.engines import resolve
    from ragscale.errors import UserError

    conf = {"name": "x", "engine": engine, "model": "m", "seed": 0, "options": options}
    with pytest.raises(UserError) as e:
        resolve(conf, {})
    msg = str(e.value)
    assert "\n" not in msg and not _leaks(msg.encode()) and SECRET not in msg, msg
