import numpy as np
import pytest

from ragscale.metrics.aggregate import rb_agg
from ragscale.metrics.bertscore import (
    BertScoreRequest,
    TokenEmbedding,
    greedy_precision_recall,
    rescale,
    score_requests,
    unique_texts,
)


def test_rb_agg_harmonic_mean_hand_computed():
    m = {"BertscoreR": [0.6], "RougeL_stemFalse": [0.5], "BertKPrec": [0.2, 0.4, None], "Recall": [0.9]}
    recall, rouge, ext = 0.8, 0.5, 0.7  # (0.6+1)/2, rouge, (max(0.2,0.4,0)+1)/2
    expected = 3 * recall * rouge * ext / (recall * rouge + recall * ext + rouge * ext)
    agg, zero = rb_agg(m)
    assert agg == pytest.approx(expected)
    assert zero is False


def test_rb_agg_without_passages_is_zero_but_denominator_not():
    agg, zero = rb_agg({"BertscoreR": [0.6], "RougeL_stemFalse": [0.5], "BertKPrec": None, "Recall": [1.0]})
    assert agg == 0.0 and zero is False


def test_rb_agg_zero_denominator_flag():
    agg, zero = rb_agg({"BertscoreR": [0.6], "RougeL_stemFalse": [0.0], "BertKPrec": None, "Recall": [0.0]})
    assert agg == 0.0 and zero is True


def test_rb_agg_falls_back_to_recall_without_bertscore():
    agg, _ = rb_agg({"Recall": [0.5], "RougeL_stemFalse": [0.5], "BertKPrec": [1.0]})
    assert agg == pytest.approx(3 * 0.5 * 0.5 * 1.0 / (0.25 + 0.5 + 0.5))


def _emb(rows, specials=()):
    v = np.array(rows, dtype=np.float32)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    w = np.array([0.0 if i in specials else 1.0 for i in range(len(rows))], dtype=np.float32)
    return TokenEmbedding(v, w)


def test_greedy_matching_hand_computed():
    # candidate tokens e1, e2 (+ a special token); reference tokens e1, (e1+e2)/sqrt2
    cand = _emb([[1, 0], [0, 1], [1, 1]], specials=(2,))
    ref = _emb([[1, 0], [1, 1]])
    p, r = greedy_precision_recall(cand, ref)
    s = 1 / np.sqrt(2)
    assert p == pytest.approx((1 + s) / 2)  # e1->e1 (1), e2->(e1+e2) (0.707)
    assert r == pytest.approx((1 + 1) / 2)  # both reference tokens find a match of 1 (special counts in the max)


def test_rescale_matches_bert_score_formula():
    assert rescale(0.8, 0.5) == pytest.approx(0.6)


def test_score_requests_encodes_each_unique_text_once_and_shapes():
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return {t: _emb([[1.0, float(len(t))], [0.5, 1.0]]) for t in texts}

    reqs = [
        BertScoreRequest("answer one", ["ref"], ["p1", "p2"]),
        BertScoreRequest("answer two ", ["ref"], ["p1", "p2"]),
        BertScoreRequest("answer two", ["ref", "ref b"], []),
    ]
    assert unique_texts(reqs, True, True) == ["answer one", "ref", "p1", "p2", "answer two", "ref b"]
    out = score_requests(reqs, embed)
    assert len(calls) == 1 and len(calls[0]) == 6
    assert [len(o["BertscoreP"]) for o in out] == [1, 1, 2]
    assert [None if o["BertKPrec"] is None else len(o["BertKPrec"]) for o in out] == [2, 2, None]
    base = score_requests(reqs, embed, baseline={"P": 0.5, "R": 0.5})
    assert base[0]["BertscoreP"][0] == pytest.approx((out[0]["BertscoreP"][0] - 0.5) / 0.5)
