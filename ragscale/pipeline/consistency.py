"""Consistency across repeated runs of a query: a pass after the record pipeline.

It needs every run of a query: the driver's one pass over the finished records.jsonl
(resumed ones included) groups the runs of each (model, query)
(ragscale.metrics.consistency.GroupCollector); this keeps the queries with
``consistency.min_runs`` runs, sends their answers through an encoder actor pool for pairwise
BERTScore F1 (actors.encoder.PairwiseActor, with ``consistency.encoder``'s model), and adds
ROUGE and per-metric statistics on the driver (ragscale.metrics.consistency). Writes
``consistency.jsonl`` (one line per scored query) and returns summary.json's block.
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence


def run_consistency(out_dir: str, groups: Sequence[dict], conf: dict, cluster: dict, verbose: bool = True) -> dict:
    """Compute consistency for every group of repeated runs with ``conf["min_runs"]`` runs;
    returns summary.json's block. ``conf`` is the plan's (ragscale.plan ``plan_consistency``):
    ``min_runs``, the encoder's ``encoder_kwargs`` and ``baseline``, and ``encoder`` (what the
    block records). Not ``verbose``: Ray's start-up notices are hidden, as in the record pipeline."""
    from ragscale.metrics.consistency import answered, finish_group, scored, summarize

    min_runs = int(conf["min_runs"])
    kept = [g for g in groups if scored(g, min_runs)]
    bert: dict[int, list[float]] = {}
    todo = [{"i": i, "answers": answered(g, min_runs)} for i, g in enumerate(kept)]
    todo = [t for t in todo if t["answers"]]
    if todo:
        import ray

        from ragscale.pipeline.dataset import actor_pool, ray_session

        with ray_session(cluster, verbose, os.path.join(out_dir, "logs", "ray-native.log")):
            pool = cluster.get("encoder", {})
            ds = ray.data.from_items(todo).map_batches(
                _Pairwise,
                fn_constructor_kwargs={"encoder": conf["encoder_kwargs"], "baseline": conf["baseline"]},
                batch_format="pyarrow",
                **actor_pool(pool, 256, max_size=len(todo)),
            )
            for row in ds.iter_rows():
                bert[int(row["i"])] = list(row["bert_score_f1"])
    results = [finish_group(g, bert.get(i), min_runs) for i, g in enumerate(kept)]
    path = os.path.join(out_dir, "consistency.jsonl")
    with open(path + ".tmp", "w") as fh:
        for r in results:
            fh.write(json.dumps(r) + "\n")
    os.replace(path + ".tmp", path)
    return {"file": "consistency.jsonl", "queries": len(results), "min_runs": min_runs,
            "fewer_runs": len(groups) - len(kept), "models": summarize(results), "encoder": conf["encoder"]}


class _Pairwise:
    """Ray Data adapter of ragscale.actors.encoder.PairwiseActor: rows ``{i, answers}`` in,
    ``{i, bert_score_f1}`` out (one row per query with repeated runs)."""

    def __init__(self, **kwargs: Any):
        from ragscale.actors.encoder import PairwiseActor

        self.worker = PairwiseActor(**kwargs)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        rows = batch.to_pylist()
        self.worker.process(rows)
        return pa.Table.from_pylist([{"i": r["i"], "bert_score_f1": r["bert_score_f1"]} for r in rows],
                                    schema=pa.schema([("i", pa.int64()), ("bert_score_f1", pa.list_(pa.float64()))]))
