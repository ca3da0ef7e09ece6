"""Prompt tokens of a judge engine's requests (its own tokenizer where it is local, else an
estimate) and the completion tokens a judge's prompt is expected to cost (ragscale prompts)."""

from __future__ import annotations

import contextlib
import io
import math
import os
from typing import Any, Callable, Mapping

# Expected completion tokens of one prompt of a judge when the judge cache holds none of its outputs
# (capped at the prompt's max_tokens): typical outputs of a 7B-class instruct judge, the JSON answer
# with its bounded rationale where the prompt asks for one.
DEFAULT_COMPLETION_TOKENS = 100  # a prompt of no registered judge (each judge declares its own: JudgeSpec.completion_tokens)
CHARS_PER_TOKEN = 4  # the estimate where the judge model's tokenizer is not local (an API model)


class _Counted(Exception):
    """Raised by the capturing tokenizer: the chat handler's prompt, tokenized, and nothing run."""


class TokenCounter:
    """Prompt tokens of a judge engine's requests (``basis`` says how they are counted)."""

    def __init__(self, engine_kwargs: Mapping[str, Any]):
        self.exact = False
        self.basis = f"estimate, characters / {CHARS_PER_TOKEN} (no local tokenizer)"
        self._count: Callable[[list[dict]], int] = self._estimate
        engine = engine_kwargs.get("engine")
        path = engine_kwargs.get("model_path")
        try:
            if engine == "llama.cpp" and path:
                self._count = self._llama(path)
                self.basis = "its llama.cpp tokenizer and chat template (exact)"
            elif engine == "vllm" and path:
                self._count = self._hf(path)
                self.basis = "its tokenizer and chat template (exact)"
            else:
                return
        except ImportError:
            return
        self.exact = True

    def count(self, messages: list[dict]) -> int:
        return self._count(messages)

    @staticmethod
    def _estimate(messages: list[dict]) -> int:
        return math.ceil(sum(len(str(m.get("content") or "")) for m in messages) / CHARS_PER_TOKEN)

    @staticmethod
    def _llama(path: str) -> Callable[[list[dict]], int]:
        """llama-cpp-python's own chat completion on a vocabulary-only model, stopped where its chat
        handler tokenizes the templated prompt: the count the run's usage reports."""
        from llama_cpp import Llama

        from ragscale.pipeline.dataset import native_stderr_to

        # llama.cpp's notice on a context without weights goes to fd 2 or, through llama-cpp-python's
        # log callback, to sys.stderr: neither is shown
        with native_stderr_to(os.devnull), contextlib.redirect_stderr(io.StringIO()):
            llm = Llama(model_path=path, vocab_only=True, verbose=False)
        tokenize = llm.tokenize

        def capture(text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
            raise _Counted(len(tokenize(text, add_bos=add_bos, special=special)))

        llm.tokenize = capture  # type: ignore[method-assign]

        def count(messages: list[dict]) -> int:
            try:
                llm.create_chat_completion(messages=messages, max_tokens=1)  # type: ignore[arg-type]
            except _Counted as c:
                return int(c.args[0])
            raise RuntimeError("llama.cpp's chat handler did not tokenize the prompt")

        return count

    @staticmethod
    def _hf(path: str) -> Callable[[list[dict]], int]:
        """The model folder's chat template (with the generation prompt) and tokenizer, as vLLM's chat."""
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)

        def count(messages: list[dict]) -> int:
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return len(tok(text, add_special_tokens=False)["input_ids"])

        return count


def completion_tokens(judge: str) -> int:
    """The dry run's estimate of one answer's tokens from ``judge`` (its JudgeSpec's; the default
    for a prompt of no registered judge)."""
    from ragscale.judges import JUDGES

    spec = JUDGES.get(judge)
    return spec.completion_tokens if spec is not None else DEFAULT_COMPLETION_TOKENS
