#!/usr/bin/env python
"""Projection: time and GPU-hours of a judge workload on a GPU node, from measured prompts.

Reads the JSONL that ``ragscale prompts`` writes (every prompt a run would send, with its prompt
tokens and expected completion tokens), measures per record what the judges send, how much of it
a prefix cache can skip, and projects a larger run from stated throughputs:

- ``template`` prefix: per (judge, prompt version, round), the prefix every prompt shares (instructions,
  few-shot block) is computed once; any prefix cache keeps it.
- ``ideal`` prefix: each prompt shares with the most similar other prompt (its neighbour in text
  order; a task's passages across a sweep's models too), as a cache large enough to hold every
  prefix would; an upper bound on the saving.

Prefill seconds = uncached prompt tokens / prefill rate, decode seconds = completion tokens /
decode rate, per GPU, summed (continuous batching overlaps them, so the sum is an upper bound);
data-parallel replicas split records evenly. Shares are measured on characters of the messages and
applied to the tokens of each prompt, rounded down to whole KV blocks.

    ragscale prompts +scenario=mtrag input=... limit=300 --out mtrag.jsonl
    .venv/bin/python benchmarks/projection.py mtrag.jsonl --records 100000 --gpus 6 --billed-gpus 8 [--out F]

Prints one JSON object (docs/performance.md, "The GPU plan").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit  # noqa: E402


def prompt_text(messages: list[dict]) -> str:
    """One string per prompt, in the order a chat template lays the messages out."""
    return "".join(f"<{m.get('role', '')}>{m.get('content') or ''}" for m in messages)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    return len(os.path.commonprefix([a, b]))


def cached_tokens(tokens: int, shared_chars: int, chars: int, block: int) -> int:
    """Prompt tokens a prefix cache skips: the shared character share of ``tokens``, in whole
    blocks of ``block`` tokens, never the whole prompt (its last token is always computed)."""
    if chars <= 0 or shared_chars <= 0:
        return 0
    t = min(tokens - 1, int(tokens * shared_chars / chars))
    return max(0, t - t % block)


def measure(rows: list[dict], block: int) -> dict:
    """Per judge: prompts, prompt and completion tokens, and the tokens the template and the
    ideal prefix caches skip."""
    texts = [prompt_text(r["messages"]) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: texts[i])
    ideal = [0] * len(rows)  # shared characters with the nearest other prompt in text order
    for a, b in zip(order, order[1:]):
        lcp = common_prefix(texts[a], texts[b])
        ideal[a], ideal[b] = max(ideal[a], lcp), max(ideal[b], lcp)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[(r["judge"], r.get("version"), r.get("round"))].append(i)
    template = [0] * len(rows)
    for idx in groups.values():
        if len(idx) > 1:
            first, last = min((texts[i] for i in idx)), max((texts[i] for i in idx))
            shared = common_prefix(first, last)  # the set's common prefix: that of its min and max
            for i in idx:
                template[i] = shared
    out: dict[str, dict] = {}
    for i, r in enumerate(rows):
        j = out.setdefault(r["judge"], {"prompts": 0, "estimated": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                        "template_cached_tokens": 0, "ideal_cached_tokens": 0})
        tok, chars = int(r["prompt_tokens"]), len(texts[i])
        j["prompts"] += 1
        j["estimated"] += bool(r.get("estimated"))
        j["prompt_tokens"] += tok
        j["completion_tokens"] += int(r.get("expected_completion_tokens") or 0)
        j["template_cached_tokens"] += cached_tokens(tok, template[i], chars, block)
        j["ideal_cached_tokens"] += cached_tokens(tok, ideal[i], chars, block)
    return out


def project(per_judge: dict, sample_records: int, records: int, gpus: int, prefill_tok_s: float,
            decode_tok_s: float, start_s: float, token_scale: float = 1.0, billed_gpus: int | None = None) -> dict:
    """Per record figures and, for each prefix cache (none, template, ideal), the wall time of
    ``records`` records on ``gpus`` data-parallel judge replicas and the GPU-hours of the
    ``billed_gpus`` (default ``gpus``) the run holds for that time."""
    tot = {k: sum(j[k] for j in per_judge.values()) for k in
           ("prompts", "prompt_tokens", "completion_tokens", "template_cached_tokens", "ideal_cached_tokens")}
    per_record = {k: tot[k] / sample_records * (token_scale if k != "prompts" else 1.0) for k in tot}
    scale = records / sample_records * token_scale
    completion = tot["completion_tokens"] * scale
    plans = {}
    for cache, cached in (("none", 0), ("template", tot["template_cached_tokens"]),
                          ("ideal", tot["ideal_cached_tokens"])):
        prefill = (tot["prompt_tokens"] - cached) * scale
        gpu_s = prefill / prefill_tok_s + completion / decode_tok_s
        wall_s = start_s + gpu_s / gpus
        plans[cache] = {"prefill_tokens": round(prefill), "prefill_gpu_s": round(prefill / prefill_tok_s),
                        "decode_gpu_s": round(completion / decode_tok_s), "wall_h": round(wall_s / 3600, 2),
                        "gpu_hours": round(wall_s * (billed_gpus or gpus) / 3600, 1),
                        "records_per_s": round(records / wall_s, 1),
                        "cached_share": round(cached / max(tot["prompt_tokens"], 1), 3)}
    return {"per_record": {k: round(v, 1) for k, v in per_record.items()}, "plans": plans}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prompts", nargs="+", help="JSONL files written by `ragscale prompts` (one scenario each)")
    ap.add_argument("--sample-records", type=int, nargs="+", default=None,
                    help="records each file was made from (default: the distinct records in it)")
    ap.add_argument("--records", type=int, default=100_000, help="records to project to")
    ap.add_argument("--gpus", type=int, default=6, help="data-parallel judge replicas, one GPU each (8xh100: 6)")
    ap.add_argument("--billed-gpus", type=int, default=8, help="GPUs the run holds (8xh100: 8; encoder on the rest)")
    ap.add_argument("--prefill-tok-s", type=float, default=20_000.0, help="prompt tokens/s per GPU")
    ap.add_argument("--decode-tok-s", type=float, default=3_000.0, help="completion tokens/s per GPU (batched)")
    ap.add_argument("--start-s", type=float, default=180.0, help="fixed start: Ray, engine load, warm-up")
    ap.add_argument("--token-scale", type=float, default=1.0,
                    help="the judge model's tokens per token of the model the prompts were counted with")
    ap.add_argument("--block", type=int, default=16, help="KV-cache block size in tokens (vLLM: 16)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.sample_records and len(args.sample_records) != len(args.prompts):
        ap.error("--sample-records takes one count per prompts file")
    result = {"benchmark": "projection",
              "assumptions": {k: getattr(args, k) for k in ("records", "gpus", "billed_gpus", "prefill_tok_s", "decode_tok_s",
                                                            "start_s", "token_scale", "block")},
              "scenarios": {}}
    for n, path in enumerate(args.prompts):
        with open(path) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        if not rows:  # e.g. every prompt was in the judge cache: `ragscale prompts ... judge.cache_path=null`
            ap.error(f"{path} holds no prompt (were they all in the judge cache? write them with "
                     "`ragscale prompts ... judge.cache_path=null`)")
        sample = args.sample_records[n] if args.sample_records else len({r["record"]["key"] for r in rows})
        per_judge = measure(rows, args.block)
        result["scenarios"][os.path.basename(path)] = {
            "sample_records": sample, "judges": per_judge,
            **project(per_judge, sample, args.records, args.gpus, args.prefill_tok_s, args.decode_tok_s,
                      args.start_s, args.token_scale, args.billed_gpus)}
    emit(result, args.out)


if __name__ == "__main__":
    main()
