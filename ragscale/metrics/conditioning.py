"""MT-RAG step 5, IDK conditioning (seed "MT-RAG Evaluation Metrics Reference";
IBM/mt-rag-benchmark ``judge_wrapper.get_idk_score``)."""

from __future__ import annotations

from functools import partial
from typing import Sequence

from ragscale.judges.mtrag_reference import IDK_UNKNOWN
from ragscale.metrics.registry import UNIT, Derivation, MetricSpec, declare

IDK_EXPECTED = ("UNANSWERABLE", "CONVERSATIONAL")


def idk_conditioned(answerability: str | None, idk_eval: float | None, value: float | None,
                    unknown: bool = False) -> float | None:
    """The IDK-conditioned version of a metric value.

    Unanswerable or conversational: 1 if the response is a full IDK (``idk_eval == 1``),
    else 0. Otherwise a full IDK scores 0 and anything else keeps the metric's value.
    ``None`` when ``idk_eval`` is missing (the IDK judge failed for the record), except when
    it is ``unknown``: MT-RAG's IDK label "unknown" (reference protocol, an output that does
    not start with a word) matches none of get_idk_score's branches, which keeps the value.
    """
    if unknown:
        return value
    if idk_eval is None:
        return None
    if answerability in IDK_EXPECTED:
        return 1.0 if idk_eval == 1 else 0.0
    if idk_eval == 1:
        return 0.0
    return value


def idk_underspecified_conditioned(
    answerability: str | None, idk_eval: float | None, underspecified_eval: float | None, value: float | None,
    unknown: bool = False,
) -> float | None:
    """MTRAG-UN's ``*_idk_underspecified`` (IBM/mt-rag-benchmark ``get_idk_underspec_score``).

    Underspecified: 1 if the response asks for clarification (``underspecified_eval == 1``),
    else 0. Otherwise ``idk_conditioned``. ``None`` when a judge it needs failed.
    """
    if answerability == "UNDERSPECIFIED":
        if underspecified_eval is None:
            return None
        return 1.0 if underspecified_eval == 1 else 0.0
    return idk_conditioned(answerability, idk_eval, value, unknown)


def harmonic_mean(values: "list[float | None]") -> float | None:
    """Harmonic mean of the three MT-RAG scores (seed "The Three Metrics": HMean).

    ``None`` if any component is missing; 0 as soon as one component is 0 (the limit of
    the harmonic mean, as ``statistics.harmonic_mean`` returns); components must be >= 0.
    """
    if any(v is None for v in values) or not values:
        return None
    if any(v < 0 for v in values):  # type: ignore[operator]
        raise ValueError(f"harmonic mean of negative values: {values}")
    if any(v == 0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)  # type: ignore[operator]


# derive-stage metrics that condition another metric: name -> (base metric, with the underspecified rule)
CONDITIONED = {
    "RB_agg_idk": ("RB_agg", False),
    "RB_llm_idk": ("RB_llm", False),
    "RL_F_idk": ("RL_F", False),
    "RB_agg_idk_underspecified": ("RB_agg", True),
    "RB_llm_idk_underspecified": ("RB_llm", True),
    "RL_F_idk_underspecified": ("RL_F", True),
}
# derive-stage harmonic means (seed "The Three Metrics"): name -> components
HMEANS = {"HMean": ("RL_F", "RB_llm", "RB_agg"), "HMean_idk": ("RL_F_idk", "RB_llm_idk", "RB_agg_idk")}


def derive_conditioned(d: Derivation, base: str, underspecified: bool) -> list | None:
    """The derive step of ``base`` conditioned on the IDK judge (and on the underspecified judge):
    the record's answerability, the judges' values and whether the IDK judge's label was MT-RAG's
    "unknown" (its details) decide, as :func:`idk_conditioned` says. A module function bound with
    ``functools.partial``, not a closure, so that mutation testing reaches it (docs/testing.md)."""
    idk = d.first("idk_eval")
    details = d.details("idk") if idk is None else None
    unknown = idk is None and isinstance(details, dict) and details.get("label") == IDK_UNKNOWN
    if underspecified:
        out = idk_underspecified_conditioned(d.answerability, idk, d.first("underspecified_eval"), d.first(base),
                                             unknown)
    else:
        out = idk_conditioned(d.answerability, idk, d.first(base), unknown)
    return None if out is None else [out]


def derive_hmean(d: Derivation, parts: Sequence[str]) -> list | None:
    """The derive step of the harmonic mean of ``parts`` (null when one is null)."""
    out = harmonic_mean([d.first(p) for p in parts])
    return None if out is None else [out]


declare(
    *(MetricSpec(name, "derive", "idk_condition", needs=("reference",), bounds=UNIT,
                 requires=(base, "idk_eval", "underspecified_eval") if under else (base, "idk_eval"),
                 short=name.replace("_underspecified", "_un"),
                 reference="IBM/mt-rag-benchmark scripts/evaluation (IDK conditioning)",
                 derive=partial(derive_conditioned, base=base, underspecified=under))
      for name, (base, under) in CONDITIONED.items()),
    *(MetricSpec(name, "derive", "hmean", needs=("reference",), requires=parts, bounds=UNIT,
                 reference='seed "The Three Metrics" (harmonic mean)', derive=partial(derive_hmean, parts=parts))
      for name, parts in HMEANS.items()),
)
