"""The judge actor's streaming path (ragscale/actors/judge.py, engines with ``submit``) against its
round path: the same rows and counters with a deterministic engine, no barrier between records,
concurrent ``process`` calls on one actor, the cache never given an engine error, duplicates
generated once."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT
from ragscale.actors.engines import Generation
from ragscale.judges.base import cache_key
from ragscale.record import read_record
from ragscale.row import judge_error_entries
from test_faithfulness import _input_of, scripted
from test_judge_rounds import _row

SAMPLE = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
MTRAG_JUDGES = ["idk", "radbench", "ragas_faithfulness"]
TREC_JUDGES = ["nuggets", "citation", "umbrela"]


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


class FakeEngine:
    """A deterministic engine with both paths: ``generate`` (a batch, in the caller's thread) and
    ``submit`` (a Future completed by a small thread pool after a random-ish delay). ``respond(prompt,
    temperature, seed)`` gives the text, or a Generation (an engine error). ``hold(prompt)``, when
    set, runs before a prompt is answered (tests block there)."""

    name, model = "fake", "fake"

    def __init__(self, respond):
        self.respond = respond
        self.pool = ThreadPoolExecutor(6)
        self.rng = random.Random(7)
        self.lock = threading.Lock()
        self.hold = None
        self.submitted: list[tuple] = []  # (prompt, temperature, seed), in submission order
        self.answered: list[str] = []  # cache keys of the answered prompts, in order
        self.errored: set[str] = set()  # cache keys answered with an engine error
        self.in_generate = 0
        self.overlapping_generate = False

    def _answer(self, prompt, temperature, seed) -> Generation:
        if self.hold is not None:
            self.hold(prompt)
        out = self.respond(prompt, temperature, seed)
        key = cache_key(self.name, self.model, prompt, {"temperature": temperature, "seed": seed})
        with self.lock:
            self.answered.append(key)
            if isinstance(out, Generation):
                self.errored.add(key)
        if isinstance(out, Generation):
            return out
        return Generation(out, len(prompt.text()) // 10, len(out))

    def generate(self, prompts, temperature=0.0, seed=None, on_done=None):
        with self.lock:
            self.overlapping_generate |= self.in_generate > 0
            self.in_generate += 1
        try:
            time.sleep(0.002)  # a concurrent call would overlap here
            out = []
            for p in prompts:
                out.append(self._answer(p, temperature, seed))
                if on_done is not None:
                    on_done(1)
            return out
        finally:
            with self.lock:
                self.in_generate -= 1

    def submit(self, prompt, temperature, seed):
        with self.lock:
            self.submitted.append((prompt, temperature, seed))
            delay = self.rng.uniform(0, 0.004)

        def run() -> Generation:
            time.sleep(delay)
            return self._answer(prompt, temperature, seed)

        return self.pool.submit(run)


def mtrag_respond(prompt, temperature, seed):
    """IDK, RADBench and RL_F answers as functions of the prompt, with some engine errors, first
    attempts that do not parse (their re-ask does) and outputs that never parse."""
    text = prompt.messages[-1]["content"]
    h = _h(text)
    if h % 17 == 0:
        return Generation("", error="endpoint down")
    if h % 5 == 0 and temperature == 0:
        return "not json"
    if h % 11 == 0:
        return "{}"
    if prompt.judge == "idk":
        return json.dumps({"label": ("yes", "partial", "no")[h % 3]})
    if prompt.judge == "radbench":
        return json.dumps({"explanation": "scripted", "rating": str(1 + h % 10)})
    return scripted(text)


def trec_respond(prompt, temperature, seed):
    """UMBRELA, citation and nuggets answers (a BROKEN passage never parses, a DOWN one is an
    engine error)."""
    text = prompt.messages[-1]["content"]
    if "DOWN" in text:
        return Generation("", error="endpoint down")
    if "BROKEN" in text:
        return "not json"
    if prompt.judge == "umbrela":
        return json.dumps({"score": str(_h(text) % 4)})
    if prompt.judge == "citation":
        return json.dumps({"support": ("full_support", "partial_support", "no_support")[_h(text) % 3]})
    schema = prompt.schema["properties"]
    if "nuggets" in schema:
        return json.dumps({"nuggets": ["Paris is the capital", "France is in Europe"]})
    if "importance" in schema:
        return json.dumps({"importance": ["vital", "okay"]})
    return json.dumps({"assignment": ["support", "not_support"]})


def mtrag_rows() -> list[dict]:
    with open(SAMPLE, encoding="utf-8") as fh:
        lines = [line for line in fh if line.strip()]
    return [read_record(line, key=str(n), model_id="m", task_id=None, source_file=SAMPLE, source_line=n,
                        need_targets=True).to_row() for n, line in enumerate(lines)]


def trec_rows() -> list[dict]:
    paris = ("Capital of France?", "Paris [1]. It is in Europe [2].", ["Paris is the capital.", "BROKEN passage"])
    return [_row("a", *paris),
            _row("b", *paris),  # the same prompts as a's
            _row("c", "Capital of Italy?", "Rome [1].", ["Rome is the capital.", "DOWN passage"]),
            _row("d", "No passages?", "None.", []),
            _row("e", "Capital?", "No citations here.", ["Paris is the capital."])]


@pytest.fixture
def make(monkeypatch, tmp_path):
    """make(respond, judges, streaming, cache=name) -> (actor, engine), each actor with its own engine."""
    import ragscale.actors.judge as judge_mod

    def build(respond, judges, streaming=True, cache="c"):
        engine = FakeEngine(respond)
        monkeypatch.setattr(judge_mod, "build", lambda kwargs: engine)
        actor = judge_mod.JudgeActor({}, judges, str(tmp_path / f"{cache}.sqlite"), max_retries=1, streaming=streaming)
        return actor, engine

    return build


def _both(make, respond, judges, rows, calls=2):
    """Each path on its own actor and cache, ``calls`` times on copies of ``rows``: [(rows, counters)] per call."""
    out = {}
    for streaming in (True, False):
        actor, engine = make(respond, judges, streaming, cache=f"c-{streaming}")
        out[streaming] = []
        for _ in range(calls):
            rs = copy.deepcopy(rows)
            out[streaming].append((rs, actor.process(rs)))
        assert bool(engine.submitted) is streaming  # the streaming path never calls generate and vice versa
    return out[True], out[False]


def test_mtrag_judges_stream_to_the_same_rows_and_counters(make):
    streamed, rounds = _both(make, mtrag_respond, MTRAG_JUDGES, mtrag_rows())
    assert streamed == rounds  # rows (metrics, details, judge_errors) and counters, first and second call
    (rows, first), (_, second) = streamed
    # every case is exercised: re-asks, final parse failures, engine errors, undefined RL_F, then the cache
    for c in ("retries", "parse_failures", "engine_errors", "generations"):
        assert first[f"judge_{c}"] > 0, c
    errors = [e for r in rows for e in judge_error_entries(r)]
    assert any(e.get("undefined") for e in errors) and any(e["reason"].startswith("engine error") for e in errors)
    assert second["judge_cache_hits"] == first["judge_generations"]
    assert second["judge_engine_errors"] == first["judge_engine_errors"]  # an error is asked again, never cached


def test_fan_out_and_phases_stream_to_the_same_rows_and_counters(make):
    streamed, rounds = _both(make, trec_respond, TREC_JUDGES, trec_rows())
    assert streamed == rounds
    (rows, first), _ = streamed
    assert first["judge_dedup_hits"] > 0 and first["judge_parse_failures"] > 0 and first["judge_engine_errors"] > 0
    a, c, d = (rows[i]["metrics"] for i in (0, 2, 3))
    assert a["umbrela_scores"][1] is None and a["nuggets_count"] == 2 and c["umbrela_scores"][1] is None
    assert d["umbrela_mean"] is None
    errs = judge_error_entries(rows[2])
    assert {"judge": "umbrela", "item": 1, "reason": "engine error: endpoint down", "raw": ""} in errs


def test_progress_counts_every_prompt_under_one_key(make):
    actor, _ = make(trec_respond, TREC_JUDGES)
    events: list[tuple] = []
    actor.progress = lambda key, done=0, total=0, label=None: events.append((key, done, total, label))
    stats = actor.process(trec_rows())
    assert {e[0] for e in events} == {"streamed"}
    assert [e[3] for e in events if e[3]] == ["(citation, umbrela)", "(nuggets)"]  # once per phase
    done, total = sum(e[1] for e in events), sum(e[2] for e in events)
    assert done == total == stats["judge_prompts"] + stats["judge_retries"]


def test_a_record_goes_on_while_another_records_prompt_is_slow(make):
    """Record A's statement prompt is answered only once record B's verdict prompt (its second round)
    has been submitted: the streaming path gets there; the round path waits the timeout out."""
    rows = [r for r in mtrag_rows() if r["passages"] and r["prediction"].strip()][:2]
    a_answer, b_context = rows[0]["prediction"], "\n".join(rows[1]["passages"])

    def respond(prompt, temperature, seed):
        return scripted(prompt.messages[-1]["content"])

    for streaming, timeout in ((True, 10.0), (False, 0.3)):
        actor, engine = make(respond, ["ragas_faithfulness"], streaming, cache=f"slow-{streaming}")
        b_second = threading.Event()
        timed_out: list[bool] = []

        def hold(prompt, b_second=b_second, timed_out=timed_out, timeout=timeout):
            data = _input_of(prompt.messages[-1]["content"])
            if data.get("answer") == a_answer:
                timed_out.append(not b_second.wait(timeout))
            elif data.get("context") == b_context:
                b_second.set()

        engine.hold = hold
        real_submit = engine.submit

        def submit(prompt, temperature, seed, b_second=b_second, real_submit=real_submit):
            if _input_of(prompt.messages[-1]["content"]).get("context") == b_context:
                b_second.set()  # submitted: A may finish now
            return real_submit(prompt, temperature, seed)

        engine.submit = submit
        rs = copy.deepcopy(rows)
        actor.process(rs)
        assert timed_out == [not streaming]
        assert all(r["metrics"]["RL_F"] is not None for r in rs)


@pytest.mark.parametrize("streaming", [True, False])
def test_concurrent_calls_on_one_actor_give_the_sequential_rows(make, streaming):
    rows = mtrag_rows()
    batches = [rows[:15], rows[15:]]
    actor, _ = make(mtrag_respond, MTRAG_JUDGES, streaming, cache="seq")
    sequential = [copy.deepcopy(b) for b in batches]
    for b in sequential:
        actor.process(b)
    actor, engine = make(mtrag_respond, MTRAG_JUDGES, streaming, cache="conc")
    concurrent = [copy.deepcopy(b) for b in batches]
    start = threading.Barrier(len(concurrent))
    errors: list[BaseException] = []

    def work(b):
        start.wait()
        try:
            actor.process(b)
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(b,)) for b in concurrent]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and concurrent == sequential
    assert not engine.overlapping_generate  # the round path runs one call at a time


def test_the_cache_never_gets_an_engine_error_and_duplicates_are_generated_once(make):
    actor, engine = make(trec_respond, TREC_JUDGES)
    put: list[list[tuple]] = []
    cache_put = actor.cache.put_many

    def put_many(items):
        put.append(list(items))
        cache_put(put[-1])

    actor.cache.put_many = put_many
    rows = trec_rows()
    stats = actor.process(rows)
    keys = [cache_key(engine.name, engine.model, p, {"temperature": t, "seed": s}) for p, t, s in engine.submitted]
    assert len(keys) == len(set(keys)) and sorted(engine.answered) == sorted(keys)  # each key generated once
    assert stats["judge_generations"] + stats["judge_engine_errors"] == len(keys)
    # every ask (first asks and re-asks) is a cache hit, a duplicate or a submitted prompt
    asks = stats["judge_prompts"] + stats["judge_retries"]
    assert asks == stats.get("judge_cache_hits", 0) + stats["judge_dedup_hits"] + len(keys)
    assert rows[0]["metrics"] == rows[1]["metrics"] and stats["judge_dedup_hits"] > 0  # rows a and b are identical
    written = [k for batch in put for k, _, _ in batch]
    assert engine.errored and not set(written) & engine.errored
    assert sorted(written) == sorted(set(keys) - engine.errored)
