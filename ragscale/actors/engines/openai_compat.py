"""OpenAI-compatible engine: any chat-completions endpoint (OpenAI, Azure OpenAI, vLLM's or
llama.cpp's server, SGLang, Ollama, a gateway) over HTTP, with JSON-schema constrained output.

The API key is never part of the config, the actor's arguments, run.json, logs or errors:
the engine reads it from the environment variable named by ``api_key_env`` (default
``OPENAI_API_KEY``) inside the judge actor, at each request (a streaming engine's long-lived
client included: a key rotated in the environment is sent from the next request on). Local
servers need no key.
``resolve`` refuses an ``api_key_env`` that is a key rather than a variable's name, without
showing it. Every text that comes back from the server or the HTTP stack (error bodies,
exception messages, a malformed answer) is redacted *before* it is cut to an excerpt: the key
in any of its encodings (as is, stripped, JSON- or URL-escaped), any ``Bearer``/``Basic``
credential and anything of a key's shape (``sk-...``) become ``***``, so that a server that
echoes the request's headers cannot put the key, or a prefix of it, into a record, run.json,
the report or a log.

Every prompt of a ``generate`` call is in flight at once, bounded by ``concurrency``; a
request is retried (exponential backoff with jitter, ``Retry-After`` honoured) on connection
errors, timeouts, 408/409/429 and 5xx; any other 4xx, or a prompt still failing after
``max_attempts``, becomes that prompt's ``Generation.error`` (the call never raises for one
bad prompt); ``timeout_s`` is each attempt's whole deadline, so a prompt ends within
``prompt_bound_s()``. Retries are logged as warnings (logger ``ragscale.judge``: the judge
actor's log and the driver's console), so that an endpoint that is down shows itself while the
run waits for it. The HTTP side (deadline, retries, warnings, redaction) is in ``openai_http``;
the endpoint's URL and key checks are in ``openai_endpoint``.

Streaming (``submit``, which the judge actor uses when it streams): one prompt at a time, sent
as soon as it is submitted, on one background thread per engine (a daemon, started at the first
``submit``) that runs a persistent asyncio loop with one HTTP client; ``concurrency`` bounds the
requests in flight across all submits, from any number of threads. Retries, the response_format
fallback and redaction are those of a ``generate`` call; the first retry is logged once per
streaming life (from the first ``submit`` to ``close``). Prompts go out in submission order: a
``generate`` call sorts its prompts by text for servers with prefix caching, ``submit`` cannot
(the judge actor submits a phase's first prompts in row order).

``response_format`` (how the JSON schema is sent):

* ``auto`` (default): OpenAI structured outputs (``json_schema``); if the server rejects that
  type (llama-cpp-python's ``python -m llama_cpp.server`` answers HTTP 500 "Input should be
  'text' or 'json_object'"), the engine switches to ``json_object_schema`` for good.
* ``json_schema``: ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``:
  OpenAI, Azure OpenAI, vLLM, llama.cpp's C++ ``llama-server``, SGLang, Ollama. With
  ``strict`` (default true) the schema is first made strict-mode compatible (objects closed
  with ``additionalProperties: false``, every property required, string length limits
  dropped: OpenAI rejects them; the judges' ``max_tokens`` bounds the length anyway).
* ``json_object_schema``: ``{"type": "json_object", "schema": ...}``: llama-cpp-python's
  server (grammar-constrained), llama.cpp's ``llama-server``.
* ``json_object``: JSON mode without a schema (the prompt describes the fields).
* ``none``: no ``response_format`` (e.g. when ``extra_body`` carries vLLM's
  ``structured_outputs`` / guided decoding fields).
"""

from __future__ import annotations

import json
import logging
import os
import re
from concurrent.futures import Future
from typing import Any, Callable, Mapping, Sequence

from ragscale.actors.engines.generation import Generation, safe_messages
from ragscale.actors.engines.openai_endpoint import chat_base_url, host, is_azure, key_env, needs_key
from ragscale.actors.engines.openai_http import BadResponse, RetryingHTTP, new_stats, redact, run_sync
from ragscale.actors.engines.openai_http import secret_variants  # noqa: F401 - imported from here by callers
from ragscale.secrets import credential_name
from ragscale.errors import UserError
from ragscale.judges.base import JudgePrompt

log = logging.getLogger("ragscale.judge")

# conf/judge/*.yaml `options` this engine accepts, with their defaults
OPTIONS = {
    "base_url": None,  # required unless `model` is an OpenAI model (then https://api.openai.com/v1)
    "api_key_env": "OPENAI_API_KEY",  # NAME of the environment variable holding the key
    "api_version": None,  # Azure OpenAI `api-version` query parameter (classic deployment URLs)
    "concurrency": 16,  # requests in flight per judge actor
    "timeout_s": 120.0,  # each attempt's deadline, whole: connect, send and every read (queued at the server included)
    "max_attempts": 6,  # tries per prompt (1 = no retries)
    "backoff_s": 1.0,  # first retry delay; doubles per attempt, jittered
    "backoff_max_s": 60.0,  # cap of a retry delay (Retry-After included)
    "response_format": "auto",  # auto | json_schema | json_object_schema | json_object | none
    "strict": True,  # json_schema: strict structured outputs (schema made strict-compatible)
    "max_tokens_param": "max_tokens",  # or max_completion_tokens (OpenAI o-series / gpt-5)
    "extra_body": {},  # merged into every request body (e.g. {"top_k": 1})
    "extra_headers": {},  # non-secret headers (recorded in run.json)
}
RESPONSE_FORMATS = ("auto", "json_schema", "json_object_schema", "json_object", "none")
# JSON-schema keywords OpenAI's strict mode rejects (the rest of the judges' schemas is allowed)
_STRICT_DROP = ("minLength", "maxLength")


def _model(conf: Mapping[str, Any]) -> str:
    model = str(conf.get("model") or "").strip()
    if not model or model.startswith("package:"):
        raise UserError(
            f"judge engine 'openai' needs judge.model set to the served model's name (e.g. gpt-4o-mini), got {model!r}"
        )
    return model


def model_name(kwargs: Mapping[str, Any]) -> str:
    """The model name Engine(**kwargs) reports as ``engine.model`` (``kwargs``: ``resolve``'s): the
    endpoint's model name."""
    return kwargs["model"]


def ready(kwargs: Mapping[str, Any]) -> None:
    """What sending needs beyond a valid config (``resolve``'s kwargs): the key's environment
    variable set where the endpoint always wants a key. Checked before a run, not a dry run."""
    env, base_url = kwargs["api_key_env"], kwargs["base_url"]
    if needs_key(base_url) and not os.environ.get(env):
        raise UserError(
            f"judge engine 'openai': environment variable {env} (judge.options.api_key_env) is not set; "
            f"{host(base_url)} needs an API key"
        )


def _num(kw: Mapping[str, Any], name: str, cast: type, low: float) -> Any:
    try:
        v = cast(kw[name])
    except (TypeError, ValueError):
        raise UserError(f"judge.options.{name} must be a number, got {kw[name]!r}") from None
    if v < low:
        raise UserError(f"judge.options.{name} must be >= {low}, got {v}")
    return v


def _extras(kw: Mapping[str, Any]) -> dict:
    """``extra_body`` and ``extra_headers`` as dicts; a header that may carry a secret is refused."""
    out = {}
    for name in ("extra_body", "extra_headers"):
        if not isinstance(kw[name] or {}, Mapping):
            raise UserError(f"judge.options.{name} must be a mapping, got {type(kw[name]).__name__}")
        out[name] = dict(kw[name] or {})
    for h, v in out["extra_headers"].items():
        if credential_name(h):
            raise UserError(
                f"judge.options.extra_headers must not carry secrets ({h!r}): the key comes only from the "
                f"environment variable named by judge.options.api_key_env"
            )
        out["extra_headers"][h] = str(v)
    return out


def resolve(conf: Mapping[str, Any], options: dict, pool: Mapping[str, Any]) -> dict:
    """Check the options (one-line UserErrors) and return the Engine's kwargs: never the key."""
    kw = {**OPTIONS, **{k: v for k, v in options.items() if v is not None}}  # null: the default
    model = _model(conf)
    base_url = chat_base_url(kw["base_url"], model)
    env = key_env(kw["api_key_env"])
    out = {
        "model": model,
        "base_url": base_url,
        "api_key_env": env,
        "api_version": str(kw["api_version"]) if kw["api_version"] else None,
        "seed": int(conf.get("seed") or 0),
        "concurrency": _num(kw, "concurrency", int, 1),
        "timeout_s": _num(kw, "timeout_s", float, 0.001),
        "max_attempts": _num(kw, "max_attempts", int, 1),
        "backoff_s": _num(kw, "backoff_s", float, 0),
        "backoff_max_s": _num(kw, "backoff_max_s", float, 0),
        "strict": bool(kw["strict"]),
    }
    rf = str(kw["response_format"])
    if rf not in RESPONSE_FORMATS:
        raise UserError(f"judge.options.response_format must be one of {', '.join(RESPONSE_FORMATS)}, got {rf!r}")
    out["response_format"] = rf
    if kw["max_tokens_param"] not in ("max_tokens", "max_completion_tokens"):
        raise UserError(
            f"judge.options.max_tokens_param must be max_tokens or max_completion_tokens, got {kw['max_tokens_param']!r}"
        )
    out["max_tokens_param"] = kw["max_tokens_param"]
    out.update(_extras(kw))
    return out


def strict_schema(schema: Any) -> Any:
    """A copy of ``schema`` that OpenAI's strict structured outputs accept: every object closed
    (``additionalProperties: false``) with all its properties required, and string length
    limits dropped."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items() if k not in _STRICT_DROP}
    if out.get("type") == "object" and isinstance(out.get("properties"), dict):
        out.setdefault("additionalProperties", False)
        out["required"] = list(out["properties"])
    return out


class Engine(RetryingHTTP):
    """Chat completions over HTTP (httpx, asyncio): prompts of a call overlap, ``concurrency`` at a
    time; or streamed one by one (``submit``) until ``close``.

    ``last_stats`` (the latest ``generate`` call), ``stream_stats`` (the current or latest
    streaming life, added to as each submitted prompt ends) and ``total_stats`` (the engine's
    life, both ways) count ``requests`` (HTTP attempts), ``http_retries``, ``rate_limited``
    (429s), ``http_errors`` (prompts returned with ``error``) and ``backoff_s`` (seconds slept
    before retries).
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key_env: str = "OPENAI_API_KEY",
        api_version: str | None = None,
        seed: int = 0,
        concurrency: int = 16,
        timeout_s: float = 120.0,
        max_attempts: int = 6,
        backoff_s: float = 1.0,
        backoff_max_s: float = 60.0,
        response_format: str = "auto",
        strict: bool = True,
        max_tokens_param: str = "max_tokens",
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ):
        import httpx  # noqa: F401 - fail at actor start, not at the first batch

        super().__init__()
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.params = {"api-version": api_version} if api_version else {}
        self.api_key_env = api_key_env
        self.key_header = "api-key" if (api_version or is_azure(self.base_url)) else "Authorization"
        self.seed = int(seed)
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.response_format = response_format
        self.strict = bool(strict)
        self.max_tokens_param = max_tokens_param
        self.extra_body = dict(extra_body or {})
        self.extra_headers = {str(k): str(v) for k, v in (extra_headers or {}).items()}
        # the response_format actually sent (``auto`` starts with json_schema and may fall back)
        self._mode_now = "json_schema" if response_format == "auto" else response_format
        self.switches = 1 if response_format == "auto" else 0  # auto may fall back once (prompt_bound_s)
        self.last_stats: dict[str, Any] = {}
        self.total_stats: dict[str, Any] = {}
        self._warned = False  # the current call's (or streaming life's) first retry was logged
        if needs_key(self.base_url) and not os.environ.get(api_key_env):
            # a config problem on this node (the key is read here, not shipped with the actor)
            raise RuntimeError(
                f"environment variable {api_key_env} is not set on this node; {host(self.base_url)} needs an API key"
            )

    def __repr__(self) -> str:
        return (
            f"openai_compat.Engine(model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key_env={self.api_key_env!r}, concurrency={self.concurrency})"
        )

    @property
    def response_format_used(self) -> str:
        """The response_format now sent (``auto`` resolves to json_schema or json_object_schema)."""
        return self._mode_now

    # -- request building -------------------------------------------------------------

    def _format(self, prompt: JudgePrompt, mode: str) -> dict | None:
        if prompt.schema is None:  # free text, as a reference protocol's prompt asks for it
            return None
        if mode == "json_schema":
            schema = strict_schema(prompt.schema) if self.strict else prompt.schema
            name = re.sub(r"[^A-Za-z0-9_-]", "_", prompt.judge)[:64] or "judgement"
            return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": self.strict}}
        if mode == "json_object_schema":
            return {"type": "json_object", "schema": prompt.schema}
        if mode == "json_object":
            return {"type": "json_object"}
        return None

    def _body(self, prompt: JudgePrompt, temperature: float, seed: int, mode: str) -> dict:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": safe_messages(prompt.messages),
            "temperature": temperature,
            self.max_tokens_param: prompt.max_tokens,
            "seed": seed,
            **dict(prompt.params),  # presence_penalty, top_p
        }
        rf = self._format(prompt, mode)
        if rf is not None:
            body["response_format"] = rf
        body.update(self.extra_body)
        return body

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", **self.extra_headers}
        # stripped: a key read from a file often ends with a newline, which no header may hold
        # (and httpx's error message would then quote the whole header value)
        key = (os.environ.get(self.api_key_env) or "").strip()
        if key:
            headers[self.key_header] = key if self.key_header == "api-key" else f"Bearer {key}"
        return headers

    # -- answers and response_format fallback (hooks of RetryingHTTP) -------------------

    def _switched(self, mode: str, msg: str) -> bool:
        """Whether the request should be sent again at once in another response_format: another
        prompt already switched, or ``auto`` learns here that the server does not know
        ``json_schema`` (llama-cpp-python's server: HTTP 500 "Input should be 'text' or
        'json_object'"). OpenAI's and Azure's endpoints know it: never switched there."""
        if self._mode_now != mode:
            return True
        if (
            self.response_format == "auto"
            and mode == "json_schema"
            and not needs_key(self.base_url)
            and re.match(r"HTTP (400|422|500)\b", msg) is not None
            and "json_schema" in msg
        ):
            self._mode_now = "json_object_schema"  # for the rest of this engine's life
            return True
        return False

    def _generation(self, data: Any) -> Generation:
        try:
            choice = data["choices"][0]
            msg = choice.get("message") or {}
        except (KeyError, IndexError, TypeError, AttributeError):
            raise BadResponse(f"response without choices: {self._clip(json.dumps(data), 200)}") from None
        content = msg.get("content")
        if content is None:
            reason = msg.get("refusal") or choice.get("finish_reason") or "no content"
            raise BadResponse(f"no content in the response ({self._clip(str(reason), 200)})")
        usage = data.get("usage") or {}
        # the key itself never reaches a record or the judge cache, even from a server that echoes it
        content = redact(str(content), [os.environ.get(self.api_key_env) or ""], shapes=False)
        return Generation(content, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))

    # -- a call -----------------------------------------------------------------------

    def generate(self, prompts: Sequence[JudgePrompt], temperature: float = 0.0,
                 seed: int | None = None, on_done: Callable[[int], None] | None = None) -> list[Generation]:
        """All prompts in flight (``concurrency`` at a time); outputs in input order, failures as
        ``error``; ``on_done(1)`` as each prompt ends. The call runs on a loop and client of its
        own, beside the streaming loop if one runs (each with its ``concurrency`` bound)."""
        stats = new_stats()
        self.last_stats = stats
        self._warned = False
        if not prompts:
            return []
        # from inside an event loop (an async actor, a notebook) this runs on a private one
        out = run_sync(self._agenerate(list(prompts), temperature, self.seed if seed is None else int(seed), stats,
                                       on_done))
        stats["backoff_s"] = round(stats["backoff_s"], 3)
        if stats["http_errors"]:
            log.warning("openai engine: %s: %d of %d prompts failed (their records carry the error)",
                        self._scrub(self.url), stats["http_errors"], len(prompts))
        self._tally(stats, self.total_stats)
        return out

    def submit(self, prompt: JudgePrompt, temperature: float = 0.0, seed: int | None = None) -> Future:
        """Send one prompt on the streaming loop (started by the first call); the Future resolves
        to its Generation, a failure as ``error`` (it never raises). Thread safe; at most
        ``concurrency`` requests in flight across all submits."""
        return self._stream_submit(prompt, temperature, self.seed if seed is None else int(seed))
