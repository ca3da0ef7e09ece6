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
``api_key`` entry) is refused here, naming where it is and never showing it. Each engine module
has ``model_name(kwargs)`` too: the name its Engine, built from ``resolve``'s output, reports as
``engine.model``.

``Generation`` and the message check every engine applies before sending (``safe_messages``,
``neutralize_control_tokens``: chat-template control tokens in untrusted text) live in
``generation`` and are re-exported here.

Engines are looked up by name in the registry (ragscale/registry.py, kind ``engine``), where each
is registered by its module's path and imported on first use: ragscale's own below
(:data:`ENGINES`), another package's by ``register("engine", name, lazy="its.module")``.
"""

from __future__ import annotations

from typing import Any, Mapping

from ragscale.actors.engines.generation import Generation, neutralize_control_tokens, safe_messages  # noqa: F401 - re-exported
from ragscale.errors import UserError, did_you_mean
from ragscale.registry import REGISTRY

# ragscale's engines: name -> module under actors.engines
ENGINES = {"llama.cpp": "llamacpp", "vllm": "vllm_engine", "openai": "openai_compat"}
for _name, _module_name in ENGINES.items():
    REGISTRY.register("engine", _name, lazy=f"{__name__}.{_module_name}")


def _module(engine: str) -> Any:
    """The engine's module (imported now); an unknown name is the registry's one-line UserError."""
    return REGISTRY.get("engine", engine)


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


def model_name(kwargs: Mapping[str, Any]) -> str:
    """The model name the engine described by ``resolve``'s output would report as ``engine.model``,
    without building it (no model is loaded): for dry runs that compute cache keys (ragscale.dryrun)."""
    return str(_module(kwargs["engine"]).model_name(kwargs))  # an unknown engine: the one-line UserError


def streams(kwargs: Mapping[str, Any]) -> bool:
    """Whether the engine of ``resolve``'s output takes prompts one by one (``submit``), so that
    a judge actor streams them and may work on several batches at once."""
    return callable(getattr(_module(kwargs["engine"]).Engine, "submit", None))


def build(kwargs: Mapping[str, Any]) -> Any:
    """Construct the engine described by ``resolve``'s output (inside the actor)."""
    kw = dict(kwargs)
    return _module(kw.pop("engine")).Engine(**kw)
