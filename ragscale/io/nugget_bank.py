"""One nugget bank per query (``nuggets.bank=per_query``): the pooled passages, the bank's key,
and ``nuggets.jsonl``.

castorini/nuggetizer (the TREC 2024 RAG AutoNuggetizer) creates **one** nugget list per query from
the pooled documents and assigns every run's answer against it; open-rag-eval creates nuggets per
answer from that answer's own passages. In a sweep the second grades two models whose retrievers
returned different passages against different lists, so ragscale builds one bank per query there
(docs/metrics.md, "One nugget bank per query"). Pure functions: the driver reads the records, the
judge pool builds the banks (ragscale.pipeline.nugget_bank), the nuggets judge assigns
(ragscale.judges.nuggets ``bank=``).

Pooling, per task id (the query across models and repeated runs): the records that read without
an error, ordered by (model, record key); their passages taken rank by rank across the records
(every record's first passage, then every second one: TREC's depth pooling, so the creation
windows see the top-ranked passages first), a passage whose text was seen already left out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Iterable, Mapping, Sequence

from ragscale.errors import UserError

MODES = ("auto", "per_query", "per_record")
POOLED = ("key", "model_id", "task_id", "query", "passages", "passage_ids", "error")  # the fields ``pool`` reads
FILE = "nuggets.jsonl"
# UMBRELA's reference protocol skips a record without an answer; a bank row has none, so it
# carries this text, which no prompt of UMBRELA or of the bank's rounds reads.
NO_ANSWER = "(a query's nugget bank: no answer is judged)"
_RANK_ID = re.compile(r"^\[\d+\]$")  # a passage id made of its rank (ragscale.record.passage_ids_of)


def mode(asked: str, models: int) -> str:
    """The bank mode a run uses: ``auto`` is ``per_query`` when the records hold two models or
    more (a sweep), else ``per_record`` (open-rag-eval's, for one model)."""
    if asked not in MODES:
        raise UserError(f"nuggets.bank must be one of {', '.join(MODES)}, got {asked!r}")
    if asked != "auto":
        return asked
    return "per_query" if models >= 2 else "per_record"


def pool(rows: Iterable[Mapping[str, Any]]) -> list[dict]:
    """One bank row per task id from the records' rows (``Record.to_row``), in task-id order:
    the query, the pooled passages and their ids, the models and records pooled. A record with an
    error or without a task id is not pooled."""
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if not row.get("error") and row.get("task_id") is not None:
            by_task.setdefault(str(row["task_id"]), []).append(row)
    out = []
    for task in sorted(by_task):
        recs = sorted(by_task[task], key=lambda r: (str(r.get("model_id")), str(r.get("key"))))
        texts: list[str] = []
        ids: list[str] = []
        seen: set[str] = set()
        depth = max(len(r.get("passages") or ()) for r in recs)
        for rank in range(depth):
            for r in recs:
                passages = r.get("passages") or ()
                if rank < len(passages) and passages[rank] not in seen:
                    seen.add(passages[rank])
                    texts.append(passages[rank])
                    ids.append(_passage_id(r, rank))
        queries = [r.get("query") or "" for r in recs]
        query = next((q for q in queries if q.strip()), "")
        out.append({"key": f"bank:{task}", "task_id": task, "model_id": "", "query": query,
                    "prediction": NO_ANSWER, "passages": texts, "passage_ids": ids, "metrics": {}, "judge_errors": [],
                    "details": {}, "models": sorted({str(r.get("model_id")) for r in recs}), "records": len(recs),
                    "queries": len(set(queries))})
    return out


def _passage_id(row: Mapping[str, Any], rank: int) -> str:
    """A pooled passage's id: the record's own, or ``<model>[<rank>]`` where the record has none."""
    ids = row.get("passage_ids") or ()
    own = str(ids[rank]) if rank < len(ids) else f"[{rank + 1}]"
    return f"{row.get('model_id')}{own}" if _RANK_ID.match(own) else own


def bank_key(row: Mapping[str, Any], judge: Mapping[str, Any]) -> str:
    """What a bank depends on, hashed: the query, the pooled passages, and the judge that builds
    it (``judge``: its engine, model, protocol and the prompts' version). A bank in an earlier
    ``nuggets.jsonl`` with the same key is reused as it is."""
    blob = json.dumps([row["query"], row["passages"], row["passage_ids"], dict(judge)], sort_keys=True,
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def reuse(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], given: Mapping[str, dict],
          earlier: Mapping[str, dict]) -> tuple[list[dict], list[tuple[Mapping[str, Any], str]]]:
    """(the banks reused, the (row, key) pairs still to build). A query in ``given``
    (``nuggets.bank_file``) takes that bank as it is; else an ``earlier`` bank (this output_dir's
    ``nuggets.jsonl``, a resumed run) with the same key that did not fail; else it is built."""
    entries: list[dict] = []
    todo: list[tuple[Mapping[str, Any], str]] = []
    for row, key in zip(rows, keys):
        old = earlier.get(row["task_id"])
        if row["task_id"] in given:
            entries.append(given[row["task_id"]])
        elif old is not None and old.get("key") == key and not old.get("failed"):
            entries.append(old)
        else:
            todo.append((row, key))
    return entries, todo


def entry(row: Mapping[str, Any], key: str, result: Mapping[str, Any] | None, failure: str | None) -> dict:
    """One line of ``nuggets.jsonl``: the task, its query, the bank's key, what was pooled, and the
    bank (``nuggets``: id, text, importance) or why it failed (``failed``)."""
    out = {"task_id": row["task_id"], "query": row["query"], "key": key, "models": list(row["models"]),
           "records": row["records"], "passages": len(row["passages"])}
    if row.get("queries", 1) > 1:
        out["queries"] = row["queries"]  # the records of the task do not all ask the same question
    if failure is not None or not result:
        out["failed"] = failure or "no bank"
        return out
    out.update(nuggets=list(result["nuggets"]), created=result["created"], windows=result["windows"],
               passages_used=list(result.get("passages_used", ())),
               passages_ungraded=list(result.get("passages_ungraded", ())))
    return out


def read(path: str) -> dict[str, dict]:
    """A ``nuggets.jsonl`` (ours, or one a person edited): task id -> entry. A line that is no
    bank, or a nugget without text or importance, is a one-line UserError naming the line."""
    from ragscale.metrics.nuggets import IMPORTANCES

    out: dict[str, dict] = {}
    try:
        fh = open(path, encoding="utf-8")
    except OSError as e:
        raise UserError(f"nuggets.bank_file: cannot read {path}: {e.strerror}") from None
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
                if not isinstance(e, dict) or "task_id" not in e:
                    raise ValueError("not an object with a task_id")
                for k, nug in enumerate(e.get("nuggets") or ()):
                    if not isinstance(nug, dict) or not str(nug.get("text", "")).strip() \
                            or nug.get("importance") not in IMPORTANCES:
                        raise ValueError(f"nugget {k + 1} needs a text and an importance in {IMPORTANCES}")
                    nug.setdefault("id", f"n{k + 1}")
                if not e.get("failed") and not e.get("nuggets"):
                    raise ValueError("no nuggets and no failure")
            except ValueError as err:
                raise UserError(f"{path}: line {n} is not a nugget bank: {err}") from None
            e.setdefault("key", "file")
            out[str(e["task_id"])] = e
    return out


def write(path: str, entries: Sequence[Mapping[str, Any]]) -> None:
    """``nuggets.jsonl``, in task-id order, replaced at once (a killed run leaves the old one)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for e in sorted(entries, key=lambda e: str(e["task_id"])):
            fh.write(json.dumps(e, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def banks(entries: Iterable[Mapping[str, Any]]) -> dict[str, dict]:
    """The nuggets judge's ``bank`` option: task id -> {key, nuggets} or {key, failed}."""
    return {str(e["task_id"]): ({"key": e["key"], "failed": e["failed"]} if e.get("failed")
                                else {"key": e["key"], "nuggets": [dict(n) for n in e["nuggets"]]})
            for e in entries}
