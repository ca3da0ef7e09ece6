"""``ragscale retrieval RESULTS.jsonl --qrels FILE|COLLECTION=FILE ... [--k 1,3,5,10] [--json]``

Retrieval results scored against human qrels as MT-RAG's scripts/evaluation/run_retrieval_eval.py
scores them (ragscale.metrics.qrels_retrieval): per collection and weighted by each collection's
task count, the queries without qrels counted and named. ``RESULTS.jsonl``: MT-RAG's retrieval
records (``task_id``, ``Collection``, ``contexts`` with ``document_id`` and ``score``); several
files are several retrievers, each scored on its own. ``--fill umbrela``: the qrels' holes filled
with the records' UMBRELA grades (a ragscale run's records.jsonl), scored again, with UMBRELA's
Cohen's kappa against the human judgments (ragscale.metrics.qrels_fill). Bad input is one line on
stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from ragscale.errors import OneLineParser, UserError


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    p = OneLineParser(prog="ragscale retrieval",
                      description="Retrieval results against human qrels, as MT-RAG's retrieval evaluation scores them.")
    p.add_argument("results", metavar="RESULTS.jsonl", nargs="+", help="MT-RAG retrieval records, one file per retriever")
    p.add_argument("--qrels", action="append", required=True, metavar="FILE|COLLECTION=FILE",
                   help="BEIR TSV or TREC qrels: one file for every record, or one per collection (repeat the option)")
    p.add_argument("--k", default="1,3,5,10", help="cut-offs (default 1,3,5,10)")
    p.add_argument("--measures", default="Recall,nDCG", help="Recall, nDCG, MAP, P, MRR (default Recall,nDCG)")
    p.add_argument("--mtrag-rounding", action="store_true",
                   help="round the collection means to 5 decimals before weighting, as MT-RAG's script")
    p.add_argument("--keep-identical-ids", action="store_true",
                   help="score a passage whose id is its query's (MT-RAG's script drops it)")
    p.add_argument("--fill", choices=["umbrela"],
                   help="fill the qrels' holes (retrieved passages without a human judgment) with the UMBRELA grades "
                        "of the records (a ragscale run's records.jsonl) and give UMBRELA's Cohen's kappa against the "
                        "human judgments")
    p.add_argument("--json", action="store_true", help="print every figure, per query too, as JSON")
    return p


def _qrels_spec(values: Sequence[str]) -> str | dict[str, str]:
    pairs = [v.split("=", 1) for v in values]
    if len(values) == 1 and len(pairs[0]) == 1:
        return values[0]
    if any(len(p) != 2 or not p[0].strip() for p in pairs):
        raise UserError("--qrels: give one FILE, or COLLECTION=FILE for each collection")
    return {k.strip(): v for k, v in pairs}


def _records(path: str) -> list[dict]:
    """The retrieval records of ``path``, each checked for what scoring reads (file:line on a fault)."""
    if not os.path.isfile(path):
        raise UserError(f"results file {path!r} does not exist")
    out = []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{no}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{where}: not a JSON object ({e.msg})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("task_id"), (str, int)):
                raise UserError(f"{where}: a retrieval record needs a task_id")
            ctxs = rec.get("contexts") or []
            if not isinstance(ctxs, list) or any(not isinstance(c, dict) or c.get("document_id") in (None, "")
                                                 for c in ctxs):
                raise UserError(f"{where}: contexts must be a list of objects with a document_id")
            bad = [c.get("score") for c in ctxs if c.get("score") is not None
                   and (isinstance(c.get("score"), bool) or not isinstance(c.get("score"), (int, float)))]
            if bad:
                raise UserError(f"{where}: a passage score must be a number or null, got {bad[0]!r}")
            out.append(rec)
    if not out:
        raise UserError(f"results file {path!r} holds no record")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Scores each results file and prints the tables (or JSON); 0, or 2 for bad input."""
    args = build_parser().parse_args(argv)
    prog = "ragscale retrieval"
    try:
        from ragscale.extras import install_hint, missing

        if missing("qrels") is not None:
            raise UserError(f"ragscale retrieval needs pytrec_eval: {install_hint('qrels')}")
        from ragscale.io.qrels import read_collection_qrels
        from ragscale.metrics.qrels_fill import filled_block
        from ragscale.metrics.qrels_retrieval import run_of, score_collections

        try:
            k_values = [int(k) for k in args.k.split(",") if k.strip()]
        except ValueError:
            raise UserError(f"--k must be comma-separated integers, got {args.k!r}") from None
        measures = [m.strip() for m in args.measures.split(",") if m.strip()]
        qrels = read_collection_qrels(_qrels_spec(args.qrels))
        blocks = {}
        for path in args.results:
            records = _records(path)
            run, collection_of = run_of(records)
            score = dict(k_values=k_values, measures=measures, digits=5 if args.mtrag_rounding else None,
                         ignore_identical_ids=not args.keep_identical_ids)
            blocks[path] = score_collections(qrels, run, collection_of, **score)
            if args.fill:
                blocks[path]["filled"] = filled_block(records, qrels, run, collection_of, score)
                if blocks[path]["filled"] is None:
                    raise UserError(f"--fill umbrela: {path} holds no UMBRELA grades (metrics.umbrela_scores, one per "
                                    f"passage); run `ragscale run +scenario=trec steps=[retrieval] input={path}` and "
                                    "give its records.jsonl")
    except UserError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(blocks, indent=2))
    else:
        from ragscale.report.qrels_text import tables

        print("\n".join(line for path, block in blocks.items() for line in tables(path, block)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
