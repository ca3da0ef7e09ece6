#!/usr/bin/env python
"""Throughput benchmark: records/s against the number of encoder actors on a multi-node cluster.

A simulated Ray cluster (``ray.cluster_utils.Cluster``: a head node without CPUs, where this
process is the driver, and ``--nodes`` worker nodes of ``--cpus-per-node`` logical CPUs each)
runs MT-RAG step 1 (lexical + BERTScore-family metrics, ``steps=[algorithmic]``) over the
same synthetic input once per encoder pool size (``--actors``, default 1 2 4; one CPU and
``--torch-threads`` threads per actor). The read/lexical stage is fused into the encoder
actors, so it scales with them too.

The input is the bundled sample repeated with every text made unique per copy (prediction,
references, passages), and the encoder's embedding cache is off (``encoder.cache_mb=0``), so
no copy is served from an earlier one's work. A warm-up run (not reported) loads the model
files into the page cache first.

Reported per pool size (JSON): ``wall_s`` (the run through ``ragscale.run.execute``, actor
start included), ``pipeline_wall_s`` (run.json), ``records_per_s`` (records / pipeline wall),
``first_record_s`` (from the run's start to its first record written: mostly actor start-up),
``steady_records_per_s`` (records after the first batch / the time they took), encoder compute
seconds summed over actors, and the steady rate's speedup over the smallest pool.

Simulated nodes share the host's cores: the figures measure ragscale's and Ray Data's
scheduling over several actors and nodes, and grow with actors only as far as the host has
free cores (on a 2-core machine, little past 2 actors).

    .venv/bin/python benchmarks/throughput.py [--records 600] [--actors 1 2 4] [--nodes 2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from _common import emit, run_cli  # noqa: E402


def add_cli_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4], help="encoder pool sizes, one run each")
    ap.add_argument("--nodes", type=int, default=2, help="simulated worker nodes")
    ap.add_argument("--cpus-per-node", type=int, default=4, help="logical CPUs per simulated worker node")
    ap.add_argument("--torch-threads", type=int, default=1, help="torch threads per encoder actor")
    ap.add_argument("--batch-size", type=int, default=32, help="records per encoder-actor call and per read task")
    ap.add_argument("--set", action="append", default=[], help="more Hydra overrides")
    ap.add_argument("--out", default=None)


def make_input(path: str, n: int) -> None:
    """``n`` records: the sample's records in turn, every text suffixed with its copy number."""
    with open(SAMPLE) as fh:
        base = [json.loads(line) for line in fh]
    with open(path, "w") as out:
        for i in range(n):
            rec = json.loads(json.dumps(base[i % len(base)]))
            copy = i // len(base)
            tag = f" [copy {copy}]"
            rec["task_id"] = f"{rec['task_id']}#{copy}"
            for p in rec.get("predictions") or []:
                p["text"] += tag
            for t in rec.get("targets") or []:
                t["text"] += tag
            for c in rec.get("contexts") or []:
                c["text"] += tag
            out.write(json.dumps(rec) + "\n")


class LineClock(threading.Thread):
    """Samples how many records records.jsonl holds, with their times (every 20 ms)."""

    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.path, self.samples, self.stop = path, [], threading.Event()
        self.start()

    def run(self) -> None:
        last = 0
        while not self.stop.is_set():
            try:
                with open(self.path, "rb") as fh:
                    n = fh.read().count(b"\n")
            except OSError:
                n = 0
            if n != last:
                self.samples.append((time.perf_counter(), n))
                last = n
            time.sleep(0.02)


def run_pool(cluster, inp: str, work: str, actors: int, n: int, args: argparse.Namespace) -> dict:
    from ragscale.run import compose, execute

    out = os.path.join(work, f"out-{actors}-{time.time_ns()}")
    overrides = ["+scenario=mtrag", f"input={inp}", f"output_dir={out}", f"cluster.address={cluster.address}",
                 "steps=[algorithmic]", "encoder.cache_mb=0", f"cluster.chunk_size={args.batch_size}",
                 f"cluster.encoder.size={actors}", "cluster.encoder.num_cpus=1",
                 f"cluster.encoder.torch_threads={args.torch_threads}", f"cluster.encoder.batch_size={args.batch_size}",
                 "html_report=false", "print_summary=false", "progress_interval_s=3600", *args.set]
    clock = LineClock(os.path.join(out, "records.jsonl"))
    t0 = time.perf_counter()
    code = execute(compose(overrides), printer=lambda s: None)
    wall = time.perf_counter() - t0
    clock.stop.set()
    clock.join()
    if code != 0:
        raise SystemExit(f"run with {actors} encoder actor(s) failed with exit code {code}")
    with open(os.path.join(out, "run.json")) as fh:
        run = json.load(fh)
    pipeline = run["timings_s"]["pipeline_wall"]
    (t_first, n_first), (t_last, n_last) = clock.samples[0], clock.samples[-1]
    steady = (n_last - n_first) / (t_last - t_first) if t_last > t_first else None
    return {
        "encoder_actors": actors,
        "records": run["records"]["out"],
        "wall_s": round(wall, 2),
        "pipeline_wall_s": pipeline,
        "records_per_s": round(n / pipeline, 1),
        "first_record_s": round(t_first - t0, 2),
        "steady_records_per_s": round(steady, 1) if steady else None,
        "encoder_compute_s": run["timings_s"]["stage_compute"].get("encoder_s"),
        "texts_encoded": (run.get("encoder_work") or {}).get("texts_encoded"),
    }


def main(args: argparse.Namespace) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    work = tempfile.mkdtemp(prefix="ragscale-throughput-")
    inp = os.path.join(work, "input.jsonl")
    make_input(inp, args.records)
    warm = os.path.join(work, "warmup.jsonl")
    make_input(warm, min(60, args.records))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        for _ in range(args.nodes):
            cluster.add_node(num_cpus=args.cpus_per_node)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="ERROR")
        run_pool(cluster, warm, work, 1, min(60, args.records), args)  # warm-up, not reported
        runs = [run_pool(cluster, inp, work, k, args.records, args) for k in args.actors]
    finally:
        ray.shutdown()
        cluster.shutdown()
    base = runs[0]
    for r in runs:
        if r["steady_records_per_s"] and base["steady_records_per_s"]:
            r["steady_speedup"] = round(r["steady_records_per_s"] / base["steady_records_per_s"], 2)
        r["speedup"] = round(r["records_per_s"] / base["records_per_s"], 2)
    result = {
        "benchmark": "throughput",
        "metrics": "MT-RAG step 1 (lexical + BERTScore P/R, BertKPrec), encoder cache off",
        "host_cpus": os.cpu_count(),
        "cluster": {"worker_nodes": args.nodes, "logical_cpus_per_node": args.cpus_per_node,
                    "encoder_num_cpus": 1, "torch_threads_per_actor": args.torch_threads,
                    "batch_size": args.batch_size},
        "baseline": f"{base['encoder_actors']} encoder actor(s)",
        "runs": runs,
    }
    emit(result, args.out)
    return result


if __name__ == "__main__":
    run_cli(__doc__, add_cli_args, main)
