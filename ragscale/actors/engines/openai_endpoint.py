"""An OpenAI-compatible endpoint's URL and key: its host, whether it always wants a key, whether
it is Azure's (the key's header), and the checks of a judge config's ``base_url`` and ``api_key_env``.

Shared by the chat-completions engine (``openai_compat``) and the embeddings client
(``ragscale.actors.embeddings_http``), which talk to the same kinds of endpoints. Decisions only:
nothing here sends a request or reads a key.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from ragscale.errors import UserError
from ragscale.secrets import looks_like_env_name, looks_like_secret

OPENAI_URL = "https://api.openai.com/v1"
_OPENAI_MODEL = re.compile(r"^(gpt-|chatgpt-|o\d|ft:gpt-|ft:o\d)", re.I)


def host(url: str) -> str:
    """The URL's host name, lower case ("" when it has none)."""
    return (urlparse(url).hostname or "").lower()


def needs_key(url: str) -> bool:
    """Endpoints that always want a key: OpenAI's API and Azure's."""
    h = host(url)
    return h == "api.openai.com" or h.endswith(".azure.com")


def is_azure(url: str) -> bool:
    """Whether the URL is Azure OpenAI's (the key goes in an ``api-key`` header)."""
    return host(url).endswith(".azure.com")


def chat_base_url(base_url: Any, model: str) -> str:
    """The judge endpoint's base URL (OpenAI's for an OpenAI model without one), without a trailing
    ``/chat/completions``."""
    if not base_url:
        if not _OPENAI_MODEL.match(model):
            raise UserError(
                f"judge engine 'openai': set judge.options.base_url to the server's OpenAI-compatible URL "
                f"(e.g. http://127.0.0.1:8000/v1) for model {model!r}"
            )
        base_url = OPENAI_URL
    base_url = str(base_url).strip().rstrip("/")
    if base_url.endswith("/chat/completions"):
        base_url = base_url[: -len("/chat/completions")]
    if urlparse(base_url).scheme not in ("http", "https") or not host(base_url):
        raise UserError(f"judge.options.base_url must be an http(s) URL, got {base_url!r}")
    return base_url


def key_env(env: Any) -> str:
    """``judge.options.api_key_env`` checked to be a variable's name (a key is refused unshown);
    whether it is set is ``ready``'s question (a dry run sends nothing and needs no key)."""
    if not looks_like_env_name(env):
        shown = f", got {env!r}" if isinstance(env, str) and len(env) <= 40 and not looks_like_secret(env) \
            and not re.search(r"[A-Za-z0-9]{16,}", env) else " (the value given is not shown: it may be a key)"
        raise UserError(
            "judge.options.api_key_env must be the NAME of an environment variable holding the key "
            f"(e.g. OPENAI_API_KEY), never the key itself{shown}"
        )
    return env
