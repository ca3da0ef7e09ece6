"""ragscale records as open-rag-eval's TREC results CSV, so that its viewers read our runs.

Layout (vectara/open-rag-eval ``open_rag_eval/evaluators/trec_evaluator.py``,
``TRECEvaluator.to_csv`` / ``get_consolidated_columns``): one row per query_id;
``query_id``, ``query``, then for each run ``i`` (1-based position of the query's runs,
sorted by ``query_run``) the columns ``run_{i}_<field>`` with ``<field>`` in
``RUN_FIELDS``. Every run is prefixed, ``run_1_`` included, exactly as ``to_csv`` writes
(the plot code reads ``X`` or ``run_1_X``; the viewer ``viz/visualize.py`` only reads
``run_N_X``). Each cell is ``json.dumps`` of the value (a float ``0.5`` is ``0.5``; dicts
and lists are JSON); a missing value is an empty cell (pandas' NaN). A column that is
empty in every row is left out, as pandas' ``DataFrame(list_of_dicts)`` does.

Cell contents (ragscale metric names in ``record["metrics"]``):

* ``retrieved_passages``: ``{passage_id: text}``; ``generated_answer``:
  ``[{"text", "citations"}]`` (open-rag-eval's answer-part parsing).
* ``retrieval_score_umbrela_scores``: ``{passage_id: umbrela_scores[i]}`` (null for a
  passage the judge failed on; open-rag-eval would have failed the whole query).
* ``retrieval_score_precision_metrics``: ``{"precision@": {"k": P@k}, "AP@": {"k": AP@k},
  "MRR": MRR}`` with the ``P@k``/``AP@k`` keys present (null values left out, as
  open-rag-eval leaves out k larger than the number of passages).
* ``retrieval_score_mean_umbrela_score``: ``umbrela_mean``.
* ``generation_score_autonugget_scores``: ``{"nuggetizer_scores": {"All", "All Strict",
  "Vital", "Vital Strict", "Weighted", "Weighted Strict"}, "nuggets", "labels",
  "assignments", "assignment_scores"}``; the lists come from
  ``ragscale.details.nuggets`` (``{"nuggets": [str], "labels": [...], "assignments":
  [...]}`` or ``{"nuggets": [{"text"|"nugget", "label"|"importance", "assignment"}]}``)
  and are left out when absent (a partial cell).
* ``generation_score_mean_nugget_assignment_score``: ``nuggets_assignment_mean``;
  ``generation_score_vital_nuggetizer_score``: ``nuggets_vital``;
  ``generation_score_hallucination_score``: ``hhem``;
  ``generation_score_citation_f1_score``: ``citation_f1``.
* ``generation_score_citation_scores``: ``{"citation_score_[k]": mean, ...,
  "part_score_i": mean, ..., "weighted_precision", "weighted_recall", "f1"}``; the
  per-citation/per-part entries are rebuilt from ``ragscale.details.citation`` when it
  lists the judged (part, citation) pairs (``{"pairs"|"labels": [{"part": i (1-based),
  "citation": "[k]", "score": float | "label": "full_support"|...}]}``) or already holds
  open-rag-eval's ``citation_score_*``/``part_score_*`` keys; otherwise the cell has only
  the three totals (a partial cell).
* ``generation_score_no_answer_score``: ``{"query_answered": "yes"|"no"}`` from
  ``answered`` (1.0/0.0).

Which records become runs: a record that failed at input (``input_error``, ``error.stage ==
"input"``) is left out, and a query with no run left has no row. A record without an answer
(``answer_status`` NO_ANSWER, API_ERROR or missing, or a blank answer) is written, unlike
open-rag-eval, whose loader skips it: its answer cell is the input's marker
(``[{"text": "NO_ANSWER", "citations": []}]``; an empty part for a missing or blank answer) and its
scores are ragscale's, so that open-rag-eval's plots and viewer count the run (its "questions
answered" share is then ragscale's mean of ``answered``: a NO_ANSWER run is "no"; under the
``reference`` protocol, whose ``answered`` is null for it, the cell is empty and the share skips
it, as open-rag-eval does). A record with another ``error`` is written as open-rag-eval writes a
run whose evaluation raised: passages and answer, no score cells. A score ragscale could not compute is an empty cell
(open-rag-eval fills a failed nugget evaluation with 0.5; we do not invent scores, except
under the ``reference`` judging protocol, whose nugget judge writes open-rag-eval's 0.5 into
``nuggets_vital`` and ``nuggets_assignment_mean`` with ``details.nuggets.failed``: those two
cells are 0.5 and the autonugget cell is ``{}``, as open-rag-eval writes them).
Unlike ``to_csv`` with ``run_consistency: false`` (first run only), every run is written.
Records not read from an open-rag-eval CSV (MT-RAG) are written too: ``query_id`` is their
``task_id``, ``query`` the last user turn, passages ``[1]``, ``[2]``, ... their contexts.
The query, answer, answer status and passage ids are the record's fields as the reader read them
(ragscale.record_fields); the passage texts come from its input part (open-rag-eval's ``passages``,
MT-RAG's ``contexts``), which the fields do not keep.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Iterable

from ragscale.io.orag_results import CELLS, CITATION_TOTALS, NUGGET_SCORES
from ragscale.io.output import RECORDS, iter_records
from ragscale.metrics.trec import parse_generated_answer
from ragscale.record_fields import RecordFields, record_fields
from ragscale.report.safe import console_name, csv_writer, file_name

RUN_FIELDS = (
    "retrieved_passages",
    "generated_answer",
    "retrieval_score_umbrela_scores",
    "retrieval_score_precision_metrics",
    "retrieval_score_mean_umbrela_score",
    "generation_score_autonugget_scores",
    "generation_score_mean_nugget_assignment_score",
    "generation_score_vital_nuggetizer_score",
    "generation_score_hallucination_score",
    "generation_score_citation_scores",
    "generation_score_citation_f1_score",
    "generation_score_no_answer_score",
)
EXPORT_DIR = "open-rag-eval"
_ASSIGNMENT_SCORE = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
_SUPPORT_SCORE = {"full_support": 1.0, "partial_support": 0.5, "no_support": 0.0}
_K = re.compile(r"^(P|AP)@(\d+)$")


def columns(n_runs: int) -> list[str]:
    """All columns of a results CSV whose queries have up to ``n_runs`` runs (the order of
    open-rag-eval's ``get_consolidated_columns``)."""
    return ["query_id", "query"] + [f"run_{i}_{f}" for i in range(1, n_runs + 1) for f in RUN_FIELDS]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _passages(rec: dict, fields: RecordFields | None = None) -> list[tuple[str, str]]:
    """(passage id, text): the texts from the record's input part, the ids from its fields
    (default ``record_fields(rec)``) when they name as many passages, else from the input part."""
    ps = rec.get("passages")
    if isinstance(ps, list) and all(isinstance(p, dict) for p in ps):
        out = [(str(p.get("id")), str(p.get("text") or "")) for p in ps]
    elif isinstance(rec.get("contexts"), list):  # MT-RAG records: citations [k] are 1-based ranks
        out = [(f"[{i + 1}]", str(c.get("text", "") if isinstance(c, dict) else c)) for i, c in enumerate(rec["contexts"])]
    else:
        return []
    ids = (record_fields(rec) if fields is None else fields).passage_ids
    return list(zip(ids, (t for _, t in out))) if ids is not None and len(ids) == len(out) else out


def _answer(fields: RecordFields) -> str | None:
    """The record's answer, ``None`` when it has none or only blanks."""
    a = fields.answer
    return a if a and a.strip() else None


def _skipped(rec: dict, fields: RecordFields | None = None) -> bool:
    """Whether the record is left out (module docstring): it failed at input. ``fields``: its
    fields, default ``record_fields(rec)`` (unused: a record without an answer is written)."""
    err = rec.get("error")
    return bool(rec.get("input_error") or (isinstance(err, dict) and err.get("stage") == "input"))


def _precision_cell(m: dict) -> dict | None:
    found: dict[str, list[tuple[int, float]]] = {"P": [], "AP": []}
    for key, value in m.items():
        hit = _K.match(key)
        if hit and _num(value) is not None:
            found[hit.group(1)].append((int(hit.group(2)), value))
    cell: dict[str, Any] = {}
    for name, short in (("precision@", "P"), ("AP@", "AP")):
        if found[short]:
            cell[name] = {str(k): v for k, v in sorted(found[short])}
    if _num(m.get("MRR")) is not None:
        cell["MRR"] = m["MRR"]
    return cell or None


def _nugget_cell(m: dict, details: dict) -> dict | None:
    d = details.get("nuggets") if isinstance(details.get("nuggets"), dict) else {}
    if d.get("failed"):  # reference protocol: open-rag-eval's neutral 0.5 is not a nuggetizer score
        return {}
    scores = {name: m[key] for name, key in NUGGET_SCORES if _num(m.get(key)) is not None}
    items = d.get("nuggets")
    nuggets = labels = assignments = None
    if isinstance(items, list) and items and all(isinstance(x, dict) for x in items):
        nuggets = [x.get("text", x.get("nugget")) for x in items]
        labels = [x.get("label", x.get("importance")) for x in items]
        assignments = [x.get("assignment") for x in items]
    elif isinstance(items, list):
        nuggets, labels, assignments = items, d.get("labels"), d.get("assignments")
    if not scores and nuggets is None:
        return None
    cell: dict[str, Any] = {"nuggetizer_scores": scores}
    if nuggets is not None:
        cell["nuggets"] = nuggets
        if isinstance(labels, list) and any(x is not None for x in labels):
            cell["labels"] = labels
        if isinstance(assignments, list) and any(x is not None for x in assignments):
            cell["assignments"] = assignments
            given = d.get("assignment_scores")
            cell["assignment_scores"] = given if isinstance(given, list) else [
                _ASSIGNMENT_SCORE.get(a, 0.0) for a in assignments
            ]
    return cell


def _citation_cell(m: dict, details: dict, answer: str) -> dict | None:
    totals = {key: m[metric] for key, metric in CITATION_TOTALS if _num(m.get(metric)) is not None}
    d = details.get("citation") if isinstance(details.get("citation"), dict) else {}
    cell: dict[str, Any] = {}
    native = [k for k in d if k.startswith(("citation_score_", "part_score_"))]
    pairs = d.get("pairs", d.get("labels"))
    if pairs is None and isinstance(d.get("parts"), list):  # ragscale.judges.citation's details
        pairs = [{"part": i, "citation": c.get("id"), "label": c.get("support")}
                 for i, part in enumerate(d["parts"], start=1) if isinstance(part, dict)
                 for c in part.get("citations") or [] if isinstance(c, dict) and c.get("support")]
    if native:
        cell = {k: d[k] for k in sorted(native, key=lambda k: not k.startswith("citation_score_"))}
    elif isinstance(pairs, list):
        # rebuild open-rag-eval's dicts (citation_metric.py): parts in order, an uncited part
        # scores 0; citation averages in order of first judged use
        by_citation: dict[str, list[float]] = {}
        by_part: dict[int, list[float]] = {}
        judged: dict[int, list[tuple[str, float]]] = {}
        for p in pairs:
            if not isinstance(p, dict):
                continue
            score = _num(p.get("score"))
            if score is None:
                score = _SUPPORT_SCORE.get(str(p.get("label")))
            part = p.get("part")
            if score is None or not isinstance(part, int):
                continue
            judged.setdefault(part, []).append((str(p.get("citation")), score))
        for i, part in enumerate(parse_generated_answer(answer), start=1):
            if not part["citations"]:
                by_part[i] = []
            for cit, score in judged.get(i, []):
                by_citation.setdefault(cit, []).append(score)
                by_part.setdefault(i, []).append(score)
        cell.update({f"citation_score_{c}": sum(s) / len(s) for c, s in by_citation.items()})
        cell.update({f"part_score_{i}": (sum(s) / len(s) if s else 0.0) for i, s in by_part.items()})
    if not cell and not totals:
        return None
    cell.update(totals)
    return cell


def _run_cells(rec: dict, fields: RecordFields) -> dict[str, Any]:
    """The ``RUN_FIELDS`` values of one record (missing ones left out)."""
    passages = _passages(rec, fields)
    answer = _answer(fields) or ""
    status = fields.answer_status or "ok"
    cells: dict[str, Any] = {
        "retrieved_passages": dict(passages),
        # a run with no answer: its input's marker (NO_ANSWER, API_ERROR) as the answer's one part
        "generated_answer": parse_generated_answer(answer if status == "ok" or status == "missing" else status),
    }
    if rec.get("error"):
        return cells
    m = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    details = (rec.get("ragscale") or {}).get("details") or {}
    umbrela = m.get("umbrela_scores")
    if isinstance(umbrela, list) and umbrela and len(umbrela) == len(passages):
        cells["retrieval_score_umbrela_scores"] = {pid: s for (pid, _), s in zip(passages, umbrela)}
    cells["retrieval_score_precision_metrics"] = _precision_cell(m)
    cells["generation_score_autonugget_scores"] = _nugget_cell(m, details)
    cells["generation_score_citation_scores"] = _citation_cell(m, details, answer)
    cells.update({field: _num(m.get(metric)) for field, metric in CELLS})
    answered = _num(m.get("answered"))
    if answered is not None:
        cells["generation_score_no_answer_score"] = {"query_answered": "yes" if answered >= 0.5 else "no"}
    return {k: v for k, v in cells.items() if v is not None}


def _order(rec: dict, seq: int) -> tuple:
    lines = rec.get("csv_lines")
    prov = rec.get("ragscale") or {}
    line = lines[0] if isinstance(lines, list) and lines else prov.get("source_line")
    return (str(prov.get("source_file") or ""), line if isinstance(line, int) else seq, seq)


class _Table:
    """One model's results CSV, accumulated a record at a time: per query its runs' cells."""

    def __init__(self) -> None:
        self.queries: dict[str, dict] = {}
        self.seq = 0

    def add(self, rec: dict) -> None:
        seq, self.seq = self.seq, self.seq + 1
        fields = record_fields(rec)
        if _skipped(rec, fields):
            return
        prov = rec.get("ragscale") or {}
        qid = rec.get("query_id") or rec.get("task_id") or prov.get("record_key") or f"record-{seq}"
        q = self.queries.setdefault(str(qid), {"query": fields.query or "", "order": _order(rec, seq), "runs": []})
        q["order"] = min(q["order"], _order(rec, seq))
        run = rec.get("query_run")
        q["runs"].append((run if isinstance(run, int) else 1, _order(rec, seq), _run_cells(rec, fields)))

    def write(self, out_path: str) -> int:
        """Write the CSV atomically (temp file + rename); returns the number of rows (queries)."""
        rows = []
        n_runs = 0
        for qid, q in sorted(self.queries.items(), key=lambda kv: kv[1]["order"]):
            row = {"query_id": qid, "query": q["query"]}
            runs = sorted(q["runs"], key=lambda r: (r[0], r[1]))
            n_runs = max(n_runs, len(runs))
            for i, (_, _, cells) in enumerate(runs, start=1):
                for field, value in cells.items():
                    row[f"run_{i}_{field}"] = json.dumps(value)
            rows.append(row)
        header = [c for c in columns(n_runs) if c in ("query_id", "query") or any(c in r for r in rows)]
        d = os.path.dirname(os.path.abspath(out_path))
        os.makedirs(d, exist_ok=True)
        tmp = f"{out_path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "w", newline="", encoding="utf-8") as fh:
                w = csv_writer(fh, lineterminator="\n")  # pandas' to_csv: minimal quoting, \n
                w.writerow(header)
                for row in rows:
                    w.writerow([row.get(c, "") for c in header])
            os.replace(tmp, out_path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return len(rows)


def export_orag_csv(records: Iterable[dict], out_path: str) -> int:
    """Write ``records`` (ragscale output records) as open-rag-eval's TREC results CSV
    (``TRECEvaluator.to_csv`` layout, see the module docstring); returns the number of
    rows (queries) written. Rows follow the input order (source file, CSV line), runs
    within a row ascend by ``query_run``. Written atomically (temp file + rename)."""
    table = _Table()
    for rec in records:
        table.add(rec)
    return table.write(out_path)


class OragSink:
    """``<run_dir>/open-rag-eval/<model_id>.csv``, one results CSV per model, from one pass
    over the records (shared with the other report sinks). The file name is the model id when it
    is made of letters, digits, ``.``, ``_`` and ``-`` only; otherwise the others become ``_``, at
    most 64 are kept, and ``-<8 hex of the id's sha1>`` follows (``org/model`` ->
    ``org_model-<hash>.csv``; ragscale.report.safe.file_name), so no two models share a file and
    no name is too long. A file that cannot be written is listed in ``failures``; the others are
    written."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.tables: dict[str, _Table] = {}
        self.failures: list[str] = []

    def add(self, rec: dict) -> None:
        self.tables.setdefault(str(rec.get("model_id") or "model"), _Table()).add(rec)

    def finish(self) -> list[str]:
        """Write the CSVs; returns their paths, in the order of the model ids (which also decides
        which of two ids that share a name without case, ``Model`` and ``model``, gets the hash
        suffix: never the order the records came in)."""
        out_dir = os.path.join(self.run_dir, EXPORT_DIR)
        paths: list[str] = []
        taken: set[str] = set()
        for model_id, table in sorted(self.tables.items()):
            path = os.path.join(out_dir, file_name(model_id, taken))
            try:
                table.write(path)
            except Exception as e:  # noqa: BLE001 - one model's file failing never skips another's
                why = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}"
                self.failures.append(f"{os.path.relpath(path, self.run_dir)} of model {console_name(model_id)!r} not "
                                     f"written ({why})")
                continue
            paths.append(path)
        return paths


def export_orag_csv_by_model(run_dir: str) -> list[str]:
    """``OragSink`` over ``<run_dir>/records.jsonl``; returns the paths written."""
    sink = OragSink(run_dir)
    for rec in iter_records(os.path.join(run_dir, RECORDS)):
        sink.add(rec)
    return sink.finish()
