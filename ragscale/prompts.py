"""``ragscale prompts``: a dry run that writes every prompt a run would send to its judge engine,
with its token count and cost (issue 17, item 3; docs/prompts.md).

    ragscale prompts +scenario=mtrag judge.protocol=reference --out prompts.jsonl --price-in 0.15 --price-out 0.60

Nothing here re-implements the run: the config is planned by ``ragscale.plan.plan_run``, the records
are selected by the runner's scan (sweep order, ``limit``) and read by the pipeline's first stage
(``ragscale.pipeline.stages.load_and_lexical``), and the judging is the judge actor's own code
(``ragscale.actors.judge.JudgeActor``: phases, rounds, fan-outs, the judge cache, identical cache keys
of a round generated once, re-asks), in batches of the judge pool's batch size, with two things
swapped: its engine is a recorder (``make_engine``, overridden) and its cache is a read-only view
of the judge cache plus the prompts this dry run has already "sent". No engine is loaded, no Ray started, the judge cache is not written.

A prompt is *sent* when its cache key is neither in the judge cache, nor sent earlier in the dry run
(a later batch of a run finds it in the cache), nor the duplicate of another prompt of its round. A
cached output is followed as the run would follow it: its parsed value feeds the judge's next round,
and a cached output that does not parse is re-asked as the actor re-asks (``reask_sampling``).

Rounds that need outputs not generated yet (RAGAS faithfulness' verdicts need its statements;
nuggets' importance and assignment need the created nuggets; nuggets read UMBRELA's grades) cannot
be rendered. Their judge is driven on with a synthetic output instead, read by the step's own parser
whatever the protocol (``SYNTHETIC``, documented in docs/prompts.md: statements = the answer's
sentences, every UMBRELA grade 3, nuggets = the answer's sentences and a creation that then stops,
every nugget vital), and every prompt rendered after one is ``estimated: true``. A judge without a
synthetic rule ends at its first uncached answer: right for the single-round judges, whose only
round is then already counted.

Deliberate limits: re-asks after parse failures of outputs not generated yet cannot be foreseen (not
counted); a judge pool of several actors may generate a prompt twice when two batches holding it run
at once (counted once here, as one actor does); the output directory's finished records (a resumed
run) are not looked at: with the judge cache kept, their prompts are cache hits anyway.

Prompt tokens are counted with the judge model's own tokenizer where it is local (a llama.cpp GGUF:
llama-cpp-python's chat handler on a vocabulary-only model, the very code that tokenizes the run's
prompts; a vLLM model folder: its chat template and tokenizer), else estimated as characters / 4.
Expected completion tokens: the mean of the judge's outputs in the judge cache when this dry run met
some, else ``COMPLETION_TOKENS`` (capped at the prompt's ``max_tokens``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Mapping, Sequence

from ragscale.actors.judge import JudgeActor, reask_sampling
from ragscale.errors import OneLineParser, UserError
from ragscale.judges.base import JudgePrompt, Undefined, cache_key

# What the recorder answers for a prompt it would send (never a real output: it holds NUL characters).
NOT_GENERATED = "\x00ragscale prompts: not generated\x00"
# A synthetic answer that ends the judge's run: a judge without a rule for this step.
END = object()
NOT_ESTIMATED = "dry run: the rounds after this one are not estimated"

# Expected completion tokens of one prompt of a judge when the judge cache holds none of its outputs
# (capped at the prompt's max_tokens): typical outputs of a 7B-class instruct judge, the JSON answer
# with its bounded rationale where the prompt asks for one.
COMPLETION_TOKENS = {
    "idk": 8, "underspecified": 8, "no_answer": 10, "umbrela": 8, "citation": 10,
    "radbench": 120, "factual_consistency": 80, "ragas_faithfulness": 150, "nuggets": 100,
    "ragas_answer_relevancy": 40, "ragas_context_precision": 60, "ragas_context_recall": 100,
    "taxonomy_retrieval": 60, "taxonomy_grounding": 60, "taxonomy_generation": 60,
}
DEFAULT_COMPLETION_TOKENS = 100
CHARS_PER_TOKEN = 4  # the estimate where the judge model's tokenizer is not local (an API model)
UMBRELA_GRADE = 3  # the synthetic grade of every passage: every passage reaches the nuggets' context


def sentences(text: str) -> list[str]:
    """``text`` split after ``.``, ``!`` or ``?`` followed by white space; blank pieces dropped."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text or "") if s.strip()]


# --------------------------------------------------------------------------------------------
# Synthetic answers of the steps whose outputs later rounds need
# --------------------------------------------------------------------------------------------


@dataclass
class _Trace:
    """One (record, judge) run of the dry run: its round, the answers it got, whether any was synthetic."""

    judge: str
    row: dict
    estimated: bool = False
    round: int = 0
    # per round: (fan-out?, its output schema's one property or None, the parsed value(s))
    answers: list[tuple[bool, str | None, Any]] = field(default_factory=list)


def _field(prompt: JudgePrompt) -> str | None:
    """The one property of the prompt's output schema (``statements``, ``score``...), if it has one."""
    props = list((prompt.schema or {}).get("properties") or {})
    return props[0] if len(props) == 1 else None


def _answer(prompt: JudgePrompt, name: str, value: Any) -> str:
    """A JSON output ``{name: value}``, as the judges' prompts ask for it under both protocols; a
    list within the bounds the prompt's schema sets (maxItems, the items' maxLength)."""
    name = _field(prompt) or name
    spec = ((prompt.schema or {}).get("properties") or {}).get(name) or {}
    if isinstance(value, list):
        width = (spec.get("items") or {}).get("maxLength")
        value = [v[:width] for v in value] if width else value
        value = value[: spec["maxItems"]] if spec.get("maxItems") else value
    return json.dumps({name: value}, ensure_ascii=False)


def _listed(value: Any) -> list:
    """A parsed list output (the nuggets), also when a parser returns it inside its output model."""
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):  # a one-item fan-out round
        value = value[0]
    return value if isinstance(value, list) else []


def _faithfulness(t: _Trace, item: int | None, prompt: JudgePrompt) -> str | None:
    """RAGAS faithfulness: the statements (round 1) are the answer's sentences; the verdicts end it."""
    return _answer(prompt, "statements", sentences(t.row.get("prediction") or "")) if t.round == 1 else None


def _umbrela(t: _Trace, item: int | None, prompt: JudgePrompt) -> str | None:
    """UMBRELA: every passage graded ``UMBRELA_GRADE`` (so every passage is in the nuggets' context)."""
    return _answer(prompt, "score", str(UMBRELA_GRADE))


def _nuggets(t: _Trace, item: int | None, prompt: JudgePrompt) -> str | None:
    """Nuggets: a creation answers the list as it stands (at first the answer's sentences), so the
    creation stops at a fixed point where it can; every nugget is vital; the assignment ends it."""
    from ragscale.judges.nuggets import BATCH, NO_INFO
    from ragscale.metrics.nuggets import IMPORTANCES
    from ragscale.metrics.trec import answer_text

    fan_outs = [fan for fan, _, _ in t.answers]
    kind = _field(prompt) or ("nuggets" if item is None else "" if any(fan_outs) else "importance")
    created = [_listed(v) for fan, name, v in t.answers if (name or ("nuggets" if not fan else "")) == "nuggets"]
    if kind == "nuggets":
        if created:
            return _answer(prompt, "nuggets", created[-1])
        return _answer(prompt, "nuggets", sentences(answer_text(t.row.get("prediction") or "")) or [NO_INFO])
    if kind == "importance":  # batch `item` of the created nuggets
        nuggets = created[-1] if created else []
        batch = nuggets if item is None else nuggets[item * BATCH:(item + 1) * BATCH]
        return _answer(prompt, "importance", [IMPORTANCES[0]] * len(batch))
    return None


# judge name -> the synthetic output of a step whose output is not generated yet (None: the judge's
# run ends there); the output goes through the step's own parser, whatever the protocol
SYNTHETIC: dict[str, Callable[[_Trace, int | None, JudgePrompt], str | None]] = {
    "ragas_faithfulness": _faithfulness, "umbrela": _umbrela, "nuggets": _nuggets,
}


# --------------------------------------------------------------------------------------------
# Token counting
# --------------------------------------------------------------------------------------------


class _Counted(Exception):
    """Raised by the capturing tokenizer: the chat handler's prompt, tokenized, and nothing run."""


class TokenCounter:
    """Prompt tokens of a judge engine's requests (``basis`` says how they are counted)."""

    def __init__(self, engine_kwargs: Mapping[str, Any]):
        self.exact = False
        self.basis = f"estimate, characters / {CHARS_PER_TOKEN} (no local tokenizer)"
        self._count: Callable[[list[dict]], int] = self._estimate
        engine = engine_kwargs.get("engine")
        path = engine_kwargs.get("model_path")
        try:
            if engine == "llama.cpp" and path:
                self._count = self._llama(path)
                self.basis = "its llama.cpp tokenizer and chat template (exact)"
            elif engine == "vllm" and path:
                self._count = self._hf(path)
                self.basis = "its tokenizer and chat template (exact)"
            else:
                return
        except ImportError:
            return
        self.exact = True

    def count(self, messages: list[dict]) -> int:
        return self._count(messages)

    @staticmethod
    def _estimate(messages: list[dict]) -> int:
        return math.ceil(sum(len(str(m.get("content") or "")) for m in messages) / CHARS_PER_TOKEN)

    @staticmethod
    def _llama(path: str) -> Callable[[list[dict]], int]:
        """llama-cpp-python's own chat completion on a vocabulary-only model, stopped where its chat
        handler tokenizes the templated prompt: the count the run's usage reports."""
        from llama_cpp import Llama

        from ragscale.pipeline.execute import native_stderr_to

        # llama.cpp's notice on a context without weights goes to fd 2 or, through llama-cpp-python's
        # log callback, to sys.stderr: neither is shown
        with native_stderr_to(os.devnull), contextlib.redirect_stderr(io.StringIO()):
            llm = Llama(model_path=path, vocab_only=True, verbose=False)
        tokenize = llm.tokenize

        def capture(text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
            raise _Counted(len(tokenize(text, add_bos=add_bos, special=special)))

        llm.tokenize = capture  # type: ignore[method-assign]

        def count(messages: list[dict]) -> int:
            try:
                llm.create_chat_completion(messages=messages, max_tokens=1)  # type: ignore[arg-type]
            except _Counted as c:
                return int(c.args[0])
            raise RuntimeError("llama.cpp's chat handler did not tokenize the prompt")

        return count

    @staticmethod
    def _hf(path: str) -> Callable[[list[dict]], int]:
        """The model folder's chat template (with the generation prompt) and tokenizer, as vLLM's chat."""
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)

        def count(messages: list[dict]) -> int:
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return len(tok(text, add_special_tokens=False)["input_ids"])

        return count


# --------------------------------------------------------------------------------------------
# The judge actor with a recorder for an engine
# --------------------------------------------------------------------------------------------


class _Recorder:
    """The engine of the dry run's actor: records each prompt the actor would send, answers
    ``NOT_GENERATED``. Same ``name`` and ``model`` as the engine the run builds."""

    def __init__(self, engine_kwargs: Mapping[str, Any]):
        from ragscale.actors.engines import model_name

        self.name = str(engine_kwargs["engine"])
        self.model = model_name(engine_kwargs)
        self.counter = TokenCounter(engine_kwargs)
        self.origin: dict[int, tuple[_Trace, int, bool]] = {}  # id(prompt) -> (trace, round, estimated)
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
            row = trace.row
            self.pending.append({
                "judge": p.judge, "record": {"key": row.get("key"), "task_id": row.get("task_id"),
                                             "model_id": row.get("model_id")},
                "round": rnd, "attempt": self.attempt, "version": p.version, "messages": messages,
                "sampling": {"temperature": temperature, "seed": seed, "params": dict(p.params),
                             "max_tokens": p.max_tokens},
                "schema": p.schema,
                "cache_key": cache_key(self.name, self.model, p, {"temperature": temperature, "seed": seed}),
                "estimated": estimated, "prompt_tokens": tokens,
                "expected_completion_tokens": min(p.max_tokens,
                                                  COMPLETION_TOKENS.get(p.judge, DEFAULT_COMPLETION_TOKENS)),
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


class _DryActor(JudgeActor):
    """``JudgeActor`` whose engine is a ``_Recorder`` and whose cache a ``_CacheView``; judges are
    traced (prompt origins, synthetic answers). A batch's records are kept only once it succeeded,
    as the pipeline keeps a batch's counters (ragscale.pipeline.stage.process_rows)."""

    def make_engine(self, kwargs: Mapping[str, Any]) -> Any:
        return _Recorder(kwargs)  # never the engine itself

    @classmethod
    def create(cls, kwargs: Mapping[str, Any]) -> _DryActor:
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
        actor._traces = {}  # (id(row), judge) -> _Trace, of the batch
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

    def _start(self, spec: Any, obj: dict, row: dict, **options: Any) -> Any:
        # a judge reading an earlier judge's results (nuggets after UMBRELA) is estimated when those were
        after = [self._traces.get((id(row), a)) for a in spec.after]
        trace = _Trace(spec.name, row, estimated=any(t is not None and t.estimated for t in after))
        self._traces[(id(row), spec.name)] = trace
        return self._traced(trace, spec.start(obj, row, **options))

    def _traced(self, t: _Trace, run: Any) -> Any:
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
                t.answers.append((isinstance(step, list), _field(first) if first is not None else None, value))
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

    def _tag(self, t: _Trace, step: Any) -> Any:
        if isinstance(step, list):
            return [self._tag_one(t, p, parse, i) for i, (p, parse) in enumerate(step)]
        return self._tag_one(t, step[0], step[1], None)

    def _tag_one(self, t: _Trace, prompt: JudgePrompt, parse: Callable[[str], Any], item: int | None) -> tuple:
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

    def _generate(self, prompts: list[JudgePrompt], attempt: int, stats: Any) -> list[tuple[str, str | None]]:
        self.recorder.attempt = attempt
        out = super()._generate(prompts, attempt, stats)
        found = self.cache.found if self.cache is not None else {}
        for p in prompts:
            key = cache_key(self.engine_name, self.model_name, p, reask_sampling(p, attempt))
            trace, rnd, estimated = self.recorder.origin[id(p)]
            hit = found.get(key)
            if hit is not None and isinstance(hit[1].get("completion_tokens"), (int, float)):
                self._usage.append((p.judge, float(hit[1]["completion_tokens"])))
            if self.lookups is not None:
                self._lookups.append({"judge": p.judge, "record": trace.row.get("key"), "round": rnd,
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


# --------------------------------------------------------------------------------------------
# The dry run
# --------------------------------------------------------------------------------------------


@dataclass
class JudgeTotals:
    """One judge's (of one judge engine) prompts to send and their tokens."""

    label: str  # the judge's name, ``<judge>@<panel judge>`` on a judge panel
    engine: str
    model: str
    token_basis: str  # how prompt tokens are counted
    exact_tokens: bool
    prompts: int = 0
    estimated: int = 0  # prompts of rounds rendered from synthetic answers
    prompt_tokens: int = 0
    estimated_prompt_tokens: int = 0
    completion_tokens: float = 0.0
    completion_basis: str = "estimate"  # "cache, n outputs" when the judge cache's usage was used
    not_estimated: int = 0  # judge runs whose estimate stopped (a synthetic answer the judge could not use)

    def cost(self, price_in: float, price_out: float) -> float:
        """USD for ``price_in`` / ``price_out`` per million prompt / completion tokens."""
        return cost(self.prompt_tokens, self.completion_tokens, price_in, price_out)


def cost(prompt_tokens: float, completion_tokens: float, price_in: float, price_out: float) -> float:
    """USD of ``prompt_tokens`` and ``completion_tokens`` at prices per million tokens."""
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1e6


@dataclass
class DryRun:
    """What ``dry_run`` found: per judge totals (in the order of the judge stages), the simulated
    ``judge_work`` (run.json's counters as the actor would count them), the records read, and
    every prompt asked when ``keep_lookups`` (its cache key, round, attempt, whether cached)."""

    judges: list[JudgeTotals]
    work: dict
    records: int
    lookups: list[dict] | None = None
    cache_paths: list[str] = field(default_factory=list)

    @property
    def prompts(self) -> int:
        return sum(j.prompts for j in self.judges)


class DryJudges:
    """The judge stages of a run (their ``JudgeActor`` kwargs, as ``plan_judges`` makes them), dry:
    ``process`` takes a batch of pipeline rows through each stage in order, as the pipeline does,
    and writes the prompts they would send to ``out``; ``result`` totals them."""

    def __init__(self, judge_kwargs: Sequence[Mapping[str, Any]], out: IO[str], keep_lookups: bool = False):
        self.out = out
        self.actors = [_DryActor.create(kw) for kw in judge_kwargs]
        self.totals: dict[str, JudgeTotals] = {}
        self.stats: dict[str, float] = {}
        for actor in self.actors:
            actor.lookups = [] if keep_lookups else None
            for name in actor.judge_names:
                self.totals[actor.label(name)] = JudgeTotals(
                    actor.label(name), actor.engine_name, actor.model_name, actor.recorder.counter.basis,
                    actor.recorder.counter.exact)

    def process(self, rows: list[dict]) -> None:
        from ragscale.pipeline.stage import process_rows, sum_stats

        for actor in self.actors:
            process_rows(actor, "judge", rows)  # the pipeline's per-record failure isolation
            for line in actor.sent:
                if actor.tag:
                    line["panel_judge"] = actor.tag
                t = self.totals[actor.label(line["judge"])]
                t.prompts += 1
                t.prompt_tokens += line["prompt_tokens"]
                t.completion_tokens += line["expected_completion_tokens"]
                if line["estimated"]:
                    t.estimated += 1
                    t.estimated_prompt_tokens += line["prompt_tokens"]
                self.out.write(json.dumps(line, ensure_ascii=False) + "\n")
            actor.sent = []
        sum_stats(rows, self.stats)

    def result(self, records: int) -> DryRun:
        """The totals; a judge that met outputs of its own in the judge cache expects completions
        of their mean length."""
        from ragscale.provenance import judge_work

        for actor in self.actors:
            for judge, values in actor.cached_usage.items():
                t = self.totals[actor.label(judge)]
                t.completion_tokens = t.prompts * sum(values) / len(values)
                t.completion_basis = f"cache, {len(values)} outputs"
            for judge, n in actor.failed_estimates.items():
                self.totals[actor.label(judge)].not_estimated = n
            if actor.cache is not None and actor.cache.disk is not None:
                actor.cache.disk.close()
        kept = all(a.lookups is not None for a in self.actors)
        lookups = [x for a in self.actors for x in a.lookups] if kept else None
        return DryRun(list(self.totals.values()), judge_work(self.stats) or {}, records, lookups,
                      [a.cache_path for a in self.actors if a.cache_path])


def dry_run(cfg: Any, out: IO[str], keep_lookups: bool = False) -> DryRun:
    """Write the prompts the run of ``cfg`` would send to ``out`` (JSONL, one per line) and return
    the totals. Every problem of the config or inputs is a one-line UserError, as for the run."""
    from ragscale.pipeline.graph import build_stages
    from ragscale.pipeline.stages import load_and_lexical, pointer_table
    from ragscale.plan import plan_run
    from ragscale.runner import scan_records

    plan = plan_run(cfg)
    stages = [st for st in build_stages(plan) if st.name == "judge"]
    judges = DryJudges([st.kwargs for st in stages], out, keep_lookups)
    with tempfile.TemporaryDirectory(prefix="ragscale-prompts-") as tmp:
        plan, pointers, _, _ = scan_records(cfg, plan, tmp)  # the run's records, in its order (CSV inputs normalized in tmp)
        if stages:
            size = int(stages[0].pool.get("batch_size", stages[0].batch_size))  # the judge pool's batches
            for i in range(0, len(pointers), size):
                judges.process(load_and_lexical(pointer_table(pointers[i:i + size]), files=list(plan.files),
                                                metrics=list(plan.metrics), expectations=plan.expectations).to_pylist())
    return judges.result(len(pointers))


def format_table(result: DryRun, price_in: float | None = None, price_out: float | None = None) -> list[str]:
    """The per-judge table: prompts to send (estimated ones among them), prompt tokens, expected
    completion tokens, and the cost when prices are given; then what the marks mean."""
    priced = price_in is not None and price_out is not None

    def usd(prompt_tokens: float, completion_tokens: float) -> list[str]:
        if not priced:
            return []
        return [f"{cost(prompt_tokens, completion_tokens, price_in, price_out):.4f}"]  # type: ignore[arg-type]

    head = ["judge", "engine", "prompts", "estimated", "prompt tokens", "completion tokens", *(["cost USD"] * priced)]
    rows = [[j.label, j.engine, f"{j.prompts:,}", f"{j.estimated:,}",
             f"{j.prompt_tokens:,}" + ("" if j.exact_tokens else " (estimate)"),
             f"{round(j.completion_tokens):,} ({j.completion_basis})", *usd(j.prompt_tokens, j.completion_tokens)]
            for j in result.judges]
    pt = sum(j.prompt_tokens for j in result.judges)
    ct = sum(j.completion_tokens for j in result.judges)
    rows.append(["total", "", f"{result.prompts:,}", f"{sum(j.estimated for j in result.judges):,}", f"{pt:,}",
                 f"{round(ct):,}", *usd(pt, ct)])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in [head, *rows]]
    for basis in dict.fromkeys(f"{j.model} ({j.engine}): {j.token_basis}" for j in result.judges):
        lines.append(f"[ragscale] prompt tokens of {basis}")
    if any(j.estimated for j in result.judges):
        lines.append("[ragscale] estimated: prompts of rounds that need outputs not generated yet, rendered from "
                     "synthetic answers (docs/prompts.md); their count and tokens are estimates")
    stopped = [f"{j.label} ({j.not_estimated})" for j in result.judges if j.not_estimated]
    if stopped:
        lines.append(f"[ragscale] later rounds not estimated for some records: {', '.join(stopped)}")
    lines.append("[ragscale] completion tokens: 'cache' = the mean of the judge's outputs in the judge cache; "
                 "'estimate' = docs/prompts.md's per-judge figure")
    if priced:
        lines.append(f"[ragscale] cost at {price_in} / {price_out} USD per million prompt / completion tokens")
    return lines


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="ragscale prompts",
                      description="Dry run: write every prompt a run would send to its judge engine (after the judge "
                                  "cache) as JSONL, and print per judge the prompts, tokens and cost. No engine is "
                                  "loaded, no Ray started.")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides, as for ragscale run")
    p.add_argument("--out", default="prompts.jsonl", metavar="FILE", help="the JSONL file to write (default prompts.jsonl)")
    p.add_argument("--price-in", type=float, default=None, metavar="USD", help="USD per million prompt tokens")
    p.add_argument("--price-out", type=float, default=None, metavar="USD", help="USD per million completion tokens")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``ragscale prompts`` / ``python -m ragscale.prompts``: 0 done, 2 bad config or input."""
    args = build_parser().parse_intermixed_args(argv)
    prog = "ragscale prompts"
    try:
        if (args.price_in is None) != (args.price_out is None):
            raise UserError("--price-in and --price-out go together (USD per million prompt and completion tokens)")
        for name in ("price_in", "price_out"):
            value = getattr(args, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise UserError(f"--{name.replace('_', '-')} must be a number >= 0, got {value}")
        from ragscale.cli import check_overrides
        from ragscale.plan import compose

        check_overrides(args.overrides)  # secrets refused, a bad override is one line
        cfg = compose(list(args.overrides))
        path = os.path.abspath(args.out)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                result = dry_run(cfg, fh)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    print(f"[ragscale] {result.records} records; judge cache: {', '.join(result.cache_paths) or 'none'}")
    if not result.judges:
        print("[ragscale] this configuration runs no LLM judge: no prompts to send")
    else:
        print("\n".join(format_table(result, args.price_in, args.price_out)))
    print(f"[ragscale] open the prompts: {path} ({result.prompts} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
