#!/usr/bin/env python
"""Significance benchmark: the time of summary.json's significance block.

Synthetic per-task scores for ``--models`` models x ``--tasks`` tasks x 6 metrics (values in
[0, 1], model i shifted by 0.02 i), fed record by record into the collector the report pass
uses, then every pair of models tested (``--resamples`` bootstrap resamples and sign flips).
``--missing`` leaves that share of the values out at random, so that the pairs have different
task counts and share no resamples (the slow case). The tasks are turns of conversations of
``--turns`` turns (``conversation_id``): the tests run twice in the same process, each task on its
own (``cluster_by=none``, the baseline) and whole conversations resampled (the default). Prints
JSON: the comparisons and the seconds of the collection and of both tests, best of ``--repeat``,
and the ratio of the conversation-aware tests to the baseline.

    .venv/bin/python benchmarks/significance.py [--models 5] [--tasks 1000] [--resamples 10000] [--missing 0.05] [--turns 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit  # noqa: E402

METRICS = ["HMean_idk", "RL_F_idk", "RB_llm_idk", "RB_agg_idk", "Recall", "BertKPrec"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--missing", type=float, default=0.0, help="share of values left out at random")
    ap.add_argument("--turns", type=int, default=8, help="turns per conversation")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from ragscale.config import SignificanceConf
    from ragscale.report.significance import PairedValues, compare

    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, (args.tasks, len(METRICS)))
    records = []
    for t in range(args.tasks):
        for i in range(args.models):
            vals = np.clip(base[t] + 0.02 * i + rng.normal(0, 0.2, len(METRICS)), 0, 1)
            metrics = {m: None if rng.random() < args.missing else [float(v)] for m, v in zip(METRICS, vals)}
            records.append({"task_id": f"t{t}", "conversation_id": f"c{t // args.turns}", "model_id": f"m{i}",
                            "error": None, "metrics": metrics})
    order = [f"m{i}" for i in range(args.models)]
    collect, tests, clustered = [], [], []
    for _ in range(args.repeat):
        for cluster_by, times in ((None, tests), ("conversation_id", clustered)):
            t0 = time.perf_counter()
            values = PairedValues(METRICS, cluster_by=cluster_by)
            for rec in records:
                values.add(rec)
            t1 = time.perf_counter()
            block = compare(order, values, SignificanceConf(resamples=args.resamples))
            times.append(time.perf_counter() - t1)
            collect.append(t1 - t0)
    pairs = sum(len(v) for v in block["metrics"].values())
    emit({"benchmark": "significance", "models": args.models, "tasks": args.tasks, "metrics": len(METRICS),
          "resamples": args.resamples, "missing": args.missing, "design": block["design"], "comparisons": pairs,
          "distinct_task_counts": len({e["n"] for v in block["metrics"].values() for e in v}),
          "conversations": block["unit"]["units"], "collect_s": round(min(collect), 3),
          "tests_s": round(min(tests), 3), "tests_by_conversation_s": round(min(clustered), 3),
          "ratio_by_conversation": round(min(clustered) / min(tests), 2), "cpus": os.cpu_count()}, args.out)


if __name__ == "__main__":
    main()
