"""open-rag-eval's AutoNuggetizer judge (TREC 2024 RAG nugget evaluation, arXiv:2411.09607).

Reference: vectara/open-rag-eval@dfc4175 ``open_rag_eval/metrics/autonugget_metric.py``
(``AutoNuggetMetric``), called by ``open_rag_eval/evaluators/trec_evaluator.py`` after
UMBRELA; castorini/nuggetizer for context. Score math, with open-rag-eval's denominators
clamped to >= 1 (no vital nugget -> Vital 0.0): ragscale/metrics/nuggets.py.
Prompt texts: templates/nuggets_{create,importance,assign}_v1.txt. What follows up to
"Reference protocol" is the constrained protocol (the default, version
``openrageval-autonugget-v1``).

Rounds of one record (the judge actor runs each round across all records of a batch):

1. creation, up to ``CREATION_ITERS`` (5) single steps: the query, the passages whose
   UMBRELA grade is >= 1 (renumbered ``[1] text``, ``[2] text``... in passage order, joined
   by newlines; the whole context every iteration, no passage windows as castorini's
   nuggetizer has) and the current nugget list (Python ``repr``, ``[]`` at first) ->
   ``{"nuggets": [str]}`` (at most 30 items of at most 200 characters), which replaces the
   list. Stops once the list has 30 nuggets (open-rag-eval) or comes back unchanged (the
   next prompt would be the same prompt, answered the same with greedy decoding or the cache);
2. importance, one fan-out round of batches of ``BATCH`` (10) nuggets ->
   ``{"importance": ["vital"|"okay"] * n}`` (exactly n); then a stable sort puts vital
   before okay, creation order kept within each class, and the first ``KEEP`` (20) stay;
3. assignment, one fan-out round of batches of 10 kept nuggets against the answer ->
   ``{"assignment": ["support"|"partial_support"|"not_support"] * n}`` (exactly n).

The answer judged is open-rag-eval's: the answer parts' texts joined by spaces, i.e. the
answer without its citation markers (``ragscale.metrics.trec.answer_text``).

Metrics and their open-rag-eval counterparts (``generation_score_*`` columns of its TREC
CSV; ``autonugget_scores`` is the dict ``AutoNuggetMetric.compute`` returns, which
``ragscale.metrics.nuggets.autonugget_scores`` rebuilds from the details):

=============================  =======================================================================
ragscale                       open-rag-eval
=============================  =======================================================================
nuggets_all                    autonugget_scores["nuggetizer_scores"]["All"]
nuggets_strict_all             autonugget_scores["nuggetizer_scores"]["All Strict"]
nuggets_vital                  autonugget_scores["nuggetizer_scores"]["Vital"]; vital_nuggetizer_score
nuggets_strict_vital           autonugget_scores["nuggetizer_scores"]["Vital Strict"]
nuggets_weighted               autonugget_scores["nuggetizer_scores"]["Weighted"]
nuggets_strict_weighted        autonugget_scores["nuggetizer_scores"]["Weighted Strict"]
nuggets_assignment_mean        mean_nugget_assignment_score (mean of assignment_scores; = All)
nuggets_count                  len(autonugget_scores["nuggets"]) (no key of its own)
details.nuggets[i].text        autonugget_scores["nuggets"][i]
details.nuggets[i].importance  autonugget_scores["labels"][i]
details.nuggets[i].assignment  autonugget_scores["assignments"][i]; its score in "assignment_scores"
all null (Undefined)           autonugget_scores = {}, and 0.5 for both mean_nugget_assignment_score
                               and vital_nuggetizer_score (the evaluator's "neutral" fallback)
=============================  =======================================================================

Details: ``{"nuggets": [{"text", "importance", "assignment"}], "created": n created,
"iterations": creation rounds run, "passages_used": ids, "passages_ungraded": ids}``.

Null (``Undefined``, with the reason) where open-rag-eval returns ``{}``: no generated
answer, empty query, an empty nugget list from a creation round, or an importance or
assignment batch that still fails after the actor's re-asks (open-rag-eval raises on any
failed or miscounted batch; leaving those nuggets out would change the denominators).
Also null: no ``umbrela_scores`` in the row's metrics, a grade list whose length is not
the passage count, or no passage graded at all. A passage whose grade is ``None`` (its
UMBRELA prompt failed) is left out of the context like a grade-0 one (open-rag-eval reads
a missing grade as 0) and listed in ``passages_ungraded``. No passage graded >= 1 (or no
passages) is not null: the context is empty and the prompt asks for the single nugget
"Not enough information, no answer found", as in open-rag-eval's metric (its evaluator
then fails a record without passages on the mean UMBRELA score, a division by zero).

Deviations from open-rag-eval, and why:

- prompt layout: the instruction lines are open-rag-eval's, dedented, in their order, but
  the record's lines (query, context, nugget list, answer) come after them, for prefix
  caching, with the query, context and answer fenced in tags (closing fence tags inside them
  are escaped) as untrusted data, plus one line giving the JSON answer form; open-rag-eval's
  system message (only its OpenAI backend sends one) is not sent;
- outputs are constrained by JSON schemas: at most 30 nuggets of at most 200 characters
  (open-rag-eval's ``Nuggets`` model has no bound and keeps a longer list), exactly n
  labels per batch (open-rag-eval checks only the total); blank nuggets are dropped;
- creation stops early at a fixed point (see above): same result, fewer rounds;
- labels are matched after ``strip().lower()``; anything else is a parse failure.

Reference protocol (``judge.protocol=reference``, version ``openrageval-autonugget-ref-v1``):
open-rag-eval's own requests and rules, as ``AutoNuggetMetric.compute`` runs them.

- prompts: its three prompts verbatim (templates/orag_nuggets_{create,importance,assign}_v1.txt,
  source indentation included; the record's lines where it puts them, the context
  ``[1] text`` lines joined by newlines, nugget lists as Python ``repr``s, the 30-nugget cap
  filled in) with ``OpenAIModel.parse``'s system message; outputs constrained by the JSON
  schemas pydantic gives ``Nuggets``, ``NuggetImportance`` and ``NuggetAssignment`` (no item
  bounds), read as its OpenAI client reads them (ragscale.judges.umbrela ``OragOutput.parse``:
  one JSON object, labels exactly as the enums spell them); temperature 0, seed 42;
- creation runs all 5 iterations unless the list reaches 30 (no fixed-point stop: with the
  judge cache a repeated prompt is a cache hit), keeps a returned list as it is (longer than
  30, blank or repeated nuggets included), and fails on an empty one;
- importance and assignment batches may hold any number of labels but not none: only the
  total must match the nuggets (so a batch's extra label shifts the next batch's, as in
  open-rag-eval);
- failures: where ``compute`` returns ``{}`` (an empty query or answer text, a failed or empty
  output, a label count that does not match) the record gets what open-rag-eval's TREC
  evaluator writes then: 0.5 (``NEUTRAL``) for ``nuggets_vital`` (vital_nuggetizer_score) and
  ``nuggets_assignment_mean`` (mean_nugget_assignment_score), the other metrics null, and the
  reason in the details (``{"failed": reason}``; a failed output is in judge_errors too). A
  record without a generated answer is null (open-rag-eval's loader skips it), and so is one
  without UMBRELA grades (open-rag-eval fails the whole record when a grade fails).
- still different: no max_tokens in open-rag-eval (``ORAG_MAX_TOKENS`` here); the actor's
  re-asks after a parse failure (none in open-rag-eval; judge.max_retries=0); importance and
  assignment batches are asked together, where open-rag-eval stops at the first failed one,
  and an answer without text (citation markers only) gets the neutral result without asking,
  where open-rag-eval first asks for the nuggets and their importance (the same result both
  times); untrusted text gets the marker escaping of ragscale.judges.templates.neutralize
  (ordinary text unchanged).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Sequence

from ragscale.judges.base import JudgeSpec, Failed, JudgeParseError, JudgePrompt, JudgeResult, JudgeRun, Undefined, load_json_object
from ragscale.judges.templates import load_template
from ragscale.judges.umbrela import ORAG_SKIPPED, OragOutput, reference_prompt
from ragscale.metrics.nuggets import ASSIGNMENT_SCORES, IMPORTANCES, KEEP, nugget_scores, sort_and_keep
from ragscale.metrics.trec import answer_text
from ragscale.record import passage_ids_of, query_of
from ragscale.metrics.registry import UNIT, MetricSpec, declare

NAME = "nuggets"
VERSION = "openrageval-autonugget-v1"
MAX_NUGGETS = 30  # AutoNuggetMetric.max_nuggets
CREATION_ITERS = 5  # AutoNuggetMetric(nugget_creation_iters=5)
BATCH = 10  # importance and assignment batch size
MAX_NUGGET_CHARS = 200  # a nugget is 1-12 words; the bound stops a looping small model
NO_INFO = "Not enough information, no answer found"
METRICS = ("nuggets_all", "nuggets_vital", "nuggets_weighted", "nuggets_strict_all", "nuggets_strict_vital",
           "nuggets_strict_weighted", "nuggets_assignment_mean", "nuggets_count")

CREATE_SCHEMA = {
    "type": "object",
    "properties": {
        "nuggets": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_NUGGET_CHARS},
            "minItems": 1,  # the prompt never allows an empty list (its fallback is one "Not enough information" nugget)
            "maxItems": MAX_NUGGETS,
        }
    },
    "required": ["nuggets"],
}


def _labels_schema(key: str, labels: Sequence[str], n: int) -> dict:
    return {
        "type": "object",
        "properties": {
            key: {"type": "array", "items": {"type": "string", "enum": list(labels)}, "minItems": n, "maxItems": n}
        },
        "required": [key],
    }


def importance_schema(n: int) -> dict:
    """``{"importance": [...]}``: exactly ``n`` of "vital" / "okay"."""
    return _labels_schema("importance", IMPORTANCES, n)


def assignment_schema(n: int) -> dict:
    """``{"assignment": [...]}``: exactly ``n`` of "support" / "partial_support" / "not_support"."""
    return _labels_schema("assignment", list(ASSIGNMENT_SCORES), n)


_CLOSING_TAG = re.compile(r"<\s*/\s*(query|context|passage)\s*>", re.IGNORECASE)


def _fence(tag: str, text: str) -> str:
    """``text`` between ``<tag>`` and ``</tag>``; a closing fence tag inside it is escaped."""
    escaped = _CLOSING_TAG.sub(lambda m: f"<\\/{m.group(1).lower()}>", text)
    return f"<{tag}>{escaped}</{tag}>"


def render_create(query: str, passages: Sequence[str], nuggets: Sequence[str]) -> JudgePrompt:
    """One creation iteration: the shared instructions, then the query, the context (the
    given passages numbered ``[1]``...) and the current nugget list."""
    context = "\n" + "\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages)) + "\n"
    text = (load_template("nuggets_create_v1")
            + f"Search Query: {_fence('query', query)}\n\n"
            + f"Context:\n{_fence('context', context)}\n\n"
            + f"Initial Nugget List: {list(nuggets)!r}\nInitial Nugget List Length: {len(nuggets)}\n\n"
            + "Updated Nugget List:\n")
    # 30 nuggets of ~12 words each, with room for whitespace a grammar allows
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), CREATE_SCHEMA, max_tokens=2048)


def render_importance(query: str, nuggets: Sequence[str]) -> JudgePrompt:
    """One importance batch (at most ``BATCH`` nuggets)."""
    text = (load_template("nuggets_importance_v1").replace("{len_nuggets}", str(len(nuggets)))
            + f"Search Query: {_fence('query', query)}\nNugget List: {list(nuggets)!r}\nLabels:\n")
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), importance_schema(len(nuggets)),
                       max_tokens=32 + 16 * len(nuggets))


def render_assign(query: str, answer: str, nuggets: Sequence[str]) -> JudgePrompt:
    """One assignment batch: the answer (the "passage") is fenced; the nugget list comes last,
    so the batches of one record share everything before it."""
    passage = "\n" + answer + "\n"
    text = (load_template("nuggets_assign_v1").replace("{len_nuggets}", str(len(nuggets)))
            + f"Search Query: {_fence('query', query)}\n\n"
            + f"Passage:\n{_fence('passage', passage)}\n\n"
            + f"Nugget List: {list(nuggets)!r}\n\nLabels:\n")
    return JudgePrompt(NAME, VERSION, ({"role": "user", "content": text},), assignment_schema(len(nuggets)),
                       max_tokens=32 + 16 * len(nuggets))


def parse_nuggets(raw: str) -> list[str]:
    """``{"nuggets": [str, ...]}`` -> the nuggets, blank ones dropped, at most ``MAX_NUGGETS``
    (the first ones); may be empty. Raises JudgeParseError otherwise."""
    items = load_json_object(NAME, raw).get("nuggets")
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise JudgeParseError(NAME, raw, "nuggets is not a list of strings")
    return [s for s in items if s.strip()][:MAX_NUGGETS]


def _parse_labels(raw: str, key: str, allowed: Sequence[str], n: int) -> list[str]:
    items = load_json_object(NAME, raw).get(key)
    if not isinstance(items, list) or len(items) != n:
        raise JudgeParseError(NAME, raw, f"{key} is not a list of {n} labels")
    out = []
    for label in items:
        norm = label.strip().lower() if isinstance(label, str) else None
        if norm not in allowed:
            raise JudgeParseError(NAME, raw, f"{key} label {label!r} is not one of {', '.join(allowed)}")
        out.append(norm)
    return out


def parse_importance(raw: str, n: int) -> list[str]:
    """``{"importance": [...]}`` with exactly ``n`` labels "vital"/"okay" -> the labels."""
    return _parse_labels(raw, "importance", IMPORTANCES, n)


def parse_assignment(raw: str, n: int) -> list[str]:
    """``{"assignment": [...]}`` with exactly ``n`` labels support/partial_support/not_support."""
    return _parse_labels(raw, "assignment", list(ASSIGNMENT_SCORES), n)


def _batches(items: Sequence[str]) -> list[list[str]]:
    return [list(items[i : i + BATCH]) for i in range(0, len(items), BATCH)]


def _first_failure(what: str, answers: Sequence[Any]) -> Undefined | None:
    for k, a in enumerate(answers):
        if isinstance(a, Failed):
            return Undefined(f"{what} batch {k + 1} of {len(answers)} failed: {a.reason}")
    return None


def umbrela_grades(row: dict) -> list[int | None] | Undefined:
    """The row's UMBRELA grades (``metrics["umbrela_scores"]``, one 0-3 or None per passage)."""
    try:
        metrics = json.loads(row.get("metrics") or "{}")
    except (TypeError, ValueError):
        metrics = {}
    grades = metrics.get("umbrela_scores") if isinstance(metrics, dict) else None
    if grades is None:
        return Undefined("needs umbrela_scores")
    n = len(row.get("passages") or [])
    if not isinstance(grades, list) or len(grades) != n:
        return Undefined(f"umbrela_scores is not a list of {n} grades (one per passage)")
    for g in grades:
        if g is not None and (isinstance(g, bool) or not isinstance(g, int) or not 0 <= g <= 3):
            return Undefined(f"umbrela_scores holds {g!r}, not a grade 0-3 or null")
    if grades and all(g is None for g in grades):
        return Undefined("no passage has a UMBRELA grade")
    return grades


def run(query: str, answer: str, passages: Sequence[str]) -> JudgeRun:
    """The three rounds for one record; ``passages`` are those graded >= 1, in order.
    Returns Undefined or ``JudgeResult`` with the metrics and ``{"nuggets", "created",
    "iterations"}`` details (``start`` adds the passage ids)."""
    if not query.strip():
        return Undefined("no query")
    if not answer.strip():
        return Undefined("no generated answer")
    nuggets: list[str] = []
    iterations = 0
    while iterations < CREATION_ITERS:
        iterations += 1
        updated = yield render_create(query, passages, nuggets), parse_nuggets
        if not updated:
            return Undefined(f"nugget creation returned no nuggets (iteration {iterations})")
        unchanged, nuggets = updated == nuggets, updated
        if len(nuggets) >= MAX_NUGGETS or unchanged:
            break

    answers = yield [(render_importance(query, b), functools.partial(parse_importance, n=len(b)))
                     for b in _batches(nuggets)]
    failure = _first_failure("importance", answers)
    if failure:
        return failure
    importances = [label for labels in answers for label in labels]
    keep = sort_and_keep(importances, KEEP)
    kept, kept_importances = [nuggets[i] for i in keep], [importances[i] for i in keep]

    answers = yield [(render_assign(query, answer, b), functools.partial(parse_assignment, n=len(b)))
                     for b in _batches(kept)]
    failure = _first_failure("assignment", answers)
    if failure:
        return failure
    assignments = [label for labels in answers for label in labels]
    details = {
        "nuggets": [{"text": t, "importance": i, "assignment": a}
                    for t, i, a in zip(kept, kept_importances, assignments)],
        "created": len(nuggets),
        "iterations": iterations,
    }
    return JudgeResult(metrics=nugget_scores(kept_importances, assignments), details=details)


# ---------------------------------------------------------------------------------------
# The reference protocol: AutoNuggetMetric's requests and rules (see the module docstring).
# ---------------------------------------------------------------------------------------

REFERENCE_VERSION = "openrageval-autonugget-ref-v1"
NUGGETS_OUTPUT = OragOutput("Nuggets", "nuggets", many=True)
IMPORTANCE_OUTPUT = OragOutput("NuggetImportance", "importance", IMPORTANCES, "NuggetImportanceValues", many=True)
ASSIGNMENT_OUTPUT = OragOutput("NuggetAssignment", "assignment", tuple(ASSIGNMENT_SCORES), "NuggetAssignmentValues",
                               many=True)
# what open-rag-eval's TREC evaluator writes for vital_nuggetizer_score and
# mean_nugget_assignment_score when the metric fails ("neutral score")
NEUTRAL = 0.5
_CREATE_TAIL = "\n        "  # _NUGGET_CREATION_PROMPT's source string ends with 8 spaces, the others with 4


def render_create_reference(query: str, passages: Sequence[str], nuggets: Sequence[str]) -> JudgePrompt:
    """One creation iteration as open-rag-eval sends it (``passages``: those graded >= 1)."""
    context = "\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages))
    values = {"max_nuggets": str(MAX_NUGGETS), "query": query, "context": context,
              "initial_nuggets": str(list(nuggets)), "initial_nuggets_length": str(len(nuggets))}
    return reference_prompt(NAME, REFERENCE_VERSION, "orag_nuggets_create_v1", values, NUGGETS_OUTPUT,
                            tail=_CREATE_TAIL)


def render_importance_reference(query: str, nuggets: Sequence[str]) -> JudgePrompt:
    """One importance batch as open-rag-eval sends it."""
    values = {"query": query, "len_nuggets": str(len(nuggets)), "nuggets": str(list(nuggets))}
    return reference_prompt(NAME, REFERENCE_VERSION, "orag_nuggets_importance_v1", values, IMPORTANCE_OUTPUT)


def render_assign_reference(query: str, answer: str, nuggets: Sequence[str]) -> JudgePrompt:
    """One assignment batch as open-rag-eval sends it (``answer``: the answer parts' texts joined by spaces)."""
    values = {"query": query, "len_nuggets": str(len(nuggets)), "nuggets": str(list(nuggets)),
              "generated_passage": answer}
    return reference_prompt(NAME, REFERENCE_VERSION, "orag_nuggets_assign_v1", values, ASSIGNMENT_OUTPUT)


def parse_nuggets_reference(raw: str) -> list[str]:
    """``Nuggets.nuggets`` as open-rag-eval reads it: any list of strings, kept as it is (may be empty)."""
    return NUGGETS_OUTPUT.parse(NAME, raw)


def parse_importance_reference(raw: str) -> list[str]:
    """``NuggetImportance.importance``: a list of "vital"/"okay" of any length."""
    return IMPORTANCE_OUTPUT.parse(NAME, raw)


def parse_assignment_reference(raw: str) -> list[str]:
    """``NuggetAssignment.assignment``: a list of "support"/"partial_support"/"not_support" of any length."""
    return ASSIGNMENT_OUTPUT.parse(NAME, raw)


def neutral(reason: str) -> JudgeResult:
    """What open-rag-eval's TREC evaluator writes when ``AutoNuggetMetric.compute`` fails: 0.5
    for the vital and mean assignment scores, nothing else."""
    metrics: dict[str, Any] = {m: None for m in METRICS}
    metrics.update(nuggets_vital=NEUTRAL, nuggets_assignment_mean=NEUTRAL)
    return JudgeResult(metrics=metrics, details={"failed": reason})


def _labels_failure(what: str, answers: Sequence[Any], n: int) -> str | None:
    """Why a round of label batches fails open-rag-eval's checks: a failed or empty batch, or a
    total that is not ``n``; None when it passes."""
    for k, a in enumerate(answers):
        if isinstance(a, Failed):
            return f"{what} batch {k + 1} of {len(answers)} failed: {a.reason}"
        if not a:
            return f"{what} batch {k + 1} of {len(answers)} returned no labels"
    total = sum(len(a) for a in answers)
    return None if total == n else f"{total} {what} labels for {n} nuggets"


def run_reference(query: str, answer: str, passages: Sequence[str]) -> JudgeRun:
    """``AutoNuggetMetric.compute`` for one record under the reference protocol; ``passages``
    are those graded >= 1, in order. Returns ``JudgeResult`` (the scores, or ``neutral``)."""
    if not query.strip():
        return neutral("Query cannot be empty.")
    if not answer.strip():
        return neutral("Generated passage cannot be empty.")
    nuggets: list[str] = []
    iterations = 0
    while iterations < CREATION_ITERS:
        iterations += 1
        # a one-step fan-out: a failed output comes back as Failed, and the record gets ``neutral``
        [got] = yield [(render_create_reference(query, passages, nuggets), parse_nuggets_reference)]
        if isinstance(got, Failed):
            return neutral(f"nugget creation failed (iteration {iterations}): {got.reason}")
        if not got:
            return neutral(f"nugget creation returned no nuggets (iteration {iterations})")
        nuggets = got
        if len(nuggets) >= MAX_NUGGETS:
            break

    answers = yield [(render_importance_reference(query, b), parse_importance_reference) for b in _batches(nuggets)]
    failure = _labels_failure("importance", answers, len(nuggets))
    if failure:
        return neutral(failure)
    importances = [label for labels in answers for label in labels]
    keep = sort_and_keep(importances, KEEP)
    kept, kept_importances = [nuggets[i] for i in keep], [importances[i] for i in keep]

    answers = yield [(render_assign_reference(query, answer, b), parse_assignment_reference) for b in _batches(kept)]
    failure = _labels_failure("assignment", answers, len(kept))
    if failure:
        return neutral(failure)
    assignments = [label for labels in answers for label in labels]
    details = {
        "nuggets": [{"text": t, "importance": i, "assignment": a}
                    for t, i, a in zip(kept, kept_importances, assignments)],
        "created": len(nuggets),
        "iterations": iterations,
    }
    return JudgeResult(metrics=nugget_scores(kept_importances, assignments), details=details)


def start(obj: dict, row: dict, protocol: str = "constrained", model: str = "") -> JudgeRun:
    """The judge on a pipeline record: ``query_of(obj)``, the row's answer (citation markers
    removed), and the row's passages filtered by the UMBRELA grades in its metrics."""
    reference = protocol == "reference"
    if reference and not (row.get("prediction") or "").strip():
        return Undefined(ORAG_SKIPPED)
    answer = answer_text(row.get("prediction") or "")
    if not answer.strip() and not reference:
        return Undefined("no generated answer")
    grades = umbrela_grades(row)
    if isinstance(grades, Undefined):
        return grades
    passages = list(row.get("passages") or [])
    ids = passage_ids_of(obj, len(passages))
    used = [i for i, g in enumerate(grades) if g is not None and g >= 1]
    result = yield from (run_reference if reference else run)(query_of(obj), answer, [passages[i] for i in used])
    if isinstance(result, JudgeResult):
        result.details["passages_used"] = [ids[i] for i in used]
        result.details["passages_ungraded"] = [ids[i] for i, g in enumerate(grades) if g is None]
    return result


_SHORT = {"all": "N_all", "vital": "N_vital", "weighted": "N_wgt", "strict_all": "N_s_all", "strict_vital": "N_s_vital",
          "strict_weighted": "N_s_wgt", "assignment_mean": "N_assign", "count": "N_count"}
_ALIASES = {"nuggets_vital": ("vital_nuggetizer_score",), "nuggets_assignment_mean": ("mean_nugget_assignment_score",)}
declare(*(MetricSpec(name, "judge", "nuggets", scalar=True, requires=("umbrela_scores",), needs=("question", "contexts"),
                     aliases=_ALIASES.get(name, ()),
                     higher_is_better=None if name == "nuggets_count" else True, short=_SHORT[name[len("nuggets_"):]],
                     bounds=None if name == "nuggets_count" else UNIT,
                     reference="castorini/nuggetizer, vectara/open-rag-eval open_rag_eval/metrics/autonugget_metric.py") for name in METRICS))


JUDGE_SPECS = (JudgeSpec(NAME, METRICS[0], VERSION, start, tuple(METRICS), after=("umbrela",),
                         reference_version=REFERENCE_VERSION),)
