"""HHEM-2.1-open scorer (ragscale/actors/nli.py) against a direct computation.

No HHEM weights exist on these machines, so a tiny randomly initialised model of the same
architecture (T5ForTokenClassification, 2 labels) is saved in the HF snapshot layout of
vectara/hallucination_evaluation_model (HHEMv2Config-style config.json naming a foundation
directory; model.safetensors with ``t5.``-prefixed keys and no ``encoder.embed_tokens``,
as the published checkpoint) with a tiny WordLevel tokenizer, and loaded through the real
loading code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def scorer(tiny_hhem):
    from ragscale.actors.nli import HHEMScorer

    return HHEMScorer(str(tiny_hhem[0]), torch_threads=1, batch_size=3, device="cpu")


def direct(ref, foundation, premise: str, hypothesis: str) -> float:
    """softmax of the first token's logits of T5ForTokenClassification on the formatted prompt, class 1."""
    import torch
    from transformers import AutoTokenizer

    from ragscale.metrics.hhem import PROMPT

    tok = AutoTokenizer.from_pretrained(str(foundation))
    enc = tok([PROMPT.format(text1=premise, text2=hypothesis)], return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = ref(**enc).logits[:, 0, :]
    return torch.softmax(logits, dim=-1)[0, 1].item()


PAIRS = [
    ("Paris is the capital of France .", "Paris is the capital of France ."),
    ("Paris is the capital of France . The sky is blue .", "Berlin is the capital of France ."),
    ("cats and dogs are animals", "grass is green"),
    ("water is wet . The sky is blue . grass is green . cats are animals . dogs are animals .", "it was not blue"),
    ("a", "an unknownword"),
]


def test_prompt_template_and_first_token(tiny_hhem):
    from transformers import AutoTokenizer

    from ragscale.metrics.hhem import PROMPT, format_prompt

    assert PROMPT == "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"
    assert format_prompt("P {x}", "H") == "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: P {x}\n\nHypothesis: H"
    ids = AutoTokenizer.from_pretrained(str(tiny_hhem[1]))(format_prompt("a", "b"))["input_ids"]
    assert ids[0] == 0 and ids[-1] == 1  # the literal <pad> is the first token; </s> closes the input


def test_scores_equal_direct_computation(tiny_hhem, scorer):
    _, foundation, ref = tiny_hhem
    got = scorer.score(PAIRS)
    want = [direct(ref, foundation, p, h) for p, h in PAIRS]
    assert got == pytest.approx(want, abs=1e-6)
    assert all(0.0 <= s <= 1.0 for s in got)
    assert sum(0.05 < s < 0.95 for s in got) >= 3 and max(got) - min(got) > 0.3  # informative, not saturated
    assert scorer.paths.t5_config_source.endswith("config.json")


def test_batching_and_padding_match_one_at_a_time(scorer):
    batched = scorer.score(PAIRS + PAIRS[:2])  # mixed lengths, padded, with repeats
    single = [scorer.score([pair])[0] for pair in PAIRS]
    assert batched == pytest.approx(single + single[:2], abs=1e-6)


def test_premise_hypothesis_per_open_rag_eval():
    from ragscale.metrics.hhem import premise_hypothesis

    premise, hyp = premise_hypothesis(["a" * 5000, "b" * 5000], "Paris is the capital [1]. It is big [1, 2].")
    assert len(premise) == 8192 and premise == ("a" * 5000 + " " + "b" * 5000)[:8192]
    assert hyp == "Paris is the capital . It is big"  # citations removed; a 1-char tail is dropped
    assert premise_hypothesis(["x", "y"], "z", max_chars=2) == ("x ", "z")
    assert premise_hypothesis(["one", "two"], "no citations") == ("one two", "no citations")


def test_locate_reasons(tiny_hhem, tmp_path, monkeypatch):
    from ragscale.metrics.hhem import HHEMNotFound, hhem_unavailable, locate_hhem

    hhem, foundation, _ = tiny_hhem
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(HHEMNotFound, match="does not exist"):
        locate_hhem(str(tmp_path / "no-such-dir"))
    reason = hhem_unavailable("vectara/hallucination_evaluation_model")
    assert reason and "not in the Hugging Face cache" in reason and str(tmp_path / "hf" / "hub") in reason
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    shutil.copy(hhem / "config.json", no_weights / "config.json")
    assert "has no weights" in hhem_unavailable(str(no_weights))
    # a cached snapshot whose foundation (google/flan-t5-base) tokenizer is not cached
    snap = tmp_path / "hf" / "hub" / "models--vectara--hallucination_evaluation_model" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (snap.parent.parent / "refs").mkdir()
    (snap.parent.parent / "refs" / "main").write_text("0123abcd")
    shutil.copy(hhem / "model.safetensors", snap / "model.safetensors")
    cfg = json.loads((hhem / "config.json").read_text())
    (snap / "config.json").write_text(json.dumps({**cfg, "foundation": "google/flan-t5-base"}))
    reason = hhem_unavailable("vectara/hallucination_evaluation_model")
    assert "tokenizer" in reason and "google/flan-t5-base" in reason and "not in the Hugging Face cache" in reason
    # with the tokenizer given: found in the cache; the T5 config falls back to flan-t5-base's
    paths = locate_hhem("vectara/hallucination_evaluation_model", tokenizer=str(foundation))
    assert paths.model_dir == str(snap) and paths.tokenizer_dir == str(foundation)
    assert paths.t5_config["d_model"] == 768 and paths.t5_config["feed_forward_proj"] == "gated-gelu"
    # and loading checks that checkpoint against that config
    from ragscale.actors.nli import HHEMScorer

    with pytest.raises(ValueError, match="does not fit T5ForTokenClassification"):
        HHEMScorer("vectara/hallucination_evaluation_model", tokenizer=str(foundation), torch_threads=1, device="cpu")


def test_hhem_module_does_not_import_torch():
    code = ("import sys; import ragscale.metrics.hhem as h; h.hhem_unavailable('/nonexistent/x'); "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


def _row(key, prediction, passages, error=None, metrics=None):
    from ragscale.record import Record

    return {**Record(key, "m", key, "f.jsonl", 1, input_json="{}").to_row(), "prediction": prediction,
            "targets": ["t"], "passages": passages, "metrics": metrics or {"Recall": [0.5]}, "error": error}


def test_nli_actor_rows(tiny_hhem, scorer):
    from rows import rows_of, table as row_table  # tests/rows.py

    from ragscale.actors.nli import NLIActor
    from ragscale.pipeline.stage import process_table
    from ragscale.record import error_json

    long_passages = [("water is wet " + "w" * 50 + " ") * 100, ("The sky is blue " + "s" * 50 + " ") * 100]  # cut to 8192 chars
    rows = [
        _row("ok", "Paris is the capital of France [1].", ["Paris is the capital of France .", "grass is green"]),
        _row("nopass", "Paris is the capital of France .", []),
        _row("err", None, None, error=error_json("input", "bad record")),
        _row("cites-only", "[1][2]", ["Paris is the capital of France ."]),
        _row("long", "the sky is blue", long_passages),
        _row("dup", "Paris is the capital of France [1].", ["Paris is the capital of France .", "grass is green"]),
    ]
    table = row_table(rows, ["hhem"])
    actor = NLIActor({"model": str(tiny_hhem[0]), "torch_threads": 1, "batch_size": 2, "device": "cpu"})
    out = rows_of(process_table(actor, "nli", table))
    assert [r["key"] for r in out] == [r["key"] for r in rows]
    by = {r["key"]: r for r in out}

    m = by["ok"]["metrics"]
    assert m["Recall"] == [0.5]
    assert m["hhem"] == pytest.approx(scorer.score([("Paris is the capital of France . grass is green",
                                                      "Paris is the capital of France")])[0], abs=1e-6)
    assert by["dup"]["metrics"]["hhem"] == m["hhem"]
    assert by["ok"]["judge_errors"] == []

    long_premise = " ".join(long_passages)[:8192]
    assert by["long"]["metrics"]["hhem"] == pytest.approx(scorer.score([(long_premise, "the sky is blue")])[0], abs=1e-6)

    for key, word in (("nopass", "no passages"), ("cites-only", "empty answer")):
        assert by[key]["metrics"]["hhem"] is None
        (err,) = [json.loads(e) for e in by[key]["judge_errors"]]
        assert err["judge"] == "hhem" and err["undefined"] is True and word in err["reason"]

    assert by["err"] == {**rows[2], "stats": by["err"]["stats"]}  # untouched
    stats = json.loads(out[0]["stats"])
    assert stats["nli_pairs"] == 3 and stats["nli_undefined"] == 2 and stats["nli_premise_truncated"] == 1
    assert stats["nli_model_pairs"] == 2 and stats["time_nli_s"] > 0
