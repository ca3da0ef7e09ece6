"""The judge actor's streaming path (ragscale/actors/judge.py, engines with ``submit``): every
(record, judge) run of a batch advances on its own, its next step submitted as soon as its own
prompt is answered, so that a slow prompt holds back only its own record."""

from __future__ import annotations

from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Sequence

from ragscale.actors.judge_runs import FLUSH_EVERY, STREAM_KEY, Ask, JudgeStats, Phase
from ragscale.judges import JudgeSpec


class Stream:
    """One ``process`` call on the streaming path of ``actor`` (a JudgeActor); its state is never
    shared with another call.

    Every (record, judge) run advances on its own: when all prompts of its pending step are
    answered (a fan-out's items together), the judge gets the answer and its next step is sent
    at once. Prompts are looked up in the cache in batches (all those that became due together),
    a hit never reaches the engine (unless it does not parse and the actor retries unparsed
    outputs); a prompt whose cache key was already sent in this call waits for that generation
    (or takes its text) instead of being sent again (``dedup_hits``); fresh generations go to
    the cache every ``FLUSH_EVERY`` and at the end of each phase. Phases run in order over the
    whole batch, as on the round path."""

    def __init__(self, actor: Any, stats: JudgeStats):
        self.actor, self.stats = actor, stats
        self.shared: dict[str, Future | tuple[str, int]] = {}  # cache key -> in flight, or (text, dropped)
        self.waiting: dict[Future, tuple[str, list[Ask]]] = {}  # in flight -> (cache key, the asks it answers)
        self.ready: deque[tuple[Ask, str, str | None, int]] = deque()  # answered: (ask, text, error, dropped)
        self.new: list[Ask] = []  # asks to send
        self.fresh: list[tuple[str, str, dict]] = []  # generations not written to the cache yet
        self.slots: dict[tuple[int, str], list] = {}  # a run's answers so far to its pending step, per item
        self.left: dict[tuple[int, str], int] = {}  # a run's asks not answered yet

    def phase(self, rows: list[dict], specs: Sequence[JudgeSpec]) -> None:
        """Run one phase over the whole batch and write its results into the rows."""
        ph = self.actor.start_phase(rows, specs)
        if ph.current:
            self.actor.tick(label="(" + ", ".join(sorted({k[1] for k in ph.current})) + ")", key=STREAM_KEY)
        for key in ph.current:
            self._enqueue(ph, key)
        try:
            while self.new or self.ready or self.waiting:
                if self.new:
                    self._send()
                elif self.ready:
                    self._answer(ph)
                else:
                    self._collect()
        finally:
            self._flush()
        self.actor.finish(rows, specs, ph)

    def _enqueue(self, ph: Phase, key: tuple[int, str]) -> None:
        """Queue the prompts of a run's pending step (one, or a fan-out's items)."""
        step = ph.current[key]
        items = step if isinstance(step, list) else [step]
        self.slots[key], self.left[key] = [None] * len(items), len(items)
        for i, s in enumerate(items):
            self.stats.add(s[0].judge, "prompts")
            self.new.append(Ask(key, i, s, 0))

    def _send(self) -> None:
        """Answer the queued asks from the cache or a generation of this call, submit the others."""
        a = self.actor
        asks, self.new = self.new, []
        keyed = [(ask, *a.sampled(ask.step[0], ask.attempt)) for ask in asks]
        cached = a.cached([k for _, _, k in keyed if k not in self.shared])
        a.tick(total=len(asks), key=STREAM_KEY)
        for ask, sampling, k in keyed:
            judge = ask.step[0].judge
            got = self.shared.get(k)
            if got is not None:
                self.stats.add(judge, "dedup_hits")
                if isinstance(got, Future):
                    self.waiting[got][1].append(ask)
                else:
                    self.ready.append((ask, got[0], None, got[1]))
            elif k in cached and a.reusable(ask.step, cached[k][0], self.stats):
                self.stats.add(judge, "cache_hits")
                text, dropped = a.take(judge, cached[k][0], self.stats)
                self.ready.append((ask, text, None, dropped))
            else:
                future = a.engine.submit(ask.step[0], **sampling)
                self.shared[k] = future
                self.waiting[future] = (k, [ask])

    def _collect(self) -> None:
        """Wait for at least one generation in flight; count it and pass its text to its asks."""
        done, _ = wait(self.waiting, return_when=FIRST_COMPLETED)
        for future in done:
            k, asks = self.waiting.pop(future)
            g = future.result()
            text, dropped = self.actor.received(asks[0].step[0].judge, k, g, self.stats, self.fresh)
            if g.error:
                del self.shared[k]  # an ask of it that comes later is sent again
            else:
                self.shared[k] = (text, dropped)
            self.ready.extend((ask, text, g.error, dropped) for ask in asks)
        if len(self.fresh) >= FLUSH_EVERY:
            self._flush()

    def _answer(self, ph: Phase) -> None:
        """Settle the answered asks: re-ask a parse failure, or keep the answer; a run whose
        step is fully answered resumes, and its next step is queued."""
        n = len(self.ready)
        while self.ready:
            ask, text, error, dropped = self.ready.popleft()
            answer = self.actor.settle(ask.step, ask.attempt, text, error, self.stats, dropped)
            if answer is None:
                self.new.append(ask._replace(attempt=ask.attempt + 1))
                continue
            self.slots[ask.run][ask.item] = answer
            self.left[ask.run] -= 1
            if self.left[ask.run]:
                continue
            del self.left[ask.run]
            answers = self.slots.pop(ask.run)
            step = ph.current.pop(ask.run)
            ph.resume(ask.run, answers if isinstance(step, list) else answers[0])
            if ask.run in ph.current:
                self._enqueue(ph, ask.run)
        self.actor.tick(done=n, key=STREAM_KEY)

    def _flush(self) -> None:
        """Write the fresh generations to the cache."""
        self.actor.store(self.fresh)
        self.fresh = []
