"""HTTP side of the OpenAI-compatible engine (``openai_compat``): the retrying client, backoff,
error classification and redaction.

A request is retried (exponential backoff with jitter, ``Retry-After`` honoured) on
connection errors, timeouts, 408/409/429 and 5xx (``Retryable``); any other 4xx is ``Fatal``
and a 200 answer without usable content is a ``BadResponse``: neither is retried.

``timeout_s`` is each attempt's deadline, whole: connecting, sending and every read of the
answer together (a server that sends one byte every second cannot hold a request past it, as
it could hold httpx's per-read timeout). So a prompt ends, answered or with its error, within
``prompt_bound_s``: its attempts' deadlines and the backoffs between them (time waiting for a
``concurrency`` slot on this side not counted). Retries are logged as warnings: the first at
once, then at most every ``RETRY_WARN_EVERY_S`` with the count since the last one. Every text
that comes back from the server or the HTTP stack is passed through ``redact`` before it is
cut to an excerpt, so that neither the key nor a prefix of it reaches a record or a log.

Two ways in: a ``generate`` call runs its prompts on a loop and client of its own
(``_agenerate``); ``_stream_submit`` sends one prompt on the streaming loop, a daemon thread
started at the first one with one client and one ``concurrency`` bound for every prompt
submitted until ``close``. Both go through ``_one``.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Coroutine, Iterable, Mapping, Sequence
from urllib.parse import quote

from ragscale.actors.engines import Generation
from ragscale.secrets import redact_secret_shapes
from ragscale.judges.base import JudgePrompt

log = logging.getLogger("ragscale.judge")
RETRY_STATUS = {408, 409, 429}
RETRY_WARN_EVERY_S = 60.0  # while retries go on, a warning at most this often (the first one at once)


def new_stats() -> dict[str, Any]:
    """Zeroed counters of ``RetryingHTTP`` (see there)."""
    return {"requests": 0, "http_retries": 0, "rate_limited": 0, "http_errors": 0, "backoff_s": 0.0}


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), if any."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(ra)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError, IndexError):
            return None


def excerpt(text: str, n: int = 300) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``n`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."


def secret_variants(secret: str) -> list[str]:
    """The forms a secret takes in text that quotes it: as is, stripped, JSON- and
    Python-escaped, URL-encoded; longest first, none shorter than 4 characters."""
    forms = {secret, secret.strip()}
    for s in list(forms):
        forms.update({json.dumps(s)[1:-1], repr(s)[1:-1], quote(s, safe="")})
    return sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] = (), shapes: bool = True) -> str:
    """``text`` with the given secrets (in every form of ``secret_variants``) replaced by
    ``***``; with ``shapes``, also any credential after ``Bearer``/``Basic`` and any string of
    an API key's shape (for error texts; a model's answer keeps its words)."""
    text = str(text)
    for secret in secrets:
        if secret:
            for form in secret_variants(secret):
                text = text.replace(form, "***")
    if not shapes:
        return text
    return redact_secret_shapes(text)  # a Bearer/Basic credential keeps its scheme: "Bearer ***"


class Retryable(Exception):
    """One failed attempt worth retrying: a description and an optional server-given delay."""

    def __init__(self, what: str, retry_after: float | None = None):
        super().__init__(what)
        self.what = what
        self.retry_after = retry_after


class Fatal(Exception):
    """A failure that retrying cannot fix (a 4xx other than 408/409/429)."""


class BadResponse(Exception):
    """A 200 answer without usable content (no choices, a refusal): not retried."""


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to its end from synchronous code; from inside a running event loop (an
    async actor, a notebook) it runs on a private loop in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()


class RetryingHTTP:
    """Base of the engine: its prompts POSTed over httpx with retries, ``concurrency`` at a time.

    The subclass calls ``__init__`` (the streaming state) and sets ``url``, ``params``,
    ``api_key_env``, ``timeout_s``, ``concurrency``, ``max_attempts``, ``backoff_s``,
    ``backoff_max_s``, ``total_stats``, ``_warned`` (the first retry was logged: reset by each
    ``generate`` call and at the start of each streaming life; the two share it, so a call made
    while streaming re-arms it) and ``_mode_now`` (the request variant now sent), and provides
    ``_headers()`` (read at each request), ``_body(prompt, temperature, seed, mode)``,
    ``_generation(data)`` and ``_switched(mode, msg)`` (whether a failure was the variant's
    fault: asked again at once; ``switches`` bounds how often that can happen to one prompt).
    ``stats`` count ``requests``, ``http_retries``, ``rate_limited``, ``http_errors`` and
    ``backoff_s`` (``new_stats``).
    """

    url: str
    params: dict
    api_key_env: str
    timeout_s: float
    concurrency: int
    max_attempts: int
    backoff_s: float
    backoff_max_s: float
    total_stats: dict[str, Any]
    _warned: bool
    _mode_now: str
    switches: int = 0  # attempts a prompt may get on top of max_attempts (a request variant that switched)
    _warned_at: float = 0.0  # when a retry was last logged
    _unwarned: int = 0  # retries since then

    def __init__(self) -> None:
        # the streaming loop, while it runs: (loop, its thread, client, semaphore, its stream_stats)
        self._stream: tuple[asyncio.AbstractEventLoop, threading.Thread, Any, asyncio.Semaphore, dict] | None = None
        self._stream_lock = threading.Lock()
        self._stats_lock = threading.Lock()  # total_stats and stream_stats, added to from several threads
        self.stream_stats: dict[str, Any] = new_stats()

    def prompt_bound_s(self) -> float:
        """The longest a prompt can take once sent: every attempt's deadline (``timeout_s``) and
        the delays between them (each at most ``backoff_max_s``, ``Retry-After`` included)."""
        attempts = self.max_attempts + self.switches
        return attempts * self.timeout_s + (self.max_attempts - 1) * self.backoff_max_s

    def _scrub(self, text: str) -> str:
        """``text`` without the key or anything that looks like a credential (servers sometimes
        echo the request's headers): see ``redact``."""
        return redact(text, [os.environ.get(self.api_key_env) or ""])

    def _clip(self, text: str, n: int = 300) -> str:
        """An excerpt of a server's or the HTTP stack's text, redacted before it is cut (a cut
        through the key would otherwise leave a prefix of it that no longer matches)."""
        return excerpt(self._scrub(text), n)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        d = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
        return d * (0.5 + random.random() / 2)

    async def _post(self, client: Any, body: dict, stats: dict) -> dict:
        import httpx

        stats["requests"] += 1
        try:  # the attempt's deadline, whole (httpx's own timeouts are per read)
            r = await asyncio.wait_for(
                client.post(self.url, json=body, params=self.params or None, headers=self._headers()), self.timeout_s)
        except asyncio.TimeoutError:
            raise Retryable(f"no complete answer within timeout_s={self.timeout_s:g}s "
                            "(connecting, sending and reading together)") from None
        except httpx.TimeoutException as e:
            raise Retryable(f"timeout after {self.timeout_s:g}s ({type(e).__name__})") from None
        except httpx.TransportError as e:  # connection refused/reset, DNS, protocol errors
            raise Retryable(f"{type(e).__name__}: {self._clip(str(e), 200) or 'connection failed'}") from None
        if r.status_code == 200:
            try:
                return r.json()
            except ValueError:
                raise Retryable(f"HTTP 200 with a non-JSON body: {self._clip(r.text, 200)}") from None
        text = self._clip(r.text)
        if r.status_code == 429:
            stats["rate_limited"] += 1
        if r.status_code in RETRY_STATUS or r.status_code >= 500:
            raise Retryable(f"HTTP {r.status_code}: {text}", retry_after(r.headers))
        if r.status_code in (401, 403):
            state = "set" if os.environ.get(self.api_key_env) else "not set"
            text += f" (the key comes from ${self.api_key_env}: {state} on this node)"
        raise Fatal(f"HTTP {r.status_code}: {text}")

    async def _one(self, client: Any, sem: asyncio.Semaphore, prompt: JudgePrompt, temperature: float, seed: int,
                   stats: dict) -> Generation:
        last, attempt = "no attempt", 0
        async with sem:
            while attempt < self.max_attempts:
                attempt += 1
                mode = self._mode_now
                retry, after = False, None
                try:
                    data = await self._post(client, self._body(prompt, temperature, seed, mode), stats)
                    return self._generation(data)
                except Retryable as e:
                    last, retry, after = e.what, True, e.retry_after
                except (Fatal, BadResponse) as e:
                    last = str(e)
                except Exception as e:  # noqa: BLE001 - one prompt's failure never fails the call
                    last = f"{type(e).__name__}: {self._clip(str(e), 200)}"
                if self._switched(mode, last):
                    attempt -= 1  # not the endpoint's fault: ask again at once
                    continue
                if not retry:
                    break
                if attempt < self.max_attempts:
                    delay = self._delay(attempt, after)
                    self._warn_retry(last)
                    stats["http_retries"] += 1
                    stats["backoff_s"] += delay
                    await asyncio.sleep(delay)
        stats["http_errors"] += 1
        tries = f"{attempt} attempt" + ("s" if attempt != 1 else "")
        return Generation("", error=self._scrub(f"openai engine: {self.url}: {last} ({tries})"))

    def _warn_retry(self, last: str) -> None:
        """Log a retry: the first of a call (or streaming life) at once, later ones at most every
        ``RETRY_WARN_EVERY_S`` with their count, so that an outage shows while it lasts."""
        now = time.monotonic()
        self._unwarned += 1
        if not self._warned:
            self._warned, self._warned_at, self._unwarned = True, now, 0
            log.warning(self._scrub(
                f"openai engine: {self.url}: {last}; retrying with backoff (up to {self.max_attempts} attempts "
                f"per prompt, {self.prompt_bound_s():g}s at most)"))
        elif now - self._warned_at >= RETRY_WARN_EVERY_S:
            n, since, self._warned_at, self._unwarned = self._unwarned, now - self._warned_at, now, 0
            log.warning(self._scrub(f"openai engine: {self.url}: still retrying: {n} more retr"
                                    f"{'y' if n == 1 else 'ies'} in the last {since:.0f}s; the latest: {last}"))

    def _client(self) -> Any:
        """An httpx client for ``concurrency`` requests in flight (the key goes with each request)."""
        import httpx

        timeout = httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        return httpx.AsyncClient(timeout=timeout, limits=limits)

    def _tally(self, counts: Mapping[str, float], *into: dict) -> None:
        """Add ``counts`` to each of the ``into`` counters (shared by threads)."""
        with self._stats_lock:
            for d in into:
                for k, v in counts.items():
                    d[k] = round(d.get(k, 0) + v, 3)

    async def _agenerate(self, prompts: Sequence[JudgePrompt], temperature: float, seed: int,
                         stats: dict, on_done: Callable[[int], None] | None = None) -> list[Generation]:
        sem = asyncio.Semaphore(self.concurrency)
        async with self._client() as client:
            # prefix-sorted submission: a server with prefix caching reuses shared prompt heads
            order = sorted(range(len(prompts)), key=lambda i: prompts[i].text())
            tasks = {i: asyncio.ensure_future(self._one(client, sem, prompts[i], temperature, seed, stats))
                     for i in order}
            if on_done is not None:
                for t in tasks.values():
                    t.add_done_callback(lambda _t: on_done(1))
            await asyncio.gather(*tasks.values())
            return [tasks[i].result() for i in range(len(prompts))]

    # -- streaming: one loop, client and concurrency bound for all submitted prompts ----------

    def _stream_submit(self, prompt: JudgePrompt, temperature: float, seed: int) -> Future:
        """Schedule ``prompt`` on the streaming loop (started here if it is not running); the
        Future resolves to its Generation. Scheduled under the lock, so ``close`` cancels it
        rather than stopping the loop before it is created."""
        with self._stream_lock:
            if self._stream is None:
                self.stream_stats = new_stats()
                self._warned = False  # the first retry of this streaming life is logged
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="openai-stream", daemon=True)
                thread.start()
                self._stream = (loop, thread, self._client(), asyncio.Semaphore(self.concurrency), self.stream_stats)
            loop, _, client, sem, stats = self._stream
            return asyncio.run_coroutine_threadsafe(self._streamed(client, sem, prompt, temperature, seed, stats), loop)

    async def _streamed(self, client: Any, sem: asyncio.Semaphore, prompt: JudgePrompt, temperature: float,
                        seed: int, stats: dict) -> Generation:
        counts = new_stats()
        try:
            out = await self._one(client, sem, prompt, temperature, seed, counts)
        except asyncio.CancelledError:  # close() while it was in flight: an error, as the Future promises
            counts["http_errors"] += 1
            out = Generation("", error=self._scrub(f"openai engine: {self.url}: closed before the answer came"))
        self._tally(counts, stats, self.total_stats)
        return out

    @staticmethod
    async def _stop(client: Any) -> None:
        """Cancel every prompt still on the streaming loop (each resolves to an error), close the client."""
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.aclose()

    def close(self) -> None:
        """Stop the streaming loop and close its client (idempotent; a prompt still in flight
        resolves to an error). A later submit starts a new streaming life."""
        with self._stream_lock:
            stream, self._stream = self._stream, None
        if stream is None:
            return
        loop, thread, client, _, _ = stream
        asyncio.run_coroutine_threadsafe(self._stop(client), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    # hooks of the subclass (request building and answer parsing)

    def _headers(self) -> dict:
        raise NotImplementedError

    def _body(self, prompt: JudgePrompt, temperature: float, seed: int, mode: str) -> dict:
        raise NotImplementedError

    def _generation(self, data: Any) -> Generation:
        raise NotImplementedError

    def _switched(self, mode: str, msg: str) -> bool:
        raise NotImplementedError
