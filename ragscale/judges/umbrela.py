"""UMBRELA passage relevance (open-rag-eval's retrieval metric; seed "Open RAG Eval Metrics
Documentation", UMBRELA).

Follows vectara/open-rag-eval ``open_rag_eval/metrics/umbrela_metric.py`` (``UMBRELAMetric``)
and ``models/llm_judges.py`` (``OpenAIModel.parse``): one prompt per (query, passage), a grade
0-3, ``mean_umbrela_score`` = the mean grade (``evaluators/trec_evaluator.py``).

Constrained protocol (the default, version ``open-rag-eval-umbrela-v1``):

- Prompt: open-rag-eval's *standard* ``_UMBRELA_PROMPT`` (templates/umbrela_v1.txt, verbatim
  with its source indentation), i.e. castorini/umbrela's ``qrel_zeroshot_bing`` prompt whose
  last line asks for a bare integer instead of ``##final score: N``. open-rag-eval switches to
  a reworded ``_UMBRELA_NEW_PROMPT`` when the judge model's name contains "gpt-oss" or "qwen";
  this protocol always uses the standard prompt, whatever the judge model, so that a grade
  depends on the model alone. The system message is the one ``OpenAIModel.parse`` sends. The
  query and passage sit where the template puts them (the few instruction lines after them are
  short): everything up to the passage is shared by all passages of a record.
- Output: open-rag-eval asks for structured output with the pydantic model
  ``UMBRELAScore{score: "0"|"1"|"2"|"3"}`` (a string enum); ragscale constrains the output with
  an equivalent inline JSON schema (``{"score": "0".."3"}``, no rationale: the prompt asks for
  none) instead of umbrela's ``##final score: N`` line. Anything else is a parse failure, never
  a default.
- Sampling: open-rag-eval uses temperature 0, top_p 1, presence_penalty 0.5,
  frequency_penalty 0, seed 42 (the UMBRELA paper's settings); here sampling is the judge
  engine's (greedy, seed 0).
- Failures: open-rag-eval fails the whole record when one grade fails; here that passage has a
  ``None`` grade (listed in judge_errors by the actor) and the others are averaged.

Reference protocol (``judge.protocol=reference``, version ``open-rag-eval-umbrela-ref-v1``),
what open-rag-eval's ``OpenAIModel.parse`` sends and how its client reads the answer:

- Prompt: ``_UMBRELA_NEW_PROMPT`` (templates/umbrela_new_v1.txt) when the judge model's name,
  lower-cased, contains "gpt-oss" or "qwen" (``uses_new_prompt``; the name is the engine's:
  judge.model, the GGUF file name for llama.cpp), else the standard one; same system message.
- Output: the JSON schema pydantic gives ``UMBRELAScore`` (the enum in ``$defs``), read as the
  OpenAI client reads it (``OragOutput.parse``: the whole text one JSON object, ``"score"``
  exactly "0".."3", no stripping or case folding, no number).
- Sampling: the metric's ``model_kwargs``: temperature 0, seed 42, top_p 1, presence_penalty
  0.5, frequency_penalty 0 (``REFERENCE_PARAMS``).
- Per record: a record without a generated answer is not graded (open-rag-eval's loader skips
  it); an empty query is graded as it is; one failed grade fails the record's UMBRELA metrics
  (``umbrela_scores`` and ``umbrela_mean`` null; the failed grades are in judge_errors, the
  others in the details).
- Still different: open-rag-eval sends no max_tokens (``ORAG_MAX_TOKENS`` bounds each output
  here); the actor re-asks after a parse failure (judge.max_retries, temperature 0.7), which
  open-rag-eval does not (max_retries=0 for none); a failed grade fails every metric of the
  record in open-rag-eval, here UMBRELA's and the nuggets' (which need the grades); its Gemini,
  Anthropic and Together backends send other messages (no system message, the schema in the
  prompt): the reference is its OpenAI-compatible backend; untrusted text gets the same marker
  escaping as under constrained (ragscale.judges.templates.neutralize: ordinary text unchanged).

Both protocols: open-rag-eval keys grades by passage id (a repeated id is graded once, with its
last text); ragscale grades every passage, in input order (its open-rag-eval CSV reader refuses
a repeated id with another text).

Metrics: ``umbrela_scores`` (one grade or ``None`` per passage, input order), ``umbrela_mean``.
Details: ``{passage id: grade or None}``. The retrieval metrics derived from the grades
(Precision@K, AP@K, MRR) are in ragscale/metrics/trec.py.

The shared pieces of open-rag-eval's reference requests (system message, sampling, output
schema and reading: ``OragOutput``, ``reference_prompt``) live here and serve the citation,
no-answer and nugget judges too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ragscale.judges.templates import Markers, declare_markers
from ragscale.judges.base import (JudgeSpec, Failed, JudgeParseError, JudgePrompt, JudgeResult, JudgeRun, Undefined,
                                  load_json_object, loads_json)
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.templates import load_template, neutralize
from ragscale.metrics.trec import umbrela_mean
from ragscale.metrics.registry import MetricSpec, declare

NAME = "umbrela"
VERSION = "open-rag-eval-umbrela-v1"
GRADES = ["0", "1", "2", "3"]
GRADE_RANGE = (float(GRADES[0]), float(GRADES[-1]))  # the bounds of a grade and of their mean
SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "string", "enum": GRADES}},
    "required": ["score"],
}

# What open-rag-eval's OpenAIModel.parse sends as the system message of every judge prompt.
ORAG_SYSTEM = "You are a helpful assistant that follows user instructions precisely and provides accurate information."
# open-rag-eval's prompts are indented class attributes ending in "\n" + 4 spaces; the template
# files keep the text up to the last line, and this tail is appended (see the template headers).
_TAIL = "\n    "
_SLOT = re.compile(r"\{(\w+)\}")


def orag_messages(template: str, values: Mapping[str, str], tail: str = _TAIL) -> tuple[dict, ...]:
    """An open-rag-eval prompt as chat messages: its system message, then the template with
    ``{name}`` slots filled in one pass (text inserted is never re-scanned, so a query or
    passage containing ``{passage}`` stays literal) plus the source string's ``tail``."""
    # a value cannot fake the template's own "Passage:" / "Your Response:" lines (templates.neutralize)
    text = _SLOT.sub(lambda m: neutralize(values[m.group(1)], template), load_template(template).rstrip("\n")) + tail
    return ({"role": "system", "content": ORAG_SYSTEM}, {"role": "user", "content": text})


# ---------------------------------------------------------------------------------------
# The reference protocol: open-rag-eval's requests (OpenAIModel.parse) and its reading of
# the outputs (the OpenAI client's ``message.parsed``), shared by its four LLM judges.
# ---------------------------------------------------------------------------------------

# (temperature, seed) of every open-rag-eval LLM metric's model_kwargs
ORAG_SAMPLING = (0.0, 42)
# why a judge does not judge a record under the reference protocol: open-rag-eval's
# RAGResultsLoader drops a query run without a generated answer (none, NO_ANSWER, API_ERROR)
ORAG_SKIPPED = "no generated answer: open-rag-eval skips the record"
# open-rag-eval sends no max_tokens (the server's limit applies); ragscale bounds every
# reference output at this many tokens (room for a reasoning model's thinking)
ORAG_MAX_TOKENS = 4096


@dataclass(frozen=True)
class OragOutput:
    """One of open-rag-eval's structured-output pydantic models: ``model`` with the one field
    ``field``, a string enum ``enum`` of ``labels`` (or, without labels, a string), or a list
    of it when ``many``. ``schema`` is the JSON schema pydantic gives the model (what the
    OpenAI client sends, made strict); ``parse`` reads an output as the client does."""

    model: str
    field: str
    labels: tuple[str, ...] | None = None
    enum: str = ""
    many: bool = False

    def schema(self) -> dict:
        """pydantic's ``model_json_schema()`` of the model (an enum goes to ``$defs``)."""
        item: dict = {"$ref": f"#/$defs/{self.enum}"} if self.labels else {"type": "string"}
        title = self.field.replace("_", " ").title()
        prop = {"items": item, "title": title, "type": "array"} if self.many else item
        out: dict = {"properties": {self.field: prop}, "required": [self.field], "title": self.model, "type": "object"}
        if self.labels:
            out["$defs"] = {self.enum: {"enum": list(self.labels), "title": self.enum, "type": "string"}}
        return out

    def parse(self, judge: str, raw: str) -> Any:
        """The field's value (a label, a string, or a list of them), as open-rag-eval gets it
        from ``model_validate_json``: the whole output one JSON object (whitespace around it
        only; no code fence, no trailing text, no raw control character or lone surrogate in
        a string; a repeated key's last value), the field present, every value a string and
        one of the labels exactly (no stripping, no case folding, no number for a string;
        other keys ignored). Anything else raises JudgeParseError."""
        try:
            obj = loads_json(raw)  # nested too deep: a ValueError
        except (TypeError, ValueError):
            raise JudgeParseError(judge, raw, "output is not JSON") from None
        if _has_lone_surrogate(obj):
            raise JudgeParseError(judge, raw, "output is not JSON (a lone surrogate escape)")
        if not isinstance(obj, dict):
            raise JudgeParseError(judge, raw, "output is not a JSON object")
        if self.field not in obj:
            raise JudgeParseError(judge, raw, f"no {self.field!r} in the output")
        value = obj[self.field]
        if self.many and not isinstance(value, list):
            raise JudgeParseError(judge, raw, f"{self.field} {value!r} is not a list")
        for v in value if self.many else [value]:
            if not isinstance(v, str) or (self.labels and v not in self.labels):
                allowed = ", ".join(self.labels) if self.labels else "a string"
                raise JudgeParseError(judge, raw, f"{self.field} value {v!r} is not {allowed}")
        return value


def _has_lone_surrogate(obj: Any) -> bool:
    """A string (key or value) holding an unpaired UTF-16 surrogate, which Python's json
    decodes from an escape and pydantic's JSON parser rejects. Iterative: any depth json reads."""
    todo = [obj]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            if any(0xD800 <= ord(c) <= 0xDFFF for c in item):
                return True
        elif isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return False


def reference_prompt(judge: str, version: str, template: str, values: Mapping[str, str], output: OragOutput,
                     params: tuple[tuple[str, float], ...] = (), tail: str = _TAIL) -> JudgePrompt:
    """An open-rag-eval prompt as its OpenAIModel.parse sends it: system message and template
    (``orag_messages``), ``output``'s schema, temperature 0 and seed 42, and ``params`` (the
    metric's further model_kwargs)."""
    return JudgePrompt(judge, version, orag_messages(template, values, tail), output.schema(),
                       max_tokens=ORAG_MAX_TOKENS, sampling=ORAG_SAMPLING, params=params)


def render(query: str, passage: str) -> JudgePrompt:
    """The UMBRELA prompt for one (query, passage)."""
    return JudgePrompt(NAME, VERSION, orag_messages("umbrela_v1", {"query": query, "passage": passage}), SCHEMA,
                       max_tokens=32)


def parse(raw: str) -> int:
    """``{"score": "0".."3"}`` -> the grade; anything else raises JudgeParseError."""
    score = load_json_object(NAME, raw).get("score")
    if isinstance(score, (bool, float)) or str(score).strip() not in GRADES:
        raise JudgeParseError(NAME, raw, f"score {score!r} is not one of 0, 1, 2, 3")
    return int(str(score).strip())


REFERENCE_VERSION = "open-rag-eval-umbrela-ref-v1"
REFERENCE_OUTPUT = OragOutput("UMBRELAScore", "score", tuple(GRADES), "UMBRELAScoreValues")
# UMBRELAMetric.model_kwargs beyond temperature and seed ("to match the UMBRELA paper"), in its order
REFERENCE_PARAMS = (("top_p", 1.0), ("presence_penalty", 0.5), ("frequency_penalty", 0.0))
NEW_PROMPT_MODELS = ("gpt-oss", "qwen")  # names UMBRELAMetric.compute sends _UMBRELA_NEW_PROMPT to


def uses_new_prompt(model: str) -> bool:
    """Whether open-rag-eval grades with ``_UMBRELA_NEW_PROMPT`` for the judge model ``model``
    (its lower-cased name contains "gpt-oss" or "qwen")."""
    return any(name in model.lower() for name in NEW_PROMPT_MODELS)


def render_reference(query: str, passage: str, model: str) -> JudgePrompt:
    """The UMBRELA prompt for one (query, passage) as open-rag-eval sends it to ``model``."""
    template = "umbrela_new_v1" if uses_new_prompt(model) else "umbrela_v1"
    return reference_prompt(NAME, REFERENCE_VERSION, template, {"query": query, "passage": passage}, REFERENCE_OUTPUT,
                            REFERENCE_PARAMS)


def parse_reference(raw: str) -> int:
    """open-rag-eval's reading: ``int(UMBRELAScore.score.value)``; anything else raises JudgeParseError."""
    return int(REFERENCE_OUTPUT.parse(NAME, raw))


def _start_reference(inp: JudgeInput, model: str) -> JudgeRun:
    """The reference protocol's record: skipped without an answer, failed by one failed grade."""
    passages = list(inp.passages)
    if not inp.prediction.strip():
        return Undefined(ORAG_SKIPPED)
    if not passages:
        return Undefined("no passages")
    answers: list[Any] = yield [(render_reference(inp.query, p, model), parse_reference) for p in passages]
    grades = [None if isinstance(a, Failed) else a for a in answers]
    ids = inp.passage_ids
    ok = None not in grades  # open-rag-eval: one failed grade fails the record
    return JudgeResult(
        metrics={"umbrela_scores": grades if ok else None, "umbrela_mean": umbrela_mean(grades) if ok else None},
        details=dict(zip(ids, grades)),
    )


def start(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> JudgeRun:
    """Grade every passage of a record in one fan-out round (see the module docstring)."""
    if protocol == "reference":
        return (yield from _start_reference(inp, model))
    passages = list(inp.passages)
    if not passages:
        return Undefined("no passages")
    query = inp.query
    if not query.strip():
        return Undefined("no query")
    answers: list[Any] = yield [(render(query, p), parse) for p in passages]
    grades = [None if isinstance(a, Failed) else a for a in answers]
    ids = inp.passage_ids
    return JudgeResult(
        metrics={"umbrela_scores": grades, "umbrela_mean": umbrela_mean(grades)},
        details=dict(zip(ids, grades)),
    )


declare(
    MetricSpec("umbrela_scores", "judge", "retrieval", shape="vector", dtype="int", needs=("question", "contexts"),
               bounds=GRADE_RANGE, reads_answer=False,
               reference="castorini/umbrela, vectara/open-rag-eval open_rag_eval/metrics/umbrela_metric.py"),
    MetricSpec("umbrela_mean", "judge", "retrieval", scalar=True, requires=("umbrela_scores",), short="UMBRELA",
               needs=("question", "contexts"), aliases=("mean_umbrela_score", "umbrela"), bounds=GRADE_RANGE,
               reads_answer=False,
               reference="vectara/open-rag-eval open_rag_eval/metrics/umbrela_metric.py"),
)


declare_markers("umbrela_v1", Markers(labels=("Query:", "Passage:")))
declare_markers("umbrela_new_v1", Markers(inline=("<query>", "</query>", "<passage>", "</passage>")))  # the reference protocol's

JUDGE_SPECS = (JudgeSpec(NAME, "umbrela_scores", VERSION, start, ("umbrela_scores", "umbrela_mean"),
                         reference_version=REFERENCE_VERSION, completion_tokens=8,
                         probe=lambda u: [render(u, u)], delimiters=("markers", "umbrela_v1")),)
