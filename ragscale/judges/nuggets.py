"""open-rag-eval's AutoNuggetizer judge (TREC 2024 RAG nugget evaluation, arXiv:2411.09607).

Reference: vectara/open-rag-eval@dfc4175 ``open_rag_eval/metrics/autonugget_metric.py``
(``AutoNuggetMetric``), called by ``open_rag_eval/evaluators/trec_evaluator.py`` after
UMBRELA; castorini/nuggetizer for context. Score math, with open-rag-eval's denominators
clamped to >= 1 (no vital nugget -> Vital 0.0): ragscale/metrics/nuggets.py.
Prompt texts: templates/nuggets_{create,importance,assign}_v1.txt. Layout: this module is
the judge (its entry point, metrics and the two protocols' rules); the prompts and parsers are in
ragscale.judges.nugget_prompts (constrained) and ragscale.judges.nugget_reference (reference),
the rounds of one record, written once for both protocols, in ragscale.judges.nugget_rounds.
What follows up to
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
failed or miscounted batch; leaving those nuggets out would change the denominators). Also
null: no ``umbrela_scores`` in the record's metrics (``JudgeInput.metrics``), a grade list
whose length is not the passage count, or no passage graded at all. A passage whose grade is
``None`` (its UMBRELA prompt failed) is left out of the context like a grade-0 one
(open-rag-eval reads a missing grade as 0) and listed in ``passages_ungraded``. No passage
graded >= 1 (or no passages) is not null: the context is empty and the prompt asks for the
single nugget "Not enough information, no answer found", as in open-rag-eval's metric (its
evaluator then fails a record without passages on the mean UMBRELA score, a division by
zero).

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

from typing import Any, Mapping, Sequence

from ragscale.judges import nugget_prompts as constrained
from ragscale.judges import nugget_reference as orag
from ragscale.judges.base import JudgeResult, JudgeRun, JudgeSpec, Undefined
from ragscale.judges.judge_input import JudgeInput
from ragscale.judges.nugget_prompts import NAME, VERSION
from ragscale.judges.nugget_reference import REFERENCE_VERSION
from ragscale.judges.nugget_rounds import WINDOW, NuggetProtocol, assign_rounds, bank_rounds, rounds
from ragscale.judges.umbrela import ORAG_SKIPPED
from ragscale.metrics.registry import UNIT, MetricSpec, declare
from ragscale.metrics.trec import answer_text

METRICS = ("nuggets_all", "nuggets_vital", "nuggets_weighted", "nuggets_strict_all", "nuggets_strict_vital",
           "nuggets_strict_weighted", "nuggets_assignment_mean", "nuggets_count")
# what open-rag-eval's TREC evaluator writes for vital_nuggetizer_score and
# mean_nugget_assignment_score when the metric fails ("neutral score")
NEUTRAL = 0.5


def neutral(reason: str) -> JudgeResult:
    """What open-rag-eval's TREC evaluator writes when ``AutoNuggetMetric.compute`` fails: 0.5
    for the vital and mean assignment scores, nothing else."""
    metrics: dict[str, Any] = {m: None for m in METRICS}
    metrics.update(nuggets_vital=NEUTRAL, nuggets_assignment_mean=NEUTRAL)
    return JudgeResult(metrics=metrics, details={"failed": reason})


# The constrained protocol: a failure is Undefined; exactly n labels per batch; creation is a
# single step that stops at a fixed point.
CONSTRAINED = NuggetProtocol(constrained.render_create, constrained.parse_nuggets, constrained.render_importance,
                             constrained.parse_importance, constrained.render_assign, constrained.parse_assignment,
                             fail=Undefined, exact_batches=True, creation_fan_out=False, fixed_point=True)
# The reference protocol: a failure is ``neutral``; only the labels' total must match; each
# creation step is a fan-out of one (a failed output gives ``neutral``), no fixed-point stop.
REFERENCE = NuggetProtocol(orag.render_create_reference, orag.parse_nuggets_reference, orag.render_importance_reference,
                           orag.parse_importance_reference, orag.render_assign_reference,
                           orag.parse_assignment_reference,
                           fail=neutral, exact_batches=False, creation_fan_out=True, fixed_point=False)


def umbrela_grades(inp: JudgeInput) -> list[int | None] | Undefined:
    """The record's UMBRELA grades (``metrics["umbrela_scores"]``, one 0-3 or None per passage)."""
    grades = inp.metrics.get("umbrela_scores")
    if grades is None:
        return Undefined("needs umbrela_scores")
    n = len(inp.passages)
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
    return (yield from rounds(CONSTRAINED, query, answer, passages))  # start checked the answer


def run_reference(query: str, answer: str, passages: Sequence[str]) -> JudgeRun:
    """``AutoNuggetMetric.compute`` for one record under the reference protocol; ``passages``
    are those graded >= 1, in order. Returns ``JudgeResult`` (the scores, or ``neutral``)."""
    if not query.strip():
        return neutral("Query cannot be empty.")
    if not answer.strip():
        return neutral("Generated passage cannot be empty.")
    return (yield from rounds(REFERENCE, query, answer, passages))


def start(inp: JudgeInput, protocol: str = "constrained", model: str = "", build_bank: bool = False,
          window: int = WINDOW, bank: Mapping[str, Any] | None = None) -> JudgeRun:
    """The judge on a record: its question, its answer (citation markers removed), and its
    passages filtered by the UMBRELA grades in its metrics. ``build_bank``: the row is a query's
    pooled passages, and the result is its bank (``nuggets.bank=per_query``, ragscale.io.nugget_bank).
    ``bank`` (task id -> bank entry): the record's answer is assigned against its query's bank."""
    reference = protocol == "reference"
    p = REFERENCE if reference else CONSTRAINED
    if build_bank:
        return (yield from _build(p, inp, window))
    if reference and not inp.prediction.strip():
        return Undefined(ORAG_SKIPPED)
    answer = answer_text(inp.prediction)
    if not answer.strip() and not reference:
        return Undefined("no generated answer")
    if bank is not None:
        return (yield from _assign(p, inp, answer, bank.get(inp.task_id)))
    grades = umbrela_grades(inp)
    if isinstance(grades, Undefined):
        return grades
    passages = list(inp.passages)
    ids = inp.passage_ids
    used = [i for i, g in enumerate(grades) if g is not None and g >= 1]
    result = yield from (run_reference if reference else run)(inp.query, answer, [passages[i] for i in used])
    if isinstance(result, JudgeResult):
        result.details["passages_used"] = [ids[i] for i in used]
        result.details["passages_ungraded"] = [ids[i] for i, g in enumerate(grades) if g is None]
    return result


def _build(p: NuggetProtocol, inp: JudgeInput, window: int) -> JudgeRun:
    """A query's bank from its pooled passages graded >= 1 (a failure: Undefined, with the reason)."""
    if not inp.query.strip():
        return Undefined("no query")
    grades = umbrela_grades(inp)
    if isinstance(grades, Undefined):
        return grades
    used = [i for i, g in enumerate(grades) if g is not None and g >= 1]
    result = yield from bank_rounds(p, inp.query, [inp.passages[i] for i in used], window)
    if not isinstance(result, JudgeResult) or "failed" in (result.details or {}):
        reason = result.reason if isinstance(result, Undefined) else result.details["failed"]
        return Undefined(f"the query's nugget bank failed: {reason}")
    result.details["passages_used"] = [inp.passage_ids[i] for i in used]
    result.details["passages_ungraded"] = [inp.passage_ids[i] for i, g in enumerate(grades) if g is None]
    return result


def _assign(p: NuggetProtocol, inp: JudgeInput, answer: str, entry: Mapping[str, Any] | None) -> JudgeRun:
    """The record's answer against its query's bank ``entry`` (None: no bank for its task)."""
    if entry is None:
        return Undefined(f"no nugget bank for task {inp.task_id!r}")
    if entry.get("failed"):
        return p.fail(f"no nugget bank for task {inp.task_id!r}: {entry['failed']}")
    if not inp.query.strip():
        return p.fail("no query")
    if not answer.strip():
        return p.fail("Generated passage cannot be empty.")
    result = yield from assign_rounds(p, inp.query, answer, entry["nuggets"])
    if isinstance(result, JudgeResult) and "nuggets" in (result.details or {}):
        result.details["bank"] = entry["key"]
    return result


_SHORT = {"all": "N_all", "vital": "N_vital", "weighted": "N_wgt", "strict_all": "N_s_all", "strict_vital": "N_s_vital",
          "strict_weighted": "N_s_wgt", "assignment_mean": "N_assign", "count": "N_count"}
_ALIASES = {"nuggets_vital": ("vital_nuggetizer_score",), "nuggets_assignment_mean": ("mean_nugget_assignment_score",)}
declare(*(MetricSpec(name, "judge", "nuggets", scalar=True, requires=("umbrela_scores",), needs=("question", "contexts"),
                     aliases=_ALIASES.get(name, ()),
                     higher_is_better=None if name == "nuggets_count" else True, dtype="int" if name == "nuggets_count" else "float", short=_SHORT[name[len("nuggets_"):]],
                     bounds=None if name == "nuggets_count" else UNIT,
                     reference="castorini/nuggetizer, vectara/open-rag-eval open_rag_eval/metrics/autonugget_metric.py") for name in METRICS))


def _probe(u: str) -> list:
    """The constrained prompts with ``u`` in every untrusted slot (the nugget lists are the judge's
    own outputs, bounded by its schema: not untrusted input)."""
    nugget = "The library opens at 9"
    return [constrained.render_create(u, [u, u], [nugget]), constrained.render_importance(u, [nugget]),
            constrained.render_assign(u, u, [nugget])]


JUDGE_SPECS = (JudgeSpec(NAME, METRICS[0], VERSION, start, tuple(METRICS), after=("umbrela",),
                         reference_version=REFERENCE_VERSION, completion_tokens=100, probe=_probe),)
