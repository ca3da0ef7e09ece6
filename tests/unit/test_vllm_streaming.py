"""The vLLM engine's streaming loop (ragscale/actors/engines/vllm_engine.py ``submit``) against a
scripted stand-in for ``vllm.LLM``: requests join between engine steps, ids come back under
vLLM's internal suffix, a rejected prompt fails alone, a dead engine fails what is in flight
and every later submit. The real engine runs in tests/integration/test_vllm_engine.py."""

from __future__ import annotations

import itertools
import threading
from types import SimpleNamespace

import pytest

from ragscale.actors.engines import vllm_engine
from ragscale.judges.base import JudgePrompt


class TooLong(ValueError):
    pass


class FakeLLM:
    """``enqueue_chat`` adds requests (ids '<n>-<suffix>' as vLLM >= 0.12 returns them; a prompt
    containing 'TOO LONG' is rejected and the call adds nothing); each ``llm_engine.step`` finishes
    the oldest unfinished request, reporting it under its plain id."""

    def __init__(self, fail_at_step: int | None = None):
        self.counter = itertools.count()
        self.unfinished: list[tuple[str, str]] = []
        self.steps = 0
        self.fail_at_step = fail_at_step
        self.batches: list[list[str]] = []
        self.llm_engine = SimpleNamespace(step=self._step, has_unfinished_requests=lambda: bool(self.unfinished))

    def enqueue_chat(self, messages, params, use_tqdm=False):
        texts = [m[-1]["content"] for m in messages]
        if any("TOO LONG" in t for t in texts):
            raise TooLong("prompt is longer than max_model_len\nmore")
        self.batches.append(texts)
        ids = [str(next(self.counter)) for _ in texts]
        self.unfinished.extend(zip(ids, texts))
        return [f"{i}-abcd1234" for i in ids]

    def _step(self):
        self.steps += 1
        if self.fail_at_step is not None and self.steps >= self.fail_at_step:
            raise RuntimeError("worker died")
        rid, text = self.unfinished.pop(0)
        out = SimpleNamespace(text=text.upper(), token_ids=[1, 2])
        return [SimpleNamespace(request_id=rid, finished=True, outputs=[out], prompt_token_ids=[0] * len(text))]


def _engine(llm: FakeLLM, monkeypatch) -> vllm_engine.Engine:
    monkeypatch.setattr(vllm_engine, "_rejected_errors", lambda: (TooLong,))
    monkeypatch.setattr(vllm_engine.Engine, "_params", lambda self, p, t, s: {"temperature": t, "seed": s})
    e = vllm_engine.Engine.__new__(vllm_engine.Engine)
    e.llm, e.model, e.seed, e._rejected = llm, "fake", 0, (TooLong,)
    e._submitted, e._loop_thread, e._loop_lock, e._broken = vllm_engine.queue.SimpleQueue(), None, threading.Lock(), None
    e.loop_stats = {"steps": 0, "busy_s": 0.0, "requests": 0}
    return e


def _p(text: str) -> JudgePrompt:
    return JudgePrompt("idk", "v", ({"role": "user", "content": text},), {"type": "object"}, 8)


def test_submitted_prompts_resolve_under_vllm_s_suffixed_ids(monkeypatch):
    llm = FakeLLM()
    e = _engine(llm, monkeypatch)
    futures = [e.submit(_p(t), 0.0, 0) for t in ("b", "a", "c")]
    gens = [f.result(timeout=10) for f in futures]
    assert [g.text for g in gens] == ["B", "A", "C"] and all(g.error is None for g in gens)
    assert [(g.prompt_tokens, g.completion_tokens) for g in gens] == [(1, 2)] * 3
    assert sorted(t for b in llm.batches for t in b) == ["a", "b", "c"]
    assert all(b == sorted(b) for b in llm.batches)  # what is queued together goes in prefix order
    assert e.loop_stats["requests"] == 3 and e.loop_stats["steps"] == 3
    # generate() after the loop started goes through it too, in input order
    assert [g.text for g in e.generate([_p("y"), _p("x")])] == ["Y", "X"]


def test_a_rejected_prompt_fails_alone(monkeypatch):
    from concurrent.futures import Future

    llm = FakeLLM()
    e = _engine(llm, monkeypatch)
    futures = [Future(), Future()]  # queued before the loop starts: its first drain enqueues all three together
    for t, f in zip(("ok one", "TOO LONG here"), futures):
        e._submitted.put((_p(t), {}, f))
    futures.append(e.submit(_p("ok two"), 0.0, 0))
    gens = [f.result(timeout=10) for f in futures]
    assert llm.batches == [["ok one"], ["ok two"]]  # the rejected call added nothing; then one by one
    assert [g.text for g in gens] == ["OK ONE", "", "OK TWO"]
    assert gens[1].error == "vllm: prompt is longer than max_model_len" and gens[0].error is None


def test_a_dead_engine_fails_in_flight_and_later_prompts(monkeypatch):
    e = _engine(FakeLLM(fail_at_step=2), monkeypatch)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the loop re-raises: keep pytest's output clean
    futures = [e.submit(_p(t), 0.0, 0) for t in ("a", "b", "c")]
    gens = [f.result(timeout=10) for f in futures]
    assert gens[0].text == "A" or gens[0].error  # the first step may finish it before the failure
    failed = [g for g in gens if g.error]
    assert failed and all("engine loop failed: RuntimeError: worker died" in g.error for g in failed)
    e._loop_thread.join(timeout=10)
    later = e.submit(_p("d"), 0.0, 0).result(timeout=1)
    assert later.error and "worker died" in later.error


@pytest.mark.parametrize("rid, ext", [("12-abcd1234", "12"), ("12", "12")])
def test_external_id(rid, ext):
    assert vllm_engine._external_id(rid) == ext
