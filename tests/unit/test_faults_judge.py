"""Bounded judge calls (issue 33, items 5, 6 and 8; docs/fault-tolerance.md, "Judge calls"):

- a slow-drip server (one byte every 0.2 s) cannot hold a request past ``timeout_s``: the whole
  request (connect, send, every read) has that deadline, on the ``generate`` path, the streaming
  path and the relevancy embeddings client, and a prompt ends within ``prompt_bound_s``;
- an output longer than ``judge.max_raw_chars`` is cut before anything reads it: the record
  (judge_errors' raw) and the cache keep the cut text, the dropped characters are counted and
  the record warns;
- a cached output that did not parse is asked again with ``retry_unparsed`` (and only then);
- an exception of one judge on one record (a parser's RecursionError, a judge that raises)
  is that judge's failure on that record, never the record's nor the batch's;
- a record whose judge engine failed is a failed record: summary.json's ``judge_failed``, the
  exit code and the outcome's words."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

pytest.importorskip("httpx")

from fake_judge import FlakyJudgeServer  # noqa: E402
from ragscale.actors.engines import Generation  # noqa: E402
from ragscale.judges import idk  # noqa: E402
from ragscale.row import judge_error_entries  # noqa: E402
from test_judge_streaming import FakeEngine, mtrag_rows  # noqa: E402

TURNS = [{"speaker": "user", "text": "When does the library open on Sundays?"}]
NESTED = '{"decision": ' + "[" * 1000 + "]" * 1000 + "}"


@pytest.fixture
def drip():
    """A judge server that answers one byte every 0.2 s: a 200-byte answer takes 40 s."""
    srv = FlakyJudgeServer(failures=0, drip_s=0.2)
    yield srv
    srv.close()


def engine(url: str, **kw):
    from ragscale.actors.engines.openai_compat import Engine

    opts = {"model": "judge-model", "base_url": url, "max_attempts": 2, "backoff_s": 0.01, "backoff_max_s": 0.05,
            "timeout_s": 1.0, "api_key_env": "RAGSCALE_TEST_KEY"}
    return Engine(**{**opts, **kw})


def test_a_slow_drip_cannot_hold_a_request_past_its_deadline(drip, caplog):
    e = engine(drip.url)
    bound = e.prompt_bound_s()
    assert bound == pytest.approx((2 + 1) * 1.0 + 0.05)  # auto: one more attempt if the format falls back
    t0 = time.monotonic()
    with caplog.at_level("WARNING", logger="ragscale.judge"):
        [g] = e.generate([idk.render(TURNS, "an answer")])
    took = time.monotonic() - t0
    assert g.error and "timeout_s=1" in g.error and g.error.endswith("(2 attempts)"), g.error
    assert took < 2 * 1.0 + 1.0, took  # two attempts of 1 s each (and backoff), not 2 x 40 s
    assert e.last_stats["http_retries"] == 1 and drip.requests == 2
    assert any("retrying with backoff" in r.getMessage() for r in caplog.records)


def test_the_streaming_path_has_the_same_deadline(drip):
    e = engine(drip.url, max_attempts=1)
    t0 = time.monotonic()
    try:
        g = e.submit(idk.render(TURNS, "an answer")).result(timeout=30)
    finally:
        e.close()
    assert g.error and "timeout_s=1" in g.error and time.monotonic() - t0 < 2.5


def test_the_embeddings_client_has_the_same_deadline(drip):
    from ragscale.actors.embeddings_http import EmbeddingsClient

    client = EmbeddingsClient("emb", drip.url, api_key_env="RAGSCALE_TEST_KEY", timeout_s=1.0, max_attempts=2,
                              backoff_s=0.01, backoff_max_s=0.05)
    t0 = time.monotonic()
    vecs, errors = client.embed(["a question"])
    assert not vecs and "timeout_s=1" in errors["a question"] and time.monotonic() - t0 < 3.5
    assert client.prompt_bound_s() == pytest.approx(2 * 1.0 + 0.05)


def test_retries_warn_again_while_an_outage_lasts(monkeypatch, caplog):
    """The first retry warns at once; later ones at most every RETRY_WARN_EVERY_S, with a count."""
    from ragscale.actors.engines import openai_http

    monkeypatch.setattr(openai_http, "RETRY_WARN_EVERY_S", 0.0)
    srv = FlakyJudgeServer(failures=None)
    try:
        e = engine(srv.url, max_attempts=3, timeout_s=5.0)
        with caplog.at_level("WARNING", logger="ragscale.judge"):
            e.generate([idk.render(TURNS, "one")])
    finally:
        srv.close()
    lines = [r.getMessage() for r in caplog.records if "retr" in r.getMessage()]
    assert len(lines) == 2 and "retrying with backoff (up to 3 attempts per prompt" in lines[0], lines
    assert "still retrying: 1 more retry" in lines[1], lines


# -- the judge actor ---------------------------------------------------------------------------


@pytest.fixture
def actor(monkeypatch, tmp_path):
    """actor(respond, judges, streaming=True, **kw) -> (JudgeActor, FakeEngine), cache in tmp_path."""
    import ragscale.actors.judge as judge_mod

    def make(respond, judges, streaming=True, **kw):
        engine = FakeEngine(respond)
        monkeypatch.setattr(judge_mod, "build", lambda kwargs: engine)
        kw.setdefault("max_retries", 0)
        return judge_mod.JudgeActor({}, judges, str(tmp_path / "c.sqlite"), streaming=streaming, **kw), engine

    return make


def cached_texts(actor) -> list[str]:
    return [t for (t,) in actor.cache.db.execute("SELECT text FROM generations")]


@pytest.mark.parametrize("streaming", [True, False])
def test_a_huge_output_is_cut_in_the_record_and_the_cache(actor, streaming):
    huge = "not a judgement " * 65_536  # 1 MiB of text
    a, _ = actor(lambda p, t, s: huge, ["idk"], streaming=streaming, max_raw_chars=20_000)
    rows = mtrag_rows()[:2]
    stats = a.process(rows)
    for row in rows:
        [err] = judge_error_entries(row)
        assert err["judge"] == "idk" and len(err["raw"]) == 20_000 and huge.startswith(err["raw"])
        [warning] = [w for w in row["warnings"] if "max_raw_chars" in w]
        assert f"{len(huge):,} characters" in warning and f"{len(huge) - 20_000:,} dropped" in warning
    assert all(len(t) <= 20_000 for t in cached_texts(a)) and cached_texts(a)
    assert stats["judge_raw_chars_dropped"] == 2 * (len(huge) - 20_000)


def test_no_cap_with_null(actor):
    a, _ = actor(lambda p, t, s: "x" * 30_000, ["idk"], max_raw_chars=None)
    rows = mtrag_rows()[:1]
    a.process(rows)
    assert len(judge_error_entries(rows[0])[0]["raw"]) == 30_000 and not rows[0]["warnings"]


@pytest.mark.parametrize("streaming", [True, False])
def test_an_unparsed_cached_output_is_asked_again_only_with_retry_unparsed(actor, streaming):
    """A server answered text that is no judgement (HTTP 200); once fixed, a run with
    retry_unparsed asks again (and caches the judgement), a run without it replays the cache."""
    rows = mtrag_rows()[:3]
    poisoned, _ = actor(lambda p, t, s: "I am not a judge.", ["idk"], streaming=streaming)
    poisoned.process([dict(r) for r in rows])

    def fixed(p, t, s):
        return json.dumps({"label": "yes"})

    again, eng = actor(fixed, ["idk"], streaming=streaming)
    out = [dict(r) for r in rows]
    stats = again.process(out)
    assert not eng.answered and stats.get("judge_cache_hits") == 3
    assert all(r["metrics"]["idk_eval"] is None for r in out)

    retried, eng = actor(fixed, ["idk"], streaming=streaming, retry_unparsed=True)
    out = [dict(r) for r in rows]
    stats = retried.process(out)
    assert len(eng.answered) == 3 and stats["judge_cache_unparsed"] == 3
    assert all(r["metrics"]["idk_eval"] == [1.0] for r in out)
    replay, eng = actor(fixed, ["idk"], streaming=streaming, retry_unparsed=True)
    replay.process([dict(r) for r in rows])
    assert not eng.answered  # the judgements are in the cache now


@pytest.mark.parametrize("streaming", [True, False])
def test_a_parser_exception_fails_that_judge_only(actor, monkeypatch, streaming):
    """The issue's nested decision (RecursionError in the parser on main) and a parser that raises
    KeyError: a parse failure of that judge on that record; IDK is scored on every record."""
    from ragscale.judges import underspecified

    def respond(p, t, s):
        if p.judge == "underspecified":
            return NESTED
        return json.dumps({"label": "no"})

    a, _ = actor(respond, ["idk", "underspecified"], streaming=streaming)
    rows = mtrag_rows()[:2]
    a.process(rows)
    for row in rows:
        assert row["error"] is None
        m = row["metrics"]
        assert m["idk_eval"] == [0.0] and m["underspecified_eval"] is None
        [err] = judge_error_entries(row)
        assert err["judge"] == "underspecified" and "engine error" not in err["reason"]

    def broken(raw):
        raise KeyError("decision")

    monkeypatch.setattr(underspecified, "parse", broken)
    a, _ = actor(lambda p, t, s: json.dumps({"label": "no", "decision": "yes"}), ["idk", "underspecified"],
                 streaming=streaming)
    rows = mtrag_rows()[:2]
    a.process(rows)
    for row in rows:
        [err] = judge_error_entries(row)
        assert err["judge"] == "underspecified" and "KeyError" in err["reason"], err
        assert row["metrics"]["idk_eval"] == [0.0]


@pytest.mark.parametrize("streaming", [True, False])
def test_a_judge_that_raises_fails_on_that_record_only(actor, monkeypatch, streaming):
    """A judge's own code raising (at its start, or on an answer) is that judge's error on that record."""
    import ragscale.judges as judges

    spec = judges.JUDGES["underspecified"]
    calls = {"n": 0}

    def start(inp, **kw):
        calls["n"] += 1
        if calls["n"] == 1:
            raise IndexError("list index out of range")  # e.g. a record without the field it reads
        value = yield from spec.start(inp, **kw)
        raise TypeError(f"cannot use {value!r}")

    import dataclasses

    monkeypatch.setitem(judges.JUDGES, "underspecified", dataclasses.replace(spec, start=start))
    a, _ = actor(lambda p, t, s: json.dumps({"label": "no", "decision": "yes", "explanation": "x"}),
                 ["idk", "underspecified"], streaming=streaming)
    rows = mtrag_rows()[:2]
    a.process(rows)
    reasons = []
    for row in rows:
        assert row["error"] is None and row["metrics"]["idk_eval"] == [0.0]
        [err] = judge_error_entries(row)
        reasons.append(err["reason"])
    assert "IndexError" in reasons[0] and "TypeError" in reasons[1], reasons


@pytest.mark.parametrize("streaming", [True, False])
def test_a_malformed_input_seen_by_a_judge_fails_that_record(actor, monkeypatch, streaming):
    """A RecordError raised in a judge run (the record's own input is malformed, e.g. a taxonomy
    label "very") is not the judge's failure: the record fails with that stage and message, the
    other records and judges are scored."""
    import dataclasses

    import ragscale.judges as judges
    from ragscale.errors import RecordError

    spec = judges.JUDGES["underspecified"]

    def start(inp, **kw):
        if inp.task_id == first_task:
            raise RecordError("input", "input labels.helpful must be 0 or 1 (or true/false), got 'very'")
        return (yield from spec.start(inp, **kw))

    monkeypatch.setitem(judges.JUDGES, "underspecified", dataclasses.replace(spec, start=start))
    a, _ = actor(lambda p, t, s: json.dumps({"label": "no", "decision": "yes", "explanation": "x"}),
                 ["idk", "underspecified"], streaming=streaming)
    rows = mtrag_rows()[:2]
    first_task = rows[0]["task_id"]
    a.process(rows)
    assert json.loads(rows[0]["error"]) == {"stage": "input",
                                            "message": "input labels.helpful must be 0 or 1 (or true/false), got 'very'"}
    assert rows[1]["error"] is None and rows[1]["metrics"]["idk_eval"] == [0.0]


# -- failed records --------------------------------------------------------------------------


def record(key: str, judge_errors: list[dict], error: dict | None = None) -> dict:
    return {"model_id": "m", "task_id": key, "metrics": {"idk_eval": None, "exact_match": 1.0}, "error": error,
            "ragscale": {"record_key": key, "judge_errors": judge_errors, "warnings": []}}


def test_a_record_whose_judge_engine_failed_is_a_failed_record(tmp_path):
    from ragscale.exitcodes import NOTHING_SCORED, RECORD_ERRORS, finished, outcome
    from ragscale.report.summary import SummarySink

    sink = SummarySink(str(tmp_path), ["idk_eval", "exact_match"])
    for rec in (record("a", [{"judge": "idk", "reason": "engine error: openai engine: x: HTTP 500 (3 attempts)"}]),
                record("b", [{"judge": "idk", "reason": "label 'maybe' is not one of yes, partial, no", "raw": "m"}]),
                record("c", [{"judge": "idk", "reason": "no passages", "undefined": True}]),
                record("d", [], error={"stage": "read", "message": "not JSON"})):
        sink.add(rec)
    overall = sink.finish()["overall"]
    assert overall["errors"] == 1 and overall["judge_failed"] == 1  # a parse failure, an undefined: scored
    errored = overall["errors"] + overall["judge_failed"]
    assert finished(4, errored) == RECORD_ERRORS
    assert outcome(RECORD_ERRORS, 4, errored, 1) == "2 of 4 records failed (the judge engine failed on 1)"
    assert outcome(NOTHING_SCORED, 2, 2, 2) == "nothing scored: all 2 records failed (the judge engine failed on 2)"
    assert outcome(RECORD_ERRORS, 4, 1) == "1 of 4 records failed"


def test_the_per_model_error_columns_count_the_records_whose_judge_engine_failed(tmp_path):
    """The console table's ``err``, leaderboard.md's and the report's ``errors`` count what the status
    line counts: "2 of 4 records failed" is 2 in the model's row (it was 1: the judge-failed one left out)."""
    from ragscale.exitcodes import failed
    from ragscale.report.html import HtmlSink
    from ragscale.report.leaderboard import format_markdown
    from ragscale.report.summary import SummarySink, format_table

    recs = [record("a", [{"judge": "idk", "reason": "engine error: openai engine: x: HTTP 500 (3 attempts)"}]),
            record("b", []), record("c", []), record("d", [], error={"stage": "read", "message": "not JSON"})]
    sink = SummarySink(str(tmp_path), ["idk_eval", "exact_match"])
    for rec in recs:
        sink.add(rec)
    summary = sink.finish()
    assert failed(summary["overall"]) == failed(summary["models"]["m"]) == 2
    table = format_table(summary).splitlines()
    assert table[0].split()[:3] == ["model_id", "n", "err"] and table[2].split()[:3] == ["m", "4", "2"], table
    assert "| 1 | m | 4 | 2 |" in format_markdown(summary)
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    html = open(HtmlSink(str(tmp_path), summary["metrics"]).finish(summary, None, str(tmp_path / "r.html"))).read()
    row = re.search(r"<tr[^>]*>\s*<td[^>]*>1</td>\s*<td[^>]*>m</td>(.*?)</tr>", html, re.S)
    assert row and re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))[:2] == ["4", "2"], row and row.group(0)


def test_the_judge_options_are_checked_in_one_line():
    from ragscale.actors.judge_runs import judge_limits
    from ragscale.errors import UserError

    assert judge_limits({"max_raw_chars": None, "retry_unparsed": None}, "judge", overwrite=True) == \
        {"max_raw_chars": None, "retry_unparsed": True}
    assert judge_limits({"max_raw_chars": 500, "retry_unparsed": None}, "judge", overwrite=False) == \
        {"max_raw_chars": 500, "retry_unparsed": False}
    assert judge_limits({"retry_unparsed": False}, "judge", overwrite=True)["retry_unparsed"] is False
    for bad in ({"max_raw_chars": 0}, {"max_raw_chars": "many"}, {"max_raw_chars": True},
                {"max_raw_chars": 10, "retry_unparsed": "yes"}):
        with pytest.raises(UserError, match=r"^judge\.(max_raw_chars|retry_unparsed) must be"):
            judge_limits({"retry_unparsed": None, **bad}, "judge", overwrite=False)


def test_engine_errors_are_never_cached_and_a_retry_asks_again(actor):
    """An engine error (after the engine's retries) is never cached: the same prompts are sent again."""
    a, eng = actor(lambda p, t, s: Generation("", error="endpoint down"), ["idk"])
    rows = mtrag_rows()[:2]
    a.process(rows)
    assert not cached_texts(a) and all("engine error" in judge_error_entries(r)[0]["reason"] for r in rows)


def test_concurrent_submits_share_one_deadline_bound(drip):
    """Several prompts in flight on the streaming loop each end within the bound (none waits for another's drip)."""
    e = engine(drip.url, max_attempts=1, concurrency=4)
    t0 = time.monotonic()
    try:
        futures = [e.submit(idk.render(TURNS, f"answer {i}")) for i in range(4)]
        done = [f.result(timeout=30) for f in futures]
    finally:
        e.close()
    assert all(g.error for g in done) and time.monotonic() - t0 < 3.0
    assert threading.active_count() < 50
