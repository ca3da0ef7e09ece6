"""Judge actor: an LLM engine (actors/engines/) driven by the judges of ragscale.judges.

Engines take a batch of ``JudgePrompt``s (chat messages + JSON schema) and return texts;
judges are generators of (prompt, parse) steps (ragscale/judges/base.py). With an engine that
offers ``submit`` (one prompt, a Future), every (record, judge) of a batch advances on its own
(ragscale/actors/judge_stream.py): its next step is submitted as soon as its own prompt is
answered, so a slow prompt holds back only its own record. Otherwise the actor advances every
(record, judge) together, one engine call per round, so a multi-round judge (RAGAS faithfulness:
statements, then verdicts) is batched across records too. Both paths write the same results,
and share the bookkeeping of ragscale/actors/judge_runs.py: an exception of one judge on one
record stays that judge's failure on that record, and every output is cut to ``max_raw_chars``
before anything reads it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Sequence

from ragscale.actors.engines import Generation, build
from ragscale.actors.judge_runs import (JudgeStats, Phase, add_warnings, cut, cut_warning,
                                        http_counters, parse_step, reask_sampling)
from ragscale.actors.judge_stream import Stream
from ragscale.judges import JUDGES, JudgeSpec, judge_phases
from ragscale.judges.base import JudgePrompt, JudgeResult, cache_key
from ragscale.row import set_detail
from ragscale.judges.judge_input import judge_input
from ragscale.record import ENGINE_ERROR, add_judge_errors, error_json

class JudgeActor:
    """Ray Data actor: runs the enabled judges over a batch of records.

    Every prompt is looked up in the on-disk cache first; the missing ones are generated, in
    one engine call per round, or streamed one by one to an engine that offers ``submit``
    (``streaming=False`` forces rounds). A parse failure is re-asked a bounded number of times
    with sampling (temperature 0.7, new seed); if it still fails, or the engine reports an
    error for the prompt, the metric is ``null`` and the record's ``judge_errors`` keeps
    the reason and the raw text. A metric that is undefined for a record (e.g. RL_F with
    no passages) is ``null`` with its reason in ``judge_errors`` marked ``undefined``.
    ``tag`` (judge panels) writes metrics as ``<metric>@<tag>``. ``options`` (judge name ->
    keyword arguments) configures a judge's start, e.g. the taxonomy's top-K. ``protocol``
    (``constrained`` | ``reference``) chooses how the judges that have a reference protocol
    render and parse (ragscale/judges/base.py ``PROTOCOLS``). ``max_raw_chars`` cuts every
    output (engine's or cache's) before anything reads it (None: no cap; a run passes
    ``judge.max_raw_chars``); ``retry_unparsed`` asks again for a cached output that does not
    parse instead of replaying it.

    ``process`` may be called from several threads at once (a threaded Ray actor keeps several
    batches in flight on one engine): the streaming path keeps its state per call, the cache is
    locked, and the round path (engines without ``submit`` are not thread safe) runs one call
    at a time.

    ``progress`` (set by the pipeline) is called as ``progress(key, done=, total=, label=)``
    while a batch is judged. Rounds: each round's prompts (``round <n>``, labelled with its
    judges), known when the round starts and done as the engine finishes them (cache hits at
    once). Streaming: every prompt under ``streamed`` (labelled with each phase's judges), known
    when submitted and done when answered.
    """

    progress: Callable[..., None] | None = None

    def __init__(self, engine: Mapping[str, Any], judges: Sequence[str], cache_path: str | None,
                 max_retries: int = 1, tag: str | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
                 protocol: str = "constrained", streaming: bool = True,
                 max_raw_chars: int | None = None, retry_unparsed: bool = False):
        self.engine = self.make_engine(engine)
        self.engine_name = self.engine.name
        self.model_name = self.engine.model
        self.judges = [JUDGES[j] for j in judges]
        self.phases = judge_phases(self.judges)
        self.max_retries = int(max_retries)
        self.tag = tag
        self.streaming = streaming
        self.max_raw_chars = max_raw_chars
        self.retry_unparsed = bool(retry_unparsed)
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        for spec in self.judges:  # the protocol and the judge model's name (UMBRELA picks its prompt by it)
            self.options.setdefault(spec.name, {}).update(spec.options(protocol, self.model_name))
        self._round, self._round_key = 0, "round 0"
        self._round_lock = threading.Lock()  # the round path, one call at a time
        self._cache_lock = threading.Lock()  # the cache's one sqlite connection, shared by concurrent calls
        self._http_seen: dict[str, float] = {}  # the engine's total_stats when the streaming path last read them
        self.cache = None
        if cache_path:
            from ragscale.judges.cache import JudgeCache

            self.cache = JudgeCache(cache_path)

    def make_engine(self, kwargs: Mapping[str, Any]) -> Any:
        """The engine of ``kwargs`` (``resolve``'s output); the dry run (ragscale.dryrun) records instead."""
        return build(kwargs)

    # -- the steps both paths share (judge_stream.Stream calls them too) ------------------------

    def sampled(self, prompt: JudgePrompt, attempt: int) -> tuple[dict[str, Any], str]:
        """The sampling of ``prompt``'s ``attempt`` and its cache key."""
        sampling = reask_sampling(prompt, attempt)
        return sampling, cache_key(self.engine_name, self.model_name, prompt, sampling)

    def cached(self, keys: list[str]) -> dict[str, tuple[str, dict]]:
        """The cache's (text, meta) of those ``keys`` it holds (nothing without a cache)."""
        if self.cache is None:
            return {}
        with self._cache_lock:
            return self.cache.get_many(keys)

    def reusable(self, step: tuple[JudgePrompt, Any], text: str, stats: JudgeStats) -> bool:
        """Whether a cached output is replayed: always, unless ``retry_unparsed`` and it does not
        parse (counted as ``cache_unparsed``: that prompt is asked again)."""
        if not self.retry_unparsed or parse_step(step, cut(text, self.max_raw_chars)[0])[0]:
            return True
        stats.add(step[0].judge, "cache_unparsed")
        return False

    def store(self, fresh: list[tuple[str, str, dict]]) -> None:
        """Write fresh generations, (key, text, token counts), to the cache."""
        if self.cache is not None and fresh:
            with self._cache_lock:
                self.cache.put_many(fresh)

    def take(self, judge: str, text: str, stats: JudgeStats) -> tuple[str, int]:
        """An output as the judge reads it: cut to ``max_raw_chars`` (counted), and the characters dropped."""
        text, dropped = cut(text, self.max_raw_chars)
        if dropped:
            stats.add(judge, "outputs_cut")
            stats.add(judge, "raw_chars_dropped", dropped)
        return text, dropped

    def received(self, judge: str, key: str, g: Generation, stats: JudgeStats,
                 fresh: list[tuple[str, str, dict]]) -> tuple[str, int]:
        """Count one engine output (an engine error, or a generation and its tokens) and return its
        text as the judge reads it (``take``), with the characters dropped; a generation, never an
        error, is kept in ``fresh`` for the cache, as cut."""
        if g.error:
            stats.add(judge, "engine_errors")
            return g.text, 0
        stats.add(judge, "generations")
        stats.add(judge, "prompt_tokens", g.prompt_tokens)
        stats.add(judge, "completion_tokens", g.completion_tokens)
        text, dropped = self.take(judge, g.text, stats)
        fresh.append((key, text, {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens}))
        return text, dropped

    def settle(self, step: tuple[JudgePrompt, Any], attempt: int, text: str, error: str | None,
               stats: JudgeStats, dropped: int) -> tuple[bool, Any, str, int] | None:
        """A step's answer from the output of its ``attempt``: (True, parsed value, raw text,
        characters dropped), or (False, reason, raw text, dropped) for an engine error or a parse
        failure (the parser raising anything counts as one) with no re-ask left; None when the
        parse failure is to be re-asked (counted as a retry)."""
        if error:  # the engine already retried; a sampled re-ask would not help
            return False, f"{ENGINE_ERROR}: {error}", text, dropped
        ok, value = parse_step(step, text)
        if ok:
            return True, value, text, dropped
        if attempt < self.max_retries:
            stats.add(step[0].judge, "retries")
            return None
        stats.add(step[0].judge, "parse_failures")
        return False, value, text, dropped

    def start_phase(self, rows: list[dict], specs: Sequence[JudgeSpec]) -> Phase:
        """Start every (record, judge) run of a phase and take it to its first step."""
        ph = Phase()
        for r, row in enumerate(rows):
            inp = judge_input(self.own_view(row))  # the record as every judge of the phase reads it, with the metrics so far
            for spec in specs:
                opts = self.options[spec.name]  # __init__ gave each of the actor's judges its entry
                ph.start((r, spec.name), lambda s=spec, o=opts: s.start(inp, **o))
        return ph

    def own_view(self, row: dict) -> dict:
        """The row as this actor's judges read it: a panel member's (``tag``) own ``<metric>@<tag>``
        values in place of the metrics' plain names, so that a judge reading another's metrics
        (nuggets: UMBRELA's grades) reads this member's when that judge is on the panel too, and
        the main judge's otherwise."""
        if not self.tag:
            return row
        suffix = f"@{self.tag}"
        own = {k[:-len(suffix)]: v for k, v in (row.get("metrics") or {}).items() if k.endswith(suffix)}
        return {**row, "metrics": {**row["metrics"], **own}} if own else row

    def finish(self, rows: list[dict], specs: Sequence[JudgeSpec], ph: Phase) -> None:
        """Write a finished phase's outcomes into the rows, record by record in the phase's judge
        order (the same order whichever path or timing finished them), with a warning per
        (record, judge) whose outputs were cut to ``max_raw_chars``."""
        suffix = f"@{self.tag}" if self.tag else ""
        for r, row in enumerate(rows):
            if r in ph.record_errors and not row.get("error"):
                row["error"] = error_json(ph.record_errors[r].stage, ph.record_errors[r].message)
            warnings = []
            for spec in specs:
                result, err = ph.final[(r, spec.name)]
                self._write(row, spec, result, [*ph.item_errors.get((r, spec.name), []), *([err] if err else [])])
                if (r, spec.name) in ph.cuts:
                    outputs, dropped = ph.cuts[(r, spec.name)]
                    warnings.append(cut_warning(spec.name + suffix, outputs, dropped, self.max_raw_chars or 0))
            add_warnings(row, warnings)

    def _write(self, row: dict, spec: JudgeSpec, result: Any, errors: list[dict]) -> None:
        """Write a judge's outcome into the row: its metrics (``@tag`` for panels), details, errors."""
        suffix = f"@{self.tag}" if self.tag else ""
        m = row["metrics"]
        if isinstance(result, JudgeResult):
            for name, value in result.metrics.items():
                m[name + suffix] = value
            if result.details is not None:
                set_detail(row, spec.name + suffix, result.details)
        else:
            for name in spec.metrics:
                m[name + suffix] = None
            if result is not None:  # a plain score: MT-RAG's one-element list
                m[spec.metric + suffix] = [float(result)]
        add_judge_errors(row, ({**e, **({"tag": self.tag} if self.tag else {})} for e in errors))

    def tick(self, done: int = 0, total: int = 0, label: str | None = None, key: str | None = None) -> None:
        """Report prompts to the pipeline's progress (when it listens), under ``key`` (default:
        the current round's)."""
        if self.progress is not None and (done or total or label):
            self.progress(key or self._round_key, done=done, total=total, label=label)

    def _http_since(self, stats: JudgeStats) -> None:
        """Streaming: the engine's HTTP counters (its ``total_stats``) added since the last call
        that read them go to this batch's stats, so that the run's totals are the engine's."""
        total = dict(getattr(self.engine, "total_stats", None) or {})
        with self._cache_lock:
            delta = {k: v - self._http_seen.get(k, 0) for k, v in total.items() if isinstance(v, (int, float))}
            self._http_seen = total
        http_counters(stats, delta)

    # -- rounds --------------------------------------------------------------------------------

    def _generate(self, prompts: list[JudgePrompt], attempt: int, stats: JudgeStats,
                  steps: list[tuple[JudgePrompt, Any]] | None = None) -> list[tuple[str, str | None, int]]:
        """(text, engine error, characters dropped) per prompt, from the cache or one engine call
        per sampling setting (greedy, or a prompt's own ``sampling`` on its first attempt).
        Prompts with the same cache key in one round (e.g. a sweep's identical responses to a
        task) are generated once and share the text (``dedup_hits``): engines need not give
        identical outputs to identical prompts in one batch, and the cache keeps one text per
        key. ``steps`` (the prompts' steps) lets ``reusable`` check cached outputs."""
        sampled = [self.sampled(p, attempt) for p in prompts]
        keys = [k for _, k in sampled]
        cached = self.cached(keys)
        self.tick(total=len(prompts))
        out: dict[int, tuple[str, str | None, int]] = {}
        groups: dict[tuple, list[int]] = {}
        first: dict[str, int] = {}  # cache key -> the index generated for it in this round
        copies: list[tuple[int, int]] = []  # (duplicate index, index it copies)
        for i, k in enumerate(keys):
            judge = prompts[i].judge
            if k in cached and (steps is None or self.reusable(steps[i], cached[k][0], stats)):
                out[i] = self._hit(judge, cached[k][0], stats)
                stats.add(judge, "cache_hits")
            elif k in first:
                copies.append((i, first[k]))
                stats.add(judge, "dedup_hits")
            else:
                cached.pop(k, None)  # not replayed: a copy of this key in the round waits for the generation
                first[k] = i
                groups.setdefault(tuple(sorted(sampled[i][0].items())), []).append(i)
        self.tick(done=len(prompts) - len(copies) - sum(len(t) for t in groups.values()))
        for sampling, todo in groups.items():
            gens = self.engine.generate([prompts[i] for i in todo], **dict(sampling), on_done=self._done)
            http_counters(stats, getattr(self.engine, "last_stats", None) or {})  # e.g. HTTP retries
            fresh: list[tuple[str, str, dict]] = []
            for i, g in zip(todo, gens):
                text, dropped = self.received(prompts[i].judge, keys[i], g, stats, fresh)
                out[i] = (text, g.error, dropped)
            self.store(fresh)
        for i, j in copies:
            out[i] = out[j]
        self.tick(done=len(copies))
        return [out[i] for i in range(len(prompts))]

    def _hit(self, judge: str, text: str, stats: JudgeStats) -> tuple[str, None, int]:
        """A cached output as a round's answer: (its text as the judge reads it, no error, characters dropped)."""
        text, dropped = self.take(judge, text, stats)
        return text, None, dropped

    def _done(self, n: int) -> None:
        """The engines' callback: ``n`` more prompts of the current call finished."""
        self.tick(done=n)

    def _ask(self, steps: list[tuple[JudgePrompt, Any]], stats: JudgeStats) -> list[tuple[bool, Any, str, int]]:
        """One round: (ok, parsed value | failure reason, raw text, dropped) per step, with bounded re-asks."""
        results: dict[int, tuple[bool, Any, str, int]] = {}
        for prompt, _ in steps:
            stats.add(prompt.judge, "prompts")
        pending, attempt = list(range(len(steps))), 0
        while pending:
            texts = self._generate([steps[i][0] for i in pending], attempt, stats, steps=[steps[i] for i in pending])
            still = []
            for i, (text, error, dropped) in zip(pending, texts):
                answer = self.settle(steps[i], attempt, text, error, stats, dropped)
                if answer is None:
                    still.append(i)
                else:
                    results[i] = answer
            pending, attempt = still, attempt + 1
        return [results[i] for i in range(len(steps))]

    def _judge(self, rows: list[dict], stats: JudgeStats) -> None:
        """Run the judges phase by phase, in rounds: a judge that needs another's metrics
        (``after``, e.g. nuggets after UMBRELA) starts once that judge's results are in the rows.
        One call at a time: the engine (no ``submit``) and the round counter are the actor's."""
        with self._round_lock:
            self._round = 0
            for phase in self.phases:
                self._judge_phase(rows, phase, stats)

    def _judge_phase(self, rows: list[dict], specs: Sequence[JudgeSpec], stats: JudgeStats) -> None:
        """One phase in rounds: every pending step of every (record, judge), fan-outs flattened,
        in one ``_ask``; no run's next step is asked before the whole round is answered."""
        ph = self.start_phase(rows, specs)
        while ph.current:
            self._round += 1
            self._round_key = f"round {self._round}"
            self.tick(label="(" + ", ".join(sorted({k[1] for k in ph.current})) + ")")
            asked, ph.current = ph.current, {}
            flat = [s for step in asked.values() for s in (step if isinstance(step, list) else [step])]
            answers = iter(self._ask(flat, stats))
            for key, step in asked.items():
                ph.resume(key, [next(answers) for _ in step] if isinstance(step, list) else next(answers))
        self.finish(rows, specs, ph)

    def process(self, rows: list[dict]) -> dict[str, float]:
        """Judge ``rows`` in place; returns the judge counters (prompts, cache hits, tokens, ...)."""
        stats = JudgeStats()
        if self.streaming and callable(getattr(self.engine, "submit", None)):
            stream = Stream(self, stats)
            for phase in self.phases:
                stream.phase(rows, phase)
            self._http_since(stats)
        else:
            self._judge(rows, stats)
        return stats.d
