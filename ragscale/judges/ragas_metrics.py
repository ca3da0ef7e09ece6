"""RAGAS answer relevancy, context precision (with reference) and context recall, as ragas 0.4.3
computes them in its legacy metrics (the ones ``ragas.evaluate`` runs): ``ragas/metrics/
_answer_relevance.py`` (ResponseRelevancy / ``answer_relevancy``), ``_context_precision.py``
(LLMContextPrecisionWithReference / ``context_precision``) and ``_context_recall.py``
(LLMContextRecall / ``context_recall``). Faithfulness is MT-RAG's ``RL_F`` (judges/faithfulness.py).

ragscale renders ragas' prompt strings (the fixed parts in templates/ragas_*_v1.txt, rendered
from ragas' own prompt classes; tested equal to ``PydanticPrompt.to_string``) and computes the
same scores from the same outputs (tested against ragas with a scripted LLM):

- **answer_relevancy**: ``strictness`` (3) generations of ResponseRelevancePrompt for the
  response, each ``{question, noncommittal}``; ragas draws them as n samples of one prompt at
  temperature 0.3 (``BaseRagasLLM.get_temperature(n)``), and so does ragscale (each sample its own
  seed, all records' samples batched per seed). score = mean cosine similarity between the
  embeddings of the user question and of the generated questions, times 0 when *every*
  generation is noncommittal (0.4.3 uses ``np.all``; older ragas used ``any``); ``null`` when
  every generated question is empty (ragas: NaN). The cosine is computed after the judge by the
  encoder pool (sentence embeddings of the packaged MiniLM, see ragscale/actors/encoder.py); this judge
  returns the generations in its details and ``answer_relevancy`` is filled there.
- **context_precision**: one ContextPrecisionPrompt per retrieved context (question, context,
  answer = the reference), verdict 0/1 ("was the context useful in arriving at the answer");
  score = Σₖ (precision@k · vₖ) / (Σ vₖ + 1e-10), so 0.0 when no context is useful.
- **context_recall**: one ContextRecallClassificationPrompt per record (question, the contexts
  joined with newlines, answer = the reference) classifying each reference sentence as
  attributable (1) or not; score = attributed / classified; ``null`` when nothing is classified
  (ragas: NaN). The schema asks for 1 to 2n + 1 classifications for a reference of n sentences.

The question is ragas' ``user_input``: for a RAGAS-style record that field; for an MT-RAG record
the conversation as ``speaker: text`` lines, as MT-RAG passes it to ragas for RL_F. Answer
relevancy embeds the record's question (``JudgeInput.query``: the last user turn) instead, since a generated question is
compared with a question, not with a whole conversation. No reference, or no contexts, gives
``null`` with the reason (ragas: NaN without a reference; with no contexts ragas 0.4.3 scores
precision 0.0 and asks recall against an empty context). Outputs are constrained by JSON
schemas (with caps on list lengths and text sizes); anything else is a parse failure, never a
default.

Under the ``reference`` protocol each judge runs ragas' own generation loop and parser
(judges/ragas_protocol.py ``ask``, ``ask_all``: the prompt string as one user message, no
schema, temperature 0.01, 0.3 for answer relevancy's n samples, ``extract_json`` + LangChain's
JSON parser + pydantic's lax validation, FixOutputFormat for an output that does not parse) and
ragas' handling of the edge cases:

- every value of ragas' integer fields counts (``verdict``, ``attributed``: truthy is 1;
  ``noncommittal`` as ``np.all`` reads it), no caps on list lengths or texts;
- answer relevancy embeds ragas' ``user_input`` (``JudgeInput.user_input``: the conversation of
  an MT-RAG record) and asks even for an empty response; a sample that does not parse makes the
  score ``null`` (ragas raises, NaN), where ``constrained`` averages the other samples;
- context precision: a context whose verdict does not parse makes the score ``null`` (as in
  ``constrained``); no contexts score 0.0 without asking (ragas' 1e-10 denominator);
- context recall: no contexts are asked against an empty context (ragas joins an empty list);
- no reference: ``null`` with the reason (ragas: a validation error, NaN); no user question
  for answer relevancy: ``null`` (ragas would embed an empty string).

The other differences (seed, ``max_tokens``, truncated outputs, re-asks after ragas gives up)
are ragas_protocol.py's, listed there.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ragscale.judges.base import JudgeSpec, Failed, JudgeParseError, JudgePrompt, JudgeResult, JudgeRun, Undefined, load_json_object
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.ragas_protocol import ask, ask_all, reference_prompt, render
from ragscale.metrics.registry import UNIT, MetricSpec, declare

VERSION = "ragas-0.4.3-v1"
REFERENCE_VERSION = "ragas-0.4.3-ref-v1"
ANSWER_RELEVANCY, CONTEXT_PRECISION, CONTEXT_RECALL = (
    "ragas_answer_relevancy", "ragas_context_precision", "ragas_context_recall")
STRICTNESS = 3  # ragas ResponseRelevancy.strictness
SAMPLE_TEMPERATURE = 0.3  # ragas BaseRagasLLM.get_temperature(n > 1)
MAX_SENTENCES = 30

RELEVANCE_SCHEMA = {
    "type": "object",
    "properties": {"question": {"type": "string", "maxLength": 400},
                   "noncommittal": {"type": "integer", "enum": [0, 1]}},
    "required": ["question", "noncommittal"],
}
VERIFICATION_SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string", "maxLength": 400}, "verdict": {"type": "integer", "enum": [0, 1]}},
    "required": ["reason", "verdict"],
}
RECALL_SCHEMA = {
    "type": "object",
    "properties": {"classifications": {
        "type": "array", "maxItems": MAX_SENTENCES,
        "items": {"type": "object",
                  "properties": {"statement": {"type": "string", "maxLength": 400},
                                 "reason": {"type": "string", "maxLength": 200},
                                 "attributed": {"type": "integer", "enum": [0, 1]}},
                  "required": ["statement", "reason", "attributed"]}}},
    "required": ["classifications"],
}


# ragas' output models (shapes, as judges/ragas_protocol.py ``validate`` reads them)
RELEVANCE_MODEL = {"question": str, "noncommittal": int}  # ResponseRelevanceOutput
VERIFICATION_MODEL = {"reason": str, "verdict": int}  # Verification
CLASSIFICATIONS_MODEL = {"classifications": [{"statement": str, "reason": str, "attributed": int}]}
TEMPLATES = {ANSWER_RELEVANCY: "ragas_answer_relevancy_v1", CONTEXT_PRECISION: "ragas_context_precision_v1",
             CONTEXT_RECALL: "ragas_context_recall_v1"}


def _prompt(judge: str, template: str, data: dict, schema: dict, max_tokens: int,
            sampling: tuple[float, int] | None = None) -> JudgePrompt:
    text = render(template, data)
    return JudgePrompt(judge, VERSION, ({"role": "user", "content": text},), schema, max_tokens=max_tokens,
                       sampling=sampling)


def reference(judge: str, data: dict, sample: int | None = None) -> JudgePrompt:
    """A judge's ragas prompt under the reference protocol (``sample``: one of n samples, at 0.3)."""
    return reference_prompt(judge, REFERENCE_VERSION, render(TEMPLATES[judge], data), sample,
                            **({"temperature": SAMPLE_TEMPERATURE} if sample is not None else {}))


def relevance_prompt(response: str, sample: int = 0) -> JudgePrompt:
    """ResponseRelevancePrompt for one response; ``sample`` picks the seed of one of the n samples."""
    return _prompt(ANSWER_RELEVANCY, TEMPLATES[ANSWER_RELEVANCY], {"response": response}, RELEVANCE_SCHEMA, 160,
                   sampling=(SAMPLE_TEMPERATURE, sample))


def precision_prompt(question: str, context: str, answer: str) -> JudgePrompt:
    """ContextPrecisionPrompt (QAC) for one retrieved context; ``answer`` is the reference."""
    return _prompt(CONTEXT_PRECISION, TEMPLATES[CONTEXT_PRECISION],
                   {"question": question, "context": context, "answer": answer}, VERIFICATION_SCHEMA, 192)


def reference_sentences(answer: str) -> int:
    """A rough count of the reference's sentences (split after . ! ? and at line breaks); it
    only sizes the classification list's bounds, the judge splits the sentences itself."""
    return sum(1 for s in re.split(r"(?<=[.!?])\s+|\n+", answer) if s.strip())


def recall_schema(answer: str) -> dict:
    """RECALL_SCHEMA sized to the reference: at most 2n + 1 classifications for its n sentences
    (room for a judge that splits compound sentences; never over MAX_SENTENCES), and at least one
    when it has any text. An empty list is a valid ragas output (score NaN), but for a non-blank
    reference it only comes from a degenerate judge (SmolLM2 answers ``[]`` greedily), and an
    unbounded list from one that loops; neither is offered to the decoder."""
    n = reference_sentences(answer)
    if not n:
        return RECALL_SCHEMA
    items = dict(RECALL_SCHEMA["properties"]["classifications"], minItems=1, maxItems=min(MAX_SENTENCES, 2 * n + 1))
    return dict(RECALL_SCHEMA, properties={"classifications": items})


def recall_prompt(question: str, context: str, answer: str) -> JudgePrompt:
    """ContextRecallClassificationPrompt (QCA); ``context`` is the contexts joined with newlines."""
    schema = recall_schema(answer)
    cap = schema["properties"]["classifications"]["maxItems"]
    return _prompt(CONTEXT_RECALL, TEMPLATES[CONTEXT_RECALL],
                   {"question": question, "context": context, "answer": answer}, schema,
                   min(4096, 64 + 176 * cap))  # an item: <= 400 + 200 characters of text and its keys


def _int01(judge: str, raw: str, value: Any, what: str) -> int:
    if isinstance(value, bool) or value not in (0, 1):
        raise JudgeParseError(judge, raw, f"{what} is {value!r}, not 0 or 1")
    return int(value)


def parse_relevance(raw: str) -> dict:
    """``{"question": str, "noncommittal": 0|1}``."""
    obj = load_json_object(ANSWER_RELEVANCY, raw)
    if not isinstance(obj.get("question"), str):
        raise JudgeParseError(ANSWER_RELEVANCY, raw, "question is not a string")
    return {"question": obj["question"], "noncommittal": _int01(ANSWER_RELEVANCY, raw, obj.get("noncommittal"),
                                                                "noncommittal")}


def parse_verification(raw: str) -> int:
    """``{"reason": str, "verdict": 0|1}`` -> the verdict."""
    obj = load_json_object(CONTEXT_PRECISION, raw)
    if not isinstance(obj.get("reason"), str):
        raise JudgeParseError(CONTEXT_PRECISION, raw, "reason is not a string")
    return _int01(CONTEXT_PRECISION, raw, obj.get("verdict"), "verdict")


def parse_classifications(raw: str) -> list[int]:
    """``{"classifications": [{"statement", "reason", "attributed": 0|1}, ...]}`` -> the labels."""
    items = load_json_object(CONTEXT_RECALL, raw).get("classifications")
    if not isinstance(items, list):
        raise JudgeParseError(CONTEXT_RECALL, raw, "classifications is not a list")
    out = []
    for it in items:
        if not isinstance(it, dict) or not isinstance(it.get("statement"), str) or not isinstance(it.get("reason"), str):
            raise JudgeParseError(CONTEXT_RECALL, raw, f"classification {it!r} lacks statement or reason")
        out.append(_int01(CONTEXT_RECALL, raw, it.get("attributed"), "attributed"))
    return out


def average_precision(verdicts: Sequence[int]) -> float:
    """ragas ``_calculate_average_precision``: Σₖ (precision@k · vₖ) / (Σ vₖ + 1e-10)."""
    v = [1 if x else 0 for x in verdicts]
    num = sum((sum(v[: i + 1]) / (i + 1)) * v[i] for i in range(len(v)))
    return num / (sum(v) + 1e-10)


def recall_score(attributed: Sequence[int]) -> float | Undefined:
    """ragas ``_compute_score``: attributed / classified; undefined (ragas: NaN) when empty."""
    if not attributed:
        return Undefined("no reference sentence was classified")
    return sum(1 for a in attributed if a) / len(attributed)


def answer_relevancy(inp: JudgeInput, strictness: int = STRICTNESS, protocol: str = "constrained",
                     model: str = "") -> JudgeRun:
    """The question-generation round of answer relevancy (the cosine is the encoder pool's)."""
    if protocol == "reference":
        return (yield from _reference_relevancy(inp, strictness))
    answer = inp.prediction
    question = inp.query
    if not answer.strip():
        return Undefined("no response")
    if not question.strip():
        return Undefined("no user question to compare the generated questions with")
    answers: list[Any] = yield [(relevance_prompt(answer, i), parse_relevance) for i in range(strictness)]
    good = [a for a in answers if not isinstance(a, Failed)]  # a failed sample is left out (and in judge_errors)
    if not good:
        return JudgeResult({"answer_relevancy": None}, {"question": question, "generated": [], "noncommittal": [],
                                                        "failed": len(answers)})
    return JudgeResult({"answer_relevancy": None}, {
        "question": question, "generated": [a["question"] for a in good],
        "noncommittal": [a["noncommittal"] for a in good], "failed": len(answers) - len(good)})


def _reference_relevancy(inp: JudgeInput, strictness: int) -> JudgeRun:
    """ragas ``ResponseRelevancy._ascore``: n samples of one prompt; any sample without an output
    that parses makes the score null (ragas raises: NaN)."""
    question = inp.user_input
    if not question.strip():
        return Undefined("no user question to compare the generated questions with")
    answers = yield from ask_all([reference(ANSWER_RELEVANCY, {"response": inp.prediction}, i)
                                  for i in range(strictness)], RELEVANCE_MODEL)
    failed = sum(isinstance(a, Failed) for a in answers)
    good = [] if failed else answers
    return JudgeResult({"answer_relevancy": None}, {
        "question": question, "generated": [a["question"] for a in good],
        "noncommittal": [a["noncommittal"] for a in good], "failed": failed})


def _context_inputs(inp: JudgeInput, metric: str, protocol: str = "constrained") -> tuple[list[str], str] | Undefined:
    """(contexts, reference) of a record, or why a reference-based context metric is undefined
    (under ``reference`` no contexts is not: ragas scores them)."""
    contexts = list(inp.passages)
    if not inp.targets:
        return Undefined(f"no reference answer ({metric} compares the retrieved contexts with the reference)")
    if not contexts and protocol != "reference":
        return Undefined("no retrieved contexts")
    return contexts, inp.targets[0]


def context_precision(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> JudgeRun:
    """One verdict per retrieved context, then ragas' average precision."""
    inputs = _context_inputs(inp, "context_precision", protocol)
    if isinstance(inputs, Undefined):
        return inputs
    contexts, reference_answer = inputs
    question = inp.user_input
    verdicts: list[Any]
    if protocol == "reference":
        outputs = yield from ask_all([reference(CONTEXT_PRECISION, {"question": question, "context": c,
                                                                    "answer": reference_answer})
                                      for c in contexts], VERIFICATION_MODEL)
        verdicts = [o if isinstance(o, Failed) else o["verdict"] for o in outputs]
    else:
        verdicts = yield [(precision_prompt(question, c, reference_answer), parse_verification) for c in contexts]
    if any(isinstance(v, Failed) for v in verdicts):
        return JudgeResult({"context_precision": None},
                           {"verdicts": [None if isinstance(v, Failed) else v for v in verdicts]})
    return JudgeResult({"context_precision": average_precision(verdicts)}, {"verdicts": verdicts})


def context_recall(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> JudgeRun:
    """One classification of the reference's sentences against the joined contexts."""
    inputs = _context_inputs(inp, "context_recall", protocol)
    if isinstance(inputs, Undefined):
        return inputs
    contexts, reference_answer = inputs
    data = {"question": inp.user_input, "context": "\n".join(contexts), "answer": reference_answer}
    if protocol == "reference":
        output = yield from ask(reference(CONTEXT_RECALL, data), CLASSIFICATIONS_MODEL)
        attributed = [c["attributed"] for c in output["classifications"]]
    else:
        attributed = yield recall_prompt(data["question"], data["context"], data["answer"]), parse_classifications
    score = recall_score(attributed)
    if isinstance(score, Undefined):
        return score
    return JudgeResult({"context_recall": score}, {"attributed": attributed})


declare(*(MetricSpec(name, "judge", "ragas", scalar=True, needs=needs, aliases=aliases, reference=f"ragas 0.4.3 {ref}",
                     bounds=(-1.0, 1.0) if name == "answer_relevancy" else UNIT,  # answer_relevancy: a mean cosine
                     embedded=name == "answer_relevancy")  # of the generated questions' embeddings
          for name, ref, needs, aliases in (
              ("answer_relevancy", "ResponseRelevancy", ("question",), ("response_relevancy",)),
              ("context_precision", "LLMContextPrecisionWithReference", ("question", "contexts", "reference"),
               ("llm_context_precision_with_reference",)),
              ("context_recall", "LLMContextRecall", ("question", "contexts", "reference"), ("llm_context_recall",)))))


JUDGE_SPECS = (
    JudgeSpec(ANSWER_RELEVANCY, "answer_relevancy", VERSION, answer_relevancy, reference_version=REFERENCE_VERSION,
              completion_tokens=40, probe=lambda u: [relevance_prompt(u)], delimiters=("json", None)),
    JudgeSpec(CONTEXT_PRECISION, "context_precision", VERSION, context_precision, reference_version=REFERENCE_VERSION,
              completion_tokens=60, probe=lambda u: [precision_prompt(u, u, u)], delimiters=("json", None)),
    JudgeSpec(CONTEXT_RECALL, "context_recall", VERSION, context_recall, reference_version=REFERENCE_VERSION,
              completion_tokens=100, probe=lambda u: [recall_prompt(u, u, u)], delimiters=("json", None)),
)
