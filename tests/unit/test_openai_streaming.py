"""The OpenAI-compatible engine's streaming side (``submit``): answers in the right Futures from
many threads, one concurrency bound across submits, retries, failures that resolve (never raise)
without the key, ``close``, and the judge actor's streaming path giving the round path's rows."""

from __future__ import annotations

import copy
import json
import threading
import time

import pytest

pytest.importorskip("httpx")

from fake_judge import idk_label  # noqa: E402
from ragscale.actors.engines import resolve as resolve_engine  # noqa: E402
from ragscale.actors.engines import streams  # noqa: E402
from test_faithfulness import scripted  # noqa: E402
from test_judge_streaming import mtrag_rows  # noqa: E402
from test_openai_retries import KEY, completion, engine, ok, prompt  # noqa: E402
from test_openai_retries import server as server  # noqa: E402 - the fixture (re-exported: a parameter here)


def numbered(n, body, headers):
    """Answer ``prompt(i)`` with a label and token counts of its own, a little later for odd ``i``."""
    i = int(body["messages"][0]["content"].rsplit("answer number ", 1)[1].split()[0])
    return 200, None, completion(json.dumps({"label": str(i)}), pt=100 + i), 0.02 * (i % 2)


def _stream_threads(e, per_thread: list[list[int]]) -> dict[int, object]:
    """Submit ``prompt(i)`` for each thread's ``i`` from one thread each, at once; i -> its Future."""
    futures: dict[int, object] = {}
    start = threading.Barrier(len(per_thread))

    def work(ids):
        start.wait()
        for i in ids:
            futures[i] = e.submit(prompt(i))

    threads = [threading.Thread(target=work, args=(ids,)) for ids in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return futures


def test_submit_from_many_threads_answers_each_future(server):
    srv = server(numbered)
    e = engine(srv.url, concurrency=4)
    try:
        futures = _stream_threads(e, [list(range(k, 40, 4)) for k in range(4)])
        for i, f in futures.items():
            g = f.result(10)
            assert g.error is None and g.text == json.dumps({"label": str(i)}) and g.prompt_tokens == 100 + i
        assert len(futures) == 40 and len(srv.requests) == 40
        assert e.stream_stats == {"requests": 40, "http_retries": 0, "rate_limited": 0, "http_errors": 0,
                                  "backoff_s": 0.0}
        assert e.total_stats == e.stream_stats
        threads = [t for t in threading.enumerate() if t.name == "openai-stream"]
        assert len(threads) == 1 and threads[0].daemon  # one loop for every submit, not keeping the process alive
    finally:
        e.close()


def test_concurrency_bound_holds_across_submits(server):
    srv = server(lambda n, b, h: (200, None, completion('{"label": "yes"}'), 0.25))
    e = engine(srv.url, concurrency=3)
    try:
        t0 = time.perf_counter()
        futures = _stream_threads(e, [list(range(k, 12, 4)) for k in range(4)])
        assert all(f.result(10).error is None for f in futures.values())
        assert srv.peak == 3  # never more than `concurrency` in flight, and really overlapping
        assert time.perf_counter() - t0 < 12 * 0.25
    finally:
        e.close()


def test_retries_503_and_429_then_success_and_one_warning_per_streaming_life(server, caplog):
    def script(n, body, headers):
        if n == 0:
            return 503, None, {"error": "overloaded"}, 0
        if n == 1:
            return 429, {"Retry-After": "0.05"}, {"error": "slow down"}, 0
        return ok(n, body, headers)

    srv = server(script)
    e = engine(srv.url, concurrency=1)
    try:
        with caplog.at_level("WARNING", logger="ragscale.judge"):
            g = e.submit(prompt()).result(10)
            assert g.error is None and g.text == '{"label": "yes"}'
            assert e.stream_stats["requests"] == 3 and e.stream_stats["http_retries"] == 2
            assert e.stream_stats["rate_limited"] == 1 and e.stream_stats["backoff_s"] >= 0.05
            srv.script = lambda n, b, h: (503, None, {"error": "down again"}, 0) if n < 4 else ok(n, b, h)
            assert e.submit(prompt(1)).result(10).error is None  # retried, not logged again
            assert len(caplog.records) == 1 and "retrying with backoff" in caplog.records[0].getMessage()
            e.close()
            srv.script = lambda n, b, h: (503, None, {"error": "down"}, 0) if n < 6 else ok(n, b, h)
            assert e.submit(prompt(2)).result(10).error is None  # a new streaming life warns again
            assert len(caplog.records) == 2
        assert e.stream_stats["http_retries"] == 1 and e.stream_stats["requests"] == 2  # this life's
        assert e.total_stats["http_retries"] == 4 and e.total_stats["requests"] == 7
    finally:
        e.close()


def test_a_prompt_that_keeps_failing_resolves_to_an_error_without_the_key(server, monkeypatch, caplog):
    monkeypatch.setenv("RAGSCALE_TEST_KEY", KEY)
    srv = server(lambda n, b, h: (500, None, {"error": f"upstream down, got {h.get('Authorization')}"}, 0))
    e = engine(srv.url, max_attempts=3)
    try:
        with caplog.at_level("WARNING", logger="ragscale.judge"):
            f = e.submit(prompt())
            assert f.exception(10) is None  # never raises
            g = f.result()
        assert g.text == "" and "HTTP 500" in g.error and "3 attempts" in g.error and "***" in g.error
        assert all(h.get("Authorization") == f"Bearer {KEY}" for h, _ in srv.requests)  # the key is sent per request
        assert e.stream_stats["http_errors"] == 1 and e.stream_stats["requests"] == 3
        logged = " ".join(r.getMessage() for r in caplog.records)
        for text in (g.error, logged, repr(e.stream_stats), repr(e.total_stats), repr(e), str(vars(e))):
            assert KEY not in text and KEY[:12] not in text
    finally:
        e.close()


def test_the_openai_engine_streams(server):
    srv = server(ok)
    kwargs = resolve_engine({"engine": "openai", "model": "judge-model", "options": {"base_url": srv.url}}, {})
    assert streams(kwargs)


def test_close_is_idempotent_and_fails_what_is_in_flight(server):
    srv = server(lambda n, b, h: (200, None, completion('{"label": "no"}'), 1.0 if n == 0 else 0))
    e = engine(srv.url)
    e.close()  # never started: nothing to do
    slow = e.submit(prompt(0))
    time.sleep(0.2)  # the request is at the server
    e.close()
    g = slow.result(5)
    assert g.text == "" and "closed before the answer came" in g.error
    assert not any(t.name == "openai-stream" for t in threading.enumerate())
    e.close()
    assert e.submit(prompt(1)).result(10).text == '{"label": "no"}'  # a later submit starts a new loop
    e.close()


def test_generate_works_beside_the_streaming_loop(server):
    srv = server(numbered)
    e = engine(srv.url, concurrency=2)
    try:
        streamed = [e.submit(prompt(i)) for i in range(4)]
        done: list[int] = []
        gens = e.generate([prompt(i) for i in range(4, 8)], on_done=done.append)
        assert [g.text for g in gens] == [json.dumps({"label": str(i)}) for i in range(4, 8)] and done == [1] * 4
        assert [f.result(10).prompt_tokens for f in streamed] == [100, 101, 102, 103]
        assert e.last_stats["requests"] == 4 and e.stream_stats["requests"] == 4 and e.total_stats["requests"] == 8
    finally:
        e.close()


def judge_answer(n, body, headers):
    """The IDK judge (``idk_label``) and RAGAS faithfulness (both rounds, ``scripted``); every fifth
    request is a 503 first, so both paths retry."""
    if n % 5 == 4:
        return 503, None, {"error": "busy"}, 0
    text = body["messages"][-1]["content"]
    if body.get("response_format", {}).get("json_schema", {}).get("name") == "idk":
        response = text.rsplit("[Response]\n", 1)[1].rsplit("\n\n[Output]", 1)[0]
        return 200, None, completion(json.dumps({"label": idk_label(response)})), 0
    return 200, None, completion(scripted(text)), 0


def test_judge_actor_streams_to_the_rounds_rows(server, tmp_path):
    from ragscale.actors.judge import JudgeActor

    srv = server(judge_answer)
    kwargs = resolve_engine({"engine": "openai", "model": "judge-model", "seed": 0, "options": {
        "base_url": srv.url, "backoff_s": 0.01, "backoff_max_s": 0.02, "concurrency": 4}}, {})
    rows = mtrag_rows()
    out = {}
    for streaming in (True, False):
        actor = JudgeActor(kwargs, ["idk", "ragas_faithfulness"], str(tmp_path / f"{streaming}.sqlite"),
                           streaming=streaming)
        rs = copy.deepcopy(rows)
        counters = actor.process(rs)
        out[streaming] = rs, {k: v for k, v in counters.items() if not k.startswith("judge_http_")}
        assert actor.engine.stream_stats["requests"] > 0 if streaming else actor.engine.last_stats["requests"] > 0
        assert actor.engine.total_stats["http_retries"] > 0
        actor.engine.close()
    assert out[True] == out[False]
    (rs, counters) = out[True]
    assert counters["judge_generations"] > len(rows) and not counters.get("judge_engine_errors")
    metrics = [r["metrics"] for r in rs]
    assert any(m["RL_F"] is not None for m in metrics) and all(m["idk_eval"] is not None for m in metrics)


def test_each_streamed_batch_counts_the_requests_it_made(server, tmp_path):
    """run.json's HTTP counters are the engine's: each batch adds what the engine counted since the
    batch before (the streaming engine counts across batches)."""
    from ragscale.actors.judge import JudgeActor

    srv = server(judge_answer)
    kwargs = resolve_engine({"engine": "openai", "model": "judge-model", "seed": 0, "options": {
        "base_url": srv.url, "backoff_s": 0.01, "backoff_max_s": 0.02, "concurrency": 4}}, {})
    actor = JudgeActor(kwargs, ["idk"], str(tmp_path / "c.sqlite"), streaming=True)
    rows = mtrag_rows()
    first = actor.process(copy.deepcopy(rows[:2]))
    after_first = dict(actor.engine.total_stats)
    second = actor.process(copy.deepcopy(rows[2:]))
    total = actor.engine.total_stats
    actor.engine.close()
    assert first["judge_http_requests"] == after_first["requests"] > 0
    assert second["judge_http_requests"] == total["requests"] - after_first["requests"] > 0
    assert first.get("judge_http_retries", 0) + second.get("judge_http_retries", 0) == total["http_retries"]
