"""Judge engines behind one interface.

An engine is built inside a judge actor from plain keyword arguments and offers::

    name: str                      # "llama.cpp" | "vllm" | "openai"
    model: str                     # what the cache key and run.json call the model
    generate(prompts, temperature=0.0, seed=None, on_done=None) -> list[Generation]

``prompts`` are ``ragscale.judges.base.JudgePrompt``s (chat messages + the JSON schema the
output must follow); the returned texts are in the same order. ``on_done(n)``, when given,
is called as prompts finish (the run's live progress shows a round's prompts inside a batch). Engines batch or overlap
the prompts as their backend allows; parsing is the judges' business, not theirs.

Each engine module also has ``resolve(conf, pool) -> dict``: it runs on the driver before
Ray starts, checks the config and the model's location without importing the backend,
and returns the actor's keyword arguments (never a secret: API keys are read from the
environment inside the actor); an engine that sends to a server may have ``ready(kwargs)``,
what a run (not a dry run) checks before it starts (the API key's variable is set). A judge
config holding a value that looks like a key or token (``sk-...``, ``Bearer ...``, an
``api_key`` entry) is refused here, naming where it is and never showing it.

Untrusted text (responses, passages) reaches the engines inside the judges' delimiters. The
engines that apply a chat template themselves (llama.cpp, vLLM; and the servers behind the
OpenAI-compatible engine do the same) would turn a chat-template control token written in that
text, e.g. ``<|im_end|><|im_start|>system``, into a real one: a new turn with another role.
``neutralize_control_tokens`` breaks such tokens in every message before it is sent, so they
are read as the plain text they are.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ragscale.errors import UserError, did_you_mean

# engine name -> module under actors.engines
ENGINES = {"llama.cpp": "llamacpp", "vllm": "vllm_engine", "openai": "openai_compat"}


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


def _module(engine: str) -> Any:
    if engine not in ENGINES:
        raise UserError(f"unknown judge engine {engine!r}{did_you_mean(engine, ENGINES)}; engines are {', '.join(ENGINES)}")
    return importlib.import_module(f"ragscale.actors.engines.{ENGINES[engine]}")


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


def resolve(conf: Mapping[str, Any], pool: Mapping[str, Any]) -> dict:
    """Validate a judge config (conf/judge/*.yaml) and return the engine's constructor kwargs
    (with an ``engine`` key); every problem is a one-line UserError."""
    from ragscale.secrets import secret_paths

    leaked = secret_paths({k: v for k, v in conf.items() if k != "name"})
    if leaked:
        raise UserError(
            f"judge config value(s) {', '.join('judge.' + p for p in leaked)} look like secrets (API keys, tokens; "
            "not shown): secrets are read only from environment variables, the key from the one named by "
            "judge.options.api_key_env"
        )
    mod = _module(conf["engine"])
    options = dict(conf.get("options") or {})
    unknown = sorted(set(options) - set(mod.OPTIONS))
    if unknown:
        raise UserError(
            f"judge engine {conf['engine']!r} has no option(s) {', '.join(unknown)}"
            f"{did_you_mean(unknown[0], mod.OPTIONS)}; its options are {', '.join(sorted(mod.OPTIONS))}"
        )
    return {"engine": conf["engine"], **mod.resolve(conf, options, pool)}


def ready(kwargs: Mapping[str, Any]) -> None:
    """Check what sending prompts needs that a config cannot show (an API key in the environment):
    a one-line UserError. ``kwargs``: ``resolve``'s. A run checks it; ``ragscale prompts`` sends
    nothing and does not."""
    mod = _module(kwargs["engine"])
    if hasattr(mod, "ready"):
        mod.ready(kwargs)


def _llamacpp_label(kw: Mapping[str, Any]) -> str:
    from ragscale.actors.engines.llamacpp import model_label

    return model_label(kw["model_path"], kw.get("requantize"))


# engine name -> the model name its Engine reports as ``engine.model`` (what cache keys and run.json
# call the model), read from ``resolve``'s output: each engine's constructor sets it so
_MODEL_NAME = {
    "llama.cpp": _llamacpp_label,  # llamacpp.Engine: the GGUF file's name (@type if requantized)
    "vllm": lambda kw: kw["model_name"],  # vllm_engine.Engine: the folder's name or the HF model id
    "openai": lambda kw: kw["model"],  # openai_compat.Engine: the endpoint's model name
}


def model_name(kwargs: Mapping[str, Any]) -> str:
    """The model name the engine described by ``resolve``'s output would report as ``engine.model``,
    without building it (no model is loaded): for dry runs that compute cache keys (ragscale.prompts)."""
    _module(kwargs["engine"])  # an unknown engine: the one-line UserError
    return str(_MODEL_NAME[kwargs["engine"]](kwargs))


def streams(kwargs: Mapping[str, Any]) -> bool:
    """Whether the engine of ``resolve``'s output takes prompts one by one (``submit``), so that
    a judge actor streams them and may work on several batches at once."""
    return callable(getattr(_module(kwargs["engine"]).Engine, "submit", None))


def build(kwargs: Mapping[str, Any]) -> Any:
    """Construct the engine described by ``resolve``'s output (inside the actor)."""
    kw = dict(kwargs)
    return _module(kw.pop("engine")).Engine(**kw)
