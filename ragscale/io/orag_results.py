"""open-rag-eval's TREC results CSV (``TRECEvaluator.to_csv``; ragscale's export writes the same
layout, ragscale.report.orag_export) read back as ragscale output records, so that ``ragscale
compare``, ``ragscale plot`` and ``ragscale agree`` take an open-rag-eval results file where they
take a run directory (docs/outputs.md, "open-rag-eval export").

One record per query and run: ``task_id`` and ``query_id`` are the row's ``query_id``,
``query_run`` the run's number, ``model_id`` the file's name without ``.csv``, and ``metrics`` the
run's score cells under ragscale's names (``CELLS``, ``NUGGET_SCORES``, ``CITATION_TOTALS``: the one
table the export writes from too). A run whose cells are all empty is not a run. Columns are
``run_<i>_<field>``, or ``<field>`` for run 1 (what open-rag-eval's plotting also reads).
"""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from typing import Any, Iterator

from ragscale.errors import UserError

CELLS = (  # a score cell holding one number -> ragscale metric
    ("retrieval_score_mean_umbrela_score", "umbrela_mean"),
    ("generation_score_mean_nugget_assignment_score", "nuggets_assignment_mean"),
    ("generation_score_vital_nuggetizer_score", "nuggets_vital"),
    ("generation_score_hallucination_score", "hhem"),
    ("generation_score_citation_f1_score", "citation_f1"),
)
NUGGET_SCORES = (  # open-rag-eval nuggetizer_scores key -> ragscale metric
    ("All", "nuggets_all"),
    ("All Strict", "nuggets_strict_all"),
    ("Vital", "nuggets_vital"),
    ("Vital Strict", "nuggets_strict_vital"),
    ("Weighted", "nuggets_weighted"),
    ("Weighted Strict", "nuggets_strict_weighted"),
)
CITATION_TOTALS = (("weighted_precision", "citation_precision"), ("weighted_recall", "citation_recall"),
                   ("f1", "citation_f1"))
_RUN = re.compile(r"^run_(\d+)_(.+)$")


def number(value: Any) -> float | None:
    """A finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and value not in (float("inf"), float("-inf")) else None


def is_results_csv(path: str) -> bool:
    """Whether ``path`` is a file whose header is a results CSV's (``query_id``, ``query``, then
    score fields with or without their ``run_<i>_`` prefix)."""
    if not (os.path.isfile(path) and path.lower().endswith(".csv")):
        return False
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError):
        return False
    return header[:2] == ["query_id", "query"] and any(_field(c)[1] in _SCORE_FIELDS for c in header[2:])


def _field(column: str) -> tuple[int, str]:
    m = _RUN.match(column)
    return (int(m.group(1)), m.group(2)) if m else (1, column)


def _cell(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise UserError(f"{where}: not a JSON value ({text[:60]!r})") from None


def run_metrics(cells: dict[str, Any]) -> dict[str, Any]:
    """ragscale's metrics of one run's parsed cells (field -> value)."""
    m: dict[str, Any] = {}
    for field, metric in CELLS:
        if number(cells.get(field)) is not None:
            m[metric] = number(cells[field])
    umbrela = cells.get("retrieval_score_umbrela_scores")
    if isinstance(umbrela, dict) and umbrela:
        m["umbrela_scores"] = [number(v) for v in umbrela.values()]
    prec = cells.get("retrieval_score_precision_metrics")
    if isinstance(prec, dict):
        for key, name in (("precision@", "P"), ("AP@", "AP")):
            for k, v in (prec.get(key) or {}).items():
                if number(v) is not None:
                    m[f"{name}@{k}"] = number(v)
        if number(prec.get("MRR")) is not None:
            m["MRR"] = number(prec["MRR"])
    nug = (cells.get("generation_score_autonugget_scores") or {})
    scores = nug.get("nuggetizer_scores") if isinstance(nug, dict) else None
    for key, metric in NUGGET_SCORES:
        if isinstance(scores, dict) and number(scores.get(key)) is not None:
            m.setdefault(metric, number(scores[key]))
    cit = cells.get("generation_score_citation_scores")
    for key, metric in CITATION_TOTALS:
        if isinstance(cit, dict) and number(cit.get(key)) is not None:
            m.setdefault(metric, number(cit[key]))
    ans = cells.get("generation_score_no_answer_score")
    if isinstance(ans, dict) and ans.get("query_answered") in ("yes", "no"):
        m["answered"] = 1.0 if ans["query_answered"] == "yes" else 0.0
    return m


_SCORE_FIELDS = {f for f, _ in CELLS} | {"retrieval_score_umbrela_scores", "retrieval_score_precision_metrics",
                                         "generation_score_autonugget_scores", "generation_score_citation_scores",
                                         "generation_score_no_answer_score", "retrieved_passages", "generated_answer"}


def results_records(path: str) -> Iterator[dict]:
    """The records of an open-rag-eval results CSV (module docstring); a cell that is not JSON is a
    UserError naming the file, line and column."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # passages and nugget lists are long cells
    model = os.path.splitext(os.path.basename(path))[0]
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        fields = [_field(c) for c in header]
        for no, row in enumerate(reader, start=2):
            values = dict(zip(header, row))
            qid = values.get("query_id") or f"row-{no}"
            runs: dict[int, dict[str, Any]] = {}
            for (run, field), column, text in zip(fields, header, row):
                if field not in _SCORE_FIELDS or not text.strip():  # query_id and query are not score fields
                    continue
                runs.setdefault(run, {})[field] = _cell(text, f"{path}:{no} ({column})")
            for run, cells in sorted(runs.items()):
                parts = cells.get("generated_answer")
                answer = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict)) \
                    if isinstance(parts, list) else None
                passages = cells.get("retrieved_passages")
                yield {"task_id": qid, "query_id": qid, "query_run": run, "model_id": model, "error": None,
                       "metrics": run_metrics(cells),
                       "ragscale": {"record": {"task_id": qid, "query": values.get("query"), "answer": answer,
                                               "passage_ids": list(passages) if isinstance(passages, dict) else None},
                                    "source_file": path, "source_line": no}}
