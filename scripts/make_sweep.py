#!/usr/bin/env python
"""Make a synthetic model sweep from MT-RAG reference tasks (for benchmarks and tests).

Writes one JSONL per synthetic "model", each answering every task of INPUT:
  target     the reference answer itself
  truncated  the first half of the reference answer's words
  passage    the first passage (or the reference answer when the task has none)

    python scripts/make_sweep.py ../shared/data/mtrag/mtragun-reference.jsonl /tmp/sweep
"""

from __future__ import annotations

import argparse
import json
import os

MODELS = ("target", "truncated", "passage")


def prediction(model: str, task: dict) -> str:
    target = task["targets"][0]["text"]
    if model == "target":
        return target
    if model == "truncated":
        words = target.split()
        return " ".join(words[: max(1, len(words) // 2)])
    if model == "passage":
        ctx = task.get("contexts") or []
        return ctx[0]["text"] if ctx else target
    raise ValueError(f"unknown synthetic model {model!r}; choose from {MODELS}")


def make_sweep(input_path: str, out_dir: str, models: tuple[str, ...] = MODELS, limit: int | None = None) -> list[str]:
    """Write ``<out_dir>/<model>.jsonl`` for each model; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    with open(input_path) as fh:
        tasks = [json.loads(line) for line in fh if line.strip()][:limit]
    paths = []
    for model in models:
        path = os.path.join(out_dir, f"{model}.jsonl")
        with open(path, "w") as fh:
            for task in tasks:
                rec = dict(task)
                rec["predictions"] = [{"text": prediction(model, task)}]
                fh.write(json.dumps(rec) + "\n")
        paths.append(path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    for p in make_sweep(args.input, args.out_dir, tuple(args.models.split(",")), args.limit):
        print(p)


if __name__ == "__main__":
    main()
