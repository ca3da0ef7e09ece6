"""The whole results of RAGAS' answer relevancy, context precision and context recall judges
(ragscale.judges.ragas_metrics) with a scripted judge: the metrics and details a record gets,
and the reason a user reads when a metric is undefined for the record.

ragas 0.4.3 (explodinggradients/ragas, ``src/ragas/metrics/_answer_relevance.py``,
``_context_precision.py``, ``_context_recall.py``) scores NaN where ragscale gives ``null`` with
a reason; the scores themselves are compared with ragas in test_ragas_metrics.py.
"""

from __future__ import annotations

import json

import pytest

from ragscale.judges import ragas_metrics as rm
from ragscale.judges.base import JudgeResult, Undefined, drive
from ragscale.judges.judge_input import JudgeInput

NO_QUESTION = "no user question to compare the generated questions with"


def _inp(query="Where is Paris?", answer="Paris is in France.", passages=("Paris is in France.", "Rome."),
         targets=("Paris is the capital of France.",)):
    return JudgeInput(query=query, prediction=answer, passages=tuple(passages), targets=tuple(targets))


def _relevance(prompt):
    return json.dumps({"question": f"generated {prompt.sampling[1] if prompt.sampling else 'q'}?", "noncommittal": 0})


@pytest.mark.parametrize("inp, reason", [
    (_inp(answer=""), "no response"),
    (_inp(answer="  \n"), "no response"),
    (_inp(query=""), NO_QUESTION),
    (_inp(query=" "), NO_QUESTION),
])
def test_answer_relevancy_undefined_for_a_record_says_why(inp, reason):
    assert drive(rm.answer_relevancy(inp), _relevance) == Undefined(reason)


def test_answer_relevancy_reference_protocol_needs_a_user_question():
    assert drive(rm.answer_relevancy(_inp(query=""), protocol="reference"), _relevance) == Undefined(NO_QUESTION)


def test_answer_relevancy_leaves_a_failed_sample_out_and_counts_it():
    def respond(prompt):
        return "not json" if prompt.sampling[1] == 1 else _relevance(prompt)

    assert drive(rm.answer_relevancy(_inp()), respond) == JudgeResult(
        {"answer_relevancy": None},
        {"question": "Where is Paris?", "generated": ["generated 0?", "generated 2?"], "noncommittal": [0, 0],
         "failed": 1})


def test_answer_relevancy_with_every_sample_failed_has_no_generations():
    assert drive(rm.answer_relevancy(_inp(), strictness=2), lambda p: "{}") == JudgeResult(
        {"answer_relevancy": None}, {"question": "Where is Paris?", "generated": [], "noncommittal": [], "failed": 2})


def test_answer_relevancy_reference_protocol_result():
    """The reference protocol asks n samples of one prompt (ragas ``ResponseRelevancy._ascore``)."""
    respond = lambda p: json.dumps({"question": "Where is Paris?", "noncommittal": 1})  # noqa: E731
    assert drive(rm.answer_relevancy(_inp(), strictness=2, protocol="reference"), respond) == JudgeResult(
        {"answer_relevancy": None},
        {"question": "Where is Paris?", "generated": ["Where is Paris?"] * 2, "noncommittal": [1, 1], "failed": 0})


@pytest.mark.parametrize("start, metric", [(rm.context_precision, "context_precision"),
                                           (rm.context_recall, "context_recall")])
@pytest.mark.parametrize("protocol", ["constrained", "reference"])
def test_a_context_metric_without_a_reference_answer_says_so(start, metric, protocol):
    assert drive(start(_inp(targets=()), protocol=protocol), _relevance) == Undefined(
        f"no reference answer ({metric} compares the retrieved contexts with the reference)")


@pytest.mark.parametrize("start", [rm.context_precision, rm.context_recall])
def test_a_context_metric_without_contexts_is_undefined_under_constrained(start):
    assert drive(start(_inp(passages=())), _relevance) == Undefined("no retrieved contexts")


def test_context_recall_result_keeps_the_labels():
    out = {"classifications": [{"statement": "s", "reason": "r", "attributed": a} for a in (1, 0, 1, 1)]}
    assert drive(rm.context_recall(_inp()), lambda p: json.dumps(out)) == JudgeResult(
        {"context_recall": 0.75}, {"attributed": [1, 0, 1, 1]})


def test_context_recall_with_nothing_classified_is_undefined():
    """ragas' ``_compute_score`` gives NaN for no classification."""
    reason = "no reference sentence was classified"
    assert rm.recall_score([]) == Undefined(reason)
    assert drive(rm.context_recall(_inp(targets=(" ",))), lambda p: '{"classifications": []}') == Undefined(reason)
