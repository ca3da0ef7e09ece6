"""UMBRELA grades where the human qrels have holes, and how far to trust them: Cohen's kappa of
UMBRELA against the human judgments on the passages both judged (castorini/umbrela's evaluation,
``umbrela/evaluation.py`` ``evaluate_judge_results`` and ``utils/common_utils.py``
``calculate_kappa``).

A hole is a retrieved passage of a query that has qrels, without a human judgment for it (trec_eval
counts it non-relevant). ``fill`` gives it the UMBRELA grade (0-3) on a graded 0-3 scale, or on a
binary qrels scale (every human grade 0 or 1) 1 for a grade >= 2 and 0 otherwise: UMBRELA's
"relevant", as open-rag-eval's and umbrela's binarization count it. A query without any qrels stays
unscored (umbrela fills the holes of judged queries only).

Agreement, on the (human, UMBRELA) pairs of the judged passages: Cohen's kappa on the labels as
they are (scikit-learn's ``cohen_kappa_score``, unweighted, as umbrela prints it), and binarized:
umbrela binarizes both sides at > 1; on binary qrels a human 1 is relevant (> 1 would make every
human label 0), UMBRELA still at > 1. Kappa is None where it is undefined (every label the same on
both sides: scikit-learn gives nan).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from ragscale.io.qrels import Qrels, query_key
from ragscale.metrics.trec import RELEVANT_GRADE as RELEVANT  # UMBRELA's "relevant" (open-rag-eval's P@k)


def umbrela_grades(records: Iterable[Mapping[str, Any]]) -> tuple[dict[str, dict[str, int]], int]:
    """``{query key: {document id: UMBRELA grade}}`` from records a ragscale run wrote
    (records.jsonl: the input's ``contexts`` with their ``document_id``, and
    ``metrics.umbrela_scores``, one grade or null per passage), and how many records had no
    grades (no ``umbrela_scores``, or not one per passage). A null grade (a failed prompt) is no grade."""
    out: dict[str, dict[str, int]] = {}
    without = 0
    for rec in records:
        ctxs = list(rec.get("contexts") or [])
        grades = (rec.get("metrics") or {}).get("umbrela_scores")
        if not isinstance(grades, list) or len(grades) != len(ctxs):
            without += 1
            continue
        docs = out.setdefault(query_key(rec["task_id"]), {})
        for ctx, g in zip(ctxs, grades):
            if g is not None:
                docs[str(ctx["document_id"])] = int(g)
    return out, without


def is_binary(qrels: Qrels) -> bool:
    """Whether every human grade is 0 or 1 (MT-RAG's qrels), not a graded 0-3 scale (TREC DL's)."""
    return all(g in (0, 1) for docs in qrels.values() for g in docs.values())


def fill(qrels: Qrels, grades: Mapping[str, Mapping[str, int]]) -> tuple[Qrels, list[tuple[int, int]], dict]:
    """(the qrels with their holes filled by UMBRELA, the (human, UMBRELA) pairs of the passages
    both judged, the counts: ``holes`` filled, ``holes_relevant`` of them, ``judged`` pairs)."""
    binary = is_binary(qrels)
    filled: Qrels = {q: dict(docs) for q, docs in qrels.items()}
    pairs: list[tuple[int, int]] = []
    holes = relevant = 0
    for q in sorted(grades):
        if q not in qrels:
            continue
        for doc, g in sorted(grades[q].items()):
            if doc in qrels[q]:
                pairs.append((qrels[q][doc], g))
            else:
                filled[q][doc] = int(g >= RELEVANT) if binary else g
                holes += 1
                relevant += g >= RELEVANT
    return filled, pairs, {"holes": holes, "holes_relevant": relevant, "judged": len(pairs), "binary_qrels": binary}


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's kappa of two label sequences (unweighted: (p_o - p_e) / (1 - p_e)); None when
    undefined (no pair, or p_e = 1)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} labels against {len(b)}")
    n = len(a)
    if not n:
        return None
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def agreement(pairs: Sequence[tuple[int, int]], binary_qrels: bool) -> dict:
    """UMBRELA against the human judgments (module docstring): the pairs, kappa on the labels,
    kappa binarized, the share of the human-relevant passages UMBRELA finds relevant and of the
    human-non-relevant ones it finds non-relevant (None without such pairs), and the confusion
    counts ``{"human,umbrela": n}``."""
    human = [h for h, _ in pairs]
    llm = [g for _, g in pairs]
    cut = 1 if binary_qrels else RELEVANT
    hb, lb = [int(h >= cut) for h in human], [int(g >= RELEVANT) for g in llm]
    relevant = [b for a, b in zip(hb, lb) if a]
    other = [b for a, b in zip(hb, lb) if not a]
    return {"pairs": len(pairs), "kappa": cohen_kappa(human, llm), "kappa_binary": cohen_kappa(hb, lb),
            # qrels listing only relevant passages (MT-RAG's) leave kappa at 0 or undefined: these say more there
            "relevant_found": sum(relevant) / len(relevant) if relevant else None,
            "nonrelevant_found": other.count(0) / len(other) if other else None,
            "human_relevant_from": cut, "umbrela_relevant_from": RELEVANT,
            "confusion": {f"{h},{g}": n for (h, g), n in sorted(Counter(pairs).items())}}


def filled_block(records: Sequence[Mapping[str, Any]], qrels: Mapping[Any, Qrels], run: Mapping[str, Any],
                 collection_of: Mapping[str, Any], score: Mapping[str, Any]) -> dict | None:
    """The figures of ``run`` against the qrels (one per collection, ragscale.io.qrels) with their
    holes filled by the records' UMBRELA grades (``score``: score_collections' keyword arguments),
    with the fill's counts (``fill``) and UMBRELA's agreement with the human judgments
    (``agreement``); None when no record has UMBRELA grades."""
    from ragscale.metrics.qrels_retrieval import score_collections

    grades, without = umbrela_grades(records)
    if not grades:
        return None
    filled: dict[Any, Qrels] = {}
    pairs: list[tuple[int, int]] = []
    counts = {"holes": 0, "holes_relevant": 0, "judged": 0}
    for coll, q in qrels.items():
        filled[coll], more, got = fill(q, grades)
        pairs += more
        counts = {k: counts[k] + got[k] for k in counts}
    binary = all(is_binary(q) for q in qrels.values())
    block = score_collections(filled, dict(run), dict(collection_of), **score)
    block["fill"] = {**counts, "records_without_grades": without, "binary_qrels": binary}
    block["agreement"] = agreement(pairs, binary)
    return block
