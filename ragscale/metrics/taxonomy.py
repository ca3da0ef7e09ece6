"""The label-based metric taxonomy (seed "Metrics Taxonomy", ../shared/seeds/003): per-example
scores from 0/1 labels. The dataset score is the mean over examples (summary.json), as the seed
says; ``null`` per-example values are left out of that mean.

Retrieval metrics use the top-K chunks' labels in rank order. When fewer than K chunks were
retrieved, ragscale uses K_i = the number retrieved (the seed's C_i *is* the retrieved top-K
set); with no chunk at all the retrieval metrics are ``null`` (undefined), not 0.
"""

from __future__ import annotations

import math
from typing import Sequence

from ragscale.metrics.registry import UNIT, MetricSpec, declare

CHUNK_LABELS = ("topically_relevant", "evidence_sufficient", "misleading")
ANSWER_LABELS = ("support_present", "unsupported_claim_present", "contradicted_claim_present", "source_cited",
                 "fabricated_source")
GENERATION_LABELS = ("proper_action", "response_on_topic", "helpful", "incomplete", "unsafe_content")
RETRIEVAL_METRICS = ("TopicalPrecision@K", "SufficiencyHit@K", "SufficiencyRate@K", "MisleadingContextRate@K",
                     "MRR@K", "NDCG@K")
# answer / generation metric -> its label (per example the score is the label itself)
GROUNDING_METRICS = {
    "GroundingPresenceRate": "support_present",
    "UnsupportedClaimRate": "unsupported_claim_present",
    "ContradictionRate": "contradicted_claim_present",
    "CitationPresenceRate": "source_cited",
    "ConditionalFabricationRate": "fabricated_source",  # only over cited answers, see conditional_fabrication
}
GENERATION_METRICS = {
    "ProperActionRate": "proper_action",
    "OnTopicRate": "response_on_topic",
    "HelpfulnessRate": "helpful",
    "IncompletenessRate": "incomplete",
    "UnsafeContentRate": "unsafe_content",
}


def _mean(values: Sequence[int] | None) -> float | None:
    return sum(values) / len(values) if values else None


def topical_precision(t: Sequence[int] | None) -> float | None:
    """(1/K) Σ t_k over the top-K chunks (seed: Topical Precision@K)."""
    return _mean(t)


def sufficiency_hit(s: Sequence[int] | None) -> float | None:
    """[Σ s_k ≥ 1] (seed: Sufficiency Hit@K)."""
    return float(any(s)) if s else None


def sufficiency_rate(s: Sequence[int] | None) -> float | None:
    """(1/K) Σ s_k (seed: Sufficiency Rate@K)."""
    return _mean(s)


def misleading_rate(m: Sequence[int] | None) -> float | None:
    """(1/K) Σ m_k (seed: Misleading Context Rate@K)."""
    return _mean(m)


def reciprocal_rank(t: Sequence[int] | None) -> float | None:
    """1 / (rank of the first topically relevant chunk), 0 when none (seed: RR@K)."""
    if not t:
        return None
    return next((1.0 / (k + 1) for k, v in enumerate(t) if v), 0.0)


def grades(t: Sequence[int], s: Sequence[int]) -> list[int]:
    """w_k = 2 if sufficient, 1 if topically relevant and not sufficient, else 0 (seed: NDCG@K)."""
    return [2 if sk else (1 if tk else 0) for tk, sk in zip(t, s)]


def dcg(w: Sequence[int]) -> float:
    """Σ (2^w_k − 1) / log2(k + 1), k = 1..K."""
    return sum((2 ** wk - 1) / math.log2(k + 2) for k, wk in enumerate(w))


def ndcg(t: Sequence[int], s: Sequence[int]) -> float | None:
    """DCG@K / IDCG@K with IDCG the DCG of the same grades in ideal (descending) order (seed:
    NDCG@K). When IDCG = 0 (no chunk is relevant or sufficient) the ranking cannot be better
    or worse than ideal; ragscale gives 0.0, the usual convention (e.g. scikit-learn's
    ndcg_score), so a query with nothing relevant lowers the mean like MRR's 0 does."""
    if not t:
        return None
    w = grades(t, s)
    ideal = dcg(sorted(w, reverse=True))
    return dcg(w) / ideal if ideal > 0 else 0.0


def retrieval_scores(chunks: Sequence[dict]) -> dict[str, float | None]:
    """The seed's six retrieval metrics from the top-K chunks' labels (dicts of CHUNK_LABELS).

    A metric is ``None`` when a label it needs is missing on any chunk (e.g. the annotator's
    output for that chunk failed to parse and the input did not have the label either)."""

    def column(lab: str) -> list[int] | None:
        return None if any(c.get(lab) is None for c in chunks) else [int(c[lab]) for c in chunks]

    t, s, m = column("topically_relevant"), column("evidence_sufficient"), column("misleading")
    return {
        "TopicalPrecision@K": topical_precision(t),  # each is None for a missing (None) column
        "SufficiencyHit@K": sufficiency_hit(s),
        "SufficiencyRate@K": sufficiency_rate(s),
        "MisleadingContextRate@K": misleading_rate(m),
        "MRR@K": reciprocal_rank(t),
        "NDCG@K": ndcg(t, s) if t is not None and s is not None else None,
    }


def conditional_fabrication(source_cited: int | None, fabricated_source: int | None) -> float | None:
    """Per example: f_i when z_i = 1, else undefined (``None``), so that the mean over examples
    with a value is Σ z_i f_i / Σ z_i (seed: Conditional Fabrication Rate), and undefined — not
    0 — when nothing is cited."""
    return float(fabricated_source) if source_cited and fabricated_source is not None else None


def _label_scores(metrics: dict[str, str], labels: dict) -> dict[str, float | None]:
    return {m: (None if labels.get(lab) is None else float(labels[lab])) for m, lab in metrics.items()}


def grounding_scores(labels: dict) -> dict[str, float | None]:
    """The seed's five grounding metrics of one example from its ANSWER_LABELS (a metric whose
    label is missing is ``None``)."""
    out = _label_scores(GROUNDING_METRICS, labels)
    z = labels.get("source_cited")
    f = labels.get("fabricated_source")
    out["ConditionalFabricationRate"] = conditional_fabrication(z, f)  # None when z is missing or 0
    return out


def generation_scores(labels: dict) -> dict[str, float | None]:
    """The seed's five generation metrics of one example from its GENERATION_LABELS (a metric
    whose label is missing is ``None``)."""
    return _label_scores(GENERATION_METRICS, labels)


LOWER_IS_BETTER = ("MisleadingContextRate@K", "UnsupportedClaimRate", "ContradictionRate",
                   "ConditionalFabricationRate", "IncompletenessRate", "UnsafeContentRate")
# per example a 0/1 label (the rate is the mean over examples): a judge panel takes the members' majority
LABEL_METRICS = ("SufficiencyHit@K", *GROUNDING_METRICS, *GENERATION_METRICS)
declare(*(MetricSpec(name, "judge", "taxonomy", scalar=True, higher_is_better=name not in LOWER_IS_BETTER, bounds=UNIT,
                     jury="majority" if name in LABEL_METRICS else "mean", reference='seed "Metrics Taxonomy"')
          for name in (*RETRIEVAL_METRICS, *GROUNDING_METRICS, *GENERATION_METRICS)))
