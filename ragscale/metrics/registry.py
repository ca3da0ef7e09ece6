"""Which metrics exist, which pipeline stage computes them, and which MT-RAG step owns them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ragscale.errors import UserError, did_you_mean


@dataclass(frozen=True)
class MetricSpec:
    name: str
    stage: str  # lexical | encoder | derive
    step: str  # MT-RAG step name
    per: str  # target | passage | record
    requires: tuple[str, ...] = ()


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
    MetricSpec("RL_F", "judge", "ragas", "record"),
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

# MT-RAG's five steps (seed "MT-RAG Evaluation Metrics Reference") plus their harmonic mean;
# a value other than None says why the step is not available.
STEPS: dict[str, str | None] = {
    "algorithmic": None,
    "idk": None,
    "ragas": None,
    "radbench": None,
    "idk_condition": None,
    "hmean": None,
}


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
        if n not in METRICS:
            raise UserError(f"unknown metric {n!r}{did_you_mean(n, METRICS)}")
    chosen = [m.name for m in _SPECS if m.name in set(names) and m.step in set(steps)]
    for n in chosen:
        missing = [r for r in METRICS[n].requires if r not in chosen]
        if missing:
            need = ", ".join(f"{r} (step {METRICS[r].step})" for r in missing)
            raise UserError(f"metric {n!r} needs {need} to be enabled too")
    return chosen


def stages_for(metrics: Sequence[str]) -> set[str]:
    """The pipeline stages that the given metrics need."""
    return {METRICS[m].stage for m in metrics}
