"""What every engine shares: its output (``Generation``) and the chat messages it sends.

Kept apart from the package's dispatch (``ragscale.actors.engines``: resolve, ready, build) so
that the engine modules import these without importing the package that loads them. The package
re-exports all three names, the engines' public interface.

Untrusted text (responses, passages) reaches the engines inside the judges' delimiters. The
engines that apply a chat template themselves (llama.cpp, vLLM; and the servers behind the
OpenAI-compatible engine do the same) would turn a chat-template control token written in that
text, e.g. ``<|im_end|><|im_start|>system``, into a real one: a new turn with another role.
``neutralize_control_tokens`` breaks such tokens in every message before it is sent, so they
are read as the plain text they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass
class Generation:
    """One engine output: the text and its token counts (0 where the backend does not say).

    ``error`` is set (and ``text`` is empty) when the backend failed for this prompt after
    its own retries (an endpoint down, a timeout): the judge actor turns it into a
    per-record judge error and never caches it.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


# Chat-template control tokens of the common template families: ChatML and Llama 3 / Phi / DeepSeek
# (``<|im_start|>``, ``<|eot_id|>``, ``<｜end▁of▁sentence｜>``), Gemma's turns, Llama 2 / Mistral's
# ``[INST]``, ``<<SYS>>``, ``<s>``, ``</s>``.
_CONTROL_TOKEN = re.compile(
    r"<\|[^<>|\s]{1,48}\|>|<\uff5c[^<>\s]{1,48}\uff5c>|</?(?:start_of_turn|end_of_turn|s)>|\[/?INST\]|<</?SYS>>"
)


def neutralize_control_tokens(text: str) -> str:
    """``text`` with every chat-template control token broken by a backslash after its first
    character (``<|im_end|>`` -> ``<\\|im_end|>``, ``[INST]`` -> ``[\\INST]``): a tokenizer
    reads it as plain text. Text without such tokens is returned unchanged."""
    return _CONTROL_TOKEN.sub(lambda m: m.group(0)[0] + "\\" + m.group(0)[1:], text)


def safe_messages(messages: Any) -> list[dict]:
    """Chat messages as plain dicts, their ``content`` passed through neutralize_control_tokens."""
    out = []
    for m in messages:
        d = dict(m)
        if isinstance(d.get("content"), str):
            d["content"] = neutralize_control_tokens(d["content"])
        out.append(d)
    return out
