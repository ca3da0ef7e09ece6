"""AutoNuggetizer score math (TREC 2024 RAG nugget evaluation) as open-rag-eval computes it.

Reference: vectara/open-rag-eval ``open_rag_eval/metrics/autonugget_metric.py``
(``AutoNuggetMetric._score_and_sort_nuggets`` and ``_evaluate_answer``) and
``open_rag_eval/evaluators/trec_evaluator.py`` (``mean_nugget_assignment_score``).
Pure functions over judge labels; no judge, Ray or torch imports.

Per nugget: assignment score support 1.0, partial_support 0.5, not_support 0.0; the
strict score is 1.0 for support only. Over the scored nuggets:

- All = Σ score / n; Vital = Σ vital scores / n_vital;
- Weighted = (Σ vital scores + 0.5 Σ okay scores) / (n_vital + 0.5 n_okay);
- the Strict variants are the same with strict scores.

Every count in a denominator is clamped to at least 1, as open-rag-eval does
(``max(len(...), 1)``). Hence: no vital nugget -> Vital = 0.0 (castorini/nuggetizer also
gives 0.0), and in Weighted an *absent* class still counts once: only vital nuggets, all
supported -> n / (n + 0.5), e.g. 2 / 2.5 = 0.8; only okay nuggets, all supported ->
0.5 n / (1 + 0.5 n). The seed's formula reads without the clamp; ragscale follows the
code, which produced the published numbers.
"""

from __future__ import annotations

from typing import Sequence

ASSIGNMENT_SCORES: dict[str, float] = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
IMPORTANCES: tuple[str, ...] = ("vital", "okay")
KEEP = 20  # nuggets kept after importance sorting ("top 20 nuggets, as per the paper")

# ragscale metric name -> open-rag-eval's key in ``autonugget_scores["nuggetizer_scores"]``
NUGGETIZER_KEYS: dict[str, str] = {
    "nuggets_all": "All",
    "nuggets_strict_all": "All Strict",
    "nuggets_vital": "Vital",
    "nuggets_strict_vital": "Vital Strict",
    "nuggets_weighted": "Weighted",
    "nuggets_strict_weighted": "Weighted Strict",
}


def sort_and_keep(importances: Sequence[str], keep: int = KEEP) -> list[int]:
    """Indices of the nuggets open-rag-eval keeps: a stable sort that puts every label other
    than "okay" (i.e. vital) first, keeping the creation order within each class, then the
    first ``keep``."""
    order = sorted(range(len(importances)), key=lambda i: importances[i] == "okay")
    return order[:keep]


def _check(importances: Sequence[str], assignments: Sequence[str]) -> None:
    if len(importances) != len(assignments):
        raise ValueError(f"{len(assignments)} assignments for {len(importances)} nuggets")
    for label in importances:
        if label not in IMPORTANCES:
            raise ValueError(f"importance {label!r} is not one of {IMPORTANCES}")
    for label in assignments:
        if label not in ASSIGNMENT_SCORES:
            raise ValueError(f"assignment {label!r} is not one of {tuple(ASSIGNMENT_SCORES)}")


def nugget_scores(importances: Sequence[str], assignments: Sequence[str]) -> dict[str, float | int | None]:
    """The ragscale nugget metrics of one answer from its scored nuggets' labels (in order).

    Returns ``nuggets_all``, ``nuggets_vital``, ``nuggets_weighted`` and their
    ``nuggets_strict_*`` variants (open-rag-eval ``_evaluate_answer``, clamped denominators,
    see the module docstring), ``nuggets_assignment_mean`` (the evaluator's
    ``mean_nugget_assignment_score``: mean assignment score, equal to All whenever there
    is a nugget; ``None`` for none, where open-rag-eval divides by zero) and
    ``nuggets_count``. With no nuggets the six scores are 0.0, as ``_evaluate_answer``
    gives. Raises ValueError on unequal lengths or unknown labels."""
    _check(importances, assignments)
    scores = [ASSIGNMENT_SCORES[a] for a in assignments]
    strict = [1.0 if a == "support" else 0.0 for a in assignments]
    vital = [s for s, imp in zip(scores, importances) if imp == "vital"]
    okay = [s for s, imp in zip(scores, importances) if imp == "okay"]
    strict_vital = [s for s, imp in zip(strict, importances) if imp == "vital"]
    strict_okay = [s for s, imp in zip(strict, importances) if imp == "okay"]
    n = max(len(scores), 1)
    n_vital = max(len(vital), 1)
    n_okay = max(len(okay), 1)
    weight = n_vital + 0.5 * n_okay
    return {
        "nuggets_all": sum(scores) / n,
        "nuggets_vital": sum(vital) / n_vital,
        "nuggets_weighted": (sum(vital) + 0.5 * sum(okay)) / weight,
        "nuggets_strict_all": sum(strict) / n,
        "nuggets_strict_vital": sum(strict_vital) / n_vital,
        "nuggets_strict_weighted": (sum(strict_vital) + 0.5 * sum(strict_okay)) / weight,
        "nuggets_assignment_mean": sum(scores) / len(scores) if scores else None,
        "nuggets_count": len(scores),
    }


def autonugget_scores(texts: Sequence[str], importances: Sequence[str], assignments: Sequence[str]) -> dict:
    """open-rag-eval's ``autonugget_scores`` dict for the scored nuggets (what its TREC CSV
    stores JSON-encoded in ``generation_score_autonugget_scores``): ``nuggetizer_scores``
    (All, All Strict, Vital, Vital Strict, Weighted, Weighted Strict), ``nuggets``,
    ``labels``, ``assignments`` and ``assignment_scores``. open-rag-eval writes ``{}``
    when the metric fails (and 0.5 for the mean and vital columns, see the judge)."""
    if len(texts) != len(importances):
        raise ValueError(f"{len(importances)} importance labels for {len(texts)} nuggets")
    m = nugget_scores(importances, assignments)
    return {
        "nuggetizer_scores": {key: m[name] for name, key in NUGGETIZER_KEYS.items()},
        "nuggets": list(texts),
        "labels": list(importances),
        "assignments": list(assignments),
        "assignment_scores": [ASSIGNMENT_SCORES[a] for a in assignments],
    }
