#!/usr/bin/env python
"""Scale benchmark: lexical MT-RAG metrics over growing synthetic inputs.

Shows that memory stays flat and time grows linearly with the input: for each size,
a synthetic JSONL (the bundled sample's records, repeated with new task ids) runs
through the CLI with the lexical metrics only (no encoder), while the driver's and the
whole process tree's resident memory are sampled from /proc. Each size is also given as
ratios to the smallest one (time per record and peak RSS; 1.0 = linear time, flat memory).

    .venv/bin/python benchmarks/scale.py --sizes 10000 50000 200000 [--out FILE.json]
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
LEXICAL = "metrics.algorithmic=[Recall,RougeL_stemFalse,Extractiveness_RougeL,Length]"


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, run_cli  # noqa: E402


def add_cli_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000, 200000])
    ap.add_argument("--out", default=None)


def make_input(path: str, n: int) -> None:
    with open(SAMPLE) as fh:
        base = [json.loads(line) for line in fh]
    with open(path, "w") as out:
        for i in range(n):
            rec = base[i % len(base)]
            out.write(json.dumps(dict(rec, task_id=f"{rec['task_id']}#{i // len(base)}")) + "\n")


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """pid and its descendants (Ray's processes started by the driver included)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def run_size(n: int, work: str) -> dict:
    inp = os.path.join(work, f"in-{n}.jsonl")
    make_input(inp, n)
    out = os.path.join(work, f"out-{n}")
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", f"input={inp}", f"output_dir={out}",
           "steps=[algorithmic]", LEXICAL, "cluster.chunk_size=512", "print_summary=false", "progress_interval_s=3600"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak_driver = peak_tree = 0
    while proc.poll() is None:
        peak_driver = max(peak_driver, _rss_kb(proc.pid))
        peak_tree = max(peak_tree, sum(_rss_kb(p) for p in _tree(proc.pid)))
        time.sleep(0.25)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run of {n} records failed with exit code {proc.returncode}")
    with open(os.path.join(out, "run.json")) as fh:
        run = json.load(fh)
    return {
        "records": n,
        "wall_s": round(wall, 2),
        "records_per_s": round(n / wall, 1),
        "pipeline_wall_s": run["timings_s"]["pipeline_wall"],
        "peak_driver_rss_mib": round(peak_driver / 1024, 1),
        "peak_process_tree_rss_mib": round(peak_tree / 1024, 1),
        "records_out": run["records"]["out"],
    }


def main(args: argparse.Namespace) -> dict:
    work = tempfile.mkdtemp(prefix="ragscale-scale-")
    results = [run_size(n, work) for n in args.sizes]
    base = results[0]
    for r in results:  # against the smallest size: 1.0 = linear time, flat memory
        r["time_per_record_ratio"] = round((r["wall_s"] / r["records"]) / (base["wall_s"] / base["records"]), 3)
        r["peak_driver_rss_ratio"] = round(r["peak_driver_rss_mib"] / base["peak_driver_rss_mib"], 3)
        r["peak_process_tree_rss_ratio"] = round(r["peak_process_tree_rss_mib"] / base["peak_process_tree_rss_mib"], 3)
    result = {"benchmark": "scale", "metrics": "lexical (no encoder)", "cpus": os.cpu_count(),
              "baseline": f"{base['records']} records", "runs": results}
    emit(result, args.out)
    return result


if __name__ == "__main__":
    run_cli(__doc__, add_cli_args, main)
