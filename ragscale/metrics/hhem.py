"""HHEM-2.1-open hallucination score, as open-rag-eval's hallucination metric computes it.

Pure helpers (no torch import): the prompt, the (premise, hypothesis) pair and the
location of the model files. The model itself runs in ``ragscale/actors/nli.py``.

References:

- open-rag-eval ``metrics/hallucination_metric.py`` + ``metrics/factuality_backends.py``
  (``HHEMBackend``): premise = the retrieved passages joined with ``" "`` and cut to
  ``max_chars`` (8192) characters, hypothesis = the generated answer parts' texts joined
  with ``" "``, score = ``model.predict([(premise, hypothesis)])``.
- HHEM-2.1-open ``modeling_hhem_v2.py`` / ``configuration_hhem_v2.py``
  (huggingface.co/vectara/hallucination_evaluation_model): ``HHEMv2Config`` holds
  ``foundation`` (``google/flan-t5-base``) and ``prompt``; ``HHEMv2ForSequenceClassification``
  wraps ``self.t5 = T5ForTokenClassification(AutoConfig.from_pretrained(foundation))`` and
  ``AutoTokenizer.from_pretrained(foundation)``; ``predict`` formats each pair with
  ``prompt.format(text1=premise, text2=hypothesis)``, tokenizes the batch with
  ``padding=True`` (no truncation), and returns ``softmax(logits[:, 0, :])[:, 1]``: the
  probability of class 1 (consistent) at the first token.

The checkpoint (``model.safetensors``) is the state dict of
``HHEMv2ForSequenceClassification``: every key starts with ``t5.`` (``t5.transformer.shared.weight``,
``t5.transformer.encoder.block.<i>...``, ``t5.transformer.encoder.final_layer_norm.weight``,
``t5.classifier.weight``, ``t5.classifier.bias``); ``t5.transformer.encoder.embed_tokens.weight``
may be absent because it is tied to ``shared`` (transformers 4.x saves it once).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from ragscale.metrics.registry import UNIT, MetricSpec, declare
from ragscale.metrics.trec import answer_text

METRIC = "hhem"  # P(consistent) in [0, 1]; higher = more consistent with the passages
DEFAULT_MODEL = "vectara/hallucination_evaluation_model"
DEFAULT_FOUNDATION = "google/flan-t5-base"
DEFAULT_MAX_CHARS = 8192
# HHEMv2Config.prompt (configuration_hhem_v2.py of HHEM-2.1-open); config.json may override it.
PROMPT = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"
CONSISTENT_LABEL = 1  # predict() returns the softmax probability of class 1
HHEM_MODEL_TYPES = ("HHEMv2", "HHEMv2Config")  # the published config.json says "HHEMv2Config"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "spiece.model", "tokenizer_config.json")

# google/flan-t5-base's T5 config: used only when the foundation's config.json is not found
# locally (shapes are still checked against the checkpoint when it is loaded).
FLAN_T5_BASE_CONFIG: dict[str, Any] = {
    "model_type": "t5",
    "vocab_size": 32128,
    "d_model": 768,
    "d_kv": 64,
    "d_ff": 2048,
    "num_layers": 12,
    "num_decoder_layers": 12,
    "num_heads": 12,
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "dropout_rate": 0.1,
    "layer_norm_epsilon": 1e-6,
    "initializer_factor": 1.0,
    "feed_forward_proj": "gated-gelu",
    "tie_word_embeddings": False,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "decoder_start_token_id": 0,
}


class HHEMNotFound(FileNotFoundError):
    """The HHEM model or its tokenizer is not on this machine; ``str(e)`` says what is missing."""


@dataclass(frozen=True)
class HHEMPaths:
    """Where the HHEM files are: the snapshot directory and its weights file, the tokenizer
    directory, and the T5 config of the foundation model (a dict, JSON-serialisable)."""

    model_dir: str
    weights: str
    tokenizer_dir: str
    foundation: str
    prompt: str = PROMPT
    t5_config: dict[str, Any] = field(default_factory=dict)
    t5_config_source: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_prompt(premise: str, hypothesis: str, template: str = PROMPT) -> str:
    """The model input of one pair: ``template.format(text1=premise, text2=hypothesis)``."""
    return template.format(text1=premise, text2=hypothesis)


def premise_hypothesis(passages: Sequence[str], prediction: str, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[str, str]:
    """open-rag-eval's HHEM inputs: the passages joined with ``" "`` and cut to ``max_chars``
    characters; the answer parts' texts (citation markers removed) joined with ``" "``."""
    premise = " ".join(passages)
    if max_chars and len(premise) > max_chars:
        premise = premise[:max_chars]
    return premise, answer_text(prediction or "")


def hf_cache_dir() -> str:
    """The Hugging Face hub cache, read from the environment now: ``HF_HUB_CACHE``, else
    ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "huggingface", "hub")


def _looks_like_path(name: str) -> bool:
    return os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") != 1 or "\\" in name


def _resolve(name: str, what: str) -> str:
    """A local directory for ``name``: the directory itself, or the snapshot of the HF repo
    id ``name`` in the local HF cache (never downloads). Raises HHEMNotFound."""
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        return os.path.abspath(path)
    if os.path.exists(path):
        raise HHEMNotFound(f"{what} {name!r} is a file, not a directory")
    if _looks_like_path(name):
        raise HHEMNotFound(f"{what} directory {name!r} does not exist")
    cache = hf_cache_dir()
    try:
        from huggingface_hub import snapshot_download

        snap = snapshot_download(name, cache_dir=cache, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - any failure here means "not in the cache"
        raise HHEMNotFound(
            f"{what} {name!r} is not a local directory and is not in the Hugging Face cache {cache} "
            f"({type(e).__name__}); downloads are disabled"
        ) from None
    return str(snap)


def _read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        obj = json.load(fh)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def _hhem_config(model_dir: str) -> dict:
    """The ``config.json`` of the HHEM snapshot in ``model_dir``, checked to be an HHEM-2.1
    config (by model_type or architectures). Raises HHEMNotFound."""
    cfg_path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(cfg_path):
        raise HHEMNotFound(f"HHEM model directory {model_dir} has no config.json")
    try:
        cfg = _read_json(cfg_path)
    except (OSError, ValueError) as e:
        raise HHEMNotFound(f"HHEM config {cfg_path} is unreadable: {e}") from None
    archs = cfg.get("architectures") or []
    if cfg.get("model_type") not in HHEM_MODEL_TYPES and "HHEMv2ForSequenceClassification" not in archs:
        raise HHEMNotFound(
            f"{cfg_path} is not an HHEM-2.1 config (model_type={cfg.get('model_type')!r}, "
            f"architectures={archs!r}; expected HHEMv2ForSequenceClassification)"
        )
    return cfg


def _weights_file(model_dir: str) -> str:
    """The first of ``WEIGHT_FILES`` present in ``model_dir``. Raises HHEMNotFound."""
    weights = next((os.path.join(model_dir, w) for w in WEIGHT_FILES if os.path.isfile(os.path.join(model_dir, w))), None)
    if weights is None:
        raise HHEMNotFound(f"HHEM model directory {model_dir} has no weights ({' or '.join(WEIGHT_FILES)})")
    return weights


def _tokenizer_dir(tokenizer: str | None, foundation: str) -> str:
    """The tokenizer's directory: ``tokenizer`` when given, else the foundation model's, as
    ``HHEMv2ForSequenceClassification`` loads it; it must hold a tokenizer file. Raises HHEMNotFound."""
    tok_name = tokenizer or foundation
    what = "HHEM tokenizer" if tokenizer else f"HHEM tokenizer (the foundation {foundation!r}; set the tokenizer to override)"
    tok_dir = _resolve(tok_name, what)
    if not any(os.path.isfile(os.path.join(tok_dir, f)) for f in TOKENIZER_FILES):
        raise HHEMNotFound(f"tokenizer directory {tok_dir} has none of {', '.join(TOKENIZER_FILES)}")
    return tok_dir


def _t5_config(foundation: str) -> tuple[dict[str, Any], str]:
    """(the foundation's T5 config, where it comes from): its local ``config.json`` when found
    and of model_type t5, else the built-in one for flan-t5-base. Raises HHEMNotFound."""
    try:
        found = _resolve(foundation, "foundation")
        fpath = os.path.join(found, "config.json")
        if os.path.isfile(fpath):
            fcfg = _read_json(fpath)
            if fcfg.get("model_type") == "t5":
                return fcfg, fpath
    except (HHEMNotFound, OSError, ValueError):
        pass
    if foundation.rstrip("/").endswith("flan-t5-base"):
        return dict(FLAN_T5_BASE_CONFIG), "built-in google/flan-t5-base config"
    raise HHEMNotFound(f"no T5 config.json found for HHEM's foundation {foundation!r}")


def locate_hhem(model: str = DEFAULT_MODEL, tokenizer: str | None = None) -> HHEMPaths:
    """Find HHEM-2.1-open on this machine without importing torch or downloading.

    ``model`` is a directory in the HF snapshot layout of vectara/hallucination_evaluation_model
    (``config.json`` of an ``HHEMv2Config`` + ``model.safetensors``) or that repo id in the
    local HF cache. The tokenizer is ``tokenizer`` (a directory or cached repo id), else the
    config's ``foundation`` (``google/flan-t5-base``), as ``HHEMv2ForSequenceClassification``
    loads it. The T5 architecture comes from the foundation's ``config.json`` when found,
    else (for flan-t5-base) from ``FLAN_T5_BASE_CONFIG``.

    Raises ``HHEMNotFound`` whose message says what is missing and where it was looked for.
    """
    model_dir = _resolve(model, "HHEM model")
    cfg = _hhem_config(model_dir)
    weights = _weights_file(model_dir)
    foundation = str(cfg.get("foundation") or DEFAULT_FOUNDATION)
    prompt = str(cfg.get("prompt") or PROMPT)
    tok_dir = _tokenizer_dir(tokenizer, foundation)
    t5_config, source = _t5_config(foundation)
    return HHEMPaths(
        model_dir=model_dir,
        weights=weights,
        tokenizer_dir=tok_dir,
        foundation=foundation,
        prompt=prompt,
        t5_config=t5_config,
        t5_config_source=source,
    )


def hhem_unavailable(model: str = DEFAULT_MODEL, tokenizer: str | None = None) -> str | None:
    """``None`` when ``locate_hhem`` finds the files, else its reason (for the driver's warning)."""
    try:
        locate_hhem(model, tokenizer)
    except HHEMNotFound as e:
        return str(e)
    return None


declare(MetricSpec("hhem", "nli", "hallucination", scalar=True, short="HHEM", bounds=UNIT, needs=("contexts",),
                   aliases=("hallucination_score", "hhem_score"),
                   reference="vectara/open-rag-eval open_rag_eval/metrics/hallucination_metric.py (vectara/hallucination_evaluation_model)"))
