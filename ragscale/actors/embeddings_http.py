"""Sentence embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint, for ragas' answer
relevancy (``relevancy.embeddings=openai``; the run's packaged encoder stays the offline default).

ragas 0.4.3 embeds the user question and the generated questions with its LLM provider's
embeddings: ``evaluate`` without ``embeddings`` builds ``embedding_factory()``, langchain's
``OpenAIEmbeddings`` with ``text-embedding-ada-002`` (ragas/embeddings/base.py), and
``ResponseRelevancy.calculate_similarity`` calls ``embed_query(question)`` and
``embed_documents(generated)``. Pointed at the same endpoint and model, this client gives the
same vectors, hence the same scores. Deliberate differences:

* Texts are sent as strings. langchain sends OpenAI tiktoken token ids and splits a text longer
  than 8191 tokens into chunks whose embeddings it averages; for a text within the model's
  context (a question) the vector is the same. langchain also replaces newlines with spaces for
  models whose name ends in ``001``; ragscale sends the text as it is.
* The unique texts of a batch of records are sent ``batch_size`` at a time, ``concurrency``
  requests in flight (ragas: two requests per record). The empty string (a generated question
  may be empty) goes in a request of its own, as langchain does, so that an endpoint refusing it
  fails only the records that need it.
* A failed request never fails the run: its texts' records get ``answer_relevancy: null`` with
  the reason (the actor's business, ragscale.actors.encoder.RelevancyActor).

HTTP: ``openai_http.RetryingHTTP`` (retries with backoff on connection errors, timeouts,
408/409/429 and 5xx, ``Retry-After`` honoured; any other 4xx is final), as the judge's
OpenAI-compatible engine does: ``timeout_s`` is each attempt's whole deadline (connect, send and
every read), so a request ends within ``prompt_bound_s()`` whatever the server does. The key is read inside the actor, at each call, from the
environment variable named by ``api_key_env``; it is never part of the config, the actor's
arguments, run.json, logs or errors (every server text is redacted before it is kept).
Vectors come back as float lists or base64 float32 (``encoding_format=base64``), ordered by
their ``index``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import re
from typing import Any, Mapping, Sequence
from urllib.parse import urlparse

import numpy as np

from ragscale.actors.engines.generation import Generation
from ragscale.actors.engines.openai_endpoint import OPENAI_URL, host, is_azure, needs_key
from ragscale.actors.engines.openai_http import BadResponse, RetryingHTTP, run_sync
from ragscale.secrets import looks_like_env_name, secret_paths
from ragscale.errors import UserError, did_you_mean

SOURCES = ("encoder", "openai")  # relevancy.embeddings
_OPENAI_EMBEDDING_MODEL = re.compile(r"^text-embedding-", re.IGNORECASE)  # OpenAI's embedding models
# RelevancyConf's numeric settings: (cast, lowest value)
_NUMBERS = {"batch_size": (int, 1), "concurrency": (int, 1), "timeout_s": (float, 0.001), "max_attempts": (int, 1),
            "backoff_s": (float, 0.0), "backoff_max_s": (float, 0.0)}


def endpoint_url(base_url: str) -> str:
    """The URL the embeddings are POSTed to."""
    return base_url.rstrip("/") + "/embeddings"


def _no_credentials(base_url: Any) -> None:
    """Refuse (unshown) a base URL that carries credentials or a query (``?api-key=...``)."""
    u = urlparse(str(base_url).strip())
    if u.username or u.password or u.query or u.fragment:
        raise UserError("relevancy.base_url must not carry credentials or a query (not shown): the key comes only "
                        "from the environment variable named by relevancy.api_key_env")


def _base_url(base_url: Any, model: str) -> str:
    """The endpoint's base URL (OpenAI's for an OpenAI embedding model without one), without a
    trailing ``/embeddings``."""
    if not base_url:
        if not _OPENAI_EMBEDDING_MODEL.match(model):
            raise UserError(f"relevancy.embeddings=openai: set relevancy.base_url to the server's OpenAI-compatible "
                            f"URL (e.g. http://127.0.0.1:8000/v1) for model {model!r}")
        base_url = OPENAI_URL
    base_url = str(base_url).strip().rstrip("/")
    if base_url.endswith("/embeddings"):
        base_url = base_url[: -len("/embeddings")].rstrip("/")
    if urlparse(base_url).scheme not in ("http", "https") or not host(base_url):
        raise UserError(f"relevancy.base_url must be an http(s) URL, got {base_url!r}")
    return base_url


def plan_embeddings(conf: Mapping[str, Any], used: bool = True) -> dict:
    """Check ``relevancy.*`` on the driver (one-line UserErrors) and return the
    ``EmbeddingsClient`` arguments; ``{}`` when answer relevancy embeds with the run's encoder.
    Never the key: only the name of the variable that holds it. A secret, credentials in the URL
    or an unknown source are refused in any run; the other settings are checked when the run
    computes answer relevancy (``used``)."""
    leaked = secret_paths(dict(conf))
    if leaked:
        raise UserError(f"relevancy config value(s) {', '.join('relevancy.' + p for p in leaked)} look like secrets "
                        "(API keys, tokens; not shown): the key is read only from the environment variable named "
                        "by relevancy.api_key_env")
    if conf.get("base_url"):
        _no_credentials(conf["base_url"])
    source = conf.get("embeddings")
    if source not in SOURCES:
        raise UserError(f"relevancy.embeddings must be one of {', '.join(SOURCES)}, got {source!r}"
                        f"{did_you_mean(str(source), SOURCES)}")
    if source == "encoder" or not used:
        return {}
    model = str(conf.get("model") or "").strip()
    if not model:
        raise UserError("relevancy.embeddings=openai needs relevancy.model, the served embedding model's name")
    env = conf.get("api_key_env")
    if not looks_like_env_name(env):
        raise UserError("relevancy.api_key_env must be the NAME of an environment variable holding the key "
                        "(e.g. OPENAI_API_KEY), never the key itself (the value given is not shown)")
    base_url = _base_url(conf.get("base_url"), model)
    if needs_key(base_url) and not os.environ.get(env):
        raise UserError(f"relevancy.embeddings=openai: environment variable {env} (relevancy.api_key_env) is not "
                        f"set; {host(base_url)} needs an API key")
    out: dict[str, Any] = {"model": model, "base_url": base_url, "api_key_env": env}
    for name, (cast, low) in _NUMBERS.items():
        try:
            out[name] = cast(conf.get(name))
        except (TypeError, ValueError):
            raise UserError(f"relevancy.{name} must be a number, got {conf.get(name)!r}") from None
        if out[name] < low:
            raise UserError(f"relevancy.{name} must be >= {low}, got {out[name]}")
    return out


def _vector(value: Any) -> np.ndarray:
    """One embedding: a list of numbers, or base64 of little-endian float32 (``encoding_format=base64``)."""
    if isinstance(value, str):
        try:
            vec = np.frombuffer(base64.b64decode(value, validate=True), dtype="<f4").astype(float)
        except (binascii.Error, ValueError):
            raise BadResponse("HTTP 200 with an embedding that is neither numbers nor base64 float32") from None
    elif isinstance(value, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        vec = np.asarray(value, dtype=float)
    else:
        raise BadResponse(f"HTTP 200 with an embedding that is not a list of numbers ({type(value).__name__})")
    if vec.ndim != 1 or not vec.size or not np.isfinite(vec).all():
        raise BadResponse("HTTP 200 with an empty or non-finite embedding")
    return vec


class EmbeddingsClient(RetryingHTTP):
    """``POST {base_url}/embeddings`` with ``{"model", "input": [texts]}``, retried as the judge's
    OpenAI-compatible engine retries. ``stats`` (the client's life) counts ``requests`` (HTTP
    attempts), ``http_retries``, ``rate_limited`` (429s), ``http_errors`` (requests that failed
    for good) and ``backoff_s``."""

    def __init__(self, model: str, base_url: str, api_key_env: str = "OPENAI_API_KEY", batch_size: int = 128,
                 concurrency: int = 4, timeout_s: float = 60.0, max_attempts: int = 6, backoff_s: float = 1.0,
                 backoff_max_s: float = 60.0):
        import httpx  # noqa: F401 - fail at actor start, not at the first batch

        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = endpoint_url(self.base_url)
        self.params: dict = {}
        self.api_key_env = api_key_env
        self.key_header = "api-key" if is_azure(self.base_url) else "Authorization"
        self.batch_size = max(1, int(batch_size))
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self._mode_now = "embeddings"  # one request variant (RetryingHTTP's response_format switch is unused)
        self._warned = False
        self.stats: dict[str, float] = {"requests": 0, "http_retries": 0, "rate_limited": 0, "http_errors": 0,
                                        "backoff_s": 0.0}

    def __repr__(self) -> str:
        return f"EmbeddingsClient(model={self.model!r}, url={self.url!r}, api_key_env={self.api_key_env!r})"

    def batches(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """The requests' inputs: the unique texts in first-seen order, ``batch_size`` at a time,
        the empty string alone."""
        uniq = [t for t in dict.fromkeys(texts) if t != ""]
        out = [tuple(uniq[i:i + self.batch_size]) for i in range(0, len(uniq), self.batch_size)]
        return out + ([("",)] if "" in texts else [])

    def embed(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """The vector of each text, and for each text the endpoint did not embed the reason (its
        request's error after the retries, redacted). Never raises for an endpoint's failure."""
        batches = self.batches(texts)
        if not batches:
            return {}, {}
        self._warned = False
        results = run_sync(self._aembed(batches))
        vecs: dict[str, np.ndarray] = {}
        errors: dict[str, str] = {}
        dim = None
        for batch, res in zip(batches, results):
            if isinstance(res, Generation):  # RetryingHTTP's failure: the error, redacted, after its retries
                errors.update(dict.fromkeys(batch, str(res.error)))
                continue
            sizes = sorted({v.size for v in res} | ({dim} if dim else set()))
            problem = None
            if len(res) != len(batch):
                problem = f"{len(res)} embeddings for {len(batch)} inputs"
            elif len(sizes) > 1:
                problem = f"embeddings of different lengths {sizes}"
            if problem:
                self.stats["http_errors"] += 1
                errors.update(dict.fromkeys(batch, f"openai engine: {self.url}: HTTP 200 with {problem}"))
                continue
            dim = res[0].size
            vecs.update(zip(batch, res))
        return vecs, errors

    async def _aembed(self, batches: list[tuple[str, ...]]) -> list[Any]:
        import httpx

        sem = asyncio.Semaphore(self.concurrency)
        timeout = httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(headers=self._headers(), timeout=timeout, limits=limits) as client:
            return list(await asyncio.gather(*(self._one(client, sem, b, 0.0, 0, self.stats) for b in batches)))

    # -- hooks of RetryingHTTP ---------------------------------------------------------

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json"}
        key = (os.environ.get(self.api_key_env) or "").strip()  # read here, at each call; never stored
        if key:
            headers[self.key_header] = key if self.key_header == "api-key" else f"Bearer {key}"
        return headers

    def _body(self, prompt: Any, temperature: float, seed: int, mode: str) -> dict:
        return {"model": self.model, "input": list(prompt)}

    def _generation(self, data: Any) -> Any:  # the vectors, in input order (RetryingHTTP returns them as they are)
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or not items:
            raise BadResponse("HTTP 200 without embeddings ('data' missing or empty)")
        by_index: dict[int, np.ndarray] = {}
        for pos, item in enumerate(items):
            if not isinstance(item, dict) or "embedding" not in item:
                raise BadResponse("HTTP 200 with a 'data' item without 'embedding'")
            i = item.get("index", pos)
            if not isinstance(i, int) or isinstance(i, bool) or i in by_index:
                raise BadResponse(f"HTTP 200 with a missing or repeated index ({i!r})")
            by_index[i] = _vector(item["embedding"])
        if sorted(by_index) != list(range(len(by_index))):
            raise BadResponse(f"HTTP 200 with indices {sorted(by_index)[:8]} instead of 0..{len(by_index) - 1}")
        return [by_index[i] for i in range(len(by_index))]

    def _switched(self, mode: str, msg: str) -> bool:
        return False
