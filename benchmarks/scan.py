#!/usr/bin/env python
r"""Benchmark: the input scan, the driver's pass over every JSONL line before a run (each record's
pointer, task id and (model, task, run) slot: ``ragscale.io.inputs.PointerArray.scan``).

Two ways on the same file, in one run, alternating round by round (the best round of each is kept):

- ``full_parse`` (the baseline): every line through ``ragscale.io.lines.parse`` (``json.loads``),
  as the scan did before ``ragscale.io.scan_ids`` (``fast=False``);
- ``fast``: blocks of lines through ``pyarrow.json`` with only the keys the ids read, the lines
  it cannot vouch for through the full parse (``fast=True``, the default).

The input is N synthetic MT-RAG-shaped records (about 5.4 KB each: five retrieved passages,
the conversation's input, targets and predictions, ``"Multi-Turn": NaN`` as MT-RAG's files have it,
non-ASCII text written as ``\uXXXX`` escapes, 10 models), or with ``--input`` a JSONL file's records
repeated to N, each with a new task id. Both scans must give the same columns (checked); a third
pass of each counts the ``json.loads`` calls.

    .venv/bin/python benchmarks/scan.py --quick                 # 20,000 records
    .venv/bin/python benchmarks/scan.py [--records 100000] [--rounds 3] [--input FILE.jsonl] [--out FILE.json]

Prints one JSON object: per way, the best round's seconds (wall and CPU), records/s (wall and CPU)
and json.loads calls per record; the ratio of ``fast`` to ``full_parse`` (records/s, wall and
CPU). docs/performance.md, "The input scan", has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import emit, run_cli  # noqa: E402

QUICK = 20_000
WORDS = ("the of rate limit request tier free pro plan enterprise organization api key batch endpoint header "
         "window client backoff retry café naïve “quoted” résumé token quota policy Information usage").split()


def add_cli_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK:,} records")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds of each way (alternating; the best is kept)")
    ap.add_argument("--input", default=None, help="repeat this JSONL file's records (default: synthetic records)")
    ap.add_argument("--out", default=None, help="also write the JSON here")


def record(i: int, rng: random.Random) -> dict:
    """One MT-RAG-shaped record (task ``<conversation>::<turn>``, one of 10 models)."""
    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    conv = f"{rng.getrandbits(128):032x}"
    turn = i % 7 + 1
    return {"conversation_id": conv, "task_id": f"{conv}::{turn}", "task_type": "rag", "turn": turn,
            "Collection": "mt-rag-clapnq-elser-512-100-20240503", "dataset": "MT-RAG 2.0",
            "contexts": [{"document_id": f"{i}-{j}", "title": text(6), "text": text(90), "score": rng.random() * 30}
                         for j in range(5)],
            "input": [{"speaker": "user", "text": text(20), "enrichments": {"answerability": ["ANSWERABLE"]}}],
            "targets": [{"speaker": "agent", "text": text(40)}],
            "Question Type": ["Factoid"], "answerability": ["ANSWERABLE"], "Multi-Turn": float("nan"),
            "predictions": [{"text": text(50)}], "model_id": f"model-{i % 10:02d}"}


def make_input(path: str, n: int, seed: int = 0, source: str | None = None) -> int:
    """Write ``n`` records to ``path`` (synthetic, or ``source``'s repeated with new task ids); returns
    the file's size in bytes."""
    rng = random.Random(seed)
    base = None
    if source:
        with open(source, encoding="utf-8") as fh:
            base = [json.loads(line) for line in fh if line.strip()]
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            if base is None:
                rec = record(i, rng)
            else:
                rec = base[i % len(base)]
                rec = dict(rec, task_id=f"{rec.get('task_id')}#{i // len(base)}")
            fh.write(json.dumps(rec) + "\n")
    return os.path.getsize(path)


def timed_scan(files: list, fast: bool) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds, PointerArray) of one scan."""
    from ragscale.io.inputs import PointerArray

    wall, cpu = time.perf_counter(), time.process_time()
    arr = PointerArray.scan(files, with_tasks=True, fast=fast)
    return time.perf_counter() - wall, time.process_time() - cpu, arr


def loads_calls(files: list, fast: bool) -> int:
    """How many json.loads calls one scan makes (on this thread: another thread's calls, in a test
    process, are not the scan's)."""
    import threading

    calls = 0
    real = json.loads
    mine = threading.get_ident()

    def counting(*a, **k):  # noqa: ANN002, ANN003, ANN202
        nonlocal calls
        if threading.get_ident() == mine:  # only this thread writes the count: another's `+= 0` could
            calls += 1                     # write back a stale value and lose this thread's calls
        return real(*a, **k)

    json.loads = counting
    try:
        timed_scan(files, fast)
    finally:
        json.loads = real
    return calls


def same(a: object, b: object) -> bool:
    import numpy as np

    return all(np.array_equal(getattr(a, c), getattr(b, c))
               for c in ("file_idx", "line", "offset", "task_hash", "has_task", "first"))


def main(args: argparse.Namespace) -> dict:
    from ragscale.io.inputs import resolve_inputs

    n = QUICK if args.quick else args.records
    work = tempfile.mkdtemp(prefix="ragscale-scan-")
    path = os.path.join(work, "responses.jsonl")
    size = make_input(path, n, source=args.input)
    files = resolve_inputs(path)
    best: dict[str, tuple[float, float]] = {}
    arrays = {}
    timed_scan(files, True)  # warm: imports, the page cache
    for _ in range(args.rounds):
        for way, fast in (("full_parse", False), ("fast", True)):
            wall, cpu, arrays[way] = timed_scan(files, fast)
            old = best.get(way, (float("inf"), float("inf")))
            best[way] = (min(old[0], wall), min(old[1], cpu))
    if not same(arrays["full_parse"], arrays["fast"]):
        raise SystemExit("the fast scan's pointers differ from the full parse's")
    ways = {}
    for way, fast in (("full_parse", False), ("fast", True)):
        wall, cpu = best[way]
        ways[way] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "records_per_s": round(n / wall),
                     "cpu_records_per_s": round(n / cpu),
                     "json_loads_per_record": round(loads_calls(files, fast) / n, 5)}
    os.remove(path)
    os.rmdir(work)
    fast, full = ways["fast"], ways["full_parse"]
    result = {"benchmark": "scan", "input": os.path.basename(args.input) if args.input else "synthetic MT-RAG",
              "records": n, "bytes_per_record": round(size / n), "file_mib": round(size / 2**20, 1),
              "cpus": os.cpu_count(), "rounds": args.rounds, "baseline": "full_parse", "ways": ways,
              "ratio_records_per_s": round(fast["records_per_s"] / full["records_per_s"], 2),
              "ratio_cpu_records_per_s": round(fast["cpu_records_per_s"] / full["cpu_records_per_s"], 2),
              "same_pointers": True}
    emit(result, args.out)
    return result


if __name__ == "__main__":
    run_cli(__doc__, add_cli_args, main)
