"""Which metrics exist, which pipeline stage computes them, and which MT-RAG step owns them."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ragscale.errors import UserError, did_you_mean


@dataclass(frozen=True)
class MetricSpec:
    name: str
    stage: str  # lexical | encoder | judge | nli | derive
    step: str  # the step (MT-RAG's five, hmean, or a TREC family) that owns it
    per: str  # target | passage | record | vector (a per-passage list that is not averaged)
    requires: tuple[str, ...] = ()
    scalar: bool = False  # a plain number even in an MT-RAG step (MT-RAG's own metrics are [value] lists)


_SPECS = [
    MetricSpec("Recall", "lexical", "algorithmic", "target"),
    MetricSpec("RougeL_stemFalse", "lexical", "algorithmic", "target"),
    MetricSpec("BertscoreP", "encoder", "algorithmic", "target"),
    MetricSpec("BertscoreR", "encoder", "algorithmic", "target"),
    MetricSpec("BertKPrec", "encoder", "algorithmic", "passage"),
    MetricSpec("Extractiveness_RougeL", "lexical", "algorithmic", "passage"),
    MetricSpec("Length", "lexical", "algorithmic", "target"),
    # MT-RAG adds RB_agg only when these four evaluators are configured.
    MetricSpec("RB_agg", "derive", "algorithmic", "record", ("Recall", "RougeL_stemFalse", "BertscoreR", "BertKPrec")),
    MetricSpec("RB_agg_zero_denominator", "derive", "algorithmic", "record", ("RB_agg",)),
    MetricSpec("idk_eval", "judge", "idk", "record"),
    MetricSpec("underspecified_eval", "judge", "idk", "record"),  # MTRAG-UN
    MetricSpec("RL_F", "judge", "ragas", "record"),  # RAGAS faithfulness
    # RAGAS' other metrics (ragas 0.4.3 legacy metrics; answer relevancy's cosine is computed
    # by the encoder pool after the judges)
    MetricSpec("answer_relevancy", "judge", "ragas", "record", scalar=True),
    MetricSpec("context_precision", "judge", "ragas", "record", scalar=True),
    MetricSpec("context_recall", "judge", "ragas", "record", scalar=True),
    MetricSpec("RB_llm", "judge", "radbench", "record"),
    MetricSpec("RB_agg_idk", "derive", "idk_condition", "record", ("RB_agg", "idk_eval")),
    MetricSpec("RB_llm_idk", "derive", "idk_condition", "record", ("RB_llm", "idk_eval")),
    MetricSpec("RL_F_idk", "derive", "idk_condition", "record", ("RL_F", "idk_eval")),
    MetricSpec("RB_agg_idk_underspecified", "derive", "idk_condition", "record", ("RB_agg", "idk_eval", "underspecified_eval")),
    MetricSpec("RB_llm_idk_underspecified", "derive", "idk_condition", "record", ("RB_llm", "idk_eval", "underspecified_eval")),
    MetricSpec("RL_F_idk_underspecified", "derive", "idk_condition", "record", ("RL_F", "idk_eval", "underspecified_eval")),
    # seed "The Three Metrics": harmonic mean of RL_F, RB_llm, RB_agg (and of their IDK-conditioned versions)
    MetricSpec("HMean", "derive", "hmean", "record", ("RL_F", "RB_llm", "RB_agg")),
    MetricSpec("HMean_idk", "derive", "hmean", "record", ("RL_F_idk", "RB_llm_idk", "RB_agg_idk")),
    # TREC RAG metrics of vectara/open-rag-eval (seed "Open RAG Eval Metrics Documentation")
    MetricSpec("umbrela_scores", "judge", "retrieval", "vector"),
    MetricSpec("umbrela_mean", "judge", "retrieval", "record", ("umbrela_scores",)),
    MetricSpec("P@k", "derive", "retrieval", "record", ("umbrela_scores",)),  # one per k in trec.k_values
    MetricSpec("AP@k", "derive", "retrieval", "record", ("umbrela_scores",)),
    MetricSpec("MRR", "derive", "retrieval", "record", ("umbrela_scores",)),
    *(MetricSpec(f"nuggets_{n}", "judge", "nuggets", "record", ("umbrela_scores",))
      for n in ("all", "vital", "weighted", "strict_all", "strict_vital", "strict_weighted", "assignment_mean", "count")),
    MetricSpec("citation_precision", "judge", "citation", "record"),
    MetricSpec("citation_recall", "judge", "citation", "record"),
    MetricSpec("citation_f1", "judge", "citation", "record"),
    MetricSpec("hhem", "nli", "hallucination", "record"),
    MetricSpec("factual_consistency_judge", "judge", "hallucination", "record"),  # opt-in, never a silent HHEM substitute
    MetricSpec("answered", "judge", "no_answer", "record"),
    # custom answer metrics (seed "Evaluation Metrics Documentation"): pure functions of the
    # answer and the reference, plus the per-question fact checks of custom.expectations
    *(MetricSpec(n, "lexical", "custom", "record") for n in (
        "exact_match", "keyword_coverage", "number_match", "answer_completeness", "source_citation",
        "fact_score", "rules_coverage", "is_correct")),
    # the label-based taxonomy (seed "Metrics Taxonomy"): per-example scores from 0/1 labels
    *(MetricSpec(n, "judge", "taxonomy", "record") for n in (
        "TopicalPrecision@K", "SufficiencyHit@K", "SufficiencyRate@K", "MisleadingContextRate@K", "MRR@K", "NDCG@K",
        "GroundingPresenceRate", "UnsupportedClaimRate", "ContradictionRate", "CitationPresenceRate",
        "ConditionalFabricationRate", "ProperActionRate", "OnTopicRate", "HelpfulnessRate", "IncompletenessRate",
        "UnsafeContentRate")),
]
# derive-stage metrics that condition another metric: name -> (base metric, with the underspecified rule)
CONDITIONED = {
    "RB_agg_idk": ("RB_agg", False),
    "RB_llm_idk": ("RB_llm", False),
    "RL_F_idk": ("RL_F", False),
    "RB_agg_idk_underspecified": ("RB_agg", True),
    "RB_llm_idk_underspecified": ("RB_llm", True),
    "RL_F_idk_underspecified": ("RL_F", True),
}
# derive-stage harmonic means: name -> components
HMEANS = {"HMean": ("RL_F", "RB_llm", "RB_agg"), "HMean_idk": ("RL_F_idk", "RB_llm_idk", "RB_agg_idk")}
METRICS: dict[str, MetricSpec] = {m.name: m for m in _SPECS}
_K_METRIC = re.compile(r"^(P|AP)@([1-9][0-9]*)$")


def lookup(name: str) -> MetricSpec | None:
    """The spec of a metric name, including the cut-off forms ``P@5``, ``AP@10`` of ``P@k``, ``AP@k``."""
    if name in METRICS:
        return METRICS[name]
    m = _K_METRIC.match(name)
    if m:
        return replace(METRICS[f"{m.group(1)}@k"], name=name)
    return None


def expand_k(names: Sequence[str], k_values: Sequence[int]) -> list[str]:
    """Replace the templates ``P@k`` and ``AP@k`` by one metric per cut-off K."""
    for k in k_values:
        if not isinstance(k, int) or k < 1:
            raise UserError(f"trec.k_values must be positive integers, got {k!r}")
    out: list[str] = []
    for n in names:
        out.extend([f"{n[:-2]}@{k}" for k in k_values] if n in ("P@k", "AP@k") else [n])
    return out

# MT-RAG's five steps (seed "MT-RAG Evaluation Metrics Reference") plus their harmonic mean;
# a value other than None says why the step is not available.
STEPS: dict[str, str | None] = {
    "algorithmic": None,
    "idk": None,
    "ragas": None,
    "radbench": None,
    "idk_condition": None,
    "hmean": None,
    "retrieval": None,
    "nuggets": None,
    "citation": None,
    "hallucination": None,
    "no_answer": None,
    "consistency": None,  # across runs of a query (query_run > 1): a pass after the pipeline
    "custom": None,
    "taxonomy": None,
}


MTRAG_STEPS = frozenset({"algorithmic", "idk", "ragas", "radbench", "idk_condition", "hmean"})


def validate_steps(steps: Sequence[str]) -> list[str]:
    """Check step names; unknown ones fail with 'did you mean', unbuilt ones with why."""
    for s in steps:
        if s not in STEPS:
            raise UserError(f"unknown step {s!r}{did_you_mean(s, STEPS)}; steps are {', '.join(STEPS)}")
        if STEPS[s] is not None:
            raise UserError(f"step {s!r} is not available yet: {STEPS[s]}")
    return list(steps)


def resolve_metrics(names: Sequence[str], steps: Sequence[str]) -> list[str]:
    """The enabled metrics of the chosen steps, in registry order, with requirements checked."""
    for n in names:
        if lookup(n) is None:
            raise UserError(f"unknown metric {n!r}{did_you_mean(n, METRICS)}")
    order = {m.name: i for i, m in enumerate(_SPECS)}
    rank = lambda n: order.get(n, order.get(n.split("@")[0] + "@k", len(order)))  # noqa: E731
    chosen = sorted(dict.fromkeys(n for n in names if lookup(n).step in set(steps)), key=rank)
    for n in chosen:
        missing = [r for r in lookup(n).requires if r not in chosen]
        if missing:
            need = ", ".join(f"{r} (step {METRICS[r].step})" for r in missing)
            raise UserError(f"metric {n!r} needs {need} to be enabled too")
    return chosen


def stages_for(metrics: Sequence[str]) -> set[str]:
    """The pipeline stages that the given metrics need."""
    return {lookup(m).stage for m in metrics}


def record_scalar(name: str, value: Any) -> float | None:
    """The per-record number a metric contributes to means: a per-target metric its first
    target (as MT-RAG's RB_agg does), a per-passage metric its best passage (max), a flag
    0/1; a per-passage vector (UMBRELA grades) none: its mean metric summarises it."""
    if value is None:
        return None
    if isinstance(value, list):
        vals = [float(v) for v in value if v is not None]
        if not vals:
            return None
        spec = lookup(name)
        if spec is not None and spec.per == "vector":  # e.g. per-passage UMBRELA grades: summarised by their mean metric
            return None
        return max(vals) if spec is not None and spec.per == "passage" else vals[0]
    return float(value)
