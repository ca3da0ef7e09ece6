"""LLM judges: prompt rendering and parsing, pure and versioned; engines live in ragscale/actors/engines/.

``JUDGES`` is the one registry: judge name -> the metric it fills, its prompt version, and
how to start it on a pipeline record (a generator of (prompt, parse) steps, see base.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ragscale.judges import (citation, factual_consistency, faithfulness, idk, no_answer, nuggets, radbench,
                             ragas_metrics, taxonomy, umbrela, underspecified)
from ragscale.judges.base import JudgeResult, JudgeRun, single


@dataclass(frozen=True)
class JudgeSpec:
    name: str
    metric: str  # the metric a plain score fills (MT-RAG judges); the first of ``metrics``
    version: str
    start: Callable[..., JudgeRun]  # (raw input object, pipeline row, **the actor's options for it) -> judge run
    metrics: tuple[str, ...] = ()  # every metric the judge fills (default: ``metric``)
    after: tuple[str, ...] = ()  # judges whose metrics it reads from the row (run first)

    def __post_init__(self) -> None:
        if not self.metrics:
            object.__setattr__(self, "metrics", (self.metric,))


def _idk(obj: dict, row: dict) -> JudgeRun:
    return single(idk.render(obj.get("input") or [], row["prediction"]), idk.parse)


def _radbench(obj: dict, row: dict) -> JudgeRun:
    prompt = radbench.render(obj.get("input") or [], row["targets"][0], row["passages"], row["prediction"])
    return single(prompt, radbench.parse)


def _underspecified(obj: dict, row: dict) -> JudgeRun:
    return single(underspecified.render(row["prediction"]), underspecified.parse)


def _no_answer(obj: dict, row: dict) -> JudgeRun:
    """open-rag-eval's no-answer judge; a run whose input says the system gave no answer
    (open-rag-eval's ``NO_ANSWER`` marker, or an empty answer) is not answered, without asking."""
    status = obj.get("answer_status")
    if status in ("NO_ANSWER", "missing"):
        return JudgeResult({"answered": 0.0}, {"query_answered": "no", "source": f"input ({status})"})
    return (yield from no_answer.start(obj, row))


_TREC = (
    JudgeSpec(umbrela.NAME, "umbrela_scores", umbrela.VERSION, umbrela.start, ("umbrela_scores", "umbrela_mean")),
    JudgeSpec(nuggets.NAME, nuggets.METRICS[0], nuggets.VERSION, nuggets.start, tuple(nuggets.METRICS),
              after=(umbrela.NAME,)),
    JudgeSpec(citation.NAME, citation.METRICS[0], citation.VERSION, citation.start, tuple(citation.METRICS)),
    JudgeSpec(no_answer.NAME, "answered", no_answer.VERSION, _no_answer),
    JudgeSpec(factual_consistency.NAME, factual_consistency.METRIC, factual_consistency.VERSION,
              factual_consistency.start),
)

_TAXONOMY = tuple(JudgeSpec(name, metrics[0], taxonomy.VERSION, start, metrics)
                  for name, start, metrics in ((taxonomy.RETRIEVAL, taxonomy.retrieval, taxonomy.METRICS[taxonomy.RETRIEVAL]),
                                               (taxonomy.GROUNDING, taxonomy.grounding, taxonomy.METRICS[taxonomy.GROUNDING]),
                                               (taxonomy.GENERATION, taxonomy.generation,
                                                taxonomy.METRICS[taxonomy.GENERATION])))

JUDGES: dict[str, JudgeSpec] = {
    s.name: s
    for s in (
        JudgeSpec(idk.NAME, "idk_eval", idk.VERSION, _idk),
        JudgeSpec(faithfulness.NAME, "RL_F", faithfulness.VERSION, faithfulness.from_record),
        JudgeSpec(ragas_metrics.ANSWER_RELEVANCY, "answer_relevancy", ragas_metrics.VERSION,
                  ragas_metrics.answer_relevancy),
        JudgeSpec(ragas_metrics.CONTEXT_PRECISION, "context_precision", ragas_metrics.VERSION,
                  ragas_metrics.context_precision),
        JudgeSpec(ragas_metrics.CONTEXT_RECALL, "context_recall", ragas_metrics.VERSION, ragas_metrics.context_recall),
        JudgeSpec(radbench.NAME, "RB_llm", radbench.VERSION, _radbench),
        JudgeSpec(underspecified.NAME, "underspecified_eval", underspecified.VERSION, _underspecified),
        *_TREC,
        *_TAXONOMY,
    )
}
# metric -> judge name
JUDGED: dict[str, str] = {m: s.name for s in JUDGES.values() for m in s.metrics}


def judge_phases(specs: Sequence[JudgeSpec]) -> list[list[JudgeSpec]]:
    """Order judges into phases: each judge runs in a phase after every judge it needs
    (``after``) among ``specs``; judges of one phase are batched together."""
    names = {s.name for s in specs}
    level: dict[str, int] = {}

    def depth(spec: JudgeSpec, seen: tuple[str, ...] = ()) -> int:
        if spec.name in seen:
            raise ValueError(f"judge dependency cycle: {' -> '.join(seen + (spec.name,))}")
        if spec.name not in level:
            deps = [JUDGES[a] for a in spec.after if a in names]
            level[spec.name] = 1 + max((depth(d, seen + (spec.name,)) for d in deps), default=-1)
        return level[spec.name]

    phases: list[list[JudgeSpec]] = []
    for spec in specs:
        d = depth(spec)
        while len(phases) <= d:
            phases.append([])
        phases[d].append(spec)
    return [p for p in phases if p]
