#!/usr/bin/env python
"""TREC judge benchmark: ragscale's judge actor against open-rag-eval's pattern, same engine,
model and prompts.

open-rag-eval's TRECEvaluator takes one query at a time and, inside it, runs UMBRELA over
the passages, then AutoNuggetizer (creation iterations, importance batches, assignment
batches), the citation judgements and the no-answer check, each LLM call waiting for the
previous one. ragscale's judge actor takes a batch of queries and sends every round of
every judge across all of them to the engine in one call (UMBRELA's passages, citation
pairs and nugget batches are fan-out rounds; nuggets start once the batch's UMBRELA grades
are in). Both sides use a fresh engine, no on-disk judge cache and no re-asks, so every
score must agree with a deterministic engine (llama.cpp); vLLM's batched kernels may flip a
greedy token of a small model, so the output lists the values that differ. It counts judge
calls and wall time per query.

    .venv/bin/python benchmarks/trec.py [--records 6] [--judge local] [--judges umbrela citation no_answer]
    .venv-vllm/bin/python benchmarks/trec.py --judge vllm-cpu          # scripts/setup_vllm.sh

Output: JSON (stdout and ``--out``): per side wall time, engine calls, generations and
tokens, per-query figures, the speed-up and how many metric values agree.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, judge_cli, judge_engine  # noqa: E402

JUDGE_NAMES = ["umbrela", "nuggets", "citation", "no_answer"]


def load_rows(path: str, n: int) -> list[dict]:
    """The first ``n`` valid records of an open-rag-eval CSV (or MT-RAG JSONL) as pipeline rows."""
    from ragscale.io.inputs import materialize_csv, resolve_inputs, scan
    from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
    from ragscale.pipeline.stage import to_rows

    files = materialize_csv(resolve_inputs(path), tempfile.mkdtemp(prefix="ragscale-bench-"))
    table = load_and_lexical(pointer_table(list(scan(files, with_tasks=False))), files=files, metrics=["umbrela_mean"])
    return [r for r in to_rows(table) if not r["error"] and r["prediction"]][:n]


class CountingEngine:
    """The engine, one prompt per call (open-rag-eval's pattern), with call and token counts."""

    def __init__(self, engine) -> None:  # noqa: ANN001
        self.engine = engine
        self.counts = {"engine_calls": 0, "generations": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def __call__(self, prompt) -> str:  # noqa: ANN001
        g = self.engine.generate([prompt])[0]
        self.counts["engine_calls"] += 1
        self.counts["generations"] += 1
        self.counts["prompt_tokens"] += g.prompt_tokens
        self.counts["completion_tokens"] += g.completion_tokens
        return g.text


def judge_metrics(result, spec) -> dict:  # noqa: ANN001
    """The metric values a judge's result writes into a record (as the judge actor does)."""
    from ragscale.judges.base import JudgeResult

    if isinstance(result, JudgeResult):
        return dict(result.metrics)
    return {m: None for m in spec.metrics}


def orag_way(engine: CountingEngine, rows: list[dict], judges: list[str]) -> tuple[dict, list[float]]:
    """Per query, each judge in turn, each prompt waiting for the previous one."""
    from ragscale.judges import JUDGES
    from ragscale.judges.base import JudgeParseError, drive
    from ragscale.judges.judge_input import judge_input

    values, per_query = {}, []
    for i, row in enumerate(rows):
        t0 = time.perf_counter()
        row = dict(row)
        for name in judges:
            spec = JUDGES[name]
            try:
                result = drive(spec.start(judge_input(row)), engine)
            except JudgeParseError:
                result = None
            m = judge_metrics(result, spec)
            row["metrics"] = {**row["metrics"], **m}  # nuggets read UMBRELA's grades
            values.update({(i, k): v for k, v in m.items()})
        per_query.append(time.perf_counter() - t0)
    return values, per_query


def ragscale_way(actor, rows: list[dict], batch_size: int) -> tuple[dict, dict]:  # noqa: ANN001
    """The judge actor (one pool member) over the records in pipeline-sized batches."""

    from ragscale.pipeline.stage import process_table, to_rows, to_table
    from ragscale.row import row_schema

    values, counts = {}, {"engine_calls": 0, "generations": 0, "prompt_tokens": 0, "completion_tokens": 0}
    calls = 0
    generate = actor.engine.generate

    def counted(prompts, **kw):  # noqa: ANN001, ANN003
        nonlocal calls
        calls += 1
        return generate(prompts, **kw)

    actor.engine.generate = counted
    for start in range(0, len(rows), batch_size):
        batch = [dict(r, metrics=dict(r["metrics"])) for r in rows[start:start + batch_size]]
        schema = row_schema([*(m for r in batch for m in r["metrics"]), *(m for spec in actor.judges for m in spec.metrics)])
        out = to_rows(process_table(actor, "judge", to_table(batch, schema, "bench")))
        stats = json.loads(out[0]["stats"])
        for k in ("generations", "prompt_tokens", "completion_tokens"):
            counts[k] += stats.get(f"judge_{k}", 0)
        for j, r in enumerate(out):
            m = r["metrics"]
            for spec in actor.judges:
                values.update({(start + j, k): m.get(k) for k in spec.metrics})
    counts["engine_calls"] = calls
    return values, counts


def main() -> None:
    ap, args = judge_cli(__doc__, os.path.join(ROOT, "ragscale", "data", "trec_sample.csv"), 6, JUDGE_NAMES)
    if "nuggets" in args.judges and "umbrela" not in args.judges:
        ap.error("nuggets needs umbrela (its passage filter)")

    from ragscale.actors.engines import build

    cfg, kwargs = judge_engine("trec", args)
    rows = load_rows(args.input, args.records)

    from ragscale.judges.no_answer import render as warm_prompt

    warm = warm_prompt("warm-up question?", "warm-up answer.")  # first-call costs stay out of the timings
    t0 = time.perf_counter()
    engine = CountingEngine(build(kwargs))
    load_s = time.perf_counter() - t0
    engine.engine.generate([warm])
    t0 = time.perf_counter()
    base_values, per_query = orag_way(engine, rows, args.judges)
    base_s = time.perf_counter() - t0
    base_counts = engine.counts
    del engine

    from ragscale.actors.judge import JudgeActor

    actor = JudgeActor(kwargs, args.judges, cache_path=None, max_retries=0)  # no disk cache, no re-asks
    actor.engine.generate([warm])
    t0 = time.perf_counter()
    ours_values, ours_counts = ragscale_way(actor, rows, args.batch_size)
    ours_s = time.perf_counter() - t0

    n = max(len(rows), 1)
    agree = sum(1 for k in base_values if base_values[k] == ours_values.get(k))
    side = lambda wall, c: {"wall_s": round(wall, 2), "wall_s_per_query": round(wall / n, 2), **c,  # noqa: E731
                            "engine_calls_per_query": round(c["engine_calls"] / n, 2),
                            "completion_tok_per_s": round(c["completion_tokens"] / max(wall, 1e-9), 1)}
    emit(
        {
            "benchmark": "trec",
            "engine": kwargs["engine"],
            "model": cfg.judge.model,
            "records": len(rows),
            "judges": args.judges,
            "engine_load_s": round(load_s, 2),
            "open_rag_eval_sequential": {**side(base_s, base_counts),
                                         "per_query_wall_s": [round(x, 2) for x in per_query]},
            "ragscale_judge_actor": side(ours_s, ours_counts),
            "speedup": round(base_s / max(ours_s, 1e-9), 2),
            "values_compared": len(base_values),
            "values_equal": agree,
            "values_differing": [{"record": i, "metric": m, "sequential": base_values[(i, m)], "actor": ours_values.get((i, m))}
                                 for (i, m) in base_values if base_values[(i, m)] != ours_values.get((i, m))][:30],
        },
        args.out,
    )


if __name__ == "__main__":
    main()
