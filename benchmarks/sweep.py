#!/usr/bin/env python
"""Sweep benchmark: a model sweep costs the unique work, not the copies.

The same tasks are evaluated for 1, 2, 4 and 8 models in one run each (``input=`` a
directory with one prediction file per model). The model files are made from the bundled
sample (ragscale/data/mtrag_sample.jsonl, three models answering the same tasks): model
``i`` answers with sample model ``i % 3``'s responses, and from the fourth model on, half of
its answers are edited (a sentence dropped, or words added), so some models repeat others'
answers word for word and some do not, as in a real sweep of related checkpoints.

For each model count the JSON output has the records, the unique texts the encoder needs
(every distinct prediction, reference and passage), what a per-record evaluator would
encode, and what the run did (run.json: ``encoder_work.texts_encoded``, the judge's
``prompts``, ``generations``, ``dedup_hits`` and ``cache_hits``). The judge cache is a fresh
file per run, so every generation is a cache miss of that run: nothing is served from an
earlier run.

    .venv/bin/python benchmarks/sweep.py [--models 1 2 4 8] [--tasks 4] [--steps algorithmic idk] [--out FILE.json]

``--steps algorithmic`` leaves out the judge (seconds); the default adds the IDK judge (the
packaged SmolLM2 on llama.cpp, or ``--set judge.model=...``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit  # noqa: E402


def add_cli_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--models", type=int, nargs="+", default=[1, 2, 4, 8], help="model counts, one run each")
    ap.add_argument("--tasks", type=int, default=4, help="tasks of the sample each model answers (at most 10)")
    ap.add_argument("--steps", nargs="+", default=["algorithmic", "idk"], help="ragscale steps (mtrag scenario)")
    ap.add_argument("--set", action="append", default=[], help="more Hydra overrides, e.g. judge.model=/path.gguf")
    ap.add_argument("--out", default=None)


def _edit(text: str, kind: int) -> str:
    """A different but similar answer: drop the first or last sentence, or add words."""
    sentences = [s for s in text.replace("\n", " ").split(". ") if s]
    if kind == 0 and len(sentences) > 1:
        return ". ".join(sentences[1:])
    if kind == 1 and len(sentences) > 1:
        return ". ".join(sentences[:-1]) + "."
    if kind == 2:
        return text.rstrip() + " I hope this helps."
    return "Based on the documents, " + text[:1].lower() + text[1:]


def make_models(folder: str, n_models: int, n_tasks: int) -> list[dict]:
    """Write ``model-<i>.jsonl`` for i < n_models into ``folder``; returns every record written."""
    base: dict[str, list[dict]] = {}
    with open(SAMPLE) as fh:
        for line in fh:
            r = json.loads(line)
            base.setdefault(r["model_id"], []).append(r)
    sources = [base[m][:n_tasks] for m in sorted(base)]
    written = []
    os.makedirs(folder, exist_ok=True)
    for i in range(n_models):
        recs = []
        for j, r in enumerate(sources[i % len(sources)]):
            r = dict(r, model_id=f"model-{i}")
            if i >= len(sources) and (i + j) % 2 == 0:  # from the 4th model on: half the answers edited
                r["predictions"] = [{"text": _edit(r["predictions"][0]["text"], (i - len(sources)) % 4)}]
            recs.append(r)
        with open(os.path.join(folder, f"model-{i}.jsonl"), "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in recs)
        written += recs
    return written


def expected_work(records: list[dict]) -> dict:
    """The unique work of the inputs, and what evaluating record by record would do."""
    texts: set[str] = set()
    per_record = 0
    for r in records:
        own = [r["predictions"][0]["text"], *(t["text"] for t in r["targets"]), *(c["text"] for c in r["contexts"])]
        per_record += len(own)
        texts |= {t.strip() for t in own}
    return {
        "records": len(records),
        "unique_responses": len({(r["task_id"], r["predictions"][0]["text"]) for r in records}),
        "encoder_texts_per_record_total": per_record,
        "encoder_unique_texts": len(texts),
    }


def run_sweep(n_models: int, args: argparse.Namespace, work: str) -> dict:
    folder = os.path.join(work, f"preds-{n_models}")
    records = make_models(folder, n_models, args.tasks)
    out = os.path.join(work, f"out-{n_models}")
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", f"input={folder}", f"output_dir={out}",
           f"steps=[{','.join(args.steps)}]", f"judge.cache_path={os.path.join(work, f'judge-{n_models}.sqlite')}",
           "print_summary=false", "progress_interval_s=3600", *args.set]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"run with {n_models} models failed:\n{res.stderr[-3000:]}")
    with open(os.path.join(out, "run.json")) as fh:
        run = json.load(fh)
    enc = run.get("encoder_work") or {}
    judge = run.get("judge_work") or {}
    row = {"models": n_models, **expected_work(records),
           "encoder_texts_requested": enc.get("texts_requested"), "encoder_texts_encoded": enc.get("texts_encoded"),
           "encoder_cache_hits": enc.get("cache_hits")}
    if judge:
        row.update({"judge_prompts": judge.get("prompts", 0), "judge_generations": judge.get("generations", 0),
                    "judge_dedup_hits": judge.get("dedup_hits", 0), "judge_cache_hits": judge.get("cache_hits", 0),
                    "judge_retries": judge.get("retries", 0)})
    row.update({"wall_s": round(wall, 1), "pipeline_wall_s": run["timings_s"]["pipeline_wall"],
                "stage_compute_s": run["timings_s"]["stage_compute"]})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cli_args(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragscale-sweep-") as work:
        rows = [run_sweep(n, args, work) for n in args.models]
    emit({"benchmark": "sweep", "tasks": args.tasks, "steps": args.steps, "runs": rows}, args.out)


if __name__ == "__main__":
    main()
