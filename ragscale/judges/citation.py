"""Citation support (open-rag-eval's ``citation_scores`` / ``citation_f1_score``; seed "Open
RAG Eval Metrics Documentation", Citation Metric).

Follows vectara/open-rag-eval ``open_rag_eval/metrics/citation_metric.py`` (``CitationMetric``):
the answer is split into parts with the bracket citations that close them (``[1]``, ``[1, 2]``,
``[1], [2]``: ``ragscale.metrics.trec.parse_generated_answer``, open-rag-eval's
``RAGResultsLoader._parse_generated_answer``); every (part, cited passage) pair is judged
``full_support`` / ``partial_support`` / ``no_support`` with ``_CITATION_PROMPT``
(templates/orag_citation_v1.txt, verbatim; statement = the part's text, citation = the cited
passage's text), all pairs of a record in one fan-out round. Scores (1 / 0.5 / 0) are combined
by ``ragscale.metrics.trec.citation_scores`` exactly as open-rag-eval does (weighted precision
per cited id, weighted recall per part, F1; see there for the edge cases: uncited parts count
0, ids not among the passages are skipped, no citations at all gives 0.0).

open-rag-eval asks for the pydantic structured output ``CitationSupport{support: ...}``;
the constrained protocol (version ``open-rag-eval-citation-v1``) constrains the output with an
equivalent inline JSON schema, anything else is a parse failure, never a default, and samples
as the judge engine does (greedy, seed 0; open-rag-eval: temperature 0, seed 42). A pair
repeated within one part (``[1][1]``) is asked once and counted as often as it is cited, as
open-rag-eval's scores count it (at temperature 0 the repeat is the same question).

Differences: a record without a generated answer is ``null`` (open-rag-eval does not evaluate
it); when a pair's judgment fails, open-rag-eval fails the whole record, and ragscale makes the
three metrics ``null`` (the failure is in judge_errors) while keeping the labels it got in the
details.

Reference protocol (``judge.protocol=reference``, version ``open-rag-eval-citation-ref-v1``): the
same prompt and system message, the JSON schema pydantic gives ``CitationSupport`` (the enum in
``$defs``), temperature 0 and seed 42 (the metric's model_kwargs), the output read as
open-rag-eval's OpenAI client reads it (ragscale.judges.umbrela ``OragOutput.parse``: one JSON
object, ``"support"`` exactly one of the three labels). The per-record rules above are already
the reference's. Still different: no max_tokens in open-rag-eval (``ORAG_MAX_TOKENS`` here); the
actor's re-asks after a parse failure (none in open-rag-eval; judge.max_retries=0); a repeated
pair is asked once (open-rag-eval asks it again, the same request); a failed pair fails every
metric of the record in open-rag-eval, here the citation metrics only.

Metrics: ``citation_precision``, ``citation_recall``, ``citation_f1``. Details:
``{"parts": [{"text": part text, "citations": [{"id": "[1]", "support": label}, ...]}, ...]}``
where a citation that was not judged has ``"support": null`` and ``"skipped": "not among the
passages"`` or ``"failed": reason``.
"""

from __future__ import annotations

from typing import Any

from ragscale.judges.templates import Markers, declare_markers
from ragscale.judges.base import (JudgeSpec, Failed, JudgeParseError, JudgePrompt, JudgeResult, JudgeRun, Undefined,
                                  load_json_object)
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.umbrela import ORAG_SKIPPED, OragOutput, orag_messages, reference_prompt
from ragscale.metrics.trec import SUPPORT_SCORES, citation_scores, parse_generated_answer
from ragscale.metrics.registry import UNIT, MetricSpec, declare

NAME = "citation"
VERSION = "open-rag-eval-citation-v1"
LABELS = list(SUPPORT_SCORES)  # full_support, partial_support, no_support
SCHEMA = {
    "type": "object",
    "properties": {"support": {"type": "string", "enum": LABELS}},
    "required": ["support"],
}
METRICS = ("citation_precision", "citation_recall", "citation_f1")
NOT_FOUND = "not among the passages"


def render(statement: str, citation: str) -> JudgePrompt:
    """The citation-support prompt for one (answer part, cited passage text)."""
    return JudgePrompt(NAME, VERSION, orag_messages("orag_citation_v1", {"statement": statement, "citation": citation}),
                       SCHEMA, max_tokens=32)


def parse(raw: str) -> str:
    """``{"support": "full_support"|"partial_support"|"no_support"}`` -> the label; anything
    else raises JudgeParseError."""
    label = load_json_object(NAME, raw).get("support")
    if not isinstance(label, str) or label.strip().lower() not in SUPPORT_SCORES:
        raise JudgeParseError(NAME, raw, f"support {label!r} is not full_support, partial_support or no_support")
    return label.strip().lower()


REFERENCE_VERSION = "open-rag-eval-citation-ref-v1"
REFERENCE_OUTPUT = OragOutput("CitationSupport", "support", tuple(LABELS), "CitationSupportValues")


def render_reference(statement: str, citation: str) -> JudgePrompt:
    """The citation-support prompt as open-rag-eval sends it (reference protocol)."""
    return reference_prompt(NAME, REFERENCE_VERSION, "orag_citation_v1", {"statement": statement, "citation": citation},
                            REFERENCE_OUTPUT)


def parse_reference(raw: str) -> str:
    """open-rag-eval's reading: ``CitationSupport.support.value``; anything else raises JudgeParseError."""
    return REFERENCE_OUTPUT.parse(NAME, raw)


def start(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> JudgeRun:
    """Judge every (part, cited passage) pair of a record in one round (see the module docstring)."""
    ask, read = (render_reference, parse_reference) if protocol == "reference" else (render, parse)
    prediction = inp.prediction
    if not prediction.strip():
        return Undefined(ORAG_SKIPPED if protocol == "reference" else "no generated answer")
    # open-rag-eval's retrieved_passages is a dict: a repeated id maps to its last text
    by_id = dict(zip(inp.passage_ids, inp.passages))
    parts = parse_generated_answer(prediction)
    # unique (part index, cited id) pairs whose id has a passage text, in citation order
    pairs = list(dict.fromkeys((i, cid) for i, part in enumerate(parts) for cid in part["citations"] if by_id.get(cid)))
    answers: list[Any] = (yield [(ask(parts[i]["text"], by_id[cid]), read) for i, cid in pairs]) if pairs else []
    got = dict(zip(pairs, answers))

    judged: list[list[tuple[str, str | None]]] = []
    details = []
    failed = 0
    for i, part in enumerate(parts):
        labels: list[tuple[str, str | None]] = []
        shown = []
        for cid in part["citations"]:
            answer = got.get((i, cid))
            if answer is None:
                labels.append((cid, None))
                shown.append({"id": cid, "support": None, "skipped": NOT_FOUND})
            elif isinstance(answer, Failed):
                failed += 1
                labels.append((cid, None))
                shown.append({"id": cid, "support": None, "failed": answer.reason})
            else:
                labels.append((cid, answer))
                shown.append({"id": cid, "support": answer})
        judged.append(labels)
        details.append({"text": part["text"], "citations": shown})

    if failed:
        return JudgeResult(metrics={m: None for m in METRICS}, details={"parts": details})
    s = citation_scores(judged)
    return JudgeResult(
        metrics={"citation_precision": s["precision"], "citation_recall": s["recall"], "citation_f1": s["f1"]},
        details={"parts": details},
    )


declare(*(MetricSpec(name, "judge", "citation", scalar=True, short=short, needs=("contexts",), bounds=UNIT,
                     aliases=("citation_f1_score",) if name == "citation_f1" else (),
                     reference="vectara/open-rag-eval open_rag_eval/metrics/citation_metric.py")
          for name, short in zip(METRICS, ("CitP", "CitR", "CitF1"))))


declare_markers("orag_citation_v1", Markers(labels=("Statement:", "Citation:")))

JUDGE_SPECS = (JudgeSpec(NAME, METRICS[0], VERSION, start, tuple(METRICS), reference_version=REFERENCE_VERSION,
                         completion_tokens=10, probe=lambda u: [render(u, u)],
                         delimiters=("markers", "orag_citation_v1")),)
