"""Judge engines behind one interface.

An engine is built inside a judge actor from plain keyword arguments and offers::

    name: str                      # "llama.cpp" | "vllm" | "openai"
    model: str                     # what the cache key and run.json call the model
    generate(prompts, temperature=0.0, seed=None) -> list[Generation]

``prompts`` are ``ragscale.judges.base.JudgePrompt``s (chat messages + the JSON schema the
output must follow); the returned texts are in the same order. Engines batch or overlap
the prompts as their backend allows; parsing is the judges' business, not theirs.

Each engine module also has ``resolve(conf, pool) -> dict``: it runs on the driver before
Ray starts, checks the config and the model's location without importing the backend,
and returns the actor's keyword arguments (never a secret: API keys are read from the
environment inside the actor).
"""

from __future__ import annotations

import importlib
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
    return importlib.import_module(f"actors.engines.{ENGINES[engine]}")


def resolve(conf: Mapping[str, Any], pool: Mapping[str, Any]) -> dict:
    """Validate a judge config (conf/judge/*.yaml) and return the engine's constructor kwargs
    (with an ``engine`` key); every problem is a one-line UserError."""
    mod = _module(conf["engine"])
    options = dict(conf.get("options") or {})
    unknown = sorted(set(options) - set(mod.OPTIONS))
    if unknown:
        raise UserError(
            f"judge engine {conf['engine']!r} has no option(s) {', '.join(unknown)}"
            f"{did_you_mean(unknown[0], mod.OPTIONS)}; its options are {', '.join(sorted(mod.OPTIONS))}"
        )
    return {"engine": conf["engine"], **mod.resolve(conf, options, pool)}


def build(kwargs: Mapping[str, Any]) -> Any:
    """Construct the engine described by ``resolve``'s output (inside the actor)."""
    kw = dict(kwargs)
    return _module(kw.pop("engine")).Engine(**kw)
