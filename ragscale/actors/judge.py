"""Judge actor: an LLM engine (actors/engines/) driven by the judges of ragscale.judges.

Engines take a batch of ``JudgePrompt``s (chat messages + JSON schema) and return texts;
judges are generators of (prompt, parse) steps (ragscale/judges/base.py). With an engine that
offers ``submit`` (one prompt, a Future), every (record, judge) of a batch advances on its own:
its next step is submitted as soon as its own prompt is answered, so a slow prompt holds back
only its own record. Otherwise the actor advances every (record, judge) together, one engine
call per round, so a multi-round judge (RAGAS faithfulness: statements, then verdicts) is
batched across records too. Both paths write the same results.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Sequence


from ragscale.actors.engines import Generation, build
from ragscale.judges import JUDGES, JudgeSpec, judge_phases
from ragscale.judges.base import PROTOCOLS, Failed, JudgeParseError, JudgePrompt, JudgeResult, Undefined, cache_key
from ragscale.record import add_judge_errors, input_view

_COUNTERS = ("prompts", "cache_hits", "dedup_hits", "generations", "retries", "parse_failures", "engine_errors",
             "prompt_tokens", "completion_tokens")


class _Stats:
    """Counters in total (``judge_<c>``) and per judge (``judgeby|<judge>|<c>``) for the batch's stats."""

    def __init__(self) -> None:
        self.d: dict[str, float] = {}

    def add(self, judge: str, counter: str, n: float = 1) -> None:
        if n:
            self.d[f"judge_{counter}"] = self.d.get(f"judge_{counter}", 0) + n
            key = f"judgeby|{judge}|{counter}"
            self.d[key] = self.d.get(key, 0) + n


def reask_sampling(prompt: JudgePrompt, attempt: int) -> dict[str, Any]:
    """Temperature and seed of ``prompt``'s ``attempt`` (0: the first ask). The first ask is
    greedy, or the prompt's own ``sampling``; a re-ask after a parse failure samples at 0.7 with
    the attempt as seed, spread by the prompt's sample index (seed = attempt + 1000 x index),
    so that the n samples of one prompt (ragas' answer relevancy) stay n different draws and
    are not merged into one generation as identical prompts of a round."""
    if attempt == 0:
        if prompt.sampling:
            return {"temperature": prompt.sampling[0], "seed": prompt.sampling[1]}
        return {"temperature": 0.0, "seed": 0}
    sample = int(prompt.sampling[1]) if prompt.sampling else 0
    return {"temperature": 0.7, "seed": attempt + 1000 * sample}


def plan_judges(cfg: Any, metrics: Sequence[str], cluster: Mapping[str, Any]) -> dict:
    """The judge pool's plan from the config (on the driver, before Ray starts): the main
    judge's and each panel member's JudgeActor arguments (engines resolved and checked),
    and ``needs_derive`` when a panel's median must be taken after the judges."""
    from omegaconf import OmegaConf

    from ragscale.actors.engines import resolve as resolve_engine
    from ragscale.cachedir import judge_cache_path
    from ragscale.errors import UserError
    from ragscale.judges import JUDGED

    pool = cluster.get("judge") or {}
    judged = list(dict.fromkeys(JUDGED[m] for m in metrics if m in JUDGED))
    panel = OmegaConf.to_container(cfg.judge_panel, resolve=True) or []
    on_panel: list[str] = []
    panel_kwargs: list[dict] = []
    if panel:
        single = [m for m, j in JUDGED.items() if JUDGES[j].metrics == (m,) and m != "answer_relevancy"]
        for m in cfg.panel_metrics:
            if m not in single:
                raise UserError(f"panel_metrics: {m!r} is not a single-score judged metric ({', '.join(single)})")
        on_panel = list(dict.fromkeys(JUDGED[m] for m in cfg.panel_metrics if m in metrics))
        names = [c["name"] for c in panel]
        if len(set(names)) != len(names):
            raise UserError(f"judge_panel: judge names must be unique, got {names}")
        panel_kwargs = [{"engine": resolve_engine(c, pool), "judges": on_panel, "tag": c["name"],
                         "cache_path": judge_cache_path(c["cache_path"], f"judge_panel[{c['name']}].cache_path"),
                         "max_retries": c["max_retries"], "protocol": _protocol(c, f"judge_panel[{c['name']}]")}
                        for c in panel]
    j = OmegaConf.to_container(cfg.judge, resolve=True)
    kwargs: dict[str, Any] = {
        "engine": resolve_engine(j, pool),
        "judges": [n for n in judged if n not in on_panel],
        "cache_path": judge_cache_path(j["cache_path"]),
        "max_retries": j["max_retries"],
        "protocol": _protocol(j, "judge"),
    }
    k = cfg.taxonomy.k
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise UserError(f"taxonomy.k must be a positive integer or null (every chunk), got {k!r}")
    options = {name: {"k": k} for name in ("taxonomy_retrieval", "taxonomy_grounding") if name in kwargs["judges"]}
    if options:
        kwargs["options"] = options
    return {"judge_kwargs": kwargs, "panel_confs": tuple(panel), "panel_kwargs": tuple(panel_kwargs),
            "needs_derive": bool(on_panel)}


def _protocol(conf: Mapping[str, Any], where: str) -> str:
    """A judge config's ``protocol``, checked (a one-line UserError names the choices)."""
    from ragscale.errors import UserError, did_you_mean

    p = conf.get("protocol") or "constrained"
    if p not in PROTOCOLS:
        raise UserError(f"{where}.protocol: unknown judging protocol {p!r}{did_you_mean(str(p), PROTOCOLS)}; "
                        f"protocols are {', '.join(PROTOCOLS)} (docs/metrics.md, Judging protocols)")
    return p


def protocols_used(kwargs: Mapping[str, Any]) -> dict[str, str]:
    """run.json: the protocol each judge of a JudgeActor's kwargs runs under (a judge without a
    reference protocol runs ``constrained`` whatever was asked)."""
    asked = kwargs.get("protocol", "constrained")
    return {j: JUDGES[j].protocol(asked) for j in kwargs["judges"]}


_STREAM_KEY = "streamed"  # the streaming path's progress key: "streamed (idk) 3/12 prompts"
_FLUSH_EVERY = 64  # the streaming path writes fresh generations to the cache in batches of this many


@dataclass
class _Phase:
    """One phase's judge runs over a batch, keyed (row index, judge name): the generators, each
    unfinished run's pending step (or fan-out list of steps), the finished runs' (result, error)
    and the failed fan-out items' errors."""

    runs: dict[tuple[int, str], Any] = field(default_factory=dict)
    current: dict[tuple[int, str], Any] = field(default_factory=dict)
    final: dict[tuple[int, str], tuple[Any, dict | None]] = field(default_factory=dict)
    item_errors: dict[tuple[int, str], list[dict]] = field(default_factory=dict)

    def advance(self, key: tuple[int, str], value: Any, first: bool = False) -> None:
        """Send ``value`` to the judge run and store its next step, or its result when done
        (empty fan-out rounds are answered at once)."""
        run = self.runs[key]
        try:
            step = next(run) if first else run.send(value)
            while isinstance(step, list) and not step:
                step = run.send([])
        except StopIteration as stop:
            result = stop.value
            if isinstance(result, Undefined):
                self.final[key] = (None, {"judge": key[1], "reason": result.reason, "undefined": True})
            else:
                self.final[key] = (result, None)
            return
        self.current[key] = step

    def resume(self, key: tuple[int, str], answer: Any) -> None:
        """Give a run the answer to its step: ``(ok, value | reason, raw)`` for a single step, a
        list of them for a fan-out. A failed single step ends the run (its metric null, the reason
        and raw text in judge_errors); a failed fan-out item reaches the judge as ``Failed`` and is
        listed in judge_errors too."""
        if isinstance(answer, list):
            value = []
            for i, (ok, v, raw) in enumerate(answer):
                if not ok:
                    self.item_errors.setdefault(key, []).append({"judge": key[1], "item": i, "reason": v, "raw": raw})
                value.append(v if ok else Failed(v, raw))
        else:
            ok, value, raw = answer
            if not ok:
                self.runs[key].close()
                self.final[key] = (None, {"judge": key[1], "reason": value, "raw": raw})
                return
        self.advance(key, value)


class _Ask(NamedTuple):
    """One prompt of a streamed run: the run's key, its item (0 for a single step), the
    (prompt, parse) step and the attempt (0: the first ask)."""

    run: tuple[int, str]
    item: int
    step: tuple[JudgePrompt, Any]
    attempt: int


def _http_counters(stats: _Stats, counters: Mapping[str, Any]) -> None:
    """Add an engine's HTTP counters (the OpenAI-compatible engine's ``requests``,
    ``http_retries``, ...) to the batch's stats as ``judge_http_<name>`` (run.json: http_retries)."""
    for k, v in counters.items():
        if isinstance(v, (int, float)) and v:
            name = "judge_" + (k if k.startswith("http_") else f"http_{k}")
            stats.d[name] = stats.d.get(name, 0) + v


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
    render and parse (ragscale/judges/base.py ``PROTOCOLS``).

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
                 protocol: str = "constrained", streaming: bool = True):
        self.engine = self.make_engine(engine)
        self.engine_name = self.engine.name
        self.model_name = self.engine.model
        self.judges = [JUDGES[j] for j in judges]
        self.phases = judge_phases(self.judges)
        self.max_retries = int(max_retries)
        self.tag = tag
        self.streaming = streaming
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
        """The engine of ``kwargs`` (``resolve``'s output); the dry run (ragscale.prompts) records instead."""
        return build(kwargs)

    # -- shared by both paths ------------------------------------------------------------------

    def _sampled(self, prompt: JudgePrompt, attempt: int) -> tuple[dict[str, Any], str]:
        """The sampling of ``prompt``'s ``attempt`` and its cache key."""
        sampling = reask_sampling(prompt, attempt)
        return sampling, cache_key(self.engine_name, self.model_name, prompt, sampling)

    def _cached(self, keys: list[str]) -> dict[str, tuple[str, dict]]:
        """The cache's (text, meta) of those ``keys`` it holds (nothing without a cache)."""
        if self.cache is None:
            return {}
        with self._cache_lock:
            return self.cache.get_many(keys)

    def _store(self, fresh: list[tuple[str, str, dict]]) -> None:
        """Write fresh generations, (key, text, token counts), to the cache."""
        if self.cache is not None and fresh:
            with self._cache_lock:
                self.cache.put_many(fresh)

    @staticmethod
    def _count(judge: str, key: str, g: Generation, stats: _Stats, fresh: list[tuple[str, str, dict]]) -> None:
        """Count one engine output (an engine error, or a generation and its tokens); a
        generation, never an error, is kept in ``fresh`` for the cache."""
        if g.error:
            stats.add(judge, "engine_errors")
            return
        stats.add(judge, "generations")
        stats.add(judge, "prompt_tokens", g.prompt_tokens)
        stats.add(judge, "completion_tokens", g.completion_tokens)
        fresh.append((key, g.text, {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens}))

    def _settle(self, step: tuple[JudgePrompt, Any], attempt: int, text: str, error: str | None,
                stats: _Stats) -> tuple[bool, Any, str] | None:
        """A step's answer from the output of its ``attempt``: (True, parsed value, raw text), or
        (False, reason, raw text) for an engine error or a parse failure with no re-ask left;
        None when the parse failure is to be re-asked (counted as a retry)."""
        if error:
            return False, f"engine error: {error}", text  # the engine already retried; a sampled re-ask would not help
        try:
            return True, step[1](text), text
        except JudgeParseError as e:
            if attempt < self.max_retries:
                stats.add(step[0].judge, "retries")
                return None
            stats.add(step[0].judge, "parse_failures")
            return False, e.reason, text

    def _start_phase(self, rows: list[dict], specs: Sequence[JudgeSpec]) -> _Phase:
        """Start every (record, judge) run of a phase and take it to its first step."""
        ph = _Phase()
        for r, row in enumerate(rows):
            obj = input_view(row)
            for spec in specs:
                key = (r, spec.name)
                ph.runs[key] = spec.start(obj, row, **self.options.get(spec.name, {}))
                ph.advance(key, None, first=True)
        return ph

    def _finish(self, rows: list[dict], specs: Sequence[JudgeSpec], ph: _Phase) -> None:
        """Write a finished phase's outcomes into the rows, record by record in the phase's judge
        order (the same order whichever path or timing finished them)."""
        for r, row in enumerate(rows):
            for spec in specs:
                result, err = ph.final[(r, spec.name)]
                self._write(row, spec, result, [*ph.item_errors.get((r, spec.name), []), *([err] if err else [])])

    def _write(self, row: dict, spec: JudgeSpec, result: Any, errors: list[dict]) -> None:
        """Write a judge's outcome into the row: its metrics (``@tag`` for panels), details, errors."""
        suffix = f"@{self.tag}" if self.tag else ""
        m = json.loads(row["metrics"])
        if isinstance(result, JudgeResult):
            for name, value in result.metrics.items():
                m[name + suffix] = value
            if result.details is not None:
                details = json.loads(row["details"]) if row.get("details") else {}
                details[spec.name + suffix] = result.details
                row["details"] = json.dumps(details, ensure_ascii=False)
        else:
            for name in spec.metrics:
                m[name + suffix] = None
            if result is not None:  # a plain score: MT-RAG's one-element list
                m[spec.metric + suffix] = [float(result)]
        row["metrics"] = json.dumps(m)
        add_judge_errors(row, ({**e, **({"tag": self.tag} if self.tag else {})} for e in errors))

    def _tick(self, done: int = 0, total: int = 0, label: str | None = None, key: str | None = None) -> None:
        """Report prompts to the pipeline's progress (when it listens), under ``key`` (default:
        the current round's)."""
        if self.progress is not None and (done or total or label):
            self.progress(key or self._round_key, done=done, total=total, label=label)

    def _http_since(self, stats: _Stats) -> None:
        """Streaming: the engine's HTTP counters (its ``total_stats``) added since the last call
        that read them go to this batch's stats, so that the run's totals are the engine's."""
        total = dict(getattr(self.engine, "total_stats", None) or {})
        with self._cache_lock:
            delta = {k: v - self._http_seen.get(k, 0) for k, v in total.items() if isinstance(v, (int, float))}
            self._http_seen = total
        _http_counters(stats, delta)

    # -- rounds --------------------------------------------------------------------------------

    def _generate(self, prompts: list[JudgePrompt], attempt: int, stats: _Stats) -> list[tuple[str, str | None]]:
        """(text, engine error) per prompt, from the cache or one engine call per sampling
        setting (greedy, or a prompt's own ``sampling`` on its first attempt). Prompts with
        the same cache key in one round (e.g. a sweep's identical responses to a task) are
        generated once and share the text (``dedup_hits``): engines need not give identical
        outputs to identical prompts in one batch, and the cache keeps one text per key."""
        sampled = [self._sampled(p, attempt) for p in prompts]
        keys = [k for _, k in sampled]
        cached = self._cached(keys)
        self._tick(total=len(prompts))
        out: dict[int, tuple[str, str | None]] = {}
        groups: dict[tuple, list[int]] = {}
        first: dict[str, int] = {}  # cache key -> the index generated for it in this round
        copies: list[tuple[int, int]] = []  # (duplicate index, index it copies)
        for i, k in enumerate(keys):
            if k in cached:
                out[i] = (cached[k][0], None)
                stats.add(prompts[i].judge, "cache_hits")
            elif k in first:
                copies.append((i, first[k]))
                stats.add(prompts[i].judge, "dedup_hits")
            else:
                first[k] = i
                groups.setdefault(tuple(sorted(sampled[i][0].items())), []).append(i)
        self._tick(done=len(prompts) - len(copies) - sum(len(t) for t in groups.values()))
        for sampling, todo in groups.items():
            gens = self.engine.generate([prompts[i] for i in todo], **dict(sampling), on_done=self._done)
            _http_counters(stats, getattr(self.engine, "last_stats", None) or {})  # e.g. HTTP retries
            fresh: list[tuple[str, str, dict]] = []
            for i, g in zip(todo, gens):
                out[i] = (g.text, g.error)
                self._count(prompts[i].judge, keys[i], g, stats, fresh)
            self._store(fresh)
        for i, j in copies:
            out[i] = out[j]
        self._tick(done=len(copies))
        return [out[i] for i in range(len(prompts))]

    def _done(self, n: int = 1) -> None:
        """The engines' callback: ``n`` more prompts of the current call finished."""
        self._tick(done=n)

    def _ask(self, steps: list[tuple[JudgePrompt, Any]], stats: _Stats) -> list[tuple[bool, Any, str]]:
        """One round: (ok, parsed value | failure reason, raw text) per step, with bounded re-asks."""
        results: dict[int, tuple[bool, Any, str]] = {}
        for prompt, _ in steps:
            stats.add(prompt.judge, "prompts")
        pending, attempt = list(range(len(steps))), 0
        while pending:
            texts = self._generate([steps[i][0] for i in pending], attempt, stats)
            still = []
            for i, (text, error) in zip(pending, texts):
                answer = self._settle(steps[i], attempt, text, error, stats)
                if answer is None:
                    still.append(i)
                else:
                    results[i] = answer
            pending, attempt = still, attempt + 1
        return [results[i] for i in range(len(steps))]

    def _judge(self, rows: list[dict], stats: _Stats) -> None:
        """Run the judges phase by phase, in rounds: a judge that needs another's metrics
        (``after``, e.g. nuggets after UMBRELA) starts once that judge's results are in the rows.
        One call at a time: the engine (no ``submit``) and the round counter are the actor's."""
        with self._round_lock:
            self._round = 0
            for phase in self.phases:
                self._judge_phase(rows, phase, stats)

    def _judge_phase(self, rows: list[dict], specs: Sequence[JudgeSpec], stats: _Stats) -> None:
        """One phase in rounds: every pending step of every (record, judge), fan-outs flattened,
        in one ``_ask``; no run's next step is asked before the whole round is answered."""
        ph = self._start_phase(rows, specs)
        while ph.current:
            self._round += 1
            self._round_key = f"round {self._round}"
            self._tick(label="(" + ", ".join(sorted({k[1] for k in ph.current})) + ")")
            asked, ph.current = ph.current, {}
            flat = [s for step in asked.values() for s in (step if isinstance(step, list) else [step])]
            answers = iter(self._ask(flat, stats))
            for key, step in asked.items():
                ph.resume(key, [next(answers) for _ in step] if isinstance(step, list) else next(answers))
        self._finish(rows, specs, ph)

    def process(self, rows: list[dict]) -> dict[str, float]:
        """Judge ``rows`` in place; returns the judge counters (prompts, cache hits, tokens, ...)."""
        stats = _Stats()
        if self.streaming and callable(getattr(self.engine, "submit", None)):
            stream = _Stream(self, stats)
            for phase in self.phases:
                stream.phase(rows, phase)
            self._http_since(stats)
        else:
            self._judge(rows, stats)
        return stats.d


class _Stream:
    """One ``process`` call on the streaming path; its state is never shared with another call.

    Every (record, judge) run advances on its own: when all prompts of its pending step are
    answered (a fan-out's items together), the judge gets the answer and its next step is sent
    at once. Prompts are looked up in the cache in batches (all those that became due together),
    a hit never reaches the engine; a prompt whose cache key was already sent in this call waits
    for that generation (or takes its text) instead of being sent again (``dedup_hits``); fresh
    generations go to the cache every ``_FLUSH_EVERY`` and at the end of each phase. Phases run
    in order over the whole batch, as on the round path."""

    def __init__(self, actor: JudgeActor, stats: _Stats):
        self.actor, self.stats = actor, stats
        self.shared: dict[str, Future | str] = {}  # cache key -> its generation in flight, or its text
        self.waiting: dict[Future, tuple[str, list[_Ask]]] = {}  # in flight -> (cache key, the asks it answers)
        self.ready: deque[tuple[_Ask, str, str | None]] = deque()  # answered asks: (ask, text, engine error)
        self.new: list[_Ask] = []  # asks to send
        self.fresh: list[tuple[str, str, dict]] = []  # generations not written to the cache yet
        self.slots: dict[tuple[int, str], list] = {}  # a run's answers so far to its pending step, per item
        self.left: dict[tuple[int, str], int] = {}  # a run's asks not answered yet

    def phase(self, rows: list[dict], specs: Sequence[JudgeSpec]) -> None:
        """Run one phase over the whole batch and write its results into the rows."""
        ph = self.actor._start_phase(rows, specs)
        if ph.current:
            self.actor._tick(label="(" + ", ".join(sorted({k[1] for k in ph.current})) + ")", key=_STREAM_KEY)
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
        self.actor._finish(rows, specs, ph)

    def _enqueue(self, ph: _Phase, key: tuple[int, str]) -> None:
        """Queue the prompts of a run's pending step (one, or a fan-out's items)."""
        step = ph.current[key]
        items = step if isinstance(step, list) else [step]
        self.slots[key], self.left[key] = [None] * len(items), len(items)
        for i, s in enumerate(items):
            self.stats.add(s[0].judge, "prompts")
            self.new.append(_Ask(key, i, s, 0))

    def _send(self) -> None:
        """Answer the queued asks from the cache or a generation of this call, submit the others."""
        a = self.actor
        asks, self.new = self.new, []
        keyed = [(ask, *a._sampled(ask.step[0], ask.attempt)) for ask in asks]
        cached = a._cached([k for _, _, k in keyed if k not in self.shared])
        a._tick(total=len(asks), key=_STREAM_KEY)
        for ask, sampling, k in keyed:
            judge = ask.step[0].judge
            got = self.shared.get(k)
            if got is not None:
                self.stats.add(judge, "dedup_hits")
                if isinstance(got, Future):
                    self.waiting[got][1].append(ask)
                else:
                    self.ready.append((ask, got, None))
            elif k in cached:
                self.stats.add(judge, "cache_hits")
                self.ready.append((ask, cached[k][0], None))
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
            self.actor._count(asks[0].step[0].judge, k, g, self.stats, self.fresh)
            if g.error:
                del self.shared[k]  # an ask of it that comes later is sent again
            else:
                self.shared[k] = g.text
            self.ready.extend((ask, g.text, g.error) for ask in asks)
        if len(self.fresh) >= _FLUSH_EVERY:
            self._flush()

    def _answer(self, ph: _Phase) -> None:
        """Settle the answered asks: re-ask a parse failure, or keep the answer; a run whose
        step is fully answered resumes, and its next step is queued."""
        n = len(self.ready)
        while self.ready:
            ask, text, error = self.ready.popleft()
            answer = self.actor._settle(ask.step, ask.attempt, text, error, self.stats)
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
        self.actor._tick(done=n, key=_STREAM_KEY)

    def _flush(self) -> None:
        """Write the fresh generations to the cache."""
        self.actor._store(self.fresh)
        self.fresh = []
