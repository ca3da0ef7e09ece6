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
"""

from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, judge_cli, judge_engine  # noqa: E402

JUDGE_NAMES = ["idk", "ragas_faithfulness", "radbench"]
MORE_JUDGES = ["ragas_context_precision", "ragas_context_recall", "ragas_answer_relevancy"]


def load_rows(path: str, n: int) -> list[dict]:
    from ragscale.io.inputs import resolve_inputs, scan
    from ragscale.pipeline.stages import load_and_lexical, pointer_table

    files = resolve_inputs(path)
    rows = load_and_lexical(pointer_table(list(scan(files, with_tasks=False))[:n]), files=files, metrics=["Recall"])
    return [r for r in rows.to_pylist() if not r["error"]]


def mtrag_way(engine, rows: list[dict], judges: list[str]) -> tuple[dict, dict]:
    """One judge after another, one prompt at a time, in input order; greedy, no retries."""
    from ragscale.judges import JUDGES
    from ragscale.judges.base import JudgeParseError, JudgeResult, Undefined, drive
    from ragscale.record import input_view

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
                result = drive(JUDGES[name].start(input_view(row), row), ask)
            except JudgeParseError:
                result = None
            if isinstance(result, Undefined):
                result = None
            elif isinstance(result, JudgeResult):
                result = result.metrics.get(JUDGES[name].metric)
            scores[(i, name)] = result
    return scores, tokens


def ragscale_way(actor, rows: list[dict], batch_size: int) -> tuple[dict, dict]:
    """The judge actor (one pool member) over the records in pipeline-sized batches."""
    import pyarrow as pa

    from ragscale.judges import JUDGES
    from ragscale.pipeline.stage import process_table
    from ragscale.record import ROW_SCHEMA

    scores, tokens = {}, {"generations": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for start in range(0, len(rows), batch_size):
        out = process_table(actor, "judge", pa.Table.from_pylist(rows[start:start + batch_size], schema=ROW_SCHEMA)).to_pylist()
        stats = json.loads(out[0]["stats"])
        for k in tokens:
            tokens[k] += stats.get(f"judge_{k}", 0)
        for j, r in enumerate(out):
            m = json.loads(r["metrics"])
            for name in (spec.name for spec in actor.judges):
                v = m.get(JUDGES[name].metric)
                scores[(start + j, name)] = v[0] if isinstance(v, list) and v else v
    return scores, tokens


def main() -> None:
    ap, args = judge_cli(__doc__, os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl"), 12, JUDGE_NAMES,
                         MORE_JUDGES)

    from ragscale.actors.engines import build

    cfg, kwargs = judge_engine("mtrag", args)
    rows = load_rows(args.input, args.records)

    t0 = time.perf_counter()
    engine = build(kwargs)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    base_scores, base_tokens = mtrag_way(engine, rows, args.judges)
    base_s = time.perf_counter() - t0
    del engine

    from ragscale.actors.judge import JudgeActor

    actor = JudgeActor(kwargs, args.judges, cache_path=None, max_retries=0)  # no disk cache, no re-asks
    t0 = time.perf_counter()
    ours_scores, ours_tokens = ragscale_way(actor, rows, args.batch_size)
    ours_s = time.perf_counter() - t0

    agree = sum(1 for k in base_scores if base_scores[k] == ours_scores.get(k))
    emit(
        {
            "benchmark": "judges",
            "engine": kwargs["engine"],
            "model": cfg.judge.model,
            "records": len(rows),
            "judges": args.judges,
            "engine_load_s": round(load_s, 2),
            "mtrag_sequential": {"wall_s": round(base_s, 2), **base_tokens,
                                 "completion_tok_per_s": round(base_tokens["completion_tokens"] / base_s, 1)},
            "ragscale_judge_actor": {"wall_s": round(ours_s, 2), **ours_tokens,
                                     "completion_tok_per_s": round(ours_tokens["completion_tokens"] / max(ours_s, 1e-9), 1)},
            "speedup": round(base_s / max(ours_s, 1e-9), 2),
            "scores_compared": len(base_scores),
            "scores_equal": agree,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
