"""BERTScore's greedy matching and a batch's per-record output, on hand-made unit token vectors."""

from __future__ import annotations

import numpy as np
import pytest

from ragscale.metrics.bertscore import BertScoreRequest, TokenEmbedding, greedy_precision_recall, score_requests


def _emb(rows, truncated=False, weights=None):
    v = np.array(rows, dtype=np.float64)
    w = np.ones(len(rows)) if weights is None else np.array(weights, dtype=np.float64)
    return TokenEmbedding(v, w, truncated)


ANSWER = _emb([[1, 0], [0, 1]])  # two tokens, e1 and e2
OPPOSITE = _emb([[1, 0], [-1, 0]])  # e1 and -e1: e1 matches at 1, -e1 at best 0 (against e2)
E1 = _emb([[1, 0]])


def test_recall_is_the_mean_of_each_reference_token_s_best_match():
    assert greedy_precision_recall(ANSWER, OPPOSITE) == (0.5, 0.5)
    assert greedy_precision_recall(ANSWER, E1) == (0.5, 1.0)
    assert greedy_precision_recall(E1, ANSWER) == (1.0, 0.5)


def test_recall_weighs_reference_tokens_by_their_weights():
    ref = _emb([[1, 0], [-1, 0], [0, -1]], weights=[3, 1, 0])
    assert greedy_precision_recall(ANSWER, ref) == pytest.approx((0.5, 0.75))


def _embed(table):
    return lambda texts: {t: table[t] for t in texts}


def test_a_record_s_scores_per_target_and_passage_and_its_truncated_texts():
    table = {"answer": _emb([[1, 0], [0, 1]], truncated=True), "ref a": OPPOSITE,
             "ref b": _emb([[1, 0]], truncated=True), "passage": _emb([[1, 0]], truncated=True), "other": OPPOSITE}
    req = BertScoreRequest(" answer ", ["ref a", "ref b "], ["passage", "other"])
    assert score_requests([req], _embed(table)) == [{
        "truncated": ["prediction", "targets[1]", "contexts[0]"],
        "BertscoreP": [0.5, 0.5],
        "BertscoreR": [0.5, 1.0],
        "BertKPrec": [0.5, 0.5],
    }]


def test_a_truncated_prediction_alone_is_reported_first():
    table = {"answer": _emb([[1, 0], [0, 1]], truncated=True), "ref": E1}
    assert score_requests([BertScoreRequest("answer", ["ref"], [])], _embed(table)) == [
        {"truncated": ["prediction"], "BertscoreP": [0.5], "BertscoreR": [1.0], "BertKPrec": None}]


def test_scores_without_targets_or_passages_leave_those_metrics_out():
    table = {"answer": ANSWER, "ref": E1, "passage": E1}
    req = BertScoreRequest("answer", ["ref"], ["passage"])
    assert score_requests([req], _embed(table), want_targets=False) == [{"truncated": [], "BertKPrec": [0.5]}]
    assert score_requests([req], _embed(table), want_passages=False) == [
        {"truncated": [], "BertscoreP": [0.5], "BertscoreR": [1.0]}]


def test_a_baseline_rescales_precision_and_recall_each_with_its_own():
    table = {"answer": ANSWER, "ref": E1, "passage": E1}
    out = score_requests([BertScoreRequest("answer", ["ref"], ["passage"])], _embed(table),
                         baseline={"P": 0.5, "R": 0.2})
    assert out == [{"truncated": [], "BertscoreP": [0.0], "BertscoreR": [pytest.approx(1.0)], "BertKPrec": [0.0]}]
