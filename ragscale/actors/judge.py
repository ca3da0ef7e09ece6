"""Judge actor: an LLM engine (actors/engines/) driven by the judges of ragscale.judges.

Engines take a batch of ``JudgePrompt``s (chat messages + JSON schema) and return texts;
judges are generators of (prompt, parse) steps (ragscale/judges/base.py). The actor
advances every (record, judge) of its batch together, one engine call per round, so a
multi-round judge (RAGAS faithfulness: statements, then verdicts) is batched across
records too.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping, Sequence


from ragscale.actors.engines import build
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
                         "cache_path": os.path.abspath(c["cache_path"]) if c["cache_path"] else None,
                         "max_retries": c["max_retries"], "protocol": _protocol(c, f"judge_panel[{c['name']}]")}
                        for c in panel]
    j = OmegaConf.to_container(cfg.judge, resolve=True)
    kwargs: dict[str, Any] = {
        "engine": resolve_engine(j, pool),
        "judges": [n for n in judged if n not in on_panel],
        "cache_path": os.path.abspath(j["cache_path"]) if j["cache_path"] else None,
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


class JudgeActor:
    """Ray Data actor: runs the enabled judges over a batch of records.

    Every prompt is looked up in the on-disk cache first; the missing ones of a round are
    generated in one engine call. A parse failure is re-asked a bounded number of times
    with sampling (temperature 0.7, new seed); if it still fails, or the engine reports an
    error for the prompt, the metric is ``null`` and the record's ``judge_errors`` keeps
    the reason and the raw text. A metric that is undefined for a record (e.g. RL_F with
    no passages) is ``null`` with its reason in ``judge_errors`` marked ``undefined``.
    ``tag`` (judge panels) writes metrics as ``<metric>@<tag>``. ``options`` (judge name ->
    keyword arguments) configures a judge's start, e.g. the taxonomy's top-K. ``protocol``
    (``constrained`` | ``reference``) chooses how the judges that have a reference protocol
    render and parse (ragscale/judges/base.py ``PROTOCOLS``).

    ``progress`` (set by the pipeline) is called as ``progress(key, done=, total=, label=)``
    while a batch is judged: each round's prompts (``round <n>``, labelled with its judges),
    known when the round starts and done as the engine finishes them (cache hits at once).
    """

    progress: Callable[..., None] | None = None

    def __init__(self, engine: Mapping[str, Any], judges: Sequence[str], cache_path: str | None,
                 max_retries: int = 1, tag: str | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
                 protocol: str = "constrained"):
        self.engine = self.make_engine(engine)
        self.engine_name = self.engine.name
        self.model_name = self.engine.model
        self.judges = [JUDGES[j] for j in judges]
        self.phases = judge_phases(self.judges)
        self.max_retries = int(max_retries)
        self.tag = tag
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        for spec in self.judges:  # the protocol and the judge model's name (UMBRELA picks its prompt by it)
            self.options.setdefault(spec.name, {}).update(spec.options(protocol, self.model_name))
        self._round, self._round_key = 0, "round 0"
        self.cache = None
        if cache_path:
            from ragscale.judges.cache import JudgeCache

            self.cache = JudgeCache(cache_path)

    def make_engine(self, kwargs: Mapping[str, Any]) -> Any:
        """The engine of ``kwargs`` (``resolve``'s output); the dry run (ragscale.prompts) records instead."""
        return build(kwargs)

    def _generate(self, prompts: list[JudgePrompt], attempt: int, stats: _Stats) -> list[tuple[str, str | None]]:
        """(text, engine error) per prompt, from the cache or one engine call per sampling
        setting (greedy, or a prompt's own ``sampling`` on its first attempt). Prompts with
        the same cache key in one round (e.g. a sweep's identical responses to a task) are
        generated once and share the text (``dedup_hits``): engines need not give identical
        outputs to identical prompts in one batch, and the cache keeps one text per key."""
        samplings = [reask_sampling(p, attempt) for p in prompts]
        keys = [cache_key(self.engine_name, self.model_name, p, s) for p, s in zip(prompts, samplings)]
        cached = self.cache.get_many(keys) if self.cache else {}
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
                groups.setdefault(tuple(sorted(samplings[i].items())), []).append(i)
        self._tick(done=len(prompts) - len(copies) - sum(len(t) for t in groups.values()))
        for sampling, todo in groups.items():
            gens = self.engine.generate([prompts[i] for i in todo], **dict(sampling), on_done=self._done)
            for k, v in (getattr(self.engine, "last_stats", None) or {}).items():  # e.g. HTTP retries
                if isinstance(v, (int, float)) and v:
                    name = "judge_" + (k if k.startswith("http_") else f"http_{k}")  # run.json: http_retries
                    stats.d[name] = stats.d.get(name, 0) + v
            fresh = []
            for i, g in zip(todo, gens):
                j = prompts[i].judge
                out[i] = (g.text, g.error)
                if g.error:
                    stats.add(j, "engine_errors")
                    continue
                stats.add(j, "generations")
                stats.add(j, "prompt_tokens", g.prompt_tokens)
                stats.add(j, "completion_tokens", g.completion_tokens)
                fresh.append((keys[i], g.text, {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens}))
            if self.cache and fresh:
                self.cache.put_many(fresh)
        for i, j in copies:
            out[i] = out[j]
        self._tick(done=len(copies))
        return [out[i] for i in range(len(prompts))]

    def _tick(self, done: int = 0, total: int = 0, label: str | None = None) -> None:
        """Report the current round's prompts to the pipeline's progress (when it listens)."""
        if self.progress is not None and (done or total or label):
            self.progress(self._round_key, done=done, total=total, label=label)

    def _done(self, n: int = 1) -> None:
        """The engines' callback: ``n`` more prompts of the current call finished."""
        self._tick(done=n)

    def _ask(self, steps: list[tuple[JudgePrompt, Any]], stats: _Stats) -> list[tuple[bool, Any, str]]:
        """One round: (ok, parsed value | failure reason, raw text) per step, with bounded re-asks."""
        results: dict[int, tuple[bool, Any, str]] = {}
        pending = list(range(len(steps)))
        for i in pending:
            stats.add(steps[i][0].judge, "prompts")
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            if attempt:
                for i in pending:
                    stats.add(steps[i][0].judge, "retries")
            texts = self._generate([steps[i][0] for i in pending], attempt, stats)
            still = []
            for i, (text, error) in zip(pending, texts):
                if error:
                    results[i] = (False, f"engine error: {error}", text)
                    continue  # the engine already retried; a sampled re-ask would not help
                try:
                    results[i] = (True, steps[i][1](text), text)
                except JudgeParseError as e:
                    results[i] = (False, e.reason, text)
                    still.append(i)
            pending = still
        for i, (ok, reason, _) in results.items():
            if not ok and not str(reason).startswith("engine error"):
                stats.add(steps[i][0].judge, "parse_failures")
        return [results[i] for i in range(len(steps))]

    def _judge(self, rows: list[dict], stats: _Stats) -> None:
        """Run the judges phase by phase: a judge that needs another's metrics (``after``,
        e.g. nuggets after UMBRELA) starts once that judge's results are in the rows."""
        self._round = 0
        for phase in self.phases:
            self._judge_phase(rows, phase, stats)

    def _judge_phase(self, rows: list[dict], specs: Sequence[JudgeSpec], stats: _Stats) -> None:
        runs: dict[tuple[int, str], Any] = {}  # (row index, judge name) -> generator
        current: dict[tuple[int, str], Any] = {}  # key -> its pending step, or fan-out list of steps
        final: dict[tuple[int, str], tuple[Any, dict | None]] = {}
        item_errors: dict[tuple[int, str], list[dict]] = {}
        for r, row in enumerate(rows):
            obj = input_view(row)
            for spec in specs:
                key = (r, spec.name)
                runs[key] = spec.start(obj, row, **self.options.get(spec.name, {}))
                self._advance(key, runs, current, final, None, first=True)
        while current:
            self._round += 1
            self._round_key = f"round {self._round}"
            self._tick(label="(" + ", ".join(sorted({k[1] for k in current})) + ")")
            flat: list[tuple[tuple[int, str], int | None]] = []  # (key, item index in a fan-out | None)
            steps = []
            for key, step in current.items():
                if isinstance(step, list):
                    for i, s in enumerate(step):
                        flat.append((key, i))
                        steps.append(s)
                else:
                    flat.append((key, None))
                    steps.append(step)
            answers = self._ask(steps, stats)
            fan: dict[tuple[int, str], list[Any]] = {k: [None] * len(v) for k, v in current.items() if isinstance(v, list)}
            failed: set[tuple[int, str]] = set()
            for (key, i), (ok, value, raw) in zip(flat, answers):
                if i is None:
                    if not ok:
                        runs[key].close()
                        final[key] = (None, {"judge": key[1], "reason": value, "raw": raw})
                        failed.add(key)
                elif ok:
                    fan[key][i] = value
                else:
                    fan[key][i] = Failed(value, raw)
                    item_errors.setdefault(key, []).append({"judge": key[1], "item": i, "reason": value, "raw": raw})
            current = {}
            for (key, i), (ok, value, _) in zip(flat, answers):
                if i is None and key not in failed:
                    self._advance(key, runs, current, final, value)
            for key, values in fan.items():
                self._advance(key, runs, current, final, values)
        for (r, name), (result, err) in final.items():
            self._write(rows[r], JUDGES[name], result, [*item_errors.get((r, name), []), *([err] if err else [])])

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

    @staticmethod
    def _advance(key, runs, current, final, value, first: bool = False) -> None:  # noqa: ANN001
        """Send ``value`` to the judge run and store its next step, or its result when done
        (empty fan-out rounds are answered at once)."""
        try:
            step = next(runs[key]) if first else runs[key].send(value)
            while isinstance(step, list) and not step:
                step = runs[key].send([])
        except StopIteration as stop:
            result = stop.value
            if isinstance(result, Undefined):
                final[key] = (None, {"judge": key[1], "reason": result.reason, "undefined": True})
            else:
                final[key] = (result, None)
            return
        current[key] = step

    def process(self, rows: list[dict]) -> dict[str, float]:
        """Judge ``rows`` in place; returns the judge counters (prompts, cache hits, tokens, ...)."""
        stats = _Stats()
        self._judge(rows, stats)
        return stats.d
