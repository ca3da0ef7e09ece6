"""TREC RAG metrics of vectara/open-rag-eval (seed "Open RAG Eval Metrics Documentation"):
pure functions over judge outputs. No Ray, torch or model imports here.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from ragscale.metrics.registry import UNIT, Derivation, MetricSpec, declare

_MULTI = re.compile(r"\[\d+(?:,\s*\d+)+\]")
_COMMA_BETWEEN = re.compile(r"\]\s*,\s*\[")
_BLOCK = re.compile(r"(?:\[\d+\])+")
_ONE = re.compile(r"\[\d+\]")


def parse_generated_answer(text: str) -> list[dict]:
    """Split an answer into parts with the bracket citations that close them, as
    open-rag-eval's ``RAGResultsLoader._parse_generated_answer`` does: ``[1, 2]`` and
    ``[1], [2]`` become ``[1][2]``; each text segment before a citation block is a part
    citing that block's ids (``"[1]"``, ...); a trailing uncited segment longer than one
    character is a part with no citations; an answer without citations is one part.

    Returns ``[{"text": str, "citations": [str, ...]}, ...]``."""
    text = _MULTI.sub(lambda m: "".join(f"[{n}]" for n in re.findall(r"\d+", m.group())), text)
    text = _COMMA_BETWEEN.sub("][", text)
    blocks = list(_BLOCK.finditer(text))
    if not blocks:
        return [{"text": text, "citations": []}]
    parts = []
    start = 0
    for block in blocks:
        segment = text[start : block.start()].strip()
        if segment:
            parts.append({"text": segment, "citations": _ONE.findall(block.group())})
        start = block.end()
    tail = text[blocks[-1].end() :].strip()
    if len(tail) > 1:
        parts.append({"text": tail, "citations": []})
    return parts


def answer_text(text: str) -> str:
    """The answer without its citation markers: the parts' texts joined by spaces (what
    open-rag-eval's hallucination metric sends to HHEM as the hypothesis)."""
    return " ".join(p["text"] for p in parse_generated_answer(text))


# ---------------------------------------------------------------------------------------
# Retrieval metrics from UMBRELA grades (open-rag-eval ``UMBRELAMetric.add_retrieval_metrics``,
# ``_calculate_average_precision``, ``_calculate_mrr`` in open_rag_eval/metrics/umbrela_metric.py).
# Grades are in the passages' input (retrieval rank) order; ``None`` is a passage whose grade
# the judge could not give (open-rag-eval has no such case: a failed grade fails the record).
# A value that depends on a ``None`` grade is ``None``, never a guess.
# ---------------------------------------------------------------------------------------

RELEVANT_GRADE = 2  # open-rag-eval's _umbrela_relevant_threshold: relevant = grade >= 2
K_VALUES = (1, 3, 5)  # open-rag-eval TRECEvaluator's default k_values


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")


def _relevance(grades: Sequence[float | None], threshold: float) -> list[int | None]:
    return [None if g is None else int(g >= threshold) for g in grades]


def _top_k(grades: Sequence[float | None], k: int, threshold: float) -> list | None:
    """Relevance flags of the top K, or None when K exceeds the passages or a top-K grade is None."""
    _check_k(k)
    if not grades or k > len(grades):
        return None
    rel = _relevance(grades[:k], threshold)
    return None if None in rel else rel


def precision_at_k(grades: Sequence[float | None], k: int, threshold: float = RELEVANT_GRADE) -> float | None:
    """Precision@K = (relevant passages among the top K) / K, relevant = grade >= ``threshold``.

    As open-rag-eval: ``None`` when K exceeds the number of passages (open-rag-eval leaves
    that K out) or there are no passages; K = 0 gives 0.0. ``None`` also when a top-K grade
    is ``None``."""
    rel = _top_k(grades, k, threshold)
    if rel is None:
        return None
    return sum(rel) / k if k > 0 else 0.0


def average_precision_at_k(grades: Sequence[float | None], k: int, threshold: float = RELEVANT_GRADE) -> float | None:
    """AP@K = mean of Precision@i over the ranks i <= K that hold a relevant passage.

    The denominator is the number of relevant passages *in the top K* (open-rag-eval passes
    ``relevant_at_k``, not the total number of relevant passages or K; the seed's
    ``1/num_relevant`` reads the same); no relevant passage in the top K gives 0.0. ``None``
    in the same cases as :func:`precision_at_k`."""
    rel = _top_k(grades, k, threshold)
    if rel is None:
        return None
    precisions = []
    found = 0
    for i, r in enumerate(rel, start=1):
        if r:
            found += 1
            precisions.append(found / i)
    return sum(precisions) / len(precisions) if precisions else 0.0


def reciprocal_rank(grades: Sequence[float | None], threshold: float = RELEVANT_GRADE) -> float | None:
    """1 / (rank of the first relevant passage) over all passages (no K cut-off, as
    open-rag-eval's "MRR" of one query); 0.0 when none is relevant, ``None`` when there are no
    passages or a ``None`` grade comes before the first relevant one."""
    if not grades:
        return None
    for i, r in enumerate(_relevance(grades, threshold), start=1):
        if r is None:
            return None
        if r:
            return 1.0 / i
    return 0.0


def umbrela_mean(grades: Sequence[float | None]) -> float | None:
    """Mean UMBRELA grade (open-rag-eval's ``mean_umbrela_score`` in evaluators/trec_evaluator.py)
    over the passages that have a grade; ``None`` when none has."""
    known = [g for g in grades if g is not None]
    return sum(known) / len(known) if known else None


def retrieval_metrics(
    grades: Sequence[float | None], k_values: Sequence[int] = K_VALUES, threshold: float = RELEVANT_GRADE
) -> dict[str, float | None]:
    """open-rag-eval's ``precision_metrics`` of one query, flattened: ``precision@K`` and
    ``AP@K`` per K, and ``MRR``; a K beyond the number of passages is ``None`` (open-rag-eval
    omits the key)."""
    out: dict[str, float | None] = {}
    for k in k_values:
        out[f"precision@{k}"] = precision_at_k(grades, k, threshold)
        out[f"AP@{k}"] = average_precision_at_k(grades, k, threshold)
    out["MRR"] = reciprocal_rank(grades, threshold)
    return out


# ---------------------------------------------------------------------------------------
# Citation support scores (open-rag-eval ``CitationMetric.compute``,
# open_rag_eval/metrics/citation_metric.py).
# ---------------------------------------------------------------------------------------

SUPPORT_SCORES = {"full_support": 1.0, "partial_support": 0.5, "no_support": 0.0}


def citation_scores(
    parts: Sequence[Sequence[tuple[str, str | None]]], weights: Mapping[str, float] = SUPPORT_SCORES
) -> dict:
    """Weighted citation precision, recall and F1 of one answer, as open-rag-eval computes them.

    ``parts``: per answer part (in order), its citations in order as ``(passage id, label)``;
    ``label`` is ``"full_support"`` / ``"partial_support"`` / ``"no_support"`` (scored by
    ``weights``: 1, 0.5, 0), or ``None`` for a citation that was not judged (open-rag-eval skips
    a cited id that is not among the passages, or whose text is empty).

    - a citation's average: the mean score of all its judgments, across all parts that cite it
      (open-rag-eval keys citation scores by passage id, so "[1]" cited in two parts is one
      citation with two scores);
    - a part's average: the mean score of its judged citations; a part with no citations
      counts as 0.0; a part whose citations were all skipped is not counted at all;
    - precision = sum of citation averages / number of cited ids judged (0.0 when none);
    - recall = sum of part averages / number of counted parts (0.0 when none);
    - f1 = 2PR / (P + R), 0.0 when P + R = 0.

    So an answer without citations, or without parts, scores 0.0 / 0.0 / 0.0.

    Returns ``{"precision", "recall", "f1", "citation_averages": {id: avg},
    "part_averages": [avg or None (not counted)]}``."""
    per_citation: dict[str, list[float]] = {}
    part_averages: list[float | None] = []
    for part in parts:
        if not part:
            part_averages.append(0.0)
            continue
        scores = []
        for cid, label in part:
            if label is None:
                continue
            if label not in weights:
                raise ValueError(f"unknown support label {label!r}")
            scores.append(weights[label])
            per_citation.setdefault(cid, []).append(weights[label])
        part_averages.append(sum(scores) / len(scores) if scores else None)
    citation_averages = {cid: sum(s) / len(s) for cid, s in per_citation.items()}
    counted = [a for a in part_averages if a is not None]
    precision = sum(citation_averages.values()) / len(citation_averages) if citation_averages else 0.0
    recall = sum(counted) / len(counted) if counted else 0.0
    f1 = 0.0 if precision + recall == 0 else 2 * (precision * recall) / (precision + recall)
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "citation_averages": citation_averages,
        "part_averages": part_averages,
    }


def retrieval_score(d: Derivation) -> float | None:
    """``d.name``'s score from the record's UMBRELA grades (``P@5``, ``AP@10``, ``MRR``); null when
    the grades are null."""
    grades = d.metrics.get("umbrela_scores")
    if grades is None:
        return None
    if d.name == "MRR":
        return reciprocal_rank(grades)
    kind, k = d.name.split("@")
    return (precision_at_k if kind == "P" else average_precision_at_k)(grades, int(k))


declare(*(MetricSpec(name, "derive", "retrieval", scalar=True, requires=("umbrela_scores",), bounds=UNIT,
                     needs=("question", "contexts"), derive=retrieval_score, reads_answer=False,
                     reference="vectara/open-rag-eval open_rag_eval/metrics/umbrela_metric.py (relevant = grade >= 2)")
          for name in ("P@k", "AP@k", "MRR")))  # P@k, AP@k: one metric per cut-off of trec.k_values
