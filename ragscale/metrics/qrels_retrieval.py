"""Retrieval against human qrels, as IBM's MT-RAG benchmark scores its retrieval task (task A, and
the retrieval half of task C: scripts/evaluation/run_retrieval_eval.py).

The measures are trec_eval's, through pytrec_eval (the ``pytrec-eval-terrier`` build): the
library MT-RAG's script calls, so the figures are the reference's own rather than a
re-implementation's (ranx re-implements them with numba; ir-measures wraps pytrec_eval). Per
query: ``Recall@k`` (trec_eval ``recall``), ``nDCG@k`` (``ndcg_cut``), and where asked ``MAP@k``
(``map_cut``), ``P@k`` (``P``) and ``MRR`` (``recip_rank``). What MT-RAG's script does, and so
does this module (docs/metrics.md, "Retrieval against qrels"):

- a retrieved passage whose id equals the query id is dropped (``ignore_identical_ids``);
- a passage retrieved twice keeps its last score (the run is a dict per query);
- a query without qrels is not scored (trec_eval skips it); one with qrels and no passage scores 0;
- per collection, each measure is the mean over the scored queries; the overall figure is the
  mean of the collections' figures weighted by their number of tasks (scored or not: the
  script's ``count``). ``digits=5`` rounds the collection means before weighting, as the script.

Unlike the script, a collection with no scored query has no figure (None) and no weight (the
script divides by zero), and the queries without qrels are counted and named.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from ragscale.errors import UserError
from ragscale.io.qrels import Qrels, query_key

MEASURES = {"Recall": "recall", "nDCG": "ndcg_cut", "MAP": "map_cut", "P": "P"}  # per cut-off k
MRR = ("MRR", "recip_rank")
DEFAULT_K = (1, 3, 5, 10)  # MT-RAG's README table (its script computes 1, 3, 5)
DEFAULT_MEASURES = ("Recall", "nDCG")  # what MT-RAG reports

Run = dict[str, dict[str, float]]


def names(k_values: Sequence[int] = DEFAULT_K, measures: Sequence[str] = DEFAULT_MEASURES) -> list[str]:
    """The per-query figures' names, e.g. ``Recall@1`` ... ``nDCG@10``, ``MRR``, in that order."""
    _check(k_values, measures)
    return [f"{m}@{k}" for m in measures if m in MEASURES for k in k_values] + (["MRR"] if "MRR" in measures else [])


def _check(k_values: Sequence[int], measures: Sequence[str]) -> None:
    bad = [m for m in measures if m not in MEASURES and m != MRR[0]]
    if bad:
        raise UserError(f"unknown retrieval measure(s) {', '.join(map(repr, bad))}; known: {', '.join([*MEASURES, MRR[0]])}")
    if not k_values or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in k_values):
        raise UserError(f"retrieval cut-offs must be positive integers, got {list(k_values)!r}")


def run_of(records: Iterable[Mapping[str, Any]]) -> tuple[Run, dict[str, str | None]]:
    """MT-RAG retrieval records (``task_id``, ``Collection``, ``contexts`` with ``document_id`` and
    ``score``) as a run ``{query key: {document id: score}}`` and each query's collection. A record
    whose passages carry no score (MT-RAGun's references) is ranked in its list's order."""
    run: Run = {}
    collection: dict[str, str | None] = {}
    for rec in records:
        qid = query_key(rec["task_id"])
        ctxs = list(rec.get("contexts") or [])
        by_position = any(c.get("score") is None for c in ctxs)
        docs: dict[str, float] = {}
        for i, ctx in enumerate(ctxs):
            docs[str(ctx["document_id"])] = float(len(ctxs) - i) if by_position else float(ctx["score"])
        run[qid] = docs
        coll = rec.get("Collection")
        collection[qid] = None if coll is None else str(coll)
    return run, collection


def retrieval_record(obj: Mapping[str, Any], task_id: Any, columns: Mapping[str, str] | None = None) -> dict | None:
    """What :func:`run_of` reads of a record (``task_id``, ``Collection``, ``contexts`` as
    ``document_id`` and ``score``, a score that is no number as None), or None when the record
    cannot be scored: no task id, or a passage without a ``document_id``. ``columns``: the user's
    column names (ragscale.columns), e.g. ``{"contexts": "docs"}``."""
    from ragscale.columns import RAGAS_CONTEXTS, remap

    view = remap(obj, dict(columns or {}))
    ctxs = next((view[k] for k in RAGAS_CONTEXTS if view.get(k) is not None), None)  # ragas' name first, as read
    if task_id is None or not isinstance(ctxs, list) or any(
            not isinstance(c, dict) or c.get("document_id") in (None, "") for c in ctxs):
        return None
    return {"task_id": task_id, "Collection": obj.get("Collection"),
            "contexts": [{"document_id": c["document_id"], "score": _number(c.get("score"))} for c in ctxs]}


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def evaluate(qrels: Qrels, run: Run, k_values: Sequence[int] = DEFAULT_K, measures: Sequence[str] = DEFAULT_MEASURES,
             ignore_identical_ids: bool = True) -> dict[str, dict[str, float]]:
    """Per scored query (a query of ``run`` with qrels), its figures by :func:`names`."""
    import pytrec_eval

    _check(k_values, measures)
    cut = ",".join(str(k) for k in k_values)
    asked = {f"{MEASURES[m]}.{cut}" for m in measures if m in MEASURES} | ({MRR[1]} if MRR[0] in measures else set())
    docs = {q: {d: s for d, s in ranked.items() if not (ignore_identical_ids and d == q)} for q, ranked in run.items()}
    scores = pytrec_eval.RelevanceEvaluator(qrels, asked).evaluate(docs)
    out = {}
    for q, got in scores.items():
        row = {f"{m}@{k}": float(got[f"{MEASURES[m]}_{k}"]) for m in measures if m in MEASURES for k in k_values}
        if MRR[0] in measures:
            row["MRR"] = float(got[MRR[1]])
        out[q] = row
    return out


def qrels_of_collection(by_collection: Mapping[str | None, Qrels], collection: str | None) -> Qrels | None:
    """The qrels of a collection: the one file for all (key None), the exact name, or the one key
    that is part of the name (``clapnq`` for MT-RAG's ``mt-rag-clapnq-elser-512-100-20240503``)."""
    if None in by_collection:
        return by_collection[None]
    if collection is None:
        return None
    if collection in by_collection:
        return by_collection[collection]
    inside = [k for k in by_collection if k and k.lower() in collection.lower()]
    if len(inside) > 1:
        raise UserError(f"collection {collection!r} matches several qrels keys ({', '.join(sorted(inside))}); "
                        "name it exactly")
    return by_collection[inside[0]] if inside else None


def score_collections(by_collection: Mapping[str | None, Qrels], run: Run, collection_of: Mapping[str, str | None],
                      k_values: Sequence[int] = DEFAULT_K, measures: Sequence[str] = DEFAULT_MEASURES,
                      digits: int | None = None, ignore_identical_ids: bool = True) -> dict:
    """Per query, per collection and overall (module docstring): ``{"queries": {query: figures},
    "collections": {name: {"count", "scored", "without_qrels": [...], figure: mean | None}},
    "all": {"count", "scored", figure: weighted mean | None}}``."""
    figures = names(k_values, measures)
    per_query: dict[str, dict[str, float]] = {}
    collections: dict[str, dict] = {}
    for coll in sorted({c for c in collection_of.values()}, key=lambda c: (c is None, c or "")):
        queries = {q: run[q] for q, c in collection_of.items() if c == coll}
        qrels = qrels_of_collection(by_collection, coll)
        scored = evaluate(qrels, queries, k_values, measures, ignore_identical_ids) if qrels else {}
        per_query.update(scored)
        means = {f: (_round(math.fsum(s[f] for s in scored.values()) / len(scored), digits) if scored else None)
                 for f in figures}
        collections[str(coll)] = {"count": len(queries), "scored": len(scored), "qrels": qrels is not None,
                                  "without_qrels": sorted(q for q in queries if q not in scored), **means}
    weighted = [c for c in collections.values() if c["scored"]]
    total = sum(c["count"] for c in weighted)
    overall = {f: (math.fsum(c[f] * c["count"] for c in weighted) / total if total else None) for f in figures}
    return {"queries": per_query, "collections": collections, "measures": figures,
            "all": {"count": sum(c["count"] for c in collections.values()),
                    "scored": sum(c["scored"] for c in collections.values()), **overall}}


def _round(value: float, digits: int | None) -> float:
    return value if digits is None else round(value, digits)


def record_figures(by_collection: Mapping[str | None, Qrels], records: Sequence[Mapping[str, Any]],
                   k_values: Sequence[int] = DEFAULT_K, measures: Sequence[str] = DEFAULT_MEASURES,
                   ignore_identical_ids: bool = True) -> list[dict[str, float] | None]:
    """Each record's own figures (records as :func:`run_of` reads them: the per-record figures of a
    run's records.jsonl), None for a record whose query has no qrels. The figures of a query are
    those :func:`score_collections` gives it; records are evaluated in rounds in which a query
    occurs once (several models' records of one query in a batch)."""
    out: list[dict[str, float] | None] = [None] * len(records)
    rounds: list[tuple[Qrels, dict[str, int], Run]] = []  # (qrels, query -> record, run)
    for i, rec in enumerate(records):
        run, collection = run_of([rec])
        (query, docs), = run.items()
        qrels = qrels_of_collection(by_collection, collection[query])
        if not qrels or query not in qrels:
            continue
        slot = next((r for r in rounds if r[0] is qrels and query not in r[1]), None)
        if slot is None:
            slot = (qrels, {}, {})
            rounds.append(slot)
        slot[1][query], slot[2][query] = i, docs
    for qrels, at, run in rounds:
        for query, got in evaluate({q: qrels[q] for q in run}, run, k_values, measures, ignore_identical_ids).items():
            out[at[query]] = got
    return out
