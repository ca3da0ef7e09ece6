"""Label annotators of the metric taxonomy (seed "Metrics Taxonomy"): three judges, one per
label family, and the per-example metrics computed from their labels
(ragscale/metrics/taxonomy.py).

Labels come from the input record when present: human annotations win. The layout is a
``labels`` object on the record::

    "labels": {"chunks": [{"topically_relevant": 1, "evidence_sufficient": 0, "misleading": 0}, ...],
               "support_present": 1, "source_cited": 0, ..., "helpful": 1, ...}

(``chunks`` in rank order, one per retrieved passage; values 0/1 or true/false; any subset may
be given). A judge is asked only where a family has labels missing: one prompt per top-K chunk
lacking a label (a fan-out round), one prompt per record for the answer family and for the
generation family; a label the input has is kept even when the judge is asked for its family.
Each label's source (``input`` or ``judge``) is in the record's details. Outputs are constrained
JSON (0/1 per label); the untrusted texts are delimited in tags that the prompt declares as data.

Only the top-K chunks are labelled (``taxonomy.k``, default 5; ``null`` = every retrieved
chunk); with fewer than K chunks, K_i is the number retrieved.

A judge output that fails to parse (after the actor's re-asks) leaves its labels missing: the
metrics that need them are ``null`` and the failure is in judge_errors, while metrics that the
input's labels alone determine keep their values. Details per judge: retrieval ``{"k", "chunks",
"sources"[, "failed_chunks", "warning"]}``, answer and generation ``{"labels", "sources"[,
"k", "failed", "undefined"]}``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ragscale.errors import RecordError
from ragscale.judges.base import (JudgeSpec, Failed, JudgeParseError, JudgePrompt, JudgeResult, JudgeRun, Undefined,
                                  load_json_object)
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.templates import fence, load_template
from ragscale.metrics.taxonomy import (ANSWER_LABELS, CHUNK_LABELS, GENERATION_LABELS, GENERATION_METRICS,
                                       GROUNDING_METRICS, RETRIEVAL_METRICS, generation_scores, grounding_scores,
                                       retrieval_scores)

VERSION = "ragscale-taxonomy-v1"
RETRIEVAL, GROUNDING, GENERATION = "taxonomy_retrieval", "taxonomy_grounding", "taxonomy_generation"
DEFAULT_K = 5
NO_ANSWER = "no generated answer to annotate and the input lacks some of the family's labels"


def _schema(labels: Sequence[str]) -> dict:
    return {"type": "object", "properties": {lab: {"type": "integer", "enum": [0, 1]} for lab in labels},
            "required": list(labels)}


def _prompt(judge: str, template: str, labels: Sequence[str], body: str) -> JudgePrompt:
    return JudgePrompt(judge, VERSION, ({"role": "user", "content": load_template(template) + body},),
                       _schema(labels), max_tokens=16 * len(labels) + 16)


def chunk_prompt(query: str, chunk: str) -> JudgePrompt:
    """The chunk-family prompt for one (query, chunk)."""
    return _prompt(RETRIEVAL, "taxonomy_chunk_v1", CHUNK_LABELS, f"{fence('query', query)}\n{fence('chunk', chunk)}\n")


def answer_prompt(query: str, chunks: Sequence[str], answer: str) -> JudgePrompt:
    """The answer-family prompt: the query, the top-K chunks numbered [1].. and the answer."""
    ctx = "\n".join(f"[{i + 1}] {c}" for i, c in enumerate(chunks)) or "(no context was retrieved)"
    return _prompt(GROUNDING, "taxonomy_answer_v1", ANSWER_LABELS,
                   f"{fence('query', query)}\n{fence('context', ctx)}\n{fence('answer', answer)}\n")


def generation_prompt(conversation: str, answer: str) -> JudgePrompt:
    """The generation-family prompt: the conversation (or query) and the answer."""
    return _prompt(GENERATION, "taxonomy_generation_v1", GENERATION_LABELS,
                   f"{fence('conversation', conversation)}\n{fence('answer', answer)}\n")


def parser(judge: str, labels: Sequence[str]) -> Callable[[str], dict[str, int]]:
    """A parser of ``{label: 0|1, ...}`` for ``labels``; anything else raises JudgeParseError."""

    def parse(raw: str) -> dict[str, int]:
        obj = load_json_object(judge, raw)
        out = {}
        for lab in labels:
            v = obj.get(lab)
            if isinstance(v, bool) or v not in (0, 1):
                raise JudgeParseError(judge, raw, f"{lab} is {v!r}, not 0 or 1")
            out[lab] = int(v)
        return out

    return parse


def _label(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    raise RecordError("input", f"input {where} must be 0 or 1 (or true/false), got {value!r}")


def input_labels(raw: Any) -> tuple[list[dict[str, int]], dict[str, int]]:
    """The record's own labels (``JudgeInput.labels``): (per-chunk label dicts in rank order,
    record-level labels); a malformed value is the record's input error (RecordError naming it),
    not the judge's failure."""
    if raw is None:
        return [], {}
    if not isinstance(raw, Mapping):
        raise RecordError("input", f"input labels must be an object, got {type(raw).__name__}")
    chunks_raw = raw.get("chunks") or []
    if not isinstance(chunks_raw, list) or not all(isinstance(c, dict) for c in chunks_raw):
        raise RecordError("input", "input labels.chunks must be a list of objects (one per retrieved chunk, in rank order)")
    chunks = [{lab: _label(c[lab], f"labels.chunks[{i}].{lab}") for lab in CHUNK_LABELS if c.get(lab) is not None}
              for i, c in enumerate(chunks_raw)]
    record = {lab: _label(raw[lab], f"labels.{lab}") for lab in (*ANSWER_LABELS, *GENERATION_LABELS)
              if raw.get(lab) is not None}
    return chunks, record


def _top_k(inp: JudgeInput, k: int | None) -> list[str]:
    passages = list(inp.passages)
    return passages if k is None else passages[:k]


def retrieval(inp: JudgeInput, k: int | None = DEFAULT_K) -> JudgeRun:
    """Chunk labels for the top-K chunks (input first, the judge for the missing ones) and the
    six retrieval metrics."""
    chunks = _top_k(inp, k)
    given, _ = input_labels(inp.labels)
    if not chunks:
        return Undefined("no retrieved chunks: the retrieval metrics are undefined")
    labels = [dict(given[i]) if i < len(given) else {} for i in range(len(chunks))]
    sources = [{lab: "input" for lab in lab_i} for lab_i in labels]
    ask = [i for i, lab_i in enumerate(labels) if set(CHUNK_LABELS) - set(lab_i)]
    parse = parser(RETRIEVAL, CHUNK_LABELS)
    query = inp.query
    answers: list[Any] = (yield [(chunk_prompt(query, chunks[i]), parse) for i in ask]) if ask else []
    failed = []
    for i, ans in zip(ask, answers):
        if isinstance(ans, Failed):  # the chunk keeps only its input labels; metrics needing the rest are null
            failed.append(i)
            continue
        for lab in CHUNK_LABELS:
            if lab not in labels[i]:
                labels[i][lab] = ans[lab]
                sources[i][lab] = "judge"
    details: dict[str, Any] = {"k": len(chunks), "chunks": labels, "sources": sources}
    retrieved = len(inp.passages)
    if len(given) > retrieved:  # more labelled chunks than retrieved ones: likely misaligned input
        details["warning"] = (f"{len(given) - retrieved} input chunk label(s) beyond the {retrieved} retrieved "
                              "chunks ignored")
    if failed:
        details["failed_chunks"] = failed
    return JudgeResult(retrieval_scores(labels), details)


def _record_family(judge: str, labels_wanted: Sequence[str], inp: JudgeInput, prompt: JudgePrompt | None):  # noqa: ANN202
    """(labels, details) of a record-level family: the input's labels, the judge asked for the
    rest. The prompt goes out as a one-item fan-out round so that a parse failure comes back as
    ``Failed``: the input's labels (and the metrics they alone determine) are then kept, and
    the failure is in judge_errors. ``labels`` is None when labels are missing and there is no
    prompt (no answer to annotate)."""
    _, given = input_labels(inp.labels)
    labels = {lab: given[lab] for lab in labels_wanted if lab in given}
    details: dict[str, Any] = {"labels": labels, "sources": {lab: "input" for lab in labels}}
    if len(labels) < len(labels_wanted):
        if prompt is None:
            return None, details
        (ans,) = yield [(prompt, parser(judge, labels_wanted))]
        if isinstance(ans, Failed):
            details["failed"] = ans.reason
        else:
            for lab in labels_wanted:
                if lab not in labels:
                    labels[lab] = ans[lab]
                    details["sources"][lab] = "judge"
    return labels, details


def grounding(inp: JudgeInput, k: int | None = DEFAULT_K) -> JudgeRun:
    """Answer labels (input first, else one judge prompt) and the five grounding metrics."""
    answer = inp.prediction
    chunks = _top_k(inp, k)
    prompt = answer_prompt(inp.query, chunks, answer) if answer.strip() else None
    labels, details = yield from _record_family(GROUNDING, ANSWER_LABELS, inp, prompt)
    if labels is None:
        return Undefined(NO_ANSWER)
    details["k"] = len(chunks)  # the chunks the answer annotator was shown
    scores = grounding_scores(labels)
    if labels.get("source_cited") == 0:
        details["undefined"] = {"ConditionalFabricationRate": "nothing is cited (source_cited = 0)"}
    return JudgeResult(scores, details)


def generation(inp: JudgeInput) -> JudgeRun:
    """Generation labels (input first, else one judge prompt) and the five generation metrics:
    the prompt shows the conversation (or the question: ``JudgeInput.user_input``) and the answer."""
    answer = inp.prediction
    prompt = generation_prompt(inp.user_input, answer) if answer.strip() else None
    labels, details = yield from _record_family(GENERATION, GENERATION_LABELS, inp, prompt)
    if labels is None:
        return Undefined(NO_ANSWER)
    return JudgeResult(generation_scores(labels), details)


METRICS = {RETRIEVAL: RETRIEVAL_METRICS, GROUNDING: tuple(GROUNDING_METRICS), GENERATION: tuple(GENERATION_METRICS)}


JUDGE_SPECS = tuple(JudgeSpec(name, metrics[0], VERSION, start, metrics, completion_tokens=60, probe=probe)
                    for name, start, metrics, probe in (
                        (RETRIEVAL, retrieval, METRICS[RETRIEVAL], lambda u: [chunk_prompt(u, u)]),
                        (GROUNDING, grounding, METRICS[GROUNDING], lambda u: [answer_prompt(u, [u, u], u)]),
                        (GENERATION, generation, METRICS[GENERATION], lambda u: [generation_prompt(u, u)])))
