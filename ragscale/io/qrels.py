"""Human relevance judgments (qrels) for retrieval metrics: BEIR's TSV (``query-id corpus-id
score`` with that header, as MT-RAG ships them) or TREC's qrels (``query-id 0 doc-id relevance``,
whitespace separated, no header), one file or one per collection.

Ids are kept as written: MT-RAG's corpus ids carry the chunk's two offsets
(``822086267_7384-8758-0-1374``), and so do the ``document_id`` of its retrieval results, so the
two compare as they are (its run_retrieval_eval.py does no stripping either). Query ids: MT-RAG's
retrieval tasks write query ids as ``<conversation><::><turn>`` where its records' ``task_id`` has
``::``; :func:`query_key` is the one form both are looked up by (docs/metrics.md, "Retrieval against
qrels").
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Mapping

from ragscale.errors import UserError

BEIR_HEADER = ("query-id", "corpus-id", "score")
MTRAG_QUERY_SEPARATOR = "<::>"  # MT-RAG's retrieval tasks; its records' task_id has "::"

Qrels = dict[str, dict[str, int]]


def query_key(query_id: str) -> str:
    """The form a query id is matched in: MT-RAG's ``<::>`` written as its task ids' ``::``."""
    return str(query_id).replace(MTRAG_QUERY_SEPARATOR, "::")


def _grade(text: str, where: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{where}: relevance {text!r} is not a number") from None
    if value != int(value):
        raise UserError(f"{where}: relevance {text!r} is not a whole number (trec_eval grades are integers)")
    return int(value)


def read_qrels(path: str) -> Qrels:
    """``{query key: {corpus id: grade}}`` of a BEIR TSV or TREC qrels file; a pair judged twice
    keeps its last grade (as MT-RAG's load_qrels and trec_eval do). A malformed line is a
    UserError naming the file and line."""
    if not os.path.isfile(path):
        raise UserError(f"qrels file {path!r} does not exist")
    out: Qrels = {}
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    beir = bool(lines) and tuple(lines[0].strip().split("\t")) == BEIR_HEADER
    for no, line in enumerate(lines[1:] if beir else lines, start=2 if beir else 1):
        if not line.strip():
            continue
        where = f"{path}:{no}"
        cols = line.split("\t") if beir else line.split()
        if beir and len(cols) == 3:
            qid, doc, grade = cols
        elif not beir and len(cols) == 4:
            qid, _, doc, grade = cols
        else:
            want = "3 tab-separated columns (query-id, corpus-id, score)" if beir else \
                "4 columns (query-id, iteration, doc-id, relevance), or BEIR's header line query-id\\tcorpus-id\\tscore"
            raise UserError(f"{where}: expected {want}, got {len(cols)}")
        out.setdefault(query_key(qid), {})[doc] = _grade(grade, where)
    if not out:
        raise UserError(f"qrels file {path!r} holds no judgment")
    return out


def read_collection_qrels(spec: str | Mapping[str, str]) -> dict[str | None, Qrels]:
    """Qrels by collection: one file for every record (key None), or ``{collection: file}``."""
    if isinstance(spec, str):
        return {None: read_qrels(spec)}
    if not spec:
        raise UserError("qrels: give a file, or a mapping of collection to file")
    return {str(coll): read_qrels(str(path)) for coll, path in spec.items()}


def run_qrels(settings: Any) -> dict | None:
    """A run's qrels.* (its report settings: ragscale.report.sinks.ReportSettings) when it scores
    against qrels (``qrels.file`` set), else None."""
    q = getattr(settings, "qrels", None) or {}
    return q if q.get("file") else None


_READ: dict[str, Any] = {}  # the qrels a process last read, with what they were read from


def qrels_once(spec: str | Mapping[str, str]) -> dict[str | None, Qrels]:
    """:func:`read_collection_qrels`, read once per process while the files are unchanged (a
    pipeline worker scores every batch of a run against the same qrels)."""
    paths = [spec] if isinstance(spec, str) else [str(p) for p in spec.values()]
    stamp = (repr(spec), [_stamp(p) for p in paths])
    if _READ.get("stamp") != stamp:
        _READ.update(stamp=stamp, qrels=read_collection_qrels(spec))
    return _READ["qrels"]


def _stamp(path: str) -> tuple:
    """What tells a file's contents changed: its size and modification time (None: no file)."""
    if not os.path.isfile(path):
        return (path, None)
    st = os.stat(path)
    return (path, st.st_size, st.st_mtime_ns)


def qrels_sha256(spec: str | Mapping[str, str]) -> str | dict[str, str]:
    """The sha256 of the qrels file, or of each collection's (what a resumed run compares)."""
    def sha(path: str) -> str:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()

    return sha(spec) if isinstance(spec, str) else {str(c): sha(str(p)) for c, p in spec.items()}
