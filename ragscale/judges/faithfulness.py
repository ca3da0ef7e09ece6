"""MT-RAG step 3, RAGAS faithfulness (``RL_F``), and the ``reference`` protocol of ragas' judges.

MT-RAG's ``judge_wrapper.run_ragas_judges_*`` calls ragas' ``faithfulness`` with
question = the whole conversation (``speaker: text`` lines), answer = the response and
contexts = the passage texts. ragas (0.4.3, ``ragas.metrics._faithfulness``) then:

1. asks the LLM to break the answer into standalone statements (StatementGeneratorPrompt);
   no statements -> the score is NaN;
2. asks it to judge all statements at once against the contexts joined with newlines
   (NLIStatementPrompt), one verdict 0/1 per statement;
3. score = number of verdicts that are truthy / number of verdicts returned.

ragas 0.3.3 (MT-RAG's pin) and 0.4.3 have the same faithfulness module (prompts, examples,
output models, score), the same prompt rendering (``PydanticPrompt.to_string``), output parser
(``RagasOutputParser``, ``extract_json``) and sampling (``BaseRagasLLM.get_temperature``).

Both protocols render the same prompt strings (tested equal to ragas' ``to_string``; the fixed
parts are in templates/ragas_faithfulness_*_v1.txt) and compute the same score from the same
outputs (tested with a scripted LLM against ragas itself).

``constrained`` (the default) differs where ragas has no answer or leans on free text:

- no statements, or no passages: ``null`` with that reason (ragas: NaN for no statements; with
  no passages ragas 0.4.3 still asks, judging the statements against an empty context);
- outputs are constrained by JSON schemas: at most ``MAX_STATEMENTS`` (12) statements of
  at most 400 characters, one verdict object per statement, verdict 0 or 1, reasons of at
  most 200 characters; ragas parses free text (no caps) and asks the LLM to fix malformed
  JSON instead. The caps bound the cost of a degenerate judge that repeats itself (small
  models do); a response with more than 12 statements is judged on its first 12;
- an output that still fails to parse after the bounded retry is a parse failure and the
  score is ``null``, never a default.

``reference`` runs ragas' own generation loop and parser (judges/ragas_protocol.py, where the
differences every ragas judge shares are listed: seed, ``max_tokens``, truncated outputs,
re-asks after ragas gives up) on ragas' two faithfulness prompts: the statements as
``StatementGeneratorOutput``, the verdicts as ``NLIStatementOutput``. With no passages the
statements are judged against an empty context, as ragas does.

Both rounds go through the judge actor batched across records.
"""

from __future__ import annotations

from typing import Sequence

from ragscale.judges.base import JudgeParseError, JudgePrompt, JudgeRun, JudgeSpec, Undefined, load_json_object
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.ragas_protocol import ask, reference_prompt, render
from ragscale.metrics.registry import UNIT, MetricSpec, declare

NAME = "ragas_faithfulness"
VERSION = "ragas-0.4.3-faithfulness-v1"
REFERENCE_VERSION = "ragas-0.4.3-faithfulness-ref-v1"
MAX_STATEMENTS = 12
STATEMENTS_SCHEMA = {
    "type": "object",
    "properties": {
        "statements": {
            "type": "array",
            "items": {"type": "string", "maxLength": 400},
            "maxItems": MAX_STATEMENTS,
        }
    },
    "required": ["statements"],
}


def _verdicts_schema(n: int) -> dict:
    return {
        "type": "object",
        "properties": {
            "statements": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "statement": {"type": "string", "maxLength": 400},
                        "reason": {"type": "string", "maxLength": 200},
                        "verdict": {"type": "integer", "enum": [0, 1]},
                    },
                    "required": ["statement", "reason", "verdict"],
                },
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["statements"],
    }


def statements_prompt(question: str, answer: str) -> JudgePrompt:
    """ragas' statement-generation prompt for one (question, answer)."""
    text = render("ragas_faithfulness_statements_v1", {"question": question, "answer": answer})
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), STATEMENTS_SCHEMA, max_tokens=1024)


def verdicts_prompt(context: str, statements: Sequence[str]) -> JudgePrompt:
    """ragas' NLI prompt: all statements of one answer judged against the joined contexts."""
    text = render("ragas_faithfulness_nli_v1", {"context": context, "statements": list(statements)})
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), _verdicts_schema(len(statements)),
                       max_tokens=64 + 200 * len(statements))


def parse_statements(raw: str) -> list[str]:
    """``{"statements": [str, ...]}`` -> the statements (may be empty)."""
    st = load_json_object(NAME, raw).get("statements")
    if not isinstance(st, list) or not all(isinstance(s, str) for s in st):
        raise JudgeParseError(NAME, raw, "statements is not a list of strings")
    return st


def parse_verdicts(raw: str) -> list[int]:
    """``{"statements": [{"statement", "reason", "verdict"}, ...]}`` -> the verdicts."""
    st = load_json_object(NAME, raw).get("statements")
    if not isinstance(st, list):
        raise JudgeParseError(NAME, raw, "statements is not a list")
    out = []
    for item in st:
        v = item.get("verdict") if isinstance(item, dict) else None
        if isinstance(v, bool) or not isinstance(v, int) or not isinstance(item.get("statement"), str) \
                or not isinstance(item.get("reason"), str):
            raise JudgeParseError(NAME, raw, f"verdict entry {item!r} lacks statement, reason or an integer verdict")
        out.append(v)
    return out


def score(verdicts: Sequence[int]) -> float | Undefined:
    """ragas ``_compute_score``: truthy verdicts over verdicts returned."""
    if not verdicts:
        return Undefined("the verdict list is empty")
    return sum(1 for v in verdicts if v) / len(verdicts)


# ragas' output models of the two prompts (shapes, as ragas_protocol.validate reads them)
STATEMENTS_MODEL = {"statements": [str]}  # StatementGeneratorOutput
NLI_MODEL = {"statements": [{"statement": str, "reason": str, "verdict": int}]}  # NLIStatementOutput


def reference_run(question: str, answer: str, passages: Sequence[str]) -> JudgeRun:
    """Faithfulness under the reference protocol (ragas' ``Faithfulness._ascore``)."""
    prompt = reference_prompt(NAME, REFERENCE_VERSION,
                              render("ragas_faithfulness_statements_v1", {"question": question, "answer": answer}))
    statements = (yield from ask(prompt, STATEMENTS_MODEL))["statements"]
    if not statements:
        return Undefined("no statements could be extracted from the response")
    prompt = reference_prompt(NAME, REFERENCE_VERSION, render(
        "ragas_faithfulness_nli_v1", {"context": "\n".join(passages or []), "statements": statements}))
    verdicts = (yield from ask(prompt, NLI_MODEL))["statements"]
    return score([v["verdict"] for v in verdicts])


def run(question: str, answer: str, passages: Sequence[str]) -> JudgeRun:
    """The two-round faithfulness judge for one record (see the module docstring)."""
    if not passages:
        return Undefined("no passages to check the response against")
    statements = yield statements_prompt(question, answer), parse_statements
    if not statements:
        return Undefined("no statements could be extracted from the response")
    verdicts = yield verdicts_prompt("\n".join(passages), statements), parse_verdicts
    return score(verdicts)


def from_record(inp: JudgeInput, protocol: str = "constrained", model: str = "") -> JudgeRun:
    """``run`` (or ``reference_run``) on a record: ragas' ``user_input`` (MT-RAG's conversation,
    else the record's question: ``JudgeInput.user_input``), response and passage texts. ``model``
    (the judge model's name) does not change ragas' prompts."""
    args = (inp.user_input, inp.prediction, inp.passages)
    return reference_run(*args) if protocol == "reference" else run(*args)


declare(MetricSpec("RL_F", "judge", "ragas", needs=("question", "contexts"), aliases=("faithfulness",), bounds=UNIT, reference="ragas Faithfulness (MT-RAG step 3)"))


JUDGE_SPECS = (JudgeSpec(NAME, "RL_F", VERSION, from_record, reference_version=REFERENCE_VERSION,
                         completion_tokens=150, delimiters=("json", None),
                         probe=lambda u: [statements_prompt(u, u), verdicts_prompt(u, [u, u])]),)
