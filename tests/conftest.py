"""Shared fixtures. Data in ../shared/data is used where present; tests needing it skip otherwise."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("RAGSCALE_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
MTRAG = os.path.join(SHARED, "data", "mtrag")
sys.path.insert(0, os.path.join(ROOT, "scripts"))


# vectara/open-rag-eval, read by the tests that compare ragscale with its code (they skip without it)
ORAG_MIRROR = os.environ.get("RAGSCALE_ORAG_MIRROR", "/work/.mirror/vectara+open-rag-eval/repo")
ORAG_COMMIT = "dfc4175b522d1605d3d53626a141302740b6267c"  # the commit the TREC judges' templates come from


def orag_namespace(path: str) -> dict:
    """Execute one open-rag-eval module at ORAG_COMMIT with its package imports stubbed out."""
    try:
        src = subprocess.run(["git", "-C", ORAG_MIRROR, "show", f"{ORAG_COMMIT}:{path}"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"needs the open-rag-eval repository at {ORAG_COMMIT} in {ORAG_MIRROR}")
    tree = ast.parse(src)
    tree.body = [n for n in tree.body if not (isinstance(n, ast.ImportFrom)
                                              and (n.module or "").startswith(("open_rag_eval", "pydantic")))]
    ns: dict = {name: object for name in ("BaseModel", "LLMJudgeModel", "RetrievalMetric", "AugmentedGenerationMetric",
                                          "RetrievalResult", "RAGResult", "AugmentedGenerationResult")}
    exec(compile(tree, path, "exec"), ns)
    return ns


def run_on_records(tmp_path, scenario: str, records: list[dict], *overrides: str, timeout: int = 900) -> list[dict]:
    """Write ``records`` as JSONL, run ``python -m ragscale.run +scenario=<scenario>`` on them
    (judge cache in tmp_path) and return the output records; a failed run fails the test."""
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", f"+scenario={scenario}", f"input={inp}", f"output_dir={out}",
           f"judge.cache_path={tmp_path / 'cache.sqlite'}", *overrides]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return [json.loads(line) for line in open(out / "records.jsonl")]


def shared_file(name: str) -> str:
    """Path of a file under ../shared/data/mtrag, or skip the test with the reason."""
    path = os.path.join(MTRAG, name)
    if not os.path.exists(path):
        pytest.skip(f"needs ../shared/data/mtrag/{name} (not present in a user's clone)")
    return path


@pytest.fixture
def responses10() -> str:
    return shared_file("responses-10.jsonl")


@pytest.fixture
def mtragun() -> str:
    return shared_file("mtragun-reference.jsonl")


HHEM_WORDS = (
    "Determine if the hypothesis is true given premise ? Premise : Hypothesis . , "
    "Paris capital of France Berlin Germany sky blue green grass water wet cats dogs are animals "
    "The a an and in on it was not"
).split()


def build_tiny_hhem(root):
    """A tiny randomly initialised HHEM-2.1 snapshot (T5ForTokenClassification, 2 labels) and
    its foundation folder (tiny WordLevel tokenizer + T5 config) under ``root``: the layout of
    vectara/hallucination_evaluation_model. Returns (hhem_dir, foundation_dir, reference model)."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForTokenClassification

    from ragscale.metrics.hhem import PROMPT

    foundation = root / "tiny-flan-t5"
    hhem = root / "hallucination_evaluation_model"
    foundation.mkdir()
    hhem.mkdir()

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for w in HHEM_WORDS:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(str(foundation))

    cfg = T5Config(
        vocab_size=len(vocab) + 4, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=4,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0, num_labels=2,
    )
    cfg.save_pretrained(str(foundation))  # the foundation's config.json (model_type t5)
    torch.manual_seed(0)
    ref = T5ForTokenClassification(cfg).eval()
    assert ref.transformer.encoder.embed_tokens.weight is ref.transformer.shared.weight
    state = {f"t5.{k}": v.detach().clone().contiguous() for k, v in ref.state_dict().items()
             if k != "transformer.encoder.embed_tokens.weight"}  # tied: the published checkpoint keeps `shared` only
    save_file(state, str(hhem / "model.safetensors"))
    (hhem / "config.json").write_text(json.dumps({
        "architectures": ["HHEMv2ForSequenceClassification"],
        "auto_map": {"AutoConfig": "configuration_hhem_v2.HHEMv2Config",
                     "AutoModelForSequenceClassification": "modeling_hhem_v2.HHEMv2ForSequenceClassification"},
        "model_type": "HHEMv2Config",
        "foundation": str(foundation),
        "prompt": PROMPT,
        "id2label": {"0": "hallucinated", "1": "consistent"},
        "label2id": {"hallucinated": 0, "consistent": 1},
        "torch_dtype": "float32",
    }))
    return hhem, foundation, ref


@pytest.fixture(scope="session")
def tiny_hhem(tmp_path_factory):
    """(hhem_dir, foundation_dir, reference model) of a tiny HHEM built for the test session."""
    return build_tiny_hhem(tmp_path_factory.mktemp("hhem"))


def sample_copies(path, copies: int) -> int:
    """Write the bundled MT-RAG sample ``copies`` times to ``path`` as JSONL, task ids
    ``<task_id>#<copy>``; returns the number of records."""
    with open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")) as fh:
        base = [json.loads(line) for line in fh]
    with open(path, "w") as out:
        for i in range(copies):
            for rec in base:
                out.write(json.dumps(dict(rec, task_id=f"{rec['task_id']}#{i}")) + "\n")
    return copies * len(base)


def records_by_key(out_dir) -> dict:
    """record key -> output record of ``out_dir``/records.jsonl; a key written twice fails the test."""
    out: dict = {}
    with open(os.path.join(str(out_dir), "records.jsonl")) as fh:
        for line in fh:
            rec = json.loads(line)
            key = rec["ragscale"]["record_key"]
            assert key not in out, f"record {key} written twice"
            out[key] = rec
    return out
