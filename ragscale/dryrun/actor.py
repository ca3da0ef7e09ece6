"""The dry run's judge actor: ``JudgeActor`` with a recorder for an engine and a read-only view
of the judge cache; its judges traced so that rounds after an output not generated yet are
rendered from synthetic answers (ragscale.dryrun.synthetic)."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Callable, Mapping, Sequence

from ragscale.actors.judge import JudgeActor, reask_sampling
from ragscale.judges.base import JudgePrompt, Undefined, cache_key
from ragscale.judges.judge_input import JudgeInput
from ragscale.dryrun.synthetic import SYNTHETIC, Trace, output_field
from ragscale.dryrun.tokens import TokenCounter, completion_tokens

# What the recorder answers for a prompt it would send (never a real output: it holds NUL characters).
NOT_GENERATED = "\x00ragscale prompts: not generated\x00"
# A synthetic answer that ends the judge's run: a judge without a rule for this step.
END = object()
NOT_ESTIMATED = "dry run: the rounds after this one are not estimated"


class _Recorder:
    """The engine of the dry run's actor: records each prompt the actor would send, answers
    ``NOT_GENERATED``. Same ``name`` and ``model`` as the engine the run builds."""

    def __init__(self, engine_kwargs: Mapping[str, Any]):
        from ragscale.actors.engines import model_name

        self.name = str(engine_kwargs["engine"])
        self.model = model_name(engine_kwargs)
        self.counter = TokenCounter(engine_kwargs)
        self.origin: dict[int, tuple[Trace, int, bool]] = {}  # id(prompt) -> (trace, round, estimated)
        self.attempt = 0
        self.pending: list[dict] = []

    def generate(self, prompts: Sequence[JudgePrompt], temperature: float = 0.0, seed: int | None = None,
                 on_done: Callable[[int], None] | None = None) -> list[Any]:
        from ragscale.actors.engines import Generation, safe_messages

        out = []
        for p in prompts:
            trace, rnd, estimated = self.origin[id(p)]
            messages = safe_messages(p.messages)  # what the engines send
            tokens = self.counter.count(messages)
            inp = trace.inp
            self.pending.append({
                "judge": p.judge, "record": {"key": inp.key, "task_id": inp.task_id, "model_id": inp.model_id},
                "round": rnd, "attempt": self.attempt, "version": p.version, "messages": messages,
                "sampling": {"temperature": temperature, "seed": seed, "params": dict(p.params),
                             "max_tokens": p.max_tokens},
                "schema": p.schema,
                "cache_key": cache_key(self.name, self.model, p, {"temperature": temperature, "seed": seed}),
                "estimated": estimated, "prompt_tokens": tokens,
                "expected_completion_tokens": min(p.max_tokens, completion_tokens(p.judge)),
            })
            out.append(Generation(NOT_GENERATED, tokens, 0))
            if on_done is not None:
                on_done(1)
        return out


class _CacheView:
    """The judge cache as the dry run's actor sees it: the cache file read (never written) plus
    what this dry run has sent (``put_many``: the actor caches what its engine returned)."""

    def __init__(self, path: str):
        from ragscale.judges.cache import JudgeCache

        self.disk = JudgeCache(path) if os.path.isfile(path) else None  # no file: an empty cache, none made
        self.sent: dict[str, tuple[str, dict]] = {}
        self.pending: dict[str, tuple[str, dict]] = {}
        self.found: dict[str, tuple[str, dict]] = {}  # the last lookup's hits in the cache file

    def get_many(self, keys: Sequence[str]) -> dict[str, tuple[str, dict]]:
        self.found = self.disk.get_many(keys) if self.disk is not None else {}
        out = dict(self.found)
        for k in keys:
            if k not in out and (k in self.pending or k in self.sent):
                out[k] = self.pending.get(k) or self.sent[k]
        return out

    def put_many(self, items: Sequence[tuple[str, str, dict]]) -> None:
        for k, text, meta in items:
            self.pending[k] = (text, meta)


class DryActor(JudgeActor):
    """``JudgeActor`` whose engine is a ``_Recorder`` and whose cache a ``_CacheView``; judges are
    traced (prompt origins, synthetic answers). A batch's records are kept only once it succeeded,
    as the pipeline keeps a batch's counters (ragscale.pipeline.stage.process_rows)."""

    def make_engine(self, kwargs: Mapping[str, Any]) -> Any:
        return _Recorder(kwargs)  # never the engine itself

    @classmethod
    def create(cls, kwargs: Mapping[str, Any]) -> DryActor:
        """The actor of a judge stage's kwargs (``plan_judges``): no engine built, the cache read only."""
        actor = cls(**{**kwargs, "cache_path": None})
        actor.cache = _CacheView(kwargs["cache_path"]) if kwargs.get("cache_path") else None  # type: ignore[assignment]
        actor.phases = [[dataclasses.replace(s, start=functools.partial(actor._start, s)) for s in phase]
                        for phase in actor.phases]
        actor.cache_path = kwargs.get("cache_path")
        actor.sent = []  # the prompt lines of the batch just processed (once it succeeded)
        actor.cached_usage = {}  # judge -> completion tokens of its outputs met in the cache file
        actor.lookups = None  # every prompt asked, when kept (tests)
        actor.failed_estimates = {}  # judge -> runs whose estimate stopped
        actor._traces = {}  # (record key, judge) -> Trace, of the batch (a key is unique within a run)
        actor._usage, actor._lookups = [], []  # the batch's, kept once it succeeded
        return actor

    @property
    def recorder(self) -> _Recorder:
        return self.engine

    @property
    def judge_names(self) -> list[str]:
        return [s.name for phase in self.phases for s in phase]

    def label(self, judge: str) -> str:
        """A judge as the totals name it: ``<judge>@<panel judge>`` on a judge panel."""
        return f"{judge}@{self.tag}" if self.tag else judge

    # -- tracing the judges ----------------------------------------------------------------

    def _start(self, spec: Any, inp: JudgeInput, **options: Any) -> Any:
        # a judge reading an earlier judge's results (nuggets after UMBRELA) is estimated when those
        # were; the earlier judge ran in an earlier phase, on another JudgeInput of the same record
        after = [self._traces.get((inp.key, a)) for a in spec.after]
        trace = Trace(spec.name, inp, estimated=any(t is not None and t.estimated for t in after))
        self._traces[(inp.key, spec.name)] = trace
        return self._traced(trace, spec.start(inp, **options))

    def _traced(self, t: Trace, run: Any) -> Any:
        """The judge's run, its steps' parsers answering ``NOT_GENERATED`` with ``SYNTHETIC``'s answer."""
        try:
            try:
                step = next(run)
            except StopIteration as stop:
                return stop.value
            while True:
                t.round += 1
                value = yield self._tag(t, step)
                if value is END or (isinstance(value, list) and any(v is END for v in value)):
                    return Undefined(NOT_ESTIMATED)
                first = (step[0][0] if step else None) if isinstance(step, list) else step[0]
                t.answers.append((isinstance(step, list), output_field(first) if first is not None else None, value))
                try:
                    step = run.send(value)
                except StopIteration as stop:
                    return stop.value
                except Exception:  # a judge that cannot go on with a synthetic answer
                    if not t.estimated:
                        raise
                    self.failed_estimates[t.judge] = self.failed_estimates.get(t.judge, 0) + 1
                    return Undefined(NOT_ESTIMATED)
        finally:
            run.close()

    def _tag(self, t: Trace, step: Any) -> Any:
        if isinstance(step, list):
            return [self._tag_one(t, p, parse, i) for i, (p, parse) in enumerate(step)]
        return self._tag_one(t, step[0], step[1], None)

    def _tag_one(self, t: Trace, prompt: JudgePrompt, parse: Callable[[str], Any], item: int | None) -> tuple:
        self.recorder.origin[id(prompt)] = (t, t.round, t.estimated)

        def answer(raw: str) -> Any:
            if raw != NOT_GENERATED:
                return parse(raw)
            t.estimated = True
            rule = SYNTHETIC.get(t.judge)
            text = rule(t, item, prompt) if rule is not None else None
            if text is None:
                return END
            try:
                return parse(text)
            except Exception:  # noqa: BLE001 - a synthetic output the parser refuses: estimates stop here
                self.failed_estimates[t.judge] = self.failed_estimates.get(t.judge, 0) + 1
                return END

        return prompt, answer

    # -- the engine-facing part: note what was asked -----------------------------------------

    def _generate(self, prompts: list[JudgePrompt], attempt: int, stats: Any,
                  steps: list | None = None) -> list[tuple[str, str | None, int]]:
        self.recorder.attempt = attempt
        out = super()._generate(prompts, attempt, stats, steps)
        found = self.cache.found if self.cache is not None else {}
        for p in prompts:
            key = cache_key(self.engine_name, self.model_name, p, reask_sampling(p, attempt))
            trace, rnd, estimated = self.recorder.origin[id(p)]
            hit = found.get(key)
            if hit is not None and isinstance(hit[1].get("completion_tokens"), (int, float)):
                self._usage.append((p.judge, float(hit[1]["completion_tokens"])))
            if self.lookups is not None:
                self._lookups.append({"judge": p.judge, "record": trace.inp.key, "round": rnd,
                                      "attempt": attempt, "cache_key": key, "estimated": estimated,
                                      "in_cache": hit is not None})
        return out

    def process(self, rows: list[dict]) -> dict[str, float]:
        self.recorder.origin.clear()
        self.recorder.pending = []
        self._traces.clear()
        self._usage, self._lookups = [], []
        if self.cache is not None:
            self.cache.pending = {}
        stats = super().process(rows)
        # the batch succeeded: keep what it sent
        self.sent.extend(self.recorder.pending)
        for judge, n in self._usage:
            self.cached_usage.setdefault(judge, []).append(n)
        if self.lookups is not None:
            self.lookups.extend(self._lookups)
        if self.cache is not None:
            self.cache.sent.update(self.cache.pending)
        return stats
