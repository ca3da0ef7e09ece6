#!/usr/bin/env python
"""Retrieval-against-qrels benchmark: how fast ``ragscale retrieval`` scores retrieval records.

``--records`` synthetic MT-RAG retrieval records (``--passages`` passages each, 4 collections,
10% of the queries without qrels) and their qrels (1 to 4 relevant passages, graded 1 or 2). Timed
in one process, best of ``--repeat``: the baseline, one pytrec_eval call on the whole run (what
MT-RAG's script costs), ragscale's scoring from the records (the run built from them, the
identical ids dropped, per collection, weighted), and the same in a run (``qrels.file``: the report
sink fed every record as records.jsonl holds it, then scored, and with ``qrels.fill=umbrela`` the
holes filled by the records' UMBRELA grades and the kappa), and each record's own figures as the
read stage computes them (records.jsonl's ``details.qrels``: in batches of 128 rows, the records
parsed from their input JSON). Prints JSON: seconds, records/s and the ratios to the baseline.

    .venv/bin/python benchmarks/retrieval.py [--records 100000] [--passages 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit  # noqa: E402

COLLECTIONS = ("clapnq", "cloud", "fiqa", "govt")


def synthetic(n: int, passages: int, seed: int = 0) -> tuple[list[dict], dict[str, dict[str, dict[str, int]]]]:
    """``n`` retrieval records and their qrels by collection."""
    rnd = random.Random(seed)
    records, qrels = [], {c: {} for c in COLLECTIONS}
    for i in range(n):
        c = COLLECTIONS[i % len(COLLECTIONS)]
        tid = f"conv{i // 5}::{i % 5 + 1}"
        docs = [f"{c}_{rnd.randrange(10**6)}-0-512" for _ in range(passages)]
        records.append({"task_id": tid, "Collection": f"mt-rag-{c}-elser",
                        "contexts": [{"document_id": d, "score": rnd.uniform(0, 30)} for d in docs]})
        if rnd.random() < 0.9:
            rel = rnd.sample(docs, rnd.randint(0, 2)) + [f"{c}_unretrieved-{i}-{j}" for j in range(rnd.randint(1, 2))]
            qrels[c][tid] = {d: rnd.choice((1, 2)) for d in rel}
    return records, qrels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--passages", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import pytrec_eval

    from ragscale.metrics.qrels_retrieval import DEFAULT_K, run_of, score_collections

    import tempfile

    import json

    from ragscale.pipeline.cpu_stages import add_qrels_figures
    from ragscale.report.qrels_sink import QrelsSink

    records, qrels = synthetic(args.records, args.passages)
    rnd = random.Random(1)
    for r in records:  # as a run's records.jsonl holds them: UMBRELA's grades, the run's fields
        r.update(model_id="m", metrics={"umbrela_scores": [rnd.randrange(4) for _ in r["contexts"]]},
                 ragscale={"record_key": r["task_id"]})
    tmp = tempfile.mkdtemp()
    files = {}
    for c, by in qrels.items():
        files[c] = os.path.join(tmp, f"{c}.tsv")
        with open(files[c], "w") as fh:
            fh.write("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, rel in by.items()
                                                             for d, g in rel.items()))
    merged = {q: rel for by in qrels.values() for q, rel in by.items()}
    cut = ",".join(map(str, DEFAULT_K))
    base, ours, in_run, filled, per_record = [], [], [], [], []
    conf = {"file": files, "k": list(DEFAULT_K), "measures": ["Recall", "nDCG"]}
    for _ in range(args.repeat):
        run = {r["task_id"]: {c["document_id"]: c["score"] for c in r["contexts"]} for r in records}
        t0 = time.perf_counter()
        pytrec_eval.RelevanceEvaluator(merged, {f"recall.{cut}", f"ndcg_cut.{cut}"}).evaluate(run)
        base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        run, collection_of = run_of(records)
        block = score_collections(qrels, run, collection_of)
        ours.append(time.perf_counter() - t0)
        for fill, into in ((None, in_run), ("umbrela", filled)):
            t0 = time.perf_counter()
            sink = QrelsSink(tmp, {"file": files, "k": list(DEFAULT_K), "measures": ["Recall", "nDCG"], "fill": fill})
            for r in records:
                sink.add(r)
            got = sink.blocks()["m"]
            into.append(time.perf_counter() - t0)
        assert got["all"]["scored"] == block["all"]["scored"]
        rows = [{"error": None, "task_id": r["task_id"], "input_json": json.dumps(r), "warnings": [], "details": {}}
                for r in records]
        t0 = time.perf_counter()
        for i in range(0, len(rows), 128):
            add_qrels_figures(rows[i:i + 128], conf)
        per_record.append(time.perf_counter() - t0)
        assert sum("qrels" in r["details"] for r in rows) == block["all"]["scored"]
    emit({"benchmark": "retrieval", "records": args.records, "passages": args.passages,
          "scored": block["all"]["scored"], "repeat": args.repeat,
          "baseline_pytrec_eval_s": round(min(base), 3), "ragscale_s": round(min(ours), 3),
          "ragscale_records_per_s": round(args.records / min(ours)),
          "ratio_to_baseline": round(min(ours) / min(base), 2),
          "in_run_s": round(min(in_run), 3), "in_run_records_per_s": round(args.records / min(in_run)),
          "in_run_ratio_to_baseline": round(min(in_run) / min(base), 2),
          "in_run_filled_s": round(min(filled), 3),
          "in_run_filled_ratio_to_baseline": round(min(filled) / min(base), 2),
          "holes_filled": got["filled"]["fill"]["holes"],
          "per_record_s": round(min(per_record), 3), "per_record_records_per_s": round(args.records / min(per_record)),
          "per_record_ratio_to_baseline": round(min(per_record) / min(base), 2)}, args.out)


if __name__ == "__main__":
    main()
