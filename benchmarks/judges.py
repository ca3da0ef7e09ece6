#!/usr/bin/env python
"""Judge benchmark: ragscale's judge actor against MT-RAG's way, same engine, model and prompts.

MT-RAG's scripts run one judge at a time over the records, one prompt at a time, in
input order (``judge_wrapper``: a loop over formatted prompts; RAGAS with
``max_workers=1``). ragscale's judge actor takes a batch of records, renders every
judge's prompts, and hands each round to the engine in one call (llama.cpp: prefix-sorted
with a RAM cache of prompt states; vLLM: one continuous batch; OpenAI-compatible:
concurrent requests). Both sides use a fresh engine and no on-disk judge cache, and run
the same judges (IDK, RAGAS faithfulness's two rounds, RADBench; optionally ragas' context
precision and recall, ``--judges ragas_context_precision ragas_context_recall``) on the same
records.

    .venv/bin/python benchmarks/judges.py [--records 12] [--judge local] [--out FILE.json]
    .venv-vllm/bin/python benchmarks/judges.py --judge vllm-cpu       # scripts/setup_vllm.sh

``--judge`` names a conf/judge/*.yaml; ``--set key=value`` overrides its fields (Hydra syntax,
e.g. ``--set judge.options.base_url=http://127.0.0.1:8000/v1``). Output: JSON with both
wall times, the speed-up, generated tokens, and how many parsed scores agree.

The same run then measures the engine's own ceiling on exactly the prompts the judge actor
sent: the actor's engine is wrapped (``RecordingEngine``) to record each ``generate`` call's
prompts and sampling and the time spent inside it, without changing what it does; then a
fresh engine generates ALL the recorded prompts in one offline ``generate`` call per
sampling setting (no rounds, no barriers between them; later rounds' prompts depended on
earlier outputs, which does not matter when replaying them). The fields this adds:

- ``ragscale_judge_actor.tok_per_s``: (prompt + completion tokens) / the judge stage's wall time.
- ``ragscale_judge_actor.streaming``, ``batches_in_flight``: whether the engine streams
  (``submit``: vLLM), and the batches the actor works on at once from threads, as Ray Data
  calls a threaded judge actor (``cluster.judge.batches_in_flight``; ``--batch-size`` sets the
  records per batch); ``engine_steps``: vLLM's engine steps while streaming.
- ``ragscale_judge_actor.engine_generate_calls``: the engine calls the actor made (rounds x
  sampling settings; streaming: one per prompt submitted).
- ``ragscale_judge_actor.engine_busy_s``: the time spent inside ``engine.generate`` (streaming:
  inside vLLM's engine steps).
- ``ragscale_judge_actor.engine_idle_s`` and ``engine_idle_fraction``: wall time - busy time,
  and that over the wall time: the share of the judge stage the engine sat idle (prompt
  rendering, parsing, Arrow, barriers).
- ``engine_ceiling``: ``engine_load_s`` (the fresh engine's load), ``wall_s`` (all replay
  calls), ``generate_calls`` (= sampling settings), ``prompts`` (= the actor's engine
  prompts), ``generations``, ``prompt_tokens``, ``completion_tokens``, ``tok_per_s``
  ((prompt + completion) / ``wall_s``), ``completion_tok_per_s``.
- ``engine_options``: the engine's numeric and on/off settings (llama.cpp: ``flash_attn``,
  ``n_threads``, ...; for llama.cpp also ``cpu_features``, the instruction sets of its build);
  ``actor_scores``: the judge actor's score per ``record/judge``, to compare two settings' outputs.
- ``judge_fraction_of_ceiling``: the judge stage's throughput as a fraction of the ceiling;
  the prompts are the same, so it is ``engine_ceiling.wall_s / ragscale_judge_actor.wall_s``
  (1.0: the actor drives the engine at its limit).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from typing import Any, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, judge_cli, judge_engine  # noqa: E402

JUDGE_NAMES = ["idk", "ragas_faithfulness", "radbench"]
MORE_JUDGES = ["ragas_context_precision", "ragas_context_recall", "ragas_answer_relevancy"]


def load_rows(path: str, n: int) -> list[dict]:
    from ragscale.io.inputs import resolve_inputs, scan
    from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
    from ragscale.pipeline.stage import to_rows

    files = resolve_inputs(path)
    rows = load_and_lexical(pointer_table(list(scan(files, with_tasks=False))[:n]), files=files, metrics=["Recall"])
    return [r for r in to_rows(rows) if not r["error"]]


def mtrag_way(engine, rows: list[dict], judges: list[str]) -> tuple[dict, dict]:
    """One judge after another, one prompt at a time, in input order; greedy, no retries."""
    from ragscale.judges import JUDGES
    from ragscale.judges.base import JudgeParseError, JudgeResult, Undefined, drive
    from ragscale.judges.judge_input import judge_input

    scores, tokens = {}, {"generations": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def ask(prompt):  # noqa: ANN001, ANN202 - one engine call for one prompt
        sampling = {"temperature": prompt.sampling[0], "seed": prompt.sampling[1]} if prompt.sampling else {}
        g = engine.generate([prompt], **sampling)[0]
        tokens["generations"] += 1
        tokens["prompt_tokens"] += g.prompt_tokens
        tokens["completion_tokens"] += g.completion_tokens
        return g.text

    for name in judges:
        for i, row in enumerate(rows):
            try:  # fan-out rounds are asked one prompt after another, as ragas does
                result = drive(JUDGES[name].start(judge_input(row)), ask)
            except JudgeParseError:
                result = None
            if isinstance(result, Undefined):
                result = None
            elif isinstance(result, JudgeResult):
                result = result.metrics.get(JUDGES[name].metric)
            scores[(i, name)] = result
    return scores, tokens


def ragscale_way(actor, rows: list[dict], batch_size: int, in_flight: int = 1) -> tuple[dict, dict]:
    """The judge actor (one pool member) over the records in pipeline-sized batches, ``in_flight``
    of them at once from threads, as Ray Data calls a threaded actor (cluster.judge.batches_in_flight)."""
    from concurrent.futures import ThreadPoolExecutor

    from ragscale.judges import JUDGES
    from ragscale.pipeline.stage import process_table, to_rows, to_table
    from ragscale.row import row_schema

    schema = row_schema([*(m for r in rows for m in r["metrics"]), *(m for spec in actor.judges for m in spec.metrics)])

    def one(start: int) -> tuple[int, list[dict]]:
        table = to_table([dict(r, metrics=dict(r["metrics"])) for r in rows[start:start + batch_size]], schema, "bench")
        return start, to_rows(process_table(actor, "judge", table))

    scores, tokens = {}, {"generations": 0, "prompt_tokens": 0, "completion_tokens": 0}
    with ThreadPoolExecutor(max(1, in_flight)) as pool:
        for start, out in pool.map(one, range(0, len(rows), batch_size)):
            stats = json.loads(out[0]["stats"])
            for k in tokens:
                tokens[k] += stats.get(f"judge_{k}", 0)
            for j, r in enumerate(out):
                m = r["metrics"]
                for name in (spec.name for spec in actor.judges):
                    v = m.get(JUDGES[name].metric)
                    scores[(start + j, name)] = v[0] if isinstance(v, list) and v else v
    return scores, tokens


class RecordingEngine:
    """An engine wrapper: each ``generate`` call's prompts and sampling (its keyword arguments
    but ``on_done``) are appended to ``calls`` and the time spent inside it added to ``busy_s``;
    the call itself, its arguments and its result are the engine's, unchanged. An engine that
    streams (``submit``) is wrapped likewise, each submitted prompt a call of its own; its busy
    time is the engine's own (vLLM's ``loop_stats['busy_s']``: seconds inside its engine steps). Any other
    attribute (``name``, ``model``, ``last_stats``) is the engine's."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.calls: list[tuple[list, dict]] = []
        self._busy_s = 0.0
        if callable(getattr(engine, "submit", None)):
            self.submit = self._submit

    @property
    def busy_s(self) -> float:
        loop = getattr(self.engine, "loop_stats", None) or {}
        return self._busy_s + float(loop.get("busy_s", 0.0))

    def _submit(self, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        named = dict(zip(("temperature", "seed"), args))
        self.calls.append(([prompt], {**named, **kwargs}))
        return self.engine.submit(prompt, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["engine"], name)

    def generate(self, prompts: Sequence[Any], *args: Any, **kwargs: Any) -> list:
        named = dict(zip(("temperature", "seed", "on_done"), args))
        sampling = {k: v for k, v in {**named, **kwargs}.items() if k != "on_done"}
        t0 = time.perf_counter()
        try:
            return self.engine.generate(prompts, *args, **kwargs)
        finally:
            self._busy_s += time.perf_counter() - t0
            self.calls.append((list(prompts), sampling))


def replay_groups(calls: Sequence[tuple[Sequence[Any], dict]]) -> list[tuple[dict, list]]:
    """The recorded calls' prompts merged per sampling setting: (sampling, prompts) in order of
    the setting's first call, each group's prompts in call order (none dropped or merged)."""
    groups: dict[tuple, tuple[dict, list]] = {}
    for prompts, sampling in calls:
        key = tuple(sorted(sampling.items()))
        groups.setdefault(key, (dict(sampling), []))[1].extend(prompts)
    return [g for g in groups.values() if g[1]]


def ceiling_figures(judge_s: float, judge_tokens: dict, calls: int, busy_s: float, load_s: float,
                    ceiling_s: float, ceiling_calls: int, prompts: int, ceiling_tokens: dict) -> tuple[dict, dict, float]:
    """(fields added to the judge stage's entry, the ``engine_ceiling`` entry, the judge stage's
    throughput as a fraction of the ceiling). Same prompts on both sides, so the fraction is
    ``ceiling_s / judge_s``; the engine's idle fraction is the judge stage's time outside
    ``engine.generate`` over its wall time. ``*_tokens``: generations, prompt_tokens, completion_tokens."""
    def total(t: dict) -> int:
        return t.get("prompt_tokens", 0) + t.get("completion_tokens", 0)

    judge = {"tok_per_s": round(total(judge_tokens) / max(judge_s, 1e-9), 1), "engine_generate_calls": calls,
             "engine_busy_s": round(busy_s, 2), "engine_idle_s": round(max(judge_s - busy_s, 0.0), 3),
             "engine_idle_fraction": round(max(judge_s - busy_s, 0.0) / max(judge_s, 1e-9), 4)}
    ceiling = {"engine_load_s": round(load_s, 2), "wall_s": round(ceiling_s, 2), "generate_calls": ceiling_calls,
               "prompts": prompts, **ceiling_tokens,
               "tok_per_s": round(total(ceiling_tokens) / max(ceiling_s, 1e-9), 1),
               "completion_tok_per_s": round(ceiling_tokens.get("completion_tokens", 0) / max(ceiling_s, 1e-9), 1)}
    return judge, ceiling, round(ceiling_s / max(judge_s, 1e-9), 3)


def engine_ceiling(kwargs: dict, calls: Sequence[tuple[Sequence[Any], dict]]) -> tuple[float, float, int, int, dict]:
    """A fresh engine generates every recorded prompt, one call per sampling setting:
    (load seconds, generate seconds, calls, prompts, token counts)."""
    from ragscale.actors.engines import build

    groups = replay_groups(calls)
    t0 = time.perf_counter()
    engine = build(kwargs)
    load_s = time.perf_counter() - t0
    tokens = {"generations": 0, "prompt_tokens": 0, "completion_tokens": 0}
    t0 = time.perf_counter()
    for sampling, prompts in groups:
        for g in engine.generate(prompts, **sampling):
            if g.error:
                continue
            tokens["generations"] += 1
            tokens["prompt_tokens"] += g.prompt_tokens
            tokens["completion_tokens"] += g.completion_tokens
    wall_s = time.perf_counter() - t0
    del engine
    gc.collect()
    return load_s, wall_s, len(groups), sum(len(p) for _, p in groups), tokens


def engine_options(kwargs: dict) -> dict:
    """The engine's numeric and on/off settings (``options`` resolved; no strings: no URL or
    path lands in the JSON), and for llama.cpp the instruction sets its build uses: what a
    figure depends on besides the model and the prompts."""
    out = {k: v for k, v in sorted(kwargs.items()) if isinstance(v, (bool, int, float))}
    if kwargs["engine"] == "llama.cpp":
        import llama_cpp

        out["cpu_features"] = llama_cpp.llama_print_system_info().decode().strip()
    return out


def main() -> None:
    ap, args = judge_cli(__doc__, os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl"), 12, JUDGE_NAMES,
                         MORE_JUDGES, rounds=True)

    from ragscale.actors.engines import build, streams

    cfg, kwargs = judge_engine("mtrag", args)
    rows = load_rows(args.input, args.records)

    t0 = time.perf_counter()
    engine = build(kwargs)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    base_scores, base_tokens = mtrag_way(engine, rows, args.judges)
    base_s = time.perf_counter() - t0
    del engine

    from omegaconf import OmegaConf

    from ragscale.actors.judge import JudgeActor
    from ragscale.actors.judge_plan import batches_in_flight

    gc.collect()
    # no disk cache, no re-asks; --rounds: the round path even for an engine that streams
    actor = JudgeActor(kwargs, args.judges, cache_path=None, max_retries=0, streaming=not args.rounds)
    recorder = actor.engine = RecordingEngine(actor.engine)  # the prompts it sends, the time inside generate
    in_flight = 1 if args.rounds else batches_in_flight(kwargs, OmegaConf.to_container(cfg.cluster.judge, resolve=True))
    t0 = time.perf_counter()
    ours_scores, ours_tokens = ragscale_way(actor, rows, args.batch_size, in_flight)
    ours_s = time.perf_counter() - t0
    calls, busy_s = recorder.calls, recorder.busy_s
    loop_stats = dict(getattr(recorder.engine, "loop_stats", None) or {})
    recorder.engine = None  # free the actor's engine before the ceiling's fresh one loads
    del actor, recorder
    gc.collect()

    c_load_s, c_s, c_calls, c_prompts, c_tokens = engine_ceiling(kwargs, calls)
    judge_more, ceiling, fraction = ceiling_figures(ours_s, ours_tokens, len(calls), busy_s, c_load_s, c_s, c_calls,
                                                    c_prompts, c_tokens)

    agree = sum(1 for k in base_scores if base_scores[k] == ours_scores.get(k))
    emit(
        {
            "benchmark": "judges",
            "engine": kwargs["engine"],
            "model": cfg.judge.model,
            "engine_options": engine_options(kwargs),
            "records": len(rows),
            "judges": args.judges,
            "engine_load_s": round(load_s, 2),
            "mtrag_sequential": {"wall_s": round(base_s, 2), **base_tokens,
                                 "completion_tok_per_s": round(base_tokens["completion_tokens"] / base_s, 1)},
            "ragscale_judge_actor": {"wall_s": round(ours_s, 2), **ours_tokens,
                                     "completion_tok_per_s": round(ours_tokens["completion_tokens"] / max(ours_s, 1e-9), 1),
                                     "streaming": streams(kwargs) and not args.rounds, "batches_in_flight": in_flight,
                                     **({"engine_steps": int(loop_stats["steps"])} if "steps" in loop_stats else {}),
                                     **judge_more},
            "speedup": round(base_s / max(ours_s, 1e-9), 2),
            "scores_compared": len(base_scores),
            "scores_equal": agree,
            "actor_scores": {f"{i}/{name}": v for (i, name), v in sorted(ours_scores.items())},
            "engine_ceiling": ceiling,
            "judge_fraction_of_ceiling": fraction,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
