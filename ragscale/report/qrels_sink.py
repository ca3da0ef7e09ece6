"""Retrieval against human qrels in a run (``qrels.file=...``): a report sink over the run's records.

The run's one pass over records.jsonl feeds it every record: the input's ``task_id``,
``Collection`` and ``contexts`` (``document_id``, ``score``) and the record's UMBRELA grades. At the
end each model's records are scored as ``ragscale retrieval`` scores a results file
(ragscale.metrics.qrels_retrieval: MT-RAG's per-collection figures weighted by task count; with
``qrels.fill=umbrela`` also against the qrels filled by UMBRELA, ragscale.metrics.qrels_fill), so a
full-RAG run (MT-RAG's task C) gets its retrieval figures beside its generation metrics from the
same records. Writes ``retrieval.json`` (per model: the figures per query, per collection and
overall, the tasks without qrels) and ``retrieval.md`` (the tables of ragscale.report.qrels_text,
which the ``ragscale retrieval`` command prints).
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from ragscale.errors import UserError
from ragscale.io.qrels import run_qrels
from ragscale.report.qrels_text import tables

FILES = ("retrieval.json", "retrieval.md")


def open_sink(settings: Any, plan: Any, out_dir: str) -> "QrelsSink | None":
    """The sink of a run with ``qrels.file`` (ragscale.report.sinks.SinkSpec's ``open``)."""
    q = run_qrels(settings)
    return QrelsSink(out_dir, q, getattr(plan, "columns", None)) if q else None


def check(settings: Any, metrics: Sequence[str]) -> None:
    """qrels.* before any work: pytrec_eval installed, the cut-offs and measures, UMBRELA's grades
    in the run for ``fill: umbrela``, the qrels readable (a one-line UserError)."""
    q = run_qrels(settings)
    if not q:
        return
    from ragscale.extras import install_hint, missing
    from ragscale.io.qrels import read_collection_qrels
    from ragscale.metrics.qrels_retrieval import names

    if missing("qrels") is not None:
        raise UserError(f"qrels.file needs pytrec_eval: {install_hint('qrels')}")
    names(list(q["k"]), list(q["measures"]))
    if q.get("fill") not in (None, "umbrela"):
        raise UserError(f"qrels.fill must be umbrela or null, got {q['fill']!r}")
    if q.get("fill") and "umbrela_scores" not in metrics:
        raise UserError("qrels.fill=umbrela fills the qrels' holes with UMBRELA's grades: add the retrieval step "
                        "(e.g. +scenario=trec steps=[retrieval])")
    read_collection_qrels(q["file"])


class QrelsSink:
    """A report sink (ragscale.report.sinks.Sink): collects each model's retrieval records;
    ``finish`` scores them and writes retrieval.json and retrieval.md."""

    def __init__(self, out_dir: str, conf: dict, columns: dict[str, str] | None = None):
        from ragscale.io.qrels import read_collection_qrels

        self.out_dir, self.conf, self.columns = out_dir, conf, columns or {}
        self.qrels = read_collection_qrels(conf["file"])
        self.records: dict[str, list[dict]] = {}
        self.without_ids: dict[str, int] = {}  # records whose passages carry no document_id

    def add(self, rec: dict) -> None:
        from ragscale.metrics.qrels_retrieval import retrieval_record

        model = str(rec.get("model_id"))
        scored = retrieval_record(rec, rec.get("task_id"), self.columns)
        if scored is None:
            self.without_ids[model] = self.without_ids.get(model, 0) + 1
            return
        scored["metrics"] = {"umbrela_scores": (rec.get("metrics") or {}).get("umbrela_scores")}
        self.records.setdefault(model, []).append(scored)

    def blocks(self) -> dict[str, dict]:
        """Each model's figures (``ragscale retrieval --json``'s block, with ``without_ids``)."""
        from ragscale.metrics.qrels_fill import filled_block
        from ragscale.metrics.qrels_retrieval import run_of, score_collections

        c = self.conf
        score = dict(k_values=list(c["k"]), measures=list(c["measures"]), digits=5 if c.get("mtrag_rounding") else None,
                     ignore_identical_ids=not c.get("keep_identical_ids"))
        out = {}
        for model in sorted(set(self.records) | set(self.without_ids)):
            recs = self.records.get(model, [])
            run, collection_of = run_of(recs)
            block = score_collections(self.qrels, run, collection_of, **score)
            block["without_ids"] = self.without_ids.get(model, 0)
            if c.get("fill") == "umbrela":
                block["filled"] = filled_block(recs, self.qrels, run, collection_of, score)
            out[model] = block
        return out

    def finish(self, done: Any) -> dict[str, list[str]]:
        """Write retrieval.json and retrieval.md: run.json's ``outputs`` entry."""
        return {"retrieval": [os.path.relpath(p, done.out_dir) for p in self.write()]}

    def write(self) -> list[str]:
        """Write retrieval.json and retrieval.md; their paths."""
        blocks = self.blocks()
        paths = [os.path.join(self.out_dir, f) for f in FILES]
        with open(paths[0], "w", encoding="utf-8") as fh:
            json.dump(blocks, fh, indent=2)
        lines = [line for model, block in blocks.items() for line in tables(model, block, "retrieval.json")]
        with open(paths[1], "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines).rstrip() + "\n")
        return paths
